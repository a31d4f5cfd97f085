/*
 * api: the control API. See api.h for the contract and docs/api.md for
 * every answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "egressd/api/api.h"
#include "egressd/api/api_frame.h"
#include "egressd/api/api_int.h"
#include "egressd/proto/http_head.h"
#include "egressd/base/log.h"
#include "egressd/base/metrics.h"
#include "egressd/base/stats.h"
#include "util/addr.h"
#include "util/now.h"
#include "util/secmem.h"

#define API_TOKEN_HEADER "OPENSANDBOX-EGRESS-AUTH"
#define API_POLICY_ALLOW "GET, POST, PUT, PATCH, DELETE"
#define API_PATH_MAX 256 /* raw request target kept for routing */
#define API_SWEEP_MS 200 /* connection sweep period while paused */
#define API_RESET_REASON "policy reset to default deny-all"
#define API_NOMATCH_REASON "no matching targets found"

#ifndef EGRESSD_VERSION
#define EGRESSD_VERSION "unknown"
#endif

static const char *const api_op_names[] = {
    [API_OP_REPLACE] = "replace",
    [API_OP_PATCH] = "patch",
    [API_OP_DELETE] = "delete",
};

static const char *
api_method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	default:
		return "OTHER";
	}
}

/* ---- answers ---- */

void
api_reply(struct api_req *r, int code, const char *ctype, const char *body,
    size_t len)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(r->req);
	struct evbuffer *b = evbuffer_new();

	r->status = code;
	evhttp_add_header(oh, "Content-Type", ctype);
	if (b != NULL && len > 0 && evbuffer_add(b, body, len) == -1) {
		evbuffer_free(b);
		b = NULL;
	}
	if (b == NULL && len > 0) {
		/* Out of memory: say so rather than send a cut body. */
		r->status = code = 500;
	}
	evhttp_send_reply(r->req, code, http_reason(code), b);
	if (b != NULL)
		evbuffer_free(b);
}

void
api_reply_text(struct api_req *r, int code, const char *fmt, ...)
{
	char msg[API_MSG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(msg) - 2)
		n = (int)(sizeof(msg) - 2); /* cut, still newline-ended */
	msg[n++] = '\n';
	msg[n] = '\0';
	evhttp_add_header(evhttp_request_get_output_headers(r->req),
	    "X-Content-Type-Options", "nosniff");
	api_reply(r, code, "text/plain; charset=utf-8", msg, (size_t)n);
}

void
api_reply_json(struct api_req *r, int code, json_t *o)
{
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	size_t n;

	json_decref(o);
	if (s == NULL) {
		api_reply_text(r, 500, "internal error: out of memory");
		return;
	}
	n = strlen(s);
	/* json_dumps leaves room only for its NUL; grow by one for '\n'. */
	{
		char *t = realloc(s, n + 2);
		if (t == NULL) {
			free(s);
			api_reply_text(r, 500, "internal error: out of memory");
			return;
		}
		s = t;
	}
	s[n++] = '\n';
	s[n] = '\0';
	api_reply(r, code, "application/json", s, n);
	free(s);
}

void
api_reply_405(struct api_req *r, const char *allow)
{
	evhttp_add_header(
	    evhttp_request_get_output_headers(r->req), "Allow", allow);
	api_reply_text(r, 405, "method not allowed");
}

/*
 * The status body: {"status":"ok","mode":..,"enforcementMode":..,
 * "reason":..,"policy":..}, every field omitted when empty (Go's field
 * order; the reference never sets reason and policy together).
 */
static json_t *
api_status_body(
    const char *mode, const char *enf, const char *reason, json_t *policy)
{
	json_t *o = json_object();

	if (o == NULL)
		goto out_fail;
	if (json_object_set_new(o, "status", json_string("ok")) == -1)
		goto out_fail;
	if (mode != NULL && mode[0] != '\0' &&
	    json_object_set_new(o, "mode", json_string(mode)) == -1)
		goto out_fail;
	if (enf != NULL && enf[0] != '\0' &&
	    json_object_set_new(o, "enforcementMode", json_string(enf)) == -1)
		goto out_fail;
	if (reason != NULL && reason[0] != '\0' &&
	    json_object_set_new(o, "reason", json_string(reason)) == -1)
		goto out_fail;
	if (policy != NULL) {
		int rc = json_object_set_new(o, "policy", policy);
		policy = NULL;
		if (rc == -1)
			goto out_fail;
	}
	return o;
out_fail:
	json_decref(policy);
	json_decref(o);
	return NULL;
}

static const char *
api_enforcement(const struct api *a)
{
	const char *m = a->h.enforcement_mode(a->h.arg);

	return m != NULL ? m : "";
}

/* ---- auth ---- */

static bool
api_token_matches(const struct api *a, const char *got)
{
	if (got == NULL)
		return false;
	return secmem_equal(got, strlen(got), a->token, a->tokenlen);
}

static bool
api_authorized(const struct api *a, struct evhttp_request *req)
{
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	const char *v;
	bool ok = false;

	if (a->token == NULL)
		return true;
	ok |= api_token_matches(a, evhttp_find_header(ih, API_TOKEN_HEADER));
	v = evhttp_find_header(ih, "Authorization");
	if (v != NULL && strncasecmp(v, "Bearer ", 7) == 0) {
		v += 7;
		while (*v == ' ' || *v == '\t')
			v++;
		ok |= api_token_matches(a, v);
	}
	return ok;
}

/* ---- wrong tokens back off, per peer ---- */

static void
api_peer_key(const struct sockaddr *sa, uint8_t key[17])
{
	memset(key, 0, 17);
	if (sa == NULL)
		return;
	key[0] = (uint8_t)sa->sa_family;
	if (sa->sa_family == AF_INET)
		memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
		    &((const struct sockaddr_in6 *)sa)->sin6_addr;
		/* IPv4 peers on a dual-stack listener: their own address,
		 * not the /64 every IPv4 peer shares (::ffff:0:0/64). */
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			key[0] = AF_INET;
			memcpy(key + 1, a6->s6_addr + 12, 4);
		} else
			memcpy(key + 1, a6->s6_addr, 8); /* the /64 */
	}
}

/* Loopback or the Unix socket: the transports vault writes accept
 * besides TLS (contract §4), which this API does not serve. */
static bool
api_peer_local(const struct sockaddr *sa)
{
	const uint8_t *a;

	if (sa == NULL)
		return false;
	if (sa->sa_family == AF_UNIX)
		return true;
	if (sa->sa_family == AF_INET)
		return ((const uint8_t *)&((const struct sockaddr_in *)sa)
		               ->sin_addr)[0] == 127;
	if (sa->sa_family != AF_INET6)
		return false;
	a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	if (IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)a))
		return true;
	return IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a) && a[12] == 127;
}

static struct api_peer *
api_peer_find(struct api *a, const uint8_t key[17], uint64_t now)
{
	size_t i;

	for (i = 0; i < API_AUTH_PEERS; i++) {
		struct api_peer *p = &a->peers[i];
		if (!p->used)
			continue;
		if (now - p->last_us > (uint64_t)API_AUTH_FORGET_S * 1000000u &&
		    now >= p->until_us) {
			p->used = false; /* quiet long enough: forgotten */
			continue;
		}
		if (memcmp(p->key, key, 17) == 0)
			return p;
	}
	return NULL;
}

/* Seconds left of the peer's backoff, 0 when it may try a token. */
static unsigned
api_auth_backoff_s(struct api *a, const uint8_t key[17], uint64_t now)
{
	struct api_peer *p = api_peer_find(a, key, now);

	if (p == NULL || now >= p->until_us)
		return 0;
	return (unsigned)((p->until_us - now + 999999u) / 1000000u);
}

static void
api_auth_failed(
    struct api *a, const uint8_t key[17], uint64_t now, const char *peer)
{
	struct api_peer *p = api_peer_find(a, key, now);
	uint64_t ms;
	size_t i;

	if (p == NULL) {
		/* A free entry, else the one quiet the longest. */
		p = &a->peers[0];
		for (i = 0; i < API_AUTH_PEERS; i++) {
			if (!a->peers[i].used) {
				p = &a->peers[i];
				break;
			}
			if (a->peers[i].last_us < p->last_us)
				p = &a->peers[i];
		}
		memset(p, 0, sizeof(*p));
		p->used = true;
		memcpy(p->key, key, 17);
	}
	if (p->fails < UINT32_MAX)
		p->fails++;
	p->last_us = now;
	if (p->fails <= API_AUTH_FREE_FAILS)
		return;
	ms = API_AUTH_BACKOFF_MS;
	for (i = API_AUTH_FREE_FAILS + 1;
	     i < p->fails && ms < API_AUTH_BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > API_AUTH_BACKOFF_MAX_MS)
		ms = API_AUTH_BACKOFF_MAX_MS;
	p->until_us = now + ms * 1000u;
	if (p->fails == API_AUTH_FREE_FAILS + 1)
		log_warn(a->log, "api.auth_backoff", LOG_S("peer", peer),
		    LOG_U("failures", p->fails), LOG_U("backoff_ms", ms));
}

static void
api_auth_ok(struct api *a, const uint8_t key[17], uint64_t now)
{
	struct api_peer *p = api_peer_find(a, key, now);

	if (p != NULL)
		p->used = false;
}

/* ---- /policy ---- */

/*
 * Copies at most API_LOG_ERR_MAX bytes of msg into cut, never splitting a
 * UTF-8 sequence (the message may quote a peer's target); true when bytes
 * were left out, so the log line can say so.
 */
static bool
api_log_cut(const char *msg, char cut[API_LOG_ERR_MAX + 1])
{
	size_t n = msg != NULL ? strlen(msg) : 0;
	bool cutting = n > API_LOG_ERR_MAX;

	if (cutting) {
		n = API_LOG_ERR_MAX;
		/* Back up to the first byte of the sequence the cut falls in. */
		while (n > 0 && ((unsigned char)msg[n] & 0xc0) == 0x80)
			n--;
	}
	if (n > 0)
		memcpy(cut, msg, n);
	cut[n] = '\0';
	return cutting;
}

static void
api_log_update_failed(struct api_req *r, enum api_op op, int code,
    const char *reason, const char *msg)
{
	char cut[API_LOG_ERR_MAX + 1];
	bool cutting = api_log_cut(msg, cut);

	r->a->stats->policy_updates_failed++;
	log_warn(r->a->log, "policy.update_failed",
	    LOG_S("op", api_op_names[op]), LOG_I("status", code),
	    LOG_S("reason", reason), LOG_S("error", cut),
	    cutting ? LOG_B("error_cut", true) : LOG_BEGIN_);
}

static void
api_policy_get(struct api_req *r)
{
	struct api *a = r->a;
	struct policy *p = a->h.policy_get(a->h.arg);
	char *s = policy_user_to_json(p);
	json_t *pj = s != NULL ? json_loads(s, 0, NULL) : NULL;

	free(s);
	if (pj == NULL) {
		api_reply_text(
		    r, 500, "internal error: cannot serialize policy");
		return;
	}
	api_reply_json(r, 200,
	    api_status_body(policy_mode_name(p), api_enforcement(a), NULL, pj));
}

/* Go's strings.TrimSpace for the ASCII white space a JSON body can have. */
static void
api_trim(const char **s, size_t *len)
{
	while (*len > 0 && strchr(" \t\n\v\f\r", (*s)[0]) != NULL) {
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && strchr(" \t\n\v\f\r", (*s)[*len - 1]) != NULL)
		(*len)--;
}

/*
 * The shape checks the reference does while decoding (a JSON array, not
 * empty, of rule objects or of target strings): failures here carry the
 * "invalid patch rules: " / "invalid delete targets: " prefix; everything
 * the policy library finds afterwards is about the merged result.
 */
static int
api_check_list(const char *body, size_t len, bool strings, struct err *e)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, JSON_DECODE_ANY, &je);
	size_t i;
	int rc = -1;

	if (root == NULL) {
		err_set(
		    e, "%s (line %d, column %d)", je.text, je.line, je.column);
		return -1;
	}
	if (!json_is_array(root)) {
		err_set(e, "expected a JSON array of %s",
		    strings ? "target strings" : "rules");
		goto out_decref;
	}
	if (json_array_size(root) == 0) {
		err_set(e, "empty array");
		goto out_decref;
	}
	for (i = 0; i < json_array_size(root); i++) {
		json_t *v = json_array_get(root, i);
		if (strings && !json_is_string(v)) {
			err_set(e, "element %zu: expected a target string", i);
			goto out_decref;
		}
		if (!strings && !json_is_object(v)) {
			err_set(e, "element %zu: expected a rule object", i);
			goto out_decref;
		}
	}
	rc = 0;
out_decref:
	json_decref(root);
	return rc;
}

static void api_verdict_set(
    struct api_verdict *v, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
api_verdict_set(
    struct api_verdict *v, int status, const char *reason, const char *fmt, ...)
{
	va_list ap;

	v->status = status;
	v->reason = reason;
	va_start(ap, fmt);
	(void)vsnprintf(v->msg, sizeof(v->msg), fmt, ap);
	va_end(ap);
}

/* 400: what (a fixed string, the reason too) failed, as e says. */
static void
api_verdict_invalid(
    struct api_verdict *v, const char *what, const struct err *e)
{
	api_verdict_set(v, 400, what, "%s: %s", what, e->msg);
}

/* The verdict on a mutation that built v->next: none is 413 when it went
 * over the rule cap, else 400 for what. */
static void
api_verdict_built(
    struct api_verdict *v, bool over, const char *what, const struct err *e)
{
	if (v->next != NULL)
		return;
	if (over)
		api_verdict_set(v, 413, "over rule cap", "%s", e->msg);
	else
		api_verdict_invalid(v, what, e);
}

void
api_policy_decide(const struct policy *cur, enum api_op op, const char *body,
    size_t len, size_t max_rules, struct api_verdict *v)
{
	struct err e;
	bool over = false;
	size_t matched = 0;

	memset(v, 0, sizeof(*v));
	err_clear(&e);
	v->status = 200;
	if (len > API_BODY_MAX) {
		/* evhttp enforces the cap already; never truncate silently. */
		api_verdict_set(v, 413, "body too large",
		    "request body larger than %u bytes", API_BODY_MAX);
		return;
	}
	if (body == NULL)
		len = 0;
	if (len == 0)
		body = "";
	api_trim(&body, &len);
	if (len == 0 && op != API_OP_REPLACE) {
		api_verdict_set(v, 400, "empty body", "empty body");
		return;
	}
	switch (op) {
	case API_OP_REPLACE:
		v->reset = len == 0;
		v->next =
		    policy_replace_json(cur, body, len, max_rules, &over, &e);
		api_verdict_built(v, over, "invalid policy", &e);
		return;
	case API_OP_PATCH:
		if (api_check_list(body, len, false, &e) == -1) {
			api_verdict_invalid(v, "invalid patch rules", &e);
			return;
		}
		v->next =
		    policy_patch_json(cur, body, len, max_rules, &over, &e);
		api_verdict_built(v, over, "invalid merged policy", &e);
		return;
	case API_OP_DELETE:
		if (api_check_list(body, len, true, &e) == -1) {
			api_verdict_invalid(v, "invalid delete targets", &e);
			return;
		}
		v->next = policy_delete_json(cur, body, len, &matched, &e);
		if (v->next == NULL && matched == 0 &&
		    strcmp(e.msg, API_NOMATCH_REASON) == 0)
			v->nomatch = true; /* 200, nothing to apply */
		else if (v->next == NULL)
			api_verdict_invalid(v, "invalid delete targets", &e);
		return;
	}
	api_verdict_set(v, 400, "unknown operation", "unknown operation");
}

/* On the commit worker: the verdict against cur, and the snapshot to
 * commit when there is one. Touches p and cur alone. */
static struct policy *
api_policy_decide_cb(struct api_mutation *m, const struct policy *cur)
{
	struct api_pending *p = api_pending_of(m);
	struct api *a = p->r.a;
	struct policy *next;
	struct err e;

	api_policy_decide(
	    cur, (enum api_op)p->op, p->body, p->len, a->max_rules, &p->v);
	p->mode = policy_mode_name(cur);
	if (p->v.status != 200 || p->v.nomatch)
		return NULL;
	err_clear(&e);
	if (a->h.policy_vault_check != NULL &&
	    a->h.policy_vault_check(a->h.arg, p->v.next, &e) == -1) {
		p->code = 400;
		(void)snprintf(p->msg, sizeof(p->msg), "%s", e.msg);
		policy_unref(p->v.next);
		p->v.next = NULL;
		return NULL;
	}
	next = p->v.next;
	p->v.next = NULL; /* the daemon's now */
	return next;
}

/* On the loop: the answer, once the mutation is in force or refused. */
static void
api_policy_done_cb(struct api_mutation *m, int rc, const struct policy *next,
    const struct err *e)
{
	struct api_pending *p = api_pending_of(m);
	struct api_req *r = &p->r;
	struct api *a = r->a;
	enum api_op op = (enum api_op)p->op;

	if (rc == 1 && p->v.status != 200) {
		api_reply_text(r, p->v.status, "%s", p->v.msg);
		api_log_update_failed(
		    r, op, p->v.status, p->v.reason, p->v.msg);
	} else if (rc == 1 && p->v.nomatch) {
		/* Nothing applied, nothing counted as a failure. */
		api_reply_json(r, 200,
		    api_status_body(
		        p->mode, api_enforcement(a), API_NOMATCH_REASON, NULL));
	} else if (rc == 1) {
		api_reply_text(
		    r, 400, "credential vault policy validation: %s", p->msg);
		api_log_update_failed(r, op, 400, "vault validation", p->msg);
	} else if (rc == -1) {
		api_reply_text(r, 500, "%s",
		    e->msg[0] != '\0' ? e->msg : "failed to apply policy");
		api_log_update_failed(r, op, 500, "commit failed", e->msg);
	} else {
		a->stats->policy_updates_ok++;
		log_info(a->log, "policy.updated",
		    LOG_S("op", api_op_names[op]),
		    LOG_U("revision", next->revision),
		    LOG_S("mode", policy_mode_name(next)),
		    LOG_U("rules", next->nrules), LOG_B("reset", p->v.reset));
		if (p->v.reset)
			api_reply_json(r, 200,
			    api_status_body(
			        "deny_all", NULL, API_RESET_REASON, NULL));
		else
			api_reply_json(r, 200,
			    api_status_body(policy_mode_name(next),
			        api_enforcement(a), NULL, NULL));
	}
	api_pending_free(p);
}

static void
api_policy_mutate(struct api_req *r, enum api_op op)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	struct api_pending *p;

	if ((p = api_pending_new(r)) == NULL) {
		api_reply_text(r, 500, "internal error: out of memory");
		return;
	}
	p->op = (int)op;
	p->m.decide = api_policy_decide_cb;
	p->m.done = api_policy_done_cb;
	p->m.persist = true;
	/* The worker reads its own copy: evhttp's buffer is the loop's. A
	 * body over the cap is not copied; decide answers 413 by its length. */
	p->len = len;
	if (len > 0 && len <= API_BODY_MAX) {
		if ((p->body = malloc(len)) == NULL ||
		    evbuffer_copyout(in, p->body, len) != (ev_ssize_t)len) {
			api_reply_text(
			    &p->r, 500, "internal error: out of memory");
			api_pending_free(p);
			return;
		}
	}
	(void)api_pending_submit(p);
}

static void
api_policy_cb(struct api_req *r)
{
	enum api_op op;

	switch (r->cmd) {
	case EVHTTP_REQ_GET:
		api_policy_get(r);
		return;
	case EVHTTP_REQ_POST:
	case EVHTTP_REQ_PUT:
		op = API_OP_REPLACE;
		break;
	case EVHTTP_REQ_PATCH:
		op = API_OP_PATCH;
		break;
	case EVHTTP_REQ_DELETE:
		op = API_OP_DELETE;
		break;
	default:
		api_reply_405(r, API_POLICY_ALLOW);
		return;
	}
	if (r->a->token == NULL && !r->a->insecure_no_token) {
		api_reply_text(
		    r, 412, "policy mutations require egress API auth token");
		return;
	}
	api_policy_mutate(r, op);
}

/* ---- probes, metrics, status ---- */

static bool
api_is_get(const struct api_req *r)
{
	return r->cmd == EVHTTP_REQ_GET || r->cmd == EVHTTP_REQ_HEAD;
}

static void
api_healthz_cb(struct api_req *r)
{
	struct api *a = r->a;
	char comp[API_WHY_MAX] = "";

	if (a->h.healthy != NULL &&
	    !a->h.healthy(a->h.arg, comp, sizeof(comp))) {
		api_reply_text(
		    r, 503, "%s not ready", comp[0] != '\0' ? comp : "egressd");
		return;
	}
	/* The reference writes "ok" without a newline. */
	api_reply(r, 200, "text/plain; charset=utf-8", "ok", 2);
}

static bool
api_is_ready(const struct api *a, char *why, size_t len)
{
	why[0] = '\0';
	if (a->h.ready == NULL)
		return true;
	if (a->h.ready(a->h.arg, why, len))
		return true;
	if (why[0] == '\0')
		snprintf(why, len, "not ready");
	return false;
}

static void
api_readyz_cb(struct api_req *r)
{
	char why[API_WHY_MAX];

	if (!api_is_get(r)) {
		api_reply_405(r, "GET");
		return;
	}
	if (!api_is_ready(r->a, why, sizeof(why))) {
		api_reply_text(r, 503, "%s", why);
		return;
	}
	api_reply(r, 200, "text/plain; charset=utf-8", "ok", 2);
}

static void
api_metrics_cb(struct api_req *r)
{
	struct api *a = r->a;
	struct metrics_info info = {
	    .version = EGRESSD_VERSION,
	    .enforcement_mode = api_enforcement(a),
	    .start_time_s = a->start_time_s,
	    .log_lines = a->log->lines,
	    .log_dropped = a->log->dropped,
	    .api_connections = a->nconns,
	};
	struct evbuffer *b;

	if (!api_is_get(r)) {
		api_reply_405(r, "GET");
		return;
	}
	if (a->h.metrics_refresh != NULL)
		a->h.metrics_refresh(a->h.arg);
	if ((b = evbuffer_new()) == NULL ||
	    metrics_render(a->stats, &info, b) == -1) {
		if (b != NULL)
			evbuffer_free(b);
		api_reply_text(r, 500, "internal error: out of memory");
		return;
	}
	r->status = 200;
	evhttp_add_header(evhttp_request_get_output_headers(r->req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(r->req, 200, "OK", b);
	evbuffer_free(b);
}

static json_t *
api_status_policy(const struct policy *p)
{
	return json_pack("{s:I,s:s,s:s,s:s,s:I,s:I,s:I}", "revision",
	    (json_int_t)p->revision, "source",
	    p->source != NULL ? p->source : "", "mode", policy_mode_name(p),
	    "defaultAction",
	    p->default_action == POLICY_ALLOW ? "allow" : "deny", "rules",
	    (json_int_t)p->nrules, "alwaysDeny", (json_int_t)p->nalways_deny,
	    "alwaysAllow", (json_int_t)p->nalways_allow);
}

static void
api_status_cb(struct api_req *r)
{
	struct api *a = r->a;
	struct policy *p;
	json_t *o, *lst, *apio;
	char why[API_WHY_MAX];
	bool ready;
	int rc = 0;

	if (!api_is_get(r)) {
		api_reply_405(r, "GET");
		return;
	}
	ready = api_is_ready(a, why, sizeof(why));
	p = a->h.policy_get(a->h.arg);
	o = json_object();
	lst = json_array();
	if (a->tcp != NULL)
		rc |= json_array_append_new(lst, json_string(a->tcp_text));
	if (a->unix_path != NULL) {
		char u[API_ADDR_MAX + 8];
		snprintf(u, sizeof(u), "unix:%s", a->unix_path);
		rc |= json_array_append_new(lst, json_string(u));
	}
	apio = json_pack("{s:o,s:s,s:I,s:I}", "listeners", lst, "auth",
	    a->token != NULL           ? "token"
	        : a->insecure_no_token ? "none (mutations allowed)"
	                               : "none (read-only)",
	    "maxRules", (json_int_t)a->max_rules, "connections",
	    (json_int_t)a->nconns);
	rc |= json_object_set_new(o, "status", json_string("ok"));
	rc |= json_object_set_new(o, "version", json_string(EGRESSD_VERSION));
	rc |= json_object_set_new(
	    o, "enforcementMode", json_string(api_enforcement(a)));
	rc |= json_object_set_new(o, "ready", json_boolean(ready));
	if (!ready)
		rc |= json_object_set_new(o, "notReady", json_string(why));
	rc |= json_object_set_new(o, "policy", api_status_policy(p));
	rc |= json_object_set_new(o, "api", apio);
	if (rc != 0 || o == NULL) {
		json_decref(o);
		api_reply_text(r, 500, "internal error: out of memory");
		return;
	}
	if (a->h.status != NULL)
		a->h.status(a->h.arg, o);
	api_reply_json(r, 200, o);
}

/* ---- routing ---- */

struct api_route {
	const char *path;
	bool prefix; /* path ends in '/' and matches everything below */
	bool auth; /* token required when one is configured */
	bool quiet; /* successful requests logged at debug level */
	void (*handler)(struct api_req *r);
};

/* Read-only table. */
static const struct api_route api_routes[] = {
    {.path = "/policy", .auth = true, .handler = api_policy_cb},
    {.path = "/credential-vault", .auth = true, .handler = api_vault_cb},
    {.path = "/credential-vault/",
        .prefix = true,
        .auth = true,
        .handler = api_vault_sub_cb},
    {.path = "/healthz", .quiet = true, .handler = api_healthz_cb},
    {.path = "/readyz", .quiet = true, .handler = api_readyz_cb},
    {.path = "/metrics",
        .auth = true,
        .quiet = true,
        .handler = api_metrics_cb},
    {.path = "/v1/status", .auth = true, .handler = api_status_cb},
};

static const struct api_route *
api_route_find(const char *path)
{
	size_t i;

	if (path == NULL)
		return NULL;
	for (i = 0; i < sizeof(api_routes) / sizeof(api_routes[0]); i++) {
		const struct api_route *rt = &api_routes[i];
		if (rt->prefix ? strncmp(path, rt->path, strlen(rt->path)) == 0
		               : strcmp(path, rt->path) == 0)
			return rt;
	}
	return NULL;
}

struct api_sweep_ctx {
	struct api *a;
	bool live[API_CONNS_MAX + 1];
};

static int
api_sweep_event_cb(
    const struct event_base *base, const struct event *ev, void *arg)
{
	struct api_sweep_ctx *c = arg;
	void *cbarg = event_get_callback_arg(ev);
	size_t i;

	(void)base;
	for (i = 0; i < c->a->nall; i++)
		if (c->a->conns[i]->bev == cbarg)
			c->live[i] = true;
	return 0;
}

static void
api_conn_free(struct api_conn *c)
{
	if (c == NULL)
		return;
	if (c->deadline != NULL)
		event_free(c->deadline);
	c->magic = 0;
	free(c);
}

/* Drops the connections evhttp has freed. Never call it from inside a
 * request callback: the connection being answered has no event added at
 * that moment. */
static void
api_sweep(struct api *a)
{
	struct api_sweep_ctx c = {.a = a};
	size_t i, n = 0;

	if (a->nall == 0)
		return;
	(void)event_base_foreach_event(a->base, api_sweep_event_cb, &c);
	for (i = 0; i < a->nall; i++) {
		if (c.live[i] || a->conns[i]->pending > 0) {
			a->conns[n++] = a->conns[i];
			continue;
		}
		if (a->conns[i]->slot)
			a->nconns--;
		api_conn_free(a->conns[i]);
	}
	a->nall = n;
}

static void
api_listeners_enable(struct api *a, bool on)
{
	struct evhttp_bound_socket *b[2] = {a->tcp, a->unx};
	size_t i;

	for (i = 0; i < 2; i++) {
		struct evconnlistener *l;
		if (b[i] == NULL ||
		    (l = evhttp_bound_socket_get_listener(b[i])) == NULL)
			continue;
		if (on)
			(void)evconnlistener_enable(l);
		else
			(void)evconnlistener_disable(l);
	}
}

static void
api_sweep_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct api *a = arg;

	(void)fd;
	(void)what;
	if (a == NULL || a->magic != API_MAGIC)
		abort();
	api_sweep(a);
	if (a->nconns < API_CONNS_MAX) {
		a->paused = false;
		(void)event_del(a->ev_sweep);
		api_listeners_enable(a, true);
		log_info(a->log, "api.resume", LOG_U("connections", a->nconns));
	}
}

static void
api_conn_arm(struct api_conn *c, unsigned ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	(void)event_add(c->deadline, &tv);
}

/* The deadline of what the framer reads now: the head's from its first
 * byte, the body's from the end of the head; none between requests
 * (evhttp's idle timeout, API_TIMEOUT_S, covers that). */
static void
api_conn_rearm(struct api_conn *c)
{
	c->seq = c->fr.seq;
	switch (c->fr.state) {
	case API_FRAME_HEAD:
		api_conn_arm(c, API_HEAD_TIMEOUT_MS);
		break;
	case API_FRAME_BODY:
	case API_FRAME_CHUNKED:
		api_conn_arm(c, API_BODY_TIMEOUT_MS);
		break;
	default:
		(void)event_del(c->deadline);
	}
}

static void
api_conn_peer(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "";

	buf[0] = '\0';
	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) == -1)
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(s4->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 =
		    (const struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(s6->sin6_port));
	}
}

/*
 * Answers the connection ourselves (evhttp has not seen, and never sees,
 * the request) and closes it: the answer is written straight to the
 * socket when nothing of evhttp's is still queued (on the TLS listener
 * as one record with SSL_write, then close_notify: evhttp's bufferevent
 * is not used, its write callback would take the answer for one of
 * evhttp's), the write side shut (the client sees the answer, then EOF),
 * and what the client still sends is read and dropped for
 * API_LINGER_MS, so a client busy sending its body reads the answer
 * instead of a reset. Then the read side is shut: evhttp reads EOF and
 * frees the connection.
 */
static void
api_conn_refuse(
    struct api_conn *c, int code, const char *reason, const char *text)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	int fd = bufferevent_getfd(c->bev);
	char resp[512], peer[API_ADDR_MAX];
	int n;

	c->refused = true;
	c->a->stats->api_requests++;
	(void)evbuffer_drain(in, evbuffer_get_length(in));
	n = snprintf(resp, sizeof(resp),
	    "HTTP/1.1 %d %s\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\n"
	    "X-Content-Type-Options: nosniff\r\n"
	    "Connection: close\r\n"
	    "Content-Length: %zu\r\n"
	    "\r\n"
	    "%s\n",
	    code, http_reason(code), strlen(text) + 1, text);
	if (fd >= 0 && n > 0 && (size_t)n < sizeof(resp) &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
		SSL *ssl = bufferevent_openssl_get_ssl(c->bev);

		if (ssl == NULL)
			(void)send(
			    fd, resp, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		else if (SSL_is_init_finished(ssl)) {
			/* a small answer on an idle socket: one record
			 * that goes at once, or not at all */
			ERR_clear_error();
			if (SSL_write(ssl, resp, n) > 0)
				(void)SSL_shutdown(ssl);
			ERR_clear_error();
		}
	}
	if (fd >= 0)
		(void)shutdown(fd, SHUT_WR);
	api_conn_peer(fd, peer, sizeof(peer));
	log_info(c->a->log, "api.refused", LOG_I("status", code),
	    LOG_S("reason", reason), LOG_S("peer", peer));
	api_conn_arm(c, API_LINGER_MS);
}

static void
api_conn_close(struct api_conn *c)
{
	int fd = bufferevent_getfd(c->bev);

	c->closing = true;
	if (fd >= 0)
		(void)shutdown(fd, SHUT_RDWR);
	/* Should EOF not come (data keeps arriving), look again. */
	api_conn_arm(c, API_LINGER_MS);
}

static void
api_conn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct api_conn *c = arg;
	struct api *a;
	size_t i;
	bool mine = false;

	(void)fd;
	(void)what;
	if (c == NULL || c->magic != API_CONN_MAGIC)
		abort();
	a = c->a;
	/* evhttp may have freed the bufferevent (the client left): drop
	 * such connections first, and then only touch c if it is still
	 * one of ours (the sweep may just have freed it). */
	api_sweep(a);
	for (i = 0; i < a->nall; i++)
		mine |= a->conns[i] == c;
	if (!mine)
		return;
	if (c->refused || c->closing) {
		api_conn_close(c);
		return;
	}
	switch (c->fr.state) {
	case API_FRAME_HEAD:
		api_conn_refuse(c, 408, "head deadline", "request timeout");
		break;
	case API_FRAME_BODY:
	case API_FRAME_CHUNKED:
		api_conn_refuse(c, 408, "body deadline", "request timeout");
		break;
	default:
		/* Connected and silent since accept. */
		api_conn_close(c);
	}
}

static void
api_conn_input_cb(
    struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct api_conn *c = arg;
	struct evbuffer_ptr pos;
	struct evbuffer_iovec v[16];
	size_t len = evbuffer_get_length(buf), added = info->n_added;
	enum api_frame_error fe = API_FRAME_OK;
	int i, nv;

	if (c == NULL || c->magic != API_CONN_MAGIC)
		abort();
	if (added == 0)
		return;
	if (c->refused || c->closing) {
		(void)evbuffer_drain(buf, len);
		return;
	}
	if (added > len)
		added = len; /* cannot happen: we run before evhttp reads */
	while (added > 0 && fe == API_FRAME_OK) {
		if (evbuffer_ptr_set(
		        buf, &pos, len - added, EVBUFFER_PTR_SET) == -1)
			break;
		nv = evbuffer_peek(buf, (ev_ssize_t)added, &pos, v, 16);
		if (nv <= 0)
			break;
		for (i = 0; i < nv && i < 16 && added > 0 && fe == API_FRAME_OK;
		     i++) {
			size_t k = v[i].iov_len < added ? v[i].iov_len : added;
			fe = api_frame_feed(&c->fr, v[i].iov_base, k);
			added -= k;
		}
	}
	switch (fe) {
	case API_FRAME_OK:
		break;
	case API_FRAME_HEAD_TOO_LARGE:
		api_conn_refuse(c, 431, "head too large",
		    "request header fields too large");
		return;
	case API_FRAME_BODY_TOO_LARGE:
		api_conn_refuse(
		    c, 413, "body too large", "request body too large");
		return;
	case API_FRAME_BAD:
		api_conn_refuse(c, 400, "bad framing", "bad request");
		return;
	}
	if (c->fr.seq != c->seq)
		api_conn_rearm(c);
}

static struct bufferevent *
api_bev_track(struct api *a, struct event_base *base, struct bufferevent *bev)
{
	struct api_conn *c;

	if (bev == NULL)
		return NULL;
	/* Listeners pause at the cap, so at most one arrives past it (a
	 * burst in one listener callback); api_request_cb answers it 503
	 * unless a slot has freed by then. */
	if (a->nall > API_CONNS_MAX || (c = calloc(1, sizeof(*c))) == NULL)
		return bev;
	c->magic = API_CONN_MAGIC;
	c->a = a;
	c->bev = bev;
	api_frame_init(&c->fr, API_HEADERS_MAX, API_BODY_MAX);
	if ((c->deadline = evtimer_new(base, api_conn_deadline_cb, c)) ==
	        NULL ||
	    evbuffer_add_cb(bufferevent_get_input(bev), api_conn_input_cb, c) ==
	        NULL) {
		api_conn_free(c);
		return bev;
	}
	c->slot = a->nconns < API_CONNS_MAX;
	a->nconns += c->slot;
	a->conns[a->nall++] = c;
	/* From accept, the first head must be complete in time too. */
	api_conn_arm(c, API_HEAD_TIMEOUT_MS);
	if (a->nconns >= API_CONNS_MAX && !a->paused) {
		struct timeval tv = {0, API_SWEEP_MS * 1000};
		a->paused = true;
		api_listeners_enable(a, false);
		(void)event_add(a->ev_sweep, &tv);
		log_warn(a->log, "api.pause", LOG_U("connections", a->nconns),
		    LOG_S("reason", "connection cap reached"));
	}
	return bev;
}

static struct bufferevent *
api_bev_cb(struct event_base *base, void *arg)
{
	struct api *a = arg;

	if (a == NULL || a->magic != API_MAGIC)
		abort();
	api_sweep(a);
	return api_bev_track(
	    a, base, bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE));
}

/* The TLS listener: the handshake runs inside the bufferevent; what
 * api_frame and evhttp read is the decrypted stream. */
static struct bufferevent *
api_bev_tls_cb(struct event_base *base, void *arg)
{
	struct api *a = arg;
	struct bufferevent *bev;
	SSL *ssl;

	if (a == NULL || a->magic != API_MAGIC)
		abort();
	api_sweep(a);
	if ((ssl = SSL_new(a->tls)) == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(
	    base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	return api_bev_track(a, base, bev);
}

/*
 * Whether the connection holds a slot. One that came in past the cap gets
 * one now if any is free; otherwise false.
 */
static bool
api_conn_admit(struct api *a, struct evhttp_connection *evcon)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	size_t i;

	for (i = 0; i < a->nall; i++) {
		struct api_conn *c = a->conns[i];
		if (c->bev != bev)
			continue;
		if (!c->slot && a->nconns < API_CONNS_MAX) {
			c->slot = true;
			a->nconns++;
		}
		return c->slot;
	}
	return false;
}

/*
 * evhttp parses CONNECT targets as authorities and leaves no path; route
 * those by the raw target up to '?' so "CONNECT /policy" still gets 405.
 */
static const char *
api_raw_path(struct evhttp_request *req, char *buf, size_t len)
{
	const char *u = evhttp_request_get_uri(req);
	size_t n;

	if (u == NULL)
		return NULL;
	n = strcspn(u, "?#");
	if (n >= len)
		return NULL;
	memcpy(buf, u, n);
	buf[n] = '\0';
	return buf;
}

static void
api_request_log(const struct api_req *r)
{
	/* Probes and scrapes that succeed are routine: debug, not info. */
	log_emit(r->a->log, r->quiet && r->status < 400 ? LOG_DEBUG : LOG_INFO,
	    "api.request",
	    (const struct log_field[]){LOG_S("method", api_method_name(r->cmd)),
	        LOG_S("path", r->path != NULL ? r->path : ""),
	        LOG_I("status", r->status),
	        LOG_D("ms", (double)(now_mono_us() - r->t0) / 1000.0),
	        LOG_S("peer", r->peer), LOG_END_});
}

/* ---- answers that wait for the commit queue ---- */

struct api_pending *
api_pending_of(struct api_mutation *m)
{
	struct api_pending *p = (struct api_pending *)m;

	if (p == NULL || p->magic != API_PENDING_MAGIC)
		abort();
	return p;
}

/* Our connection of req, or NULL (a request of a test's own). */
static struct api_conn *
api_conn_of(struct api *a, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev;
	size_t i;

	if (evcon == NULL ||
	    (bev = evhttp_connection_get_bufferevent(evcon)) == NULL)
		return NULL;
	for (i = 0; i < a->nall; i++)
		if (a->conns[i]->bev == bev)
			return a->conns[i];
	return NULL;
}

struct api_pending *
api_pending_new(struct api_req *r)
{
	struct api_pending *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->magic = API_PENDING_MAGIC;
	p->r = *r;
	if (r->path != NULL && (p->path = strdup(r->path)) == NULL) {
		free(p);
		return NULL;
	}
	p->r.path = p->path;
	if ((p->c = api_conn_of(r->a, r->req)) != NULL)
		p->c->pending++;
	r->deferred = true;
	return p;
}

void
api_pending_free(struct api_pending *p)
{
	if (p == NULL)
		return;
	api_request_log(&p->r);
	if (p->c != NULL)
		p->c->pending--;
	if (p->body != NULL) {
		secmem_wipe(p->body, p->len);
		free(p->body);
	}
	policy_unref(p->v.next);
	free(p->path);
	p->magic = 0;
	free(p);
}

/* No queue (unit tests): decide and commit here and now. */
static void
api_pending_inline(struct api_pending *p)
{
	struct api *a = p->r.a;
	struct policy *cur = policy_ref(a->h.policy_get(a->h.arg));
	struct policy *next = p->m.decide(&p->m, cur);
	struct err e;
	int rc;

	err_clear(&e);
	if (next == NULL)
		p->m.done(&p->m, 1, NULL, NULL);
	else {
		rc = p->m.persist ? a->h.policy_commit(a->h.arg, next, &e)
		                  : a->h.vault_commit(a->h.arg, next, &e);
		p->m.done(&p->m, rc == 0 ? 0 : -1, next, &e);
	}
	policy_unref(next);
	policy_unref(cur);
}

int
api_pending_submit(struct api_pending *p)
{
	struct api *a = p->r.a;
	struct err e;

	if (a->h.mutate == NULL) {
		api_pending_inline(p);
		return 0;
	}
	err_clear(&e);
	if (a->h.mutate(a->h.arg, &p->m, &e) == -1) {
		api_reply_text(&p->r, 503, "%s", e.msg);
		api_pending_free(p);
		return -1;
	}
	return 0;
}

static void
api_request_cb(struct evhttp_request *req, void *arg)
{
	struct api *a = arg;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct api_req r = {.a = a, .req = req, .status = 0};
	const struct api_route *rt;
	uint64_t t0 = now_mono_us();
	char *peer = r.peer;
	char rawpath[API_PATH_MAX];
	char *host = NULL;
	ev_uint16_t port = 0;
	uint8_t key[17] = {0};
	unsigned wait_s = 0;
	bool guarded;

	if (a == NULL || a->magic != API_MAGIC)
		abort();
	a->stats->api_requests++;
	r.cmd = evhttp_request_get_command(req);
	r.path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	if (r.path == NULL || r.path[0] == '\0')
		r.path = api_raw_path(req, rawpath, sizeof(rawpath));
	if (evcon != NULL) {
		evhttp_connection_get_peer(evcon, &host, &port);
		snprintf(peer, sizeof(r.peer), "%s:%u",
		    host != NULL ? host : "", (unsigned)port);
	}

	if (evcon != NULL) {
		api_peer_key(evhttp_connection_get_addr(evcon), key);
		r.transport_ok =
		    api_peer_local(evhttp_connection_get_addr(evcon)) ||
		    bufferevent_openssl_get_ssl(
		        evhttp_connection_get_bufferevent(evcon)) != NULL;
	}
	rt = api_route_find(r.path);
	r.t0 = t0;
	r.quiet = rt != NULL && rt->quiet;
	guarded = rt != NULL && rt->auth && a->token != NULL;
	if (evcon != NULL && !api_conn_admit(a, evcon)) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Connection", "close");
		api_reply_text(&r, 503, "too many connections");
	} else if (rt == NULL) {
		api_reply_text(&r, 404, "404 page not found");
	} else if (guarded && (wait_s = api_auth_backoff_s(a, key, t0)) > 0) {
		char ra[16];
		/* The token is not even compared; the try still counts. */
		a->stats->api_unauthorized++;
		api_auth_failed(a, key, t0, peer);
		snprintf(ra, sizeof(ra), "%u", api_auth_backoff_s(a, key, t0));
		evhttp_add_header(
		    evhttp_request_get_output_headers(req), "Retry-After", ra);
		api_reply_text(
		    &r, 429, "too many failed authentication attempts");
	} else if (rt->auth && !api_authorized(a, req)) {
		a->stats->api_unauthorized++;
		if (guarded)
			api_auth_failed(a, key, t0, peer);
		api_reply_text(&r, 401, "unauthorized");
	} else {
		if (guarded)
			api_auth_ok(a, key, t0);
		rt->handler(&r);
	}

	if (!r.deferred)
		api_request_log(&r);
}

/* ---- listeners ---- */

int
api_parse_addr(
    const char *s, struct sockaddr_storage *ss, socklen_t *len, struct err *e)
{
	static const struct addr any6 = {.family = AF_INET6};
	struct addr a;
	uint16_t port;
	char buf[API_ADDR_MAX + 16];

	memset(ss, 0, sizeof(*ss));
	if (s == NULL || s[0] == '\0') {
		err_set(e, "empty listen address");
		return -1;
	}
	/* ":port" is every address, both families; "localhost" the IPv4
	 * loopback: the two spellings the reference accepts beside literals. */
	if (s[0] == ':')
		(void)snprintf(buf, sizeof(buf), "[::]%s", s);
	else if (strncmp(s, "localhost:", 10) == 0)
		(void)snprintf(buf, sizeof(buf), "127.0.0.1%s", s + 9);
	else
		(void)snprintf(buf, sizeof(buf), "%s", s);
	if (addr_parse_hostport(buf, 0, ADDR_PORT_REQUIRED | ADDR_PORT_ZERO_OK,
	        &a, &port, e) == -1) {
		err_set(e,
		    "listen address %.64s: expected IP:port, [IPv6]:port, "
		    ":port or localhost:port",
		    s);
		return -1;
	}
	*len = addr_to_sockaddr(s[0] == ':' ? &any6 : &a, port, ss);
	return 0;
}

static int
api_listen_fd(int fd, const struct sockaddr *sa, socklen_t salen)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		return -1;
	if (bind(fd, sa, salen) == -1)
		return -1;
	return listen(fd, API_BACKLOG);
}

static int
api_bind_tcp(struct api *a, const char *s, struct err *e)
{
	struct sockaddr_storage ss, got;
	socklen_t len, glen = sizeof(got);
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	bool any6;
	int fd, zero = 0;
	char ip[INET6_ADDRSTRLEN];

	if (api_parse_addr(s, &ss, &len, e) == -1)
		return -1;
	any6 =
	    ss.ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
	fd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 && any6 && errno == EAFNOSUPPORT) {
		/* No IPv6 in this kernel: every address means IPv4 only. */
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		uint16_t port = s6->sin6_port;
		memset(&ss, 0, sizeof(ss));
		s4->sin_family = AF_INET;
		s4->sin_port = port;
		len = sizeof(*s4);
		any6 = false;
		fd = socket(
		    AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	}
	if (fd == -1) {
		err_set(e, "api listen %s: socket: %s", s, strerror(errno));
		return -1;
	}
	/* ":port" and "[::]:port" serve IPv4 too. */
	if (any6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) ==
	        -1) {
		err_set(
		    e, "api listen %s: IPV6_V6ONLY: %s", s, strerror(errno));
		close(fd);
		return -1;
	}
	if (api_listen_fd(fd, (struct sockaddr *)&ss, len) == -1 ||
	    getsockname(fd, (struct sockaddr *)&got, &glen) == -1) {
		err_set(e, "api listen %s: %s", s, strerror(errno));
		close(fd);
		return -1;
	}
	if ((a->tcp = evhttp_accept_socket_with_handle(a->http, fd)) == NULL) {
		err_set(e, "api listen %s: evhttp refused the socket", s);
		close(fd);
		return -1;
	}
	if (got.ss_family == AF_INET6) {
		struct sockaddr_in6 *g6 = (struct sockaddr_in6 *)&got;
		inet_ntop(AF_INET6, &g6->sin6_addr, ip, sizeof(ip));
		a->tcp_port = ntohs(g6->sin6_port);
		snprintf(a->tcp_text, sizeof(a->tcp_text), "tcp:[%s]:%u", ip,
		    a->tcp_port);
	} else {
		struct sockaddr_in *g4 = (struct sockaddr_in *)&got;
		inet_ntop(AF_INET, &g4->sin_addr, ip, sizeof(ip));
		a->tcp_port = ntohs(g4->sin_port);
		snprintf(a->tcp_text, sizeof(a->tcp_text), "tcp:%s:%u", ip,
		    a->tcp_port);
	}
	return 0;
}

static int
api_bind_unix(struct api *a, const char *path, unsigned mode, struct err *e)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		err_set(e, "api socket %s: path too long", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		/* A stale socket of an earlier run; anything else is not ours. */
		if (!S_ISSOCK(st.st_mode)) {
			err_set(e, "api socket %s: exists and is not a socket",
			    path);
			return -1;
		}
		if (unlink(path) == -1) {
			err_set(e, "api socket %s: unlink: %s", path,
			    strerror(errno));
			return -1;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		err_set(e, "api socket %s: %s", path, strerror(errno));
		return -1;
	}
	/* chmod between bind and listen: nobody can connect before. */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chmod(path, mode) == -1 || listen(fd, API_BACKLOG) == -1) {
		err_set(e, "api socket %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if ((a->unix_path = strdup(path)) == NULL ||
	    (a->unx = evhttp_accept_socket_with_handle(a->http_unix, fd)) ==
	        NULL) {
		err_set(e, "api socket %s: cannot register", path);
		close(fd);
		unlink(path);
		return -1;
	}
	return 0;
}

/* One evhttp server as the API wants it; bevcb makes its connections. */
static struct evhttp *
api_http_new(
    struct api *a, struct bufferevent *(*bevcb)(struct event_base *, void *))
{
	struct evhttp *h = evhttp_new(a->base);

	if (h == NULL)
		return NULL;
	/* Every method reaches api_request_cb so /policy can answer 405. */
	evhttp_set_allowed_methods(h, 0xffff);
	/* api_frame enforces the real bounds, answering in our format;
	 * evhttp's (twice as large) are only a backstop. */
	evhttp_set_max_body_size(h, 2 * (ev_ssize_t)API_BODY_MAX);
	evhttp_set_max_headers_size(h, 2 * (ev_ssize_t)API_HEADERS_MAX);
	evhttp_set_timeout(h, API_TIMEOUT_S);
	/* Read (and drop) an oversized body before answering 413, so the
	 * client sees the answer instead of a reset. */
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_gencb(h, api_request_cb, a);
	evhttp_set_bevcb(h, bevcb, a);
	return h;
}

/* The TLS listener's context: TLS 1.2 and up, the operator's chain and
 * key; NULL and e when they do not load or do not match. */
static SSL_CTX *
api_tls_ctx(const char *cert, const char *key, struct err *e)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	unsigned long code;
	char why[256] = "";

	if (ctx == NULL ||
	    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
	    SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		if ((code = ERR_get_error()) != 0)
			ERR_error_string_n(code, why, sizeof(why));
		ERR_clear_error();
		err_set(e, "api TLS (%s, %s): %s", cert, key,
		    why[0] != '\0' ? why : "cannot load");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(
	    ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
	return ctx;
}

struct api *
api_new(struct event_base *base, const struct api_opts *o,
    const struct api_hooks *h, struct err *e)
{
	struct api *a;

	if (h->policy_get == NULL ||
	    (h->policy_commit == NULL && h->mutate == NULL) ||
	    h->enforcement_mode == NULL || o->log == NULL || o->stats == NULL) {
		err_set(e, "api: missing hook or option");
		return NULL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		err_set(e, "api: out of memory");
		return NULL;
	}
	a->magic = API_MAGIC;
	a->base = base;
	a->h = *h;
	a->insecure_no_token = o->insecure_no_token;
	a->max_rules = o->max_rules;
	a->start_time_s = o->start_time_s;
	a->log = o->log;
	a->stats = o->stats;
	if (o->token != NULL && o->token[0] != '\0') {
		a->tokenlen = strlen(o->token);
		if ((a->token = strdup(o->token)) == NULL) {
			err_set(e, "api: out of memory");
			goto out_free;
		}
	}
	if (o->tls_cert != NULL && o->tls_cert[0] != '\0' &&
	    (a->tls = api_tls_ctx(o->tls_cert, o->tls_key, e)) == NULL)
		goto out_free;
	if ((a->http = api_http_new(
	         a, a->tls != NULL ? api_bev_tls_cb : api_bev_cb)) == NULL ||
	    (a->http_unix = api_http_new(a, api_bev_cb)) == NULL) {
		err_set(e, "api: evhttp_new failed");
		goto out_free;
	}
	if ((a->ev_sweep = event_new(
	         base, -1, EV_PERSIST, api_sweep_timer_cb, a)) == NULL) {
		err_set(e, "api: out of memory");
		goto out_free;
	}

	if (o->listen_tcp != NULL && o->listen_tcp[0] != '\0' &&
	    api_bind_tcp(a, o->listen_tcp, e) == -1)
		goto out_free;
	if (o->listen_unix != NULL && o->listen_unix[0] != '\0' &&
	    api_bind_unix(a, o->listen_unix,
	        o->unix_mode != 0 ? o->unix_mode : API_UNIX_MODE, e) == -1)
		goto out_free;

	if (a->token == NULL && a->insecure_no_token)
		log_warn(a->log, "api.insecure",
		    LOG_S("reason",
		        "no token configured; policy mutations "
		        "are allowed without authentication"));
	else if (a->token == NULL)
		log_warn(a->log, "api.read_only",
		    LOG_S("reason",
		        "no token configured; policy mutations "
		        "are refused (412)"));
	log_info(a->log, "api.listen", LOG_S("tcp", a->tcp_text),
	    LOG_B("tls", a->tls != NULL),
	    LOG_S("unix", a->unix_path != NULL ? a->unix_path : ""),
	    LOG_B("auth", a->token != NULL));
	return a;
out_free:
	api_free(a);
	return NULL;
}

int
api_set_token(struct api *a, const char *token, struct err *e)
{
	size_t n = strlen(token);
	char *t;

	if (n == 0) {
		err_set(e, "api: an empty token would turn auth off");
		return -1;
	}
	if ((t = strdup(token)) == NULL) {
		err_set(e, "api: out of memory");
		return -1;
	}
	if (a->token != NULL) {
		secmem_wipe(a->token, a->tokenlen);
		free(a->token);
	}
	a->token = t;
	a->tokenlen = n;
	return 0;
}

bool
api_token_is(const struct api *a, const char *token)
{
	return a->token != NULL && api_token_matches(a, token);
}

void
api_free(struct api *a)
{
	if (a == NULL)
		return;
	if (a->ev_sweep != NULL)
		event_free(a->ev_sweep);
	/* Frees every connection and closes the listeners. */
	if (a->http != NULL)
		evhttp_free(a->http);
	if (a->http_unix != NULL)
		evhttp_free(a->http_unix);
	SSL_CTX_free(a->tls);
	while (a->nall > 0)
		api_conn_free(a->conns[--a->nall]);
	if (a->unix_path != NULL) {
		if (a->unx != NULL)
			unlink(a->unix_path);
		free(a->unix_path);
	}
	if (a->token != NULL) {
		secmem_wipe(a->token, a->tokenlen);
		free(a->token);
	}
	a->magic = 0;
	free(a);
}

uint16_t
api_tcp_port(const struct api *a)
{
	return a->tcp != NULL ? a->tcp_port : 0;
}

size_t
api_connections(struct api *a)
{
	api_sweep(a);
	return a->nconns;
}
