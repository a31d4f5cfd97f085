/*
 * policy_binding: the binding object (policy_binding_int.h): its life
 * time, the read accessors of policy_binding.h and the names of its
 * enumerations, one table each for the walker, the YAML writer and the
 * vault.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_cred.h"
#include "policy/policy_github_int.h"
#include "policy/policy_oauth2_int.h"

static const char *const method_names[] = {
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
#define NMETHODS (sizeof(method_names) / sizeof(method_names[0]))

static const char *const auth_names[] = {[POLICY_AUTH_BEARER] = "bearer",
    [POLICY_AUTH_BASIC] = "basic",
    [POLICY_AUTH_APIKEY] = "apiKey",
    [POLICY_AUTH_CUSTOM_HEADERS] = "customHeaders",
    [POLICY_AUTH_PASSTHROUGH] = "passthrough",
    [POLICY_AUTH_AWS_SIGV4] = "awsSigV4",
    [POLICY_AUTH_OAUTH2] = "oauth2",
    [POLICY_AUTH_GITHUB_APP] = "githubApp"};

static const char *const subst_names[] = {"path", "query", "header", "body"};

/* ---- lifetimes ---- */

void
policy_bstrs_free(struct bstrs *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

void
policy_binding_free(struct policy_binding *b)
{
	size_t i;

	if (b == NULL)
		return;
	free(b->name);
	policy_bstrs_free(&b->hosts);
	policy_bstrs_free(&b->paths);
	free(b->credential);
	free(b->header);
	for (i = 0; i < b->nheaders; i++) {
		free(b->headers[i].name);
		free(b->headers[i].credential);
	}
	free(b->headers);
	for (i = 0; i < b->nsubst; i++) {
		free(b->subst[i].credential);
		free(b->subst[i].placeholder);
	}
	free(b->subst);
	free(b->aws.akid);
	free(b->aws.secret);
	free(b->aws.token);
	free(b->aws.region);
	free(b->aws.service);
	policy_oauth2_free(b->oauth2);
	policy_github_free(b->github);
	free(b);
}

static int
str_dup(char **dst, const char *src)
{
	*dst = NULL;
	return src == NULL || (*dst = strdup(src)) != NULL ? 0 : -1;
}

static int
bstrs_dup(struct bstrs *dst, const struct bstrs *src)
{
	dst->n = 0;
	if ((dst->v = calloc(src->n + 1, sizeof(char *))) == NULL)
		return -1;
	for (; dst->n < src->n; dst->n++)
		if (str_dup(&dst->v[dst->n], src->v[dst->n]) == -1)
			return -1;
	return 0;
}

struct policy_binding *
policy_binding_dup(const struct policy_binding *b)
{
	struct policy_binding *d = calloc(1, sizeof(*d));
	size_t i;

	if (d == NULL)
		return NULL;
	d->line = b->line;
	d->col = b->col;
	d->schemes = b->schemes;
	d->methods = b->methods;
	d->methods_named = b->methods_named;
	d->auth = b->auth;
	if (str_dup(&d->name, b->name) == -1 ||
	    bstrs_dup(&d->hosts, &b->hosts) == -1 ||
	    bstrs_dup(&d->paths, &b->paths) == -1 ||
	    str_dup(&d->credential, b->credential) == -1 ||
	    str_dup(&d->header, b->header) == -1 ||
	    str_dup(&d->aws.akid, b->aws.akid) == -1 ||
	    str_dup(&d->aws.secret, b->aws.secret) == -1 ||
	    str_dup(&d->aws.token, b->aws.token) == -1 ||
	    str_dup(&d->aws.region, b->aws.region) == -1 ||
	    str_dup(&d->aws.service, b->aws.service) == -1)
		goto fail;
	if (b->oauth2 != NULL &&
	    (d->oauth2 = policy_oauth2_dup(b->oauth2)) == NULL)
		goto fail;
	if (b->github != NULL &&
	    (d->github = policy_github_dup(b->github)) == NULL)
		goto fail;
	if (b->nheaders > 0 &&
	    (d->headers = calloc(b->nheaders, sizeof(*d->headers))) == NULL)
		goto fail;
	for (; d->nheaders < b->nheaders; d->nheaders++) {
		i = d->nheaders;
		if (str_dup(&d->headers[i].name, b->headers[i].name) == -1 ||
		    str_dup(&d->headers[i].credential,
		        b->headers[i].credential) == -1) {
			d->nheaders++; /* freed with the rest */
			goto fail;
		}
	}
	if (b->nsubst > 0 &&
	    (d->subst = calloc(b->nsubst, sizeof(*d->subst))) == NULL)
		goto fail;
	for (; d->nsubst < b->nsubst; d->nsubst++) {
		i = d->nsubst;
		d->subst[i].in = b->subst[i].in;
		if (str_dup(&d->subst[i].credential, b->subst[i].credential) ==
		        -1 ||
		    str_dup(&d->subst[i].placeholder,
		        b->subst[i].placeholder) == -1) {
			d->nsubst++;
			goto fail;
		}
	}
	return d;
fail:
	policy_binding_free(d);
	return NULL;
}

/* ---- names ---- */

/* The name of the one bit set in bit among names[], NULL otherwise. */
static const char *
bit_name(const char *const *names, size_t n, unsigned bit)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (bit == 1u << k)
			return names[k];
	return NULL;
}

const char *
policy_method_name(unsigned bit)
{
	return bit_name(method_names, NMETHODS, bit);
}

const char *
policy_subst_in_name(unsigned bit)
{
	return bit_name(
	    subst_names, sizeof(subst_names) / sizeof(subst_names[0]), bit);
}

const char *
policy_auth_type_name(enum policy_auth_type t)
{
	if ((unsigned)t >= sizeof(auth_names) / sizeof(auth_names[0]))
		return NULL;
	return auth_names[t];
}

unsigned
policy_method_bit(const char *s, size_t len)
{
	size_t k;

	for (k = 0; k < NMETHODS; k++)
		if (strlen(method_names[k]) == len &&
		    memcmp(s, method_names[k], len) == 0)
			return 1u << k;
	return 0;
}

uint16_t
policy_scheme_port(unsigned scheme)
{
	if (scheme == POLICY_SCHEME_HTTPS)
		return 443;
	if (scheme == POLICY_SCHEME_HTTP)
		return 80;
	return 0;
}

/* ---- accessors ---- */

const char *
policy_binding_name(const struct policy_binding *b)
{
	return b->name;
}

enum policy_auth_type
policy_binding_auth(const struct policy_binding *b)
{
	return b->auth;
}

unsigned
policy_binding_schemes(const struct policy_binding *b)
{
	return b->schemes;
}

size_t
policy_binding_ports(const struct policy_binding *b, uint16_t ports[2])
{
	size_t n = 0;

	if (b->schemes & POLICY_SCHEME_HTTPS)
		ports[n++] = policy_scheme_port(POLICY_SCHEME_HTTPS);
	if (b->schemes & POLICY_SCHEME_HTTP)
		ports[n++] = policy_scheme_port(POLICY_SCHEME_HTTP);
	return n;
}

size_t
policy_binding_nhosts(const struct policy_binding *b)
{
	return b->hosts.n;
}

const char *
policy_binding_host(const struct policy_binding *b, size_t i)
{
	return i < b->hosts.n ? b->hosts.v[i] : NULL;
}

unsigned
policy_binding_methods(const struct policy_binding *b)
{
	return b->methods;
}

bool
policy_binding_methods_named(const struct policy_binding *b)
{
	return b->methods_named;
}

size_t
policy_binding_npaths(const struct policy_binding *b)
{
	return b->paths.n;
}

const char *
policy_binding_path(const struct policy_binding *b, size_t i)
{
	return i < b->paths.n ? b->paths.v[i] : NULL;
}

const char *
policy_binding_credential(const struct policy_binding *b)
{
	return b->credential;
}

const struct policy_oauth2 *
policy_binding_oauth2(const struct policy_binding *b)
{
	return b->auth == POLICY_AUTH_OAUTH2 ? b->oauth2 : NULL;
}

const struct policy_github *
policy_binding_github(const struct policy_binding *b)
{
	return b->auth == POLICY_AUTH_GITHUB_APP ? b->github : NULL;
}

const char *
policy_binding_header_name(const struct policy_binding *b)
{
	return b->header;
}

size_t
policy_binding_nheaders(const struct policy_binding *b)
{
	return b->nheaders;
}

const char *
policy_binding_header(
    const struct policy_binding *b, size_t i, const char **credential)
{
	if (i >= b->nheaders)
		return NULL;
	if (credential != NULL)
		*credential = b->headers[i].credential;
	return b->headers[i].name;
}

size_t
policy_binding_nsubsts(const struct policy_binding *b)
{
	return b->nsubst;
}

const char *
policy_binding_subst(const struct policy_binding *b, size_t i,
    const char **placeholder, unsigned *in)
{
	if (i >= b->nsubst)
		return NULL;
	if (placeholder != NULL)
		*placeholder = b->subst[i].placeholder;
	if (in != NULL)
		*in = b->subst[i].in;
	return b->subst[i].credential;
}

bool
policy_binding_aws(
    const struct policy_binding *b, struct policy_binding_aws *out)
{
	memset(out, 0, sizeof(*out));
	if (b->auth != POLICY_AUTH_AWS_SIGV4)
		return false;
	out->access_key_id = b->aws.akid;
	out->secret_access_key = b->aws.secret;
	out->session_token = b->aws.token;
	out->region = b->aws.region;
	out->service = b->aws.service;
	return true;
}

const char *
policy_binding_unknown_cred(const struct policy_binding *b,
    struct policy_credential *const *creds, size_t n)
{
	size_t i;

	if (b->credential != NULL &&
	    !policy_credential_listed(creds, n, b->credential))
		return b->credential;
	for (i = 0; i < b->nheaders; i++)
		if (!policy_credential_listed(
		        creds, n, b->headers[i].credential))
			return b->headers[i].credential;
	for (i = 0; i < b->nsubst; i++)
		if (!policy_credential_listed(creds, n, b->subst[i].credential))
			return b->subst[i].credential;
	for (i = 0; i < 3; i++) {
		const char *c = i == 0 ? b->aws.akid
		    : i == 1           ? b->aws.secret
		                       : b->aws.token;
		if (c != NULL && !policy_credential_listed(creds, n, c))
			return c;
	}
	if (policy_oauth2_unknown_cred(b->oauth2, creds, n) != NULL)
		return policy_oauth2_unknown_cred(b->oauth2, creds, n);
	return policy_github_unknown_cred(b->github, creds, n);
}

/* ---- the hosts bindings cover ---- */

/* name strictly below suffix (both normalized). */
static bool
binding_name_below(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s && name[n - s - 1] == '.' &&
	    strcmp(name + n - s, suffix) == 0;
}

bool
policy_binding_covers_host(
    const struct policy *p, const char *host, unsigned scheme)
{
	char name[POLICY_NAME_MAX + 2];
	struct err e;
	size_t i, j;

	if (p == NULL || p->nbindings == 0 || host == NULL ||
	    policy_name_normalize(host, name, sizeof(name), &e) == -1 ||
	    name[0] == '*')
		return false;
	for (i = 0; i < p->nbindings; i++) {
		const struct policy_binding *b = p->bindings[i];

		if (!(policy_binding_schemes(b) & scheme))
			continue;
		for (j = 0; j < policy_binding_nhosts(b); j++) {
			const char *h = policy_binding_host(b, j);

			if (h[0] == '*' && h[1] == '.'
			        ? binding_name_below(name, h + 2)
			        : strcmp(name, h) == 0)
				return true;
		}
	}
	return false;
}
