
/*
 * nft_build: policy snapshot -> one netlink batch, with no I/O.
 *
 * Every message carries NLM_F_ACK so the sender can tell which one the
 * kernel refused; sequence numbers are rewritten at send time.
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
#include "egressd/nft/nft_build.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_rule.h"
#include "egressd/nft/nft_elems.h"
#include "egressd/nft/nft_bounds.h"

#define NFT_PRIO_NAT_OUT -100
#define NFT_PRIO_FILTER_OUT 0

/* Counter names, in the order of nft_read_counters(). */
static const char *const counter_names[NFT_NCOUNTERS] = {
    "own",
    "nd",
    "ns_exempt",
    "api_block",
    "dns",
    "proxy",
    "loopback",
    "dot",
    "quic",
    "doh",
    "always_deny",
    "always_allow",
    "infra",
    "internal",
    "user_allow",
    "user_deny",
    "learned",
    "default_allow",
    "default_deny",
    "api_uid",
};

/*
 * The IPv6 spellings of an IPv4 prefix that a translator (or the kernel's
 * IPv4-compatible handling) can route to it (THREATS §4) and that an IPv4
 * deny rule is also denied in (special_ranges.h).
 */
#define NFT_V6_FORMS SPECIAL_FORMS_RULE

const char *
nft_counter_name(size_t i)
{
	return i < NFT_NCOUNTERS ? counter_names[i] : NULL;
}

void
nft_opts_init(struct nft_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mark = EGRESSD_DEFAULT_MARK;
	o->dns_port = EGRESSD_DEFAULT_DNS_PORT;
	o->protected_ports[0] = EGRESSD_DEFAULT_API_PORT;
	o->nprotected_ports = 1;
	o->intercept_ports[0] = 80;
	o->intercept_ports[1] = 443;
	o->nintercept_ports = 2;
	o->ttl_min = POLICY_DNS_TTL_MIN_DEFAULT;
	o->ttl_max = POLICY_DNS_TTL_MAX_DEFAULT;
	o->log_rate = NFT_DEFAULT_LOG_RATE;
	o->learned_max = EGRESSD_DEFAULT_LEARNED_MAX;
}

uint32_t
nft_learned_kernel_size(uint32_t learned_max)
{
	if (learned_max == 0)
		learned_max = EGRESSD_DEFAULT_LEARNED_MAX;
	if (learned_max > NFT_LEARNED_MAX_LIMIT)
		learned_max = NFT_LEARNED_MAX_LIMIT;
	return learned_max * NFT_LEARNED_SLACK;
}

int
nft_parse_prefix(const char *s, struct policy_prefix *p, struct err *e)
{
	struct addr a;
	unsigned plen;

	memset(p, 0, sizeof(*p));
	if (addr_parse_cidr(s, &a, &plen, e) == -1)
		return -1;
	addr_mask(&a, plen);
	p->family = a.family == AF_INET ? 4 : 6;
	memcpy(p->addr, a.a, p->family == 4 ? 4 : 16);
	p->len = (uint8_t)plen;
	return 0;
}

/* ---- policy layers -> ordered groups ---- */

void
nft_layers_(const struct policy *p, struct nft_layers *out)
{
	out->r[NFT_L_ALWAYS_DENY] = p->always_deny;
	out->n[NFT_L_ALWAYS_DENY] = p->nalways_deny;
	out->r[NFT_L_ALWAYS_ALLOW] = p->always_allow;
	out->n[NFT_L_ALWAYS_ALLOW] = p->nalways_allow;
	out->r[NFT_L_INFRA] = p->infra;
	out->n[NFT_L_INFRA] = p->ninfra;
	out->r[NFT_L_USER] = p->rules;
	out->n[NFT_L_USER] = p->nrules;
}

struct gent {
	unsigned layer;
	const struct policy_rule *r;
};

static int
ports_cmp(const struct policy_rule *a, const struct policy_rule *b)
{
	size_t i;

	if (a->nports != b->nports)
		return a->nports < b->nports ? -1 : 1;
	for (i = 0; i < a->nports; i++) {
		if (a->ports[i].lo != b->ports[i].lo)
			return a->ports[i].lo < b->ports[i].lo ? -1 : 1;
		if (a->ports[i].hi != b->ports[i].hi)
			return a->ports[i].hi < b->ports[i].hi ? -1 : 1;
	}
	return 0;
}

/* The group key: equal keys share one nft rule. */
static int
gkey_cmp(const struct gent *x, const struct gent *y)
{
	const struct policy_rule *a = x->r, *b = y->r;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (a->prefix.len != b->prefix.len) /* longest prefix first */
		return a->prefix.len > b->prefix.len ? -1 : 1;
	if (a->action != b->action) /* deny first */
		return a->action == POLICY_DENY ? -1 : 1;
	if (a->prefix.family != b->prefix.family)
		return a->prefix.family < b->prefix.family ? -1 : 1;
	if (a->protocols != b->protocols)
		return a->protocols < b->protocols ? -1 : 1;
	return ports_cmp(a, b);
}

static int
gent_cmp(const void *pa, const void *pb)
{
	const struct gent *x = pa, *y = pb;
	int c = gkey_cmp(x, y);

	if (c != 0)
		return c;
	/* stable, deterministic output */
	return memcmp(x->r->prefix.addr, y->r->prefix.addr, 16);
}

static const char *const layer_allow_counter[NFT_L_COUNT] = {
    "always_deny",
    "always_allow",
    "infra",
    "user_allow",
};
static const char *const layer_deny_counter[NFT_L_COUNT] = {
    "always_deny",
    "always_allow",
    "infra",
    "user_deny",
};

static int
emit_group(struct bctx *c, const struct gent *g, size_t n)
{
	const struct policy_rule *r0 = g[0].r;
	const struct policy_prefix **pfx;
	char aset[NFT_SETNAME_MAX], pset[NFT_SETNAME_MAX];
	struct rspec s;
	unsigned id = c->nsets++;
	size_t i;
	int rc = -1;
	bool icmp;

	pfx = calloc(n, sizeof(*pfx));
	if (pfx == NULL) {
		err_set(c->e, "nft: out of memory");
		return -1;
	}
	for (i = 0; i < n; i++)
		pfx[i] = &g[i].r->prefix;
	snprintf(aset, sizeof(aset), "g%u_%s%u", id,
	    r0->action == POLICY_DENY ? "deny" : "allow", r0->prefix.family);
	if (nft_msg_addr_set(c, aset, r0->prefix.family, pfx, n) < 0)
		goto out;
	if (r0->nports != 0) {
		snprintf(pset, sizeof(pset), "g%u_ports", id);
		if (nft_msg_port_set(c, pset, r0->ports, r0->nports) < 0)
			goto out;
	}
	memset(&s, 0, sizeof(s));
	s.chain = NFT_CHAIN_FILTER;
	s.nfproto = r0->prefix.family == 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
	s.daddr_set = aset;
	s.counter = r0->action == POLICY_DENY ? layer_deny_counter[g[0].layer]
	                                      : layer_allow_counter[g[0].layer];
	s.v = r0->action == POLICY_DENY ? V_DENY : V_ACCEPT;
	if ((r0->protocols & POLICY_PROTO_ALL) == POLICY_PROTO_ALL &&
	    r0->nports == 0) {
		/* every protocol, including ones policy has no name for */
		rc = nft_rule_msg(c, &s);
		goto out;
	}
	/* Ports restrict TCP and UDP; ICMP has none (as policy_rule_port_ok). */
	s.dport_set = r0->nports != 0 ? pset : NULL;
	if (r0->protocols & POLICY_PROTO_TCP) {
		s.l4proto = IPPROTO_TCP;
		if (nft_rule_msg(c, &s) < 0)
			goto out;
	}
	if (r0->protocols & POLICY_PROTO_UDP) {
		s.l4proto = IPPROTO_UDP;
		if (nft_rule_msg(c, &s) < 0)
			goto out;
	}
	icmp = (r0->protocols & POLICY_PROTO_ICMP) != 0;
	if (icmp) {
		s.dport_set = NULL;
		s.l4proto =
		    r0->prefix.family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6;
		if (nft_rule_msg(c, &s) < 0)
			goto out;
	}
	rc = 0;
out:
	free(pfx);
	return rc;
}

/*
 * IPv6 spelling number form (0..NFT_V6_FORMS-1) of the IPv4 prefix in:
 * NAT64 64:ff9b::/96, 6to4 2002::/16, IPv4-mapped ::ffff:0:0/96,
 * IPv4-compatible ::/96 (special_v6_form()).
 */
static void
v6_twin(const struct policy_prefix *in, size_t form, struct policy_prefix *out)
{
	memset(out, 0, sizeof(*out));
	out->family = 6;
	special_v6_form(in->addr, in->len, form, out->addr, &out->len);
}

/*
 * One interval set of the addresses of family that the table of special
 * ranges drops (special_drop_spans()).
 */
static int
internal_set(struct bctx *c, const char *name, int family)
{
	unsigned w = family == 4 ? 4 : 16;
	struct special_span *sp;
	struct rng *r;
	long i, n;
	int rc = -1;

	sp = calloc(SPECIAL_SPANS_MAX, sizeof(*sp));
	r = calloc(SPECIAL_SPANS_MAX, sizeof(*r));
	if (sp == NULL || r == NULL) {
		err_set(c->e, "nft: out of memory");
		goto out;
	}
	n = special_drop_spans(family, sp, SPECIAL_SPANS_MAX);
	if (n < 0) {
		err_set(c->e, "nft: bad table of special ranges");
		goto out;
	}
	for (i = 0; i < n; i++) {
		memcpy(r[i].lo, sp[i].lo, sizeof(r[i].lo));
		memcpy(r[i].hi, sp[i].hi, sizeof(r[i].hi));
	}
	rc = nft_msg_interval_set(
	    c, name, nft_msg_addr_keytype(family), w, r, (size_t)n);
out:
	free(sp);
	free(r);
	return rc;
}

/*
 * The built-in internal destinations (special_ranges.c: every row with
 * SPECIAL_DROP and the IPv6 spellings of its IPv4 rows), denied unless an
 * always-allow or infra rule of the operator allows them (THREATS §5):
 * after those layers, before user rules. The resolver strips the same
 * addresses from answers (dns_addr_is_internal()), Teredo when it embeds
 * one of them. Loopback is accepted by `oif lo` and ICMPv6 neighbour
 * discovery and MLD reports by the nd rule before these.
 */
static int
emit_internal(struct bctx *c)
{
	const struct rrow deny = {.s = {.counter = "internal", .v = V_DENY},
	    .per_family = true,
	    .daddr_set = {"internal4", "internal6"}};

	if (internal_set(c, "internal4", 4) < 0 ||
	    internal_set(c, "internal6", 6) < 0)
		return -1;
	return nft_rule_row(c, NFT_CHAIN_FILTER, &deny);
}

/*
 * A denied IPv4 prefix (operator always-deny or a user deny rule) is also
 * denied in its IPv6 spellings (v6_twin()), as synthetic rules of the same
 * layer with the same ports and protocols: longest prefix first and deny
 * before allow then treat them like rules the operator or user wrote
 * (e.g. a user deny 203.0.113.11 also denies 64:ff9b::cb00:710b/128,
 * which beats a user allow ::/0 and a learned address, as the IPv4 rule
 * beats an allow 0.0.0.0/0). IPv4 allow rules get no twins.
 */
static bool
v6_twinned(const struct policy_rule *r)
{
	return r->action == POLICY_DENY && r->prefix.family == 4 &&
	    (r->kind == POLICY_TARGET_IP || r->kind == POLICY_TARGET_CIDR);
}

static void
v6_form(const struct policy_rule *r, size_t form, struct policy_rule *out)
{
	*out = *r;
	v6_twin(&r->prefix, form, &out->prefix);
}

static int
emit_layers(struct bctx *c, const struct policy *p)
{
	struct nft_layers ly;
	struct policy_rule *syn = NULL; /* IPv6 forms of IPv4 denies */
	struct gent *g;
	size_t n = 0, nsyn = 0, ntw = 0, i, j, k;
	unsigned l;
	int rc = -1;
	bool internal_done = false;

	nft_layers_(p, &ly);
	for (l = 0; l < NFT_L_COUNT; l++) {
		n += ly.n[l];
		for (i = 0; i < ly.n[l]; i++)
			ntw += v6_twinned(&ly.r[l][i]);
	}
	g = calloc(n + NFT_V6_FORMS * ntw + 1, sizeof(*g));
	syn = calloc(NFT_V6_FORMS * ntw + 1, sizeof(*syn));
	if (g == NULL || syn == NULL) {
		err_set(c->e, "nft: out of memory");
		goto out;
	}
	n = 0;
	for (l = 0; l < NFT_L_COUNT; l++)
		for (i = 0; i < ly.n[l]; i++) {
			const struct policy_rule *r = &ly.r[l][i];

			if (r->kind != POLICY_TARGET_IP &&
			    r->kind != POLICY_TARGET_CIDR)
				continue; /* names are the resolver's job */
			if ((r->prefix.family != 4 && r->prefix.family != 6) ||
			    r->prefix.len >
			        (r->prefix.family == 4 ? 32 : 128)) {
				err_set(c->e,
				    "nft: rule \"%.64s\" has a bad "
				    "prefix",
				    r->target ? r->target : "?");
				goto out;
			}
			if ((r->protocols & POLICY_PROTO_ALL) == 0)
				continue; /* matches nothing */
			g[n].layer = l;
			g[n].r = r;
			n++;
			if (v6_twinned(r))
				for (k = 0; k < NFT_V6_FORMS; k++) {
					v6_form(r, k, &syn[nsyn]);
					g[n].layer = l;
					g[n].r = &syn[nsyn++];
					n++;
				}
		}
	qsort(g, n, sizeof(*g), gent_cmp);
	for (i = 0; i < n; i = j) {
		if (!internal_done && g[i].layer == NFT_L_USER) {
			if (emit_internal(c) < 0)
				goto out;
			internal_done = true;
		}
		/* one group; skip exact duplicate prefixes */
		for (j = i + 1; j < n && gkey_cmp(&g[i], &g[j]) == 0; j++)
			;
		k = j - i;
		if (emit_group(c, &g[i], k) < 0)
			goto out;
	}
	if (!internal_done && emit_internal(c) < 0)
		goto out;
	rc = 0;
out:
	free(g);
	free(syn);
	return rc;
}

/* ---- the whole table ---- */

static bool
name_in(const char *name, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/*
 * The prefixes of pf as one address set per family that has any, named
 * name[0] (IPv4) and name[1] (IPv6); made[f] is then name[f], else NULL.
 */
static int
emit_prefix_list_set(struct bctx *c, const char *const name[2],
    const struct policy_prefix *pf, size_t n, const char *made[2])
{
	const struct policy_prefix **p;
	size_t i, k, f;
	int rc = -1;

	made[0] = made[1] = NULL;
	if ((p = calloc(n + 1, sizeof(*p))) == NULL) {
		err_set(c->e, "nft: out of memory");
		return -1;
	}
	for (f = 0; f < 2; f++) {
		int family = f == 0 ? 4 : 6;

		for (i = k = 0; i < n; i++)
			if (pf[i].family == family)
				p[k++] = &pf[i];
		if (k == 0)
			continue;
		if (nft_msg_addr_set(c, name[f], family, p, k) < 0)
			goto out;
		made[f] = name[f];
	}
	rc = 0;
out:
	free(p);
	return rc;
}

static int
check_opts(const struct nft_opts *o, struct err *e)
{
	if (o->dns_port == 0) {
		err_set(e, "nft: dns_port is 0");
		return -1;
	}
	if (o->nprotected_ports > NFT_PORTS_MAX ||
	    o->nintercept_ports > NFT_PORTS_MAX ||
	    o->ninbound_ports > NFT_PORTS_MAX ||
	    o->nqueue_ports > NFT_PORTS_MAX || o->nns_exempt > NFT_ADDRS_MAX ||
	    o->ndoh_block > NFT_ADDRS_MAX) {
		err_set(e, "nft: option list over its bound");
		return -1;
	}
	if (o->mark >= NFT_QMARK_PENDING && o->mark <= NFT_QMARK_RECHECK) {
		err_set(
		    e, "nft: mark 0x%x is one of in-flight judging's", o->mark);
		return -1;
	}
	return 0;
}

/* The optional static sets that exist, [0] IPv4, [1] IPv6 (NULL: none;
 * the rules that use them follow). */
struct static_sets {
	const char *ns[2], *doh[2];
};

/* The table; on adopt, the old contents go in the same transaction. */
static int
emit_table(struct bctx *c, const struct nft_kstate *ks)
{
	static const char *const our_chains[] = {
	    NFT_CHAIN_FILTER, NFT_CHAIN_NAT, NFT_CHAIN_DENY};
	size_t i;

	if (nft_msg_table(c) < 0)
		return -1;
	/* Adopt: empty every chain, drop every static set (after the rules
	 * that referenced them), keep learned sets. All in this transaction:
	 * the kernel switches from the old ruleset to the new one at once. */
	if (ks != NULL && ks->table_exists) {
		/* DELRULE without a handle flushes the chain. */
		for (i = 0; i < ks->nchains; i++)
			if (nft_msg_named(c, NFT_MSG_DELRULE, ks->chains[i]) <
			    0)
				return -1;
		for (i = 0; i < ks->nsets; i++) {
			if (strcmp(ks->sets[i], NFT_SET_LEARNED4) == 0 ||
			    strcmp(ks->sets[i], NFT_SET_LEARNED6) == 0 ||
			    strcmp(ks->sets[i], NFT_SET_LIMITED4) == 0 ||
			    strcmp(ks->sets[i], NFT_SET_LIMITED6) == 0 ||
			    (c->o->queue_kind != NFT_QUEUE_NONE &&
			        (strcmp(ks->sets[i], NFT_SET_HOLD4) == 0 ||
			            strcmp(ks->sets[i], NFT_SET_HOLD6) == 0)))
				continue;
			if (nft_msg_named(c, NFT_MSG_DELSET, ks->sets[i]) < 0)
				return -1;
		}
		for (i = 0; i < ks->nchains; i++)
			if (!name_in(ks->chains[i], our_chains, 3) &&
			    nft_msg_named(c, NFT_MSG_DELCHAIN, ks->chains[i]) <
			        0)
				return -1;
	}
	return 0;
}

/* The named counters and the learned/limited sets with their changes. */
static int
emit_learned_sets(struct bctx *c, const struct nft_kstate *ks)
{
	const struct nft_opts *o = c->o;
	size_t i;

	for (i = 0; i < NFT_NCOUNTERS; i++)
		if (nft_msg_named(c, NFT_MSG_NEWOBJ, counter_names[i]) < 0)
			return -1;
	/* An adopted set gets the size of this configuration too (kernels
	 * that cannot resize keep theirs: see nft_apply_policy). */
	if (nft_msg_set(c, NFT_SET_LEARNED4, NFT_TYPE_IPADDR, 4,
	        NFT_SET_TIMEOUT, nft_learned_kernel_size(o->learned_max)) < 0 ||
	    nft_msg_set(c, NFT_SET_LEARNED6, NFT_TYPE_IP6ADDR, 16,
	        NFT_SET_TIMEOUT, nft_learned_kernel_size(o->learned_max)) < 0 ||
	    nft_msg_set(c, NFT_SET_LIMITED4, nft_rule_limited_type(4), 12,
	        NFT_SET_TIMEOUT | NFT_SET_INTERVAL | NFT_SET_CONCAT,
	        NFT_LIMITED_PER_ADDR *
	            nft_learned_kernel_size(o->learned_max)) < 0 ||
	    nft_msg_set(c, NFT_SET_LIMITED6, nft_rule_limited_type(6), 24,
	        NFT_SET_TIMEOUT | NFT_SET_INTERVAL | NFT_SET_CONCAT,
	        NFT_LIMITED_PER_ADDR *
	            nft_learned_kernel_size(o->learned_max)) < 0)
		return -1;
	if (ks != NULL && ks->ndrop != 0 &&
	    nft_batch_del_learn_(c->b, ks->drop, ks->ndrop, c->e) < 0)
		return -1;
	/* what a policy update opens (names whose limits changed) */
	if (ks != NULL && ks->nadd != 0 &&
	    nft_batch_add_learn_(
	        c->b, ks->add, ks->nadd, 1, UINT32_MAX, false, c->e) < 0)
		return -1;
	/* what the proxy must now see (names a binding now covers) */
	if (nft_queue_hold_sets(c, nft_learned_kernel_size(o->learned_max)) <
	        0 ||
	    (ks != NULL && ks->nhold != 0 &&
	        c->o->queue_kind != NFT_QUEUE_NONE &&
	        nft_batch_add_hold_(
	            c->b, ks->hold, ks->nhold, 1, UINT32_MAX, c->e) < 0))
		return -1;

	return 0;
}

/* Port and address sets of the options. */
static int
emit_static_sets(struct bctx *c, struct static_sets *ss)
{
	const struct nft_opts *o = c->o;
	struct policy_port_range pr[NFT_PORTS_MAX];
	size_t i;

	/* Static sets. */
	if (o->nprotected_ports != 0) {
		for (i = 0; i < o->nprotected_ports; i++)
			pr[i].lo = pr[i].hi = o->protected_ports[i];
		if (nft_msg_port_set(
		        c, "protected_ports", pr, o->nprotected_ports) < 0)
			return -1;
	}
	if (o->ninbound_ports != 0) {
		for (i = 0; i < o->ninbound_ports; i++)
			pr[i].lo = pr[i].hi = o->inbound_ports[i];
		if (nft_msg_port_set(
		        c, "inbound_ports", pr, o->ninbound_ports) < 0)
			return -1;
	}
	if (o->proxy_port != 0 && o->nintercept_ports != 0) {
		for (i = 0; i < o->nintercept_ports; i++)
			pr[i].lo = pr[i].hi = o->intercept_ports[i];
		if (nft_msg_port_set(
		        c, "intercept_ports", pr, o->nintercept_ports) < 0)
			return -1;
	}
	if (emit_prefix_list_set(c,
	        (const char *const[]){"ns_exempt4", "ns_exempt6"}, o->ns_exempt,
	        o->nns_exempt, ss->ns) < 0)
		return -1;
	if (o->block_doh_443 &&
	    emit_prefix_list_set(c, (const char *const[]){"doh4", "doh6"},
	        o->doh_block, o->ndoh_block, ss->doh) < 0)
		return -1;

	return 0;
}

/* The three chains. */
static int
emit_chains(struct bctx *c)
{
	/* Chains (no-ops when adopted; the filter policy is re-asserted). */
	if (nft_msg_chain(c, NFT_CHAIN_DENY, -1, NULL, 0, 0) < 0 ||
	    nft_msg_chain(c, NFT_CHAIN_NAT, NF_INET_LOCAL_OUT, "nat",
	        NFT_PRIO_NAT_OUT, NF_ACCEPT) < 0 ||
	    nft_msg_chain(c, NFT_CHAIN_FILTER, NF_INET_LOCAL_OUT, "filter",
	        NFT_PRIO_FILTER_OUT, NF_DROP) < 0)
		return -1;

	return 0;
}

/* Chain deny: log (rate limited), then fail fast. */
static int
emit_deny_chain(struct bctx *c)
{
	const struct nft_opts *o = c->o;
	const struct rrow rows[] = {
	    {.s = {.v = V_LOG,
	         .log_rate = o->log_rate > 1000 ? 1000 : o->log_rate},
	        .skip = o->log_rate == 0},
	    {.s = {.l4proto = IPPROTO_TCP, .v = V_TCP_RESET}},
	    {.s = {.v = V_ICMPX}},
	};

	return nft_rule_rows(c, NFT_CHAIN_DENY, rows, NROWS(rows));
}

/* Chain nat_out: own sockets exempt, then every port 53 to the resolver. */
static int
emit_nat_chain(struct bctx *c, const struct static_sets *ss)
{
	const struct nft_opts *o = c->o;
	const struct rrow rows[] = {
	    {.s = {.mark = true, .v = V_ACCEPT}},
	    {.s = {.dport = 53, .v = V_ACCEPT},
	        .per_family = true,
	        .daddr_set = {ss->ns[0], ss->ns[1]}},
	    /* th dport is only read after an l4proto match. */
	    {.s = {.dport = 53, .v = V_REDIRECT, .redir_port = o->dns_port},
	        .l4proto = {IPPROTO_TCP, IPPROTO_UDP}},
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport_set = "intercept_ports",
	         .v = V_REDIRECT,
	         .redir_port = o->proxy_port},
	        .per_family = true,
	        .daddr_set = {NFT_SET_LEARNED4, NFT_SET_LEARNED6},
	        .skip = o->proxy_port == 0 || o->nintercept_ports == 0},
	};

	/* the redirect is the last row: in-flight judging goes before it */
	return nft_rule_rows(c, NFT_CHAIN_NAT, rows, NROWS(rows) - 1) < 0 ||
	        nft_queue_nat_rows(c) < 0
	    ? -1
	    : nft_rule_row(c, NFT_CHAIN_NAT, &rows[NROWS(rows) - 1]);
}

/* filter_out, 1: source-routed packets. */
static int
filter_source_route(struct bctx *c)
{
	/* Source routing (IPv4 LSRR/SSRR, any IPv6 routing header): the
	 * header's destination is a hop, the final one hides in the
	 * option, so the rules below would judge the wrong address. Any
	 * user may set IP_OPTIONS and IPV6_RTHDR. Before the ct rules: an
	 * established flow may not grow a route either. */
	static const struct rrow rows[] = {
	    {.s = {.nfproto = NFPROTO_IPV4,
	         .ip4_option = 131 /* IPOPT_LSRR */,
	         .v = V_DENY}},
	    {.s = {.nfproto = NFPROTO_IPV4,
	         .ip4_option = 137 /* IPOPT_SSRR */,
	         .v = V_DENY}},
	    {.s = {.nfproto = NFPROTO_IPV6, .ip6_rthdr = true, .v = V_DENY}},
	};

	return nft_rule_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/*
 * filter_out, 1b: UDP's two conntrack accepts (rows 1 and 3 of
 * filter_conntrack, for UDP alone), ahead of in-flight judging's rows:
 * those only ever concern TCP flows (the pending mark is set on TCP by
 * nat_out, verdict marks come on queued TCP packets, a cut marks TCP
 * flows refused: nft_ctmsg.c), so for UDP the outcome is the same and
 * the walk shorter. Every DNS query and answer of the sandbox is a UDP
 * packet of an established flow: accepted at the 4th and 5th rule
 * instead of the 10th and 12th (bench/README.md, "Issue 36 item 4").
 * l4proto is compared first: any other packet pays one compare a row.
 */
static int
filter_udp_conntrack(struct bctx *c)
{
	static const struct rrow rows[] = {
	    {.s = {.l4_first = true,
	         .l4proto = IPPROTO_UDP,
	         .ct_estrel = true,
	         .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
	         .v = V_ACCEPT}},
	    {.s = {.l4_first = true,
	         .l4proto = IPPROTO_UDP,
	         .ct_state = NF_CT_STATE_BIT(IP_CT_ESTABLISHED),
	         .oif_lo = true,
	         .v = V_ACCEPT}},
	};

	return nft_rule_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 2: established and related flows. */
static int
filter_conntrack(struct bctx *c)
{
	const uint32_t est = NF_CT_STATE_BIT(IP_CT_ESTABLISHED);
	const struct rrow rows[] = {
	    /* Flows the sandbox started: every packet, original direction. */
	    {.s = {.ct_estrel = true,
	         .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
	         .v = V_ACCEPT}},
	    /* What is left of established/related goes in the reply
	     * direction of a flow a peer started. ICMP errors about inbound
	     * packets (the kernel's; no unprivileged socket sends them) and
	     * replies inside the pod (oif lo) pass; so do replies of inbound
	     * TCP connections, a listening socket's (the sandbox's services:
	     * execd, reached on the pod IP), only from the operator's
	     * inbound ports when pinned. Inbound-started UDP and ICMP
	     * "flows" (a peer's one datagram that the sandbox would answer
	     * for ever) fall through to the policy: an answer leaves only
	     * where the sandbox may send anyway. */
	    {.s = {.ct_state = NF_CT_STATE_BIT(IP_CT_RELATED), .v = V_ACCEPT}},
	    {.s = {.ct_state = est, .oif_lo = true, .v = V_ACCEPT}},
	    {.s = {.ct_state = est,
	         .l4proto = IPPROTO_TCP,
	         .sport_set =
	             c->o->ninbound_ports != 0 ? "inbound_ports" : NULL,
	         .v = V_ACCEPT}},
	    /* the kernel's echo replies to a peer's ping (they carry the
	     * peer's payload; no unprivileged socket sends a reply) */
	    {.s = {.ct_state = est,
	         .nfproto = NFPROTO_IPV4,
	         .l4proto = IPPROTO_ICMP,
	         .icmp6_lo = 0, /* echo-reply */
	         .icmp6_hi = 0,
	         .icmp_type = true,
	         .v = V_ACCEPT}},
	    {.s = {.ct_state = est,
	         .nfproto = NFPROTO_IPV6,
	         .l4proto = IPPROTO_ICMPV6,
	         .icmp6_lo = 129, /* echo-reply */
	         .icmp6_hi = 129,
	         .icmp_type = true,
	         .v = V_ACCEPT}},
	};

	return nft_rule_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 3: egressd's own packets, its source ports, ICMPv6 ND. */
static int
filter_own(struct bctx *c)
{
	static const struct rrow rows[] = {
	    /* conntrack cannot see socket marks: nft_cut_denied_flows()
	     * knows egressd's own flows by this ct mark and leaves them
	     * alone */
	    {.s = {.mark = true,
	         .ct_mark_set = true,
	         .counter = "own",
	         .v = V_ACCEPT}},
	    /* egressd's own UDP source ports: the sandbox may never start a
	     * flow from one, or egressd's next socket there would inherit
	     * its NAT. */
	    {.s = {.l4proto = IPPROTO_UDP,
	         .sport_lo = EGRESSD_DNS_SPORT_LO,
	         .sport_hi = EGRESSD_DNS_SPORT_HI,
	         .v = V_DENY}},
	    /* ICMPv6 RS/RA/NS/NA and MLDv2 reports, or IPv6 dies. */
	    {.s = {.nfproto = NFPROTO_IPV6,
	         .l4proto = IPPROTO_ICMPV6,
	         .icmp6_lo = 133,
	         .icmp6_hi = 136,
	         .counter = "nd",
	         .v = V_ACCEPT}},
	    {.s = {.nfproto = NFPROTO_IPV6,
	         .l4proto = IPPROTO_ICMPV6,
	         .icmp6_lo = 143,
	         .icmp6_hi = 143,
	         .counter = "nd",
	         .v = V_ACCEPT}},
	};

	return nft_rule_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 4: exempt nameservers, protected ports, resolver, proxy,
 * loopback. */
static int
filter_local(struct bctx *c, const struct static_sets *ss)
{
	static const uint8_t lo4[4] = {127, 0, 0, 1};
	static const uint8_t lo6[16] = {[15] = 1};
	const struct nft_opts *o = c->o;
	const struct rrow rows[] = {
	    /* The upstream proxy: egressd's own sockets only (accepted
	     * above); the sandbox never tunnels through it, whatever the
	     * policy allows (an operator's CIDR that covers it, loopback). */
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport = o->uproxy_port,
	         .v = V_DENY},
	        .per_family = true,
	        .daddr = {o->uproxy_family == 4 ? o->uproxy_addr : NULL,
	            o->uproxy_family == 6 ? o->uproxy_addr : NULL},
	        .skip = o->uproxy_port == 0},
	    /* Operator-exempt nameservers (not redirected above). */
	    {.s = {.dport = 53, .counter = "ns_exempt", .v = V_ACCEPT},
	        .l4proto = {IPPROTO_UDP, IPPROTO_TCP},
	        .per_family = true,
	        .daddr_set = {ss->ns[0], ss->ns[1]}},
	    /* The operator's one exception: execd's relay (a named uid) to
	     * the API on loopback; the token still guards the API. */
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport = o->api_uid_port,
	         .skuid = &o->api_uid,
	         .counter = "api_uid",
	         .v = V_ACCEPT},
	        .per_family = true,
	        .daddr = {lo4, lo6},
	        .skip = o->api_uid_port == 0},
	    /* Control API and operator ports: no other unmarked socket
	     * reaches them on any local address (127/8, ::1, the
	     * namespace's own addresses). */
	    {.s = {.dport_set = "protected_ports",
	         .fib_local = true,
	         .counter = "api_block",
	         .v = V_DENY},
	        .l4proto = {IPPROTO_TCP, IPPROTO_UDP},
	        .skip = o->nprotected_ports == 0},
	    /* The resolver, by destination and port: after the NAT redirect
	     * the packet still carries its original oif (THREATS traps). */
	    {.s = {.dport = o->dns_port, .counter = "dns", .v = V_ACCEPT},
	        .l4proto = {IPPROTO_UDP, IPPROTO_TCP},
	        .per_family = true,
	        .daddr = {lo4, lo6}},
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport = o->proxy_port,
	         .counter = "proxy",
	         .v = V_ACCEPT},
	        .per_family = true,
	        .daddr = {lo4, lo6},
	        .skip = o->proxy_port == 0},
	    {.s = {.oif_lo = true, .counter = "loopback", .v = V_ACCEPT}},
	};

	return nft_rule_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 5: channels that bypass the resolver. */
static int
filter_channels(struct bctx *c, const struct static_sets *ss)
{
	/* Alternate resolvers and channels egressd cannot see. */
	const struct rrow rows[] = {
	    /* DoT, and DoQ on udp */
	    {.s = {.dport = 853, .counter = "dot", .v = V_DENY},
	        .l4proto = {IPPROTO_TCP, IPPROTO_UDP}},
	    {.s = {.l4proto = IPPROTO_UDP,
	         .dport = 443,
	         .counter = "quic",
	         .v = V_DENY}},
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport = 443,
	         .counter = "doh",
	         .v = V_DENY},
	        .per_family = true,
	        .daddr_set = {ss->doh[0], ss->doh[1]}},
	};

	return nft_rule_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 6: the policy layers, learned sets, the default. */
static int
filter_policy(struct bctx *c, const struct policy *p)
{
	static const struct rrow learned = {
	    .s = {.counter = "learned", .v = V_ACCEPT},
	    .per_family = true,
	    .daddr_set = {NFT_SET_LEARNED4, NFT_SET_LEARNED6}};
	struct rspec s;

	/* Policy IP/CIDR layers with the internal ranges before user rules. */
	if (emit_layers(c, p) < 0 ||
	    nft_rule_row(c, NFT_CHAIN_FILTER, &learned) < 0)
		return -1;
	/* Names with port/protocol limits: their elements are the exceptions
	 * to the default, what they may reach under default deny, what they
	 * may not under default allow. */
	if (nft_rule_limited(c, 4, p->default_action) < 0 ||
	    nft_rule_limited(c, 6, p->default_action) < 0)
		return -1;
	memset(&s, 0, sizeof(s));
	s.chain = NFT_CHAIN_FILTER;
	if (p->default_action == POLICY_ALLOW) {
		s.counter = "default_allow";
		s.v = V_ACCEPT;
	} else {
		s.counter = "default_deny";
		s.v = V_DENY;
	}
	return nft_rule_msg(c, &s);
}

/* Chain filter_out, in order. */
static int
emit_filter_chain(
    struct bctx *c, const struct policy *p, const struct static_sets *ss)
{
	if (filter_source_route(c) < 0 || filter_udp_conntrack(c) < 0 ||
	    nft_queue_filter_rows(c) < 0 || filter_conntrack(c) < 0 ||
	    filter_own(c) < 0 || filter_local(c, ss) < 0 ||
	    filter_channels(c, ss) < 0)
		return -1;
	return filter_policy(c, p);
}

static int
build_ruleset(
    struct bctx *c, const struct policy *p, const struct nft_kstate *ks)
{
	struct static_sets ss = {{NULL, NULL}, {NULL, NULL}};

	if (emit_table(c, ks) < 0 || emit_learned_sets(c, ks) < 0 ||
	    emit_static_sets(c, &ss) < 0 || nft_queue_sets(c) < 0 ||
	    emit_chains(c) < 0 || emit_deny_chain(c) < 0 ||
	    emit_nat_chain(c, &ss) < 0)
		return -1;
	return emit_filter_chain(c, p, &ss);
}

int
nft_build_ruleset(const struct policy *p, const struct nft_opts *o,
    const struct nft_kstate *ks, struct nft_batch **out, struct err *e)
{
	struct bctx c = {.o = o, .e = e};

	*out = NULL;
	if (check_opts(o, e) < 0)
		return -1;
	c.b = nft_batch_new_();
	if (c.b == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if (nft_batch_begin_(c.b, e) < 0 || build_ruleset(&c, p, ks) < 0 ||
	    nft_batch_finish_(c.b, e) < 0) {
		nft_batch_free(c.b);
		return -1;
	}
	*out = c.b;
	return 0;
}
