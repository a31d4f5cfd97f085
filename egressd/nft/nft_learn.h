/*
 * nft_learn: learning, waited for (nft_learn.c).
 */
#ifndef EGRESSD_NFT_LEARN_H
#define EGRESSD_NFT_LEARN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/nft/nft.h"

/* A TTL clamped to the options' bounds; the batch adding u[0..nu) (new,
 * refreshed, evicted past the cap); a[0..n_addrs) checked (0/-1 with e). */
uint32_t nft_learn_clamp(const struct nft *n, uint32_t ttl);
int nft_learn_build(struct nft *n, struct nft_learn_addr *u, size_t nu,
    struct nft_batch **out, struct err *e);
int nft_learn_check(
    const struct nft_learn_addr *a, size_t n_addrs, struct err *e);

int nft_refresh_(
    struct nft *n, const struct nft_learn_addr *a, size_t na, struct err *e);
uint32_t nft_ttl_clamp_(const struct nft *n, uint32_t ttl);

#endif
