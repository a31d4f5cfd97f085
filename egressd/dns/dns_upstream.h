/*
 * dns_upstream: the resolver's upstream side, on c-ares 1.18 inside the
 * daemon's libevent loop.
 *
 * Each upstream gets two single-server c-ares channels, one for UDP (EDNS
 * buffer DNS_EDNS_UDP_SIZE; a TC=1 answer is handed back to us and asked
 * again over the same upstream's TCP channel, counted in
 * dns_upstream_tc_retries) and one with ARES_FLAG_USEVC for queries that
 * came in over TCP. Failover, the per-query time budget and health are
 * ours, not c-ares': one request walks the upstreams, healthy ones first
 * in the configured order. While an upstream has not had its first try,
 * the current attempt is hedged: after the current upstream's RTO (or an
 * equal share of the budget left, whichever is shorter) the next upstream
 * is asked as well, and the first answer wins. Once all were tried,
 * further attempts are retransmissions after the attempt timeout. The
 * budget bounds everything; when it is spent or every attempt failed the
 * caller hears "failed" (and answers SERVFAIL).
 * An upstream is marked down after DNS_UPSTREAM_FAILS_UNHEALTHY failed
 * attempts in a row (an attempt fails by error, by c-ares' timeout or by
 * outliving a full attempt timeout; a hedge alone is not a failure) and
 * up again by any answer, a late one included, or the periodic probe
 * (the configured name's A, or ". NS"; any answer but SERVFAIL proves a
 * probed upstream alive).
 *
 * Every socket c-ares creates gets SO_MARK (when a mark is set) before it
 * connects, so egressd's own queries are exempt from the sandbox's nft
 * redirect and filter. A socket that cannot be marked is not used.
 *
 * c-ares sockets are libevent events (sock_state_cb + one event per fd)
 * and its retransmit/timeout logic is driven by a timer armed from
 * ares_timeout(). Nothing blocks.
 */
#ifndef EGRESSD_DNS_UPSTREAM_H
#define EGRESSD_DNS_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/base/defaults.h"
#include "egressd/base/log.h"
#include "egressd/base/stats.h"
#include "util/err.h"
#include "util/now.h"

struct event_base;

#define DNS_UPSTREAMS_MAX 8 /* configured upstreams */
#define DNS_UPSTREAM_TEXT_MAX 64 /* "[v6]:port" + NUL */
#define DNS_UPSTREAM_FAILS_UNHEALTHY 2 /* consecutive failures -> down */
#define DNS_UPSTREAM_ROUNDS_MAX 3 /* passes over the list per query */
#define DNS_UPSTREAM_ATTEMPT_MS_DEFAULT 2000
/* The configuration's defaults (defaults.h), in milliseconds. */
#define DNS_UPSTREAM_BUDGET_MS_DEFAULT (EGRESSD_DEFAULT_DNS_TIMEOUT_S * 1000u)
/*
 * Hedging: how long an attempt may go unanswered before the next upstream
 * is asked too (the first attempt keeps running). An upstream that never
 * answered yet gets RTO_INIT; one that did, srtt + 4 rttvar, at least
 * RTO_MIN.
 */
#define DNS_UPSTREAM_RTO_INIT_MS 400
#define DNS_UPSTREAM_RTO_MIN_MS 150
#define DNS_UPSTREAM_PROBE_MS_DEFAULT (EGRESSD_DEFAULT_PROBE_INTERVAL_S * 1000u)
#define DNS_UPSTREAM_PROBE_QTYPE_NAME 1 /* A of the configured name */
#define DNS_UPSTREAM_PROBE_QTYPE_ROOT 2 /* ". NS" when none is set */
#define DNS_UPSTREAM_EDNS_SIZE 1232 /* = DNS_EDNS_UDP_SIZE */
#define DNS_UPSTREAM_QUERY_MAX 512 /* bytes of a query we send */
#define DNS_RESOLV_CONF_MAX (64u << 10) /* bytes of resolv.conf read */

struct dns_upstream_addr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order */
	uint16_t port;
	char text[DNS_UPSTREAM_TEXT_MAX]; /* canonical "ip:port"/"[ip]:port" */
};

/*
 * "ip", "ip:port", "[ipv6]", "[ipv6]:port", or a bare IPv6 literal (port
 * 53). Hostnames, zone ids ("%eth0"), empty or zero ports are rejected.
 */
int dns_upstream_parse(
    const char *s, struct dns_upstream_addr *out, struct err *e);
/* Parses n strings into out (at most max); -1 on the first bad one. */
int dns_upstream_parse_list(const char *const *v, size_t n,
    struct dns_upstream_addr *out, size_t max, size_t *nout, struct err *e);
/*
 * "nameserver" lines of a resolv.conf text (pure). Entries that are not
 * IP literals are skipped (glibc would not use them either); -1 if none
 * is usable, with the first reason.
 */
int dns_upstream_parse_resolv_conf(const char *buf, size_t len,
    struct dns_upstream_addr *out, size_t max, size_t *nout, struct err *e);
/* Reads path (at most DNS_RESOLV_CONF_MAX bytes) and parses it. */
int dns_upstream_from_resolv_conf(const char *path,
    struct dns_upstream_addr *out, size_t max, size_t *nout, struct err *e);
bool dns_upstream_addr_is_loopback(const struct dns_upstream_addr *a);

/*
 * The query egressd sends upstream for a client question: ID 0 (c-ares
 * assigns one), RD=1, CD as given, the question name bytes as the client
 * spelled them, and an 11-byte OPT (udp DNS_UPSTREAM_EDNS_SIZE, version
 * 0, DO as given, no options: nothing of the client's EDNS options
 * travels upstream). -1 if cap is too small or name_len is 0/over 255.
 */
int dns_upstream_query_build(const uint8_t *name_wire, size_t name_len,
    uint16_t qtype, uint16_t qclass, bool cd, bool dnssec_ok, uint8_t *out,
    size_t cap, size_t *outlen);

struct dns_upstreams_opts {
	uint32_t mark; /* SO_MARK for every upstream socket; 0 = none */
	unsigned attempt_timeout_ms; /* 0 = DNS_UPSTREAM_ATTEMPT_MS_DEFAULT */
	const char *probe_name; /* NULL: probe with ". NS" */
	unsigned probe_interval_ms; /* 0 = DNS_UPSTREAM_PROBE_MS_DEFAULT */
	now_clock_fn clock; /* NULL = now_mono_ms_clock */
	void *clock_arg;
};

struct dns_upstreams;
struct dns_upstream_req;

/* lg and st are borrowed and must outlive the set. */
struct dns_upstreams *dns_upstreams_new(struct event_base *base,
    const struct dns_upstream_addr *addrs, size_t n,
    const struct dns_upstreams_opts *o, struct log *lg, struct stats *st,
    struct err *e);
/*
 * Frees the set. Requests still pending are dropped without their
 * callback (the caller cancels what it cares about first).
 */
void dns_upstreams_free(struct dns_upstreams *u);
/*
 * Replaces the upstream list (reload). In-flight requests move to the new
 * list within their remaining budget. On error nothing changes.
 */
int dns_upstreams_replace(struct dns_upstreams *u,
    const struct dns_upstream_addr *addrs, size_t n, struct err *e);

/*
 * Result of a request: ans/len is the upstream's answer (valid only during
 * the callback; its ID is c-ares', not the client's), or ans NULL when
 * every attempt failed or the budget ran out. upstream names who answered
 * (NULL on failure).
 */
typedef void (*dns_upstream_done_fn)(
    void *arg, const uint8_t *ans, size_t len, const char *upstream);

/*
 * Sends query (copied) to the upstreams; tcp selects the USEVC channels.
 * attempt_ms 0 uses the set's attempt timeout; budget_ms bounds the whole
 * request. done is called exactly once, never from inside this call, and
 * the handle is invalid afterwards. NULL on allocation failure or when no
 * upstream is configured.
 */
struct dns_upstream_req *dns_upstream_send(struct dns_upstreams *u,
    const uint8_t *query, size_t qlen, bool tcp, unsigned attempt_ms,
    unsigned budget_ms, dns_upstream_done_fn done, void *arg);
/* Drops a pending request: its callback will not run. */
void dns_upstream_cancel(struct dns_upstream_req *r);

struct dns_upstream_status {
	char text[DNS_UPSTREAM_TEXT_MAX];
	bool healthy;
	unsigned consecutive_failures;
	uint64_t queries, failures; /* attempts, failed attempts */
	uint64_t last_ok_ms, last_fail_ms; /* monotonic; 0 = never */
	unsigned last_rtt_ms;
};

size_t dns_upstreams_count(const struct dns_upstreams *u);
size_t dns_upstreams_healthy(const struct dns_upstreams *u);
size_t dns_upstreams_pending(const struct dns_upstreams *u);
/* Fills up to max entries; returns how many. */
size_t dns_upstreams_status(
    const struct dns_upstreams *u, struct dns_upstream_status *out, size_t max);
/* Starts one probe round now (tests; the timer does it periodically). */
void dns_upstreams_probe_now(struct dns_upstreams *u);

#endif
