/*
 * config_uproxy: the upstream proxy's settings (config_uproxy.h).
 */
#include "egressd/daemon/config_uproxy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/http_connect.h"
#include "util/fileread.h"
#include "util/secmem.h"

int
config_uproxy_set_url(
    struct config_uproxy *u, const char *v, const char *what, struct err *e)
{
	const char *h;
	size_t n;

	if (*v == '\0') {
		u->on = false;
		return 0;
	}
	if (strncmp(v, "https://", 8) == 0) {
		err_set(e,
		    "%s: https:// (TLS to the proxy) is not supported: use "
		    "http://",
		    what);
		return -1;
	}
	if (strncmp(v, "http://", 7) != 0) {
		err_set(e, "%s: must be an http://IP[:port] URL", what);
		return -1;
	}
	h = v + 7;
	n = strlen(h);
	if (n > 0 && h[n - 1] == '/')
		n--;
	if (memchr(h, '@', n) != NULL) {
		err_set(e,
		    "%s: no credentials in the URL (it is logged): put the "
		    "Proxy-Authorization value in "
		    "OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH or "
		    "--upstream-proxy-auth-file",
		    what);
		return -1;
	}
	if (n == 0 || strcspn(h, "/?#") < n) {
		err_set(e, "%s: only http://IP[:port], no path", what);
		return -1;
	}
	{
		char hp[ADDR_TEXT_MAX + 8];

		if (n >= sizeof(hp)) {
			err_set(e, "%s: not an IP[:port]", what);
			return -1;
		}
		memcpy(hp, h, n);
		hp[n] = '\0';
		if (addr_parse_hostport(hp, 80, 0, &u->addr, &u->port, e) ==
		    -1) {
			err_prefix(e,
			    "%s: the proxy must be an IP literal (egressd "
			    "does not resolve its own way out)",
			    what);
			return -1;
		}
	}
	if (u->port == 0) {
		err_set(e, "%s: port 0", what);
		return -1;
	}
	u->on = true;
	return 0;
}

static void
config_uproxy_wipe_auth(struct config_uproxy *u)
{
	secmem_free(u->arena, u->auth); /* wipes */
	u->auth = NULL;
	u->auth_len = 0;
}

int
config_uproxy_set_auth(
    struct config_uproxy *u, const char *v, const char *what, struct err *e)
{
	size_t n = strlen(v);

	config_uproxy_wipe_auth(u);
	if (n == 0)
		return 0;
	if (http_connect_auth_check(v, n, e) == -1) {
		err_prefix(e, "%s", what);
		return -1;
	}
	/* one page, locked where the limit allows, never in a core */
	if (u->arena == NULL &&
	    (u->arena = secmem_arena_new(HTTP_CONNECT_AUTH_MAX + 64, e)) ==
	        NULL) {
		err_prefix(e, "%s", what);
		return -1;
	}
	if ((u->auth = secmem_strndup(u->arena, v, n)) == NULL) {
		err_set(e, "%s: out of memory", what);
		return -1;
	}
	u->auth_len = n;
	return 0;
}

int
config_uproxy_set_auth_file(
    struct config_uproxy *u, const char *v, const char *what, struct err *e)
{
	free(u->auth_file);
	u->auth_file = NULL;
	if (*v == '\0')
		return 0;
	if ((u->auth_file = strdup(v)) == NULL) {
		err_set(e, "%s: out of memory", what);
		return -1;
	}
	return 0;
}

int
config_uproxy_set_connect(
    struct config_uproxy *u, const char *v, const char *what, struct err *e)
{
	if (strcmp(v, "name") == 0)
		u->by_address = false;
	else if (strcmp(v, "address") == 0)
		u->by_address = true;
	else {
		err_set(e, "%s: \"%.64s\" is not name or address", what, v);
		return -1;
	}
	return 0;
}

/* One line, the owner checks of the API token's file (whoever can
 * rewrite it steers egressd's credential to the proxy). */
static int
config_uproxy_read_auth(struct config_uproxy *u, struct err *e)
{
	char buf[HTTP_CONNECT_AUTH_MAX + 3];
	ssize_t n;
	int rc;

	n = fileread_buf(
	    u->auth_file, buf, sizeof(buf), FILEREAD_OWNED | FILEREAD_DIRS, e);
	if (n == -1) {
		if (errno == EFBIG)
			err_set(
			    e, "longer than %d bytes", HTTP_CONNECT_AUTH_MAX);
		err_prefix(
		    e, "%s: upstream proxy credential file", u->auth_file);
		return -1;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (n == 0 || memchr(buf, '\n', (size_t)n) != NULL) {
		secmem_wipe(buf, sizeof(buf));
		err_set(e, "%s: must hold one non-empty line", u->auth_file);
		return -1;
	}
	rc = config_uproxy_set_auth(u, buf, u->auth_file, e);
	secmem_wipe(buf, sizeof(buf));
	return rc;
}

int
config_uproxy_finish(struct config_uproxy *u, bool proxy_on, struct err *e)
{
	if (u->auth_file != NULL && config_uproxy_read_auth(u, e) == -1)
		return -1;
	if (!u->on && u->auth != NULL) {
		err_set(e,
		    "an upstream proxy credential without "
		    "OPENSANDBOX_EGRESS_UPSTREAM_PROXY");
		return -1;
	}
	if (u->on && !proxy_on) {
		err_set(e,
		    "OPENSANDBOX_EGRESS_UPSTREAM_PROXY needs the transparent "
		    "proxy (OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT, "
		    "--proxy): "
		    "without it the sandbox's connections would go direct");
		return -1;
	}
	return 0;
}

void
config_uproxy_clear(struct config_uproxy *u)
{
	config_uproxy_wipe_auth(u);
	secmem_arena_free(u->arena);
	u->arena = NULL;
	free(u->auth_file);
	u->auth_file = NULL;
}
