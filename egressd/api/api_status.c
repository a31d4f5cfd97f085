/*
 * api_status: the probes (/healthz, /readyz), /metrics and /v1/status.
 * /v1/status renders the API's own fields and the daemon's side, a plain
 * struct api_status the status hook fills (api.h).
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
#include "policy/policy_apicreds.h"
#include <limits.h>

#ifndef EGRESSD_VERSION
#define EGRESSD_VERSION "unknown"
#endif

/*
 * The status body: {"status":"ok","mode":..,"enforcementMode":..,
 * "reason":..,"policy":..}, every field omitted when empty (Go's field
 * order; the reference never sets reason and policy together).
 */
json_t *
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

const char *
api_status_enforcement(const struct api *a)
{
	const char *m = a->h.enforcement_mode(a->h.arg);

	return m != NULL ? m : "";
}

/* ---- probes, metrics, status ---- */

static bool
api_is_get(const struct api_req *r)
{
	return r->cmd == EVHTTP_REQ_GET || r->cmd == EVHTTP_REQ_HEAD;
}

void
api_status_healthz_cb(struct api_req *r)
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

void
api_status_readyz_cb(struct api_req *r)
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

void
api_status_metrics_cb(struct api_req *r)
{
	struct api *a = r->a;
	struct metrics_info info = {
	    .version = EGRESSD_VERSION,
	    .enforcement_mode = api_status_enforcement(a),
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

/* What is enforced, and why the rest is not ({"nft": "..."}). */
static void
api_status_enforced(const struct api_status *st, json_t *out)
{
	json_t *enf = json_array(), *notenf = json_object();
	size_t i;

	for (i = 0; i < st->nenforced; i++)
		json_array_append_new(enf, json_string(st->enforced[i]));
	for (i = 0; i < st->nnot_enforced; i++)
		json_object_set_new(notenf, st->not_enforced[i].key,
		    json_string(st->not_enforced[i].why));
	json_object_set_new(out, "enforced", enf);
	json_object_set_new(out, "notEnforced", notenf);
}

/* The daemon's view of the policy: the snapshot and its file. */
static json_t *
api_status_policy_file(const struct policy *p, const struct api_status *st)
{
	json_t *pol = json_object();

	json_object_set_new(
	    pol, "revision", json_integer((json_int_t)p->revision));
	json_object_set_new(
	    pol, "source", json_string(p->source ? p->source : "default"));
	json_object_set_new(pol, "mode", json_string(policy_mode_name(p)));
	json_object_set_new(pol, "rules", json_integer((json_int_t)p->nrules));
	if (st->policy_file != NULL)
		json_object_set_new(pol, "file", json_string(st->policy_file));
	if (st->persist_off != NULL)
		json_object_set_new(pol, "persist",
		    json_pack(
		        "{s:b, s:s}", "enabled", 0, "reason", st->persist_off));
	if (st->policy_file_missing) {
		char w[API_WHY_MAX + PATH_MAX];
		(void)snprintf(w, sizeof(w),
		    "policy file %s does not exist; in force: %s",
		    st->policy_file, st->policy_fallback);
		json_object_set_new(pol, "fileMissing", json_true());
		json_object_set_new(pol, "warning", json_string(w));
	}
	return pol;
}

static json_t *
api_status_dns(const struct api_status *st)
{
	json_t *dns = json_object(), *ups = json_array();
	size_t i;

	json_object_set_new(dns, "port", json_integer(st->dns.port));
	json_object_set_new(dns, "udp4", json_boolean(st->dns.udp4));
	json_object_set_new(dns, "tcp4", json_boolean(st->dns.tcp4));
	json_object_set_new(dns, "udp6", json_boolean(st->dns.udp6));
	json_object_set_new(dns, "tcp6", json_boolean(st->dns.tcp6));
	json_object_set_new(dns, "cacheEntries",
	    json_integer((json_int_t)st->dns.cache_entries));
	for (i = 0; i < st->dns.nupstreams && i < API_STATUS_UPSTREAMS_MAX;
	     i++) {
		json_t *u = json_object();
		json_object_set_new(
		    u, "address", json_string(st->dns.upstream[i].text));
		json_object_set_new(
		    u, "healthy", json_boolean(st->dns.upstream[i].healthy));
		json_array_append_new(ups, u);
	}
	json_object_set_new(dns, "upstreams", ups);
	return dns;
}

static json_t *
api_status_proxy(const struct api_status *st)
{
	json_t *px = json_object(), *by = json_object(), *sts = json_object();
	size_t i;

	json_object_set_new(px, "port", json_integer(st->proxy.port));
	json_object_set_new(
	    px, "accepted", json_integer((json_int_t)st->proxy.accepted));
	json_object_set_new(
	    px, "passthrough", json_integer((json_int_t)st->proxy.passthrough));
	json_object_set_new(
	    px, "refused", json_integer((json_int_t)st->proxy.refused));
	for (i = 0; i < st->proxy.nclosed && i < API_STATUS_COUNTS_MAX; i++)
		if (st->proxy.closed[i].n != 0)
			json_object_set_new(by, st->proxy.closed[i].name,
			    json_integer((json_int_t)st->proxy.closed[i].n));
	json_object_set_new(px, "closedByReason", by);
	for (i = 0; i < st->proxy.nopen && i < API_STATUS_COUNTS_MAX; i++)
		json_object_set_new(sts, st->proxy.open[i].name,
		    json_integer((json_int_t)st->proxy.open[i].n));
	json_object_set_new(px, "open", sts);
	return px;
}

static json_t *
api_status_passthrough(const struct api_status *st)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
	    "path", st->passthrough.path != NULL ? st->passthrough.path : "",
	    "why", st->passthrough.why != NULL ? st->passthrough.why : "",
	    "judged", (json_int_t)st->passthrough.judged, "refused",
	    (json_int_t)st->passthrough.refused, "helloTimeouts",
	    (json_int_t)st->passthrough.hello_timeouts, "queueErrors",
	    (json_int_t)st->passthrough.errors, "queuedPackets",
	    (json_int_t)st->passthrough.packets, "flowsHeld",
	    (json_int_t)st->passthrough.flows);

	if (o == NULL || st->passthrough.kernel == NULL)
		return o;
	/* the in-kernel judge (queue path only) */
	(void)json_object_set_new(o, "kernelJudge",
	    json_pack("{s:s, s:s, s:I, s:I, s:I}", "judge",
	        st->passthrough.kernel, "why",
	        st->passthrough.kernel_why != NULL ? st->passthrough.kernel_why
	                                           : "",
	        "passed", (json_int_t)st->passthrough.kernel_passed, "missed",
	        (json_int_t)st->passthrough.kernel_missed, "unlogged",
	        (json_int_t)st->passthrough.kernel_unlogged));
	return o;
}

/*
 * The daemon's side (the status hook's struct) added to out: the
 * Credential Vault in force, the configured mode, what is enforced, the
 * daemon's view of the policy (replacing the API's), the resolver, the
 * proxy and the learned sets.
 */
static void
api_status_daemon(struct api *a, const struct policy *p, json_t *out)
{
	struct api_status st;

	memset(&st, 0, sizeof(st));
	a->h.status(a->h.arg, &st);
	/* The API's vault (revision 0: none) and every binding in force. */
	json_object_set_new(out, "credentialVault",
	    json_pack("{s:I, s:I, s:I}", "revision",
	        (json_int_t)policy_apicreds_revision(p), "bindings",
	        (json_int_t)p->nbindings, "apiBindings",
	        (json_int_t)policy_apicreds_nbindings(p)));
	json_object_set_new(out, "version", json_string(EGRESSD_VERSION));
	json_object_set_new(out, "configuredMode",
	    json_string(st.configured_mode != NULL ? st.configured_mode : ""));
	api_status_enforced(&st, out);
	json_object_set_new(out, "policy", api_status_policy_file(p, &st));
	if (st.dns_on)
		json_object_set_new(out, "dns", api_status_dns(&st));
	if (st.proxy_on)
		json_object_set_new(out, "proxy", api_status_proxy(&st));
	if (st.learned_on)
		json_object_set_new(out, "learnedAddresses",
		    json_integer((json_int_t)st.learned));
	if (st.passthrough_on)
		json_object_set_new(
		    out, "passthrough", api_status_passthrough(&st));
}

void
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
	    o, "enforcementMode", json_string(api_status_enforcement(a)));
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
		api_status_daemon(a, p, o);
	api_reply_json(r, 200, o);
}
