/*
 * nft_ct: cutting flows a policy now denies (nft_ct.c).
 */
#ifndef EGRESSD_NFT_NFT_CT_H
#define EGRESSD_NFT_NFT_CT_H

#include "egressd/nft/nft.h"

/*
 * Deletes the conntrack entry with f's original tuple (f->id 0: whichever
 * entry has it) and waits for the ack; none there is no error. 0/-1 with e.
 */
int nft_ct_forget(struct nft *n, const struct nft_ct_flow *f, struct err *e);

#endif
