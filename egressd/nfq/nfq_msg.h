/*
 * nfq_msg: the nfnetlink_queue messages egressd sends and reads, built
 * and parsed with libmnl alone (docs/decisions.md: no
 * libnetfilter_queue). Pure: buffers in, bytes or a struct out; no
 * socket. The formats are the kernel's uapi
 * (linux/netfilter/nfnetlink_queue.h): NFQNL_MSG_CONFIG (bind a queue,
 * copy whole packets, its length), NFQNL_MSG_PACKET (one queued packet:
 * its id, mark and bytes), NFQNL_MSG_VERDICT (the verdict on one id,
 * with the packet mark to set).
 */
#ifndef EGRESSD_NFQ_MSG_H
#define EGRESSD_NFQ_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Room for one config or verdict message. */
#define NFQ_MSG_SMALL 128

struct nlmsghdr;

/* One queued packet; payload points into the message. */
struct nfq_pkt {
	uint16_t queue; /* res_id of the message */
	uint32_t id;
	uint16_t hw_proto; /* host order */
	uint8_t hook;
	bool has_mark;
	uint32_t mark;
	const uint8_t *payload;
	size_t len;
	bool truncated; /* the kernel copied less than the packet */
};

/*
 * The config message that binds queue to this socket, copies packets
 * whole (up to copy_range bytes) and holds at most maxlen packets
 * waiting for a verdict; flags (NFQA_CFG_F_*) are set under the same
 * mask (0: none; never NFQA_CFG_F_FAIL_OPEN). Returns its length.
 */
size_t nfq_msg_bind(void *buf, size_t cap, uint16_t queue, uint32_t seq,
    uint32_t copy_range, uint32_t maxlen, uint32_t flags);
/* The flags of a bound queue: those in mask set as in flags (never
 * NFQA_CFG_F_FAIL_OPEN). */
size_t nfq_msg_flags(void *buf, size_t cap, uint16_t queue, uint32_t seq,
    uint32_t flags, uint32_t mask);
/* NFQNL_CFG_CMD_UNBIND of queue. */
size_t nfq_msg_unbind(void *buf, size_t cap, uint16_t queue, uint32_t seq);
/* The verdict (NF_ACCEPT, NF_DROP, NF_REPEAT) on packet id of queue;
 * mark != 0 sets the packet's mark with it. */
size_t nfq_msg_verdict(void *buf, size_t cap, uint16_t queue, uint32_t id,
    uint32_t verdict, uint32_t mark);
/* A NFQNL_MSG_PACKET: 0, or -1 with e (another type, no header, no
 * payload). */
int nfq_msg_parse(
    const struct nlmsghdr *nlh, struct nfq_pkt *out, struct err *e);

#endif
