/*
 * nft_batch: the batch buffer. Messages built in place, each labelled for
 * error reports, begin and end around them; sequence numbers set at send.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "egressd/base/defaults.h"
#include "util/addr.h"
#include "util/coalesce.h"
#include "egressd/proto/special_ranges.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_bounds.h"

struct nft_batch *
nft_batch_new_(void)
{
	return calloc(1, sizeof(struct nft_batch));
}

void
nft_batch_free(struct nft_batch *b)
{
	if (b == NULL)
		return;
	free(b->buf);
	free(b->msgs);
	free(b);
}

void *
nft_batch_room_(struct nft_batch *b, struct err *e)
{
	size_t ncap;
	uint8_t *nb;

	if (b->len + NFT_MSG_ROOM > b->cap) {
		ncap = b->cap == 0 ? 4 * NFT_MSG_ROOM : b->cap * 2;
		if (ncap > NFT_BATCH_MAX + NFT_MSG_ROOM) {
			err_set(e, "nft batch exceeds %u bytes", NFT_BATCH_MAX);
			return NULL;
		}
		nb = realloc(b->buf, ncap);
		if (nb == NULL) {
			err_set(e, "nft batch: out of memory");
			return NULL;
		}
		/* Zeroed so that padding bytes are deterministic (goldens). */
		memset(nb + b->cap, 0, ncap - b->cap);
		b->buf = nb;
		b->cap = ncap;
	}
	return b->buf + b->len;
}

int
nft_batch_push_(struct nft_batch *b, const char *label, struct err *e)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)(b->buf + b->len);
	struct nft_msgdesc *nm;
	size_t ncap;

	if (b->nmsgs == b->capmsgs) {
		ncap = b->capmsgs == 0 ? 64 : b->capmsgs * 2;
		nm = realloc(b->msgs, ncap * sizeof(*nm));
		if (nm == NULL) {
			err_set(e, "nft batch: out of memory");
			return -1;
		}
		b->msgs = nm;
		b->capmsgs = ncap;
	}
	if (nlh->nlmsg_len > NFT_MSG_ROOM) {
		/* Cannot happen with the chunking below; never overrun. */
		err_set(e, "nft batch: message %s too large", label);
		return -1;
	}
	nm = &b->msgs[b->nmsgs++];
	nm->off = b->len;
	snprintf(nm->label, sizeof(nm->label), "%s", label);
	b->len += NLMSG_ALIGN(nlh->nlmsg_len);
	if (b->len > NFT_BATCH_MAX) {
		err_set(e, "nft batch exceeds %u bytes", NFT_BATCH_MAX);
		return -1;
	}
	return 0;
}

int
nft_batch_begin_(struct nft_batch *b, struct err *e)
{
	void *p = nft_batch_room_(b, e);

	if (p == NULL)
		return -1;
	nftnl_batch_begin(p, 0);
	b->len += NLMSG_ALIGN(((struct nlmsghdr *)p)->nlmsg_len);
	return 0;
}

int
nft_batch_finish_(struct nft_batch *b, struct err *e)
{
	void *p = nft_batch_room_(b, e);

	if (p == NULL)
		return -1;
	nftnl_batch_end(p, 0);
	b->len += NLMSG_ALIGN(((struct nlmsghdr *)p)->nlmsg_len);
	b->finished = true;
	nft_batch_set_seq_(b, 1);
	return 0;
}

void
nft_batch_set_seq_(struct nft_batch *b, uint32_t base)
{
	struct nlmsghdr *nlh;
	size_t off = 0, i = 0;

	while (off < b->len) {
		nlh = (struct nlmsghdr *)(b->buf + off);
		nlh->nlmsg_seq = base + (uint32_t)i;
		off += NLMSG_ALIGN(nlh->nlmsg_len);
		i++;
	}
}

const uint8_t *
nft_batch_data(const struct nft_batch *b, size_t *len)
{
	*len = b->len;
	return b->buf;
}

size_t
nft_batch_nmsgs(const struct nft_batch *b)
{
	return b->nmsgs;
}

const char *
nft_batch_msg_label(const struct nft_batch *b, size_t i)
{
	return i < b->nmsgs ? b->msgs[i].label : "?";
}
