/*
 * dns: egressd's filtering resolver, the runtime around the pure wire
 * layer (dns_wire.h, dns_rewrite.h).
 *
 * Pipeline for one query (docs/dns.md has the long form):
 *   parse (FORMERR/NOTIMP/BADVERS/drop) -> localhost and egressd's own
 *   reverse names answered locally -> policy decision on the question
 *   name (deny: NXDOMAIN + synthesized SOA, nothing sent upstream) ->
 *   cache (raw upstream answer, TTLs aged) or upstream (c-ares, failover,
 *   budget) -> answer policy (dns_rewrite: CNAME/DNAME chain checked,
 *   internal addresses stripped unless explicitly allowed, ech stripped
 *   for intercepted names, TTLs clamped, client's ID/case/EDNS restored)
 *   -> learn hook with every remaining address (failure: SERVFAIL) ->
 *   reply (UDP truncated with TC=1 above the client's limit).
 *
 * Listeners: UDP and TCP on 127.0.0.1 and ::1 (port configurable). TCP
 * connections are pipelined (answers may leave out of order), idle-timed,
 * capped in number, in queries per connection, in queries in flight and in
 * buffered output.
 *
 * Threading: everything runs in the daemon's event loop; hooks are called
 * from it and must not block for long (learning is a netlink round trip;
 * with learn_submit the answer waits for it without blocking the loop).
 */
#ifndef EGRESSD_DNS_H
#define EGRESSD_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "egressd/dns/dns_upstream.h"
#include "util/now.h"
#include "egressd/base/log.h"
#include "egressd/base/stats.h"
#include "policy/policy.h"
#include "util/err.h"

struct event_base;

#define DNS_LISTEN4_DEFAULT "127.0.0.1"
#define DNS_LISTEN6_DEFAULT "::1"
#define DNS_TCP_CONNS_MAX 256 /* concurrent TCP clients */
#define DNS_TCP_IDLE_MS 10000 /* close an idle TCP client */
#define DNS_TCP_QUERIES_MAX 1000 /* queries per TCP connection */
#define DNS_TCP_INFLIGHT_MAX 32 /* pipelined queries per conn */
#define DNS_TCP_OUTBUF_MAX (256u << 10) /* stop reading above this */
#define DNS_INFLIGHT_MAX 4096 /* upstream queries in flight */
#define DNS_UDP_BATCH 64 /* datagrams read per wakeup (one recvmmsg) */
#define DNS_UDP_RCVBUF (4 << 20) /* bytes; the kernel books twice this */
#define DNS_UDP_RECV_MAX 4096 /* biggest query datagram read */
#define DNS_LOCAL_TTL 300 /* TTL of localhost answers */
#define DNS_DENY_LOG_RATE 20 /* dns.deny lines per second */
#define DNS_DENY_LOG_BURST 100
#define DNS_DENY_LOG_DEDUP_MS 10000 /* same name logged once per */
#define DNS_DENY_LOG_FLUSH_MS 1000 /* held dns.deny lines written (log_agg) */
/*
 * Learned leases and the TTLs clients see. Answers are clamped to the
 * lease maximum minus DNS_LEARN_SLACK_S, and addresses are learned for
 * their TTL plus DNS_LEARN_SLACK_S, so a lease always outlives the client's
 * copy of the answer. DNS_LEARN_LEASE_MAX_S is the lease cap when the
 * policy sets no dns.ttlMax (the nft module's default, 3600 s).
 */
#define DNS_LEARN_LEASE_MAX_S 3600
#define DNS_LEARN_SLACK_S 2

/* An address handed to the learn hook. */
struct dns_learn_addr {
	int family; /* 4 or 6 */
	uint8_t addr[16]; /* network order; 4 bytes used for family 4 */
	uint32_t ttl; /* seconds, after clamping and cache aging */
};

/*
 * What the daemon lends the resolver. All optional but policy_get (no
 * policy getter: every name is denied).
 *  - policy_get returns the current snapshot, borrowed; the resolver takes
 *    its own reference (policy_ref) for as long as a query is in flight, so
 *    the daemon may swap snapshots at any time.
 *  - learn is called with every address of an answer, before the answer
 *    is sent; -1 makes the answer SERVFAIL (an answer whose addresses are
 *    not yet in the allow sets would be unusable and racy). NULL: nothing
 *    to learn (dns-only mode).
 *  - learn_submit is the asynchronous form (preferred when set): it
 *    queues the addresses and returns a ticket (> 0); later, from the
 *    event loop, done(done_arg, 0, NULL) says they are all in the allow
 *    sets and the answer is released then, done(done_arg, -1, why) makes
 *    it SERVFAIL. 0 (with e): failed now, SERVFAIL. learn_cancel forgets
 *    a ticket (dns_free uses it): its done is never called.
 *  - intercepted says whether the credential proxy intercepts name; its
 *    HTTPS/SVCB "ech" keys are then stripped. NULL: never.
 *  - clock_ms is a monotonic millisecond clock (tests); NULL: the real one.
 */
struct dns_hooks {
	struct policy *(*policy_get)(void *arg);
	int (*learn)(void *arg, const char *qname,
	    const struct dns_learn_addr *addrs, size_t n, struct err *e);
	uint64_t (*learn_submit)(void *arg, const char *qname,
	    const struct dns_learn_addr *addrs, size_t n,
	    void (*done)(void *done_arg, int rc, const char *why),
	    void *done_arg, struct err *e);
	void (*learn_cancel)(void *arg, uint64_t ticket);
	bool (*intercepted)(void *arg, const char *name);
	now_clock_fn clock_ms;
	/*
	 * Called for every denied name (before log rate limiting; names of
	 * log_skip.always excluded) with a fixed reason string ("policy",
	 * "cname", "no_policy"). Must not block (the deny webhook queues).
	 * NULL: nobody listens.
	 */
	void (*on_deny)(void *arg, const char *qname, const char *reason);
	void *arg;
};

struct dns_opts {
	/* Listeners. NULL picks the default address; "" disables it. */
	const char *listen4, *listen6;
	uint16_t port; /* 0: an ephemeral port (tests), see dns_port() */
	uint32_t mark; /* SO_MARK on upstream sockets; 0 = none */

	/*
	 * Upstreams: "ip", "ip:port", "[v6]:port". None: the nameservers of
	 * resolv_conf (NULL = /etc/resolv.conf), read once here.
	 */
	const char *const *upstreams;
	size_t nupstreams;
	const char *resolv_conf;

	unsigned timeout_ms; /* budget per query; 0 = 5000 */
	unsigned attempt_timeout_ms; /* per upstream try; 0 = 2000 */
	const char *probe_name; /* health probe name; NULL: ". NS" */
	unsigned probe_interval_ms; /* 0 = 30000 */

	/* 0 = the DNS_* defaults above. */
	unsigned tcp_conns_max, tcp_idle_ms, tcp_queries_max;
	unsigned tcp_inflight_max;
	size_t cache_entries_max, cache_bytes_max;
	bool cache_disable;
};

struct dns;

/*
 * Parses the upstreams, binds every listener and starts serving on base.
 * lg and st are borrowed and must outlive the resolver. NULL with a reason
 * in e (bad upstream, bind failure of the IPv4 listener, ...). An IPv6
 * listener that cannot bind because the host has no IPv6 is logged and
 * reported by dns_status(), not fatal.
 */
struct dns *dns_new(struct event_base *base, const struct dns_opts *o,
    const struct dns_hooks *h, struct log *lg, struct stats *st, struct err *e);
/* Closes listeners and connections, drops in-flight queries. */
void dns_free(struct dns *d); /* NULL is a no-op */

/*
 * Replaces the upstream list (reload); n == 0 re-reads the resolv.conf
 * given at creation. In-flight queries move to the new list. On error
 * nothing changes.
 */
int dns_set_upstreams(
    struct dns *d, const char *const *upstreams, size_t n, struct err *e);
/* Drops every cached answer (policy tightened, operator request). */
void dns_flush_cache(struct dns *d);

/* The bound port (useful with opts.port == 0). */
uint16_t dns_port(const struct dns *d);

/*
 * The UDP listener of family (AF_INET, AF_INET6), or -1. Bound from
 * dns_new() on, so datagrams queue in it before the event loop runs.
 */
int dns_udp_fd(const struct dns *d, int family);
/*
 * One datagram read from that listener by someone else (the start-up
 * self-check, before the event loop): handled exactly as if the resolver
 * had read it. msg is borrowed.
 */
void dns_udp_input(struct dns *d, int family, const uint8_t *msg, size_t len,
    const struct sockaddr *peer, socklen_t peerlen);

struct dns_status {
	uint16_t port;
	bool udp4, tcp4, udp6, tcp6; /* listeners bound */
	size_t nupstreams, nhealthy;
	struct dns_upstream_status upstream[DNS_UPSTREAMS_MAX];
	size_t cache_entries, cache_bytes;
	uint64_t cache_evictions;
	size_t inflight; /* queries waiting for an upstream */
	size_t tcp_conns;
};

void dns_status(const struct dns *d, struct dns_status *out);
/*
 * Ready: the IPv4 listeners are bound and at least one upstream is
 * configured and not marked down. why (may be NULL) gets a fixed string.
 */
bool dns_ready(const struct dns *d, const char **why);

#endif
