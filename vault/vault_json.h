/*
 * vault_json: the strict JSON reader (RFC 8259) under the parsers of the
 * answers egressd gets from the endpoints it mints values at: an oauth2
 * token endpoint (vault_token.c), a GitHub installation-token endpoint
 * (vault_ghtoken.c). Pure: no allocation, no I/O. Strings are decoded
 * into the caller's buffer (secret: the caller keeps it in the arena or
 * wipes it), never into a heap string freed unwiped; a decoded string is
 * never longer than its encoding, so a buffer as long as the input holds
 * every one. Refused: a control byte in a string, an invalid escape or a
 * lone surrogate, a malformed number or literal, nesting deeper than the
 * caller's bound.
 */
#ifndef EGRESSD_VAULT_JSON_H
#define EGRESSD_VAULT_JSON_H

#include <stddef.h>
#include <stdint.h>

struct vault_json {
	const uint8_t *p, *end; /* what is left to read */
	char *buf; /* decoded strings go here, at off */
	size_t off, cap;
};

/* Skips JSON whitespace. */
void vault_json_ws(struct vault_json *r);
/*
 * The string at r->p (its opening quote) decoded into r->buf at r->off
 * (*s, *len; r->off moves past it: the caller rewinds it to drop it).
 * 0, or -1 when malformed or the buffer is full.
 */
int vault_json_str(struct vault_json *r, const char **s, size_t *len);
/* A number; its value in *v when a non-negative integer up to 2^31,
 * else UINT64_MAX. 0 or -1. */
int vault_json_num(struct vault_json *r, uint64_t *v);
/*
 * A member of an object: r stands at its value, which fn reads (0) or
 * refuses (-1). key is the member's name copied out of r->buf (its first
 * VAULT_JSON_KEY_MAX bytes, NUL-terminated; klen the name's whole length:
 * a longer name is none the caller knows).
 */
#define VAULT_JSON_KEY_MAX 32
typedef int (*vault_json_member_fn)(
    void *arg, struct vault_json *r, const char *key, size_t klen);
/* An object at r->p (whitespace before it skipped): each member's name
 * decoded, copied out and wiped from r->buf (the buffer keeps values
 * only), then fn on its value. 0 after the closing brace; -1 when
 * malformed or fn refused. */
int vault_json_object(struct vault_json *r, vault_json_member_fn fn, void *arg);
/* Any value, checked and skipped (strings decoded, wiped and dropped);
 * nesting beyond max_depth refused. 0 or -1. */
int vault_json_skip(struct vault_json *r, unsigned depth, unsigned max_depth);

#endif
