/*
 * policy_oauth2_walk: the oauth2 auth keys of a binding (policy_oauth2.h)
 * walked from the file or an API body, their shape checked per grant,
 * and written back as YAML.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred.h"
#include "policy/policy_oauth2_walk.h"
#include "policy/policy_walk.h"
#include "policy/policy_ybuf.h"

/* ---- the walk ---- */

/* b's oauth2 part, made on the first of its keys. */
static struct policy_oauth2 *
oa(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_binding *b = *(struct policy_binding **)obj;

	if (b->oauth2 == NULL &&
	    (b->oauth2 = calloc(1, sizeof(*b->oauth2))) == NULL)
		policy_walk_err(w, v, "out of memory");
	return b->oauth2;
}

/* A printable ASCII string of 1..max bytes (no space when nospace). */
static bool
text_ok(struct pwalk *w, const struct pnode *v, const char *what, size_t max,
    bool nospace)
{
	size_t i;

	if (!policy_walk_is(w, v, PNODE_STR))
		return false;
	if (v->len == 0 || v->len > max) {
		policy_walk_err(w, v, "%s must be 1 to %zu bytes", what, max);
		return false;
	}
	for (i = 0; i < v->len; i++) {
		unsigned char c = (unsigned char)v->str[i];
		if (c < 0x20 || c >= 0x7f || (nospace && c == ' ') ||
		    (nospace && (c == '"' || c == '\\'))) {
			policy_walk_err(w, v, "%s: invalid character", what);
			return false;
		}
	}
	return true;
}

/* The value of an enumeration whose names name() gives (two of them). */
static int
pick(struct pwalk *w, const struct pnode *v, const char *(*name)(unsigned),
    const char *what)
{
	unsigned i;

	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	for (i = 0; name(i) != NULL; i++)
		if (strcmp(v->str, name(i)) == 0)
			return (int)i;
	policy_walk_err(w, v, "unknown %s \"%.32s\" (%s or %s)", what, v->str,
	    name(0), name(1));
	return -1;
}

static const char *
grant_name(unsigned i)
{
	return policy_oauth2_grant_name((enum policy_oauth2_grant)i);
}

static const char *
client_auth_name(unsigned i)
{
	return policy_oauth2_client_auth_name(
	    (enum policy_oauth2_client_auth)i);
}

int
policy_oauth2_walk_grant(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);
	int g = pick(w, v, grant_name, "grant");

	if (o == NULL || g < 0)
		return -1;
	o->grant = (enum policy_oauth2_grant)g;
	o->have_grant = true;
	return 0;
}

int
policy_oauth2_walk_client_auth(
    struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);
	int a = pick(w, v, client_auth_name, "clientAuth");

	if (o == NULL || a < 0)
		return -1;
	o->client_auth = (enum policy_oauth2_client_auth)a;
	return 0;
}

int
policy_oauth2_walk_url(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);
	struct err e;

	if (o == NULL || !policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (policy_oauth2_parse_url(
	        v->str, &o->host, &o->port, &o->target, &e) == -1) {
		policy_walk_err(w, v, "%s", e.msg);
		return -1;
	}
	return policy_walk_strdup(w, v, &o->token_url) ? 0 : -1;
}

int
policy_oauth2_walk_client_id(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);

	if (o == NULL ||
	    !text_ok(w, v, "clientId", POLICY_OAUTH2_TEXT_MAX, false))
		return -1;
	return policy_walk_strdup(w, v, &o->client_id) ? 0 : -1;
}

int
policy_oauth2_walk_audience(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);

	if (o == NULL ||
	    !text_ok(w, v, "audience", POLICY_OAUTH2_TEXT_MAX, false))
		return -1;
	return policy_walk_strdup(w, v, &o->audience) ? 0 : -1;
}

int
policy_oauth2_walk_secret(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);

	if (o == NULL)
		return -1;
	return policy_cred_walk_name(w, v, &o->client_secret) ? 0 : -1;
}

int
policy_oauth2_walk_refresh(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);

	if (o == NULL)
		return -1;
	return policy_cred_walk_name(w, v, &o->refresh_token) ? 0 : -1;
}

/* RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
int
policy_oauth2_walk_scopes(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_oauth2 *o = oa(w, v, obj);
	size_t i;

	if (o == NULL || !policy_walk_list(w, v, "scopes"))
		return -1;
	if ((o->scopes = calloc(v->nkids, sizeof(char *))) == NULL) {
		policy_walk_err(w, v, "out of memory");
		return -1;
	}
	for (i = 0; i < v->nkids; i++) {
		if (!text_ok(
		        w, v->kids[i], "scope", POLICY_OAUTH2_TEXT_MAX, true))
			continue;
		if (policy_walk_strdup(w, v->kids[i], &o->scopes[o->nscopes]))
			o->nscopes++;
	}
	return 0;
}

void
policy_oauth2_shape(
    struct pwalk *w, const struct pnode *v, const struct policy_binding *b)
{
	const struct policy_oauth2 *o = b->oauth2;

	if (b->auth != POLICY_AUTH_OAUTH2) {
		if (o != NULL)
			policy_walk_err(w, v,
			    "only oauth2 auth takes grant, tokenUrl, clientId, "
			    "clientSecret, refreshToken, scopes, audience or "
			    "clientAuth");
		return;
	}
	if (o == NULL || !o->have_grant || o->token_url == NULL ||
	    o->client_id == NULL) {
		policy_walk_err(w, v,
		    "oauth2 auth needs grant, tokenUrl and "
		    "clientId");
		return;
	}
	if (o->grant == POLICY_OAUTH2_CLIENT_CREDENTIALS &&
	    o->client_secret == NULL)
		policy_walk_err(
		    w, v, "the client_credentials grant needs clientSecret");
	if ((o->grant == POLICY_OAUTH2_REFRESH_TOKEN) !=
	    (o->refresh_token != NULL))
		policy_walk_err(w, v,
		    o->refresh_token == NULL
		        ? "the refresh_token grant needs refreshToken"
		        : "only the refresh_token grant takes refreshToken");
	if (o->client_auth == POLICY_OAUTH2_AUTH_BODY &&
	    o->client_secret == NULL)
		policy_walk_err(w, v, "clientAuth body needs clientSecret");
}

/* ---- the writer ---- */

void
policy_oauth2_yaml(struct ybuf *b, const struct policy_oauth2 *o)
{
	size_t i;

	if (o == NULL)
		return;
	policy_ybuf_auth_key(b, "grant", policy_oauth2_grant_name(o->grant));
	policy_ybuf_auth_key(b, "tokenUrl", o->token_url);
	policy_ybuf_auth_key(b, "clientId", o->client_id);
	policy_ybuf_auth_key(b, "clientSecret", o->client_secret);
	policy_ybuf_auth_key(b, "refreshToken", o->refresh_token);
	policy_ybuf_auth_key(b, "audience", o->audience);
	policy_ybuf_auth_key(
	    b, "clientAuth", policy_oauth2_client_auth_name(o->client_auth));
	if (o->nscopes > 0)
		policy_ybuf_printf(b, "      scopes:\n");
	for (i = 0; i < o->nscopes; i++) {
		policy_ybuf_printf(b, "        - ");
		policy_ybuf_quoted(b, o->scopes[i]);
		policy_ybuf_printf(b, "\n");
	}
}
