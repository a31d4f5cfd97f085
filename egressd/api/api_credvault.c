/*
 * api_credvault: the Credential Vault routes of the control API (contract §4,
 * §6; docs/api.md). The vault itself is a layer of the policy snapshot
 * (policy/policy_apicreds.h); this file checks the request, asks the pure
 * mutation for the next snapshot, commits it through the daemon's hook
 * and renders the state. No answer, log line or error ever holds a
 * credential value: the state names credentials, and the mutations'
 * messages name positions and names only. The request body, which holds
 * the values, is wiped once it has been parsed.
 *
 * Order of checks on writes: 401 (route), 405, 412 (no token; proxy not
 * ready or upstream verification off), 426 (neither TLS, nor loopback, nor
 * the Unix socket, nor a trusted proxy's X-Forwarded-Proto: https), then
 * 400, 404, 409 from the mutation, then 400 from the operator's rules for
 * bindings (hook vault_check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "egressd/api/api_int.h"
#include "egressd/base/log.h"
#include "egressd/base/stats.h"
#include "policy/policy_binding.h"
#include "policy/policy_apicreds.h"
#include "util/secmem.h"

#define VAULT_ROOT "/credential-vault"
#define VAULT_ALLOW "GET, POST, PATCH, DELETE"
#define VAULT_NOT_FOUND "credential vault not found"

/* ---- the state, as the SDKs read it ---- */

static json_t *
bits_array(unsigned bits, const char *(*name)(unsigned bit))
{
	json_t *a = json_array();
	unsigned b;

	for (b = 1; a != NULL && b != 0 && b <= bits; b <<= 1)
		if ((bits & b) != 0 && name(b) != NULL)
			json_array_append_new(a, json_string(name(b)));
	return a;
}

static const char *
scheme_name(unsigned bit)
{
	return bit == POLICY_SCHEME_HTTPS ? "https"
	    : bit == POLICY_SCHEME_HTTP   ? "http"
	                                  : NULL;
}

static json_t *
strings_array(const struct policy_binding *b, size_t n,
    const char *(*at)(const struct policy_binding *b, size_t i))
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		json_array_append_new(a, json_string(at(b, i)));
	return a;
}

static json_t *
credential_json(const struct policy *p, size_t i)
{
	uint64_t rev = 0;
	const struct policy_credential *c =
	    policy_apicreds_credential(p, i, &rev);

	/* Never the value: API credentials are inline ones. */
	return json_pack("{s:s, s:s, s:I}", "name", policy_credential_name(c),
	    "sourceType", "inline", "revision", (json_int_t)rev);
}

static json_t *
binding_json(const struct policy *p, size_t i)
{
	uint64_t rev = 0;
	const struct policy_binding *b = policy_apicreds_binding(p, i, &rev);
	json_t *auth, *match;

	match = json_pack("{s:o, s:o, s:o, s:o}", "schemes",
	    bits_array(policy_binding_schemes(b), scheme_name), "hosts",
	    strings_array(b, policy_binding_nhosts(b), policy_binding_host),
	    "methods",
	    bits_array(policy_binding_methods(b), policy_method_name), "paths",
	    strings_array(b, policy_binding_npaths(b), policy_binding_path));
	auth = json_pack(
	    "{s:s}", "type", policy_auth_type_name(policy_binding_auth(b)));
	if (auth != NULL && policy_binding_header_name(b) != NULL)
		json_object_set_new(
		    auth, "name", json_string(policy_binding_header_name(b)));
	return json_pack("{s:s, s:I, s:o, s:o}", "name", policy_binding_name(b),
	    "revision", (json_int_t)rev, "match", match, "auth", auth);
}

static json_t *
list_json(const struct policy *p, bool creds)
{
	size_t n = creds ? policy_apicreds_ncredentials(p)
	                 : policy_apicreds_nbindings(p);
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < n; i++)
		json_array_append_new(
		    a, creds ? credential_json(p, i) : binding_json(p, i));
	return a;
}

static json_t *
state_json(const struct policy *p)
{
	return json_pack("{s:I, s:o, s:o}", "revision",
	    (json_int_t)policy_apicreds_revision(p), "credentials",
	    list_json(p, true), "bindings", list_json(p, false));
}

/* ---- writes ---- */

static const char *const op_names[] = {"create", "patch", "delete"};

enum vault_op { VOP_CREATE, VOP_PATCH, VOP_DELETE };

static int
status_code(enum policy_apicreds_status st)
{
	switch (st) {
	case POLICY_APICREDS_OK:
		return 200;
	case POLICY_APICREDS_BAD_BODY:
	case POLICY_APICREDS_REJECTED:
		return 400;
	case POLICY_APICREDS_NONE:
	case POLICY_APICREDS_MISSING:
		return 404;
	case POLICY_APICREDS_EXISTS:
	case POLICY_APICREDS_CONFLICT:
		return 409;
	case POLICY_APICREDS_NOMEM:
		break;
	}
	return 500;
}

static void
write_failed(struct api_req *r, enum vault_op op, int code, const char *msg)
{
	log_warn(r->a->log, "vault.update_failed", LOG_S("op", op_names[op]),
	    LOG_I("status", code), LOG_S("error", msg));
}

/* 412 and 426, in the contract's order; true when the write may go on. */
static bool
write_allowed(struct api_req *r, enum vault_op op)
{
	struct api *a = r->a;
	char why[API_WHY_MAX] = "credential proxy is not ready";

	if (a->token == NULL) {
		api_reply_text(
		    r, 412, "credential vault requires egress API auth token");
		write_failed(r, op, 412, "no token");
		return false;
	}
	if ((a->h.vault_commit == NULL && a->h.mutate == NULL) ||
	    a->h.vault_writable == NULL ||
	    !a->h.vault_writable(a->h.arg, why, sizeof(why))) {
		api_reply_text(r, 412, "%s", why);
		write_failed(r, op, 412, why);
		return false;
	}
	if (!r->transport_ok) {
		api_reply_text(r, 426,
		    "credential vault writes require TLS or loopback "
		    "transport");
		write_failed(r, op, 426, "not loopback");
		return false;
	}
	return true;
}

/* Chains of the body wiped per peek (any number: the loop goes on). */
#define VAULT_WIPE_IOV 16

/*
 * The request's body wiped and dropped: it holds secrets. Wiped where
 * each chain lies (evbuffer_peek): evbuffer_pullup would copy a body of
 * several chains into a new one and free the old chains unwiped.
 */
static void
vault_body_wipe(struct api_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	struct evbuffer_iovec v[VAULT_WIPE_IOV];
	struct evbuffer_ptr pos;
	size_t len = evbuffer_get_length(in), off = 0;
	int n, i;

	while (off < len &&
	    evbuffer_ptr_set(in, &pos, off, EVBUFFER_PTR_SET) == 0 &&
	    (n = evbuffer_peek(in, -1, &pos, v, VAULT_WIPE_IOV)) > 0) {
		for (i = 0; i < n && i < VAULT_WIPE_IOV; i++) {
			secmem_wipe(v[i].iov_base, v[i].iov_len);
			off += v[i].iov_len;
		}
	}
	evbuffer_drain(in, len);
}

/*
 * On the loop, at the mutation's turn: the body is read where evhttp
 * keeps it, never copied, and never crosses to the worker's thread.
 */
static struct policy *
vault_decide_cb(struct api_mutation *m, const struct policy *cur)
{
	struct api_pending *p = api_pending_of(m);
	struct evbuffer *in = evhttp_request_get_input_buffer(p->r.req);
	size_t len = evbuffer_get_length(in);
	enum policy_apicreds_status st = POLICY_APICREDS_NOMEM;
	struct policy *next = NULL;
	char *body = NULL;
	struct err e;

	err_clear(&e);
	/* A copy of our own, wiped below, rather than evbuffer_pullup (see
	 * vault_body_wipe). */
	if (len > 0 && len <= API_BODY_MAX &&
	    ((body = malloc(len)) == NULL ||
	        evbuffer_copyout(in, body, len) != (ev_ssize_t)len)) {
		if (body != NULL)
			secmem_wipe(body, len);
		free(body);
		vault_body_wipe(&p->r);
		p->code = 500;
		(void)snprintf(p->msg, sizeof(p->msg), "%s",
		    "internal error: out of memory");
		return NULL;
	}
	switch ((enum vault_op)p->op) {
	case VOP_CREATE:
		next = policy_apicreds_create_json(cur, body, len, &st, &e);
		break;
	case VOP_PATCH:
		next = policy_apicreds_patch_json(cur, body, len, &st, &e);
		break;
	case VOP_DELETE:
		next = policy_apicreds_delete(cur, &st, &e);
		break;
	}
	if (body != NULL) {
		secmem_wipe(body, len);
		free(body);
	}
	vault_body_wipe(&p->r);
	/* The operator's rules for bindings (OPENSANDBOX_EGRESS_CREDENTIAL_
	 * VAULT_REQUIRE_SCOPED_MATCH, ..._MITMPROXY_IGNORE_HOSTS). */
	if (next != NULL && p->r.a->h.vault_check != NULL &&
	    p->r.a->h.vault_check(p->r.a->h.arg, next, &e) == -1) {
		policy_unref(next);
		next = NULL;
		st = POLICY_APICREDS_REJECTED;
	}
	if (next == NULL) {
		p->code = status_code(st);
		if (st == POLICY_APICREDS_BAD_BODY)
			(void)snprintf(p->msg, sizeof(p->msg),
			    "invalid credential vault: %s", e.msg);
		else if (st == POLICY_APICREDS_REJECTED)
			(void)snprintf(p->msg, sizeof(p->msg),
			    "credential vault policy validation: %s", e.msg);
		else
			(void)snprintf(p->msg, sizeof(p->msg), "%s", e.msg);
		/* The log line carries the library's words alone. */
		(void)snprintf(p->v.msg, sizeof(p->v.msg), "%s", e.msg);
	}
	return next;
}

static void
vault_done_cb(struct api_mutation *m, int rc, const struct policy *next,
    const struct err *e)
{
	struct api_pending *p = api_pending_of(m);
	struct api_req *r = &p->r;
	enum vault_op op = (enum vault_op)p->op;

	/* Refused or cancelled before its turn, the body is still there;
	 * and the answer may free the request (its client gone). */
	vault_body_wipe(r);
	if (rc == 1) {
		api_reply_text(r, p->code, "%s", p->msg);
		write_failed(r, op, p->code,
		    p->code == 500 && p->v.msg[0] == '\0' ? p->msg : p->v.msg);
	} else if (rc == -1) {
		api_reply_text(r, 500, "%s",
		    e->msg[0] != '\0' ? e->msg
		                      : "failed to apply credential vault");
		write_failed(r, op, 500, e->msg);
	} else {
		/* In force: the proxy decides by the new revision from now on. */
		log_info(r->a->log, "vault.updated", LOG_S("op", op_names[op]),
		    LOG_U("revision", policy_apicreds_revision(next)),
		    LOG_U("credentials", policy_apicreds_ncredentials(next)),
		    LOG_U("bindings", policy_apicreds_nbindings(next)));
		if (op == VOP_DELETE)
			api_reply(r, 204, "text/plain; charset=utf-8", NULL, 0);
		else
			api_reply_json(
			    r, op == VOP_CREATE ? 201 : 200, state_json(next));
	}
	api_pending_free(p);
}

static void
vault_write(struct api_req *r, enum vault_op op)
{
	struct api_pending *p;

	if (!write_allowed(r, op)) {
		vault_body_wipe(r);
		return;
	}
	if ((p = api_pending_new(r)) == NULL) {
		api_reply_text(r, 500, "internal error: out of memory");
		vault_body_wipe(r);
		return;
	}
	p->op = (int)op;
	p->m.decide = vault_decide_cb;
	p->m.done = vault_done_cb;
	p->m.on_loop = true;
	if (api_pending_submit(p) == -1)
		vault_body_wipe(r);
}

/* ---- routes ---- */

void
api_credvault_cb(struct api_req *r)
{
	const struct policy *p;

	switch (r->cmd) {
	case EVHTTP_REQ_GET:
		p = r->a->h.policy_get(r->a->h.arg);
		if (!policy_apicreds_exists(p))
			api_reply_text(r, 404, VAULT_NOT_FOUND);
		else
			api_reply_json(r, 200, state_json(p));
		return;
	case EVHTTP_REQ_POST:
		vault_write(r, VOP_CREATE);
		return;
	case EVHTTP_REQ_PATCH:
		vault_write(r, VOP_PATCH);
		return;
	case EVHTTP_REQ_DELETE:
		vault_write(r, VOP_DELETE);
		return;
	default:
		api_reply_405(r, VAULT_ALLOW);
		return;
	}
}

/* The index of name among p's credentials or bindings, or -1. */
static long
find_item(const struct policy *p, bool creds, const char *name)
{
	size_t n = creds ? policy_apicreds_ncredentials(p)
	                 : policy_apicreds_nbindings(p);
	size_t i;

	for (i = 0; i < n; i++) {
		const char *x = creds
		    ? policy_credential_name(
		          policy_apicreds_credential(p, i, NULL))
		    : policy_binding_name(policy_apicreds_binding(p, i, NULL));
		if (strcmp(x, name) == 0)
			return (long)i;
	}
	return -1;
}

void
api_credvault_sub_cb(struct api_req *r)
{
	const char *rest = r->path + strlen(VAULT_ROOT "/");
	const struct policy *p;
	bool creds;
	size_t n;
	long i;

	/* The reference's internal route: nothing here reads it. */
	if (strcmp(rest, "_active") == 0) {
		api_reply_text(r, 403, "forbidden");
		return;
	}
	if (strncmp(rest, "credentials", n = strlen("credentials")) == 0)
		creds = true;
	else if (strncmp(rest, "bindings", n = strlen("bindings")) == 0)
		creds = false;
	else {
		api_reply_text(r, 404, "404 page not found");
		return;
	}
	rest += n;
	if (rest[0] != '\0' && (rest[0] != '/' || rest[1] == '\0')) {
		api_reply_text(r, 404, "404 page not found");
		return;
	}
	if (r->cmd != EVHTTP_REQ_GET) {
		api_reply_405(r, "GET");
		return;
	}
	p = r->a->h.policy_get(r->a->h.arg);
	if (!policy_apicreds_exists(p)) {
		api_reply_text(r, 404, VAULT_NOT_FOUND);
		return;
	}
	if (rest[0] == '\0') {
		api_reply_json(r, 200,
		    json_pack("{s:I, s:o}", "revision",
		        (json_int_t)policy_apicreds_revision(p),
		        creds ? "credentials" : "bindings",
		        list_json(p, creds)));
		return;
	}
	if ((i = find_item(p, creds, rest + 1)) == -1)
		api_reply_text(r, 404,
		    creds ? "credential not found" : "binding not found");
	else
		api_reply_json(r, 200,
		    creds ? credential_json(p, (size_t)i)
		          : binding_json(p, (size_t)i));
}
