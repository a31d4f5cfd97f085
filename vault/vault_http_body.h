/*
 * vault_http_body: an http credential source's answer (policy_cred_http.h),
 * read strictly. Pure: bytes and a bound in, the value out; no
 * allocation, no I/O. The value is decoded into the caller's buffer
 * (secret: the caller keeps it in the arena or wipes it); no error
 * message ever holds a byte of the body.
 *
 * format json (OpenSandbox's shape): one JSON object (RFC 8259; a BOM,
 * a duplicate "value" or "ttl", trailing bytes other than whitespace,
 * nesting deeper than VAULT_HTTP_DEPTH_MAX, a control byte in a string,
 * an invalid escape or lone surrogate are refused) with
 * - value: a string, required;
 * - ttl: seconds before the value should be fetched again, an integer
 *   (a JSON number or a string of digits), optional;
 * - any other member (OpenSandbox's url and headers rotation among them:
 *   not followed, see docs/policy.md) is skipped.
 * format raw: the whole body, one trailing "\n" or "\r\n" dropped.
 * Either way the value is 1..POLICY_SECRET_MAX bytes without CR, LF or
 * NUL (it becomes a header value, like any credential's).
 */
#ifndef EGRESSD_VAULT_HTTP_BODY_H
#define EGRESSD_VAULT_HTTP_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy_cred_http.h"
#include "util/err.h"

#define VAULT_HTTP_BODY_MAX (64u << 10) /* bytes of an answer's body */
#define VAULT_HTTP_DEPTH_MAX 16

struct vault_http_value {
	const char *val; /* in the caller's buffer, not NUL-terminated */
	size_t len;
	uint32_t ttl_s; /* 0: the answer named none */
};

/* Reads body[0..n) (at most VAULT_HTTP_BODY_MAX) in format f into out,
 * the value decoded into buf (cap >= n bytes). 0, or -1 and e. */
int vault_http_body_parse(const uint8_t *body, size_t n,
    enum policy_http_format f, char *buf, size_t cap,
    struct vault_http_value *out, struct err *e);

#endif
