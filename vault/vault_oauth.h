/*
 * vault_oauth: what egressd sends an oauth2 binding's token endpoint
 * (RFC 6749 §4.4.2 client credentials, §6 refresh token), rendered by
 * the vault since it holds the client secret and the refresh token, and
 * when a minted access token is due for renewal. The proxy sends the
 * bytes (egressd/proxy/proxy_fetch.c) and hands the answer to
 * vault_oauth_answer and vault_mint.
 *
 * A githubApp binding (issue 38 item 3) mints the same way: its
 * installation-token request is vault_github.c's, its answer is read by
 * vault_ghtoken.c, and its token lives in the revision like an access
 * token (with git's Basic form of it beside it); vault_oauth_request and
 * vault_oauth_answer take either kind.
 */
#ifndef EGRESSD_VAULT_OAUTH_H
#define EGRESSD_VAULT_OAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy_oauth2.h"
#include "util/err.h"
#include "vault/vault.h"

/* The most a token request may take (head and form body). */
#define VAULT_OAUTH_REQ_MAX (128u << 10)
/* A token is renewed this long before it expires: a tenth of its
 * lifetime, at most VAULT_OAUTH_MARGIN_MAX_MS (a request injected just
 * before the deadline still reaches its origin with a live token). */
#define VAULT_OAUTH_MARGIN_MAX_MS 60000u

enum vault_mint_kind {
	VAULT_MINT_OAUTH2, /* an oauth2 token endpoint (RFC 6749) */
	VAULT_MINT_GITHUB, /* a GitHub App installation token */
};

struct vault_oauth_req {
	const char *binding; /* borrowed from the policy */
	const struct policy_oauth2 *oa; /* oauth2's settings; NULL: github */
	enum vault_mint_kind kind;
	const char *grant; /* for logs: the grant's name, or "githubApp" */
	const char *host; /* where to send it (borrowed from the policy) */
	uint16_t port;
	size_t body_max; /* the most the answer's body may take */
	/* The binding held a token (now due): a refresh, not a first mint
	 * (for the audit line and the counters). */
	bool renew;
	/* The whole HTTP/1.1 request, "POST target HTTP/1.1" to the end of
	 * its form body, Connection: close. Secret (client secret, refresh
	 * token): malloc'd, wiped by vault_oauth_request_clear. */
	uint8_t *bytes;
	size_t len;
};

/*
 * The token request of the oauth2 binding named binding: the grant's
 * parameters form-encoded (grant_type, refresh_token with the rotated
 * one when the server rotated it, scope space-separated, audience), the
 * client authenticated by HTTP Basic (each part form-encoded first,
 * RFC 6749 §2.3.1) or by client_id and client_secret in the body; a
 * public client (no clientSecret) sends client_id in the body. 0, or -1
 * and e (no such oauth2 binding, out of memory).
 */
int vault_oauth_request(const struct vault *v, const char *binding,
    struct vault_oauth_req *out, struct err *e);
/*
 * The endpoint's answer (status, body[0..n)) to a request of kind, as a
 * token (decoded into buf, cap >= n; an installation token's expires_at
 * made a lifetime from now_s, wall seconds): 0, or -1 and e (a fixed
 * text). A status other than 2xx is -1 with e saying which (and t->error
 * the OAuth2 error code when the body names one).
 */
struct vault_token;
int vault_oauth_answer(enum vault_mint_kind kind, int status,
    const uint8_t *body, size_t n, char *buf, size_t cap, int64_t now_s,
    struct vault_token *t, struct err *e);
/* Wipes and frees out's bytes; zeroes it. */
void vault_oauth_request_clear(struct vault_oauth_req *out);
/* When a token minted at t0_ms living lifetime_s seconds is due. */
uint64_t vault_oauth_due(uint64_t t0_ms, uint32_t lifetime_s);
/* Whether v's binding named binding holds an access token, and when
 * it expires (monotonic ms; 0 without one). */
uint64_t vault_oauth_expiry(const struct vault *v, const char *binding);

#endif
