/*
 * nft_rule: one rule spec (struct rspec) -> the expressions of one rule,
 * and the rows of a chain (struct rrow) -> its NEWRULE messages.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <linux/netfilter/xt_bpf.h>
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
#include "egressd/nft/nft_rule.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_bounds.h"

static int
add_expr(struct nftnl_rule *r, struct nftnl_expr *x)
{
	if (x == NULL)
		return -1;
	nftnl_rule_add_expr(r, x);
	return 0;
}

/* add_expr after the one string attribute x has (copied by libnftnl:
 * a failed copy frees x and fails the rule) */
static int
add_expr_str(
    struct nftnl_rule *r, struct nftnl_expr *x, uint16_t type, const char *v)
{
	if (nftnl_expr_set_str(x, type, v) < 0) {
		nftnl_expr_free(x);
		return -1;
	}
	return add_expr(r, x);
}

/* Loads meta key into dreg (concatenations use several registers). */
static int
e_meta_reg(struct nftnl_rule *r, uint32_t dreg, uint32_t key)
{
	struct nftnl_expr *x = nftnl_expr_alloc("meta");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_DREG, dreg);
	return add_expr(r, x);
}

static int
e_meta(struct nftnl_rule *r, uint32_t key)
{
	return e_meta_reg(r, NFT_REG_1, key);
}

static int
e_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *x = nftnl_expr_alloc("cmp");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(x, NFTNL_EXPR_CMP_DATA, data, len);
	return add_expr(r, x);
}

static int
e_payload_reg(struct nftnl_rule *r, uint32_t dreg, uint32_t base, uint32_t off,
    uint32_t len)
{
	struct nftnl_expr *x = nftnl_expr_alloc("payload");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_LEN, len);
	return add_expr(r, x);
}

static int
e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
	return e_payload_reg(r, NFT_REG_1, base, off, len);
}

static int
e_lookup_reg(struct nftnl_rule *r, uint32_t sreg, const char *set)
{
	struct nftnl_expr *x = nftnl_expr_alloc("lookup");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_LOOKUP_SREG, sreg);
	return add_expr_str(r, x, NFTNL_EXPR_LOOKUP_SET, set);
}

static int
e_lookup(struct nftnl_rule *r, const char *set)
{
	return e_lookup_reg(r, NFT_REG_1, set);
}

static int
e_objref(struct nftnl_rule *r, const char *counter)
{
	struct nftnl_expr *x = nftnl_expr_alloc("objref");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
	return add_expr_str(r, x, NFTNL_EXPR_OBJREF_IMM_NAME, counter);
}

static int
e_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
	struct nftnl_expr *x = nftnl_expr_alloc("immediate");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	if (chain != NULL)
		return add_expr_str(r, x, NFTNL_EXPR_IMM_CHAIN, chain);
	return add_expr(r, x);
}

static int
e_reject(struct nftnl_rule *r, uint32_t type, uint8_t code)
{
	struct nftnl_expr *x = nftnl_expr_alloc("reject");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(x, NFTNL_EXPR_REJECT_CODE, code);
	return add_expr(r, x);
}

static int
e_redirect(struct nftnl_rule *r, uint16_t port)
{
	struct nftnl_expr *x = nftnl_expr_alloc("immediate");
	uint16_t be = htons(port);

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(x, NFTNL_EXPR_IMM_DATA, &be, sizeof(be));
	if (add_expr(r, x) < 0)
		return -1;
	x = nftnl_expr_alloc("redir");
	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	nftnl_expr_set_u32(
	    x, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
	return add_expr(r, x);
}

static int
e_log(struct nftnl_rule *r, uint32_t rate)
{
	struct nftnl_expr *x = nftnl_expr_alloc("limit");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u64(x, NFTNL_EXPR_LIMIT_RATE, rate);
	nftnl_expr_set_u64(x, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_LIMIT_BURST, NFT_LIMIT_BURST);
	nftnl_expr_set_u32(x, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(x, NFTNL_EXPR_LIMIT_FLAGS, 0);
	if (add_expr(r, x) < 0)
		return -1;
	x = nftnl_expr_alloc("log");
	if (x == NULL)
		return -1;
	return add_expr_str(r, x, NFTNL_EXPR_LOG_PREFIX, "egressd deny: ");
}

static int
e_ct_load(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *x = nftnl_expr_alloc("ct");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_CT_KEY, key);
	nftnl_expr_set_u32(x, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	return add_expr(r, x);
}

/* ct mark set reg 1. */
static int
e_ct_mark_store(struct nftnl_rule *r)
{
	struct nftnl_expr *x = nftnl_expr_alloc("ct");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
	nftnl_expr_set_u32(x, NFTNL_EXPR_CT_SREG, NFT_REG_1);
	return add_expr(r, x);
}

/* A TCP Fast Open option (kind 34) longer than a bare cookie request:
 * it carries a cookie, so the SYN may carry data (RFC 7413 4.1). */
static int
e_tfo_cookie(struct nftnl_rule *r)
{
	struct nftnl_expr *x = nftnl_expr_alloc("exthdr");
	uint8_t two = 2;

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_DREG, NFT_REG_1);
	nftnl_expr_set_u8(x, NFTNL_EXPR_EXTHDR_TYPE, 34);
	nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_OFFSET, 1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_LEN, 1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_OP, NFT_EXTHDR_OP_TCPOPT);
	if (add_expr(r, x) < 0)
		return -1;
	return e_cmp(r, NFT_CMP_GT, &two, 1);
}

/* reg 1 &= mask (len bytes, at most 4). */
static int
e_and(struct nftnl_rule *r, const void *mask, uint32_t len)
{
	struct nftnl_expr *x = nftnl_expr_alloc("bitwise");
	const uint32_t zero = 0;

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_LEN, len);
	nftnl_expr_set(x, NFTNL_EXPR_BITWISE_MASK, mask, len);
	nftnl_expr_set(x, NFTNL_EXPR_BITWISE_XOR, &zero, len);
	return add_expr(r, x);
}

/* The transport header's byte at off, masked, equals want. */
static int
e_th_byte(struct nftnl_rule *r, uint32_t off, uint8_t mask, uint8_t want)
{
	if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, off, 1) < 0 ||
	    e_and(r, &mask, 1) < 0)
		return -1;
	return e_cmp(r, NFT_CMP_EQ, &want, 1);
}

/* tcp flags & (syn | ack) == syn: a connection's first packet (or its
 * retransmission), not the SYN/ACK. */
static int
e_syn_only(struct nftnl_rule *r)
{
	return e_th_byte(r, 13, 0x12, 0x02);
}

/*
 * A TCP segment that carries no payload, its header doff 32-bit words:
 * the IPv4 total length, or the IPv6 payload length with TCP the next
 * header, is exactly the headers' (IPv4 without options), and the data
 * offset is doff. A segment with IPv4 options or an IPv6 extension
 * header never matches; nor could a payload hide past the length the
 * receiver reads.
 */
static int
e_tcp_bare(struct nftnl_rule *r, uint8_t nfproto, uint8_t doff)
{
	uint8_t tcp = IPPROTO_TCP;
	uint16_t len;

	if (nfproto == NFPROTO_IPV4) {
		len = htons((uint16_t)(20 + 4 * doff));
		if (e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 2, 2) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &len, 2) < 0)
			return -1;
	} else {
		len = htons((uint16_t)(4 * doff));
		if (e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 6, 1) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &tcp, 1) < 0 ||
		    e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 4, 2) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &len, 2) < 0)
			return -1;
	}
	return e_th_byte(r, 12, 0xf0, (uint8_t)(doff << 4));
}

/* The queue verdict as an expression of r: no bypass, one queue. */
int
nft_rule_queue_expr(struct nftnl_rule *r, enum nft_queue_kind k, uint16_t num)
{
	struct nftnl_expr *x;
	struct xt_NFQ_info_v3 *info;

	if (k == NFT_QUEUE_NATIVE) {
		if ((x = nftnl_expr_alloc("queue")) == NULL)
			return -1;
		nftnl_expr_set_u16(x, NFTNL_EXPR_QUEUE_NUM, num);
		nftnl_expr_set_u16(x, NFTNL_EXPR_QUEUE_TOTAL, 1);
		nftnl_expr_set_u16(x, NFTNL_EXPR_QUEUE_FLAGS, 0);
		nftnl_rule_add_expr(r, x);
		return 0;
	}
	if (k != NFT_QUEUE_COMPAT || (x = nftnl_expr_alloc("target")) == NULL)
		return -1;
	/* libnftnl keeps (and frees) the info pointer itself */
	if ((info = calloc(1, sizeof(*info))) == NULL) {
		nftnl_expr_free(x);
		return -1;
	}
	info->queuenum = num;
	info->queues_total = 1;
	info->flags = 0; /* no NFQ_FLAG_BYPASS: fail closed */
	nftnl_expr_set_u32(x, NFTNL_EXPR_TG_REV, 3);
	nftnl_expr_set(x, NFTNL_EXPR_TG_INFO, info, sizeof(*info));
	if (nftnl_expr_set_str(x, NFTNL_EXPR_TG_NAME, "NFQUEUE") < 0) {
		nftnl_expr_free(x);
		return -1;
	}
	nftnl_rule_add_expr(r, x);
	return 0;
}

/* ct mark, ct state (established,related and other bits), ct
 * direction. The mark first: rows that compare it (in-flight judging's)
 * are ones nearly every packet fails, by its mark, at the first
 * compare. */
static int
rule_ct(struct nftnl_rule *r, const struct rspec *s)
{
	uint8_t u8;

	if (s->ct_mark_eq != 0 &&
	    (e_ct_load(r, NFT_CT_MARK) < 0 ||
	        e_cmp(r, NFT_CMP_EQ, &s->ct_mark_eq, sizeof(s->ct_mark_eq)) <
	            0))
		return -1;
	if (s->ct_estrel || s->ct_state != 0) {
		uint32_t mask = s->ct_state, zero = 0;

		if (s->ct_estrel)
			mask |= NF_CT_STATE_BIT(IP_CT_ESTABLISHED) |
			    NF_CT_STATE_BIT(IP_CT_RELATED);
		if (e_ct_load(r, NFT_CT_STATE) < 0 ||
		    e_and(r, &mask, sizeof(mask)) < 0 ||
		    e_cmp(r, NFT_CMP_NEQ, &zero, sizeof(zero)) < 0)
			return -1;
	}
	if (s->ct_no_dnat) {
		uint32_t dnat = IPS_DST_NAT, zero = 0;

		if (e_ct_load(r, NFT_CT_STATUS) < 0 ||
		    e_and(r, &dnat, sizeof(dnat)) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &zero, sizeof(zero)) < 0)
			return -1;
	}
	if (s->ct_dir != 0) {
		if (e_ct_load(r, NFT_CT_DIRECTION) < 0)
			return -1;
		u8 = (uint8_t)(s->ct_dir - 1);
		if (e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	return 0;
}

/* Family, transport protocol, IPv4 option / IPv6 routing header, ICMP type
 * range. */
static int
rule_proto(struct nftnl_rule *r, const struct rspec *s)
{
	uint8_t u8;

	if (s->nfproto != 0) {
		u8 = s->nfproto;
		if (e_meta(r, NFT_META_NFPROTO) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	if (s->l4proto != 0) {
		u8 = s->l4proto;
		if (e_meta(r, NFT_META_L4PROTO) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	if (s->tfo_cookie && e_tfo_cookie(r) < 0)
		return -1;
	if (s->synack && e_th_byte(r, 13, 0x12, 0x12) < 0)
		return -1;
	if (s->syn_only && e_syn_only(r) < 0)
		return -1;
	if (s->tcp_bare_doff != 0 &&
	    e_tcp_bare(r, s->nfproto, s->tcp_bare_doff) < 0)
		return -1;
	if (s->ip4_option != 0 || s->ip6_rthdr) {
		struct nftnl_expr *x = nftnl_expr_alloc("exthdr");

		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_DREG, NFT_REG_1);
		nftnl_expr_set_u8(x, NFTNL_EXPR_EXTHDR_TYPE,
		    s->ip6_rthdr ? IPPROTO_ROUTING : s->ip4_option);
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_OFFSET, 0);
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_LEN, 1);
		nftnl_expr_set_u32(
		    x, NFTNL_EXPR_EXTHDR_FLAGS, NFT_EXTHDR_F_PRESENT);
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_OP,
		    s->ip6_rthdr ? NFT_EXTHDR_OP_IPV6 : NFT_EXTHDR_OP_IPV4);
		if (add_expr(r, x) < 0)
			return -1;
		u8 = 1;
		if (e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	if (s->icmp6_hi != 0 || s->icmp_type) {
		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1) < 0 ||
		    e_cmp(r, NFT_CMP_GTE, &s->icmp6_lo, 1) < 0 ||
		    e_cmp(r, NFT_CMP_LTE, &s->icmp6_hi, 1) < 0)
			return -1;
	}
	return 0;
}

/* Destination address, source port range, destination port, source port
 * set. */
static int
rule_ports(struct nftnl_rule *r, const struct rspec *s)
{
	uint16_t be16;

	if (s->daddr != NULL || s->daddr_set != NULL) {
		bool v4 = s->nfproto == NFPROTO_IPV4;

		if (e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 16 : 24,
		        v4 ? 4 : 16) < 0)
			return -1;
		if (s->daddr != NULL &&
		    e_cmp(r, NFT_CMP_EQ, s->daddr, v4 ? 4 : 16) < 0)
			return -1;
		if (s->daddr_set != NULL && e_lookup(r, s->daddr_set) < 0)
			return -1;
	}
	if (s->sport_hi != 0) {
		/* Big-endian bytes compare like the numbers they hold. */
		uint16_t lo = htons(s->sport_lo), hi = htons(s->sport_hi);

		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2) < 0 ||
		    e_cmp(r, NFT_CMP_GTE, &lo, 2) < 0 ||
		    e_cmp(r, NFT_CMP_LTE, &hi, 2) < 0)
			return -1;
	}
	if (s->dport != 0 || s->dport_set != NULL) {
		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2) < 0)
			return -1;
		be16 = htons(s->dport);
		if (s->dport != 0 && e_cmp(r, NFT_CMP_EQ, &be16, 2) < 0)
			return -1;
		if (s->dport_set != NULL && e_lookup(r, s->dport_set) < 0)
			return -1;
	}
	if (s->sport_set != NULL) {
		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2) < 0 ||
		    e_lookup(r, s->sport_set) < 0)
			return -1;
	}
	return 0;
}

/* Output interface lo, local destination (fib), socket owner, ct mark set
 * from meta mark. */
static int
rule_route(struct nftnl_rule *r, const struct rspec *s)
{
	uint32_t u32;

	if (s->oif_lo) {
		u32 = LOOPBACK_IFINDEX;
		if (e_meta(r, NFT_META_OIF) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32)) < 0)
			return -1;
	}
	if (s->fib_local) {
		struct nftnl_expr *x = nftnl_expr_alloc("fib");

		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
		nftnl_expr_set_u32(
		    x, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
		nftnl_expr_set_u32(x, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
		if (add_expr(r, x) < 0)
			return -1;
		u32 = RTN_LOCAL;
		if (e_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32)) < 0)
			return -1;
	}
	/* The uid the socket's file was opened with (its fsuid), as the
	 * namespace's owning user namespace sees it; packets without a full
	 * socket (time-wait, the kernel's own) never match. */
	if (s->skuid != NULL &&
	    (e_meta(r, NFT_META_SKUID) < 0 ||
	        e_cmp(r, NFT_CMP_EQ, s->skuid, sizeof(*s->skuid)) < 0))
		return -1;
	if (s->ct_mark_set &&
	    (e_meta(r, NFT_META_MARK) < 0 || e_ct_mark_store(r) < 0))
		return -1;
	if (s->ct_mark_imm != 0) {
		struct nftnl_expr *x = nftnl_expr_alloc("immediate");

		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
		nftnl_expr_set(x, NFTNL_EXPR_IMM_DATA, &s->ct_mark_imm,
		    sizeof(s->ct_mark_imm));
		if (add_expr(r, x) < 0 || e_ct_mark_store(r) < 0)
			return -1;
	}
	return 0;
}

/* The xt_bpf match of a pinned-by-fd program (revision 1, mode
 * FD_ELF): the kernel takes its own reference to the program when the
 * rule is added, so it outlives the fd. */
static int
e_bpf(struct nftnl_rule *r, int fd)
{
	struct nftnl_expr *x = nftnl_expr_alloc("match");
	struct xt_bpf_info_v1 *info;

	if (x == NULL)
		return -1;
	/* libnftnl keeps (and frees) the info pointer itself */
	if ((info = calloc(1, sizeof(*info))) == NULL) {
		nftnl_expr_free(x);
		return -1;
	}
	info->mode = XT_BPF_MODE_FD_ELF;
	info->fd = fd;
	nftnl_expr_set_u32(x, NFTNL_EXPR_MT_REV, 1);
	nftnl_expr_set(x, NFTNL_EXPR_MT_INFO, info, sizeof(*info));
	return add_expr_str(r, x, NFTNL_EXPR_MT_NAME, "bpf");
}

/* The BPF match, then the packet mark set (after any ct mark). */
static int
rule_bpf(struct nftnl_rule *r, const struct rspec *s)
{
	struct nftnl_expr *x;

	if (s->bpf && e_bpf(r, s->bpf_fd) < 0)
		return -1;
	if (s->meta_mark_imm == 0)
		return 0;
	if ((x = nftnl_expr_alloc("immediate")) == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(x, NFTNL_EXPR_IMM_DATA, &s->meta_mark_imm,
	    sizeof(s->meta_mark_imm));
	if (add_expr(r, x) < 0 || (x = nftnl_expr_alloc("meta")) == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_KEY, NFT_META_MARK);
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_SREG, NFT_REG_1);
	return add_expr(r, x);
}

/* Counter, then the verdict. */
static int
rule_verdict(struct nftnl_rule *r, const struct rspec *s)
{
	if (s->counter != NULL && e_objref(r, s->counter) < 0)
		return -1;
	switch (s->v) {
	case V_NONE:
		return 0;
	case V_ACCEPT:
		return e_verdict(r, NF_ACCEPT, NULL);
	case V_DENY:
		return e_verdict(r, NFT_JUMP, NFT_CHAIN_DENY);
	case V_REDIRECT:
		return e_redirect(r, s->redir_port);
	case V_TCP_RESET:
		return e_reject(r, NFT_REJECT_TCP_RST, 0);
	case V_ICMPX:
		return e_reject(r, NFT_REJECT_ICMPX_UNREACH,
		    NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	case V_LOG:
		return e_log(r, s->log_rate);
	case V_DROP:
		return e_verdict(r, NF_DROP, NULL);
	case V_QUEUE:
		return 0; /* nft_rule_msg: it needs the options */
	}
	return -1;
}

static int
rule_exprs(struct nftnl_rule *r, const struct rspec *s)
{
	/* The order is the evaluation order (struct rspec). */
	if (rule_ct(r, s) < 0 || rule_proto(r, s) < 0 || rule_ports(r, s) < 0 ||
	    rule_bpf(r, s) < 0 || rule_route(r, s) < 0)
		return -1;
	return rule_verdict(r, s);
}

/* Frees r and reports the allocation that failed: -1. */
static int
rule_nomem(struct bctx *c, struct nftnl_rule *r)
{
	nftnl_rule_free(r);
	err_set(c->e, "nft: out of memory");
	return -1;
}

/* A NEWRULE appended to chain, labelled with its place and counter; r
 * (from nft_msg_obj_new()) is freed. */
static int
rule_append(struct bctx *c, struct nftnl_rule *r, const char *chain,
    const char *counter)
{
	char what[NFT_LABEL_MAX];

	snprintf(what, sizeof(what), "%s #%zu (%s)", chain, c->b->nmsgs,
	    counter != NULL ? counter : "-");
	return nft_msg_obj(c, NFT_MSG_NEWRULE, r, what);
}

int
nft_rule_msg(struct bctx *c, const struct rspec *s)
{
	struct nftnl_rule *r = nft_msg_obj_new(c, NFT_MSG_NEWRULE, s->chain);
	uint32_t mark = c->o->mark;
	struct rspec t = *s;

	if (r == NULL)
		return -1;
	if (s->l4_first) {
		uint8_t u8 = s->l4proto;

		if (e_meta(r, NFT_META_L4PROTO) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return rule_nomem(c, r);
		t.l4proto = 0; /* compared */
	}
	/* a SYN test first: nearly every packet fails it there */
	if (s->syn_only) {
		uint8_t u8 = IPPROTO_TCP;

		if (e_meta(r, NFT_META_L4PROTO) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0 || e_syn_only(r) < 0)
			return rule_nomem(c, r);
		t.l4proto = 0; /* compared */
		t.syn_only = false;
	}
	if ((s->mark &&
	        (e_meta(r, NFT_META_MARK) < 0 ||
	            e_cmp(r, NFT_CMP_EQ, &mark, sizeof(mark)) < 0)) ||
	    (s->not_mark &&
	        (e_meta(r, NFT_META_MARK) < 0 ||
	            e_cmp(r, NFT_CMP_NEQ, &mark, sizeof(mark)) < 0)) ||
	    (s->meta_mark_eq != 0 &&
	        (e_meta(r, NFT_META_MARK) < 0 ||
	            e_cmp(r, NFT_CMP_EQ, &s->meta_mark_eq,
	                sizeof(s->meta_mark_eq)) < 0)) ||
	    rule_exprs(r, &t) < 0 ||
	    (s->v == V_QUEUE &&
	        nft_rule_queue_expr(r, c->o->queue_kind, c->o->queue_num) < 0))
		return rule_nomem(c, r);
	return rule_append(c, r, s->chain, s->counter);
}

/* s once, or once per family of the row (per_family). */
static int
msg_row_46(struct bctx *c, const struct rrow *row, struct rspec s)
{
	static const uint8_t nfproto[2] = {NFPROTO_IPV4, NFPROTO_IPV6};
	size_t f;

	if (!row->per_family)
		return nft_rule_msg(c, &s);
	for (f = 0; f < 2; f++) {
		if (row->daddr[f] == NULL && row->daddr_set[f] == NULL)
			continue;
		s.nfproto = nfproto[f];
		s.daddr = row->daddr[f];
		s.daddr_set = row->daddr_set[f];
		if (nft_rule_msg(c, &s) < 0)
			return -1;
	}
	return 0;
}

int
nft_rule_row(struct bctx *c, const char *chain, const struct rrow *row)
{
	struct rspec s = row->s;
	size_t p;

	if (row->skip)
		return 0;
	s.chain = chain;
	if (row->l4proto[0] == 0)
		return msg_row_46(c, row, s);
	for (p = 0; p < 2 && row->l4proto[p] != 0; p++) {
		s.l4proto = row->l4proto[p];
		if (msg_row_46(c, row, s) < 0)
			return -1;
	}
	return 0;
}

/* The rows of a chain, in order. */
int
nft_rule_rows(
    struct bctx *c, const char *chain, const struct rrow *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (nft_rule_row(c, chain, &rows[i]) < 0)
			return -1;
	return 0;
}

uint32_t
nft_rule_limited_type(int family)
{
	uint32_t a = family == 4 ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR;

	return ((a << NFT_TYPE_BITS | NFT_TYPE_INET_PROTO) << NFT_TYPE_BITS) |
	    NFT_TYPE_INET_SERVICE;
}

/*
 * "ip daddr . meta l4proto . th dport @limited4" (or ip6): the address in
 * the first 32-bit registers, then l4proto, then the port, one lookup.
 * Under default allow the verdict is deny (counted as user_deny).
 */
int
nft_rule_limited(struct bctx *c, int family, enum policy_action def)
{
	struct nftnl_rule *r =
	    nft_msg_obj_new(c, NFT_MSG_NEWRULE, NFT_CHAIN_FILTER);
	uint8_t nfp = family == 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
	uint32_t w = family == 4 ? 1 : 4; /* address in 32-bit words */
	const char *counter = def == POLICY_DENY ? "learned" : "user_deny";

	if (r == NULL)
		return -1;
	if (e_meta(r, NFT_META_NFPROTO) < 0 ||
	    e_cmp(r, NFT_CMP_EQ, &nfp, 1) < 0 ||
	    e_payload_reg(r, NFT_REG32_00, NFT_PAYLOAD_NETWORK_HEADER,
	        family == 4 ? 16 : 24, w * 4) < 0 ||
	    e_meta_reg(r, NFT_REG32_00 + w, NFT_META_L4PROTO) < 0 ||
	    e_payload_reg(r, NFT_REG32_00 + w + 1, NFT_PAYLOAD_TRANSPORT_HEADER,
	        2, 2) < 0 ||
	    e_lookup_reg(r, NFT_REG32_00,
	        family == 4 ? NFT_SET_LIMITED4 : NFT_SET_LIMITED6) < 0 ||
	    e_objref(r, counter) < 0 ||
	    (def == POLICY_DENY ? e_verdict(r, NF_ACCEPT, NULL)
	                        : e_verdict(r, NFT_JUMP, NFT_CHAIN_DENY)) < 0)
		return rule_nomem(c, r);
	return rule_append(c, r, NFT_CHAIN_FILTER, counter);
}
