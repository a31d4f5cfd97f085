/*
 * policy_cred_http: the settings of a credential whose source type is
 * http (issue 38 item 4; the operator's policy file only, like file):
 * egressd fetches the value from an operator URL (HTTPS, the certificate
 * verified, no redirect), keeps it for its TTL and refreshes it in the
 * background; while the store is down the last good value stays in use
 * for maxStale more, then requests that need it are answered 502.
 * OpenSandbox's names (its PR #1188): url, method, headers; the response
 * is OpenSandbox's JSON {"value": ..., "ttl": seconds} or, with format
 * raw, the whole body.
 *
 * Read-only and borrowed from the snapshot like every credential. A
 * header's literal value may be secret (the store's own token): it lives
 * in an arena of the settings' own (mlock where allowed, MADV_DONTDUMP,
 * wiped when freed) and no getter returns it; the vault renders the
 * request (vault_http.h). A header may name another credential instead
 * (inline or file), whose value the vault holds.
 */
#ifndef EGRESSD_POLICY_CRED_HTTP_H
#define EGRESSD_POLICY_CRED_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

#define POLICY_HTTP_HEADERS_MAX 16
#define POLICY_HTTP_TTL_DEFAULT 300u /* s, when neither policy nor store say */
#define POLICY_HTTP_TTL_MIN 1u /* s */
#define POLICY_HTTP_TTL_MAX 86400u /* s */
#define POLICY_HTTP_MAX_STALE_DEFAULT 300u /* s */
#define POLICY_HTTP_MAX_STALE_MAX 86400u /* s */

enum policy_http_method {
	POLICY_HTTP_GET,
	POLICY_HTTP_POST, /* with an empty body */
};

enum policy_http_format {
	POLICY_HTTP_JSON, /* {"value": "...", "ttl": n}: OpenSandbox's */
	POLICY_HTTP_RAW, /* the whole body (one trailing newline dropped) */
};

struct policy_http_header {
	char *name; /* as written (an RFC 9110 token, not reserved) */
	char *credential; /* a credential's name, or NULL: value below */
	uint8_t *value; /* literal: in the settings' arena (secret) */
	size_t vlen;
};

struct policy_cred_http {
	char *url; /* as written: https://host[:port]/path[?query] */
	char *host; /* lowercase DNS name */
	uint16_t port;
	char *target; /* path and query, "/..." */
	enum policy_http_method method;
	enum policy_http_format format;
	struct policy_http_header *headers;
	size_t nheaders;
	uint32_t ttl_s; /* 0: not written (the store's ttl, else default) */
	uint32_t max_stale_s;
	bool have_max_stale;
	/* Private, loopback, link-local or metadata addresses may be the
	 * store's (they are refused otherwise, whatever DNS answers). */
	bool allow_private;
	struct secmem_arena *arena; /* literal header values */
};

const struct policy_cred_http *policy_credential_http(
    const struct policy_credential *c);
const char *policy_http_method_name(enum policy_http_method m);
const char *policy_http_format_name(enum policy_http_format f);
/* The maxStale in force (the default when not written). */
uint32_t policy_cred_http_max_stale(const struct policy_cred_http *h);
/* Do a and b fetch the same thing the same way (literal header values
 * compared too)? */
bool policy_cred_http_same(
    const struct policy_cred_http *a, const struct policy_cred_http *b);

#endif
