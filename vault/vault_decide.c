/*
 * vault_decide: which binding a request meets and what is injected for
 * it (vault.h, vault_decide), and the proxy's host pre-check
 * (vault_host_bound). The binding matcher itself is policy's
 * (policy_binding_match.c): the load-time check that no two bindings can
 * tie uses the same predicates, so both sit with the binding model.
 *
 * The rendered lines live in the vault's arena; no value is formatted.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy_github.h"
#include "policy/policy_oauth2.h"
#include "policy/policy_path.h"
#include "util/text.h"
#include "vault/vault_http.h"
#include "vault/vault_github.h"
#include "vault/vault_int.h"
#include "vault/vault_sigv4.h"

static bool
name_below(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s && name[n - s - 1] == '.' &&
	    strcmp(name + n - s, suffix) == 0;
}

static unsigned
port_scheme(uint16_t port)
{
	if (port == 443)
		return POLICY_SCHEME_HTTPS;
	if (port == 80)
		return POLICY_SCHEME_HTTP;
	return 0;
}

bool
vault_host_bound(const struct vault *v, const char *host, uint16_t port)
{
	char name[POLICY_NAME_MAX + 2];
	unsigned scheme = port_scheme(port);
	size_t i, j;
	struct err e;

	if (host == NULL || scheme == 0 ||
	    policy_name_normalize(host, name, sizeof(name), &e) == -1 ||
	    name[0] == '*')
		return false;
	for (i = 0; i < v->nbinds; i++) {
		const struct policy_binding *b = v->binds[i].b;

		if (!(policy_binding_schemes(b) & scheme))
			continue;
		for (j = 0; j < policy_binding_nhosts(b); j++) {
			const char *h = policy_binding_host(b, j);

			if (h[0] == '*' && h[1] == '.' ? name_below(name, h + 2)
			                               : strcmp(name, h) == 0)
				return true;
		}
	}
	return false;
}

/* TRACE and TRACK echo the request (and so an injected header) back:
 * refused to a bound host, in any case since servers differ there. */
static bool
method_echoes(const char *m, size_t n)
{
	return n == 5 &&
	    (strncasecmp(m, "TRACE", 5) == 0 ||
	        strncasecmp(m, "TRACK", 5) == 0);
}

static void
remove_add(struct vault_inject *out, const char *name)
{
	size_t i;

	/* the first byte first: the names a request removes mostly differ
	 * there (proxy-authorization, authorization, x-...) */
	for (i = 0; i < out->nremove; i++)
		if (out->remove[i][0] == name[0] &&
		    strcmp(out->remove[i], name) == 0)
			return;
	if (out->nremove < VAULT_REMOVE_MAX)
		out->remove[out->nremove++] = name;
}

/* Headers that make frameworks run another method than the request
 * line's (vault.h, remove[]). */
static const char *const override_headers[VAULT_OVERRIDE_HEADERS] = {
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
};

/* The byte at q[*i] of a query parameter's name, percent-decoded ('+' a
 * space), *i moved past it; a malformed escape is taken literally. */
static unsigned char
query_name_byte(const char *q, size_t n, size_t *i)
{
	unsigned char c = (unsigned char)q[*i];
	int x;

	(*i)++;
	if (c == '+')
		return ' ';
	if (c != '%' || *i + 2 > n)
		return c;
	if ((x = text_hexbyte(q + *i)) < 0)
		return c;
	*i += 2;
	return (unsigned char)x;
}

/* Is the name q[0..n) (up to '=', raw) "_method" as PHP, Rack or
 * Express would read it (vault.h, vault_decide)? */
static bool
query_name_is_method(const char *q, size_t n)
{
	static const char want[] = "_method";
	size_t i = 0, k = 0;
	unsigned char c;

	do {
		if (i == n)
			return false;
		c = query_name_byte(q, n, &i);
	} while (c == ' ');
	for (;;) {
		if (c == ' ' || c == '.' || c == '[')
			c = '_';
		if (k == sizeof(want) - 1 || text_lower(c) != want[k])
			return false;
		k++;
		if (i == n)
			return k == sizeof(want) - 1;
		c = query_name_byte(q, n, &i);
	}
}

static bool
query_has_method(const char *q, size_t n)
{
	size_t i = 0, start, end;

	while (q != NULL && i < n) {
		start = i;
		while (i < n && q[i] != '&' && q[i] != ';')
			i++;
		end = start;
		while (end < i && q[end] != '=')
			end++;
		if (query_name_is_method(q + start, end - start))
			return true;
		i++;
	}
	return false;
}

/* git's Basic form of a githubApp binding's token (vault_github.h). */
static bool
github_basic(const struct vault_bind *vb, const struct vault_inject *out)
{
	const struct policy_github *g = policy_binding_github(vb->b);

	return g != NULL && vb->tok_basic != NULL &&
	    vault_github_basic_for(g->form, out->norm_path, out->norm_path_len);
}

static int
render(struct vault *v, const struct vault_bind *vb, struct vault_inject *out,
    struct err *e)
{
	const bool basic = github_basic(vb, out);
	const char *prefix = basic ? "Basic " : vault_line_prefix(vb);
	size_t i, pl = strlen(prefix), off = 0;
	char *buf;

	for (i = 0; i < vb->nlower; i++)
		remove_add(out, vb->lower[i]);
	for (i = 0; i < VAULT_OVERRIDE_HEADERS; i++)
		remove_add(out, override_headers[i]);
	if (vb->ncreds == 0)
		return 0;
	if ((buf = secmem_alloc(v->arena, vb->render_len + 1)) == NULL) {
		err_set(e, "secret arena full (too many injections in flight)");
		return -1;
	}
	for (i = 0; i < vb->ncreds; i++) {
		const char *name = vault_line_name(vb, i);
		/* a githubApp binding's one line: its token, in the form the
		 * request wants (the Basic one sized the buffer) */
		const struct vault_cred *c =
		    policy_binding_github(vb->b) == NULL ? vb->creds[i]
		    : basic                              ? vb->tok_basic
		                                         : vb->tok;
		size_t nl = strlen(name);

		memcpy(buf + off, name, nl);
		off += nl;
		memcpy(buf + off, ": ", 2);
		off += 2;
		memcpy(buf + off, prefix, pl);
		off += pl;
		memcpy(buf + off, c->val, c->len);
		off += c->len;
		memcpy(buf + off, "\r\n", 2);
		off += 2;
	}
	buf[off] = '\0';
	out->lines = buf;
	out->lines_len = off;
	return 0;
}

static const struct vault_bind *
bind_of(const struct vault *v, const struct policy_binding *b)
{
	size_t i;

	for (i = 0; i < v->nbinds; i++)
		if (v->binds[i].b == b)
			return &v->binds[i];
	return NULL;
}

static void
decide_as(struct vault_inject *out, enum vault_decision d, int status,
    const char *reason)
{
	out->decision = d;
	out->status = status;
	out->reason = reason;
}

static void
norm_path_drop(struct vault_inject *out)
{
	free(out->norm_path);
	out->norm_path = NULL;
	out->norm_path_len = 0;
}

/*
 * The request's path normalized into out->norm_path: 0; 1 when it is not
 * acceptable (decided); -1 and e when memory ran out.
 */
static int
decide_path(const struct vault_req *rq, bool bound, struct vault_inject *out,
    struct err *e)
{
	struct err pe;

	if ((out->norm_path = malloc(rq->path_len + 1)) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	if (policy_path_normalize(rq->path, rq->path_len, out->norm_path,
	        rq->path_len + 1, &out->norm_path_len, &pe) == -1) {
		norm_path_drop(out);
		if (bound)
			decide_as(out, VAULT_REFUSED, 400,
			    "request path not acceptable");
		return 1;
	}
	return 0;
}

/*
 * The binding the request meets (policy_binding_match), NULL when none
 * or more than one (then decided AMBIGUOUS). A longer method token or
 * one with a NUL is no method a binding names.
 */
static const struct policy_binding *
decide_match(
    struct vault *v, const struct vault_req *rq, struct vault_inject *out)
{
	char method[VAULT_METHOD_MAX + 1];
	const struct policy_binding *b = NULL;
	struct policy_request prq;
	struct err pe;

	method[0] = '\0';
	if (rq->method_len <= VAULT_METHOD_MAX &&
	    memchr(rq->method, '\0', rq->method_len) == NULL) {
		memcpy(method, rq->method, rq->method_len);
		method[rq->method_len] = '\0';
	}
	prq.scheme = rq->scheme;
	prq.host = rq->host;
	prq.port = rq->port;
	prq.method = method;
	prq.path = out->norm_path;
	/* norm_path: decide_path's policy_path_normalize output */
	switch (policy_binding_match_normal(v->p, &prq, &b, &pe)) {
	case POLICY_BIND_NONE:
	case POLICY_BIND_INVALID:
		return NULL;
	case POLICY_BIND_AMBIGUOUS:
		decide_as(
		    out, VAULT_AMBIGUOUS, 403, "credential binding ambiguous");
		return NULL;
	case POLICY_BIND_ONE:
		break;
	}
	return b;
}

/* vault_decide; checked: vault_host_bound said yes for rq already. */
static int
decide(struct vault *v, const struct vault_req *rq, struct vault_inject *out,
    bool checked, struct err *e)
{
	const struct policy_binding *b;
	const struct vault_bind *vb;
	const char *why;
	bool bound;
	int rc;

	memset(out, 0, sizeof(*out));
	decide_as(out, VAULT_NO_MATCH, 0, "no credential binding matches");
	/* Never forwarded, whatever the decision: it is for egressd. */
	remove_add(out, "proxy-authorization");
	if (rq->host == NULL || rq->path == NULL || rq->method == NULL ||
	    (rq->scheme != POLICY_SCHEME_HTTPS &&
	        rq->scheme != POLICY_SCHEME_HTTP))
		return 0;
	bound = checked ||
	    vault_host_bound(v, rq->host,
	        rq->port != 0 ? rq->port : policy_scheme_port(rq->scheme));
	if (bound && method_echoes(rq->method, rq->method_len)) {
		decide_as(out, VAULT_REFUSED, 403,
		    "method refused to a credential-bound host");
		return 0;
	}
	if ((rc = decide_path(rq, bound, out, e)) != 0)
		return rc < 0 ? -1 : 0;
	if (!bound || (b = decide_match(v, rq, out)) == NULL)
		return 0;
	if ((vb = bind_of(v, b)) == NULL) {
		err_set(e, "binding not in the vault");
		return -1;
	}
	out->binding = policy_binding_name(b);
	if (query_has_method(rq->query, rq->query_len)) {
		/* Like every 400 refusal: nothing to forward. */
		norm_path_drop(out);
		decide_as(out, VAULT_REFUSED, 400,
		    "method override in the query of a credential request");
		return 0;
	}
	if (policy_binding_auth(b) == POLICY_AUTH_AWS_SIGV4) {
		if (vault_sigv4_presigned(rq->query, rq->query_len)) {
			decide_as(out, VAULT_REFUSED, 403,
			    "presigned AWS query refused");
			return 0;
		}
		out->sign = true;
	}
	if ((why = vault_http_unusable(v, vb)) != NULL) {
		/* an http source's value missing or too old: never sent
		 * without it (the proxy answers 502 with this reason) */
		decide_as(out, VAULT_REFUSED, 502, why);
		return 0;
	}
	if ((policy_binding_oauth2(b) != NULL ||
	        policy_binding_github(b) != NULL) &&
	    (vb->tok == NULL || v->clock(v->clock_arg) >= vb->tok_due_ms)) {
		/* no token, or one due for renewal: nothing goes out until
		 * the revision that holds a fresh one decides again */
		decide_as(out, VAULT_MINT, 0,
		    policy_binding_github(b) != NULL
		        ? "github installation token to mint"
		        : "oauth2 access token to mint");
		return 0;
	}
	if (render(v, vb, out, e) == -1)
		return -1;
	out->bind = vb;
	out->subst_in = vb->subst_in;
	decide_as(out, VAULT_INJECTED, 0, "credential injected");
	return 0;
}

int
vault_decide(struct vault *v, const struct vault_req *rq,
    struct vault_inject *out, struct err *e)
{
	return decide(v, rq, out, false, e);
}

int
vault_decide_bound(struct vault *v, const struct vault_req *rq,
    struct vault_inject *out, struct err *e)
{
	return decide(v, rq, out, true, e);
}

void
vault_inject_clear(struct vault *v, struct vault_inject *out)
{
	if (out == NULL)
		return;
	if (out->lines != NULL)
		secmem_free(v->arena, out->lines);
	free(out->norm_path);
	free(out->query);
	memset(out, 0, sizeof(*out));
}
