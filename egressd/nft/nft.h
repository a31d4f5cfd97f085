/*
 * nft: default-deny at L3/L4 with nftables, programmed over netlink
 * (libnftnl + libmnl; no nft binary at run time).
 *
 * egressd owns exactly one table, "inet egressd", and touches nothing
 * outside it. The table is built from a policy snapshot by a pure function
 * (nft_build_ruleset: policy + options + what the kernel already holds in
 * -> one netlink batch out, as bytes) and committed as ONE transaction with
 * NLM_F_ACK on every message and every ack checked: either the whole new
 * ruleset is in force or the old one still is, byte for byte. Errors name
 * the errno and which message of the batch the kernel refused.
 *
 * Ruleset (docs/nft.md prints a real one):
 *   chain nat_out    type nat hook output priority -100, policy accept:
 *     own mark -> accept; nameserver-exempt :53 -> accept;
 *     tcp/udp dport 53 (any address, v4 and v6) -> redirect to :dns_port;
 *     [proxy_port != 0] tcp dport @intercept to learned -> redirect :proxy.
 *   chain filter_out type filter hook output priority 0, policy drop:
 *     IPv4 LSRR/SSRR options and IPv6 routing headers -> deny;
 *     ct established,related in the original direction; of flows a peer
 *     started only related (ICMP errors), replies on lo, TCP replies
 *     [from @inbound_ports when pinned] and echo replies; own mark (ct
 *     mark set meta mark: see nft_cut_denied_flows); ICMPv6 ND (133-136,
 *     143);
 *     nameserver-exempt :53; [api_uid_port] meta skuid api_uid tcp to
 *     127.0.0.1/::1 dport api_uid_port -> accept; protected ports on any
 *     local address (fib daddr type local) -> deny; resolver
 *     (127.0.0.1/::1 dport dns_port, matched by destination, never by
 *     oif lo); [proxy] 127.0.0.1/::1 tcp
 *     dport proxy_port; oif lo; DoT/DoQ 853, QUIC udp 443, DoH-block ->
 *     deny; IP/CIDR rules of the policy layers in precedence order
 *     (always-deny with its IPv4 prefixes also in NAT64/6to4/mapped IPv6
 *     form, always-allow, infra), the built-in internal ranges
 *     (special_ranges.c rows marked drop, with the IPv6 spellings of the
 *     IPv4 ones) -> deny, the
 *     user IP/CIDR rules; @learned4/@learned6 -> accept; addr . l4proto .
 *     port @limited4/@limited6 (names with port/protocol limits) ->
 *     accept (default deny) or deny (default allow); default action.
 *   chain deny (regular): rate-limited log, tcp reset, icmpx
 *     admin-prohibited. Every decision counts in a named counter.
 * Precedence of IP/CIDR rules equals policy_match_addr(): rules are sorted
 * by layer, then prefix length (longest first), then deny before allow,
 * and emitted as ordered rules (one per group of equal layer, length,
 * action, protocols and ports, its prefixes in an interval set); the first
 * matching rule in that order is the rule policy_match_addr() picks.
 *
 * Fail closed: the table is not owned by a socket, so it survives a crash
 * or kill -9. A (re)starting egressd adopts it in one batch (chains
 * flushed and refilled, static sets replaced, learned sets kept), so there
 * is never a moment without the drop policy or the DNS redirect.
 * nft_teardown() is the only way egressd removes it.
 *
 * Threading: none. Learn transactions of the resolver (nft_learn_submit)
 * go over a second, non-blocking socket whose acks a libevent read event
 * collects; conntrack work (nft_renew_start, nft_cut_start) over sockets
 * of its own, read in slices on the loop. Every other call is
 * synchronous on the main netlink socket with a bounded receive timeout
 * (NFT_ACK_TIMEOUT_MS); call them from the event loop. No global state.
 */
#ifndef EGRESSD_NFT_H
#define EGRESSD_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "egressd/base/defaults.h"
#include "util/err.h"
#include "policy/policy.h"

struct event_base;
struct stats;

#define NFT_TABLE "egressd"
#define NFT_CHAIN_FILTER "filter_out"
#define NFT_CHAIN_NAT "nat_out"
#define NFT_CHAIN_DENY "deny"
#define NFT_SET_LEARNED4 "learned4"
#define NFT_SET_LEARNED6 "learned6"
/* Addresses of names whose rules limit ports or protocols:
 * addr . l4proto . port intervals (docs/nft.md). */
#define NFT_SET_LIMITED4 "limited4"
#define NFT_SET_LIMITED6 "limited6"
/* TCP ports whose flows to learned addresses are judged in flight. */
#define NFT_SET_QUEUE_PORTS "queue_ports"
/* Learned addresses of names the proxy must see (a binding could match
 * them, request rules name them): with in-flight judging on, TCP to the
 * queued ports of these keeps the redirect to the proxy (docs/proxy.md). */
#define NFT_SET_HOLD4 "hold4"
#define NFT_SET_HOLD6 "hold6"

/*
 * In-flight judging (docs/proxy.md, "Pass-through judged in flight"):
 * conntrack marks of a flow whose ClientHello egressd judges from the
 * queue. PENDING is set at the flow's first packet (nat_out); OK and
 * REFUSED come back as the packet mark of egressd's verdict (NF_REPEAT)
 * and a rule copies them into the conntrack mark, where they outlive
 * egressd. RECHECK is a packet mark only (defaults.h). Distinct from any
 * --mark (config checks).
 */
#define NFT_QMARK_PENDING EGRESSD_QMARK_PENDING
#define NFT_QMARK_OK EGRESSD_QMARK_OK
#define NFT_QMARK_REFUSED EGRESSD_QMARK_REFUSED
#define NFT_QMARK_RECHECK EGRESSD_QMARK_RECHECK

/* Which queue verdict the kernel has (nft_queue_probe). */
enum nft_queue_kind {
	NFT_QUEUE_NONE = 0, /* in-flight judging off: the proxy path */
	NFT_QUEUE_NATIVE, /* nftables' queue expression (CONFIG_NFT_QUEUE) */
	NFT_QUEUE_COMPAT, /* xtables NFQUEUE through nft_compat */
};

/* Bounds. */
#define NFT_PORTS_MAX 32 /* protected / intercept ports */
#define NFT_ADDRS_MAX 64 /* nameserver-exempt, DoH blocklist */
/*
 * Elements per learned set (learned4, learned6, and any later set of
 * learned elements): the bounds of --learned-max (its default is
 * EGRESSD_DEFAULT_LEARNED_MAX, defaults.h). When a
 * set is full, learning a new address evicts the least recently learned
 * one (docs/nft.md). The kernel set is declared with NFT_LEARNED_SLACK
 * times that size: elements that expired but that the kernel has not
 * collected yet still count there, and must never make an add fail.
 */
#define NFT_LEARNED_MAX_MIN 16
#define NFT_LEARNED_MAX_LIMIT (16u << 20)
#define NFT_LEARNED_SLACK 2
#define NFT_LEARN_BATCH_MAX 256 /* addresses per nft_learn() call */
/*
 * Asynchronous learning (nft_learn_submit): the answers handled in one
 * event-loop turn share one transaction of at most NFT_LEARN_TXN_MAX
 * addresses, sent at the end of that turn (no timer: an answer never
 * waits for anything but its own transaction).
 */
#define NFT_LEARN_TXN_MAX 4096
#define NFT_NAMES_PER_ADDR 8 /* names remembered per learned addr */
#define NFT_LIMITS_MAX 272 /* limited-set elements of one name */
#define NFT_ADDR_LIMITS_MAX 512 /* ... of one address (all its names) */
#define NFT_KOBJ_MAX 4096 /* chains/sets found in an adopted table */
#define NFT_BATCH_MAX (64u << 20) /* bytes of one batch */
#define NFT_ACK_TIMEOUT_MS 5000 /* per recv while waiting for acks */
#define NFT_ELEMS_PER_MSG 128 /* set elements per netlink message */
#define NFT_DEFAULT_LOG_RATE 5 /* kernel log lines/s for drops */
#define NFT_SELFCHECK_TIMEOUT_MS 500 /* per probe datagram (failure only) */

struct nft_opts {
	uint32_t mark; /* SO_MARK of egressd's own sockets (0x1) */
	uint16_t dns_port; /* resolver on 127.0.0.1 and ::1 (15353) */
	uint16_t proxy_port; /* transparent proxy; 0 = no interception */
	/* Ports only egressd's own sockets may reach on local addresses:
	 * the control API port first (18080), then operator-listed ones. */
	uint16_t protected_ports[NFT_PORTS_MAX];
	size_t nprotected_ports;
	/* The one exception (--api-loopback-uid, docs/security.md): TCP to
	 * 127.0.0.1/::1 port api_uid_port from sockets owned by api_uid
	 * (execd's, whose /proxy/PORT relay is how the OpenSandbox server
	 * reaches the API) passes, before the protected-port drop. 0 = no
	 * exception: no unmarked socket passes. */
	uint16_t api_uid_port;
	uint32_t api_uid;
	/* Pinned inbound TCP ports: replies of connections a peer started
	 * leave only from these (listening ports); 0 of them = any port. */
	uint16_t inbound_ports[NFT_PORTS_MAX];
	size_t ninbound_ports;
	/* The upstream proxy egressd's origin connections go through
	 * (uproxy.h): TCP to it from any unmarked socket is denied before
	 * the policy is looked at, so the sandbox cannot use it directly
	 * whatever the policy allows (egressd's marked sockets are
	 * accepted earlier, like all of its own). uproxy_port 0: none. */
	int uproxy_family; /* 4 or 6 */
	uint8_t uproxy_addr[16];
	uint16_t uproxy_port;
	/* TCP ports redirected to proxy_port (80, 443 and extra). */
	uint16_t intercept_ports[NFT_PORTS_MAX];
	size_t nintercept_ports;
	/*
	 * In-flight judging: queue_kind != NONE gives TCP to queue_ports of
	 * learned addresses no redirect but the PENDING mark, and sends the
	 * established packets of PENDING flows to NFQUEUE queue_num until
	 * a verdict marks them (NFT_QMARK_*). The learned addresses of names
	 * the proxy must see (bindings, request rules: nft_queue_held) are
	 * also in the hold sets, whose flows keep the redirect: at the
	 * packet level only the address is known.
	 */
	enum nft_queue_kind queue_kind;
	uint16_t queue_num;
	uint16_t queue_ports[NFT_PORTS_MAX];
	size_t nqueue_ports;
	/* Direct DNS (tcp/udp 53) allowed to these, not redirected. */
	struct policy_prefix ns_exempt[NFT_ADDRS_MAX];
	size_t nns_exempt;
	/* tcp 443 to these is denied when block_doh_443. */
	bool block_doh_443;
	struct policy_prefix doh_block[NFT_ADDRS_MAX];
	size_t ndoh_block;
	/* Learned element lifetime = answer TTL clamped to [ttl_min,
	 * ttl_max]; a policy with dns.ttl_min/ttl_max set overrides. */
	uint32_t ttl_min, ttl_max;
	uint32_t log_rate; /* kernel log lines/s for drops; 0 = count only */
	/* Elements per learned set (NFT_LEARNED_MAX_MIN..LIMIT); the
	 * least recently learned are evicted beyond it. */
	uint32_t learned_max;
	/* Monotonic milliseconds; NULL = CLOCK_MONOTONIC. For tests. */
	uint64_t (*clock)(void *arg);
	void *clock_arg;
};

/* Defaults of contract §1: mark 0x1, dns 15353, API 18080 protected. */
void nft_opts_init(struct nft_opts *o);

/*
 * One element of a limited set: with the address, l4proto plo..phi and
 * destination port lo..hi (ICMP and protocols without ports: 0..65535).
 */
struct nft_limit {
	uint8_t plo, phi;
	uint16_t lo, hi;
};

/* One address of a DNS answer for nft_learn(). */
struct nft_learn_addr {
	uint8_t family; /* 4 or 6 */
	uint8_t addr[16]; /* network byte order */
	uint32_t ttl; /* seconds, from the answer; clamped */
	const char *name; /* the allowed name it was learned for; borrowed */
	/* A plain element (nlim == 0) also enters (or, deleted, leaves) the
	 * hold set of its family (NFT_SET_HOLD4). */
	bool hold;
	/* Which set: nlim == 0 the plain learned set (every port), else
	 * these elements of the limited set (borrowed). nft_learn() fills
	 * them itself from the name and the policy in force. */
	const struct nft_limit *lim;
	size_t nlim;
};

/*
 * PURE: the limited-set elements of a name whose reach (policy.h) is
 * neither all nor none, for family 4/6: what it may reach when the
 * policy's default action is deny (the rule accepts them), what it may
 * not when the default is allow (the rule denies them). Returns the
 * count (at most max, never 0 unless reach is all or none; fail closed:
 * past max, under default deny the extra elements are left out, under
 * default allow the one element is "every protocol and port", and
 * *overflow is set).
 */
size_t nft_reach_limits(const struct policy_reach *r, enum policy_action def,
    int family, struct nft_limit *out, size_t max, bool *overflow);

/*
 * What the kernel already holds in our table, for the builder: the names
 * of chains and sets to flush/replace, and learned elements to remove.
 * NULL or zeroed = no table yet.
 */
struct nft_kstate {
	bool table_exists;
	char **chains; /* borrowed */
	size_t nchains;
	char **sets; /* borrowed; learned4/6 are kept, others replaced */
	size_t nsets;
	const struct nft_learn_addr *drop; /* learned elements to remove */
	size_t ndrop;
	const struct nft_learn_addr *add; /* learned elements to add */
	size_t nadd;
	/* learned addresses of names now held (nft_queue_held): into the
	 * hold sets (what is already there stays) */
	const struct nft_learn_addr *hold;
	size_t nhold;
};

/* An opaque netlink batch: begin, messages (each NLM_F_ACK), end. */
struct nft_batch;

void nft_batch_free(struct nft_batch *b);
const uint8_t *nft_batch_data(const struct nft_batch *b, size_t *len);
/* Messages between begin and end. */
size_t nft_batch_nmsgs(const struct nft_batch *b);
/* "NEWRULE filter_out #12"-like label of message i (0-based, between
 * begin and end), for error messages. */
const char *nft_batch_msg_label(const struct nft_batch *b, size_t i);
/*
 * Decodes the batch with libnftnl into readable lines, one per object
 * ("NEWRULE inet egressd filter_out [ meta load ... ]"). Newly allocated,
 * caller frees; NULL on allocation failure. For tests and --check.
 */
char *nft_batch_describe(const struct nft_batch *b);

/*
 * PURE: policy (borrowed) + options + kernel state -> the batch that makes
 * the table exactly the ruleset for p. Nothing is sent. On error *out is
 * NULL and nothing is left allocated.
 */
int nft_build_ruleset(const struct policy *p, const struct nft_opts *o,
    const struct nft_kstate *ks, struct nft_batch **out, struct err *e);
/*
 * PURE: the batch that adds (or refreshes) learned elements with timeout
 * ttl clamped to [ttl_min, ttl_max]. Refresh is add;delete;add of the same
 * elements in one transaction, which restarts the timeout on every kernel
 * (plain re-add only updates timeouts since Linux 6.10) and never fails
 * on an element that expired meanwhile.
 */
int nft_build_learn(const struct nft_learn_addr *a, size_t n, uint32_t ttl_min,
    uint32_t ttl_max, struct nft_batch **out, struct err *e);
/* The size a learned set is declared with for learned_max elements. */
uint32_t nft_learned_kernel_size(uint32_t learned_max);
/* PURE: delete table inet egressd. */
int nft_build_teardown(struct nft_batch **out, struct err *e);

/* In-flight judging (nft_queue.c). */
const char *nft_queue_kind_name(enum nft_queue_kind k);
/* PURE: a transaction that creates a scratch table holding one queue
 * rule of kind k and deletes it again: accepted iff the kernel has k. */
int nft_build_queue_probe(
    enum nft_queue_kind k, uint16_t num, struct nft_batch **out, struct err *e);
/* With o's in-flight judging, must the proxy see name's flows to the
 * queued ports under p (a binding of p could match it, or request rules
 * name it)? Then its learned addresses also enter the hold sets. */
bool nft_queue_held(
    const struct nft_opts *o, const struct policy *p, const char *name);

/* The runtime object: a netlink socket, options, the learned mirror. */
struct nft;

/*
 * Opens the netlink socket; sends nothing. st (may be NULL) is borrowed
 * and must outlive n: nft_batches, nft_failures, nft_learned,
 * nft_learned_current are kept up to date.
 */
struct nft *nft_new(const struct nft_opts *o, struct stats *st, struct err *e);
void nft_free(struct nft *n); /* leaves the table in force */

/*
 * Installs the ruleset for p in one batch and keeps a reference to p
 * (nft_learn judges names by it). The first call
 * adopts a table left by an earlier egressd (learned elements it holds are
 * kept and loaded into the mirror, names from their comments). Every
 * learned address is re-judged in the same batch: removed when the new
 * policy denies it (all its names now denied, or the address covered by
 * a deny rule of every port and protocol or an internal range), moved
 * between the plain and the limited sets, or given other limited
 * elements, when what its names may reach changed (new elements get the
 * address's remaining lease); the others keep their expiry. On -1
 * nothing changed in the kernel; the caller must not report ready.
 */
int nft_apply_policy(struct nft *n, struct policy *p, struct err *e);

/*
 * Adds/refreshes the addresses of one DNS answer in one batch and waits
 * for the kernel's acks: when it returns 0 the addresses are allowed.
 * n_addrs <= NFT_LEARN_BATCH_MAX. Needs a prior nft_apply_policy().
 */
int nft_learn(struct nft *n, const struct nft_learn_addr *a, size_t n_addrs,
    struct err *e);

/*
 * Asynchronous learning, what the resolver uses. nft_attach() opens a
 * second, non-blocking netlink socket for learn transactions, read by a
 * libevent read event on base (borrowed; must outlive n).
 *
 * nft_learn_submit() queues the addresses of one answer (n_addrs <=
 * NFT_LEARN_BATCH_MAX; name, the allowed name, is copied) and returns a
 * ticket (> 0), or 0 with e when it cannot (not attached, not applied,
 * bad input, out of memory). Later, from the event loop and never from
 * inside nft_* calls, done(arg, 0, NULL) says every one of these addresses
 * is in the kernel sets (the ack of its transaction arrived and none was
 * removed meanwhile: by a policy change or an eviction); done(arg, -1,
 * why) says they may not be: the answer must not be released. Answers
 * submitted in one loop turn share a transaction (NFT_LEARN_TXN_MAX).
 * nft_learn_cancel() forgets a ticket: its done is never called.
 * nft_free() drops every pending ticket without calling done.
 */
typedef void (*nft_learn_done_fn)(void *arg, int rc, const char *why);
int nft_attach(struct nft *n, struct event_base *base, struct err *e);
uint64_t nft_learn_submit(struct nft *n, const struct nft_learn_addr *a,
    size_t n_addrs, const char *name, nft_learn_done_fn done, void *arg,
    struct err *e);
void nft_learn_cancel(struct nft *n, uint64_t ticket);

/*
 * The best queue verdict this kernel takes (native, then compat), tried
 * with scratch transactions that leave nothing behind; NFT_QUEUE_NONE
 * with why filled when it has neither.
 */
enum nft_queue_kind nft_queue_probe(
    struct nft *n, uint16_t num, struct err *why);
/* Turns in-flight judging on (k != NONE) for the next nft_apply_policy
 * (before the first one: nft_opts' queue fields). */
void nft_set_queue(struct nft *n, enum nft_queue_kind k, uint16_t num,
    const uint16_t *ports, size_t nports);
/*
 * The in-kernel judge (nfq_bpf.h): table inet NFT_KTABLE, owned by a
 * socket of n's own (the kernel deletes it when that socket closes: at
 * nft_free, or when egressd dies, so a dead egressd's verdicts stop
 * passing anything at once and the queue, with no reader, fails
 * closed). Its chains run the BPF program prog_fd: on input, on the
 * SYN-ACKs from the queued ports (the program notes where each client
 * stream starts: what the origin acknowledged), and on output, between
 * nat_out and filter_out, on the packets of PENDING flows; one it
 * passes gets the packet mark OK, which
 * filter_out turns into the flow's conntrack mark as it does an OK
 * verdict from the queue. Needs nft_set_queue first. -1 and e when the
 * kernel refuses it (no xt_bpf match): the queue judges alone.
 */
#define NFT_KTABLE "egressd_kjudge"
#define NFT_KCHAIN "judge"
#define NFT_KCHAIN_IN "judge_in"
#define NFT_KPRIO (-50) /* after nat_out (-100), before filter_out (0) */
int nft_kjudge_install(struct nft *n, int prog_fd, struct err *e);
/*
 * addr into the hold set of its family for the rest of its learned
 * lease (at least the minimum TTL): a flow judged in flight whose SNI
 * the proxy must see was refused, and the client's next connection
 * must meet the redirect. One transaction; 0 when queueing is off.
 */
int nft_hold(struct nft *n, int family, const uint8_t *addr, struct err *e);

/*
 * Sends a batch from nft_build_*() as one transaction and checks every
 * ack (what nft_apply_policy/nft_learn do inside). For tools and tests;
 * the mirror is not updated.
 */
int nft_send_batch(struct nft *n, struct nft_batch *b, struct err *e);

/* Forgets mirror entries whose kernel element has expired; returns how
 * many. Call from a timer (e.g. every 10 s). */
size_t nft_expire_tick(struct nft *n);

/*
 * Long-lived connections: dumps conntrack (ctnetlink) for flows this
 * namespace started that really go to a learned address expiring within
 * window_s (not DNAT-ed to egressd, reply from that address, not ct-marked
 * as egressd's own) and refreshes those elements in one batch.
 * *renewed (may be NULL) gets the count. Call from a timer.
 */
int nft_renew_live(
    struct nft *n, uint32_t window_s, size_t *renewed, struct err *e);

/*
 * nft_renew_live() without blocking the loop, what the daemon uses: the
 * conntrack dump goes over a third netlink socket of its own (its own
 * sequence numbers; never interleaved with a batch), non-blocking, read
 * on readability in slices of at most NFT_CT_SLICE_RECVS reads per loop
 * turn. A dump that makes no progress for NFT_ACK_TIMEOUT_MS, loses
 * messages (ENOBUFS) or fails ends with done(arg, -1, 0, why): nothing
 * renewed, the socket is closed and the next start opens a fresh one.
 * Otherwise the addresses found are refreshed as nft_renew_live() does
 * and done(arg, 0, renewed, NULL) is called (from the loop; when nothing
 * is learned, at once from inside nft_renew_start). One dump at a time:
 * nft_renew_start() fails while nft_renew_busy(). Free before the nft.
 */
#define NFT_CT_SLICE_RECVS 2 /* dump reads (<= 64 KiB each) per turn */
struct nft_renew;
typedef void (*nft_renew_done_fn)(
    void *arg, int rc, size_t renewed, const char *why);
struct nft_renew *nft_renew_new(
    struct nft *n, struct event_base *base, struct err *e);
void nft_renew_free(struct nft_renew *r);
bool nft_renew_busy(const struct nft_renew *r);
int nft_renew_start(struct nft_renew *r, uint32_t window_s,
    nft_renew_done_fn done, void *arg, struct err *e);

/*
 * Cutting established flows after a tightening. The filter chain accepts
 * "ct state established,related" first, so a policy update that denies a
 * destination blocks only new connections; deleting the conntrack entry
 * makes the next packet of the flow NEW, and the deny chain answers it
 * (TCP reset, ICMP admin-prohibited).
 */
#define NFT_CT_DELETE_MAX 4096 /* conntrack entries deleted per pass */
#define NFT_CT_CUT_PASSES_MAX 256 /* passes (dumps) of one cut */

/* One conntrack entry, as IPCTNL_MSG_CT_DELETE names it. */
struct nft_ct_flow {
	uint8_t family; /* 4 or 6 */
	uint8_t proto; /* IPPROTO_TCP, _UDP, _ICMP, _ICMPV6 */
	uint8_t src[16], dst[16]; /* original direction, network order */
	uint16_t sport, dport; /* TCP/UDP, host order */
	uint16_t icmp_id; /* ICMP/ICMPv6, host order */
	uint8_t icmp_type, icmp_code;
	uint32_t id; /* CTA_ID from the dump (host order); 0 = absent */
	uint16_t zone; /* CTA_ZONE; 0 = default zone */
	/* TCP whose ct mark is in-flight judging's (pending or judged):
	 * cut by setting the ct mark REFUSED, not by deleting the entry
	 * (nft_build_ct_delete) */
	bool judged;
	/* TCP in TIME_WAIT or CLOSE: over, only remembered (it renews
	 * nothing) */
	bool over;
};

/*
 * PURE: writes one ctnetlink request that cuts f (NLM_F_REQUEST |
 * NLM_F_ACK, sequence seq) into buf: a delete, or for a judged flow
 * (f->judged) an update of its ct mark to NFT_QMARK_REFUSED (no
 * NLM_F_CREATE: ENOENT when it is gone). Deleting a flow whose client
 * only ACKs (a download) lets conntrack pick it up again from the
 * origin's next packet as an inbound flow (docs/nft.md, "Limits"); a
 * refused mark stays on the entry and filter_out resets the client's
 * next packet. Returns its length, or 0 when f is not a
 * TCP/UDP/ICMP/ICMPv6 flow of family 4/6 or buflen is too small.
 */
size_t nft_build_ct_delete(
    const struct nft_ct_flow *f, uint32_t seq, void *buf, size_t buflen);

/*
 * Cuts one flow now, on the caller's thread (one request, one ack):
 * f->judged marks its entry refused, else deletes it; a flow that ended
 * meanwhile is no error. For the flows in-flight judging judges again
 * by name after a commit (nfq_rejudge); the cut of a policy change is
 * nft_cut_start's.
 */
int nft_cut_flow(struct nft *n, const struct nft_ct_flow *f, struct err *e);

/*
 * After a successful nft_apply_policy(n, p) that changed a policy in
 * force (an update): dumps conntrack and deletes the entries of flows
 * that p now denies, so established connections to newly denied
 * destinations break too. A flow is cut only when all of:
 *   - TCP, UDP, ICMP or ICMPv6; original source local, original
 *     destination not local (inbound connections, such as the operator's
 *     API connection, are never touched);
 *   - not DNAT-ed (DNS and proxy redirects go to egressd, not out);
 *   - ct mark != the own-socket mark (the filter chain copies the mark of
 *     egressd's own packets into the ct mark);
 *   - the destination is denied as nft decides it for a NEW packet: the
 *     rule policy_match_addr() picks for (addr, proto, port) decides;
 *     when none does, the built-in internal ranges deny, then the
 *     learned rules as the chain has them (the plain element, or a
 *     limited element covering the flow's protocol and port), else p's
 *     default action. An address still allowed by another name or a CIDR
 *     keeps its flows; one on a port its names no longer list does not.
 * Every conntrack entry is read and judged (no cap: padding the table
 * with other flows hides nothing). One pass is one dump and at most
 * NFT_CT_DELETE_MAX deletions; the daemon runs passes on its loop
 * (nft_cut_start), one after the other until one finds no candidate
 * beyond what it deleted (at most NFT_CT_CUT_PASSES_MAX passes).
 */

/*
 * One pass on the event loop: the dump read in slices and the deletes
 * sent in chunks (never more than NFT_CT_SLICE_RECVS reads or one chunk
 * of deletes per loop turn), on a ctnetlink socket of the cut's own. p is
 * referenced until the pass ends. done(arg, 0, cut, more, NULL): cut
 * entries deleted (entries that ended meanwhile are not counted), more
 * when candidates were left for a next pass; done(arg, -1, cut, false,
 * why) on a dump or delete error, or no progress for NFT_ACK_TIMEOUT_MS.
 * done runs from the loop, never from inside nft_cut_start, and may
 * start the next pass. One pass at a time; nft_cut_abort() stops one
 * without calling done (a newer policy supersedes it). Free before n.
 */
struct nft_cut;
typedef void (*nft_cut_done_fn)(
    void *arg, int rc, size_t cut, bool more, const char *why);
struct nft_cut *nft_cut_new(
    struct nft *n, struct event_base *base, struct err *e);
void nft_cut_free(struct nft_cut *c);
bool nft_cut_busy(const struct nft_cut *c);
int nft_cut_start(struct nft_cut *c, struct policy *p, nft_cut_done_fn done,
    void *arg, struct err *e);
void nft_cut_abort(struct nft_cut *c);
/*
 * Every pass, waited for on a private event loop (tools and tests):
 * *cut (may be NULL) gets the total. -1 with e on an error or when flows
 * remain after the last pass (the others are cut anyway).
 */
int nft_cut_denied_flows(
    struct nft *n, struct policy *p, size_t *cut, struct err *e);

/*
 * Names an address was learned for (at most max, borrowed until the next
 * nft_* call that changes the mirror). Returns the number stored.
 */
size_t nft_learned_lookup(const struct nft *n, int family, const uint8_t *addr,
    const char **names, size_t max);
/*
 * A number that moves whenever nft_learned_lookup's answer for some
 * address may have lost a name (an element removed: expired, evicted,
 * cut, the mirror cleared; a name dropped from one). Names added do not
 * move it: what was learned stays learned until then.
 */
uint64_t nft_learned_gen(const struct nft *n);
/* When addr's learned lease ends (monotonic ms, nft_opts' clock); 0 when
 * it is not learned. */
uint64_t nft_learned_until(
    const struct nft *n, int family, const uint8_t *addr);
/* Moves as nft_learned_gen does, but not when an entry expires: a
 * verdict that holds until the entry's lease (nft_learned_until) lapses
 * with it, and an agent's many leases end every few milliseconds; nor,
 * with a forget hook (nft_on_forget), when names leave an entry: those
 * are told one by one instead. */
uint64_t nft_verdict_gen(const struct nft *n);
/* fn(arg) each time nft_verdict_gen moves, right after (the in-kernel
 * judge's verdicts are voided there: nfq_bpf.h). NULL: no one. */
void nft_on_verdict_gen(struct nft *n, void (*fn)(void *arg), void *arg);
/* fn(arg, name, family, addr) for each address of an answer
 * (nft_learn_submit) the moment the mirror holds it for name, before the
 * answer's done: the in-kernel judge is taught there (nfq.h,
 * nfq_teach). NULL: no one. */
void nft_on_learned(struct nft *n,
    void (*fn)(void *arg, const char *name, int family, const uint8_t *addr),
    void *arg);
/*
 * fn(arg, name, family, addr) for each name an entry loses before its
 * lease (the oldest of NFT_NAMES_PER_ADDR pushed out by a new one, the
 * entry evicted or removed), instead of moving nft_verdict_gen: the
 * in-kernel judge forgets what it was taught for that name and address
 * alone, not every verdict (names sharing a CDN's addresses push each
 * other out all day). Names a policy drops still move the generation
 * (a commit voids everything anyway). NULL: the generation moves.
 */
void nft_on_forget(struct nft *n,
    void (*fn)(void *arg, const char *name, int family, const uint8_t *addr),
    void *arg);
size_t nft_learned_count(const struct nft *n);
/* Elements of one family (4 or 6) in the mirror, and the cap per set. */
size_t nft_learned_count_family(const struct nft *n, int family);
size_t nft_learned_cap(const struct nft *n);
/* The longest lease a learned element gets under the policy in force
 * (seconds; the options' until the first apply). */
uint32_t nft_learned_ttl_max(const struct nft *n);
/*
 * How often renewal must run (ms) so that a lease of ttl_max_s seconds,
 * renewed while in use, never lapses between two runs: half the lease,
 * between NFT_RENEW_MS_MIN and NFT_RENEW_MS_MAX. Pure.
 */
#define NFT_RENEW_MS_MIN 500
#define NFT_RENEW_MS_MAX 10000
uint32_t nft_renew_interval_ms(uint32_t ttl_max_s);

/*
 * The resolver's UDP sockets for nft_selfcheck(), and where the datagrams
 * on them that are not the check's go: queries the sandbox sent once the
 * redirect was in force are handed over in arrival order, never dropped.
 * foreign may be NULL (they are then discarded; test drivers only).
 */
struct nft_selfcheck_io {
	int fd4; /* bound 127.0.0.1:dns_port, or -1 */
	int fd6; /* bound [::1]:dns_port, or -1 */
	void (*foreign)(void *arg, int family, const uint8_t *msg, size_t len,
	    const struct sockaddr *peer, socklen_t peerlen);
	void *arg;
};

/*
 * Startup self-check with real packets, after nft_apply_policy(), on
 * loopback only, so that it needs no route and nothing leaves the
 * namespace: for each family with a resolver socket, a datagram from an
 * unmarked socket to the family's loopback port 53 (127.0.0.1:53,
 * [::1]:53) must arrive on the resolver's port (the redirect works), and
 * one from a socket carrying the mark to a sink the check binds on a
 * loopback port 53 must arrive there and not on the resolver's port (the
 * exemption works). No step waits for something not to happen unless no
 * sink can be bound. io NULL (or both fds -1): the check binds the ports
 * itself (call before the resolver listens); IPv4 is then required and
 * IPv6 checked when the namespace has ::1. 0, or -1 with what failed.
 */
int nft_selfcheck(
    struct nft *n, const struct nft_selfcheck_io *io, struct err *e);

/* Per-decision counters of the filter chain (named nft counters). */
#define NFT_COUNTER_NAME_MAX 32
struct nft_counter {
	char name[NFT_COUNTER_NAME_MAX];
	uint64_t packets, bytes;
};
/* The names nft_read_counters() fills, in this order. */
#define NFT_NCOUNTERS 20
const char *nft_counter_name(size_t i);
int nft_read_counters(
    struct nft *n, struct nft_counter out[NFT_NCOUNTERS], struct err *e);

/*
 * 1 when table inet egressd exists, 0 when somebody removed it (another
 * root tool flushing the ruleset), -1 on error. The daemon checks this
 * periodically and re-applies its policy when the table is gone.
 */
int nft_table_present(struct nft *n, struct err *e);

/* Deletes table inet egressd (--teardown-on-exit). Absent table: 0. */
int nft_teardown(struct nft *n, struct err *e);

/* Parses "IP" or "IP/len" into p; 0/-1. For the daemon's option lists. */
int nft_parse_prefix(const char *s, struct policy_prefix *p, struct err *e);

#endif
