/*
 * nft_err: the kernel's answers to an nftables batch, read and explained.
 *
 * Pure: netlink bytes and errnos in, a verdict and an operator's sentence
 * out; no socket. nft.c's synchronous batches feed every read into
 * nft_acks_feed() and report through nft_acks_result(), so a refusal reads
 * the same wherever it happens, and the detection of a kernel or runtime
 * with no or partial nftables (issue 19: "a clear refusal with the reason,
 * never a silent fail-open") is unit-tested with injected NLMSG_ERROR
 * messages (tests/unit/egressd/nft/test_nft_err.c): such a kernel cannot be
 * had in a test namespace.
 */
#ifndef EGRESSD_NFT_ERR_H
#define EGRESSD_NFT_ERR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

struct nlmsghdr;

/* Where an error surfaced. */
enum nft_err_where {
	NFT_ERR_SOCKET, /* socket(AF_NETLINK, NETLINK_NETFILTER) or bind */
	NFT_ERR_GET, /* a GET request (ENOENT there is an answer: absent) */
	NFT_ERR_BATCH, /* the batch as a whole (its begin message) */
	NFT_ERR_MSG, /* one message of the batch, label = its label */
};

/*
 * What errno err at where most likely means and what the operator can do,
 * as a sentence for an error message (static storage), or "" when there is
 * nothing to add beyond strerror. label: the refused message's label
 * ("NEWCHAIN nat_out", "NEWRULE filter_out #3 (...)"), or NULL.
 */
const char *nft_err_hint(enum nft_err_where where, const char *label, int err);

/*
 * The extended-ack text (NLMSGERR_ATTR_MSG, into msg) and bad-attribute
 * offset (NLMSGERR_ATTR_OFFS, -1 when absent) of one NLMSG_ERROR message
 * whose nlmsg_len bytes are valid.
 */
void nft_err_ext_ack(
    const struct nlmsghdr *nlh, char *msg, size_t msglen, int *offs);

/*
 * The acks of one batch in flight: begin = base, message i = base + 1 + i
 * (nft_batch_set_seq_). Caller-owned, no allocation.
 */
struct nft_acks {
	uint32_t base;
	size_t nmsgs;
	size_t acked;
	size_t bad; /* lowest refused message index, (size_t)-1 if none */
	int bad_errno;
	int bad_offs;
	int batch_errno; /* the batch as a whole refused; 0 if not */
	char kmsg[256]; /* the kernel's extended-ack text for bad/batch */
};

void nft_acks_init(struct nft_acks *a, uint32_t base, size_t nmsgs);

/*
 * One read's worth of netlink messages (len bytes of buf). Messages that
 * are not NLMSG_ERROR or whose sequence is not this batch's are ignored
 * (stale acks of an earlier batch). True once the batch is settled: every
 * message acked, or the batch refused as a whole.
 */
bool nft_acks_feed(struct nft_acks *a, const void *buf, size_t len);

/*
 * 0 when every message was accepted; -1 with e naming the refused message
 * (by bad_label: the caller's label of message a->bad, e.g.
 * nft_batch_msg_label(b, a->bad); a label rather than the batch keeps
 * this module below nft.h), the kernel's errno and words, and
 * nft_err_hint().
 */
int nft_acks_result(
    const struct nft_acks *a, const char *bad_label, struct err *e);

#endif
