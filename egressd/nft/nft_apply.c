/*
 * nft_apply: a policy snapshot put in force. The learned elements planned
 * against it (kept, dropped, re-limited), the table built and sent in one
 * batch with them, the mirror committed only when the kernel took it.
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
#include "egressd/nft/nft_state.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_sock.h"
#include "egressd/nft/nft_learnq.h"
#include "egressd/nft/nft_want.h"
#include "egressd/nft/nft_twins.h"

/* ---- policy ---- */

/* One change to the learned elements of an entry, kept for the mirror. */
struct lchange {
	struct lent *l;
	bool plain;
	long lim_at; /* in the pool */
	size_t nlim;
	unsigned alive; /* the names kept (bit i: names[i]) */
	bool names_only; /* the kernel's elements stay as they are */
};

struct lplan {
	struct nft_learn_addr *drop, *add, *hold;
	size_t ndrop, nadd, nhold;
	struct lchange *ch;
	size_t nch;
	struct limpool pool;
	long *drop_at, *add_at; /* pool offsets until the pool stops moving */
};

static void
lplan_clear(struct lplan *pl)
{
	free(pl->drop);
	free(pl->add);
	free(pl->hold);
	free(pl->ch);
	free(pl->pool.v);
	free(pl->drop_at);
	free(pl->add_at);
	memset(pl, 0, sizeof(*pl));
}

/* Scratch of lplan_build(): limits wanted, gone and fresh per entry. */
struct lscratch {
	struct nft_limit *want, *tmp, *gone, *fresh;
	size_t nw, ng, nf;
	bool wplain;
};

/*
 * The records of an entry that changes: the plain element dropped or
 * added, limited elements gone and fresh, and what the mirror keeps.
 */
static int
lplan_record(struct lplan *pl, struct lent *l, const struct lscratch *sc,
    bool cplain, bool recomment, uint32_t ttl, const char *nm, unsigned alive)
{
	if (cplain && (!sc->wplain || recomment))
		nft_want_rec(&pl->drop[pl->ndrop++], l, 0, NULL);
	if (sc->wplain && (!cplain || recomment))
		nft_want_rec(&pl->add[pl->nadd++], l, ttl, nm);
	if (sc->ng != 0) {
		pl->drop_at[pl->ndrop] =
		    nft_want_pool_add(&pl->pool, sc->gone, sc->ng);
		if (pl->drop_at[pl->ndrop] < 0)
			return -1;
		nft_want_rec(&pl->drop[pl->ndrop], l, 0, NULL);
		pl->drop[pl->ndrop++].nlim = sc->ng;
	}
	if (sc->nf != 0) {
		pl->add_at[pl->nadd] =
		    nft_want_pool_add(&pl->pool, sc->fresh, sc->nf);
		if (pl->add_at[pl->nadd] < 0)
			return -1;
		nft_want_rec(&pl->add[pl->nadd], l, ttl, nm);
		pl->add[pl->nadd++].nlim = sc->nf;
	}
	pl->ch[pl->nch].l = l;
	pl->ch[pl->nch].alive = alive;
	pl->ch[pl->nch].plain = sc->wplain;
	pl->ch[pl->nch].nlim = sc->nw;
	pl->ch[pl->nch].lim_at =
	    sc->nw ? nft_want_pool_add(&pl->pool, sc->want, sc->nw) : 0;
	if (pl->ch[pl->nch].lim_at < 0)
		return -1;
	pl->nch++;
	return 0;
}

/* One learned entry re-judged under p into pl. */
static int
lplan_entry(struct lplan *pl, struct lent *l, const struct policy *p,
    struct nft_twins *tw, uint64_t now, struct lscratch *sc)
{
	const char *nm = NULL;
	uint32_t ttl = nft_want_left_s(l->expires_ms, now);
	size_t i, ncur = l->lim_ms > now ? l->nlim : 0;
	unsigned alive, all;
	bool recomment, cplain;
	int top;

	nft_want_lent(
	    l, p, tw, now, &sc->wplain, sc->want, &sc->nw, sc->tmp, &alive);
	all = l->nnames ? (1u << l->nnames) - 1 : 0;
	for (top = (int)l->nnames - 1; top >= 0 && !(alive & (1u << top));
	     top--)
		;
	if (top >= 0)
		nm = l->names[top];
	/* The kernel's comments name the newest name (what a restart adopts
	 * the elements under): when p denies it but keeps the address for
	 * an older one, the elements kept are re-added under that one, else
	 * a restart would prune what p allows. */
	recomment = top >= 0 && top != (int)l->nnames - 1;
	cplain = l->plain_ms > now;
	for (i = sc->ng = 0; i < ncur; i++)
		if (recomment ||
		    !nft_mirror_lim_has(sc->want, sc->nw, &l->lim[i]))
			sc->gone[sc->ng++] = l->lim[i];
	for (i = sc->nf = 0; i < sc->nw; i++)
		if (recomment ||
		    !nft_mirror_lim_has(l->lim, ncur, &sc->want[i]))
			sc->fresh[sc->nf++] = sc->want[i];
	if (cplain == sc->wplain && sc->ng == 0 && sc->nf == 0 && !recomment) {
		if (alive == all || top < 0)
			return 0;
		/* only names leave: the mirror forgets them */
		pl->ch[pl->nch].l = l;
		pl->ch[pl->nch].alive = alive;
		pl->ch[pl->nch++].names_only = true;
		return 0;
	}
	return lplan_record(
	    pl, l, sc, cplain, recomment, ttl, nm, top >= 0 ? alive : all);
}

/* A plain entry with a name p holds (nft_queue_held): into the hold
 * sets for the rest of its lease. Names p no longer holds leave nothing
 * to remove: a held address only keeps the proxy path. */
static void
lplan_hold(struct nft *n, struct lplan *pl, struct lent *l,
    const struct policy *p, uint64_t now, bool plain)
{
	const char *name;

	if (!plain || (name = nft_want_held_name(&n->o, p, l)) == NULL)
		return;
	nft_want_rec(
	    &pl->hold[pl->nhold], l, nft_want_left_s(l->expires_ms, now), name);
	pl->hold[pl->nhold++].hold = true;
}

/*
 * Re-judges every learned entry under p: what leaves the kernel (drop),
 * what enters it (add, with the entry's remaining lease), and what the
 * mirror holds afterwards (ch).
 */
static int
lplan_build(struct nft *n, const struct policy *p, struct nft_twins *tw,
    struct lplan *pl)
{
	struct lscratch sc;
	uint64_t now = nft_mirror_now(n);
	size_t bkt, i;
	struct lent *l;
	int rc = -1;

	memset(&sc, 0, sizeof(sc));
	memset(pl, 0, sizeof(*pl));
	pl->drop = calloc(2 * n->nlearned + 1, sizeof(*pl->drop));
	pl->add = calloc(2 * n->nlearned + 1, sizeof(*pl->add));
	pl->hold = calloc(n->nlearned + 1, sizeof(*pl->hold));
	pl->drop_at = calloc(2 * n->nlearned + 1, sizeof(*pl->drop_at));
	pl->add_at = calloc(2 * n->nlearned + 1, sizeof(*pl->add_at));
	pl->ch = calloc(n->nlearned + 1, sizeof(*pl->ch));
	sc.want = calloc(NFT_ADDR_LIMITS_MAX, sizeof(*sc.want));
	sc.tmp = calloc(NFT_LIMITS_MAX, sizeof(*sc.tmp));
	sc.gone = calloc(2 * NFT_ADDR_LIMITS_MAX, sizeof(*sc.gone));
	if (pl->drop == NULL || pl->add == NULL || pl->hold == NULL ||
	    pl->ch == NULL || pl->drop_at == NULL || pl->add_at == NULL ||
	    sc.want == NULL || sc.tmp == NULL || sc.gone == NULL)
		goto out;
	sc.fresh = sc.gone + NFT_ADDR_LIMITS_MAX;
	for (bkt = 0; bkt < n->nbuckets; bkt++)
		for (l = n->buckets[bkt]; l != NULL; l = l->next) {
			if (lplan_entry(pl, l, p, tw, now, &sc) < 0)
				goto out;
			lplan_hold(n, pl, l, p, now, sc.wplain);
		}
	/* the pool no longer moves: point the records into it */
	for (i = 0; i < pl->ndrop; i++)
		if (pl->drop[i].nlim != 0)
			pl->drop[i].lim = pl->pool.v + pl->drop_at[i];
	for (i = 0; i < pl->nadd; i++)
		if (pl->add[i].nlim != 0)
			pl->add[i].lim = pl->pool.v + pl->add_at[i];
	rc = 0;
out:
	free(sc.want);
	free(sc.tmp);
	free(sc.gone);
	return rc;
}

/* The batch is in force: the mirror follows the plan. */
static void
lplan_commit(struct nft *n, const struct lplan *pl)
{
	uint64_t now = nft_mirror_now(n);
	struct lent **pp;
	size_t i, b;

	for (i = 0; i < pl->nch; i++) {
		struct lent *l = pl->ch[i].l;
		unsigned j, k;

		for (j = k = 0; j < l->nnames; j++)
			if (pl->ch[i].alive & (1u << j))
				l->names[k++] = l->names[j];
			else
				free(l->names[j]);
		if (k != l->nnames)
			nft_mirror_gen_bump(n); /* names dropped */
		l->nnames = k;
		if (pl->ch[i].names_only)
			continue;
		if (!pl->ch[i].plain)
			l->plain_ms = 0;
		else if (l->plain_ms <= now)
			l->plain_ms = l->expires_ms;
		if (pl->ch[i].nlim == 0) {
			l->lim_ms = 0;
			l->nlim = l->limcap = 0;
			free(l->lim);
			l->lim = NULL;
		} else {
			l->nlim = 0;
			if (nft_mirror_add_lim(l, pl->pool.v + pl->ch[i].lim_at,
			        pl->ch[i].nlim) < 0)
				l->nlim = 0;
			l->lim_ms = l->expires_ms;
		}
		l->gone = !pl->ch[i].plain && pl->ch[i].nlim == 0;
	}
	for (b = 0; b < n->nbuckets; b++)
		for (pp = &n->buckets[b]; *pp != NULL;)
			if ((*pp)->gone)
				nft_mirror_remove(n, pp);
			else
				pp = &(*pp)->next;
}

int
nft_apply_policy(struct nft *n, struct policy *p, struct err *e)
{
	struct names chains = {0}, sets = {0};
	struct nft_kstate ks;
	struct nft_batch *b = NULL;
	struct lplan plan;
	struct nft_twins *tw = NULL;
	int ex, rc = -1;

	memset(&ks, 0, sizeof(ks));
	memset(&plan, 0, sizeof(plan));
	/* Answers judged under the old policy reach the kernel first, so
	 * this batch re-judges them too (their waiters are told after it,
	 * re-checked against the mirror). */
	nft_learnq_drain(n);
	ex = nft_sock_table_exists(n, e);
	if (ex < 0)
		goto out;
	if (ex == 1) {
		if (nft_sock_dump_names(n, NFT_MSG_GETCHAIN, &chains, e) < 0 ||
		    nft_sock_dump_names(n, NFT_MSG_GETSET, &sets, e) < 0)
			goto out;
		if (!n->applied && nft_sock_adopt(n, &sets, e) < 0)
			goto out;
		ks.table_exists = true;
		ks.chains = chains.v;
		ks.nchains = chains.n;
		ks.sets = sets.v;
		ks.nsets = sets.n;
	} else if (n->applied) {
		/* someone deleted our table: start over, mirror is stale */
		nft_mirror_clear(n);
	}
	/* Learned elements the new policy changes go in the same batch. */
	nft_expire_tick(n);
	tw = nft_twins_new_();
	if (tw == NULL || (ex == 1 && lplan_build(n, p, tw, &plan) < 0)) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	ks.drop = plan.drop;
	ks.ndrop = plan.ndrop;
	ks.add = plan.add;
	ks.nadd = plan.nadd;
	ks.hold = plan.hold;
	ks.nhold = plan.nhold;
	if (nft_build_ruleset(p, &n->o, &ks, &b, e) < 0)
		goto out;
	if (nft_sock_send(n, b, STATS_NFT_OP_STATIC_APPLY, e) < 0)
		goto out;
	/* In force: now the mirror follows. */
	lplan_commit(n, &plan);
	policy_unref(n->pol);
	n->pol = policy_ref(p);
	n->ttl_min = p->dns.ttl_min != 0 ? p->dns.ttl_min : n->o.ttl_min;
	n->ttl_max = p->dns.ttl_max != 0 ? p->dns.ttl_max : n->o.ttl_max;
	if (n->ttl_max < n->ttl_min)
		n->ttl_max = n->ttl_min;
	n->applied = true;
	n->cap = n->o.learned_max;
	nft_sock_size_check(n);
	nft_mirror_gauge(n);
	rc = 0;
out:
	nft_twins_free_(tw);
	nft_batch_free(b);
	lplan_clear(&plan);
	nft_sock_names_clear(&chains);
	nft_sock_names_clear(&sets);
	return rc;
}
