/*
 * policy_github: the settings of a binding whose auth type is githubApp
 * (issue 38 item 3): which GitHub App installation egressd mints tokens
 * for, at which API, narrowed to which repositories and permissions, and
 * how the token is written into the requests it serves. egressd signs
 * the App's JWT (RS256) with the private key itself, exchanges it at
 * POST {apiUrl}/app/installations/{installationId}/access_tokens and
 * injects the installation token; the sandbox holds neither the key, the
 * JWT nor the token.
 *
 * The struct is read-only and borrowed from the snapshot like every
 * binding accessor's result. It holds no secret: privateKey is a
 * credential name (a file source: a PEM RSA key), its value stays in the
 * policy's credentials and the vault.
 */
#ifndef EGRESSD_POLICY_GITHUB_H
#define EGRESSD_POLICY_GITHUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_GITHUB_API_DEFAULT "https://api.github.com"
#define POLICY_GITHUB_ID_MAX 64 /* bytes of appId (an id or a client id) */
#define POLICY_GITHUB_REPOS_MAX 500 /* GitHub's own limit */
#define POLICY_GITHUB_REPO_MAX 100 /* bytes of a repository name */
#define POLICY_GITHUB_PERMS_MAX 64
#define POLICY_GITHUB_PERM_MAX 64 /* bytes of a permission name */

/* How the installation token is written (docs/proxy.md): auto is git's
 * Basic form for git smart HTTP and LFS paths, Bearer for the rest. */
enum policy_github_form {
	POLICY_GITHUB_FORM_AUTO,
	POLICY_GITHUB_FORM_BEARER, /* Authorization: Bearer <token> */
	POLICY_GITHUB_FORM_BASIC, /* Basic base64(x-access-token:<token>) */
};

struct policy_github {
	char *app_id; /* the JWT's iss: digits or a client id */
	uint64_t installation_id; /* 1..2^53 */
	char *private_key; /* credential name */
	char *api_url; /* as written; NULL: POLICY_GITHUB_API_DEFAULT */
	char *host; /* the API's host, lowercase */
	uint16_t port;
	char *base; /* its path without the trailing '/': "" or "/api/v3" */
	char **repos; /* repository names the token is narrowed to */
	size_t nrepos;
	/* permissions: names[i] at levels[i] ("read", "write", "admin") */
	char **perm_names, **perm_levels;
	size_t nperms;
	enum policy_github_form form;
};

/* "auto" | "bearer" | "basic"; NULL outside the enum. */
const char *policy_github_form_name(enum policy_github_form f);
/* Do a and b ask the same installation for the same token (every field
 * equal; the key's value is the vault's to compare)? */
bool policy_github_same(
    const struct policy_github *a, const struct policy_github *b);

#endif
