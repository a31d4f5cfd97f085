/*
 * policy_request: the request-level verdict of request rules (issue 37;
 * the contract is policy.h, "Request rules").
 *
 * A request reaches this matcher only on a host the host-level verdict
 * already let through, so it answers one question: which rule of the
 * host takes this (port, method, path)? The operator layers first, by
 * name and port as policy_match_domain_reach decides them; then the
 * host's user rules in list order, found through the compiled name index
 * (the view that keeps deny request rules), so the cost is O(labels) plus
 * the host's own rules, never the whole list. Nothing is allocated: the
 * path is checked against its normal form in a stack buffer, once per
 * request, and each rule compares stored strings.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_binding.h"
#include "policy/policy_glob.h"
#include "policy/policy_int.h"
#include "policy/policy_path.h"
#include "util/grow.h"

/* One walk over the rules of a host (a layer's each_name callback). */
struct qwalk {
	const struct policy_rule *rules;
	uint16_t port;
	const char *method, *path;
	long hit; /* the deciding rule, -1 none yet */
	/* what the allow rules of the host would do, for the reason */
	bool other_method; /* one takes the path with another method */
	bool allow_request; /* one is a request rule */
	bool path_taken; /* an allow request rule takes the path */
};

static bool
method_in(const struct policy_rule *r, const char *method)
{
	size_t i;

	for (i = 0; i < r->nmethods; i++)
		if (strcmp(r->methods[i], method) == 0)
			return true;
	return false;
}

static bool
path_in(const struct policy_rule *r, const char *path)
{
	size_t i;

	for (i = 0; i < r->npaths; i++)
		if (policy_glob_match(r->paths[i], path))
			return true;
	return false;
}

/* r applies to the connection: its protocols hold TCP, its ports (when
 * set) the destination port. Most rules name neither: no call then. */
static bool
port_ok(const struct policy_rule *r, uint16_t port)
{
	if (r->nports == 0 && (r->protocols & POLICY_PROTO_TCP) != 0)
		return true;
	return policy_rule_port_ok(r, POLICY_PROTO_TCP, port);
}

/* The first rule of an operator layer that applies decides. */
static bool
operator_cb(void *arg, size_t i)
{
	struct qwalk *q = arg;

	if (!port_ok(&q->rules[i], q->port))
		return true;
	q->hit = (long)i;
	return false;
}

/* The deciding rule: the first of the host that takes the request. The
 * method (a string compare) is looked at before the path (a pattern
 * each): this walk is on every request's path. */
static bool
hit_cb(void *arg, size_t i)
{
	struct qwalk *q = arg;
	const struct policy_rule *r = &q->rules[i];

	if (!port_ok(r, q->port) ||
	    (r->nmethods > 0 && !method_in(r, q->method)) ||
	    (r->npaths > 0 && !path_in(r, q->path)))
		return true;
	q->hit = (long)i;
	return false;
}

/* Only for a request denied by a plain rule or the default: what the
 * allow rules of the host would have taken, for the reason. */
static bool
why_cb(void *arg, size_t i)
{
	struct qwalk *q = arg;
	const struct policy_rule *r = &q->rules[i];
	bool path, method;

	if (r->action != POLICY_ALLOW || !port_ok(r, q->port))
		return true;
	path = r->npaths == 0 || path_in(r, q->path);
	method = r->nmethods == 0 || method_in(r, q->method);
	q->other_method |= path && !method;
	q->allow_request |= policy_rule_is_request(r);
	q->path_taken |= path && policy_rule_is_request(r);
	return true;
}

static enum policy_action
verdict(struct policy_req_verdict *v, enum policy_action act,
    enum policy_req_reason reason, const struct policy_rule *rule, long index)
{
	v->action = act;
	v->reason = act == POLICY_ALLOW ? POLICY_REQ_ALLOWED : reason;
	v->rule = rule;
	v->index = index;
	return act;
}

/* The verdict once the first rule that takes the request (r, index hit;
 * NULL, -1: none) is known: true when that settles it, false for a
 * denial by a plain rule or the default, whose reason the allow rules of
 * the host tell (denied). */
static bool
decided(const struct policy *p, const struct policy_rule *r, long hit,
    struct policy_req_verdict *v)
{
	if (r != NULL && r->action == POLICY_ALLOW)
		(void)verdict(v, POLICY_ALLOW, POLICY_REQ_ALLOWED, r, hit);
	else if (r != NULL && policy_rule_is_request(r))
		(void)verdict(v, POLICY_DENY,
		    r->npaths > 0 ? POLICY_REQ_PATH : POLICY_REQ_METHOD, r,
		    hit);
	else if (r == NULL && p->default_action == POLICY_ALLOW)
		(void)verdict(v, POLICY_ALLOW, POLICY_REQ_ALLOWED, NULL, -1);
	else
		return false;
	return true;
}

static enum policy_action
denied(const struct qwalk *q, const struct policy_rule *r, long hit,
    struct policy_req_verdict *v)
{
	enum policy_req_reason why = q->other_method ? POLICY_REQ_METHOD
	    : q->allow_request && !q->path_taken     ? POLICY_REQ_PATH
	                                             : POLICY_REQ_HOST;

	return verdict(v, POLICY_DENY, why, r, hit);
}

/* host and path in the forms the rules are compared with; n gets the
 * normalized host. */
static bool
request_ok(const char *host, const char *method, const char *path, char *n,
    size_t nlen)
{
	char norm[POLICY_REQ_PATH_MAX + 1];
	size_t len;

	if (host == NULL || method == NULL || path == NULL ||
	    policy_name_norm(host, strlen(host), n, nlen, false, NULL) == -1)
		return false;
	len = strlen(path);
	/* The normalizer is idempotent: a normal path comes back as is. */
	return policy_path_normalize(
	           path, len, norm, sizeof(norm), NULL, NULL) == 0 &&
	    strcmp(norm, path) == 0;
}

/* An operator layer that decides the host on this port, or false. */
static bool
operator_decides(const struct policy *p, const char *n, size_t len,
    uint16_t port, struct policy_req_verdict *v)
{
	const struct policy_index *ix = p->index;
	const struct policy_layer *lv[3] = {
	    ix->ov->ldeny, ix->ov->lallow, ix->cfg->linfra};
	const struct policy_rule *rv[3] = {
	    ix->ov->deny, ix->ov->allow, ix->cfg->infra};
	struct qwalk q = {.port = port, .hit = -1};
	size_t l;

	for (l = 0; l < 3; l++) {
		q.rules = rv[l];
		(void)policy_layer_each_name(lv[l], n, len, operator_cb, &q);
		if (q.hit >= 0) {
			(void)verdict(v, rv[l][q.hit].action, POLICY_REQ_HOST,
			    &rv[l][q.hit], -1);
			return true;
		}
	}
	return false;
}

static const struct policy_layer *
user_view(const struct policy *p)
{
	return p->index->user_all != NULL ? p->index->user_all : p->index->user;
}

enum policy_action
policy_match_request(const struct policy *p, const char *host, uint16_t port,
    const char *method, const char *path, struct policy_req_verdict *v)
{
	char n[POLICY_NAME_MAX + 2];
	struct qwalk q = {.port = port, .method = method, .path = path};
	const struct policy_rule *r;
	size_t len;

	if (p == NULL || !request_ok(host, method, path, n, sizeof(n)))
		return verdict(v, POLICY_DENY, POLICY_REQ_INVALID, NULL, -1);
	len = strlen(n);
	if (operator_decides(p, n, len, port, v))
		return v->action;
	q.rules = p->rules;
	q.hit = -1;
	(void)policy_layer_each_name(user_view(p), n, len, hit_cb, &q);
	r = q.hit >= 0 ? &p->rules[q.hit] : NULL;
	if (decided(p, r, q.hit, v))
		return v->action;
	/* A plain deny or the default: what the allow rules would take. */
	(void)policy_layer_each_name(user_view(p), n, len, why_cb, &q);
	return denied(&q, r, q.hit, v);
}

bool
policy_has_request_rules(const struct policy *p)
{
	return p != NULL && p->index->nrequest > 0;
}

static bool
has_request_cb(void *arg, size_t i)
{
	struct qwalk *q = arg;
	const struct policy_rule *r = &q->rules[i];

	if (!policy_rule_is_request(r) || !port_ok(r, q->port))
		return true;
	q->hit = (long)i;
	return false;
}

bool
policy_host_has_request_rules(
    const struct policy *p, const char *host, uint16_t port)
{
	char n[POLICY_NAME_MAX + 2];
	struct qwalk q = {.port = port, .hit = -1};

	/* Most policies have none: no name to normalize, no lookup. */
	if (p == NULL || host == NULL || p->index->nrequest == 0 ||
	    policy_name_norm(host, strlen(host), n, sizeof(n), false, NULL) ==
	        -1)
		return false;
	q.rules = p->rules;
	(void)policy_layer_each_name(
	    user_view(p), n, strlen(n), has_request_cb, &q);
	return q.hit >= 0;
}

/* ---- compiled for one host and port ---- */

/* A rule of the host, as the request walk reads it: what rejects most
 * requests sits in the entry itself (a host may have a hundred rules,
 * walked on every request). */
struct policy_host_rule {
	unsigned methods; /* POLICY_METHOD_* bits of the methods it names */
	bool any_method; /* it names none */
	bool other; /* it names a method outside them: strings compared */
	/* every pattern's second byte is quick (none is a '*' there): a path
	 * whose second byte differs matches none of them */
	bool has_quick;
	char quick;
	const struct policy_rule *r;
	long index;
};

struct policy_host_rules {
	struct policy *p; /* a reference */
	char *host; /* as given to _new */
	uint16_t port;
	bool any; /* a request rule of the host applies */
	bool op; /* an operator layer decides every request: opv */
	struct policy_req_verdict opv;
	struct policy_host_rule *v;
	size_t n, cap;
	bool nomem;
};

static bool
collect_cb(void *arg, size_t i)
{
	struct policy_host_rules *hr = arg;
	const struct policy_rule *r = &hr->p->rules[i];
	struct policy_host_rule *e;
	unsigned bit;
	size_t k;

	if (!port_ok(r, hr->port))
		return true;
	if (grow_array(&hr->v, &hr->cap, hr->n + 1, sizeof(*hr->v), 8) == -1) {
		hr->nomem = true;
		return false;
	}
	e = &hr->v[hr->n++];
	memset(e, 0, sizeof(*e));
	e->r = r;
	e->index = (long)i;
	e->any_method = r->nmethods == 0;
	e->has_quick = r->npaths > 0 && r->paths[0][1] != '*';
	e->quick = r->npaths > 0 ? r->paths[0][1] : '\0';
	for (k = 1; k < r->npaths; k++)
		e->has_quick &= r->paths[k][1] == e->quick;
	for (k = 0; k < r->nmethods; k++) {
		bit = policy_method_bit(r->methods[k], strlen(r->methods[k]));
		e->methods |= bit;
		e->other |= bit == 0;
	}
	hr->any |= policy_rule_is_request(r);
	return true;
}

struct policy_host_rules *
policy_host_rules_new(struct policy *p, const char *host, uint16_t port)
{
	struct policy_host_rules *hr;
	char n[POLICY_NAME_MAX + 2];
	size_t len;

	if (p == NULL || host == NULL || (hr = calloc(1, sizeof(*hr))) == NULL)
		return NULL;
	hr->p = policy_ref(p);
	hr->port = port;
	if ((hr->host = strdup(host)) == NULL) {
		policy_host_rules_free(hr);
		return NULL;
	}
	/* an invalid name has no rules: every request is INVALID */
	if (policy_name_norm(host, strlen(host), n, sizeof(n), false, NULL) ==
	    -1) {
		hr->op = true;
		(void)verdict(
		    &hr->opv, POLICY_DENY, POLICY_REQ_INVALID, NULL, -1);
		return hr;
	}
	len = strlen(n);
	(void)policy_layer_each_name(user_view(p), n, len, collect_cb, hr);
	if (hr->nomem) {
		policy_host_rules_free(hr);
		return NULL;
	}
	hr->op = operator_decides(p, n, len, port, &hr->opv);
	return hr;
}

void
policy_host_rules_free(struct policy_host_rules *hr)
{
	if (hr == NULL)
		return;
	policy_unref(hr->p);
	free(hr->host);
	free(hr->v);
	free(hr);
}

bool
policy_host_rules_for(const struct policy_host_rules *hr,
    const struct policy *p, const char *host, uint16_t port)
{
	return hr != NULL && hr->p == p && hr->port == port &&
	    strcmp(hr->host, host) == 0;
}

bool
policy_host_rules_any(const struct policy_host_rules *hr)
{
	return hr != NULL && hr->any;
}

/* mbit: the request method's POLICY_METHOD_* bit, 0 for another token. */
static bool
host_rule_method(
    const struct policy_host_rule *e, unsigned mbit, const char *method)
{
	if (e->any_method)
		return true;
	if (mbit != 0) /* a token with a bit equals no token without one */
		return (e->methods & mbit) != 0;
	return e->other && method_in(e->r, method);
}

enum policy_action
policy_host_rules_match(const struct policy_host_rules *hr, const char *method,
    const char *path, struct policy_req_verdict *v)
{
	struct qwalk q = {.method = method, .path = path, .hit = -1};
	const struct policy_host_rule *e = NULL;
	unsigned mbit;
	size_t i;

	if (hr == NULL || method == NULL || path == NULL)
		return verdict(v, POLICY_DENY, POLICY_REQ_INVALID, NULL, -1);
	if (hr->op) {
		*v = hr->opv;
		return v->action;
	}
	mbit = policy_method_bit(method, strlen(method));
	for (i = 0; i < hr->n; i++) {
		e = &hr->v[i];
		/* patterns and the path both start with '/' */
		if ((e->has_quick && e->quick != path[path[0] != '\0']) ||
		    !host_rule_method(e, mbit, method))
			continue;
		if (e->r->npaths == 0 || path_in(e->r, path))
			break;
	}
	if (i < hr->n)
		q.hit = e->index;
	if (decided(hr->p, i < hr->n ? e->r : NULL, q.hit, v))
		return v->action;
	q.rules = hr->p->rules;
	q.port = hr->port;
	for (i = 0; i < hr->n; i++)
		(void)why_cb(&q, (size_t)hr->v[i].index);
	return denied(&q, q.hit >= 0 ? &hr->p->rules[q.hit] : NULL, q.hit, v);
}

const char *
policy_req_reason_name(enum policy_req_reason r)
{
	switch (r) {
	case POLICY_REQ_ALLOWED:
		return NULL;
	case POLICY_REQ_METHOD:
		return "method";
	case POLICY_REQ_PATH:
		return "path";
	case POLICY_REQ_HOST:
		return "host";
	case POLICY_REQ_INVALID:
		return "invalid";
	}
	return "invalid";
}
