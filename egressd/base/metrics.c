#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "egressd/base/metrics.h"

static const unsigned metrics_lat_bounds_ms[STATS_LAT_BUCKETS] =
    STATS_LAT_BOUNDS_MS;

struct metrics_out {
	struct evbuffer *buf;
	int rc;
};

static void metrics_printf(struct metrics_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
metrics_printf(struct metrics_out *o, const char *fmt, ...)
{
	va_list ap;

	if (o->rc == -1)
		return;
	va_start(ap, fmt);
	if (evbuffer_add_vprintf(o->buf, fmt, ap) < 0)
		o->rc = -1;
	va_end(ap);
}

/* HELP and TYPE lines of one family. */
static void
metrics_family(
    struct metrics_out *o, const char *name, const char *type, const char *help)
{
	metrics_printf(
	    o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
metrics_counter(
    struct metrics_out *o, const char *name, const char *help, uint64_t v)
{
	metrics_family(o, name, "counter", help);
	metrics_printf(o, "%s %" PRIu64 "\n", name, v);
}

static void
metrics_gauge(
    struct metrics_out *o, const char *name, const char *help, uint64_t v)
{
	metrics_family(o, name, "gauge", help);
	metrics_printf(o, "%s %" PRIu64 "\n", name, v);
}

/*
 * A family whose samples differ by one label: label="values[i]" counts
 * v[i]. The values are fixed strings of egressd (or names already safe as
 * label values), never peer text.
 */
static void
metrics_labelled(struct metrics_out *o, const char *name, const char *type,
    const char *help, const char *label, const char *const *values,
    const uint64_t *v, size_t n)
{
	size_t i;

	metrics_family(o, name, type, help);
	for (i = 0; i < n; i++)
		metrics_printf(o, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label,
		    values[i], v[i]);
}

/* Label values escape backslash, double quote and newline (format 0.0.4);
 * other bytes pass. Cut at METRICS_LABEL_MAX. */
static void
metrics_label_escape(const char *in, char *out, size_t outlen)
{
	size_t i, j = 0;

	if (in == NULL)
		in = "";
	for (i = 0; in[i] != '\0' && i < METRICS_LABEL_MAX; i++) {
		const char *rep = NULL;
		char c = in[i];
		if (c == '\\')
			rep = "\\\\";
		else if (c == '"')
			rep = "\\\"";
		else if (c == '\n')
			rep = "\\n";
		if (rep != NULL) {
			if (j + 2 >= outlen)
				break;
			out[j++] = rep[0];
			out[j++] = rep[1];
		} else {
			if (j + 1 >= outlen)
				break;
			out[j++] = c;
		}
	}
	out[j] = '\0';
}

static void
metrics_dns(struct metrics_out *o, const struct stats *st)
{
	static const char *const decisions[] = {"allowed", "denied",
	    "cname_denied", "local", "formerr", "servfail"};
	const uint64_t by[] = {st->dns_allowed, st->dns_denied,
	    st->dns_cname_denied, st->dns_local, st->dns_formerr,
	    st->dns_servfail};
	uint64_t cum = 0;
	size_t i;

	metrics_counter(o, "egressd_dns_queries_received_total",
	    "DNS queries received from the sandbox.", st->dns_queries);
	metrics_labelled(o, "egressd_dns_queries_total", "counter",
	    "DNS queries answered, by decision.", "decision", decisions, by,
	    sizeof(by) / sizeof(by[0]));
	metrics_counter(o, "egressd_dns_private_answers_stripped_total",
	    "Answers whose internal addresses were removed (rebinding).",
	    st->dns_private_stripped);
	metrics_counter(o, "egressd_dns_cache_hits_total",
	    "DNS answers served from the cache.", st->dns_cache_hits);
	metrics_counter(o, "egressd_dns_cache_misses_total",
	    "DNS lookups that missed the cache.", st->dns_cache_misses);
	metrics_counter(o, "egressd_dns_udp_receive_drops_total",
	    "Queries the kernel dropped before egressd read them "
	    "(socket buffer full).",
	    st->dns_udp_rcvbuf_drops);
	metrics_counter(o, "egressd_dns_upstream_failures_total",
	    "Upstream DNS timeouts, refusals and unreachable servers.",
	    st->dns_upstream_failures);
	metrics_counter(o, "egressd_dns_upstream_tc_retries_total",
	    "Truncated (TC=1) upstream answers over UDP, asked again over TCP.",
	    st->dns_upstream_tc_retries);
	metrics_counter(o, "egressd_dns_overload_total",
	    "DNS queries refused (SERVFAIL) because the in-flight cap was "
	    "reached.",
	    st->dns_overload);
	/* The reference sidecar's name and label values (OpenTelemetry's
	 * egress.dns.query.failed_total as Prometheus spells it), so its
	 * dashboards and alerts work unchanged (docs/compat.md). */
	metrics_labelled(o, "egress_dns_query_failed_total", "counter",
	    "DNS queries that could not be resolved (answered SERVFAIL), by "
	    "reason.",
	    "reason",
	    (const char *const[]){
	        "no_upstreams", "upstream_error", "empty_response", "rcode"},
	    st->dns_query_failed, STATS_DNS_FAIL_N);
	metrics_counter(o, "egressd_dns_learn_memo_skips_total",
	    "Cache hits whose nft learn was skipped: the addresses were still "
	    "learned for longer than the answer's TTL.",
	    st->dns_learn_memo_skips);

	metrics_family(o, "egressd_dns_upstream_duration_seconds", "histogram",
	    "Round trip time of upstream DNS queries.");
	for (i = 0; i < STATS_LAT_BUCKETS; i++) {
		unsigned ms = metrics_lat_bounds_ms[i];
		cum += st->dns_upstream_lat_bucket[i];
		metrics_printf(o,
		    "egressd_dns_upstream_duration_seconds_bucket"
		    "{le=\"%u.%03u\"} %" PRIu64 "\n",
		    ms / 1000, ms % 1000, cum);
	}
	cum += st->dns_upstream_lat_bucket[STATS_LAT_BUCKETS];
	metrics_printf(o,
	    "egressd_dns_upstream_duration_seconds_bucket{le=\"+Inf\"} "
	    "%" PRIu64 "\n",
	    cum);
	metrics_printf(o, "egressd_dns_upstream_duration_seconds_sum %.9g\n",
	    st->dns_upstream_lat_sum_s);
	metrics_printf(o,
	    "egressd_dns_upstream_duration_seconds_count %" PRIu64 "\n",
	    st->dns_upstream_lat_count);
}

/* The Credential Vault's decisions, minted tokens and compressed
 * responses (the proxy's part: only with the proxy on). */
static void
metrics_vault(struct metrics_out *o, const struct stats *st)
{
	size_t i;

	{
		static const char *const dn[] = {
		    "no_match", "injected", "ambiguous", "refused"};

		metrics_labelled(o, "egressd_vault_decisions_total", "counter",
		    "Credential Vault decisions on requests to bound hosts.",
		    "decision", dn, st->vault_decisions, 4);
		/* Binding names are [A-Za-z0-9._-]: safe label values. */
		metrics_family(o, "egressd_vault_binding_decisions_total",
		    "counter",
		    "Credential Vault decisions by the binding that matched.");
		for (i = 0; i < st->nvault_bindings; i++)
			for (size_t k = 1; k < 4; k++)
				metrics_printf(o,
				    "egressd_vault_binding_decisions_total{"
				    "binding=\"%s\",decision=\"%s\"} %" PRIu64
				    "\n",
				    st->vault_bindings[i].name, dn[k],
				    st->vault_bindings[i].decisions[k]);
	}
	{
		static const char *const tn[] = {
		    "minted", "refreshed", "failed"};

		metrics_family(o, "egressd_vault_oauth2_tokens_total",
		    "counter",
		    "Token requests egressd made (oauth2 access tokens, "
		    "githubApp installation tokens), by binding and "
		    "outcome.");
		for (i = 0; i < st->nvault_bindings; i++)
			for (size_t k = 0; k < 3; k++)
				metrics_printf(o,
				    "egressd_vault_oauth2_tokens_total{"
				    "binding=\"%s\",outcome=\"%s\"} %" PRIu64
				    "\n",
				    st->vault_bindings[i].name, tn[k],
				    st->vault_bindings[i].tokens[k]);
	}
	metrics_family(o, "egressd_vault_source_fetches_total", "counter",
	    "Fetches of http credential sources egressd made, by credential "
	    "and outcome.");
	for (i = 0; i < st->nvault_sources; i++)
		for (size_t k = 0; k < 2; k++)
			metrics_printf(o,
			    "egressd_vault_source_fetches_total{"
			    "credential=\"%s\",outcome=\"%s\"} %" PRIu64 "\n",
			    st->vault_sources[i].name, k == 0 ? "ok" : "failed",
			    st->vault_sources[i].fetches[k]);
	metrics_labelled(o, "egressd_vault_compressed_responses_total",
	    "counter",
	    "Compressed responses to requests a credential was injected "
	    "into: decoded and redacted, refused, or failed while decoding.",
	    "outcome", (const char *const[]){"decoded", "refused", "failed"},
	    st->vault_compressed, 3);
}

static void
metrics_proxy(struct metrics_out *o, const struct stats *st)
{
	if (!st->proxy_on)
		return;
	metrics_counter(o, "egressd_proxy_accepted_total",
	    "Connections the transparent proxy accepted.", st->proxy_accepted);
	metrics_labelled(o, "egressd_proxy_connections_total", "counter",
	    "Proxy connections by decision.", "decision",
	    (const char *const[]){"passthrough", "terminated", "refused"},
	    (const uint64_t[]){
	        st->proxy_passthrough, st->proxy_terminated, st->proxy_refused},
	    3);
	metrics_counter(o, "egressd_proxy_upstream_reused_total",
	    "Terminated connections that took an idle upstream connection "
	    "from the pool instead of dialling.",
	    st->proxy_upstream_reused);
	metrics_gauge(o, "egressd_proxy_upstream_idle",
	    "Idle upstream connections in the pool.", st->proxy_upstream_idle);
	metrics_vault(o, st);
	metrics_labelled(o, "egressd_proxy_denied_total", "counter",
	    "Requests the policy's request rules denied (403 with "
	    "X-Egress-Denied), by reason.",
	    "reason",
	    (const char *const[]){"method", "path", "host", "invalid"},
	    st->proxy_denied, 4);
	metrics_labelled(o, "egressd_proxy_closed_total", "counter",
	    "Proxy connections closed, by reason (a refusal's reason, or why "
	    "a relayed one ended).",
	    "reason", st->proxy_reason_names, st->proxy_closed,
	    st->proxy_nreasons);
	metrics_labelled(o, "egressd_proxy_connections", "gauge",
	    "Open proxy connections, by state.", "state", st->proxy_state_names,
	    st->proxy_active, st->proxy_nstates);
	metrics_labelled(o, "egressd_proxy_bytes_total", "counter",
	    "Bytes relayed by the proxy, by direction.", "direction",
	    (const char *const[]){"up", "down"},
	    (const uint64_t[]){st->proxy_up_bytes, st->proxy_down_bytes}, 2);
}

static void
metrics_nft_policy(struct metrics_out *o, const struct stats *st)
{
	static const char *const results[] = {"ok", "failed"};

	metrics_counter(o, "egressd_nft_batches_total",
	    "nftables batches committed.", st->nft_batches);
	metrics_counter(o, "egressd_nft_failures_total",
	    "nftables batches the kernel refused.", st->nft_failures);
	/* The reference's egress.nftables.updates.failed_total, as above. */
	metrics_labelled(o, "egress_nftables_updates_failed_total", "counter",
	    "nftables updates that failed, by operation.", "operation",
	    (const char *const[]){
	        "static_apply", "dynamic_add", "remove", "refresh"},
	    st->nft_update_failed, STATS_NFT_OP_N);
	metrics_counter(o, "egressd_nft_learned_total",
	    "Resolved addresses added to or refreshed in the learned sets.",
	    st->nft_learned);
	metrics_gauge(o, "egressd_nft_learned_addresses",
	    "Addresses currently in the learned sets.",
	    st->nft_learned_current);
	metrics_labelled(o, "egressd_nft_learned_set_elements", "gauge",
	    "Elements in each learned set (its fill level against "
	    "egressd_nft_learned_set_capacity).",
	    "set", (const char *const[]){"learned4", "learned6"},
	    st->nft_learned_set, 2);
	metrics_gauge(o, "egressd_nft_learned_set_capacity",
	    "Elements a learned set holds before the least recently learned "
	    "are evicted (--learned-max).",
	    st->nft_learned_capacity);
	metrics_counter(o, "egressd_nft_learned_evicted_total",
	    "Learned elements evicted to make room (least recently learned).",
	    st->nft_learned_evicted);
	metrics_counter(o, "egressd_nft_learn_transactions_total",
	    "Learn transactions sent (answers that arrive together share one).",
	    st->nft_learn_txns);

	/* Counter names are fixed strings of the nft module, never peer
	 * text, so they need no escaping beyond the label syntax. */
	if (st->nft_rule_counters > 0) {
		size_t n = st->nft_rule_counters < STATS_NFT_COUNTERS
		    ? st->nft_rule_counters
		    : STATS_NFT_COUNTERS;

		metrics_labelled(o, "egressd_nft_packets_total", "counter",
		    "Packets counted by each decision of the nft filter "
		    "chain.",
		    "decision", st->nft_rule_names, st->nft_rule_packets, n);
		metrics_labelled(o, "egressd_nft_bytes_total", "counter",
		    "Bytes counted by each decision of the nft filter chain.",
		    "decision", st->nft_rule_names, st->nft_rule_bytes, n);
	}
	metrics_gauge(o, "egressd_policy_revision",
	    "Revision of the policy in force.", st->policy_revision);
	metrics_labelled(o, "egressd_policy_reloads_total", "counter",
	    "Policy file reloads, by result.", "result", results,
	    (const uint64_t[]){
	        st->policy_reloads_ok, st->policy_reloads_failed},
	    2);
	metrics_labelled(o, "egressd_policy_updates_total", "counter",
	    "Policy API mutations, by result.", "result", results,
	    (const uint64_t[]){
	        st->policy_updates_ok, st->policy_updates_failed},
	    2);
}

/* Pass-through TLS: which path judges it and why, and the queue's
 * counts (zero on the proxy path: the proxy's own count that). */
static void
metrics_passthrough(struct metrics_out *o, const struct stats *st)
{
	static const char *const verdicts[] = {"passthrough", "refused"};
	char path[2 * METRICS_LABEL_MAX + 1], why[2 * METRICS_LABEL_MAX + 1];

	if (!st->pt_on)
		return;
	metrics_label_escape(
	    st->pt_path != NULL ? st->pt_path : "", path, sizeof(path));
	metrics_label_escape(
	    st->pt_why != NULL ? st->pt_why : "", why, sizeof(why));
	metrics_family(o, "egressd_passthrough_path_info", "gauge",
	    "Path of pass-through TLS (queue: judged in flight; proxy) and "
	    "why; always 1.");
	metrics_printf(o,
	    "egressd_passthrough_path_info{path=\"%s\",why=\"%s\"} 1\n", path,
	    why);
	metrics_labelled(o, "egressd_passthrough_judged_total", "counter",
	    "TLS flows judged in flight, by verdict.", "verdict", verdicts,
	    (const uint64_t[]){st->pt_judged, st->pt_refused}, 2);
	metrics_counter(o, "egressd_passthrough_hello_timeouts_total",
	    "Flows refused because their ClientHello did not complete in "
	    "time.",
	    st->pt_hello_timeouts);
	metrics_counter(o, "egressd_passthrough_queue_errors_total",
	    "Unreadable queue messages, failed verdicts, lost packets.",
	    st->pt_errors);
	metrics_counter(o, "egressd_passthrough_queued_packets_total",
	    "Packets read from the queue.", st->pt_packets);
	metrics_family(o, "egressd_passthrough_kernel_judge", "gauge",
	    "1 when hellos egressd passed once pass in the kernel next "
	    "time (BPF), 0 when the queue judges every one.");
	metrics_printf(o, "egressd_passthrough_kernel_judge %d\n",
	    st->pt_kernel_on ? 1 : 0);
	metrics_labelled(o, "egressd_passthrough_kernel_hellos_total",
	    "counter",
	    "Hellos the in-kernel judge read whole: passed, or missed (no "
	    "verdict for them: left to the queue).",
	    "result", (const char *const[]){"passed", "missed"},
	    (const uint64_t[]){st->pt_kernel_passed, st->pt_kernel_missed}, 2);
	metrics_counter(o, "egressd_passthrough_kernel_unlogged_total",
	    "Hellos passed in the kernel that its audit ring could not take: "
	    "no nfq.judged line.",
	    st->pt_kernel_unlogged);
}

int
metrics_render(const struct stats *st, const struct metrics_info *info,
    struct evbuffer *out)
{
	struct metrics_out o = {.buf = out, .rc = 0};
	char ver[2 * METRICS_LABEL_MAX + 1], mode[2 * METRICS_LABEL_MAX + 1];

	metrics_label_escape(info->version, ver, sizeof(ver));
	metrics_label_escape(info->enforcement_mode, mode, sizeof(mode));

	metrics_family(&o, "egressd_build_info", "gauge",
	    "Build of the running egressd; always 1.");
	metrics_printf(&o, "egressd_build_info{version=\"%s\"} 1\n", ver);
	metrics_family(&o, "egressd_enforcement_info", "gauge",
	    "Effective enforcement mode; always 1.");
	metrics_printf(&o, "egressd_enforcement_info{mode=\"%s\"} 1\n", mode);
	metrics_gauge(&o, "egressd_start_time_seconds",
	    "Start time of the process, unix seconds.", info->start_time_s);

	metrics_dns(&o, st);
	metrics_nft_policy(&o, st);
	metrics_proxy(&o, st);
	metrics_passthrough(&o, st);

	metrics_counter(&o, "egressd_api_requests_total",
	    "Control API requests.", st->api_requests);
	metrics_counter(&o, "egressd_api_unauthorized_total",
	    "Control API requests refused for a bad or missing token.",
	    st->api_unauthorized);
	metrics_gauge(&o, "egressd_api_connections",
	    "Control API connections open now.", info->api_connections);
	metrics_counter(&o, "egressd_log_lines_total", "Log lines written.",
	    info->log_lines);
	metrics_counter(&o, "egressd_log_dropped_total",
	    "Log lines lost to write errors.", info->log_dropped);
	return o.rc;
}
