/*
 * vault_token: the token endpoint's answer (RFC 6749 §5.1, §5.2), read
 * strictly. Pure: bytes and a bound in, the fields out; no allocation,
 * no I/O. The access and refresh tokens are decoded into the caller's
 * buffer (secret: the caller keeps it in the arena or wipes it); no
 * error message ever holds a byte of the body.
 *
 * Accepted: one JSON object (RFC 8259; a UTF-8 BOM, duplicate keys,
 * trailing bytes other than whitespace, nesting deeper than
 * VAULT_TOKEN_DEPTH_MAX, a control byte in a string, an invalid escape
 * or lone surrogate are refused) with
 * - access_token: a string of 1..VAULT_TOKEN_MAX visible ASCII bytes
 *   (%x21-7E: it becomes a header value), required;
 * - token_type: "Bearer" in any case, required (RFC 6749 §7.1; a MAC or
 *   DPoP token cannot be sent as a bearer one);
 * - expires_in: an integer number of seconds (a JSON number, or a string
 *   of digits as some servers send), 1..2^31; absent: the token lives
 *   VAULT_TOKEN_TTL_DEFAULT; longer than VAULT_TOKEN_TTL_MAX: clamped;
 * - refresh_token: like access_token, optional (a rotated one replaces
 *   the one egressd holds);
 * - any other member (scope, id_token, ext_expires_in, ...) is skipped.
 * An error response (§5.2) is told apart: its "error" code, when it is
 * one of RFC 6749's, is named in t->error.
 */
#ifndef EGRESSD_VAULT_TOKEN_H
#define EGRESSD_VAULT_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "util/err.h"

#define VAULT_TOKEN_MAX POLICY_SECRET_MAX /* bytes of one token */
#define VAULT_TOKEN_BODY_MAX (64u << 10) /* a token response's body */
#define VAULT_TOKEN_DEPTH_MAX 16 /* nesting of skipped members */
#define VAULT_TOKEN_TTL_DEFAULT 300u /* seconds, without expires_in */
#define VAULT_TOKEN_TTL_MAX 86400u /* seconds; longer lifetimes clamped */

struct vault_token {
	const char *access; /* in the caller's buffer, not NUL-terminated */
	size_t access_len;
	const char *refresh; /* NULL: none sent */
	size_t refresh_len;
	uint32_t expires_in; /* seconds, 1..VAULT_TOKEN_TTL_MAX */
	/* An error response's code ("invalid_grant", ...: RFC 6749 §5.2's
	 * six), "other" for any other code; NULL: no "error" member. Set
	 * even when parsing fails for want of an access token. */
	const char *error;
};

/*
 * Reads body[0..n) (at most VAULT_TOKEN_BODY_MAX) into t, the tokens
 * decoded into buf (cap >= n bytes). 0, or -1 and e (a fixed text).
 */
int vault_token_parse(const uint8_t *body, size_t n, char *buf, size_t cap,
    struct vault_token *t, struct err *e);

/* A token's bytes: 1..VAULT_TOKEN_MAX of %x21-7E (what any token this
 * vault is handed must be: it goes into a header as it is). */
bool vault_token_ok(const char *s, size_t n);

#endif
