/*
 * config_api_uid: --api-loopback-uid / EGRESSD_API_LOOPBACK_UID, the one
 * uid whose loopback sockets may reach the API port (execd's relay,
 * docs/security.md). Apart from config.c, the settings table, so that the
 * exception's rules read in one place.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "egressd/daemon/config.h"
#include "util/err.h"

/*
 * --api-loopback-uid: decimal digits only (strtoull's octal and hex would
 * turn "0100" into another user), 0..2^32-2 ((uid_t)-1 is no user); ""
 * turns the exception off again.
 */
int
config_api_uid_set(
    struct config *c, const char *v, const char *what, struct err *e)
{
	unsigned long long n = 0;
	size_t i, len = strlen(v);

	if (len == 0) {
		c->api_loopback_uid_set = false;
		return 0;
	}
	for (i = 0; i < len; i++)
		if (v[i] < '0' || v[i] > '9') {
			err_set(e,
			    "%s: \"%.64s\" is not a numeric uid (execd's, as "
			    "the pod's namespace sees it)",
			    what, v);
			return -1;
		}
	/* saturates past the range: any length, no overflow */
	for (i = 0; i < len && n <= UINT32_MAX; i++)
		n = n * 10 + (unsigned long long)(v[i] - '0');
	if (n > UINT32_MAX - 1ull) {
		err_set(e, "%s: %.64s is out of range 0..%u", what, v,
		    UINT32_MAX - 1u);
		return -1;
	}
	c->api_loopback_uid = (uint32_t)n;
	c->api_loopback_uid_set = true;
	return 0;
}

/*
 * The API-port exception for one uid (docs/security.md) opens nothing
 * without nft, and the token is all that still stands between that uid
 * and the API: refused where either is missing.
 */
int
config_api_uid_check(const struct config *c, struct err *e)
{
	if (c->mode == CONFIG_MODE_DNS) {
		err_set(e,
		    "--api-loopback-uid needs mode dns+nft (in mode dns "
		    "nothing keeps any uid off the API port)");
		return -1;
	}
	if (c->api.listen_tcp == NULL || c->api.listen_tcp[0] == '\0') {
		err_set(
		    e, "--api-loopback-uid needs the TCP API (--http-addr)");
		return -1;
	}
	if (c->api.token == NULL || c->api.insecure_no_token) {
		err_set(e,
		    "--api-loopback-uid needs an API token, and no "
		    "--api-insecure-no-token: the token is what still guards "
		    "the API from that uid");
		return -1;
	}
	return 0;
}
