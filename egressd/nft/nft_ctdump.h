/*
 * nft_ctdump: the conntrack dump and delete engine (nft_ctdump.c), a leaf
 * that reports through callbacks.
 */
#ifndef EGRESSD_NFT_NFT_CTDUMP_H
#define EGRESSD_NFT_NFT_CTDUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/netlink.h>

#include "egressd/nft/nft.h"

struct event_base;
struct mnl_socket;

/*
 * Dumps the conntrack table over ctnetlink on nl (blocking: the caller's
 * socket, with seq and portid) into cb (a libmnl callback,
 * arg its data). buf holds NFT_RECV_BUF bytes. When *seen (the callback's
 * entry count) passes NFT_CT_MAX_FLOWS the rest of the dump is drained so
 * the socket stays usable. 0/-1 with e.
 */
int nft_ctdump_wait(struct mnl_socket *nl, uint32_t seq, uint32_t portid,
    uint8_t *buf, int (*cb)(const struct nlmsghdr *, void *), void *arg,
    const size_t *seen, struct err *e);

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
typedef void (*nft_ctdump_end_fn)(void *arg, int rc, const char *why);
/* With room for the work's results: nresults zeroed elements of size
 * bytes (what a dump's entry callback collects, what a delete borrows),
 * owned by the ctd, at nft_ctdump_results(). */
struct nft_ctd *nft_ctdump_new(
    struct event_base *base, size_t nresults, size_t size, struct err *e);
void nft_ctdump_free(struct nft_ctd *c);
void *nft_ctdump_results(struct nft_ctd *c);
bool nft_ctdump_busy(const struct nft_ctd *c);
/* Stops the work under way; end is not called. */
void nft_ctdump_abort(struct nft_ctd *c);
/* Dumps conntrack: entry(nlh, entry_arg) (a libmnl callback) per entry. */
int nft_ctdump_dump(struct nft_ctd *c,
    int (*entry)(const struct nlmsghdr *, void *), void *entry_arg,
    nft_ctdump_end_fn end, void *arg, struct err *e);

/* Deletes fl[0..n) (borrowed until end) by original tuple and CTA_ID;
 * *deleted counts the entries removed (ENOENT, ended meanwhile, is no
 * error and not counted). */
int nft_ctdump_delete(struct nft_ctd *c, const struct nft_ct_flow *fl, size_t n,
    size_t *deleted, nft_ctdump_end_fn end, void *arg, struct err *e);

#endif
