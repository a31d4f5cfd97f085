/*
 * policy_cred_walk: the schema of the credentials list (contract §4)
 * and the name rule credentials and bindings share. A value is checked
 * and copied, never echoed: messages name its position only.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred.h"
#include "policy/policy_cred_http_walk.h"
#include "policy/policy_walk.h"

/* ---- names ---- */

static bool
name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > POLICY_CRED_NAME_MAX)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		        c == '.'))
			return false;
	}
	return true;
}

bool
policy_cred_walk_name(struct pwalk *w, const struct pnode *v, char **out)
{
	if (!policy_walk_is(w, v, PNODE_STR))
		return false;
	if (!name_ok(v->str)) {
		policy_walk_err(w, v, "name must be 1 to %d of [A-Za-z0-9._-]",
		    POLICY_CRED_NAME_MAX);
		return false;
	}
	return policy_walk_strdup(w, v, out);
}

/* ---- credentials ---- */

struct cwalk {
	struct policy_credential *c;
	const struct pnode *type_at, *value_at, *path_at;
	bool have_type;
};

static int
sk_type(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	cw->type_at = v;
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (strcmp(v->str, "inline") == 0)
		cw->c->source = POLICY_CRED_INLINE;
	else if (strcmp(v->str, "file") == 0 && w->api_creds) {
		/* The API must not make egressd read its own files into a
		 * request: file sources are the operator's alone. */
		policy_walk_err(w, v,
		    "source type \"file\" is accepted only in the operator's "
		    "policy file");
		return -1;
	} else if (strcmp(v->str, "file") == 0)
		cw->c->source = POLICY_CRED_FILE;
	else if (strcmp(v->str, "http") == 0 && w->api_creds) {
		/* Nor make it fetch from where the caller names. */
		policy_walk_err(w, v,
		    "source type \"http\" is accepted only in the operator's "
		    "policy file");
		return -1;
	} else if (strcmp(v->str, "http") == 0)
		cw->c->source = POLICY_CRED_HTTP;
	else {
		policy_walk_err(w, v,
		    "unknown source type \"%.32s\" (inline, file or http)",
		    v->str);
		return -1;
	}
	cw->have_type = true;
	return 0;
}

/* The value is never echoed: messages name its position only. */
static int
sk_value(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	cw->value_at = v;
	if (v->type != PNODE_STR) {
		policy_walk_err(w, v, "credential value must be a string");
		return -1;
	}
	if (v->len == 0 || v->len > POLICY_SECRET_MAX) {
		policy_walk_err(w, v, "credential value must be 1 to %d bytes",
		    POLICY_SECRET_MAX);
		return -1;
	}
	if (memchr(v->str, '\r', v->len) || memchr(v->str, '\n', v->len)) {
		policy_walk_err(w, v, "credential value contains CR or LF");
		return -1;
	}
	if (policy_credential_set_value(
	        cw->c, (const uint8_t *)v->str, v->len) == -1) {
		policy_walk_err(w, v, "out of memory for a credential value");
		return -1;
	}
	return 0;
}

static int
sk_path(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	cw->path_at = v;
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (v->str[0] != '/' || v->len > POLICY_PATH_PATTERN_MAX) {
		policy_walk_err(w, v, "credential file path must be absolute");
		return -1;
	}
	return policy_walk_strdup(w, v, &cw->c->path) ? 0 : -1;
}

#define CW_C offsetof(struct cwalk, c)
static const struct pkey source_keys[] = {
    {"type", sk_type, 0},
    {"value", sk_value, 0},
    {"path", sk_path, 0},
    {"url", policy_cred_http_walk_url, CW_C},
    {"method", policy_cred_http_walk_method, CW_C},
    {"headers", policy_cred_http_walk_headers, CW_C},
    {"ttl", policy_cred_http_walk_ttl, CW_C},
    {"maxStale", policy_cred_http_walk_max_stale, CW_C},
    {"allowPrivate", policy_cred_http_walk_private, CW_C},
    {"format", policy_cred_http_walk_format, CW_C},
};

static int
ck_name(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	return policy_cred_walk_name(w, v, &cw->c->name) ? 0 : -1;
}

static int
ck_source(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	(void)policy_walk_map(w, v, source_keys,
	    sizeof(source_keys) / sizeof(source_keys[0]), cw);
	if (v->type != PNODE_MAP)
		return -1;
	if (w->api_creds && cw->type_at == NULL) {
		/* The API's source type defaults to inline (contract §4). */
		cw->c->source = POLICY_CRED_INLINE;
		cw->have_type = true;
	}
	if (!cw->have_type) {
		if (cw->type_at == NULL)
			policy_walk_err(w, v, "source has no type");
		return -1;
	}
	if (cw->c->source == POLICY_CRED_INLINE &&
	    (cw->path_at != NULL || cw->value_at == NULL))
		policy_walk_err(
		    w, v, "inline source needs value (and no path)");
	if (cw->c->source == POLICY_CRED_FILE &&
	    (cw->value_at != NULL || cw->path_at == NULL))
		policy_walk_err(w, v, "file source needs path (and no value)");
	if (cw->c->source == POLICY_CRED_HTTP &&
	    (cw->value_at != NULL || cw->path_at != NULL ||
	        cw->c->http == NULL || cw->c->http->url == NULL))
		policy_walk_err(
		    w, v, "http source needs url (and no value or path)");
	if (cw->c->source != POLICY_CRED_HTTP && cw->c->http != NULL)
		policy_walk_err(w, v,
		    "only an http source takes url, method, headers, ttl, "
		    "maxStale, allowPrivate and format");
	return 0;
}

static const struct pkey cred_keys[] = {
    {"name", ck_name, 0},
    {"source", ck_source, 0},
};

static void
cred_item(struct pwalk *w, const struct pnode *v, struct policy_config *cfg)
{
	struct cwalk cw;
	size_t e0 = w->errs;
	uint64_t seen;

	memset(&cw, 0, sizeof(cw));
	if ((cw.c = calloc(1, sizeof(*cw.c))) == NULL) {
		policy_walk_err(w, v, "out of memory");
		return;
	}
	cw.c->loc.line = v->line;
	cw.c->loc.col = v->col;
	seen = policy_walk_map(w, v, cred_keys, 2, &cw);
	if (v->type == PNODE_MAP && (seen & 3) != 3)
		policy_walk_err(w, v, "credential needs name and source");
	if (w->errs == e0 &&
	    policy_walk_push(
	        (void ***)&cfg->credentials, &cfg->ncredentials, cw.c) == 0)
		return;
	policy_credential_free(cw.c);
}

static const char *
cred_name_at(const void *obj, struct pnode *at)
{
	const struct policy_credential *c = obj;

	at->line = c->loc.line;
	at->col = c->loc.col;
	return c->name;
}

int
policy_cred_walk(struct pwalk *w, const struct pnode *v, void *cfgp)
{
	struct policy_config *cfg = *(struct policy_config **)cfgp;

	return policy_walk_named_list(w, v, POLICY_BINDINGS_MAX, "credential",
	    cred_item, cfg, (void *const *const *)&cfg->credentials,
	    &cfg->ncredentials, cred_name_at);
}
