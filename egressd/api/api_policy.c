/*
 * api_policy: /policy: the pure decide of a mutation (contract §6), the
 * route, and the answer once the commit queue put it in force.
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

#define API_POLICY_ALLOW "GET, POST, PUT, PATCH, DELETE"
#define API_RESET_REASON "policy reset to default deny-all"
#define API_NOMATCH_REASON "no matching targets found"

static const char *const api_op_names[] = {
    [API_OP_REPLACE] = "replace",
    [API_OP_PATCH] = "patch",
    [API_OP_DELETE] = "delete",
};

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
	    api_status_body(
	        policy_mode_name(p), api_status_enforcement(a), NULL, pj));
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
	if (a->h.policy_apicreds_check != NULL &&
	    a->h.policy_apicreds_check(a->h.arg, p->v.next, &e) == -1) {
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
		    api_status_body(p->mode, api_status_enforcement(a),
		        API_NOMATCH_REASON, NULL));
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
			        api_status_enforcement(a), NULL, NULL));
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

void
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
