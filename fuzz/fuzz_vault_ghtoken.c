/*
 * Fuzzes vault_ghtoken_parse(), the reader of a GitHub installation-token
 * endpoint's answer (an operator-named API, but one that may be
 * compromised or impersonated up to its TLS name). Input: the body.
 * Invariants:
 *  - the decoded token stays inside the caller's buffer of exactly the
 *    body's length (ASan: no byte past it is written);
 *  - an accepted answer has a token of 1..VAULT_TOKEN_MAX visible ASCII
 *    bytes and an expiry of 1970..9999;
 *  - a refused one has no token and a fixed message, prefixed
 *    "installation token response: ";
 *  - parsing is deterministic.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_check.h"
#include "vault/vault_ghtoken.h"
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
	struct vault_ghtoken t, t2;
	struct err e, e2;
	char *buf, *buf2;
	int rc;

	if (size > VAULT_GHTOKEN_BODY_MAX)
		return 0;
	buf = malloc(size ? size : 1);
	buf2 = malloc(size ? size : 1);
	check(buf != NULL && buf2 != NULL);
	rc = vault_ghtoken_parse(data, size, buf, size, &t, &e);
	check(vault_ghtoken_parse(data, size, buf2, size, &t2, &e2) == rc);
	if (rc == 0) {
		check(t.token != NULL && visible(t.token, t.token_len));
		check(t.token >= buf && t.token + t.token_len <= buf + size);
		/* 1970-01-01 - 14 h .. 9999-12-31 + 14 h */
		check(t.expires_at >= -86400 && t.expires_at < 253402387200);
		check(t.expires_at == t2.expires_at);
		check(t.token_len == t2.token_len &&
		    memcmp(t.token - buf + buf2, t2.token, t.token_len) == 0);
	} else {
		check(rc == -1 && t.token == NULL);
		check(strncmp(e.msg, "installation token response: ", 29) == 0);
		check(strcmp(e.msg, e2.msg) == 0);
	}
	free(buf);
	free(buf2);
	return 0;
}
