/*
 * policy_binding_walk: the schema of the bindings list (contract §4):
 * match (schemes, deprecated ports, hosts, methods, paths) and auth (type,
 * credential, header name, headers, substitutions), each key's value
 * checked where it is, and each auth type's shape. The cross checks that
 * need the whole snapshot are policy_binding_check.c's.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy_aws.h"
#include "policy/policy_binding_int.h"
#include "policy/policy_cred.h"
#include "policy/policy_github_walk.h"
#include "policy/policy_oauth2_walk.h"
#include "policy/policy_walk.h"

static const char *const reserved_headers[] = {"host", "content-length",
    "content-type", "transfer-encoding", "connection", "upgrade", "te",
    "trailer", "proxy-authorization", "proxy-authenticate", "forwarded",
    "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"};

/* ---- header names ---- */

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

/* ---- bindings: match ---- */

struct bwalk {
	struct policy_binding *b;
	const struct pnode *ports_at;
	unsigned long ports[POLICY_BINDING_LIST_MAX];
	size_t nports;
	bool have_hosts, have_type;
	const struct pnode *cred_at, *name_at, *headers_at, *subst_at;
	const struct pnode *akid_at, *secret_at, *aws_at; /* aws_at: any */
};

static int
mk_schemes(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i;

	if (!policy_walk_list(w, v, "schemes"))
		return -1;
	bw->b->schemes = 0;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *s = v->kids[i];
		if (!policy_walk_is(w, s, PNODE_STR))
			continue;
		if (strcmp(s->str, "https") == 0)
			bw->b->schemes |= POLICY_SCHEME_HTTPS;
		else if (strcmp(s->str, "http") == 0)
			bw->b->schemes |= POLICY_SCHEME_HTTP;
		else
			policy_walk_err(w, s,
			    "unknown scheme \"%.16s\" (https or http)", s->str);
	}
	return 0;
}

static int
mk_ports(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	size_t i;

	bw->ports_at = v;
	if (!policy_walk_list(w, v, "ports"))
		return -1;
	for (i = 0; i < v->nkids; i++)
		if (policy_walk_uint(
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

	if (!policy_walk_is(w, h, PNODE_STR))
		return -1;
	memset(&r, 0, sizeof(r));
	if (policy_target_parse(h->str, &r, &e) == -1) {
		policy_walk_err(w, h, "invalid host: %s", e.msg);
		return -1;
	}
	(void)snprintf(norm, sizeof(norm), "%s", r.target);
	bool bad = r.kind == POLICY_TARGET_IP || r.kind == POLICY_TARGET_CIDR;
	policy_rule_clear(&r);
	if (bad) {
		policy_walk_err(w, h, "binding hosts are names, not addresses");
		return -1;
	}
	if (strcmp(norm, h->str) != 0) {
		policy_walk_err(w, h, "host \"%.255s\" must be written \"%s\"",
		    h->str, norm);
		return -1;
	}
	if (strchr(norm[0] == '*' ? norm + 2 : norm, '.') == NULL) {
		policy_walk_err(w, h, "host \"%s\" needs a dot", norm);
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
	if (!policy_walk_list(w, v, "hosts"))
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
	size_t i;

	if (!policy_walk_list(w, v, "methods"))
		return -1;
	bw->b->methods = 0;
	bw->b->methods_named = true;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *m = v->kids[i];
		unsigned bit;
		if (!policy_walk_is(w, m, PNODE_STR))
			continue;
		if ((bit = policy_method_bit(m->str, m->len)) == 0)
			policy_walk_err(
			    w, m, "unknown method \"%.16s\"", m->str);
		else
			bw->b->methods |= bit;
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

	if (!policy_walk_list(w, v, "paths"))
		return -1;
	policy_bstrs_free(ps);
	memset(ps, 0, sizeof(*ps));
	if ((ps->v = calloc(v->nkids, sizeof(char *))) == NULL)
		return -1;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *p = v->kids[i];
		if (!policy_walk_is(w, p, PNODE_STR))
			continue;
		if (!path_ok(p->str, p->len)) {
			policy_walk_err(w, p,
			    "path must start with '/', '*' only at "
			    "the end, no spaces, '?' or '#'");
			continue;
		}
		if (policy_walk_strdup(w, p, &ps->v[ps->n]))
			ps->n++;
	}
	return 0;
}

static const struct pkey match_keys[] = {
    {"schemes", mk_schemes, 0},
    {"ports", mk_ports, 0},
    {"hosts", mk_hosts, 0},
    {"methods", mk_methods, 0},
    {"paths", mk_paths, 0},
};

/* Deprecated ports must be the scheme's own port. */
static void
match_ports_check(struct pwalk *w, struct bwalk *bw)
{
	size_t i;

	for (i = 0; i < bw->nports; i++) {
		unsigned long p = bw->ports[i];
		if ((p == policy_scheme_port(POLICY_SCHEME_HTTPS) &&
		        (bw->b->schemes & POLICY_SCHEME_HTTPS)) ||
		    (p == policy_scheme_port(POLICY_SCHEME_HTTP) &&
		        (bw->b->schemes & POLICY_SCHEME_HTTP)))
			continue;
		policy_walk_err(w, bw->ports_at,
		    "port %lu does not follow the scheme "
		    "(https 443, http 80)",
		    p);
	}
}

static int
bk_match(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	(void)policy_walk_map(w, v, match_keys, 5, bw);
	if (v->type != PNODE_MAP)
		return -1;
	if (!bw->have_hosts)
		policy_walk_err(w, v, "match needs hosts");
	match_ports_check(w, bw);
	return 0;
}

/* ---- bindings: auth ---- */

static int
ak_type(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;
	const char *name;
	unsigned i;

	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	for (i = 0; (name = policy_auth_type_name(i)) != NULL; i++)
		if (strcmp(v->str, name) == 0) {
			bw->b->auth = (enum policy_auth_type)i;
			bw->have_type = true;
			return 0;
		}
	policy_walk_err(w, v,
	    "unknown auth type \"%.32s\" (bearer, basic, apiKey, "
	    "customHeaders, passthrough, awsSigV4, oauth2 or githubApp)",
	    v->str);
	return -1;
}

static int
ak_credential(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->cred_at = v;
	return policy_cred_walk_name(w, v, &bw->b->credential) ? 0 : -1;
}

static bool
walk_header_name(struct pwalk *w, const struct pnode *v, char **out)
{
	if (!policy_walk_is(w, v, PNODE_STR))
		return false;
	if (!header_name_ok(v->str)) {
		policy_walk_err(w, v, "invalid header name \"%.64s\"", v->str);
		return false;
	}
	if (header_reserved(v->str)) {
		policy_walk_err(w, v, "header \"%s\" is reserved", v->str);
		return false;
	}
	return policy_walk_strdup(w, v, out);
}

static int
ak_name(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->name_at = v;
	return walk_header_name(w, v, &bw->b->header) ? 0 : -1;
}

/* A header name into the char * field at obj. */
static int
header_name_key(struct pwalk *w, const struct pnode *v, void *obj)
{
	return walk_header_name(w, v, obj) ? 0 : -1;
}

/* A credential's name into the char * field at obj. */
static int
credential_key(struct pwalk *w, const struct pnode *v, void *obj)
{
	return policy_cred_walk_name(w, v, obj) ? 0 : -1;
}

static const struct pkey header_keys[] = {
    {"name", header_name_key, offsetof(struct bheader, name)},
    {"credential", credential_key, offsetof(struct bheader, credential)},
};

/*
 * A list (policy_walk_list) of mappings that each need every key of keys: an array
 * of v->nkids records of size bytes, each walked against keys (need is
 * the error of one without them all). NULL: not a list, out of memory.
 */
static void *
walk_records(struct pwalk *w, const struct pnode *v, const char *what,
    const struct pkey *keys, size_t nkeys, size_t size, const char *need)
{
	uint64_t all = (1ull << nkeys) - 1;
	char *rec;
	size_t i;

	if (!policy_walk_list(w, v, what))
		return NULL;
	if ((rec = calloc(v->nkids, size)) == NULL)
		return NULL;
	for (i = 0; i < v->nkids; i++)
		if (policy_walk_map(
		        w, v->kids[i], keys, nkeys, rec + i * size) != all &&
		    v->kids[i]->type == PNODE_MAP)
			policy_walk_err(w, v->kids[i], "%s", need);
	return rec;
}

static int
ak_headers(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->headers_at = v;
	bw->b->headers = walk_records(w, v, "headers", header_keys, 2,
	    sizeof(struct bheader), "header needs name and credential");
	if (bw->b->headers == NULL)
		return -1;
	bw->b->nheaders = v->nkids;
	return 0;
}

static int
uk_placeholder(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bsubst *s = obj;
	size_t i;

	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (v->len == 0 || v->len > POLICY_PLACEHOLDER_MAX) {
		policy_walk_err(w, v, "placeholder must be 1 to %d bytes",
		    POLICY_PLACEHOLDER_MAX);
		return -1;
	}
	for (i = 0; i < v->len; i++)
		if ((unsigned char)v->str[i] < 0x20 || v->str[i] == 0x7f) {
			policy_walk_err(
			    w, v, "control character in placeholder");
			return -1;
		}
	return policy_walk_strdup(w, v, &s->placeholder) ? 0 : -1;
}

static int
uk_in(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bsubst *s = obj;
	const char *name;
	size_t i;
	unsigned k;

	if (!policy_walk_list(w, v, "in"))
		return -1;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *x = v->kids[i];
		if (!policy_walk_is(w, x, PNODE_STR))
			continue;
		for (k = 0; (name = policy_subst_in_name(1u << k)) != NULL; k++)
			if (strcmp(x->str, name) == 0)
				break;
		if (name == NULL)
			policy_walk_err(w, x,
			    "unknown surface \"%.16s\" (path, query, "
			    "header or body)",
			    x->str);
		else
			s->in |= 1u << k;
	}
	return 0;
}

static const struct pkey subst_keys[] = {
    {"credential", credential_key, offsetof(struct bsubst, credential)},
    {"placeholder", uk_placeholder, 0},
    {"in", uk_in, 0},
};

static int
ak_substitutions(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->subst_at = v;
	bw->b->subst = walk_records(w, v, "substitutions", subst_keys, 3,
	    sizeof(struct bsubst),
	    "substitution needs credential, placeholder and in");
	if (bw->b->subst == NULL)
		return -1;
	bw->b->nsubst = v->nkids;
	return 0;
}

/* ---- awsSigV4 ---- */

static int
ak_aws_cred(struct pwalk *w, const struct pnode *v, struct bwalk *bw,
    char **out, const struct pnode **at)
{
	bw->aws_at = v;
	if (at != NULL)
		*at = v;
	return policy_cred_walk_name(w, v, out) ? 0 : -1;
}

static int
ak_akid(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	return ak_aws_cred(w, v, bw, &bw->b->aws.akid, &bw->akid_at);
}

static int
ak_secret(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	return ak_aws_cred(w, v, bw, &bw->b->aws.secret, &bw->secret_at);
}

static int
ak_token(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	return ak_aws_cred(w, v, bw, &bw->b->aws.token, NULL);
}

static int
ak_region(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->aws_at = v;
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (!policy_aws_region_ok(v->str)) {
		policy_walk_err(w, v,
		    "invalid AWS region \"%.40s\" (like us-east-1)", v->str);
		return -1;
	}
	return policy_walk_strdup(w, v, &bw->b->aws.region) ? 0 : -1;
}

static int
ak_service(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	bw->aws_at = v;
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (!policy_aws_service_ok(v->str)) {
		policy_walk_err(w, v,
		    "invalid AWS service \"%.70s\" (its signing name, "
		    "like s3 or bedrock)",
		    v->str);
		return -1;
	}
	return policy_walk_strdup(w, v, &bw->b->aws.service) ? 0 : -1;
}

/* awsSigV4: both keys; no substitutions. */
static void
aws_shape(struct pwalk *w, const struct pnode *v, struct bwalk *bw)
{
	if (bw->akid_at == NULL || bw->secret_at == NULL)
		policy_walk_err(w, v,
		    "awsSigV4 auth needs accessKeyId and secretAccessKey");
	if (bw->subst_at != NULL)
		policy_walk_err(w, bw->subst_at,
		    "awsSigV4 auth takes no substitutions (egressd signs "
		    "the request as it forwards it)");
}

/* After the whole binding (match may follow auth): what the binding does
 * not state of the scope, each host must carry (policy_aws_scope). */
static void
aws_hosts_check(struct pwalk *w, const struct pnode *v, struct bwalk *bw)
{
	char region[POLICY_AWS_REGION_MAX + 1];
	char service[POLICY_AWS_SERVICE_MAX + 1];
	const struct policy_binding *b = bw->b;
	size_t i;

	if (b->auth != POLICY_AUTH_AWS_SIGV4 ||
	    (b->aws.region != NULL && b->aws.service != NULL))
		return;
	for (i = 0; i < b->hosts.n; i++)
		if (!policy_aws_scope(b->hosts.v[i], region, service))
			policy_walk_err(w, v,
			    "awsSigV4 auth needs region and service: host "
			    "\"%.255s\" names neither",
			    b->hosts.v[i]);
}

static const struct pkey auth_keys[] = {
    {"type", ak_type, 0},
    {"credential", ak_credential, 0},
    {"name", ak_name, 0},
    {"headers", ak_headers, 0},
    {"substitutions", ak_substitutions, 0},
    {"accessKeyId", ak_akid, 0},
    {"secretAccessKey", ak_secret, 0},
    {"sessionToken", ak_token, 0},
    {"region", ak_region, 0},
    {"service", ak_service, 0},
    {"grant", policy_oauth2_walk_grant, offsetof(struct bwalk, b)},
    {"tokenUrl", policy_oauth2_walk_url, offsetof(struct bwalk, b)},
    {"clientId", policy_oauth2_walk_client_id, offsetof(struct bwalk, b)},
    {"clientSecret", policy_oauth2_walk_secret, offsetof(struct bwalk, b)},
    {"refreshToken", policy_oauth2_walk_refresh, offsetof(struct bwalk, b)},
    {"scopes", policy_oauth2_walk_scopes, offsetof(struct bwalk, b)},
    {"audience", policy_oauth2_walk_audience, offsetof(struct bwalk, b)},
    {"clientAuth", policy_oauth2_walk_client_auth, offsetof(struct bwalk, b)},
    {"appId", policy_github_walk_app_id, offsetof(struct bwalk, b)},
    {"installationId", policy_github_walk_installation,
        offsetof(struct bwalk, b)},
    {"privateKey", policy_github_walk_key, offsetof(struct bwalk, b)},
    {"apiUrl", policy_github_walk_url, offsetof(struct bwalk, b)},
    {"repositories", policy_github_walk_repos, offsetof(struct bwalk, b)},
    {"permissions", policy_github_walk_perms, offsetof(struct bwalk, b)},
    {"tokenForm", policy_github_walk_form, offsetof(struct bwalk, b)},
};
#define NAUTH_KEYS (sizeof(auth_keys) / sizeof(auth_keys[0]))

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
		policy_walk_err(w, bw->cred_at ? bw->cred_at : v,
		    want_cred ? "auth needs credential"
		              : "this auth type takes no credential");
	if (want_name != (bw->name_at != NULL))
		policy_walk_err(w, bw->name_at ? bw->name_at : v,
		    want_name ? "apiKey auth needs name"
		              : "only apiKey auth takes name");
	if (want_headers != (bw->headers_at != NULL))
		policy_walk_err(w, bw->headers_at ? bw->headers_at : v,
		    want_headers ? "customHeaders auth needs headers"
		                 : "only customHeaders auth takes headers");
	if (t == POLICY_AUTH_PASSTHROUGH && bw->subst_at == NULL)
		policy_walk_err(w, v, "passthrough auth needs substitutions");
	if (t == POLICY_AUTH_AWS_SIGV4)
		aws_shape(w, v, bw);
	else if (bw->aws_at != NULL)
		policy_walk_err(w, bw->aws_at,
		    "only awsSigV4 auth takes accessKeyId, secretAccessKey, "
		    "sessionToken, region or service");
	policy_oauth2_shape(w, v, bw->b);
	policy_github_shape(w, v, bw->b);
}

static int
bk_auth(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct bwalk *bw = obj;

	(void)policy_walk_map(w, v, auth_keys, NAUTH_KEYS, bw);
	if (v->type != PNODE_MAP)
		return -1;
	if (!bw->have_type) {
		policy_walk_err(w, v, "auth needs type");
		return -1;
	}
	auth_shape(w, v, bw);
	return 0;
}

static int
bk_name(struct pwalk *w, const struct pnode *v, void *obj)
{
	return policy_cred_walk_name(w, v, &((struct bwalk *)obj)->b->name)
	    ? 0
	    : -1;
}

static const struct pkey binding_keys[] = {
    {"name", bk_name, 0},
    {"match", bk_match, 0},
    {"auth", bk_auth, 0},
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
		policy_walk_err(w, v, "out of memory");
		return;
	}
	bw.b->line = v->line;
	bw.b->col = v->col;
	bw.b->schemes = POLICY_SCHEME_HTTPS;
	bw.b->methods = POLICY_METHODS_DEFAULT;
	seen = policy_walk_map(w, v, binding_keys, 3, &bw);
	if (v->type == PNODE_MAP && seen != 7)
		policy_walk_err(w, v, "binding needs name, match and auth");
	else if (v->type == PNODE_MAP)
		aws_hosts_check(w, v, &bw);
	if (w->errs == e0 && paths_default(bw.b) == 0 &&
	    policy_walk_push((void ***)&cfg->bindings, &cfg->nbindings, bw.b) ==
	        0)
		return;
	policy_binding_free(bw.b);
}

static const char *
binding_name_at(const void *obj, struct pnode *at)
{
	const struct policy_binding *b = obj;

	at->line = b->line;
	at->col = b->col;
	return b->name;
}

int
policy_binding_walk(struct pwalk *w, const struct pnode *v, void *cfgp)
{
	struct policy_config *cfg = *(struct policy_config **)cfgp;

	return policy_walk_named_list(w, v, POLICY_BINDINGS_MAX, "binding",
	    binding_item, cfg, (void *const *const *)&cfg->bindings,
	    &cfg->nbindings, binding_name_at);
}
