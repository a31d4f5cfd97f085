/*
 * nft_want: what a learned entry should hold under a policy (nft_want.c).
 */
#ifndef EGRESSD_NFT_WANT_H
#define EGRESSD_NFT_WANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_state.h"

struct nft_twins;

/* A growable pool of limits that learn records point into. */
struct limpool {
	struct nft_limit *v;
	size_t n, cap;
};

/* Appends lim[0..n) to the pool: the offset, -1 when out of memory.
 * nft_want_name_limits: what name may reach under p (plain, denied, or
 * limits); nft_want_lent: what l should hold under p, and which of its
 * names p still allows (alive bits); nft_want_rec: a learn record of l. */
long nft_want_pool_add(
    struct limpool *lp, const struct nft_limit *lim, size_t n);
size_t nft_want_name_limits(const struct policy *p, const char *name,
    int family, bool *plain, bool *denied, struct nft_limit *lim);
void nft_want_lent(const struct lent *l, const struct policy *p,
    struct nft_twins *tw, uint64_t now, bool *plain, struct nft_limit *lim,
    size_t *nlim, struct nft_limit *tmp, unsigned *alive);
void nft_want_rec(struct nft_learn_addr *r, const struct lent *l, uint32_t ttl,
    const char *name);
uint32_t nft_want_left_s(uint64_t until, uint64_t now);
/* The first name of l that the proxy must see under o and p
 * (nft_queue_held): its addresses go to the hold sets. NULL: none. */
const char *nft_want_held_name(
    const struct nft_opts *o, const struct policy *p, const struct lent *l);

#endif
