/*
 * nft_queue_probe: which queue verdict this kernel takes, tried with
 * scratch transactions (nft_build_queue_probe) that leave nothing behind.
 */

#include "egressd/nft/nft.h"

/* Sends the probe of kind k: 0 when the kernel took the rule. */
static int
probe_one(struct nft *n, enum nft_queue_kind k, uint16_t num, struct err *e)
{
	struct nft_batch *b;
	int rc;

	if (nft_build_queue_probe(k, num, &b, e) < 0)
		return -1;
	rc = nft_send_batch(n, b, e);
	nft_batch_free(b);
	return rc;
}

enum nft_queue_kind
nft_queue_probe(struct nft *n, uint16_t num, struct err *why)
{
	struct err e1 = {""}, e2 = {""};

	if (probe_one(n, NFT_QUEUE_NATIVE, num, &e1) == 0)
		return NFT_QUEUE_NATIVE;
	if (probe_one(n, NFT_QUEUE_COMPAT, num, &e2) == 0)
		return NFT_QUEUE_COMPAT;
	err_set(
	    why, "neither nft queue (%s) nor xt NFQUEUE (%s)", e1.msg, e2.msg);
	return NFT_QUEUE_NONE;
}
