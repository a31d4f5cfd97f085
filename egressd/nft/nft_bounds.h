/*
 * nft_bounds: the nft module's internal bounds (the public ones are in nft.h).
 */
#ifndef EGRESSD_NFT_BOUNDS_H
#define EGRESSD_NFT_BOUNDS_H

/* Internal bounds (the public ones are in nft.h). */
#define NFT_MSG_ROOM 65536 /* free bytes guaranteed before each message */
#define NFT_LABEL_MAX 64 /* bytes of a message label */
#define NFT_MIRROR_BUCKETS 4096 /* hash buckets of the learned mirror */
#define NFT_RCVBUF_PER_MSG 1024 /* skb truesize of one ack, roughly */
#define NFT_RCVBUF_MIN (1u << 20) /* netlink receive buffer floor */
#define NFT_RECV_BUF (1u << 16) /* one netlink read */
#define NFT_CT_MAX_FLOWS 262144 /* conntrack entries read per dump */
#define NFT_RENEW_MAX 4096 /* addresses refreshed per renew call */
#define NFT_CT_DEL_PER_SEND 64 /* conntrack deletes per sendto */
#define NFT_CT_DEL_MSG_MAX 256 /* bytes of one conntrack delete */
#define NFT_LOCAL_ADDRS_MAX 256 /* local addresses considered */
#define NFT_SELFCHECK_SINK_TRIES 4 /* random 127/8 sink addresses tried */
#define NFT_SELFCHECK_BUF 65536 /* one datagram read by the self-check */
#define NFT_DESC_LINE_MAX 4096 /* one decoded rule */
#define NFT_SETNAME_MAX 32 /* generated set names */
#define NFT_LIMIT_BURST 10 /* kernel log burst for drops */
#define NFT_LIMITED_PER_ADDR 4 /* limited set size: x the learned set's */
#define NFT_USERDATA_MAX 256 /* kernel's NFT_USERDATA_MAXLEN per element */
#define NFT_COMMENT_NAME_MAX 240 /* names kept as a plain element comment */
#define NFT_PACKED_NAME_MAX 170 /* a 253-byte name, 3 symbols in 2 bytes */
#define NFT_UDATA_PACKED_NAME 0xe5 /* element userdata record: packed name */

#endif
