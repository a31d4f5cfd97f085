/*
 * nft_mirror: the learned mirror (nft_mirror.c).
 */
#ifndef EGRESSD_NFT_MIRROR_H
#define EGRESSD_NFT_MIRROR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_state.h"

/* The injected clock; the entry slot of an address (*slot NULL: none);
 * entries removed, cleared, counted into the stats gauge; limits sorted,
 * searched and merged; an entry learned or refreshed (nft_mirror_put). */
uint64_t nft_mirror_now(const struct nft *n);
uint32_t nft_mirror_hash32(int family, const uint8_t *a);
struct lent **nft_mirror_find(struct nft *n, int family, const uint8_t *a);
void nft_mirror_remove(struct nft *n, struct lent **pp);
/* learned_gen and verdict_gen move, and whoever asked is told
 * (nft_on_verdict_gen). */
void nft_mirror_gen_bump(struct nft *n);
void nft_mirror_clear(struct nft *n);
void nft_mirror_gauge(struct nft *n);
bool nft_mirror_lim_has(
    const struct nft_limit *v, size_t n, const struct nft_limit *x);
size_t nft_mirror_lim_norm(struct nft_limit *v, size_t n);
bool nft_mirror_lim_covered(
    const struct nft_limit *v, size_t n, const struct nft_limit *a, size_t na);
int nft_mirror_add_lim(
    struct lent *l, const struct nft_limit *lim, size_t nlim);
int nft_mirror_put(struct nft *n, int family, const uint8_t *a,
    uint64_t expires, const char *name, const struct nft_limit *lim,
    size_t nlim);

/* Learned and expiring within window_ms; *name: its newest name or NULL
 * (borrowed until the mirror changes). */
bool nft_expiring_(struct nft *n, int family, const uint8_t *addr,
    uint64_t window_ms, const char **name);
/* True when addr is in the learned mirror and not expired. */
bool nft_is_learned_(struct nft *n, int family, const uint8_t *addr);
/*
 * What the learned rules of the filter chain do with a NEW packet to
 * addr (l4proto, destination port; for protocols without ports any
 * value): 1 accept (plain element, or a limited one under default deny),
 * -1 deny (a limited element under default allow), 0 none matches.
 */
int nft_learned_verdict_(struct nft *n, int family, const uint8_t *addr,
    uint8_t l4proto, uint16_t port);

#endif
