/*
 * daemon_status: what the control API shows of the daemon. /v1/status's
 * side is a plain struct (api.h, struct api_status) filled here and
 * rendered by the API; /metrics reads d->stats, refreshed here from the
 * proxy and the kernel's nft counters right before each scrape.
 */
#include <stdio.h>
#include <string.h>

#include "egressd/api/api.h"
#include "egressd/base/log.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon_int.h"
#include "egressd/dns/dns.h"
#include "egressd/nfq/nfq.h"
#include "egressd/nft/nft.h"
#include "egressd/proxy/proxy.h"
#include "policy/policy.h"

_Static_assert(DNS_UPSTREAMS_MAX <= API_STATUS_UPSTREAMS_MAX,
    "every resolver upstream fits /v1/status");
_Static_assert(DNS_UPSTREAM_TEXT_MAX <= API_STATUS_TEXT_MAX,
    "an upstream's text fits /v1/status");
_Static_assert(PROXY_NREASONS <= API_STATUS_COUNTS_MAX &&
        PROXY_NSTATES <= API_STATUS_COUNTS_MAX,
    "every proxy reason and state fits /v1/status");
_Static_assert(PROXY_NREASONS <= STATS_PROXY_REASONS &&
        PROXY_NSTATES <= STATS_PROXY_STATES,
    "every proxy reason and state fits /metrics");
_Static_assert(
    POLICY_REQ_INVALID == 4 && PROXY_DENIED_REASONS == POLICY_REQ_INVALID + 1,
    "proxy_status.denied's rows are policy_req_reason's values");

/* Fresh per-decision nft counters for each scrape (one netlink dump). */
static void
egressd_proxy_stats(struct egressd *d)
{
	struct stats *st = &d->stats;
	struct proxy_status ps;
	size_t i;

	if (d->proxy == NULL)
		return;
	proxy_status(d->proxy, &ps);
	st->proxy_on = true;
	st->proxy_accepted = ps.accepted;
	st->proxy_passthrough = ps.passthrough;
	st->proxy_terminated = ps.terminated;
	st->proxy_upstream_reused = ps.upstream_reused;
	st->proxy_upstream_idle = ps.upstream_idle;
	st->proxy_refused = ps.refused;
	st->proxy_up_bytes = ps.up_bytes;
	st->proxy_down_bytes = ps.down_bytes;
	memcpy(st->vault_decisions, ps.vault_decisions,
	    sizeof(st->vault_decisions));
	memcpy(st->vault_bindings, ps.vault_bindings,
	    ps.nvault_bindings * sizeof(ps.vault_bindings[0]));
	st->nvault_bindings = ps.nvault_bindings;
	memcpy(st->vault_sources, ps.vault_sources,
	    ps.nvault_sources * sizeof(ps.vault_sources[0]));
	st->nvault_sources = ps.nvault_sources;
	memcpy(st->vault_compressed, ps.vault_compressed,
	    sizeof(st->vault_compressed));
	memcpy(st->proxy_denied, &ps.denied[POLICY_REQ_METHOD],
	    sizeof(st->proxy_denied));
	for (i = 0; i < PROXY_NREASONS && i < STATS_PROXY_REASONS; i++) {
		st->proxy_reason_names[i] = proxy_reason_name(i);
		st->proxy_closed[i] = ps.by_reason[i];
	}
	st->proxy_nreasons = i;
	for (i = 0; i < PROXY_NSTATES && i < STATS_PROXY_STATES; i++) {
		st->proxy_state_names[i] = proxy_state_name(i);
		st->proxy_active[i] = ps.by_state[i];
	}
	st->proxy_nstates = i;
}

/* The path of pass-through TLS and the queue's counts. */
static void
egressd_pt_stats(struct egressd *d)
{
	struct stats *st = &d->stats;
	struct nfq_status qs;

	if (d->pt_path == NULL)
		return;
	st->pt_on = true;
	st->pt_path = d->pt_path;
	st->pt_why = d->pt_why;
	if (d->nfq == NULL)
		return;
	nfq_status(d->nfq, &qs);
	st->pt_judged = qs.judged;
	st->pt_refused = qs.refused;
	st->pt_hello_timeouts = qs.timeouts;
	st->pt_errors = qs.errors;
	st->pt_packets = qs.packets;
	st->pt_kernel_on = qs.kernel;
	st->pt_kernel_passed = qs.kernel_passed;
	st->pt_kernel_missed = qs.kernel_missed;
	st->pt_kernel_unlogged = qs.kernel_unlogged;
}

void
daemon_status_refresh_metrics(struct egressd *d)
{
	struct nft_counter c[NFT_NCOUNTERS];
	struct err e = {""};
	size_t i;

	egressd_proxy_stats(d);
	egressd_pt_stats(d);
	if (d->nft == NULL)
		return;
	if (nft_read_counters(d->nft, c, &e) == -1) {
		log_warn(d->log, "nft.counters_failed", LOG_S("error", e.msg));
		return;
	}
	for (i = 0; i < NFT_NCOUNTERS && i < STATS_NFT_COUNTERS; i++) {
		d->stats.nft_rule_names[i] = nft_counter_name(i);
		d->stats.nft_rule_packets[i] = c[i].packets;
		d->stats.nft_rule_bytes[i] = c[i].bytes;
	}
	d->stats.nft_rule_counters = i;
}

static void
egressd_status_enforced(struct egressd *d, struct api_status *st)
{
	if (d->nft_ok) {
		st->enforced[st->nenforced++] = "nft-default-deny";
		st->enforced[st->nenforced++] = "dns-redirect";
		st->enforced[st->nenforced++] = "learned-address-sets";
	} else {
		st->not_enforced[st->nnot_enforced].key = "nft";
		st->not_enforced[st->nnot_enforced++].why = d->nft_why;
	}
	st->enforced[st->nenforced++] = "dns-filter";
	if (d->proxy != NULL)
		st->enforced[st->nenforced++] = "proxy-sni-host-check";
	else {
		st->not_enforced[st->nnot_enforced].key = "transparentProxy";
		st->not_enforced[st->nnot_enforced++].why = "off (--proxy)";
	}
	if (d->proxy != NULL && d->vault != NULL)
		st->enforced[st->nenforced++] = "credential-vault";
	else {
		st->not_enforced[st->nnot_enforced].key = "credentialVault";
		st->not_enforced[st->nnot_enforced++].why =
		    "off (needs --proxy)";
	}
}

static void
egressd_status_dns(struct egressd *d, struct api_status *st)
{
	struct dns_status ds;
	size_t i;

	dns_status(d->dns, &ds);
	st->dns_on = true;
	st->dns.port = ds.port;
	st->dns.udp4 = ds.udp4;
	st->dns.tcp4 = ds.tcp4;
	st->dns.udp6 = ds.udp6;
	st->dns.tcp6 = ds.tcp6;
	st->dns.cache_entries = ds.cache_entries;
	for (i = 0; i < ds.nupstreams && i < DNS_UPSTREAMS_MAX; i++) {
		memcpy(st->dns.upstream[i].text, ds.upstream[i].text,
		    sizeof(ds.upstream[i].text));
		st->dns.upstream[i].healthy = ds.upstream[i].healthy;
	}
	st->dns.nupstreams = i;
}

static void
egressd_status_proxy(struct egressd *d, struct api_status *st)
{
	struct proxy_status ps;
	size_t i;

	proxy_status(d->proxy, &ps);
	st->proxy_on = true;
	st->proxy.port = proxy_port(d->proxy);
	st->proxy.accepted = ps.accepted;
	st->proxy.passthrough = ps.passthrough;
	st->proxy.refused = ps.refused;
	for (i = 1; i < PROXY_NREASONS; i++) {
		st->proxy.closed[st->proxy.nclosed].name = proxy_reason_name(i);
		st->proxy.closed[st->proxy.nclosed++].n = ps.by_reason[i];
	}
	for (i = 0; i < PROXY_NSTATES; i++) {
		st->proxy.open[st->proxy.nopen].name = proxy_state_name(i);
		st->proxy.open[st->proxy.nopen++].n = ps.by_state[i];
	}
}

void
daemon_status_fill(struct egressd *d, struct api_status *st)
{
	st->configured_mode = config_mode_name(d->cfg->mode);
	egressd_status_enforced(d, st);
	st->policy_file = d->cfg->policy_file;
	st->persist_off = d->persist_off;
	st->policy_file_missing = d->policy_file_missing;
	st->policy_fallback = d->policy_fallback;
	if (d->dns != NULL)
		egressd_status_dns(d, st);
	if (d->proxy != NULL)
		egressd_status_proxy(d, st);
	if (d->nft != NULL) {
		st->learned_on = true;
		st->learned = nft_learned_count(d->nft);
	}
	if (d->pt_path != NULL) {
		st->passthrough_on = true;
		st->passthrough.path = d->pt_path;
		st->passthrough.why = d->pt_why;
	}
	if (d->nfq != NULL) {
		struct nfq_status qs;

		nfq_status(d->nfq, &qs);
		st->passthrough.judged = qs.judged;
		st->passthrough.refused = qs.refused;
		st->passthrough.hello_timeouts = qs.timeouts;
		st->passthrough.errors = qs.errors;
		st->passthrough.packets = qs.packets;
		st->passthrough.flows = qs.flows;
		st->passthrough.kernel = qs.kernel ? "bpf" : "queue";
		st->passthrough.kernel_why = qs.kernel_why;
		st->passthrough.kernel_passed = qs.kernel_passed;
		st->passthrough.kernel_missed = qs.kernel_missed;
		st->passthrough.kernel_unlogged = qs.kernel_unlogged;
	}
}
