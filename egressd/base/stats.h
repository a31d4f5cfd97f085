/*
 * stats: the daemon's counters, one plain struct in the daemon context.
 * Modules increment fields directly (single-threaded event loop, no
 * atomics needed); the metrics renderer reads a const pointer. Adding a
 * counter means adding a field here and a line in metrics.c.
 */
#ifndef EGRESSD_STATS_H
#define EGRESSD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bounds (ms) of the upstream latency histogram; +Inf is implied. */
#define STATS_LAT_BUCKETS 10
#define STATS_LAT_BOUNDS_MS                                                    \
	{                                                                      \
		1, 2, 5, 10, 25, 50, 100, 250, 1000, 5000                      \
	}

/*
 * Vault decisions per binding name (issue 18 item 9). The first
 * STATS_VAULT_BINDINGS - 1 names seen get a row each; later ones share
 * the last row, named STATS_VAULT_OTHER. Rows are never dropped, so the
 * counters stay monotonic across vault revisions.
 */
#define STATS_VAULT_BINDINGS 256
#define STATS_VAULT_NAME_MAX 64 /* = POLICY_CRED_NAME_MAX */
#define STATS_VAULT_OTHER "_other"
struct stats_vault_binding {
	char name[STATS_VAULT_NAME_MAX + 1];
	uint64_t decisions[4]; /* no_match (never), injected, ambiguous,
				* refused */
	/* oauth2 token requests: minted (the binding held none),
	 * refreshed (it held one, due), failed */
	uint64_t tokens[3];
};

/* Fetches of http credential sources (issue 38), by credential: ok,
 * failed. Rows like the bindings' (STATS_VAULT_OTHER for the last). */
#define STATS_VAULT_SOURCES 64
struct stats_vault_source {
	char name[STATS_VAULT_NAME_MAX + 1];
	uint64_t fetches[2];
};

/*
 * Queries that could not be resolved (answered SERVFAIL), by why: the
 * reference's egress.dns.query.failed_total{reason}, its label values in
 * this order (metrics.c).
 */
enum stats_dns_fail {
	STATS_DNS_FAIL_NO_UPSTREAMS, /* none configured (or no memory) */
	STATS_DNS_FAIL_UPSTREAM_ERROR, /* every attempt timed out or failed */
	STATS_DNS_FAIL_EMPTY_RESPONSE, /* the last answer was no message */
	STATS_DNS_FAIL_RCODE, /* the last answer was SERVFAIL, REFUSED... */
	STATS_DNS_FAIL_N,
};

/*
 * nftables updates the kernel refused (or that could not be sent), by
 * operation: the reference's egress.nftables.updates.failed_total
 * {operation}, its label values in this order (metrics.c).
 */
enum stats_nft_op {
	STATS_NFT_OP_STATIC_APPLY, /* a policy's table (start, reload, API) */
	STATS_NFT_OP_DYNAMIC_ADD, /* addresses learned from DNS answers */
	STATS_NFT_OP_REMOVE, /* the table removed (--teardown-on-exit) */
	STATS_NFT_OP_REFRESH, /* learned addresses of live flows renewed */
	STATS_NFT_OP_N,
};

struct stats {
	/* DNS, by decision. */
	uint64_t dns_queries; /* every query received */
	uint64_t dns_allowed; /* forwarded or served from cache */
	uint64_t dns_denied; /* NXDOMAIN by policy */
	uint64_t dns_cname_denied; /* chain into a denied name */
	uint64_t dns_private_stripped; /* rebinding: addresses removed */
	uint64_t dns_formerr;
	uint64_t dns_servfail;
	uint64_t dns_cache_hits;
	uint64_t dns_cache_misses;
	uint64_t dns_local; /* localhost/own PTR answered locally */
	uint64_t dns_overload; /* SERVFAIL: DNS_INFLIGHT_MAX queries waiting */
	uint64_t dns_learn_memo_skips; /* hits whose learn the memo skipped */
	uint64_t dns_upstream_failures; /* timeouts, refused, unreachable */
	uint64_t dns_udp_rcvbuf_drops; /* dropped by the kernel: buffer full */
	uint64_t dns_upstream_tc_retries; /* TC=1 over UDP, asked over TCP */
	uint64_t dns_upstream_lat_bucket[STATS_LAT_BUCKETS + 1];
	uint64_t dns_upstream_lat_count;
	double dns_upstream_lat_sum_s;
	uint64_t dns_query_failed[STATS_DNS_FAIL_N];

	/* nft. */
	uint64_t nft_batches; /* committed batches */
	uint64_t nft_failures; /* batches the kernel refused */
	uint64_t nft_learned; /* addresses added or refreshed */
	uint64_t nft_learned_current; /* gauge: elements in dynamic sets */
	uint64_t nft_learned_set[2]; /* gauge: learned4, learned6 elements */
	uint64_t nft_learned_capacity; /* gauge: elements per learned set */
	uint64_t nft_learned_evicted; /* least recently learned, evicted */
	uint64_t nft_learn_txns; /* learn transactions sent (batched) */
	uint64_t nft_update_failed[STATS_NFT_OP_N];

	/*
	 * Per-decision counters of the nft filter chain, copied from the
	 * kernel right before each /metrics render (names: nft_counter_name).
	 */
#define STATS_NFT_COUNTERS 32
	uint64_t nft_rule_packets[STATS_NFT_COUNTERS];
	uint64_t nft_rule_bytes[STATS_NFT_COUNTERS];
	const char *nft_rule_names[STATS_NFT_COUNTERS]; /* static strings */
	uint64_t nft_rule_counters; /* entries filled */

	/* Policy. */
	uint64_t policy_revision; /* gauge */
	uint64_t policy_reloads_ok;
	uint64_t policy_reloads_failed;
	uint64_t policy_updates_ok; /* API mutations applied */
	uint64_t policy_updates_failed;

	/*
	 * Transparent proxy, copied from proxy_status() right before each
	 * render (names: proxy_reason_name / proxy_state_name, static).
	 */
#define STATS_PROXY_REASONS 40
#define STATS_PROXY_STATES 8
	bool proxy_on;
	uint64_t proxy_accepted, proxy_passthrough, proxy_refused;
	uint64_t proxy_terminated;
	uint64_t proxy_up_bytes, proxy_down_bytes;
	uint64_t proxy_upstream_reused, proxy_upstream_idle;
	uint64_t
	    vault_decisions[4]; /* no_match, injected, ambiguous, refused */
	struct stats_vault_binding vault_bindings[STATS_VAULT_BINDINGS];
	size_t nvault_bindings;
	struct stats_vault_source vault_sources[STATS_VAULT_SOURCES];
	size_t nvault_sources;
	/* compressed responses to injected requests: decoded, refused,
	 * failed (enum proxy_compressed order) */
	uint64_t vault_compressed[3];
	/* requests the request rules denied: method, path, host, invalid
	 * (enum policy_req_reason order, allowed left out) */
	uint64_t proxy_denied[4];
	uint64_t proxy_closed[STATS_PROXY_REASONS];
	const char *proxy_reason_names[STATS_PROXY_REASONS];
	size_t proxy_nreasons;
	uint64_t proxy_active[STATS_PROXY_STATES];
	const char *proxy_state_names[STATS_PROXY_STATES];
	size_t proxy_nstates;

	/* Pass-through TLS: its path ("queue" or "proxy") and why (both
	 * lent by the daemon for its lifetime), the queue's counts. */
	bool pt_on;
	const char *pt_path, *pt_why;
	uint64_t pt_judged, pt_refused, pt_hello_timeouts, pt_errors;
	uint64_t pt_packets;
	/* ... and the in-kernel judge's (nfq_bpf.h): loaded, its counts */
	bool pt_kernel_on;
	uint64_t pt_kernel_passed, pt_kernel_missed, pt_kernel_unlogged;

	/* API. */
	uint64_t api_requests;
	uint64_t api_unauthorized;
};

#endif
