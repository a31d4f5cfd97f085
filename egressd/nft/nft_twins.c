/*
 * nft_twins: the address decision of the filter chain, for the code that
 * judges addresses outside the kernel (the flow cut, learned-address
 * pruning). The chain denies every IPv4 deny prefix also in its IPv6
 * spellings (nft_build.c v6_twin(): NAT64 64:ff9b::/96, 6to4 2002::/16,
 * mapped ::ffff:0:0/96, compatible ::/96), as synthetic IPv6 rules of the
 * same layer; policy_match_addr() knows IPv6 rules only, so alone it
 * would keep a flow to 64:ff9b::cb00:710b after 203.0.113.11 is denied.
 * The IPv4 deny prefixes are indexed once per use (lazily: only when an
 * address of a twin range comes up), sorted, and looked up by prefix
 * length, longest first.
 */
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/special_ranges.h"
#include "egressd/nft/nft_twins.h"
#include "egressd/nft/nft_build.h"

struct twin_ent {
	uint32_t a4; /* host order, host bits zero */
	uint8_t len;
	const struct policy_rule *r;
};

struct nft_twins {
	bool built;
	struct twin_ent *e[NFT_L_COUNT];
	size_t n[NFT_L_COUNT];
};

struct nft_twins *
nft_twins_new_(void)
{
	return calloc(1, sizeof(struct nft_twins));
}

void
nft_twins_free_(struct nft_twins *tw)
{
	unsigned l;

	if (tw == NULL)
		return;
	for (l = 0; l < NFT_L_COUNT; l++)
		free(tw->e[l]);
	free(tw);
}

static int
ent_cmp(const void *a, const void *b)
{
	const struct twin_ent *x = a, *y = b;

	if (x->a4 != y->a4)
		return x->a4 < y->a4 ? -1 : 1;
	return (int)x->len - (int)y->len;
}

static uint32_t
get4(const uint8_t *a)
{
	return (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 |
	    (uint32_t)a[2] << 8 | a[3];
}

static uint32_t
mask4(unsigned len)
{
	return len == 0 ? 0 : 0xffffffffu << (32 - len);
}

/* The IPv4 IP/CIDR deny rules of each layer (what v6_twinned() twins). */
static int
twins_build(struct nft_twins *tw, const struct policy *p)
{
	struct nft_layers ly;
	unsigned l;
	size_t i, k;

	nft_layers_(p, &ly);
	for (l = 0; l < NFT_L_COUNT; l++) {
		for (i = 0, k = 0; i < ly.n[l]; i++)
			k += ly.r[l][i].action == POLICY_DENY &&
			    ly.r[l][i].prefix.family == 4 &&
			    (ly.r[l][i].kind == POLICY_TARGET_IP ||
			        ly.r[l][i].kind == POLICY_TARGET_CIDR);
		if (k == 0)
			continue;
		if ((tw->e[l] = calloc(k, sizeof(*tw->e[l]))) == NULL)
			return -1;
		for (i = 0; i < ly.n[l]; i++) {
			const struct policy_rule *r = &ly.r[l][i];
			struct twin_ent *t;

			if (r->action != POLICY_DENY || r->prefix.family != 4 ||
			    r->prefix.len > 32 ||
			    (r->kind != POLICY_TARGET_IP &&
			        r->kind != POLICY_TARGET_CIDR))
				continue;
			t = &tw->e[l][tw->n[l]++];
			t->len = r->prefix.len;
			t->a4 = get4(r->prefix.addr) & mask4(t->len);
			t->r = r;
		}
		qsort(tw->e[l], tw->n[l], sizeof(*tw->e[l]), ent_cmp);
	}
	tw->built = true;
	return 0;
}

/* The longest deny prefix of layer l covering a4 that applies; NULL. */
static const struct policy_rule *
layer_deny4(const struct nft_twins *tw, unsigned l, uint32_t a4, unsigned proto,
    uint16_t port, unsigned *len)
{
	const struct twin_ent *v = tw->e[l];
	size_t n = tw->n[l];
	int k;

	for (k = 32; k >= 0 && n > 0; k--) {
		struct twin_ent key = {a4 & mask4((unsigned)k), (uint8_t)k, 0};
		size_t lo = 0, hi = n;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (ent_cmp(&v[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < n && ent_cmp(&v[lo], &key) == 0; lo++)
			if (policy_rule_port_ok(v[lo].r, proto, port)) {
				*len = (unsigned)k;
				return v[lo].r;
			}
	}
	return NULL;
}

/* The IPv4 address an IPv6 address spells, and the spelling's length:
 * the forms nft_build.c twins a deny rule in. */
static bool
twin_of(const uint8_t *a6, uint32_t *a4, unsigned *base)
{
	uint8_t v4[4];

	if (special_v4_of(a6, SPECIAL_FORMS_RULE, v4, base) < 0)
		return false;
	*a4 = get4(v4);
	return true;
}

static unsigned
layer_of(const struct policy_rule *r)
{
	switch (r->origin) {
	case POLICY_ORIGIN_ALWAYS_DENY:
		return NFT_L_ALWAYS_DENY;
	case POLICY_ORIGIN_ALWAYS_ALLOW:
		return NFT_L_ALWAYS_ALLOW;
	case POLICY_ORIGIN_INFRA:
		return NFT_L_INFRA;
	default:
		return NFT_L_USER;
	}
}

enum policy_action
nft_twins_match_(struct nft_twins *tw, const struct policy *p, int family,
    const uint8_t *addr, unsigned proto, uint16_t port,
    const struct policy_rule **rule)
{
	const struct policy_rule *r6 = NULL, *t;
	enum policy_action act;
	unsigned base, l, l6, len;
	uint32_t a4;

	act = policy_match_addr(p, family, addr, proto, port, &r6);
	if (rule != NULL)
		*rule = r6;
	if (family != 6 || tw == NULL || !twin_of(addr, &a4, &base))
		return act;
	if (!tw->built && twins_build(tw, p) < 0)
		return POLICY_DENY; /* out of memory: fail closed */
	/* the first layer with a match decides (IPv6 rule or twin); in
	 * the layer of the IPv6 rule the longer prefix wins, deny at a
	 * tie (a twin is a deny) */
	l6 = r6 != NULL ? layer_of(r6) : NFT_L_COUNT;
	for (l = 0; l < NFT_L_COUNT && l <= l6; l++) {
		if ((t = layer_deny4(tw, l, a4, proto, port, &len)) == NULL)
			continue;
		if (l == l6 && base + len < r6->prefix.len)
			break;
		if (rule != NULL)
			*rule = t;
		return POLICY_DENY;
	}
	return act;
}
