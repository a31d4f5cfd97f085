/*
 * policy_cred: credentials and bindings of the policy file (contract §4):
 * their schema, the cross checks (references, coverage by the policy,
 * ambiguity) and the few accessors the vault needs.
 *
 * A credential's value is kept in a private buffer, wiped with
 * explicit_bzero when freed, never formatted into a message and never
 * returned by a getter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy_int.h"
#include "util/secmem.h"

#define SCHEME_HTTPS 0x1u
#define SCHEME_HTTP 0x2u
#define IN_PATH 0x1u
#define IN_QUERY 0x2u
#define IN_HEADER 0x4u
#define IN_BODY 0x8u
#define PLACEHOLDER_MAX 256

struct policy_credential {
	char *name;
	enum policy_cred_source source;
	char *path;
	uint8_t *value;
	size_t vlen;
	struct policy_loc loc;
};

struct bstrs {
	char **v;
	size_t n;
};

struct bheader {
	char *name;
	char *credential;
};

struct bsubst {
	char *credential;
	char *placeholder;
	unsigned in;
};

struct policy_binding {
	char *name;
	unsigned line, col;
	unsigned schemes;
	unsigned methods; /* bit i = method_names[i] */
	struct bstrs hosts, paths;
	enum policy_auth_type auth;
	char *credential;
	char *header;
	struct bheader *headers;
	size_t nheaders;
	struct bsubst *subst;
	size_t nsubst;
};

static const char *const method_names[] = {
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
#define METHODS_DEFAULT 0x3du /* GET POST PUT PATCH DELETE */
#define NMETHODS (sizeof(method_names) / sizeof(method_names[0]))

static const char *const reserved_headers[] = {"host", "content-length",
    "content-type", "transfer-encoding", "connection", "upgrade", "te",
    "trailer", "proxy-authorization", "proxy-authenticate", "forwarded",
    "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"};

/* ---- lifetimes and accessors ---- */

void
policy_credential_free(struct policy_credential *c)
{
	if (c == NULL)
		return;
	if (c->value != NULL) {
		secmem_wipe(c->value, c->vlen);
		free(c->value);
	}
	free(c->name);
	free(c->path);
	free(c);
}

static void
bstrs_free(struct bstrs *s)
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
	bstrs_free(&b->hosts);
	bstrs_free(&b->paths);
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
	free(b);
}

const char *
policy_credential_name(const struct policy_credential *c)
{
	return c->name;
}

enum policy_cred_source
policy_credential_source(const struct policy_credential *c)
{
	return c->source;
}

const char *
policy_credential_path(const struct policy_credential *c)
{
	return c->path;
}

int
policy_credential_export(const struct policy_credential *c,
    int (*sink)(void *arg, const uint8_t *value, size_t len), void *arg)
{
	if (c == NULL || c->source != POLICY_CRED_INLINE || c->value == NULL)
		return -1;
	return sink(arg, c->value, c->vlen);
}

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

/* ---- small validators ---- */

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

/* RFC 9110 token. */
static bool
header_name_ok(const char *s)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	size_t i;

	if (*s == '\0' || strlen(s) > POLICY_CRED_NAME_MAX)
		return false;
	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || strchr(extra, c) != NULL))
			return false;
	}
	return true;
}

static bool
header_reserved(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof(reserved_headers) / sizeof(reserved_headers[0]);
	     i++)
		if (strcasecmp(s, reserved_headers[i]) == 0)
			return true;
	return false;
}

static bool
walk_name(struct pwalk *w, const struct pnode *v, char **out)
{
	if (!pw_is(w, v, PNODE_STR))
		return false;
	if (!name_ok(v->str)) {
		pw_err(w, v, "name must be 1 to %d of [A-Za-z0-9._-]",
		    POLICY_CRED_NAME_MAX);
		return false;
	}
	return pw_strdup(w, v, out);
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
	if (!pw_is(w, v, PNODE_STR))
		return -1;
	if (strcmp(v->str, "inline") == 0)
		cw->c->source = POLICY_CRED_INLINE;
	else if (strcmp(v->str, "file") == 0)
		cw->c->source = POLICY_CRED_FILE;
	else {
		pw_err(w, v, "unknown source type \"%.32s\" (inline or file)",
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
		pw_err(w, v, "credential value must be a string");
		return -1;
	}
	if (v->len == 0 || v->len > POLICY_SECRET_MAX) {
		pw_err(w, v, "credential value must be 1 to %d bytes",
		    POLICY_SECRET_MAX);
		return -1;
	}
	if (memchr(v->str, '\r', v->len) || memchr(v->str, '\n', v->len)) {
		pw_err(w, v, "credential value contains CR or LF");
		return -1;
	}
	if ((cw->c->value = malloc(v->len)) == NULL) {
		pw_err(w, v, "out of memory");
		return -1;
	}
	memcpy(cw->c->value, v->str, v->len);
	cw->c->vlen = v->len;
	return 0;
}

static int
sk_path(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	cw->path_at = v;
	if (!pw_is(w, v, PNODE_STR))
		return -1;
	if (v->str[0] != '/' || v->len > POLICY_PATH_PATTERN_MAX) {
		pw_err(w, v, "credential file path must be absolute");
		return -1;
	}
	return pw_strdup(w, v, &cw->c->path) ? 0 : -1;
}

static const struct pkey source_keys[] = {
    {"type", sk_type},
    {"value", sk_value},
    {"path", sk_path},
};

static int
ck_name(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	return walk_name(w, v, &cw->c->name) ? 0 : -1;
}

static int
ck_source(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct cwalk *cw = obj;

	(void)pw_map(w, v, source_keys, 3, cw);
	if (v->type != PNODE_MAP)
		return -1;
	if (!cw->have_type) {
		if (cw->type_at == NULL)
			pw_err(w, v, "source has no type");
		return -1;
	}
	if (cw->c->source == POLICY_CRED_INLINE &&
	    (cw->path_at != NULL || cw->value_at == NULL))
		pw_err(w, v, "inline source needs value (and no path)");
	if (cw->c->source == POLICY_CRED_FILE &&
	    (cw->value_at != NULL || cw->path_at == NULL))
		pw_err(w, v, "file source needs path (and no value)");
	return 0;
}

static const struct pkey cred_keys[] = {
    {"name", ck_name},
    {"source", ck_source},
};

static int
push_ptr(void ***arr, size_t *n, void *x)
{
	void **na = realloc(*arr, (*n + 1) * sizeof(*na));

	if (na == NULL)
		return -1;
	na[(*n)++] = x;
	*arr = na;
	return 0;
}

static void
cred_item(struct pwalk *w, const struct pnode *v, struct policy_config *cfg)
{
	struct cwalk cw;
	size_t e0 = w->errs;
	uint64_t seen;

	memset(&cw, 0, sizeof(cw));
	if ((cw.c = calloc(1, sizeof(*cw.c))) == NULL) {
		pw_err(w, v, "out of memory");
		return;
	}
	cw.c->loc.line = v->line;
	cw.c->loc.col = v->col;
	seen = pw_map(w, v, cred_keys, 2, &cw);
	if (v->type == PNODE_MAP && (seen & 3) != 3)
		pw_err(w, v, "credential needs name and source");
	if (w->errs == e0 &&
	    push_ptr((void ***)&cfg->credentials, &cfg->ncredentials, cw.c) ==
	        0)
		return;
	policy_credential_free(cw.c);
}

int
policy_cred_walk(
    struct pwalk *w, const struct pnode *v, struct policy_config *cfg)
{
	size_t i, j;

	if (v->type == PNODE_NULL)
		return 0;
	if (!pw_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids > POLICY_BINDINGS_MAX) {
		pw_err(w, v, "at most %d credentials", POLICY_BINDINGS_MAX);
		return -1;
	}
	for (i = 0; i < v->nkids; i++)
		cred_item(w, v->kids[i], cfg);
	for (i = 0; i < cfg->ncredentials; i++)
		for (j = 0; j < i; j++)
			if (strcmp(cfg->credentials[i]->name,
			        cfg->credentials[j]->name) == 0) {
				struct pnode at = {
				    .line = cfg->credentials[i]->loc.line,
				    .col = cfg->credentials[i]->loc.col};
				pw_err(w, &at, "duplicate credential \"%s\"",
				    cfg->credentials[i]->name);
			}
	return 0;
}

/* ---- bindings: match ---- */

struct bwalk {
	struct policy_binding *b;
	const struct pnode *ports_at;
	unsigned long ports[POLICY_BINDING_LIST_MAX];
	size_t nports;
	bool have_hosts, have_type;
	const struct pnode *cred_at, *name_at, *headers_at, *subst_at;
};

static bool
list_ok(struct pwalk *w, const struct pnode *v, const char *what)
{
	if (!pw_is(w, v, PNODE_SEQ))
		return false;
	if (v->nkids == 0 || v->nkids > POLICY_BINDING_LIST_MAX) {
		pw_err(w, v, "%s must list 1 to %d entries", what,
		    POLICY_BINDING_LIST_MAX);
		return false;
	}
	return true;
}

static int
mk_schemes(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i;

	if (!list_ok(w, v, "schemes"))
		return -1;
	bw->b->schemes = 0;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *s = v->kids[i];
		if (!pw_is(w, s, PNODE_STR))
			continue;
		if (strcmp(s->str, "https") == 0)
			bw->b->schemes |= SCHEME_HTTPS;
		else if (strcmp(s->str, "http") == 0)
			bw->b->schemes |= SCHEME_HTTP;
		else
			pw_err(w, s, "unknown scheme \"%.16s\" (https or http)",
			    s->str);
	}
	return 0;
}

static int
mk_ports(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i;

	bw->ports_at = v;
	if (!list_ok(w, v, "ports"))
		return -1;
	for (i = 0; i < v->nkids; i++)
		if (pw_uint(
		        w, v->kids[i], 1, 65535, false, &bw->ports[bw->nports]))
			bw->nports++;
	return 0;
}

/* Lowercase FQDN with a dot, or "*.suffix"; no IPs, ports, paths. */
static int
host_item(struct pwalk *w, const struct pnode *h, struct bstrs *out)
{
	char norm[POLICY_NAME_MAX + 8];
	struct policy_rule r;
	struct err e;

	if (!pw_is(w, h, PNODE_STR))
		return -1;
	memset(&r, 0, sizeof(r));
	if (policy_target_parse(h->str, &r, &e) == -1) {
		pw_err(w, h, "invalid host: %s", e.msg);
		return -1;
	}
	(void)snprintf(norm, sizeof(norm), "%s", r.target);
	bool bad = r.kind == POLICY_TARGET_IP || r.kind == POLICY_TARGET_CIDR;
	policy_rule_clear(&r);
	if (bad) {
		pw_err(w, h, "binding hosts are names, not addresses");
		return -1;
	}
	if (strcmp(norm, h->str) != 0) {
		pw_err(w, h, "host \"%.255s\" must be written \"%s\"", h->str,
		    norm);
		return -1;
	}
	if (strchr(norm[0] == '*' ? norm + 2 : norm, '.') == NULL) {
		pw_err(w, h, "host \"%s\" needs a dot", norm);
		return -1;
	}
	if ((out->v[out->n] = strdup(norm)) == NULL)
		return -1;
	out->n++;
	return 0;
}

static int
mk_hosts(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i;

	bw->have_hosts = true;
	if (!list_ok(w, v, "hosts"))
		return -1;
	if ((bw->b->hosts.v = calloc(v->nkids, sizeof(char *))) == NULL)
		return -1;
	for (i = 0; i < v->nkids; i++)
		(void)host_item(w, v->kids[i], &bw->b->hosts);
	return 0;
}

static int
mk_methods(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i, k;

	if (!list_ok(w, v, "methods"))
		return -1;
	bw->b->methods = 0;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *m = v->kids[i];
		if (!pw_is(w, m, PNODE_STR))
			continue;
		for (k = 0; k < NMETHODS; k++)
			if (strcmp(m->str, method_names[k]) == 0)
				break;
		if (k == NMETHODS)
			pw_err(w, m, "unknown method \"%.16s\"", m->str);
		else
			bw->b->methods |= 1u << k;
	}
	return 0;
}

/* "/exact" or "/prefix*": '*' only last; no query, fragment, spaces. */
static bool
path_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > POLICY_PATH_PATTERN_MAX || s[0] != '/')
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#')
			return false;
		if (c == '*' && i != n - 1)
			return false;
	}
	return true;
}

static int
mk_paths(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	struct bstrs *ps = &bw->b->paths;
	size_t i;

	if (!list_ok(w, v, "paths"))
		return -1;
	bstrs_free(ps);
	memset(ps, 0, sizeof(*ps));
	if ((ps->v = calloc(v->nkids, sizeof(char *))) == NULL)
		return -1;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *p = v->kids[i];
		if (!pw_is(w, p, PNODE_STR))
			continue;
		if (!path_ok(p->str, p->len)) {
			pw_err(w, p,
			    "path must start with '/', '*' only at "
			    "the end, no spaces, '?' or '#'");
			continue;
		}
		if (pw_strdup(w, p, &ps->v[ps->n]))
			ps->n++;
	}
	return 0;
}

static const struct pkey match_keys[] = {
    {"schemes", mk_schemes},
    {"ports", mk_ports},
    {"hosts", mk_hosts},
    {"methods", mk_methods},
    {"paths", mk_paths},
};

/* Deprecated ports must be the scheme's own port. */
static void
match_ports_check(struct pwalk *w, struct bwalk *bw)
{
	size_t i;

	for (i = 0; i < bw->nports; i++) {
		unsigned long p = bw->ports[i];
		if ((p == 443 && (bw->b->schemes & SCHEME_HTTPS)) ||
		    (p == 80 && (bw->b->schemes & SCHEME_HTTP)))
			continue;
		pw_err(w, bw->ports_at,
		    "port %lu does not follow the scheme "
		    "(https 443, http 80)",
		    p);
	}
}

static int
bk_match(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	(void)pw_map(w, v, match_keys, 5, bw);
	if (v->type != PNODE_MAP)
		return -1;
	if (!bw->have_hosts)
		pw_err(w, v, "match needs hosts");
	match_ports_check(w, bw);
	return 0;
}

/* ---- bindings: auth ---- */

static int
ak_type(struct pwalk *w, const struct pnode *v, void *obj)
{
	static const char *const names[] = {
	    "bearer", "basic", "apiKey", "customHeaders", "passthrough"};
	struct bwalk *bw = obj;
	size_t i;

	if (!pw_is(w, v, PNODE_STR))
		return -1;
	for (i = 0; i < 5; i++)
		if (strcmp(v->str, names[i]) == 0) {
			bw->b->auth = (enum policy_auth_type)i;
			bw->have_type = true;
			return 0;
		}
	pw_err(w, v,
	    "unknown auth type \"%.32s\" (bearer, basic, apiKey, "
	    "customHeaders or passthrough)",
	    v->str);
	return -1;
}

static int
ak_credential(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->cred_at = v;
	return walk_name(w, v, &bw->b->credential) ? 0 : -1;
}

static bool
walk_header_name(struct pwalk *w, const struct pnode *v, char **out)
{
	if (!pw_is(w, v, PNODE_STR))
		return false;
	if (!header_name_ok(v->str)) {
		pw_err(w, v, "invalid header name \"%.64s\"", v->str);
		return false;
	}
	if (header_reserved(v->str)) {
		pw_err(w, v, "header \"%s\" is reserved", v->str);
		return false;
	}
	return pw_strdup(w, v, out);
}

static int
ak_name(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->name_at = v;
	return walk_header_name(w, v, &bw->b->header) ? 0 : -1;
}

static int
hk_name(struct pwalk *w, const struct pnode *v, void *obj)
{
	return walk_header_name(w, v, &((struct bheader *)obj)->name) ? 0 : -1;
}

static int
hk_credential(struct pwalk *w, const struct pnode *v, void *obj)
{
	return walk_name(w, v, &((struct bheader *)obj)->credential) ? 0 : -1;
}

static const struct pkey header_keys[] = {
    {"name", hk_name},
    {"credential", hk_credential},
};

static int
ak_headers(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i;

	bw->headers_at = v;
	if (!list_ok(w, v, "headers"))
		return -1;
	if ((bw->b->headers = calloc(v->nkids, sizeof(struct bheader))) == NULL)
		return -1;
	bw->b->nheaders = v->nkids;
	for (i = 0; i < v->nkids; i++) {
		uint64_t seen =
		    pw_map(w, v->kids[i], header_keys, 2, &bw->b->headers[i]);
		if (v->kids[i]->type == PNODE_MAP && seen != 3)
			pw_err(w, v->kids[i],
			    "header needs name and "
			    "credential");
	}
	return 0;
}

static int
uk_credential(struct pwalk *w, const struct pnode *v, void *obj)
{
	return walk_name(w, v, &((struct bsubst *)obj)->credential) ? 0 : -1;
}

static int
uk_placeholder(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bsubst *s = obj;
	size_t i;

	if (!pw_is(w, v, PNODE_STR))
		return -1;
	if (v->len == 0 || v->len > PLACEHOLDER_MAX) {
		pw_err(
		    w, v, "placeholder must be 1 to %d bytes", PLACEHOLDER_MAX);
		return -1;
	}
	for (i = 0; i < v->len; i++)
		if ((unsigned char)v->str[i] < 0x20 || v->str[i] == 0x7f) {
			pw_err(w, v, "control character in placeholder");
			return -1;
		}
	return pw_strdup(w, v, &s->placeholder) ? 0 : -1;
}

static int
uk_in(struct pwalk *w, const struct pnode *v, void *obj)
{
	static const char *const names[] = {"path", "query", "header", "body"};
	struct bsubst *s = obj;
	size_t i, k;

	if (!list_ok(w, v, "in"))
		return -1;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *x = v->kids[i];
		if (!pw_is(w, x, PNODE_STR))
			continue;
		for (k = 0; k < 4; k++)
			if (strcmp(x->str, names[k]) == 0)
				break;
		if (k == 4)
			pw_err(w, x,
			    "unknown surface \"%.16s\" (path, query, "
			    "header or body)",
			    x->str);
		else
			s->in |= 1u << k;
	}
	return 0;
}

static const struct pkey subst_keys[] = {
    {"credential", uk_credential},
    {"placeholder", uk_placeholder},
    {"in", uk_in},
};

static int
ak_substitutions(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i;

	bw->subst_at = v;
	if (!list_ok(w, v, "substitutions"))
		return -1;
	if ((bw->b->subst = calloc(v->nkids, sizeof(struct bsubst))) == NULL)
		return -1;
	bw->b->nsubst = v->nkids;
	for (i = 0; i < v->nkids; i++) {
		uint64_t seen =
		    pw_map(w, v->kids[i], subst_keys, 3, &bw->b->subst[i]);
		if (v->kids[i]->type == PNODE_MAP && seen != 7)
			pw_err(w, v->kids[i],
			    "substitution needs credential, "
			    "placeholder and in");
	}
	return 0;
}

static const struct pkey auth_keys[] = {
    {"type", ak_type},
    {"credential", ak_credential},
    {"name", ak_name},
    {"headers", ak_headers},
    {"substitutions", ak_substitutions},
};

/* Which auth keys each type needs (+) or refuses (-). */
static void
auth_shape(struct pwalk *w, const struct pnode *v, struct bwalk *bw)
{
	enum policy_auth_type t = bw->b->auth;
	bool want_cred = t == POLICY_AUTH_BEARER || t == POLICY_AUTH_BASIC ||
	    t == POLICY_AUTH_APIKEY;
	bool want_name = t == POLICY_AUTH_APIKEY;
	bool want_headers = t == POLICY_AUTH_CUSTOM_HEADERS;

	if (want_cred != (bw->cred_at != NULL))
		pw_err(w, bw->cred_at ? bw->cred_at : v,
		    want_cred ? "auth needs credential"
		              : "this auth type takes no credential");
	if (want_name != (bw->name_at != NULL))
		pw_err(w, bw->name_at ? bw->name_at : v,
		    want_name ? "apiKey auth needs name"
		              : "only apiKey auth takes name");
	if (want_headers != (bw->headers_at != NULL))
		pw_err(w, bw->headers_at ? bw->headers_at : v,
		    want_headers ? "customHeaders auth needs headers"
		                 : "only customHeaders auth takes headers");
	if (t == POLICY_AUTH_PASSTHROUGH && bw->subst_at == NULL)
		pw_err(w, v, "passthrough auth needs substitutions");
}

static int
bk_auth(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	(void)pw_map(w, v, auth_keys, 5, bw);
	if (v->type != PNODE_MAP)
		return -1;
	if (!bw->have_type) {
		pw_err(w, v, "auth needs type");
		return -1;
	}
	auth_shape(w, v, bw);
	return 0;
}

static int
bk_name(struct pwalk *w, const struct pnode *v, void *obj)
{
	return walk_name(w, v, &((struct bwalk *)obj)->b->name) ? 0 : -1;
}

static const struct pkey binding_keys[] = {
    {"name", bk_name},
    {"match", bk_match},
    {"auth", bk_auth},
};

static int
paths_default(struct policy_binding *b)
{
	if (b->paths.n > 0)
		return 0;
	if ((b->paths.v = calloc(1, sizeof(char *))) == NULL ||
	    (b->paths.v[0] = strdup("/*")) == NULL)
		return -1;
	b->paths.n = 1;
	return 0;
}

static void
binding_item(struct pwalk *w, const struct pnode *v, struct policy_config *cfg)
{
	struct bwalk bw;
	size_t e0 = w->errs;
	uint64_t seen;

	memset(&bw, 0, sizeof(bw));
	if ((bw.b = calloc(1, sizeof(*bw.b))) == NULL) {
		pw_err(w, v, "out of memory");
		return;
	}
	bw.b->line = v->line;
	bw.b->col = v->col;
	bw.b->schemes = SCHEME_HTTPS;
	bw.b->methods = METHODS_DEFAULT;
	seen = pw_map(w, v, binding_keys, 3, &bw);
	if (v->type == PNODE_MAP && seen != 7)
		pw_err(w, v, "binding needs name, match and auth");
	if (w->errs == e0 && paths_default(bw.b) == 0 &&
	    push_ptr((void ***)&cfg->bindings, &cfg->nbindings, bw.b) == 0)
		return;
	policy_binding_free(bw.b);
}

int
policy_binding_walk(
    struct pwalk *w, const struct pnode *v, struct policy_config *cfg)
{
	size_t i, j;

	if (v->type == PNODE_NULL)
		return 0;
	if (!pw_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids > POLICY_BINDINGS_MAX) {
		pw_err(w, v, "at most %d bindings", POLICY_BINDINGS_MAX);
		return -1;
	}
	for (i = 0; i < v->nkids; i++)
		binding_item(w, v->kids[i], cfg);
	for (i = 0; i < cfg->nbindings; i++)
		for (j = 0; j < i; j++)
			if (strcmp(cfg->bindings[i]->name,
			        cfg->bindings[j]->name) == 0) {
				struct pnode at = {
				    .line = cfg->bindings[i]->line,
				    .col = cfg->bindings[i]->col};
				pw_err(w, &at, "duplicate binding \"%s\"",
				    cfg->bindings[i]->name);
			}
	return 0;
}

/* ---- cross checks ---- */

static bool
suffix_of(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s && name[n - s - 1] == '.' &&
	    strcmp(name + n - s, suffix) == 0;
}

/* A deny rule of these lists naming something under *.suffix. */
static const struct policy_rule *
deny_below(const struct policy_rule *r, size_t n, const char *suffix)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const char *t = r[i].target;
		if (r[i].action != POLICY_DENY ||
		    (r[i].kind != POLICY_TARGET_DOMAIN &&
		        r[i].kind != POLICY_TARGET_WILDCARD))
			continue;
		if (r[i].kind == POLICY_TARGET_WILDCARD)
			t += 2;
		if (suffix_of(t, suffix) ||
		    (r[i].kind == POLICY_TARGET_WILDCARD &&
		        strcmp(t, suffix) == 0))
			return &r[i];
	}
	return NULL;
}

static bool
wildcard_covered(const struct policy *p, const char *suffix, struct err *e)
{
	char probe[POLICY_NAME_MAX + 2];
	const struct policy_rule *r = NULL, *d;

	/* Any label decides like any other unless a rule names it. */
	if ((size_t)snprintf(probe, sizeof(probe), "x.%s", suffix) >=
	    sizeof(probe))
		return false;
	if (policy_match_domain(p, probe, &r) != POLICY_ALLOW || r == NULL ||
	    r->kind != POLICY_TARGET_WILDCARD ||
	    !(strcmp(r->target + 2, suffix) == 0 ||
	        suffix_of(suffix, r->target + 2))) {
		err_set(e,
		    "binding host \"*.%s\" is not covered by an "
		    "explicit wildcard allow rule",
		    suffix);
		return false;
	}
	if ((d = deny_below(p->always_deny, p->nalways_deny, suffix)) ||
	    (d = deny_below(p->rules, p->nrules, suffix))) {
		err_set(e, "binding host \"*.%s\" is partly denied by \"%s\"",
		    suffix, d->display);
		return false;
	}
	return true;
}

bool
policy_host_covered(const struct policy *p, const char *host, struct err *e)
{
	const struct policy_rule *r = NULL;

	if (p == NULL || host == NULL)
		return false;
	if (host[0] == '*' && host[1] == '.')
		return wildcard_covered(p, host + 2, e);
	if (policy_match_domain(p, host, &r) == POLICY_ALLOW && r != NULL)
		return true;
	err_set(e,
	    "binding host \"%.255s\" is not covered by an explicit "
	    "allow rule",
	    host);
	return false;
}

static bool
hosts_overlap(const char *a, const char *b)
{
	bool wa = a[0] == '*', wb = b[0] == '*';

	/* exact beats wildcard: only equal kinds compete */
	if (wa != wb)
		return false;
	if (!wa)
		return strcmp(a, b) == 0;
	return strcmp(a, b) == 0 || suffix_of(a + 2, b + 2) ||
	    suffix_of(b + 2, a + 2);
}

static bool
paths_overlap(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	bool pa = a[la - 1] == '*', pb = b[lb - 1] == '*';

	if (pa)
		la--;
	if (pb)
		lb--;
	if (pa && pb)
		return strncmp(a, b, la < lb ? la : lb) == 0;
	if (pa)
		return lb >= la && strncmp(a, b, la) == 0;
	if (pb)
		return la >= lb && strncmp(a, b, lb) == 0;
	return strcmp(a, b) == 0;
}

static bool
any_pair(const struct bstrs *x, const struct bstrs *y,
    bool (*f)(const char *, const char *))
{
	size_t i, j;

	for (i = 0; i < x->n; i++)
		for (j = 0; j < y->n; j++)
			if (f(x->v[i], y->v[j]))
				return true;
	return false;
}

bool
policy_bindings_overlap(
    const struct policy_binding *a, const struct policy_binding *b)
{
	return (a->schemes & b->schemes) != 0 &&
	    (a->methods & b->methods) != 0 &&
	    any_pair(&a->hosts, &b->hosts, hosts_overlap) &&
	    any_pair(&a->paths, &b->paths, paths_overlap);
}

static bool
cred_exists(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->ncredentials; i++)
		if (strcmp(p->credentials[i]->name, name) == 0)
			return true;
	return false;
}

static int
binding_refs(
    const struct policy *p, const struct policy_binding *b, struct err *e)
{
	const char *missing = NULL;
	size_t i;

	if (b->credential && !cred_exists(p, b->credential))
		missing = b->credential;
	for (i = 0; missing == NULL && i < b->nheaders; i++)
		if (!cred_exists(p, b->headers[i].credential))
			missing = b->headers[i].credential;
	for (i = 0; missing == NULL && i < b->nsubst; i++)
		if (!cred_exists(p, b->subst[i].credential))
			missing = b->subst[i].credential;
	if (missing == NULL)
		return 0;
	err_set(e, "binding \"%s\" references unknown credential \"%s\"",
	    b->name, missing);
	return -1;
}

/* Runs every check; reports each problem through report(). */
static int
check_all(const struct policy *p,
    void (*report)(
        void *arg, const struct policy_binding *b, const struct err *e),
    void *arg)
{
	struct err e;
	size_t i, j, k;
	int rc = 0;

	for (i = 0; i < p->nbindings; i++) {
		const struct policy_binding *b = p->bindings[i];
		if (binding_refs(p, b, &e) == -1) {
			report(arg, b, &e);
			rc = -1;
		}
		for (k = 0; k < b->hosts.n; k++)
			if (!policy_host_covered(p, b->hosts.v[k], &e)) {
				report(arg, b, &e);
				rc = -1;
			}
		for (j = 0; j < i; j++)
			if (policy_bindings_overlap(p->bindings[j], b)) {
				err_set(&e,
				    "bindings \"%s\" and \"%s\" can "
				    "match the same request",
				    p->bindings[j]->name, b->name);
				report(arg, b, &e);
				rc = -1;
			}
	}
	return rc;
}

static void
report_first(void *arg, const struct policy_binding *b, const struct err *e)
{
	struct err *out = arg;

	(void)b;
	if (out != NULL && out->msg[0] == '\0')
		err_set(out, "%s", e->msg);
}

int
policy_check_bindings(const struct policy *p, struct err *e)
{
	err_clear(e);
	return check_all(p, report_first, e);
}

static void
report_diag(void *arg, const struct policy_binding *b, const struct err *e)
{
	struct pnode at = {.line = b->line, .col = b->col};

	pw_err(arg, &at, "%s", e->msg);
}

void
policy_cred_check(
    struct pwalk *w, const struct pnode *root, const struct policy *p)
{
	(void)root;
	(void)check_all(p, report_diag, w);
}

/* ---- canonical YAML ---- */

static void
yaml_strs(struct ybuf *b, const char *key, const struct bstrs *s)
{
	size_t i;

	yb_printf(b, "      %s: [", key);
	for (i = 0; i < s->n; i++) {
		yb_printf(b, "%s", i ? ", " : "");
		yb_quoted(b, s->v[i]);
	}
	yb_printf(b, "]\n");
}

static void
yaml_match(struct ybuf *b, const struct policy_binding *x)
{
	const char *sep = "";
	size_t k;

	yb_printf(b, "    match:\n      schemes: [%s%s%s]\n",
	    (x->schemes & SCHEME_HTTPS) ? "\"https\"" : "",
	    (x->schemes & SCHEME_HTTPS) && (x->schemes & SCHEME_HTTP) ? ", "
	                                                              : "",
	    (x->schemes & SCHEME_HTTP) ? "\"http\"" : "");
	yaml_strs(b, "hosts", &x->hosts);
	yb_printf(b, "      methods: [");
	for (k = 0; k < NMETHODS; k++)
		if (x->methods & (1u << k)) {
			yb_printf(b, "%s\"%s\"", sep, method_names[k]);
			sep = ", ";
		}
	yb_printf(b, "]\n");
	yaml_strs(b, "paths", &x->paths);
}

static void
yaml_subst(struct ybuf *b, const struct bsubst *s)
{
	static const char *const names[] = {"path", "query", "header", "body"};
	const char *sep = "";
	size_t k;

	yb_printf(b, "        - credential: ");
	yb_quoted(b, s->credential);
	yb_printf(b, "\n          placeholder: ");
	yb_quoted(b, s->placeholder);
	yb_printf(b, "\n          in: [");
	for (k = 0; k < 4; k++)
		if (s->in & (1u << k)) {
			yb_printf(b, "%s\"%s\"", sep, names[k]);
			sep = ", ";
		}
	yb_printf(b, "]\n");
}

static void
yaml_auth(struct ybuf *b, const struct policy_binding *x)
{
	static const char *const types[] = {
	    "bearer", "basic", "apiKey", "customHeaders", "passthrough"};
	size_t i;

	yb_printf(b, "    auth:\n      type: \"%s\"\n", types[x->auth]);
	if (x->credential != NULL) {
		yb_printf(b, "      credential: ");
		yb_quoted(b, x->credential);
		yb_printf(b, "\n");
	}
	if (x->header != NULL) {
		yb_printf(b, "      name: ");
		yb_quoted(b, x->header);
		yb_printf(b, "\n");
	}
	if (x->nheaders > 0)
		yb_printf(b, "      headers:\n");
	for (i = 0; i < x->nheaders; i++) {
		yb_printf(b, "        - name: ");
		yb_quoted(b, x->headers[i].name);
		yb_printf(b, "\n          credential: ");
		yb_quoted(b, x->headers[i].credential);
		yb_printf(b, "\n");
	}
	if (x->nsubst > 0)
		yb_printf(b, "      substitutions:\n");
	for (i = 0; i < x->nsubst; i++)
		yaml_subst(b, &x->subst[i]);
}

void
policy_cred_yaml(struct ybuf *b, const struct policy *p)
{
	size_t i;

	if (p->ncredentials > 0)
		yb_printf(b, "credentials:\n");
	for (i = 0; i < p->ncredentials; i++) {
		const struct policy_credential *c = p->credentials[i];
		yb_printf(b, "  - name: ");
		yb_quoted(b, c->name);
		if (c->source == POLICY_CRED_FILE) {
			yb_printf(b,
			    "\n    source:\n      type: \"file\"\n"
			    "      path: ");
			yb_quoted(b, c->path);
			yb_printf(b, "\n");
		} else
			yb_printf(b,
			    "\n    source:\n      type: \"inline\"\n"
			    "      value: \"[REDACTED]\"\n");
	}
	if (p->nbindings > 0)
		yb_printf(b, "bindings:\n");
	for (i = 0; i < p->nbindings; i++) {
		yb_printf(b, "  - name: ");
		yb_quoted(b, p->bindings[i]->name);
		yb_printf(b, "\n");
		yaml_match(b, p->bindings[i]);
		yaml_auth(b, p->bindings[i]);
	}
}
