/*
 * Fuzzes vault_http_body_parse(), the reader of an http credential
 * source's answer (an operator-named store, but one that may be
 * compromised or impersonated up to its TLS name). Input: one byte
 * choosing the format (json or raw), then the body. Invariants:
 *  - the decoded value stays inside the caller's buffer of exactly the
 *    body's length (ASan: no byte past it is written);
 *  - an accepted value is 1..POLICY_SECRET_MAX bytes without CR, LF or
 *    NUL;
 *  - a refused one has a fixed message, prefixed "source answer: ";
 *  - parsing is deterministic.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_check.h"
#include "vault/vault_http_body.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vault_http_value v, v2;
	enum policy_http_format f;
	struct err e, e2;
	char *buf, *buf2;
	int rc;

	if (size < 1 || size - 1 > VAULT_HTTP_BODY_MAX)
		return 0;
	f = data[0] & 1 ? POLICY_HTTP_RAW : POLICY_HTTP_JSON;
	data++;
	size--;
	buf = malloc(size ? size : 1);
	buf2 = malloc(size ? size : 1);
	check(buf != NULL && buf2 != NULL);
	rc = vault_http_body_parse(data, size, f, buf, size, &v, &e);
	check(vault_http_body_parse(data, size, f, buf2, size, &v2, &e2) == rc);
	if (rc == 0) {
		check(v.val >= buf && v.val + v.len <= buf + size);
		check(v.len >= 1 && v.len <= POLICY_SECRET_MAX);
		check(memchr(v.val, '\r', v.len) == NULL &&
		    memchr(v.val, '\n', v.len) == NULL &&
		    memchr(v.val, '\0', v.len) == NULL);
		check(v.len == v2.len && v.ttl_s == v2.ttl_s &&
		    memcmp(v.val - buf + buf2, v2.val, v.len) == 0);
	} else {
		check(rc == -1);
		check(strncmp(e.msg, "source answer: ", 15) == 0);
		check(strcmp(e.msg, e2.msg) == 0);
	}
	free(buf);
	free(buf2);
	return 0;
}
