/*
 * nft_ctmsg: conntrack as ctnetlink messages (nft_ctmsg.c): a dump
 * request written, a dump entry read into a flow.
 */
#ifndef EGRESSD_NFT_NFT_CTMSG_H
#define EGRESSD_NFT_NFT_CTMSG_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/netlink.h>

#include "egressd/nft/nft.h"

/* Writes a ctnetlink dump request (every family) with seq into req
 * (MNL_SOCKET_BUFFER_SIZE bytes). */
void nft_ctmsg_dump_request(void *req, uint32_t seq);

/* The addresses of this namespace's interfaces (nft_ct.c). NULL with e
 * when getifaddrs fails or there are more than NFT_LOCAL_ADDRS_MAX. */
struct nft_locals;
struct nft_locals *nft_ctmsg_locals_load(struct err *e);
void nft_ctmsg_locals_free(struct nft_locals *lc);
/*
 * True when the conntrack entry nlh (a dump message) is a flow this
 * namespace started to a remote destination that really is its peer:
 * original source local, destination not local, not DNAT-ed (the DNS and
 * proxy redirects reach egressd, not dst), the reply coming from dst,
 * ct mark other than egressd's mark (its own flows). f gets the tuple,
 * CTA_ID and zone. TCP/UDP/ICMP/ICMPv6 only unless any_proto (then f's
 * ports are zero for other protocols).
 */
bool nft_ctmsg_outbound(const struct nlmsghdr *nlh, uint32_t mark,
    const struct nft_locals *lc, bool any_proto, struct nft_ct_flow *f);

#endif
