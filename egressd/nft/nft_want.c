/*
 * nft_want: what a learned entry should hold under a policy: its plain
 * element, its limited elements (the limits of its names), or nothing
 * (denied); shared by the apply plan and learning.
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
#include "egressd/nft/nft_want.h"
#include "egressd/nft/nft_state.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_bounds.h"
#include "egressd/nft/nft_elems.h"
#include "egressd/nft/nft_twins.h"

long
nft_want_pool_add(struct limpool *lp, const struct nft_limit *lim, size_t n)
{
	size_t at = lp->n;

	if (lp->n + n > lp->cap) {
		size_t cap = lp->cap ? lp->cap : 256;
		struct nft_limit *nv;

		while (cap < lp->n + n)
			cap *= 2;
		nv = realloc(lp->v, cap * sizeof(*nv));
		if (nv == NULL)
			return -1;
		lp->v = nv;
		lp->cap = cap;
	}
	memcpy(lp->v + lp->n, lim, n * sizeof(*lim));
	lp->n += n;
	return (long)at;
}

/* The address itself is denied: internal, or an IP/CIDR deny rule of
 * every port and protocol covers it (restricted denies stay enforced by
 * the ordered rules above the learned sets). */
static bool
addr_denied(const struct lent *l, const struct policy *p, struct nft_twins *tw)
{
	const struct policy_rule *r = NULL;

	if (nft_addr_internal_(l->family, l->addr))
		return true;
	return p->index != NULL &&
	    nft_twins_match_(tw, p, l->family, l->addr, 0, 0, &r) ==
	    POLICY_DENY &&
	    r != NULL && r->nports == 0 &&
	    (r->protocols & POLICY_PROTO_ALL) == POLICY_PROTO_ALL;
}

/*
 * Which set(s) a name's addresses go to under p: *plain (no limit), or
 * the limited elements (into lim, NFT_LIMITS_MAX), or neither (denied).
 */
size_t
nft_want_name_limits(const struct policy *p, const char *name, int family,
    bool *plain, bool *denied, struct nft_limit *lim)
{
	struct policy_reach *rc;
	bool over;
	size_t k;

	*plain = true;
	*denied = false;
	if (p == NULL || p->index == NULL || name == NULL)
		return 0;
	rc = malloc(sizeof(*rc));
	if (rc == NULL) {
		*plain = false;
		*denied = true; /* fail closed */
		return 0;
	}
	(void)policy_match_domain_reach(p, name, NULL, rc);
	*plain = rc->all;
	*denied = rc->none;
	k = nft_reach_limits(
	    rc, p->default_action, family, lim, NFT_LIMITS_MAX, &over);
	free(rc);
	return k;
}

/*
 * What l should hold under p: the plain element, limited elements (into
 * lim, NFT_ADDR_LIMITS_MAX), or nothing; *alive (may be NULL) gets one bit
 * per name p still lets reach something. An entry without names (an
 * element without comment) keeps what it holds unless the address
 * itself is denied.
 */
void
nft_want_lent(const struct lent *l, const struct policy *p,
    struct nft_twins *tw, uint64_t now, bool *plain, struct nft_limit *lim,
    size_t *nlim, struct nft_limit *tmp, unsigned *alive)
{
	unsigned i, dummy;
	size_t k, j;
	bool pl, den;

	if (alive == NULL)
		alive = &dummy;
	*alive = 0;
	*plain = false;
	*nlim = 0;
	if (addr_denied(l, p, tw))
		return;
	if (l->nnames == 0) {
		*plain = l->plain_ms > now;
		if (l->lim_ms > now) {
			memcpy(lim, l->lim, l->nlim * sizeof(*lim));
			*nlim = l->nlim;
		}
		return;
	}
	for (i = 0; i < l->nnames; i++) {
		k = nft_want_name_limits(
		    p, l->names[i], l->family, &pl, &den, tmp);
		if (!den)
			*alive |= 1u << i;
		*plain |= pl;
		for (j = 0; j < k; j++)
			if (!nft_mirror_lim_has(lim, *nlim, &tmp[j]) &&
			    *nlim < NFT_ADDR_LIMITS_MAX)
				lim[(*nlim)++] = tmp[j];
	}
	*nlim = nft_mirror_lim_norm(lim, *nlim);
}

uint32_t
nft_want_left_s(uint64_t until, uint64_t now)
{
	uint64_t s = until > now ? (until - now + 999) / 1000 : 1;

	return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

void
nft_want_rec(struct nft_learn_addr *r, const struct lent *l, uint32_t ttl,
    const char *name)
{
	memset(r, 0, sizeof(*r));
	r->family = l->family;
	memcpy(r->addr, l->addr, 16);
	r->ttl = ttl;
	r->name = name;
}

const char *
nft_want_held_name(
    const struct nft_opts *o, const struct policy *p, const struct lent *l)
{
	unsigned j;

	for (j = 0; j < l->nnames; j++)
		if (nft_queue_held(o, p, l->names[j]))
			return l->names[j];
	return NULL;
}
