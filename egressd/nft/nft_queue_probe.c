/*
 * nft_queue_probe: which queue verdict this kernel takes, tried with
 * scratch transactions (nft_build_queue_probe) that leave nothing behind.
 */

#include <string.h>

#include "egressd/nft/nft.h"
#include "egressd/nft/nft_state.h"

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

void
nft_set_queue(struct nft *n, enum nft_queue_kind k, uint16_t num,
    const uint16_t *ports, size_t nports)
{
	n->o.queue_kind = k;
	n->o.queue_num = num;
	n->o.nqueue_ports = nports < NFT_PORTS_MAX ? nports : NFT_PORTS_MAX;
	memcpy(n->o.queue_ports, ports,
	    n->o.nqueue_ports * sizeof(n->o.queue_ports[0]));
}
