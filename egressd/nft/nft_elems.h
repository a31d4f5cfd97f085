/*
 * nft_elems: learned elements as set messages (nft_elems.c).
 */
#ifndef EGRESSD_NFT_ELEMS_H
#define EGRESSD_NFT_ELEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/nft/nft.h"

/* Learned elements add/refresh/remove into an existing batch under way. */
int nft_batch_add_learn_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, uint32_t ttl_min, uint32_t ttl_max, bool refresh, struct err *e);
int nft_batch_del_learn_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, struct err *e);
/* Only the hold elements of a (those with hold, no limits), added. */
int nft_batch_add_hold_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, uint32_t ttl_min, uint32_t ttl_max, struct err *e);

/* True when addr lies in the built-in internal (always denied) ranges:
 * special_addr_flags() & SPECIAL_DROP, what internal4/6 hold. */
bool nft_addr_internal_(int family, const uint8_t *addr);

#endif
