#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "egressd/metrics.h"

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
	static const char name[] = "egressd_dns_queries_total";
	const struct {
		const char *decision;
		uint64_t v;
	} by[] = {
	    {"allowed", st->dns_allowed},
	    {"denied", st->dns_denied},
	    {"cname_denied", st->dns_cname_denied},
	    {"local", st->dns_local},
	    {"formerr", st->dns_formerr},
	    {"servfail", st->dns_servfail},
	};
	uint64_t cum = 0;
	size_t i;

	metrics_counter(o, "egressd_dns_queries_received_total",
	    "DNS queries received from the sandbox.", st->dns_queries);
	metrics_family(
	    o, name, "counter", "DNS queries answered, by decision.");
	for (i = 0; i < sizeof(by) / sizeof(by[0]); i++)
		metrics_printf(o, "%s{decision=\"%s\"} %" PRIu64 "\n", name,
		    by[i].decision, by[i].v);
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

static void
metrics_proxy(struct metrics_out *o, const struct stats *st)
{
	size_t i;

	if (!st->proxy_on)
		return;
	metrics_counter(o, "egressd_proxy_accepted_total",
	    "Connections the transparent proxy accepted.", st->proxy_accepted);
	metrics_family(o, "egressd_proxy_connections_total", "counter",
	    "Proxy connections by decision.");
	metrics_printf(o,
	    "egressd_proxy_connections_total{decision=\"passthrough\"} "
	    "%" PRIu64 "\n",
	    st->proxy_passthrough);
	metrics_printf(o,
	    "egressd_proxy_connections_total{decision=\"terminated\"} "
	    "%" PRIu64 "\n",
	    st->proxy_terminated);
	metrics_printf(o,
	    "egressd_proxy_connections_total{decision=\"refused\"} "
	    "%" PRIu64 "\n",
	    st->proxy_refused);
	metrics_counter(o, "egressd_proxy_upstream_reused_total",
	    "Terminated connections that took an idle upstream connection "
	    "from the pool instead of dialling.",
	    st->proxy_upstream_reused);
	metrics_family(o, "egressd_proxy_upstream_idle", "gauge",
	    "Idle upstream connections in the pool.");
	metrics_printf(o, "egressd_proxy_upstream_idle %" PRIu64 "\n",
	    st->proxy_upstream_idle);
	metrics_family(o, "egressd_vault_decisions_total", "counter",
	    "Credential Vault decisions on requests to bound hosts.");
	{
		static const char *const dn[] = {
		    "no_match", "injected", "ambiguous", "refused"};

		for (i = 0; i < 4; i++)
			metrics_printf(o,
			    "egressd_vault_decisions_total{decision=\"%s\"} "
			    "%" PRIu64 "\n",
			    dn[i], st->vault_decisions[i]);
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
	metrics_family(o, "egressd_vault_compressed_responses_total", "counter",
	    "Compressed responses to requests a credential was injected "
	    "into: decoded and redacted, refused, or failed while decoding.");
	{
		static const char *const cn[] = {
		    "decoded", "refused", "failed"};

		for (i = 0; i < 3; i++)
			metrics_printf(o,
			    "egressd_vault_compressed_responses_total{"
			    "outcome=\"%s\"} %" PRIu64 "\n",
			    cn[i], st->vault_compressed[i]);
	}
	metrics_family(o, "egressd_proxy_closed_total", "counter",
	    "Proxy connections closed, by reason (a refusal's reason, or why "
	    "a relayed one ended).");
	for (i = 0; i < st->proxy_nreasons; i++)
		metrics_printf(o,
		    "egressd_proxy_closed_total{reason=\"%s\"} %" PRIu64 "\n",
		    st->proxy_reason_names[i], st->proxy_closed[i]);
	metrics_family(o, "egressd_proxy_connections", "gauge",
	    "Open proxy connections, by state.");
	for (i = 0; i < st->proxy_nstates; i++)
		metrics_printf(o,
		    "egressd_proxy_connections{state=\"%s\"} %" PRIu64 "\n",
		    st->proxy_state_names[i], st->proxy_active[i]);
	metrics_family(o, "egressd_proxy_bytes_total", "counter",
	    "Bytes relayed by the proxy, by direction.");
	metrics_printf(o,
	    "egressd_proxy_bytes_total{direction=\"up\"} %" PRIu64 "\n",
	    st->proxy_up_bytes);
	metrics_printf(o,
	    "egressd_proxy_bytes_total{direction=\"down\"} %" PRIu64 "\n",
	    st->proxy_down_bytes);
}

static void
metrics_nft_policy(struct metrics_out *o, const struct stats *st)
{
	metrics_counter(o, "egressd_nft_batches_total",
	    "nftables batches committed.", st->nft_batches);
	metrics_counter(o, "egressd_nft_failures_total",
	    "nftables batches the kernel refused.", st->nft_failures);
	metrics_counter(o, "egressd_nft_learned_total",
	    "Resolved addresses added to or refreshed in the learned sets.",
	    st->nft_learned);
	metrics_gauge(o, "egressd_nft_learned_addresses",
	    "Addresses currently in the learned sets.",
	    st->nft_learned_current);
	metrics_family(o, "egressd_nft_learned_set_elements", "gauge",
	    "Elements in each learned set (its fill level against "
	    "egressd_nft_learned_set_capacity).");
	metrics_printf(o,
	    "egressd_nft_learned_set_elements{set=\"learned4\"} %" PRIu64 "\n",
	    st->nft_learned_set[0]);
	metrics_printf(o,
	    "egressd_nft_learned_set_elements{set=\"learned6\"} %" PRIu64 "\n",
	    st->nft_learned_set[1]);
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
		size_t i;

		metrics_family(o, "egressd_nft_packets_total", "counter",
		    "Packets counted by each decision of the nft filter "
		    "chain.");
		for (i = 0; i < st->nft_rule_counters && i < STATS_NFT_COUNTERS;
		     i++)
			metrics_printf(o,
			    "egressd_nft_packets_total{decision=\"%s\"} "
			    "%" PRIu64 "\n",
			    st->nft_rule_names[i], st->nft_rule_packets[i]);
		metrics_family(o, "egressd_nft_bytes_total", "counter",
		    "Bytes counted by each decision of the nft filter chain.");
		for (i = 0; i < st->nft_rule_counters && i < STATS_NFT_COUNTERS;
		     i++)
			metrics_printf(o,
			    "egressd_nft_bytes_total{decision=\"%s\"} %" PRIu64
			    "\n",
			    st->nft_rule_names[i], st->nft_rule_bytes[i]);
	}
	metrics_gauge(o, "egressd_policy_revision",
	    "Revision of the policy in force.", st->policy_revision);
	metrics_family(o, "egressd_policy_reloads_total", "counter",
	    "Policy file reloads, by result.");
	metrics_printf(o,
	    "egressd_policy_reloads_total{result=\"ok\"} %" PRIu64 "\n",
	    st->policy_reloads_ok);
	metrics_printf(o,
	    "egressd_policy_reloads_total{result=\"failed\"} %" PRIu64 "\n",
	    st->policy_reloads_failed);
	metrics_family(o, "egressd_policy_updates_total", "counter",
	    "Policy API mutations, by result.");
	metrics_printf(o,
	    "egressd_policy_updates_total{result=\"ok\"} %" PRIu64 "\n",
	    st->policy_updates_ok);
	metrics_printf(o,
	    "egressd_policy_updates_total{result=\"failed\"} %" PRIu64 "\n",
	    st->policy_updates_failed);
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
