/*
 * nft_queue: the NFQUEUE verdict of in-flight judging (docs/proxy.md,
 * "Pass-through judged in flight") and the probe that finds which form
 * of it this kernel has.
 *
 * nftables' own `queue` expression needs CONFIG_NFT_QUEUE, which some
 * kernels this runs on lack ("Could not process rule"); the xtables
 * NFQUEUE target reached through nft_compat (a `target` expression
 * carrying struct xt_NFQ_info_v3, as iptables-nft sends it) does the
 * same. Neither is given a bypass flag: with no reader bound to the
 * queue the kernel drops what it would have queued (fail closed).
 */

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/xt_NFQUEUE.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_conntrack_tuple_common.h>

#include "policy/policy.h"
#include "policy/policy_binding.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_rule.h"

/* The probe's table: created, given one queue rule and deleted in one
 * transaction, so it is never in force and never seen. */
#define NFT_PROBE_TABLE "egressd_probe"
#define NFT_PROBE_CHAIN "probe"

const char *
nft_queue_kind_name(enum nft_queue_kind k)
{
	switch (k) {
	case NFT_QUEUE_NONE:
		return "none";
	case NFT_QUEUE_NATIVE:
		return "nft-queue";
	case NFT_QUEUE_COMPAT:
		return "xt-nfqueue";
	}
	return "?";
}

/* One message of the probe batch: the header for obj's type, its
 * payload, obj freed. */
static int
probe_msg(struct nft_batch *b, uint16_t type, uint16_t flags, void *obj,
    const char *label, struct err *e)
{
	void *p = nft_batch_room_(b, e);
	struct nlmsghdr *nlh;

	if (p == NULL)
		return -1;
	nlh =
	    nftnl_nlmsg_build_hdr(p, type, NFPROTO_INET, flags | NLM_F_ACK, 0);
	if (type == NFT_MSG_NEWTABLE || type == NFT_MSG_DELTABLE)
		nftnl_table_nlmsg_build_payload(nlh, obj);
	else if (type == NFT_MSG_NEWCHAIN)
		nftnl_chain_nlmsg_build_payload(nlh, obj);
	else
		nftnl_rule_nlmsg_build_payload(nlh, obj);
	return nft_batch_push_(b, label, e);
}

int
nft_build_queue_probe(
    enum nft_queue_kind k, uint16_t num, struct nft_batch **out, struct err *e)
{
	struct nft_batch *b = nft_batch_new_();
	struct nftnl_table *t = nftnl_table_alloc();
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nftnl_rule *r = nftnl_rule_alloc();
	int rc = -1;

	*out = NULL;
	if (b == NULL || t == NULL || c == NULL || r == NULL ||
	    nftnl_table_set_str(t, NFTNL_TABLE_NAME, NFT_PROBE_TABLE) < 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NFT_PROBE_TABLE) < 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, NFT_PROBE_CHAIN) < 0 ||
	    nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NFT_PROBE_TABLE) < 0 ||
	    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, NFT_PROBE_CHAIN) < 0 ||
	    nft_rule_queue_expr(r, k, num) < 0) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	if (nft_batch_begin_(b, e) < 0 ||
	    probe_msg(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, t, "NEWTABLE probe",
	        e) < 0 ||
	    probe_msg(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE, c, "NEWCHAIN probe",
	        e) < 0 ||
	    probe_msg(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, r,
	        "NEWRULE probe (queue)", e) < 0 ||
	    probe_msg(b, NFT_MSG_DELTABLE, 0, t, "DELTABLE probe", e) < 0 ||
	    nft_batch_finish_(b, e) < 0)
		goto out;
	*out = b;
	b = NULL;
	rc = 0;
out:
	nft_batch_free(b);
	nftnl_table_free(t);
	nftnl_chain_free(c);
	nftnl_rule_free(r);
	return rc;
}

static bool
queue_on(const struct nft_opts *o)
{
	return o->queue_kind != NFT_QUEUE_NONE && o->nqueue_ports != 0;
}

bool
nft_queue_held(
    const struct nft_opts *o, const struct policy *p, const char *name)
{
	size_t i;

	if (!queue_on(o) || p == NULL || name == NULL)
		return false;
	for (i = 0; i < o->nqueue_ports; i++)
		if ((o->queue_ports[i] == 443 &&
		        policy_binding_covers_host(
		            p, name, POLICY_SCHEME_HTTPS)) ||
		    policy_host_has_request_rules(p, name, o->queue_ports[i]))
			return true;
	return false;
}

/*
 * nat_out, before the proxy redirect: TCP to a queued port of a held
 * address (nft_queue_held) is redirected to the proxy like any
 * intercepted port; the first packet of TCP to a queued port of any
 * other learned address marks its flow PENDING and is not redirected
 * (the rest of filter_out still judges it by address). The same
 * address learned for a held name and for another stays held: the
 * proxy path is always the safe one.
 */
int
nft_queue_nat_rows(struct bctx *c)
{
	const bool off = !queue_on(c->o);
	const struct rrow rows[] = {
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport_set = NFT_SET_QUEUE_PORTS,
	         .v = V_REDIRECT,
	         .redir_port = c->o->proxy_port},
	        .per_family = true,
	        .daddr_set = {NFT_SET_HOLD4, NFT_SET_HOLD6},
	        .skip = off || c->o->proxy_port == 0},
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport_set = NFT_SET_QUEUE_PORTS,
	         .ct_mark_imm = NFT_QMARK_PENDING,
	         .v = V_ACCEPT},
	        .per_family = true,
	        .daddr_set = {NFT_SET_LEARNED4, NFT_SET_LEARNED6},
	        .skip = off},
	};

	return nft_rule_rows(c, NFT_CHAIN_NAT, rows, NROWS(rows));
}

/*
 * filter_out, before the conntrack accepts: a verdict's packet (mark OK
 * or REFUSED, NF_REPEAT) writes its mark into the flow; refused flows
 * are reset for good; established packets of a pending flow go to the
 * queue. A SYN with a Fast Open cookie may carry data no one judged:
 * dropped, so the client retries without it (RFC 7413 sec. 4.2.1).
 * Emitted whenever queueing is on, whatever the policy: a flow marked
 * PENDING under an earlier policy is still judged.
 *
 * First, with queueing on, a SYN that came with an established entry:
 * the kernel's TCP tracker reopens an entry for a new connection on its
 * tuple only when it saw a FIN or the same direction's RST; any other (a
 * server's reset, a reset sent by the deny chain) keeps it, and the new
 * SYN is accepted *with* the old entry (ct state established, its NAT,
 * its mark: OK, and the new hello would never be queued). Its flow is
 * made PENDING again, as nat_out marks a new one (docs/proxy.md, "Reused
 * 5-tuples"). Two rows are emitted always, queueing on or off: a flow marked
 * REFUSED stays reset, and an established packet of a flow still
 * PENDING is reset. With queueing on, the queue row comes first and the
 * reset row sees nothing; with it off (the proxy path, or an egressd
 * restarted with --passthrough-judge proxy while flows it marked in
 * queue mode are waiting for a verdict) no one will ever judge their
 * hello, and the conntrack accept below would let it through unread.
 */
/* A pending flow's segment without payload, accepted (below). */
#define BARE(nfp, doff)                                                        \
	{                                                                      \
		.s = {.ct_state = NF_CT_STATE_BIT(IP_CT_ESTABLISHED),          \
		    .ct_mark_eq = NFT_QMARK_PENDING,                           \
		    .ct_dir = 1 + IP_CT_DIR_ORIGINAL,                          \
		    .nfproto = (nfp),                                          \
		    .l4proto = IPPROTO_TCP,                                    \
		    .tcp_bare_doff = (doff),                                   \
		    .v = V_ACCEPT},                                            \
		.skip = off                                                    \
	}

int
nft_queue_filter_rows(struct bctx *c)
{
	const uint32_t est = NF_CT_STATE_BIT(IP_CT_ESTABLISHED);
	const bool off = c->o->queue_kind == NFT_QUEUE_NONE;
	const struct rrow rows[] = {
	    /* a new connection's SYN on the 5-tuple of an entry that
	     * lives on (the tracker reopens only entries that saw a FIN or
	     * the same direction's RST, and ignores the SYN of any other:
	     * accepted with the old entry, its state, its NAT, its mark):
	     * to a queued port of a learned address, not redirected, not
	     * egressd's own, it is made PENDING again, so the queue judges
	     * the new connection's hello instead of its riding the old
	     * verdict (OK: never judged; REFUSED: reset) */
	    {.s = {.l4proto = IPPROTO_TCP,
	         .syn_only = true,
	         .ct_state = est,
	         .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
	         .ct_no_dnat = true,
	         .not_mark = true,
	         .dport_set = NFT_SET_QUEUE_PORTS,
	         .ct_mark_imm = NFT_QMARK_PENDING},
	        .per_family = true,
	        .daddr_set = {NFT_SET_LEARNED4, NFT_SET_LEARNED6},
	        .skip = off || !queue_on(c->o)},
	    {.s = {.meta_mark_eq = NFT_QMARK_OK,
	         .ct_mark_set = true,
	         .v = V_ACCEPT},
	        .skip = off},
	    {.s = {.meta_mark_eq = NFT_QMARK_REFUSED,
	         .ct_mark_set = true,
	         .v = V_DENY},
	        .skip = off},
	    /* original direction only: the reset the deny chain sends
	     * the client is the flow's reply, locally generated */
	    {.s = {.ct_mark_eq = NFT_QMARK_REFUSED,
	         .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
	         .v = V_DENY}},
	    /* a segment without payload (the handshake's last ACK, a
	     * bare FIN or RST) has nothing to judge, and the queue would
	     * pass it unmarked (nfq_flow_packet): passed here, a trip
	     * through egressd fewer per connection. Linux's TCP headers
	     * are 32 bytes (timestamps) or 20; others take the queue */
	    BARE(NFPROTO_IPV4, 8),
	    BARE(NFPROTO_IPV6, 8),
	    BARE(NFPROTO_IPV4, 5),
	    BARE(NFPROTO_IPV6, 5),
	    {.s = {.ct_state = est,
	         .ct_mark_eq = NFT_QMARK_PENDING,
	         .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
	         .v = V_QUEUE},
	        .skip = off},
	    {.s = {.ct_mark_eq = NFT_QMARK_PENDING,
	         .l4proto = IPPROTO_TCP,
	         .tfo_cookie = true,
	         .v = V_DROP},
	        .skip = off},
	    /* the restart gap: pending and no queue before this row */
	    {.s = {.ct_state = est,
	         .ct_mark_eq = NFT_QMARK_PENDING,
	         .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
	         .v = V_DENY}},
	};

	return nft_rule_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}
#undef BARE

/* The hold sets (size elements: the learned sets' size): learned
 * elements, kept across commits like the learned sets (nft_build.c),
 * declared only while queueing is on. */
int
nft_queue_hold_sets(struct bctx *c, uint32_t size)
{
	if (!queue_on(c->o))
		return 0;
	return nft_msg_set(c, NFT_SET_HOLD4, NFT_TYPE_IPADDR, 4,
	           NFT_SET_TIMEOUT, size) < 0 ||
	        nft_msg_set(c, NFT_SET_HOLD6, NFT_TYPE_IP6ADDR, 16,
	            NFT_SET_TIMEOUT, size) < 0
	    ? -1
	    : 0;
}

/* The queued ports' set. */
int
nft_queue_sets(struct bctx *c)
{
	struct policy_port_range pr[NFT_PORTS_MAX];
	size_t i;

	if (c->o->queue_kind == NFT_QUEUE_NONE || c->o->nqueue_ports == 0)
		return 0;
	for (i = 0; i < c->o->nqueue_ports; i++)
		pr[i].lo = pr[i].hi = c->o->queue_ports[i];
	return nft_msg_port_set(c, NFT_SET_QUEUE_PORTS, pr, c->o->nqueue_ports);
}
