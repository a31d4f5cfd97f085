/*
 * Judging a request: its Host against the destination, and its method
 * and path against the request rules.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proxy/proxy_int.h"
#include "policy/policy_path.h"
#include "util/now.h"

/* A name (SNI or Host) for the hook: lowercase, one trailing dot off. */
static bool
proxy_norm_name(const char *s, size_t n, char *out, size_t cap)
{
	size_t i;

	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0 || n >= cap)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		out[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
	}
	out[n] = '\0';
	return true;
}

/*
 * Is a request to name (judged) on c one to a bound origin, whose every
 * response is redacted: the connection is terminated, its origin
 * connection went to a bound host before, or a binding names the host?
 */
bool
proxy_judge_bound(struct proxy_conn *c, const char *name)
{
	struct vault *v;

	if (c->tls.term || c->origin.vault != NULL)
		return true;
	return c->p->h.vault_get != NULL &&
	    (v = c->p->h.vault_get(c->p->h.arg)) != NULL &&
	    vault_host_bound(v, name, c->dport);
}

/*
 * hooks.judge for name at c's destination. Its verdict follows from the
 * policy in force and the learned addresses alone, both behind
 * hooks.judge_gen: when it allows c->name (the SNI, a plain connection's
 * first Host), the generation is kept, and the next requests to that
 * name (every one of a terminated connection) are not judged again
 * until the generation moves.
 */
enum proxy_reason
proxy_judge_name(struct proxy_conn *c, const char *name)
{
	const struct proxy_hooks *hk = &c->p->h;
	bool own = hk->judge_gen != NULL && strcmp(name, c->name) == 0;
	uint64_t gen = own ? hk->judge_gen(hk->arg) : 0;
	enum proxy_reason r;

	if (own && c->judged && c->judged_gen == gen)
		return PROXY_OK;
	r = hk->judge(hk->arg, name, &c->dst, c->dport);
	if (own) {
		c->judged = r == PROXY_OK;
		c->judged_gen = gen;
	}
	return r;
}

/* name: TLS_HELLO_SNI_MAX + 1 bytes, gets the request's host ("" when
 * it has none or a bad one). */
enum proxy_reason
proxy_judge_host(
    struct proxy_conn *c, const struct http_head *h, int *status, char *name)
{
	struct http_span host;
	unsigned port;
	enum proxy_reason r;

	name[0] = '\0';

	*status = 403;
	if (h->host.p == NULL || h->host.n == 0) {
		*status = 400;
		return PROXY_NO_HOST;
	}
	if (http_span_ieq(&h->method, "CONNECT") ||
	    ((h->conn_upgrade || http_header_get(h, "upgrade", NULL) != NULL) &&
	        !proxy_http_upgrade_ok(h))) {
		*status = 501;
		return PROXY_UNSUPPORTED;
	}
	if (http_authority_split(
	        &h->host, c->tls.term ? 443 : 80, &host, &port) == -1 ||
	    !proxy_norm_name(host.p, host.n, name, TLS_HELLO_SNI_MAX + 1)) {
		name[0] = '\0';
		*status = 400;
		return PROXY_BAD_REQUEST;
	}
	if (c->tls.term) {
		/* the SNI was judged and the origin verified for it: a
		 * request for another name is not this connection's */
		if (strcmp(name, c->name) != 0 || port != c->dport) {
			*status = 421;
			return PROXY_MISDIRECTED;
		}
	}
	if (port != c->dport)
		r = PROXY_PORT_MISMATCH;
	else
		r = proxy_judge_name(c, name);
	/* the log names the first request's host, or the one refused */
	if (!c->tls.term && (c->name[0] == '\0' || r != PROXY_OK) &&
	    strcmp(c->name, name) != 0) {
		memcpy(c->name, name, strlen(name) + 1);
		c->judged = false; /* kept for the name before */
	}
	return r;
}

/* The proxy.denied line: rate-limited like proxy.refused (a sandbox
 * looping on a denied request must not flood the log); the log cuts a
 * long path (LOG_FIELD_STR_MAX). */
static void
proxy_judge_log_denied(struct proxy_conn *c, const struct proxy_denial *dn)
{
	char dst[ADDR_TEXT_MAX], key[ADDR_TEXT_MAX + TLS_HELLO_SNI_MAX + 32];

	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	/* per host too: names sharing an address are told apart */
	(void)snprintf(key, sizeof(key), "%s|%s|denied|%s", dst, dn->host,
	    policy_req_reason_name(dn->reason));
	if (!log_limiter_allow(&c->p->lim, key, now_mono_ms()))
		return;
	log_info(c->p->log, "proxy.denied",
	    LOG_S("reason", policy_req_reason_name(dn->reason)),
	    LOG_S("host", dn->host), LOG_S("method", dn->method),
	    LOG_S("path", dn->path), LOG_I("rule", dn->rule),
	    LOG_S("dst", dst));
}

/* Keeps what the answer to the denied request says (c->relay.denial). */
static enum proxy_reason
proxy_judge_deny(struct proxy_conn *c, const char *name, const char *method,
    const char *path, const struct policy_req_verdict *v, int *status)
{
	struct proxy_denial *dn;
	size_t plen = strlen(path);

	*status = v->reason == POLICY_REQ_INVALID ? 400 : 403;
	c->p->st.denied[v->reason]++;
	free(c->relay.denial);
	c->relay.denial = dn = calloc(1, sizeof(*dn) + plen + 1);
	if (dn == NULL)
		return PROXY_REQUEST_DENIED; /* answered without the body */
	dn->reason = v->reason;
	dn->rule = v->index;
	(void)snprintf(dn->method, sizeof(dn->method), "%s", method);
	(void)snprintf(dn->host, sizeof(dn->host), "%s", name);
	memcpy(dn->path, path, plen + 1);
	proxy_judge_log_denied(c, dn);
	return PROXY_REQUEST_DENIED;
}

/* The request rules of name on c's port from p, compiled once per host
 * and snapshot; NULL when out of memory (then p is asked directly). */
static const struct policy_host_rules *
proxy_judge_rules(struct proxy_conn *c, struct policy *p, const char *name)
{
	if (!policy_host_rules_for(c->relay.rules, p, name, c->dport)) {
		policy_host_rules_free(c->relay.rules);
		c->relay.rules = policy_host_rules_new(p, name, c->dport);
	}
	return c->relay.rules;
}

/*
 * Request rules (issue 37): a request to name (judged by proxy_judge_host
 * already) on a host the policy in force has request rules for is judged
 * by its method and normalized path. PROXY_OK, or PROXY_REQUEST_DENIED
 * with *status (403; 400 for a path the normalizer refuses: it cannot
 * be judged, so it cannot go) and c->relay.denial set.
 */
enum proxy_reason
proxy_judge_request(struct proxy_conn *c, const struct http_head *h,
    const char *name, int *status)
{
	const struct policy_host_rules *hr;
	struct policy *p;
	struct policy_req_verdict v;
	char method[HTTP_METHOD_MAX + 1];
	char path[POLICY_REQ_PATH_MAX + 1];
	const char *raw = "/";
	size_t rawn = 1, n;
	struct err e;

	if (c->p->h.policy_get == NULL ||
	    (p = c->p->h.policy_get(c->p->h.arg)) == NULL ||
	    !policy_has_request_rules(p))
		return PROXY_OK;
	hr = proxy_judge_rules(c, p, name);
	if (hr != NULL ? !policy_host_rules_any(hr)
	               : !policy_host_has_request_rules(p, name, c->dport))
		return PROXY_OK;
	/* the parser bounds a method by HTTP_METHOD_MAX */
	n = h->method.n < sizeof(method) ? h->method.n : sizeof(method) - 1;
	memcpy(method, h->method.p, n);
	method[n] = '\0';
	if (h->path.p != NULL) {
		raw = h->path.p;
		rawn = h->path.n;
	}
	memset(&v, 0, sizeof(v));
	v.action = POLICY_DENY;
	v.reason = POLICY_REQ_INVALID;
	v.index = -1;
	if (h->form != HTTP_TARGET_ORIGIN && h->form != HTTP_TARGET_ABSOLUTE) {
		/* "OPTIONS *": no path a rule could name */
		(void)snprintf(
		    path, sizeof(path), "%.*s", (int)h->target.n, h->target.p);
		return proxy_judge_deny(c, name, method, path, &v, status);
	}
	if (rawn > POLICY_REQ_PATH_MAX ||
	    policy_path_normalize(raw, rawn, path, sizeof(path), NULL, &e) ==
	        -1) {
		(void)snprintf(path, sizeof(path), "%.*s",
		    (int)(rawn > POLICY_REQ_PATH_MAX ? POLICY_REQ_PATH_MAX
		                                     : rawn),
		    raw);
		return proxy_judge_deny(c, name, method, path, &v, status);
	}
	if ((hr != NULL ? policy_host_rules_match(hr, method, path, &v)
	                : policy_match_request(p, name, c->dport, method, path,
	                      &v)) == POLICY_ALLOW)
		return PROXY_OK;
	return proxy_judge_deny(c, name, method, path, &v, status);
}
