/*
 * nft_batch: the batch buffer (nft_batch.c), messages and their labels.
 */
#ifndef EGRESSD_NFT_BATCH_H
#define EGRESSD_NFT_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"

struct nft_msgdesc {
	size_t off; /* of the nlmsghdr in buf */
	char label[NFT_LABEL_MAX];
};

/* buf holds begin, msgs[0..nmsgs), end once finished. */
struct nft_batch {
	uint8_t *buf;
	size_t len, cap;
	struct nft_msgdesc *msgs;
	size_t nmsgs, capmsgs;
	bool finished;
};

struct nft_batch *nft_batch_new_(void);
/* Room for one more message; returns where it starts or NULL. */
void *nft_batch_room_(struct nft_batch *b, struct err *e);
/* Accounts the message just built at the room pointer. */
int nft_batch_push_(struct nft_batch *b, const char *label, struct err *e);
int nft_batch_finish_(struct nft_batch *b, struct err *e);
/* The batch-begin message (then messages, then nft_batch_finish_). */
int nft_batch_begin_(struct nft_batch *b, struct err *e);
/* Rewrites sequence numbers: begin = base, message i = base + 1 + i,
 * end = base + 1 + nmsgs. */
void nft_batch_set_seq_(struct nft_batch *b, uint32_t base);

#endif
