/*
 * policy_oauth2: the oauth2 auth type's settings (policy_oauth2.h): the
 * object (copy, free, compare, its credential references) and the token
 * URL's parser. The walk and the writer are policy_oauth2_walk.c's; the
 * token request is the vault's (vault_oauth.c) and the proxy's to send.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred.h"
#include "policy/policy_int.h"
#include "policy/policy_oauth2_int.h"
#include "util/addr.h"

static const char *const grant_names[] = {
    [POLICY_OAUTH2_CLIENT_CREDENTIALS] = "client_credentials",
    [POLICY_OAUTH2_REFRESH_TOKEN] = "refresh_token"};
static const char *const client_auth_names[] = {
    [POLICY_OAUTH2_AUTH_BASIC] = "basic", [POLICY_OAUTH2_AUTH_BODY] = "body"};

const char *
policy_oauth2_grant_name(enum policy_oauth2_grant g)
{
	if ((unsigned)g >= sizeof(grant_names) / sizeof(grant_names[0]))
		return NULL;
	return grant_names[g];
}

const char *
policy_oauth2_client_auth_name(enum policy_oauth2_client_auth a)
{
	if ((unsigned)a >=
	    sizeof(client_auth_names) / sizeof(client_auth_names[0]))
		return NULL;
	return client_auth_names[a];
}

/* ---- life ---- */

void
policy_oauth2_free(struct policy_oauth2 *o)
{
	size_t i;

	if (o == NULL)
		return;
	free(o->token_url);
	free(o->host);
	free(o->target);
	free(o->client_id);
	free(o->client_secret);
	free(o->refresh_token);
	for (i = 0; i < o->nscopes; i++)
		free(o->scopes[i]);
	free(o->scopes);
	free(o->audience);
	free(o);
}

static int
sdup(char **dst, const char *src)
{
	*dst = NULL;
	return src == NULL || (*dst = strdup(src)) != NULL ? 0 : -1;
}

struct policy_oauth2 *
policy_oauth2_dup(const struct policy_oauth2 *o)
{
	struct policy_oauth2 *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	d->grant = o->grant;
	d->client_auth = o->client_auth;
	d->port = o->port;
	if (sdup(&d->token_url, o->token_url) == -1 ||
	    sdup(&d->host, o->host) == -1 ||
	    sdup(&d->target, o->target) == -1 ||
	    sdup(&d->client_id, o->client_id) == -1 ||
	    sdup(&d->client_secret, o->client_secret) == -1 ||
	    sdup(&d->refresh_token, o->refresh_token) == -1 ||
	    sdup(&d->audience, o->audience) == -1)
		goto fail;
	if (o->nscopes > 0 &&
	    (d->scopes = calloc(o->nscopes, sizeof(char *))) == NULL)
		goto fail;
	for (; d->nscopes < o->nscopes; d->nscopes++)
		if (sdup(&d->scopes[d->nscopes], o->scopes[d->nscopes]) == -1)
			goto fail;
	return d;
fail:
	policy_oauth2_free(d);
	return NULL;
}

static bool
str_same(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

bool
policy_oauth2_same(const struct policy_oauth2 *a, const struct policy_oauth2 *b)
{
	size_t i;

	if (a == NULL || b == NULL || a->grant != b->grant ||
	    a->client_auth != b->client_auth || a->nscopes != b->nscopes ||
	    !str_same(a->token_url, b->token_url) ||
	    !str_same(a->client_id, b->client_id) ||
	    !str_same(a->client_secret, b->client_secret) ||
	    !str_same(a->refresh_token, b->refresh_token) ||
	    !str_same(a->audience, b->audience))
		return false;
	for (i = 0; i < a->nscopes; i++)
		if (!str_same(a->scopes[i], b->scopes[i]))
			return false;
	return true;
}

/* ---- the token URL ---- */

/* Bytes a request target may hold as written (RFC 3986 pchar, '/', '?',
 * and '%' for escapes): no space, control byte, '#' or non-ASCII. */
static bool
target_ok(const char *s)
{
	static const char extra[] = "-._~!$&'()*+,;=:@/?%";

	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		        (*s >= '0' && *s <= '9') || strchr(extra, *s) != NULL))
			return false;
	return true;
}

static int
url_port(const char *p, size_t n, uint16_t *port, struct err *e)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		goto bad;
	for (i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			goto bad;
		v = v * 10 + (unsigned long)(p[i] - '0');
	}
	if (v == 0 || v > 65535)
		goto bad;
	*port = (uint16_t)v;
	return 0;
bad:
	err_set(e, "tokenUrl: port must be 1 to 65535");
	return -1;
}

int
policy_oauth2_parse_url(
    const char *url, char **host, uint16_t *port, char **target, struct err *e)
{
	char norm[POLICY_NAME_MAX + 2];
	const char *h, *end, *colon;
	struct addr ip;
	size_t tlen;

	*host = *target = NULL;
	*port = 443;
	if (strlen(url) > POLICY_OAUTH2_URL_MAX) {
		err_set(
		    e, "tokenUrl: longer than %d bytes", POLICY_OAUTH2_URL_MAX);
		return -1;
	}
	if (strncmp(url, "https://", 8) != 0) {
		err_set(e, "tokenUrl: must start with https://");
		return -1;
	}
	h = url + 8;
	end = h + strcspn(h, "/?#");
	if (*end == '#' || strchr(end, '#') != NULL) {
		err_set(e, "tokenUrl: no fragment");
		return -1;
	}
	if (memchr(h, '@', (size_t)(end - h)) != NULL || *h == '[') {
		err_set(e,
		    "tokenUrl: a host name without user info or "
		    "address literal");
		return -1;
	}
	colon = memchr(h, ':', (size_t)(end - h));
	if (colon != NULL &&
	    url_port(colon + 1, (size_t)(end - colon - 1), port, e) == -1)
		return -1;
	if (policy_name_norm(h, (size_t)((colon ? colon : end) - h), norm,
	        sizeof(norm), false, e) == -1) {
		err_prefix(e, "tokenUrl");
		return -1;
	}
	if (strchr(norm, '.') == NULL ||
	    addr_parse_ip(norm, strlen(norm), &ip)) {
		err_set(e, "tokenUrl: the host must be a DNS name with a dot");
		return -1;
	}
	if (!target_ok(end)) {
		err_set(e, "tokenUrl: invalid byte in the path or query");
		return -1;
	}
	tlen = strlen(end);
	if ((*host = strdup(norm)) == NULL ||
	    (*target = malloc(tlen + 2)) == NULL) {
		free(*host);
		*host = NULL;
		err_set(e, "out of memory");
		return -1;
	}
	/* "https://h?q" and "https://h" ask for "/?q" and "/" */
	(*target)[0] = '/';
	memcpy(*target + (*end == '/' ? 0 : 1), end, tlen + 1);
	return 0;
}

const char *
policy_oauth2_unknown_cred(const struct policy_oauth2 *o,
    struct policy_credential *const *creds, size_t n)
{
	if (o == NULL)
		return NULL;
	if (o->client_secret != NULL &&
	    !policy_credential_listed(creds, n, o->client_secret))
		return o->client_secret;
	if (o->refresh_token != NULL &&
	    !policy_credential_listed(creds, n, o->refresh_token))
		return o->refresh_token;
	return NULL;
}
