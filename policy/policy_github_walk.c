/*
 * policy_github_walk: the githubApp auth keys of a binding
 * (policy_github.h) walked from the file or an API body, their shape
 * checked, and written back as YAML.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred.h"
#include "policy/policy_github_walk.h"
#include "policy/policy_walk.h"
#include "policy/policy_ybuf.h"

#define GITHUB_ID_MAX ((1ul << 53) - 1) /* ids GitHub's JSON can carry */

/* ---- the walk ---- */

/* b's github part, made on the first of its keys. */
static struct policy_github *
gh(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_binding *b = *(struct policy_binding **)obj;

	if (b->github == NULL && (b->github = policy_github_new()) == NULL)
		policy_walk_err(w, v, "out of memory");
	return b->github;
}

/* A string (or a number when numok) of 1..max bytes, each a letter, a
 * digit or one of extra: what may go into JSON and YAML unescaped. */
static bool
word_ok(struct pwalk *w, const struct pnode *v, const char *what, size_t max,
    const char *extra, bool numok)
{
	size_t i;

	if (!(numok && v->type == PNODE_NUM) &&
	    !policy_walk_is(w, v, PNODE_STR))
		return false;
	if (v->len == 0 || v->len > max) {
		policy_walk_err(w, v, "%s must be 1 to %zu bytes", what, max);
		return false;
	}
	for (i = 0; i < v->len; i++) {
		char c = v->str[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') ||
		        (c != '\0' && strchr(extra, c) != NULL))) {
			policy_walk_err(w, v, "%s: invalid character", what);
			return false;
		}
	}
	return true;
}

int
policy_github_walk_app_id(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_github *g = gh(w, v, obj);

	/* an App id (digits) or its client id ("Iv23li...") */
	if (g == NULL ||
	    !word_ok(w, v, "appId", POLICY_GITHUB_ID_MAX, "._-", true))
		return -1;
	/* a number's text as written (the walk checked its digits) */
	if ((g->app_id = strdup(v->str)) == NULL) {
		policy_walk_err(w, v, "out of memory");
		return -1;
	}
	return 0;
}

int
policy_github_walk_installation(
    struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_github *g = gh(w, v, obj);
	unsigned long id;

	if (g == NULL || !policy_walk_uint(w, v, 1, GITHUB_ID_MAX, true, &id))
		return -1;
	g->installation_id = id;
	return 0;
}

int
policy_github_walk_key(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_github *g = gh(w, v, obj);

	if (g == NULL)
		return -1;
	return policy_cred_walk_name(w, v, &g->private_key) ? 0 : -1;
}

int
policy_github_walk_url(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_github *g = gh(w, v, obj);
	struct err e;

	if (g == NULL || !policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (policy_github_set_url(g, v->str, &e) == -1) {
		policy_walk_err(w, v, "%s", e.msg);
		return -1;
	}
	return policy_walk_strdup(w, v, &g->api_url) ? 0 : -1;
}

int
policy_github_walk_repos(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_github *g = gh(w, v, obj);
	size_t i;

	if (g == NULL || !policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids == 0 || v->nkids > POLICY_GITHUB_REPOS_MAX) {
		policy_walk_err(w, v, "repositories: 1 to %u names",
		    POLICY_GITHUB_REPOS_MAX);
		return -1;
	}
	if ((g->repos = calloc(v->nkids, sizeof(char *))) == NULL) {
		policy_walk_err(w, v, "out of memory");
		return -1;
	}
	for (i = 0; i < v->nkids; i++) {
		/* a repository's name, without its owner (GitHub's form) */
		if (!word_ok(w, v->kids[i], "repository",
		        POLICY_GITHUB_REPO_MAX, "._-", false))
			continue;
		if (policy_walk_strdup(w, v->kids[i], &g->repos[g->nrepos]))
			g->nrepos++;
	}
	return 0;
}

static bool
level_ok(struct pwalk *w, const struct pnode *v)
{
	if (!policy_walk_is(w, v, PNODE_STR))
		return false;
	if (strcmp(v->str, "read") == 0 || strcmp(v->str, "write") == 0 ||
	    strcmp(v->str, "admin") == 0)
		return true;
	policy_walk_err(
	    w, v, "permission level \"%.32s\" (read, write or admin)", v->str);
	return false;
}

/* One permission (name at v->kids[2i], level after it) into g. */
static void
perm_one(
    struct pwalk *w, const struct pnode *v, size_t i, struct policy_github *g)
{
	const struct pnode *k = v->kids[2 * i], *l = v->kids[2 * i + 1];
	size_t j;

	if (!word_ok(w, k, "permission", POLICY_GITHUB_PERM_MAX, "_", false) ||
	    !level_ok(w, l))
		return;
	for (j = 0; j < g->nperms; j++)
		if (strcmp(g->perm_names[j], k->str) == 0) {
			policy_walk_err(w, k, "duplicate permission");
			return;
		}
	if (!policy_walk_strdup(w, k, &g->perm_names[g->nperms]))
		return;
	if (!policy_walk_strdup(w, l, &g->perm_levels[g->nperms])) {
		free(g->perm_names[g->nperms]);
		g->perm_names[g->nperms] = NULL;
		return;
	}
	g->nperms++;
}

int
policy_github_walk_perms(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_github *g = gh(w, v, obj);
	size_t n, i;

	if (g == NULL || !policy_walk_is(w, v, PNODE_MAP))
		return -1;
	n = v->nkids / 2;
	if (n == 0 || n > POLICY_GITHUB_PERMS_MAX) {
		policy_walk_err(w, v, "permissions: 1 to %u entries",
		    POLICY_GITHUB_PERMS_MAX);
		return -1;
	}
	g->perm_names = calloc(n, sizeof(char *));
	g->perm_levels = calloc(n, sizeof(char *));
	if (g->perm_names == NULL || g->perm_levels == NULL) {
		policy_walk_err(w, v, "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++)
		perm_one(w, v, i, g);
	return 0;
}

int
policy_github_walk_form(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_github *g = gh(w, v, obj);
	const char *name;
	unsigned i;

	if (g == NULL || !policy_walk_is(w, v, PNODE_STR))
		return -1;
	for (i = 0; (name = policy_github_form_name(i)) != NULL; i++)
		if (strcmp(v->str, name) == 0) {
			g->form = (enum policy_github_form)i;
			return 0;
		}
	policy_walk_err(w, v,
	    "unknown tokenForm \"%.32s\" (auto, bearer or basic)", v->str);
	return -1;
}

void
policy_github_shape(
    struct pwalk *w, const struct pnode *v, const struct policy_binding *b)
{
	const struct policy_github *g = b->github;

	if (b->auth != POLICY_AUTH_GITHUB_APP) {
		if (g != NULL)
			policy_walk_err(w, v,
			    "only githubApp auth takes appId, installationId, "
			    "privateKey, apiUrl, repositories, permissions or "
			    "tokenForm");
		return;
	}
	if (g == NULL || g->app_id == NULL || g->installation_id == 0 ||
	    g->private_key == NULL)
		policy_walk_err(w, v,
		    "githubApp auth needs appId, installationId and "
		    "privateKey");
}

/* ---- the writer ---- */

void
policy_github_yaml(struct ybuf *b, const struct policy_github *g)
{
	size_t i;

	if (g == NULL)
		return;
	policy_ybuf_auth_key(b, "appId", g->app_id);
	policy_ybuf_printf(b, "      installationId: %llu\n",
	    (unsigned long long)g->installation_id);
	policy_ybuf_auth_key(b, "privateKey", g->private_key);
	policy_ybuf_auth_key(b, "apiUrl", g->api_url);
	policy_ybuf_auth_key(b, "tokenForm", policy_github_form_name(g->form));
	if (g->nrepos > 0)
		policy_ybuf_printf(b, "      repositories:\n");
	for (i = 0; i < g->nrepos; i++) {
		policy_ybuf_printf(b, "        - ");
		policy_ybuf_quoted(b, g->repos[i]);
		policy_ybuf_printf(b, "\n");
	}
	if (g->nperms > 0)
		policy_ybuf_printf(b, "      permissions:\n");
	for (i = 0; i < g->nperms; i++)
		policy_ybuf_printf(
		    b, "        %s: %s\n", g->perm_names[i], g->perm_levels[i]);
}
