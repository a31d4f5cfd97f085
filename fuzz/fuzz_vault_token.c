/*
 * Fuzzes vault_token_parse(), the reader of a token endpoint's answer
 * (an operator-named server, but one that may be compromised or
 * impersonated up to its TLS name). Input: the body. Invariants:
 *  - the decoded tokens stay inside the caller's buffer of exactly the
 *    body's length (ASan: no byte past it is written);
 *  - an accepted answer has an access token of 1..VAULT_TOKEN_MAX
 *    visible ASCII bytes, a refresh token the same or none, and an
 *    expires_in of 1..VAULT_TOKEN_TTL_MAX;
 *  - a refused one has neither token and a fixed message, prefixed
 *    "token response: " and holding no byte of the body beyond it;
 *  - parsing is deterministic.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_check.h"
#include "vault/vault_token.h"

static bool
visible(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > VAULT_TOKEN_MAX)
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vault_token t, t2;
	struct err e, e2;
	char *buf, *buf2;
	int rc;

	if (size > VAULT_TOKEN_BODY_MAX)
		return 0;
	buf = malloc(size ? size : 1);
	buf2 = malloc(size ? size : 1);
	check(buf != NULL && buf2 != NULL);
	rc = vault_token_parse(data, size, buf, size, &t, &e);
	check(vault_token_parse(data, size, buf2, size, &t2, &e2) == rc);
	if (rc == 0) {
		check(t.access != NULL && visible(t.access, t.access_len));
		check(t.access >= buf && t.access + t.access_len <= buf + size);
		check(t.refresh == NULL || visible(t.refresh, t.refresh_len));
		check(t.refresh == NULL ||
		    (t.refresh >= buf &&
		        t.refresh + t.refresh_len <= buf + size));
		check(t.expires_in >= 1 && t.expires_in <= VAULT_TOKEN_TTL_MAX);
		check(t.access_len == t2.access_len &&
		    memcmp(t.access - buf + buf2, t2.access, t.access_len) ==
		        0);
	} else {
		check(rc == -1 && t.access == NULL && t.refresh == NULL);
		check(strncmp(e.msg, "token response: ", 16) == 0);
		check(strcmp(e.msg, e2.msg) == 0);
	}
	free(buf);
	free(buf2);
	return 0;
}
