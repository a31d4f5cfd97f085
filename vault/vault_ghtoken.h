/*
 * vault_ghtoken: a GitHub installation-token endpoint's answer
 * (POST /app/installations/{id}/access_tokens, 201), read strictly.
 * Pure: bytes and a bound in, the fields out; no allocation, no I/O.
 * The token is decoded into the caller's buffer (secret: the caller
 * keeps it in the arena or wipes it); no error message ever holds a byte
 * of the body.
 *
 * Accepted: one JSON object (vault_json.h's grammar; duplicate members
 * of the two below, trailing bytes other than whitespace refused) with
 * - token: a string of 1..VAULT_TOKEN_MAX visible ASCII bytes (%x21-7E:
 *   it becomes a header value), required;
 * - expires_at: an RFC 3339 / ISO 8601 UTC time, "YYYY-MM-DDTHH:MM:SS"
 *   with optional fraction and "Z" or a "+HH:MM"/"-HH:MM" offset, years
 *   1970..9999, required;
 * - any other member (permissions, repository_selection, repositories,
 *   ...) checked and skipped.
 */
#ifndef EGRESSD_VAULT_GHTOKEN_H
#define EGRESSD_VAULT_GHTOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* A narrowed token's answer lists its repositories in full: allow for
 * GitHub's 500 (a few KiB of JSON each). */
#define VAULT_GHTOKEN_BODY_MAX (4u << 20)
#define VAULT_GHTOKEN_DEPTH_MAX 32 /* nesting of skipped members */

struct vault_ghtoken {
	const char *token; /* in the caller's buffer, not NUL-terminated */
	size_t token_len;
	int64_t expires_at; /* seconds since the epoch, UTC */
};

/*
 * Reads body[0..n) (at most VAULT_GHTOKEN_BODY_MAX) into t, the token
 * decoded into buf (cap >= n bytes). 0, or -1 and e (a fixed text
 * starting "installation token response: ").
 */
int vault_ghtoken_parse(const uint8_t *body, size_t n, char *buf, size_t cap,
    struct vault_ghtoken *t, struct err *e);
/* s[0..n) as vault_ghtoken_parse reads expires_at: 0 and *out, or -1. */
int vault_ghtoken_time(const char *s, size_t n, int64_t *out);

#endif
