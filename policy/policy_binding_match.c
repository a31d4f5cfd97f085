/*
 * policy_binding_match: what a binding's patterns match, once. The
 * runtime matcher (a request -> the one binding, none, or a tie) and the
 * load-time overlap check (can two bindings tie?) are both built on the
 * same three primitives: host_level (host pattern vs a normalized host),
 * path_match (path pattern vs a normalized path) and binding_level (a
 * whole binding vs a request). The overlap check asks the primitives about
 * a witness of each pattern (the simplest request it matches) instead of
 * having its own idea of what a pattern covers.
 */
#include <stdio.h>
#include <string.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_path.h"

/* How a binding matches a request's host; higher wins (contract §4). */
enum host_level {
	LEVEL_NONE = 0,
	LEVEL_WILDCARD, /* the host lies below a "*.suffix" */
	LEVEL_EXACT, /* the host is one of the binding's exact hosts */
};

/* A request normalized once: what every primitive compares. */
struct nreq {
	unsigned scheme; /* one POLICY_SCHEME_* bit */
	unsigned method; /* one POLICY_METHOD_* bit */
	const char *host; /* policy_name_norm output */
	const char *path; /* policy_path_normalize output */
};

bool
policy_name_below(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s && name[n - s - 1] == '.' &&
	    strcmp(name + n - s, suffix) == 0;
}

/* ---- the primitives ---- */

static bool
host_is_wildcard(const char *pat)
{
	return pat[0] == '*' && pat[1] == '.';
}

static enum host_level
host_level(const char *pat, const char *host)
{
	if (host_is_wildcard(pat))
		return policy_name_below(host, pat + 2) ? LEVEL_WILDCARD
		                                        : LEVEL_NONE;
	return strcmp(pat, host) == 0 ? LEVEL_EXACT : LEVEL_NONE;
}

/* "/exact" equals the path; "/prefix*" is a prefix of it. */
static bool
path_match(const char *pat, const char *path)
{
	size_t n = strlen(pat);

	if (n > 0 && pat[n - 1] == '*')
		return strncmp(pat, path, n - 1) == 0;
	return strcmp(pat, path) == 0;
}

/* The best level at which b matches r: every field must match. */
static enum host_level
binding_level(const struct policy_binding *b, const struct nreq *r)
{
	enum host_level best = LEVEL_NONE, l;
	size_t i;

	if ((b->schemes & r->scheme) == 0 || (b->methods & r->method) == 0)
		return LEVEL_NONE;
	for (i = 0; i < b->paths.n; i++)
		if (path_match(b->paths.v[i], r->path))
			break;
	if (i == b->paths.n)
		return LEVEL_NONE;
	for (i = 0; i < b->hosts.n; i++)
		if ((l = host_level(b->hosts.v[i], r->host)) > best)
			best = l;
	return best;
}

/* ---- the load-time overlap check, from the primitives ---- */

/* The simplest host pat matches: itself, or "x.suffix" for "*.suffix". */
static void
host_witness(const char *pat, char *out, size_t outlen)
{
	(void)snprintf(out, outlen, "%s%s", host_is_wildcard(pat) ? "x" : "",
	    host_is_wildcard(pat) ? pat + 1 : pat);
}

/* The simplest path pat matches: its text without the trailing '*'. */
static void
path_witness(const char *pat, char *out, size_t outlen)
{
	size_t n = strlen(pat);

	if (n > 0 && pat[n - 1] == '*')
		n--;
	(void)snprintf(out, outlen, "%.*s", (int)n, pat);
}

/*
 * Some host matches a and b at the same level. If one exists, the witness
 * of the more specific pattern is one: two exact hosts tie only when
 * equal, two wildcards when one suffix lies at or below the other, and an
 * exact host never ties with a wildcard (exact wins).
 */
static bool
hosts_tie(const char *a, const char *b)
{
	char wa[POLICY_NAME_MAX + 8], wb[POLICY_NAME_MAX + 8];
	enum host_level l;

	host_witness(a, wa, sizeof(wa));
	host_witness(b, wb, sizeof(wb));
	l = host_level(a, wa);
	if (l != LEVEL_NONE && host_level(b, wa) == l)
		return true;
	l = host_level(b, wb);
	return l != LEVEL_NONE && host_level(a, wb) == l;
}

/* Some path matches a and b: then the witness of the longer one does. */
static bool
paths_meet(const char *a, const char *b)
{
	char wa[POLICY_PATH_PATTERN_MAX + 1], wb[POLICY_PATH_PATTERN_MAX + 1];

	path_witness(a, wa, sizeof(wa));
	path_witness(b, wb, sizeof(wb));
	return path_match(b, wa) || path_match(a, wb);
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

/*
 * The fields are independent (a request picks its scheme, method, host and
 * path freely), so two bindings tie on some request exactly when every
 * field can tie: binding_level's conditions, field by field.
 */
bool
policy_bindings_overlap(
    const struct policy_binding *a, const struct policy_binding *b)
{
	return (a->schemes & b->schemes) != 0 &&
	    (a->methods & b->methods) != 0 &&
	    any_pair(&a->hosts, &b->hosts, hosts_tie) &&
	    any_pair(&a->paths, &b->paths, paths_meet);
}

/* ---- the runtime matcher ---- */

/* A last label that is a number (decimal or 0x hex) makes the host an
 * IPv4 address to URL parsers and resolvers, never a binding host. */
static bool
ends_in_number(const char *host)
{
	const char *l = strrchr(host, '.');
	size_t i;

	l = l != NULL ? l + 1 : host;
	if (l[0] == '0' && l[1] == 'x') {
		for (i = 2; l[i] != '\0'; i++)
			if (strchr("0123456789abcdef", l[i]) == NULL)
				return false;
		return true;
	}
	for (i = 0; l[i] != '\0'; i++)
		if (l[i] < '0' || l[i] > '9')
			return false;
	return i > 0;
}

/* 0, or -1 with e: the request cannot be judged. *port_ok false when the
 * port is not the scheme's own (then nothing matches). normal: the path
 * is policy_path_normalize's output as it stands (not checked again). */
static int
request_norm(const struct policy_request *rq, bool normal, struct nreq *r,
    char *host, size_t hostlen, bool *port_ok, struct err *e)
{
	char path[POLICY_REQ_PATH_MAX + 1];
	size_t n;

	if (rq == NULL || rq->host == NULL || rq->method == NULL ||
	    rq->path == NULL) {
		err_set(e, "incomplete request");
		return -1;
	}
	if (policy_scheme_port(rq->scheme) == 0) {
		err_set(e, "unknown scheme");
		return -1;
	}
	r->scheme = rq->scheme;
	*port_ok = rq->port == 0 || rq->port == policy_scheme_port(rq->scheme);
	if (policy_name_norm(
	        rq->host, strlen(rq->host), host, hostlen, false, e) == -1)
		return -1;
	if (ends_in_number(host)) {
		err_set(e, "host is an address, not a name");
		return -1;
	}
	r->host = host;
	/* The path must already be normal: normalizing it again is the
	 * check (the normalizer is idempotent). */
	n = normal ? strnlen(rq->path, POLICY_REQ_PATH_MAX + 1)
	           : strlen(rq->path);
	if (normal && n > POLICY_REQ_PATH_MAX) {
		err_set(e, "path too long");
		return -1;
	}
	if (!normal &&
	    policy_path_normalize(rq->path, n, path, sizeof(path), NULL, e) ==
	        -1)
		return -1;
	if (!normal && strcmp(path, rq->path) != 0) {
		err_set(e, "path is not normalized");
		return -1;
	}
	r->path = rq->path;
	/* Any other token (a lower-case "get" too) names no binding method. */
	r->method = policy_method_bit(rq->method, strlen(rq->method));
	return 0;
}

static enum policy_bind_result
bindings_match(const struct policy_binding *const *bs, size_t n,
    const struct policy_request *rq, bool normal,
    const struct policy_binding **out, struct err *e)
{
	const struct policy_binding *found = NULL;
	enum host_level best = LEVEL_NONE, l;
	char host[POLICY_NAME_MAX + 2];
	size_t i, ties = 0;
	struct nreq r;
	bool port_ok;

	if (out != NULL)
		*out = NULL;
	if (request_norm(rq, normal, &r, host, sizeof(host), &port_ok, e) == -1)
		return POLICY_BIND_INVALID;
	if (!port_ok || r.method == 0)
		return POLICY_BIND_NONE;
	for (i = 0; i < n; i++) {
		if ((l = binding_level(bs[i], &r)) == LEVEL_NONE || l < best)
			continue;
		if (l > best) {
			best = l;
			found = bs[i];
			ties = 1;
		} else
			ties++;
	}
	if (best == LEVEL_NONE)
		return POLICY_BIND_NONE;
	if (ties > 1)
		return POLICY_BIND_AMBIGUOUS;
	if (out != NULL)
		*out = found;
	return POLICY_BIND_ONE;
}

enum policy_bind_result
policy_bindings_match(const struct policy_binding *const *bs, size_t n,
    const struct policy_request *rq, const struct policy_binding **out,
    struct err *e)
{
	return bindings_match(bs, n, rq, false, out, e);
}

static enum policy_bind_result
binding_match(const struct policy *p, const struct policy_request *rq,
    bool normal, const struct policy_binding **out, struct err *e)
{
	if (p == NULL) {
		if (out != NULL)
			*out = NULL;
		err_set(e, "no policy");
		return POLICY_BIND_INVALID;
	}
	return bindings_match((const struct policy_binding *const *)p->bindings,
	    p->nbindings, rq, normal, out, e);
}

enum policy_bind_result
policy_binding_match(const struct policy *p, const struct policy_request *rq,
    const struct policy_binding **out, struct err *e)
{
	return binding_match(p, rq, false, out, e);
}

enum policy_bind_result
policy_binding_match_normal(const struct policy *p,
    const struct policy_request *rq, const struct policy_binding **out,
    struct err *e)
{
	return binding_match(p, rq, true, out, e);
}
