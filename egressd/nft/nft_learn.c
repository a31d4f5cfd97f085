/*
 * nft_learn: learned elements added and refreshed, waited for (nft_learn,
 * nft_refresh_).
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
#include "egressd/nft/nft_learn.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_elems.h"
#include "egressd/nft/nft_state.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_sock.h"
#include "egressd/nft/nft_want.h"
#include "egressd/nft/nft_twins.h"

/* ---- learned ---- */

uint32_t
nft_learn_clamp(const struct nft *n, uint32_t ttl)
{
	if (ttl < n->ttl_min)
		ttl = n->ttl_min;
	if (ttl > n->ttl_max)
		ttl = n->ttl_max;
	return ttl == 0 ? 1 : ttl;
}

/*
 * The batch for unique addresses u[0..nu) (one element once: a repeated
 * delete would fail): new elements are added, known ones refreshed
 * (add;delete;add restarts their timeout on every kernel), and when a
 * set would pass n->cap its least recently learned elements that are not
 * part of this batch are evicted (removed from the mirror now, deleted in
 * the same transaction). Shorter TTLs never cut a lease short: u[i].ttl
 * may be raised to what is left of it.
 */
/* What nft_learn_build() gathers before it writes the batch. */
struct lbuild {
	struct nft_learn_addr *fresh, *old, *ev, *mg;
	struct limpool evlim, mpool;
	long *evat, *mgat, *oldat;
	struct nft_limit *want;
	size_t nf, no, nev, nmg, nfam[2];
};

static void
lbuild_clear(struct lbuild *lb)
{
	free(lb->fresh);
	free(lb->old);
	free(lb->ev);
	free(lb->evat);
	free(lb->evlim.v);
	free(lb->mg);
	free(lb->mgat);
	free(lb->oldat);
	free(lb->want);
	free(lb->mpool.v);
}

/*
 * old[no] (u, known as l) keeps disjoint limited elements: the new ones
 * merge with those it holds, and the ones merged away leave first (mg).
 */
static int
lbuild_merge(
    struct lbuild *lb, const struct nft_learn_addr *u, const struct lent *l)
{
	struct nft_limit *want = lb->want;
	size_t j, nw;

	memcpy(want, l->lim, l->nlim * sizeof(*want));
	memcpy(want + l->nlim, u->lim, u->nlim * sizeof(*want));
	nw = nft_mirror_lim_norm(want, l->nlim + u->nlim);
	if (nw > NFT_ADDR_LIMITS_MAX)
		nw = NFT_ADDR_LIMITS_MAX;
	if ((lb->oldat[lb->no] = nft_want_pool_add(&lb->mpool, want, nw)) < 0)
		return -1;
	lb->old[lb->no].nlim = nw;
	for (j = 0; j < l->nlim; j++)
		if (!nft_mirror_lim_has(want, nw, &l->lim[j]))
			break;
	if (j < l->nlim) {
		size_t ng = 0;
		struct nft_limit *g = want + NFT_ADDR_LIMITS_MAX;

		for (j = 0; j < l->nlim; j++)
			if (!nft_mirror_lim_has(want, nw, &l->lim[j]))
				g[ng++] = l->lim[j];
		lb->mg[lb->nmg] = *u;
		lb->mg[lb->nmg].nlim = ng;
		if ((lb->mgat[lb->nmg++] =
		            nft_want_pool_add(&lb->mpool, g, ng)) < 0)
			return -1;
	}
	return 0;
}

/* u[0..nu) into fresh (not in the mirror) and old (refreshed), pinned. */
static int
lbuild_sort(
    struct nft *n, struct lbuild *lb, struct nft_learn_addr *u, size_t nu)
{
	uint64_t now = nft_mirror_now(n), left, until;
	struct lent *l;
	size_t i;

	for (i = 0; i < nu; i++) {
		l = *nft_mirror_find(n, u[i].family, u[i].addr);
		if (l == NULL) {
			lb->fresh[lb->nf++] = u[i];
			lb->nfam[u[i].family == 4 ? 0 : 1]++;
			continue;
		}
		l->pin = n->pin_gen;
		until = u[i].nlim != 0 ? l->lim_ms : l->plain_ms;
		if (until > now) {
			left = (until - now + 999) / 1000;
			if (left > u[i].ttl)
				u[i].ttl = left > UINT32_MAX ? UINT32_MAX
				                             : (uint32_t)left;
		}
		lb->old[lb->no] = u[i];
		lb->oldat[lb->no] = -1;
		if (u[i].nlim != 0 && l->lim_ms > now && l->nlim != 0 &&
		    lbuild_merge(lb, &u[i], l) < 0)
			return -1;
		lb->no++;
	}
	/* the pool no longer moves */
	for (i = 0; i < lb->no; i++)
		if (lb->oldat[i] >= 0)
			lb->old[i].lim = lb->mpool.v + lb->oldat[i];
	for (i = 0; i < lb->nmg; i++)
		lb->mg[i].lim = lb->mpool.v + lb->mgat[i];
	return 0;
}

/* The least recently learned unpinned entries past n->cap, into ev. */
static int
lbuild_evict(struct nft *n, struct lbuild *lb)
{
	size_t i, f, over[2], nent = 0, nev = 0;
	struct lent *l, *next;

	for (f = 0; f < 2; f++) {
		over[f] = n->lru[f].n + lb->nfam[f] > n->cap
		    ? n->lru[f].n + lb->nfam[f] - n->cap
		    : 0;
		nev += over[f];
	}
	if (nev == 0)
		return 0;
	/* an evicted address leaves both sets */
	lb->ev = calloc(2 * nev, sizeof(*lb->ev));
	lb->evat = calloc(2 * nev, sizeof(*lb->evat));
	if (lb->ev == NULL || lb->evat == NULL)
		return -1;
	for (f = 0; f < 2; f++)
		for (l = TAILQ_LAST(&n->lru[f].q, lents);
		     l != NULL && over[f] > 0; l = next) {
			next = TAILQ_PREV(l, lents, order);
			if (l->pin == n->pin_gen)
				continue;
			lb->ev[lb->nev].family = l->family;
			memcpy(lb->ev[lb->nev].addr, l->addr, 16);
			/* it leaves the hold set too (no-op if not there) */
			lb->ev[lb->nev].hold =
			    n->o.queue_kind != NFT_QUEUE_NONE;
			lb->evat[lb->nev++] = -1;
			if (l->nlim != 0) {
				lb->ev[lb->nev] = lb->ev[lb->nev - 1];
				lb->ev[lb->nev].nlim = l->nlim;
				lb->evat[lb->nev] = nft_want_pool_add(
				    &lb->evlim, l->lim, l->nlim);
				if (lb->evat[lb->nev++] < 0)
					return -1;
			}
			nent++;
			over[f]--;
			nft_mirror_remove(
			    n, nft_mirror_find(n, l->family, l->addr));
		}
	for (i = 0; i < lb->nev; i++)
		if (lb->evat[i] >= 0)
			lb->ev[i].lim = lb->evlim.v + lb->evat[i];
	if (n->st != NULL)
		n->st->nft_learned_evicted += nent;
	return 0;
}

int
nft_learn_build(struct nft *n, struct nft_learn_addr *u, size_t nu,
    struct nft_batch **out, struct err *e)
{
	struct lbuild lb = {0};
	struct nft_batch *b = NULL;
	struct lent *l;
	size_t i;
	int rc = -1;

	*out = NULL;
	n->pin_gen++;
	for (i = 0; i < nu; i++)
		u[i].hold = nft_queue_held(&n->o, n->pol, u[i].name);
	lb.fresh = calloc(nu + 1, sizeof(*lb.fresh));
	lb.old = calloc(nu + 1, sizeof(*lb.old));
	lb.mg = calloc(nu + 1, sizeof(*lb.mg));
	lb.mgat = calloc(nu + 1, sizeof(*lb.mgat));
	lb.oldat = calloc(nu + 1, sizeof(*lb.oldat));
	lb.want = calloc(2 * NFT_ADDR_LIMITS_MAX, sizeof(*lb.want));
	if (lb.fresh == NULL || lb.old == NULL || lb.mg == NULL ||
	    lb.mgat == NULL || lb.oldat == NULL || lb.want == NULL ||
	    lbuild_sort(n, &lb, u, nu) < 0 || lbuild_evict(n, &lb) < 0 ||
	    (b = nft_batch_new_()) == NULL)
		goto out_nomem;
	if (nft_batch_begin_(b, e) < 0 ||
	    (lb.nev != 0 && nft_batch_del_learn_(b, lb.ev, lb.nev, e) < 0) ||
	    (lb.nmg != 0 && nft_batch_del_learn_(b, lb.mg, lb.nmg, e) < 0) ||
	    (lb.nf != 0 &&
	        nft_batch_add_learn_(b, lb.fresh, lb.nf, n->ttl_min, n->ttl_max,
	            false, e) < 0) ||
	    (lb.no != 0 &&
	        nft_batch_add_learn_(
	            b, lb.old, lb.no, n->ttl_min, n->ttl_max, true, e) < 0) ||
	    nft_batch_finish_(b, e) < 0)
		goto out;
	/* The mirror holds what the kernel will: merged limited elements
	 * now (a transaction built before this one's acks must not add an
	 * overlapping element); expiries and names when the acks came. */
	for (i = 0; i < lb.no; i++)
		if (lb.oldat[i] >= 0) {
			l = *nft_mirror_find(
			    n, lb.old[i].family, lb.old[i].addr);
			if (l != NULL) {
				l->nlim = 0;
				(void)nft_mirror_add_lim(
				    l, lb.old[i].lim, lb.old[i].nlim);
			}
		}
	*out = b;
	b = NULL;
	rc = 0;
	goto out;
out_nomem:
	err_set(e, "nft: out of memory");
out:
	nft_batch_free(b);
	lbuild_clear(&lb);
	nft_mirror_gauge(n);
	return rc;
}

int
nft_learn_check(const struct nft_learn_addr *a, size_t n_addrs, struct err *e)
{
	size_t i;

	if (n_addrs > NFT_LEARN_BATCH_MAX) {
		err_set(e, "nft: %zu addresses in one answer (max %d)", n_addrs,
		    NFT_LEARN_BATCH_MAX);
		return -1;
	}
	for (i = 0; i < n_addrs; i++)
		if (a[i].family != 4 && a[i].family != 6) {
			err_set(e, "nft: learned address %zu: bad family", i);
			return -1;
		}
	return 0;
}

/* Limits of one (name, family) in a learn call, computed once. */
struct lcache {
	const char *name;
	int family;
	bool plain, denied;
	struct nft_limit *lim;
	size_t nlim;
};

#define LCACHE_MAX 8 /* distinct (name, family) per learn call */

static const struct lcache *
lcache_get(
    struct nft *n, struct lcache *c, size_t *nc, const char *name, int family)
{
	size_t i;

	for (i = 0; i < *nc; i++)
		if (c[i].family == family &&
		    (c[i].name == name ||
		        (c[i].name != NULL && name != NULL &&
		            strcmp(c[i].name, name) == 0)))
			return &c[i];
	if (*nc == LCACHE_MAX)
		return NULL;
	c[*nc].name = name;
	c[*nc].family = family;
	c[*nc].lim = calloc(NFT_LIMITS_MAX, sizeof(*c[*nc].lim));
	if (c[*nc].lim == NULL)
		return NULL;
	c[*nc].nlim = nft_want_name_limits(
	    n->pol, name, family, &c[*nc].plain, &c[*nc].denied, c[*nc].lim);
	return &c[(*nc)++];
}

int
nft_learn(struct nft *n, const struct nft_learn_addr *a, size_t n_addrs,
    struct err *e)
{
	struct nft_learn_addr u[NFT_LEARN_BATCH_MAX];
	struct lcache cache[LCACHE_MAX];
	const struct lcache *lc;
	struct nft_batch *b = NULL;
	size_t i, j, nu = 0, nc = 0;
	uint64_t now;
	int rc = -1;

	if (!n->applied) {
		err_set(e, "nft: learn before the ruleset is applied");
		return -1;
	}
	if (nft_learn_check(a, n_addrs, e) < 0)
		return -1;
	for (i = 0; i < n_addrs; i++) {
		for (j = 0; j < nu; j++)
			if (u[j].family == a[i].family &&
			    memcmp(u[j].addr, a[i].addr,
			        a[i].family == 4 ? 4 : 16) == 0)
				break;
		if (j < nu) {
			if (a[i].ttl > u[j].ttl)
				u[j].ttl = a[i].ttl;
			continue;
		}
		/* which set: what the name may reach under the policy (a
		 * name it denies entirely is the resolver's business, as
		 * before limits existed: the plain set) */
		lc = lcache_get(n, cache, &nc, a[i].name, a[i].family);
		if (lc == NULL) {
			err_set(e, "nft: out of memory");
			goto out;
		}
		u[nu] = a[i];
		u[nu].lim = lc->plain || lc->denied ? NULL : lc->lim;
		u[nu].nlim = lc->plain || lc->denied ? 0 : lc->nlim;
		nu++;
	}
	rc = 0;
	if (nu == 0)
		goto out;
	rc = -1;
	if (nft_learn_build(n, u, nu, &b, e) < 0)
		goto out;
	if (nft_sock_send(n, b, STATS_NFT_OP_DYNAMIC_ADD, e) < 0)
		goto out;
	now = nft_mirror_now(n);
	for (i = 0; i < nu; i++)
		(void)nft_mirror_put(n, u[i].family, u[i].addr,
		    now + (uint64_t)nft_learn_clamp(n, u[i].ttl) * 1000,
		    u[i].name, u[i].lim, u[i].nlim);
	if (n->st != NULL)
		n->st->nft_learned += nu;
	nft_mirror_gauge(n);
	rc = 0;
out:
	nft_batch_free(b);
	for (i = 0; i < nc; i++)
		free(cache[i].lim);
	return rc;
}

int
nft_hold(struct nft *n, int family, const uint8_t *addr, struct err *e)
{
	struct nft_learn_addr r;
	struct nft_batch *b = NULL;
	struct lent *l;
	uint64_t now = nft_mirror_now(n);
	int rc = -1;

	if (n->o.queue_kind == NFT_QUEUE_NONE || !n->applied)
		return 0;
	memset(&r, 0, sizeof(r));
	r.family = (uint8_t)family;
	memcpy(r.addr, addr, family == 4 ? 4 : 16);
	r.hold = true;
	l = *nft_mirror_find(n, family, addr);
	r.ttl = l != NULL && l->expires_ms > now
	    ? (uint32_t)((l->expires_ms - now + 999) / 1000)
	    : n->ttl_min;
	if ((b = nft_batch_new_()) == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if (nft_batch_begin_(b, e) == 0 &&
	    nft_batch_add_hold_(b, &r, 1, n->ttl_min, n->ttl_max, e) == 0 &&
	    nft_batch_finish_(b, e) == 0 &&
	    nft_sock_send(n, b, STATS_NFT_OP_DYNAMIC_ADD, e) == 0)
		rc = 0;
	nft_batch_free(b);
	return rc;
}

/*
 * Used by nft_live.c: refresh entries to ttl seconds from now, each with
 * what all its names may reach under the policy in force (plain element,
 * limited elements or both), as one learn batch per NFT_LEARN_BATCH_MAX
 * records.
 */
int
nft_refresh_(
    struct nft *n, const struct nft_learn_addr *a, size_t na, struct err *e)
{
	struct nft_learn_addr *r = NULL;
	struct nft_limit *tmp = NULL, *want = NULL;
	struct limpool pool = {0};
	long *at = NULL;
	struct nft_batch *b = NULL;
	struct nft_twins *tw = nft_twins_new_();
	uint64_t now = nft_mirror_now(n);
	size_t i, j, k, nr = 0, nw;
	bool plain;
	int rc = -1;

	r = calloc(2 * na + 1, sizeof(*r));
	at = calloc(2 * na + 1, sizeof(*at));
	tmp = calloc(NFT_LIMITS_MAX, sizeof(*tmp));
	want = calloc(NFT_ADDR_LIMITS_MAX, sizeof(*want));
	if (tw == NULL || r == NULL || at == NULL || tmp == NULL ||
	    want == NULL)
		goto out_nomem;
	for (i = 0; i < na; i++) {
		struct lent *l = *nft_mirror_find(n, a[i].family, a[i].addr);
		const char *nm;

		if (l == NULL || n->pol == NULL)
			continue;
		nm = l->nnames ? l->names[l->nnames - 1] : NULL;
		nft_want_lent(l, n->pol, tw, now, &plain, want, &nw, tmp, NULL);
		if (plain) {
			nft_want_rec(&r[nr], l, a[i].ttl, nm);
			r[nr].hold = /* plain records only */
			    nft_want_held_name(&n->o, n->pol, l) != NULL;
			at[nr++] = -1;
		}
		if (nw != 0) {
			nft_want_rec(&r[nr], l, a[i].ttl, nm);
			r[nr].nlim = nw;
			if ((at[nr++] = nft_want_pool_add(&pool, want, nw)) < 0)
				goto out_nomem;
		}
	}
	for (i = 0; i < nr; i++)
		if (at[i] >= 0)
			r[i].lim = pool.v + at[i];
	for (i = 0; i < nr; i += k) {
		k = nr - i > NFT_LEARN_BATCH_MAX ? NFT_LEARN_BATCH_MAX : nr - i;
		/* both records of an address in one batch */
		if (i + k < nr && k > 1 &&
		    memcmp(r[i + k - 1].addr, r[i + k].addr, 16) == 0 &&
		    r[i + k - 1].family == r[i + k].family)
			k--;
		if (nft_build_learn(r + i, k, n->ttl_min, n->ttl_max, &b, e) <
		        0 ||
		    nft_sock_send(n, b, STATS_NFT_OP_REFRESH, e) < 0)
			goto out;
		nft_batch_free(b);
		b = NULL;
		now = nft_mirror_now(n);
		for (j = i; j < i + k; j++)
			(void)nft_mirror_put(n, r[j].family, r[j].addr,
			    now + (uint64_t)nft_learn_clamp(n, r[j].ttl) * 1000,
			    NULL, r[j].lim, r[j].nlim);
	}
	rc = 0;
	goto out;
out_nomem:
	err_set(e, "nft: out of memory");
out:
	nft_twins_free_(tw);
	nft_batch_free(b);
	free(r);
	free(at);
	free(tmp);
	free(want);
	free(pool.v);
	return rc;
}

uint32_t
nft_ttl_clamp_(const struct nft *n, uint32_t ttl)
{
	return nft_learn_clamp(n, ttl);
}
