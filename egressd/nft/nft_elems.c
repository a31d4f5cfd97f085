/*
 * nft_elems: learned elements as set messages (add, refresh, delete), the
 * limits of a name, and the teardown batch.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "egressd/base/defaults.h"
#include "util/addr.h"
#include "util/coalesce.h"
#include "egressd/proto/special_ranges.h"
#include "egressd/nft/nft_elems.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_bounds.h"
#include "egressd/nft/nft_elems.h"

static uint32_t
clamp_ttl(uint32_t ttl, uint32_t lo, uint32_t hi)
{
	if (ttl < lo)
		ttl = lo;
	if (ttl > hi)
		ttl = hi;
	return ttl == 0 ? 1 : ttl;
}

/* A limited-set key: address, l4proto, port, each in 32-bit words. */
static uint32_t
limited_key(
    int family, const uint8_t *addr, uint8_t proto, uint16_t port, uint8_t *key)
{
	unsigned w = family == 4 ? 4 : 16;

	memset(key, 0, w + 8);
	memcpy(key, addr, w);
	key[w] = proto;
	key[w + 4] = (uint8_t)(port >> 8);
	key[w + 5] = (uint8_t)port;
	return w + 8;
}

/*
 * Elements of one family into set messages of at most NFT_ELEMS_PER_MSG:
 * the plain set (addresses without limits) or the limited set (one
 * element per limit of each address that has them).
 */
enum learn_kind { LK_PLAIN, LK_LIMITED, LK_HOLD };

/* Does a[i] have elements of kind k? */
static bool
learn_is(const struct nft_learn_addr *a, enum learn_kind k)
{
	if (k == LK_LIMITED)
		return a->nlim != 0;
	return a->nlim == 0 && (k == LK_PLAIN || a->hold);
}

static const char *
learn_set(int family, enum learn_kind k)
{
	if (k == LK_LIMITED)
		return family == 4 ? NFT_SET_LIMITED4 : NFT_SET_LIMITED6;
	if (k == LK_HOLD)
		return family == 4 ? NFT_SET_HOLD4 : NFT_SET_HOLD6;
	return family == 4 ? NFT_SET_LEARNED4 : NFT_SET_LEARNED6;
}

static int
learn_msgs(struct nft_batch *b, uint16_t type, int family, enum learn_kind kind,
    const struct nft_learn_addr *a, size_t n, uint32_t lo, uint32_t hi,
    struct err *e)
{
	const bool limited = kind == LK_LIMITED;
	struct bctx c = {.b = b, .e = e};
	struct nftnl_set *s = NULL;
	size_t i, k, inmsg = 0, total = 0, done = 0;
	unsigned w = family == 4 ? 4 : 16;
	uint8_t key[24], kend[24];
	uint32_t klen;
	uint64_t tmo;
	struct nftnl_set_elem *el;
	const char *set = learn_set(family, kind);

	for (i = 0; i < n; i++)
		if (a[i].family == family && learn_is(&a[i], kind))
			total += limited ? a[i].nlim : 1;
	if (total == 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (a[i].family != family || !learn_is(&a[i], kind))
			continue;
		tmo = type == NFT_MSG_NEWSETELEM
		    ? (uint64_t)clamp_ttl(a[i].ttl, lo, hi) * 1000
		    : 0;
		for (k = 0; k < (limited ? a[i].nlim : 1); k++) {
			if (s == NULL &&
			    (s = nft_msg_obj_new(&c, type, set)) == NULL)
				return -1;
			if (limited) {
				const struct nft_limit *l = &a[i].lim[k];

				klen = limited_key(
				    family, a[i].addr, l->plo, l->lo, key);
				(void)limited_key(
				    family, a[i].addr, l->phi, l->hi, kend);
				el = nft_msg_elem_add(s, key, klen, 0, tmo);
				if (el != NULL &&
				    nftnl_set_elem_set(el,
				        NFTNL_SET_ELEM_KEY_END, kend, klen) < 0)
					goto out_nomem;
			} else
				el = nft_msg_elem_add(s, a[i].addr, w, 0, tmo);
			if (el == NULL ||
			    (type == NFT_MSG_NEWSETELEM &&
			        nft_msg_elem_comment(el, a[i].name) < 0))
				goto out_nomem;
			done++;
			if (++inmsg == NFT_ELEMS_PER_MSG || done == total) {
				inmsg = 0;
				if (nft_msg_elems(&c, type, &s, set) < 0)
					return -1;
			}
		}
	}
	return 0;
out_nomem:
	err_set(e, "nft: out of memory");
	nftnl_set_free(s);
	return -1;
}

static int
check_learn(const struct nft_learn_addr *a, size_t n, struct err *e)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		if (a[i].family != 4 && a[i].family != 6) {
			err_set(e, "nft: learned address %zu: bad family %u", i,
			    a[i].family);
			return -1;
		}
		if (a[i].nlim > NFT_ADDR_LIMITS_MAX) {
			err_set(e, "nft: learned address %zu: %zu limits", i,
			    a[i].nlim);
			return -1;
		}
		for (k = 0; k < a[i].nlim; k++)
			if (a[i].lim[k].plo > a[i].lim[k].phi ||
			    a[i].lim[k].lo > a[i].lim[k].hi) {
				err_set(e,
				    "nft: learned address %zu: bad limit", i);
				return -1;
			}
	}
	return 0;
}

int
nft_batch_add_learn_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, uint32_t ttl_min, uint32_t ttl_max, bool refresh, struct err *e)
{
	enum learn_kind k;
	int f;

	if (check_learn(a, n, e) < 0)
		return -1;
	for (f = 4; f <= 6; f += 2)
		for (k = LK_PLAIN; k <= LK_HOLD; k++) {
			if (learn_msgs(b, NFT_MSG_NEWSETELEM, f, k, a, n,
			        ttl_min, ttl_max, e) < 0)
				return -1;
			if (!refresh)
				continue;
			if (learn_msgs(b, NFT_MSG_DELSETELEM, f, k, a, n, 0, 0,
			        e) < 0 ||
			    learn_msgs(b, NFT_MSG_NEWSETELEM, f, k, a, n,
			        ttl_min, ttl_max, e) < 0)
				return -1;
		}
	return 0;
}

int
nft_batch_add_hold_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, uint32_t ttl_min, uint32_t ttl_max, struct err *e)
{
	int f;

	if (check_learn(a, n, e) < 0)
		return -1;
	for (f = 4; f <= 6; f += 2)
		if (learn_msgs(b, NFT_MSG_NEWSETELEM, f, LK_HOLD, a, n, ttl_min,
		        ttl_max, e) < 0)
			return -1;
	return 0;
}

int
nft_batch_del_learn_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, struct err *e)
{
	enum learn_kind k;
	int f;

	if (check_learn(a, n, e) < 0)
		return -1;
	/* add-then-delete: never ENOENT for an element that just expired */
	for (f = 4; f <= 6; f += 2)
		for (k = LK_PLAIN; k <= LK_HOLD; k++)
			if (learn_msgs(b, NFT_MSG_NEWSETELEM, f, k, a, n, 1, 1,
			        e) < 0 ||
			    learn_msgs(
			        b, NFT_MSG_DELSETELEM, f, k, a, n, 0, 0, e) < 0)
				return -1;
	return 0;
}

/* ---- limits of a name ---- */

static bool
lim_push(struct nft_limit *out, size_t max, size_t *n, unsigned plo,
    unsigned phi, unsigned lo, unsigned hi)
{
	if (*n == max)
		return false;
	out[*n].plo = (uint8_t)plo;
	out[*n].phi = (uint8_t)phi;
	out[*n].lo = (uint16_t)lo;
	out[*n].hi = (uint16_t)hi;
	(*n)++;
	return true;
}

/* The port ranges of v (sorted, disjoint), or their complement. */
static bool
lim_ports(struct nft_limit *out, size_t max, size_t *n, uint8_t proto,
    const struct policy_port_range *v, size_t nv, bool complement)
{
	unsigned cur = 0;
	size_t i;

	for (i = 0; i < nv; i++) {
		if (!complement) {
			if (!lim_push(
			        out, max, n, proto, proto, v[i].lo, v[i].hi))
				return false;
			continue;
		}
		if (v[i].lo > cur &&
		    !lim_push(out, max, n, proto, proto, cur, v[i].lo - 1u))
			return false;
		cur = (unsigned)v[i].hi + 1;
	}
	if (complement && cur <= 65535 &&
	    !lim_push(out, max, n, proto, proto, cur, 65535))
		return false;
	return true;
}

size_t
nft_reach_limits(const struct policy_reach *r, enum policy_action def,
    int family, struct nft_limit *out, size_t max, bool *overflow)
{
	uint8_t icmp = family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	/* protocols policy has no name for, as ranges between the named */
	uint8_t named[3] = {icmp < IPPROTO_TCP ? icmp : IPPROTO_TCP,
	    icmp < IPPROTO_TCP ? IPPROTO_TCP : IPPROTO_UDP,
	    icmp < IPPROTO_TCP ? IPPROTO_UDP : icmp};
	bool cpl = def == POLICY_ALLOW, ok;
	unsigned cur = 0;
	size_t n = 0, i;

	*overflow = false;
	if (r->all || r->none)
		return 0;
	ok = lim_ports(out, max, &n, IPPROTO_TCP, r->tcp, r->ntcp, cpl) &&
	    lim_ports(out, max, &n, IPPROTO_UDP, r->udp, r->nudp, cpl);
	if (ok && r->icmp != cpl)
		ok = lim_push(out, max, &n, icmp, icmp, 0, 65535);
	if (ok && r->other != cpl) {
		for (i = 0; ok && i < 3; i++) {
			if (named[i] > cur)
				ok = lim_push(
				    out, max, &n, cur, named[i] - 1u, 0, 65535);
			cur = named[i] + 1u;
		}
		if (ok)
			ok = lim_push(out, max, &n, cur, 255, 0, 65535);
	}
	if (!ok) {
		*overflow = true;
		/* a denial left out would open it: deny the whole address */
		if (cpl) {
			n = 0;
			(void)lim_push(out, max, &n, 0, 255, 0, 65535);
		}
	}
	return n;
}

int
nft_build_learn(const struct nft_learn_addr *a, size_t n, uint32_t ttl_min,
    uint32_t ttl_max, struct nft_batch **out, struct err *e)
{
	struct nft_batch *b;

	*out = NULL;
	if (n > NFT_LEARN_BATCH_MAX) {
		err_set(e, "nft: %zu addresses in one answer (max %d)", n,
		    NFT_LEARN_BATCH_MAX);
		return -1;
	}
	b = nft_batch_new_();
	if (b == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if (nft_batch_begin_(b, e) < 0 ||
	    nft_batch_add_learn_(b, a, n, ttl_min, ttl_max, true, e) < 0 ||
	    nft_batch_finish_(b, e) < 0) {
		nft_batch_free(b);
		return -1;
	}
	*out = b;
	return 0;
}

int
nft_build_teardown(struct nft_batch **out, struct err *e)
{
	struct bctx c = {.e = e};

	*out = NULL;
	c.b = nft_batch_new_();
	if (c.b == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if (nft_batch_begin_(c.b, e) < 0 ||
	    nft_msg_named(&c, NFT_MSG_DELTABLE, NFT_TABLE) < 0 ||
	    nft_batch_finish_(c.b, e) < 0) {
		nft_batch_free(c.b);
		return -1;
	}
	*out = c.b;
	return 0;
}

bool
nft_addr_internal_(int family, const uint8_t *addr)
{
	return (special_addr_flags(family, addr) & SPECIAL_DROP) != 0;
}
