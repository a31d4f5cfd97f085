/*
 * policy_github: the githubApp auth type's settings (policy_github.h):
 * the object (make, copy, free, compare, its credential reference) and
 * the API URL. The walk and the writer are policy_github_walk.c's; the
 * JWT and the token request are the vault's (vault_github.c) and the
 * proxy's to send.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred.h"
#include "policy/policy_github_int.h"
#include "policy/policy_oauth2.h"

static const char *const form_names[] = {[POLICY_GITHUB_FORM_AUTO] = "auto",
    [POLICY_GITHUB_FORM_BEARER] = "bearer",
    [POLICY_GITHUB_FORM_BASIC] = "basic"};

const char *
policy_github_form_name(enum policy_github_form f)
{
	if ((unsigned)f >= sizeof(form_names) / sizeof(form_names[0]))
		return NULL;
	return form_names[f];
}

/* ---- life ---- */

static void
strs_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}

void
policy_github_free(struct policy_github *g)
{
	if (g == NULL)
		return;
	free(g->app_id);
	free(g->private_key);
	free(g->api_url);
	free(g->host);
	free(g->base);
	strs_free(g->repos, g->nrepos);
	strs_free(g->perm_names, g->nperms);
	strs_free(g->perm_levels, g->nperms);
	free(g);
}

struct policy_github *
policy_github_new(void)
{
	struct policy_github *g = calloc(1, sizeof(*g));
	struct err e;

	if (g == NULL)
		return NULL;
	if (policy_github_set_url(g, POLICY_GITHUB_API_DEFAULT, &e) == -1) {
		policy_github_free(g);
		return NULL;
	}
	return g;
}

static int
sdup(char **dst, const char *src)
{
	*dst = NULL;
	return src == NULL || (*dst = strdup(src)) != NULL ? 0 : -1;
}

static int
strs_dup(char ***dst, char *const *src, size_t n)
{
	size_t i;

	*dst = NULL;
	if (n == 0)
		return 0;
	if ((*dst = calloc(n, sizeof(char *))) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		if (sdup(&(*dst)[i], src[i]) == -1)
			return -1;
	return 0;
}

struct policy_github *
policy_github_dup(const struct policy_github *g)
{
	struct policy_github *d = calloc(1, sizeof(*d));

	if (d == NULL)
		return NULL;
	d->installation_id = g->installation_id;
	d->port = g->port;
	d->form = g->form;
	d->nrepos = g->nrepos;
	d->nperms = g->nperms;
	if (sdup(&d->app_id, g->app_id) == -1 ||
	    sdup(&d->private_key, g->private_key) == -1 ||
	    sdup(&d->api_url, g->api_url) == -1 ||
	    sdup(&d->host, g->host) == -1 || sdup(&d->base, g->base) == -1 ||
	    strs_dup(&d->repos, g->repos, g->nrepos) == -1 ||
	    strs_dup(&d->perm_names, g->perm_names, g->nperms) == -1 ||
	    strs_dup(&d->perm_levels, g->perm_levels, g->nperms) == -1) {
		policy_github_free(d);
		return NULL;
	}
	return d;
}

static bool
str_same(const char *a, const char *b)
{
	return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool
strs_same(char *const *a, char *const *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!str_same(a[i], b[i]))
			return false;
	return true;
}

bool
policy_github_same(const struct policy_github *a, const struct policy_github *b)
{
	return a != NULL && b != NULL &&
	    a->installation_id == b->installation_id && a->port == b->port &&
	    a->form == b->form && a->nrepos == b->nrepos &&
	    a->nperms == b->nperms && str_same(a->app_id, b->app_id) &&
	    str_same(a->private_key, b->private_key) &&
	    str_same(a->host, b->host) && str_same(a->base, b->base) &&
	    strs_same(a->repos, b->repos, a->nrepos) &&
	    strs_same(a->perm_names, b->perm_names, a->nperms) &&
	    strs_same(a->perm_levels, b->perm_levels, a->nperms);
}

const char *
policy_github_unknown_cred(const struct policy_github *g,
    struct policy_credential *const *creds, size_t n)
{
	if (g == NULL || g->private_key == NULL ||
	    policy_credential_listed(creds, n, g->private_key))
		return NULL;
	return g->private_key;
}

/* ---- the API URL ---- */

int
policy_github_set_url(struct policy_github *g, const char *url, struct err *e)
{
	char *host, *target;
	uint16_t port;
	size_t n;

	/* the token URL's grammar (a DNS name, https, no user info) */
	if (policy_oauth2_parse_url(url, &host, &port, &target, e) == -1) {
		if (strncmp(e->msg, "tokenUrl", 8) == 0) {
			char msg[sizeof(e->msg)];

			(void)snprintf(
			    msg, sizeof(msg), "apiUrl%s", e->msg + 8);
			err_set(e, "%s", msg);
		}
		return -1;
	}
	if (strchr(target, '?') != NULL) {
		free(host);
		free(target);
		err_set(e, "apiUrl: no query");
		return -1;
	}
	n = strlen(target);
	while (n > 0 && target[n - 1] == '/') /* "/api/v3/" is "/api/v3" */
		target[--n] = '\0';
	free(g->host);
	free(g->base);
	g->host = host;
	g->port = port;
	g->base = target;
	return 0;
}
