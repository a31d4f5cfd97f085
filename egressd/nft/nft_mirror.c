/*
 * nft_mirror: the learned-element mirror. One entry per learned element, in a
 * hash table that grows with it, and per family in a list from the most to
 * the least recently learned (the eviction order when a set is full).
 */

#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "egressd/proto/nft_err.h"
#include "egressd/base/sock.h"
#include "egressd/base/stats.h"
#include "util/coalesce.h"
#include "util/hash.h"
#include "util/now.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_state.h"

/* The injected clock, or the real one (nft_new). */
uint64_t
nft_mirror_now(const struct nft *n)
{
	return n->o.clock(n->o.clock_arg);
}

uint32_t
nft_mirror_hash32(int family, const uint8_t *a)
{
	uint32_t h = hash_fnv1a32(a, family == 4 ? 4 : 16);

	return h ^ (h >> 15);
}

static size_t
addr_hash(const struct nft *n, int family, const uint8_t *a)
{
	return nft_mirror_hash32(family, a) & (n->nbuckets - 1);
}

struct lent **
nft_mirror_find(struct nft *n, int family, const uint8_t *a)
{
	struct lent **pp = &n->buckets[addr_hash(n, family, a)];
	unsigned w = family == 4 ? 4 : 16;

	for (; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->family == family && memcmp((*pp)->addr, a, w) == 0)
			return pp;
	return pp; /* *pp == NULL: where to insert */
}

static struct lru *
lru_of(struct nft *n, int family)
{
	return &n->lru[family == 4 ? 0 : 1];
}

static void
lru_unlink(struct nft *n, struct lent *l)
{
	struct lru *q = lru_of(n, l->family);

	TAILQ_REMOVE(&q->q, l, order);
	q->n--;
}

static void
lru_push(struct nft *n, struct lent *l)
{
	struct lru *q = lru_of(n, l->family);

	TAILQ_INSERT_HEAD(&q->q, l, order);
	q->n++;
}

static void
lent_free(struct lent *l)
{
	unsigned i;

	for (i = 0; i < l->nnames; i++)
		free(l->names[i]);
	free(l->lim);
	free(l);
}

/* Names [0, k) of l go before their lease: the proxy's generation
 * moves, and the kernel's verdicts for them are forgotten one by one
 * (nft_on_forget), or all voided when no one follows them so. */
static void
mirror_names_gone(struct nft *n, const struct lent *l, unsigned k)
{
	unsigned i;

	if (n->forget_fn == NULL) {
		nft_mirror_gen_bump(n);
		return;
	}
	n->learned_gen++;
	for (i = 0; i < k; i++)
		n->forget_fn(n->forget_arg, l->names[i], l->family, l->addr);
}

/* l out of the mirror; the generations move (expired, or all cleared
 * by the caller: only the proxy's here, a verdict taught for it has
 * lapsed with its lease, or the caller moves both once). */
static void
mirror_unlink(struct nft *n, struct lent **pp, bool expired)
{
	struct lent *l = *pp;

	*pp = l->next;
	lru_unlink(n, l);
	if (expired)
		n->learned_gen++;
	else
		mirror_names_gone(n, l, l->nnames);
	lent_free(l);
	n->nlearned--;
}

void
nft_mirror_remove(struct nft *n, struct lent **pp)
{
	mirror_unlink(n, pp, false);
}

void
nft_mirror_clear(struct nft *n)
{
	bool any = false;
	size_t b;

	/* every entry at once: one move of the generations voids every
	 * verdict, no name is told one by one (nft_on_forget) */
	for (b = 0; b < n->nbuckets; b++)
		while (n->buckets[b] != NULL) {
			mirror_unlink(n, &n->buckets[b], true);
			any = true;
		}
	if (any)
		nft_mirror_gen_bump(n);
}

/* Doubles the hash table when chains get long; failure keeps the old. */
static void
mirror_grow(struct nft *n)
{
	size_t nb = n->nbuckets * 2, b;
	struct lent **nt, *l, *next;

	if (n->nlearned < n->nbuckets || nb > ((size_t)1 << 26))
		return;
	nt = calloc(nb, sizeof(*nt));
	if (nt == NULL)
		return;
	for (b = 0; b < n->nbuckets; b++)
		for (l = n->buckets[b]; l != NULL; l = next) {
			size_t h =
			    nft_mirror_hash32(l->family, l->addr) & (nb - 1);

			next = l->next;
			l->next = nt[h];
			nt[h] = l;
		}
	free(n->buckets);
	n->buckets = nt;
	n->nbuckets = nb;
}

void
nft_mirror_gauge(struct nft *n)
{
	if (n->st != NULL) {
		n->st->nft_learned_current = n->nlearned;
		n->st->nft_learned_set[0] = n->lru[0].n;
		n->st->nft_learned_set[1] = n->lru[1].n;
		n->st->nft_learned_capacity = n->cap;
	}
}

static bool
lim_eq(const struct nft_limit *a, const struct nft_limit *b)
{
	return a->plo == b->plo && a->phi == b->phi && a->lo == b->lo &&
	    a->hi == b->hi;
}

bool
nft_mirror_lim_has(
    const struct nft_limit *v, size_t n, const struct nft_limit *x)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (lim_eq(&v[i], x))
			return true;
	return false;
}

/* The sort key: the protocol range, then the port range. */
static uint64_t
lim_key(const struct nft_limit *l)
{
	return (uint64_t)l->plo << 48 | (uint64_t)l->phi << 32 |
	    (uint64_t)l->lo << 16 | l->hi;
}

static int
lim_cmp(const void *a, const void *b)
{
	return coalesce_cmp(lim_key(a), lim_key(b));
}

/* Port ranges of the same protocol range that overlap or touch merge. */
static bool
lim_absorb(void *kept, const void *next, void *arg)
{
	struct nft_limit *k = kept;
	const struct nft_limit *x = next;

	(void)arg;
	return lim_key(x) >> 32 == lim_key(k) >> 32 &&
	    coalesce_u16(&k->hi, x->lo, x->hi);
}

/*
 * Sorts and merges v in place: the kernel refuses an interval element
 * whose start or end lies inside another (EEXIST), so the limited
 * elements of one address are kept disjoint. Protocol ranges come from
 * one fixed partition (tcp, udp, icmp, the ranges between), so only port
 * ranges of the same protocol range need merging.
 */
size_t
nft_mirror_lim_norm(struct nft_limit *v, size_t n)
{
	return coalesce(v, n, sizeof(*v), lim_cmp, lim_absorb, NULL);
}

/* Every limit of a lies inside an element of v (v normalized). */
bool
nft_mirror_lim_covered(
    const struct nft_limit *v, size_t n, const struct nft_limit *a, size_t na)
{
	size_t i, j;

	for (i = 0; i < na; i++) {
		for (j = 0; j < n; j++)
			if (v[j].plo <= a[i].plo && v[j].phi >= a[i].phi &&
			    v[j].lo <= a[i].lo && v[j].hi >= a[i].hi)
				break;
		if (j == n)
			return false;
	}
	return true;
}

/* Adds the limits not held yet (at most NFT_ADDR_LIMITS_MAX), merged. */
int
nft_mirror_add_lim(struct lent *l, const struct nft_limit *lim, size_t nlim)
{
	struct nft_limit *nv;
	size_t i, cap;

	for (i = 0; i < nlim; i++) {
		if (nft_mirror_lim_covered(l->lim, l->nlim, &lim[i], 1) ||
		    l->nlim == NFT_ADDR_LIMITS_MAX)
			continue;
		if (l->nlim == l->limcap) {
			/* most names have a few: grow in small steps */
			cap = l->limcap ? 2 * l->limcap : 4;
			if (cap > NFT_ADDR_LIMITS_MAX)
				cap = NFT_ADDR_LIMITS_MAX;
			nv = realloc(l->lim, cap * sizeof(*nv));
			if (nv == NULL)
				return -1;
			l->lim = nv;
			l->limcap = cap;
		}
		l->lim[l->nlim++] = lim[i];
		l->nlim = nft_mirror_lim_norm(l->lim, l->nlim);
	}
	return 0;
}

/*
 * Creates or refreshes an entry (now the most recently learned); name
 * may be NULL. nlim == 0: the plain element, else limited elements (all
 * expiring at expires).
 */
int
nft_mirror_put(struct nft *n, int family, const uint8_t *a, uint64_t expires,
    const char *name, const struct nft_limit *lim, size_t nlim)
{
	struct lent **pp = nft_mirror_find(n, family, a), *l = *pp;
	unsigned i;

	if (l == NULL) {
		l = calloc(1, sizeof(*l));
		if (l == NULL)
			return -1;
		l->family = (uint8_t)family;
		memcpy(l->addr, a, family == 4 ? 4 : 16);
		*pp = l;
		n->nlearned++;
		lru_push(n, l);
		mirror_grow(n);
	} else {
		lru_unlink(n, l);
		lru_push(n, l);
	}
	if (expires > l->expires_ms)
		l->expires_ms = expires;
	if (nlim == 0 && expires > l->plain_ms)
		l->plain_ms = expires;
	if (nlim != 0) {
		if (l->lim_ms <= nft_mirror_now(n))
			l->nlim = 0; /* those expired in the kernel */
		if (expires > l->lim_ms)
			l->lim_ms = expires;
		if (nft_mirror_add_lim(l, lim, nlim) < 0)
			return -1;
	}
	if (name == NULL)
		return 0;
	for (i = 0; i < l->nnames; i++)
		if (strcmp(l->names[i], name) == 0) {
			/* the newest name is what the kernel's comments now
			 * carry (lplan_build keeps that true) */
			char *nm = l->names[i];

			memmove(&l->names[i], &l->names[i + 1],
			    (l->nnames - i - 1) * sizeof(l->names[0]));
			l->names[l->nnames - 1] = nm;
			return 0;
		}
	if (l->nnames == NFT_NAMES_PER_ADDR) {
		/* keep the newest names: they are what clients ask for now */
		mirror_names_gone(n, l, 1);
		free(l->names[0]);
		memmove(&l->names[0], &l->names[1],
		    (NFT_NAMES_PER_ADDR - 1) * sizeof(l->names[0]));
		l->nnames--;
	}
	/* a name the entry cannot hold could not be forgotten by name
	 * later: the caller teaches nothing for it (txn_settle) */
	if ((l->names[l->nnames] = strdup(name)) == NULL)
		return -1;
	l->nnames++;
	return 0;
}

size_t
nft_expire_tick(struct nft *n)
{
	uint64_t now = nft_mirror_now(n);
	struct lent **pp;
	size_t b, k = 0;

	for (b = 0; b < n->nbuckets; b++)
		for (pp = &n->buckets[b]; *pp != NULL;)
			if ((*pp)->expires_ms <= now) {
				mirror_unlink(n, pp, true);
				k++;
			} else
				pp = &(*pp)->next;
	nft_mirror_gauge(n);
	return k;
}

/* addr's entry, or NULL (lookups that change nothing). */
static const struct lent *
mirror_get(const struct nft *n, int family, const uint8_t *addr)
{
	const struct lent *l;

	if (family != 4 && family != 6)
		return NULL;
	for (l = n->buckets[addr_hash(n, family, addr)]; l != NULL; l = l->next)
		if (l->family == family &&
		    memcmp(l->addr, addr, family == 4 ? 4 : 16) == 0)
			return l;
	return NULL;
}

size_t
nft_learned_lookup(const struct nft *n, int family, const uint8_t *addr,
    const char **names, size_t max)
{
	const struct lent *l = mirror_get(n, family, addr);
	size_t i;

	if (l == NULL)
		return 0;
	for (i = 0; i < l->nnames && i < max; i++)
		names[i] = l->names[i];
	return i;
}

uint64_t
nft_learned_until(const struct nft *n, int family, const uint8_t *addr)
{
	const struct lent *l = mirror_get(n, family, addr);

	return l != NULL ? l->expires_ms : 0;
}

uint64_t
nft_learned_gen(const struct nft *n)
{
	return n->learned_gen;
}

void
nft_mirror_gen_bump(struct nft *n)
{
	n->learned_gen++;
	n->verdict_gen++;
	if (n->gen_moved != NULL)
		n->gen_moved(n->gen_arg);
}

uint64_t
nft_verdict_gen(const struct nft *n)
{
	return n->verdict_gen;
}

void
nft_on_verdict_gen(struct nft *n, void (*fn)(void *arg), void *arg)
{
	n->gen_moved = fn;
	n->gen_arg = arg;
}

void
nft_on_forget(struct nft *n,
    void (*fn)(void *arg, const char *name, int family, const uint8_t *addr),
    void *arg)
{
	n->forget_fn = fn;
	n->forget_arg = arg;
}

void
nft_on_learned(struct nft *n,
    void (*fn)(void *arg, const char *name, int family, const uint8_t *addr),
    void *arg)
{
	n->learned_fn = fn;
	n->learned_arg = arg;
}

size_t
nft_learned_count(const struct nft *n)
{
	return n->nlearned;
}

uint32_t
nft_learned_ttl_max(const struct nft *n)
{
	return n->ttl_max;
}

size_t
nft_learned_count_family(const struct nft *n, int family)
{
	return n->lru[family == 4 ? 0 : 1].n;
}

size_t
nft_learned_cap(const struct nft *n)
{
	return n->cap;
}

/* Entries expiring before now + window_ms (for nft_live.c). */
bool
nft_expiring_(struct nft *n, int family, const uint8_t *addr,
    uint64_t window_ms, const char **name)
{
	struct lent *l = *nft_mirror_find(n, family, addr);

	*name = NULL;
	if (l == NULL || l->expires_ms > nft_mirror_now(n) + window_ms)
		return false;
	/* the newest name, so the refreshed element keeps its comment */
	if (l->nnames != 0)
		*name = l->names[l->nnames - 1];
	return true;
}

bool
nft_is_learned_(struct nft *n, int family, const uint8_t *addr)
{
	struct lent *l = *nft_mirror_find(n, family, addr);

	return l != NULL && l->expires_ms > nft_mirror_now(n);
}

int
nft_learned_verdict_(struct nft *n, int family, const uint8_t *addr,
    uint8_t l4proto, uint16_t port)
{
	struct lent *l = *nft_mirror_find(n, family, addr);
	uint64_t now = nft_mirror_now(n);
	size_t i;

	if (l == NULL)
		return 0;
	if (l->plain_ms > now)
		return 1;
	if (l->lim_ms <= now || n->pol == NULL)
		return 0;
	for (i = 0; i < l->nlim; i++)
		if (l4proto >= l->lim[i].plo && l4proto <= l->lim[i].phi &&
		    port >= l->lim[i].lo && port <= l->lim[i].hi)
			return n->pol->default_action == POLICY_DENY ? 1 : -1;
	return 0;
}
