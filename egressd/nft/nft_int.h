/*
 * nft_int: what the nft_*.c files share (not for other modules).
 */
#ifndef EGRESSD_NFT_INT_H
#define EGRESSD_NFT_INT_H

#include <stddef.h>
#include <linux/netlink.h>
#include <stdint.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"

/* nft.c internals used by nft_live.c. */
struct mnl_socket;
int nft_refresh_(
    struct nft *n, const struct nft_learn_addr *a, size_t na, struct err *e);
/* Learned and expiring within window_ms; *name: its newest name or NULL
 * (borrowed until the mirror changes). */
bool nft_expiring_(struct nft *n, int family, const uint8_t *addr,
    uint64_t window_ms, const char **name);
uint32_t nft_mark_(const struct nft *n);
const struct nft_opts *nft_opts_(const struct nft *n);
/* True when addr is in the learned mirror and not expired. */
bool nft_is_learned_(struct nft *n, int family, const uint8_t *addr);
/*
 * What the learned rules of the filter chain do with a NEW packet to
 * addr (l4proto, destination port; for protocols without ports any
 * value): 1 accept (plain element, or a limited one under default deny),
 * -1 deny (a limited element under default allow), 0 none matches.
 */
int nft_learned_verdict_(struct nft *n, int family, const uint8_t *addr,
    uint8_t l4proto, uint16_t port);
uint16_t nft_dns_port_(const struct nft *n);
uint32_t nft_ttl_clamp_(const struct nft *n, uint32_t ttl);
struct mnl_socket *nft_sock_(struct nft *n, uint32_t *seq, uint32_t *portid);
/*
 * Dumps the conntrack table over ctnetlink into cb (a libmnl callback,
 * arg its data). buf holds NFT_RECV_BUF bytes. When *seen (the callback's
 * entry count) passes NFT_CT_MAX_FLOWS the rest of the dump is drained so
 * the socket stays usable. 0/-1 with e.
 */
int nft_ct_dump_(struct nft *n, uint8_t *buf,
    int (*cb)(const struct nlmsghdr *, void *), void *arg, const size_t *seen,
    struct err *e);

/* Writes a ctnetlink dump request (every family) with seq into req
 * (MNL_SOCKET_BUFFER_SIZE bytes). */
void nft_ct_dump_request_(void *req, uint32_t seq);

/*
 * Conntrack work on the event loop (nft_ctdump.c): a ctnetlink socket of
 * its own, non-blocking, read in slices (NFT_CT_SLICE_RECVS reads per
 * loop turn); deletes go in chunks of NFT_CT_DEL_PER_SEND, one chunk per
 * turn. One piece of work at a time. end(arg, 0, NULL) when it is done,
 * end(arg, -1, why) when it failed, made no progress for
 * NFT_ACK_TIMEOUT_MS or lost messages (the socket is then closed, the
 * next start opens a fresh one); end is always called from the loop,
 * never from inside the start call, and may start the next piece.
 */
struct nft_ctd;
typedef void (*nft_ctd_end_fn)(void *arg, int rc, const char *why);
/* With room for the work's results: nresults zeroed elements of size
 * bytes (what a dump's entry callback collects, what a delete borrows),
 * owned by the ctd, at nft_ctd_results_(). */
struct nft_ctd *nft_ctd_new_(
    struct event_base *base, size_t nresults, size_t size, struct err *e);
void nft_ctd_free_(struct nft_ctd *c);
void *nft_ctd_results_(struct nft_ctd *c);
bool nft_ctd_busy_(const struct nft_ctd *c);
/* Stops the work under way; end is not called. */
void nft_ctd_abort_(struct nft_ctd *c);
/* Dumps conntrack: entry(nlh, entry_arg) (a libmnl callback) per entry. */
int nft_ctd_dump_(struct nft_ctd *c,
    int (*entry)(const struct nlmsghdr *, void *), void *entry_arg,
    nft_ctd_end_fn end, void *arg, struct err *e);
/* Deletes fl[0..n) (borrowed until end) by original tuple and CTA_ID;
 * *deleted counts the entries removed (ENOENT, ended meanwhile, is no
 * error and not counted). */
int nft_ctd_delete_(struct nft_ctd *c, const struct nft_ct_flow *fl, size_t n,
    size_t *deleted, nft_ctd_end_fn end, void *arg, struct err *e);

/*
 * Deletes the conntrack entry with f's original tuple (f->id 0: whichever
 * entry has it) and waits for the ack; none there is no error. 0/-1 with e.
 */
int nft_ct_forget_(struct nft *n, const struct nft_ct_flow *f, struct err *e);

/* The addresses of this namespace's interfaces (nft_ct.c). NULL with e
 * when getifaddrs fails or there are more than NFT_LOCAL_ADDRS_MAX. */
struct nft_locals;
struct nft_locals *nft_locals_load_(struct err *e);
void nft_locals_free_(struct nft_locals *lc);
/*
 * True when the conntrack entry nlh (a dump message) is a flow this
 * namespace started to a remote destination that really is its peer:
 * original source local, destination not local, not DNAT-ed (the DNS and
 * proxy redirects reach egressd, not dst), the reply coming from dst,
 * ct mark other than egressd's mark (its own flows). f gets the tuple,
 * CTA_ID and zone. TCP/UDP/ICMP/ICMPv6 only unless any_proto (then f's
 * ports are zero for other protocols).
 */
bool nft_ct_outbound_(const struct nlmsghdr *nlh, uint32_t mark,
    const struct nft_locals *lc, bool any_proto, struct nft_ct_flow *f);

/*
 * policy_match_addr() as the filter chain decides: for an IPv6 address
 * that spells an IPv4 one (NAT64, 6to4, mapped, compatible) the IPv4 deny
 * prefixes of each layer take part as IPv6 rules of that layer (the
 * builder's twins). tw caches the index over calls with the same p; NULL
 * tw = plain policy_match_addr(). *rule gets the deciding rule (for a
 * twin: the IPv4 deny rule).
 */
struct nft_twins;
/*
 * The rule lists of a snapshot in the order the filter chain judges them
 * (the first layer with a matching rule decides): the builder emits them
 * so and the twins index mirrors them, so both take them from here.
 */
enum nft_layer {
	NFT_L_ALWAYS_DENY,
	NFT_L_ALWAYS_ALLOW,
	NFT_L_INFRA,
	NFT_L_USER,
	NFT_L_COUNT
};
struct nft_layers {
	const struct policy_rule *r[NFT_L_COUNT]; /* borrowed from p */
	size_t n[NFT_L_COUNT];
};
void nft_layers_(const struct policy *p, struct nft_layers *out);

struct nft_twins *nft_twins_new_(void);
void nft_twins_free_(struct nft_twins *tw);
enum policy_action nft_twins_match_(struct nft_twins *tw,
    const struct policy *p, int family, const uint8_t *addr, unsigned proto,
    uint16_t port, const struct policy_rule **rule);

/* True when addr lies in the built-in internal (always denied) ranges:
 * special_addr_flags() & SPECIAL_DROP, what internal4/6 hold. */
bool nft_addr_internal_(int family, const uint8_t *addr);

#endif
