/*
 * policy_oauth2: the OAuth2 settings of a binding whose auth type is
 * oauth2 (issue 38 item 2): which grant egressd runs against which token
 * endpoint, and the names of the credentials it uses. egressd requests
 * the access token itself (RFC 6749 §4.4 client credentials, §6 refresh
 * token) and injects it as "Authorization: Bearer <token>"; the sandbox
 * never holds the client secret, the refresh token or the access token.
 *
 * The struct is read-only and borrowed from the snapshot like every
 * binding accessor's result. It holds no secret: clientSecret and
 * refreshToken are credential names, their values stay in the policy's
 * credentials and the vault.
 */
#ifndef EGRESSD_POLICY_OAUTH2_H
#define EGRESSD_POLICY_OAUTH2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define POLICY_OAUTH2_URL_MAX 2048 /* bytes of tokenUrl */
#define POLICY_OAUTH2_TEXT_MAX 512 /* clientId, audience, one scope */
#define POLICY_OAUTH2_SCOPES_MAX 64

enum policy_oauth2_grant {
	POLICY_OAUTH2_CLIENT_CREDENTIALS, /* RFC 6749 §4.4 */
	POLICY_OAUTH2_REFRESH_TOKEN, /* RFC 6749 §6 */
};

/* How the client authenticates to the token endpoint (RFC 6749 §2.3.1):
 * HTTP Basic (client_secret_basic, the default every server must
 * support) or client_id and client_secret in the body
 * (client_secret_post). */
enum policy_oauth2_client_auth {
	POLICY_OAUTH2_AUTH_BASIC,
	POLICY_OAUTH2_AUTH_BODY,
};

struct policy_oauth2 {
	enum policy_oauth2_grant grant;
	enum policy_oauth2_client_auth client_auth;
	char *token_url; /* as written: https://host[:port]/path[?query] */
	char *host; /* its host, lowercase, no trailing dot */
	uint16_t port; /* 443 unless written */
	char *target; /* its path and query: the request target, "/..." */
	char *client_id;
	char *client_secret; /* credential name; NULL: a public client */
	char *refresh_token; /* credential name; refresh_token grant only */
	char **scopes; /* sent space-separated in "scope" */
	size_t nscopes;
	char *audience; /* NULL: not sent */
	bool have_grant; /* the walk saw grant (it has no default) */
};

/* "client_credentials" | "refresh_token"; NULL outside the enum. */
const char *policy_oauth2_grant_name(enum policy_oauth2_grant g);
/* "basic" | "body"; NULL outside the enum. */
const char *policy_oauth2_client_auth_name(enum policy_oauth2_client_auth a);
/* Do a and b ask the same token endpoint for the same thing (every field
 * equal; credential values are the vault's to compare)? */
bool policy_oauth2_same(
    const struct policy_oauth2 *a, const struct policy_oauth2 *b);

/*
 * Pure: "https://host[:port]/path[?query]" into host (lowercase, a DNS
 * name: no IP literal, no userinfo), port (1..65535, default 443) and
 * target (at least "/"; no fragment, no space or control byte). 0, or
 * -1 with the reason in e.
 */
int policy_oauth2_parse_url(
    const char *url, char **host, uint16_t *port, char **target, struct err *e);

#endif
