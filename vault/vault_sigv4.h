/*
 * vault_sigv4: AWS Signature Version 4 (issue 38), as a pure function:
 * the request's canonical parts and the key in, the Authorization value
 * out. No clock, no I/O, no allocation but the canonical forms' buffers.
 *
 * The secret key is read only into the first HMAC's key ("AWS4" + key,
 * on the stack, wiped); the derived signing key lives on the stack of
 * vault_sigv4_sign and is wiped before it returns. Nothing here formats
 * a key or a token into an error message.
 *
 * Checked against AWS's published SigV4 test suite (get-vanilla,
 * get-vanilla-query-order-key-case, get-utf8, post-x-www-form-urlencoded,
 * ...) and S3's documented examples: tests/unit/vault/test_vault_sigv4.c.
 */
#ifndef EGRESSD_VAULT_SIGV4_H
#define EGRESSD_VAULT_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define VAULT_SIGV4_HEADERS_MAX 64 /* headers one signature covers */
#define VAULT_SIGV4_PARAMS_MAX 512 /* query parameters */
#define VAULT_SIGV4_QUERY_MAX 16384 /* bytes of a raw query */
#define VAULT_SIGV4_SECRET_MAX 128 /* bytes of a secret access key */
#define VAULT_SIGV4_HASH_LEN 64 /* hex SHA-256 */
#define VAULT_SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"
/* S3's aws-chunked body with unsigned chunks and a trailing checksum:
 * the one streaming form whose chunks carry no signature of their own. */
#define VAULT_SIGV4_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
/* The Authorization value at most: fixed text, the key id, the scope,
 * the signed header names, the signature. */
#define VAULT_SIGV4_AUTH_MAX 4096

struct vault_sigv4_hdr {
	const char *name; /* any case; signed lowercased */
	size_t name_len;
	const char *value; /* signed trimmed, inner runs of blanks as one */
	size_t value_len;
};

struct vault_sigv4_in {
	const char *method;
	size_t method_len;
	/* The canonical URI and query (vault_sigv4_uri, vault_sigv4_query). */
	const char *uri;
	size_t uri_len;
	const char *query; /* "" or NULL: none */
	size_t query_len;
	/* Every header signed, host and x-amz-date included: several of one
	 * name are joined with ',' in the order given. */
	const struct vault_sigv4_hdr *h;
	size_t nh;
	/* The x-amz-content-sha256 value: VAULT_SIGV4_HASH_LEN lowercase hex
	 * VAULT_SIGV4_UNSIGNED or VAULT_SIGV4_UNSIGNED_TRAILER. */
	const char *payload_hash;
	const char *amz_date; /* "YYYYMMDDTHHMMSSZ" (UTC) */
	const char *region, *service;
	const uint8_t *key_id; /* access key id */
	size_t key_id_len;
	const uint8_t *secret; /* secret access key */
	size_t secret_len;
};

/*
 * The canonical URI of path[0..n) (the path as it is forwarded, which
 * starts with '/'): every byte but the unreserved ones (ALPHA DIGIT - . _
 * ~) and '/' percent-encoded with upper-case hex. For every service but
 * S3 the path is encoded as it stands, so its escapes are encoded again
 * ("%3A" signs as "%253A": AWS encodes each path segment twice); for S3
 * (s3) escapes are decoded first and the bytes encoded once ("%2F" and
 * "%2f" stay as they are: a decoded '/' would be another path). Into
 * *out (malloc'd, NUL-terminated, *outlen bytes). 0, or -1 and e.
 */
int vault_sigv4_uri(const char *path, size_t n, bool s3, char **out,
    size_t *outlen, struct err *e);

/*
 * The canonical query of q[0..n) (without the '?'): parameters split at
 * '&' (empty ones dropped), each name up to the first '=' and the value
 * after it ("" without '='), both percent-decoded ('+' is a plus, a '%'
 * without two hex digits a '%') and encoded again as above but '/'
 * encoded too, sorted by name then value, joined "name=value" by '&'.
 * At most VAULT_SIGV4_QUERY_MAX bytes and VAULT_SIGV4_PARAMS_MAX
 * parameters. Into *out (malloc'd, NUL-terminated, *outlen bytes; ""
 * for none). 0, or -1 and e.
 */
int vault_sigv4_query(
    const char *q, size_t n, char **out, size_t *outlen, struct err *e);

/*
 * Signs: "AWS4-HMAC-SHA256 Credential=ID/DATE/REGION/SERVICE/aws4_request,
 * SignedHeaders=a;b;c, Signature=HEX" into out (cap bytes; the caller
 * keeps it where secrets are kept: it names the key id), NUL-terminated,
 * *len its length. -1 and e when an input is out of its form or bounds
 * (a header name that is no token, a value with CR, LF or NUL, no host
 * header, a date or hash of the wrong form, a secret over
 * VAULT_SIGV4_SECRET_MAX) or out is too small.
 */
int vault_sigv4_sign(const struct vault_sigv4_in *in, char *out, size_t cap,
    size_t *len, struct err *e);

/* The hex SHA-256 of p[0..n) into hex (VAULT_SIGV4_HASH_LEN + 1 bytes). */
void vault_sigv4_hash(const void *p, size_t n, char *hex);

/* "YYYYMMDDTHHMMSSZ" of t (seconds since the epoch, UTC) into out (17
 * bytes). */
void vault_sigv4_date(int64_t t, char out[17]);

/*
 * Is the query q[0..n) presigned, i.e. does a parameter (name percent-
 * decoded, any case) say X-Amz-Signature, X-Amz-Credential,
 * X-Amz-Algorithm or X-Amz-Security-Token? Such a URL carries the
 * sandbox's own signature, which egressd neither forwards nor replaces.
 */
bool vault_sigv4_presigned(const char *q, size_t n);

#endif
