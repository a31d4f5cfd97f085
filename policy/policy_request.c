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
 * request, and each rule compares stored strings, its methods before its
 * patterns. An allowed request costs one walk that stops at the deciding
 * rule; only a denial by a plain rule or the default walks the host's
 * allow rules again, for the reason.
 */
#include <string.h>

#include "policy/policy_glob.h"
#include "policy/policy_int.h"
#include "policy/policy_path.h"

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
 * set) the destination port. */
static bool
port_ok(const struct policy_rule *r, uint16_t port)
{
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

/* The deciding walk: the first rule of the host that takes the request.
 * The method first: a string compare is cheaper than a pattern. */
static bool
decide_cb(void *arg, size_t i)
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

/* The reason walk, only for a denial by a plain deny or the default:
 * what the host's allow rules would take. */
static bool
reason_cb(void *arg, size_t i)
{
	struct qwalk *q = arg;
	const struct policy_rule *r = &q->rules[i];
	bool path;

	if (r->action != POLICY_ALLOW || !policy_rule_is_request(r) ||
	    !port_ok(r, q->port))
		return true;
	path = r->npaths == 0 || path_in(r, q->path);
	q->allow_request = true;
	q->path_taken |= path;
	q->other_method |= path && r->nmethods > 0 && !method_in(r, q->method);
	/* "method" outranks the rest: nothing left to learn */
	return !q->other_method;
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
	enum policy_req_reason why;
	size_t len;

	if (p == NULL || !request_ok(host, method, path, n, sizeof(n)))
		return verdict(v, POLICY_DENY, POLICY_REQ_INVALID, NULL, -1);
	len = strlen(n);
	if (operator_decides(p, n, len, port, v))
		return v->action;
	q.rules = p->rules;
	q.hit = -1;
	(void)policy_layer_each_name(user_view(p), n, len, decide_cb, &q);
	r = q.hit >= 0 ? &p->rules[q.hit] : NULL;
	if (r != NULL && r->action == POLICY_ALLOW)
		return verdict(v, POLICY_ALLOW, POLICY_REQ_ALLOWED, r, q.hit);
	if (r != NULL && policy_rule_is_request(r))
		return verdict(v, POLICY_DENY,
		    r->npaths > 0 ? POLICY_REQ_PATH : POLICY_REQ_METHOD, r,
		    q.hit);
	if (r == NULL && p->default_action == POLICY_ALLOW)
		return verdict(v, POLICY_ALLOW, POLICY_REQ_ALLOWED, NULL, -1);
	/* A plain deny or the default: what the allow rules would take. */
	(void)policy_layer_each_name(user_view(p), n, len, reason_cb, &q);
	why = q.other_method                   ? POLICY_REQ_METHOD
	    : q.allow_request && !q.path_taken ? POLICY_REQ_PATH
	                                       : POLICY_REQ_HOST;
	return verdict(v, POLICY_DENY, why, r, q.hit);
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
