/*
 * nft_ctmsg: conntrack as ctnetlink messages, with no I/O beyond reading the
 * local addresses: the dump request and the delete of one flow written, a
 * dump entry read into a flow and judged outbound (started here, to a
 * remote peer, not redirected, not egressd's own).
 */

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include "egressd/nft/nft_ctmsg.h"
#include "egressd/nft/nft_bounds.h"

static bool
proto_ok(uint8_t proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP ||
	    proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
}

size_t
nft_build_ct_delete(
    const struct nft_ct_flow *f, uint32_t seq, void *buf, size_t buflen)
{
	struct nlmsghdr *nlh;
	struct nfgenmsg *g;
	struct nlattr *tuple, *nest;
	bool v4 = f->family == 4;
	size_t w = v4 ? 4 : 16;

	if ((f->family != 4 && f->family != 6) || !proto_ok(f->proto) ||
	    (f->proto == IPPROTO_ICMP && !v4) ||
	    (f->proto == IPPROTO_ICMPV6 && v4) || buflen < NFT_CT_DEL_MSG_MAX)
		return 0;
	memset(buf, 0, NFT_CT_DEL_MSG_MAX);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) |
	    (f->judged && f->proto == IPPROTO_TCP ? IPCTNL_MSG_CT_NEW
	                                          : IPCTNL_MSG_CT_DELETE);
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = v4 ? AF_INET : AF_INET6;
	g->version = NFNETLINK_V0;
	g->res_id = 0;
	tuple = mnl_attr_nest_start(nlh, CTA_TUPLE_ORIG);
	nest = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	mnl_attr_put(nlh, v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC, w, f->src);
	mnl_attr_put(nlh, v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST, w, f->dst);
	mnl_attr_nest_end(nlh, nest);
	nest = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, f->proto);
	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP) {
		mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(f->sport));
		mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(f->dport));
	} else if (f->proto == IPPROTO_ICMP) {
		mnl_attr_put_u16(nlh, CTA_PROTO_ICMP_ID, htons(f->icmp_id));
		mnl_attr_put_u8(nlh, CTA_PROTO_ICMP_TYPE, f->icmp_type);
		mnl_attr_put_u8(nlh, CTA_PROTO_ICMP_CODE, f->icmp_code);
	} else {
		mnl_attr_put_u16(nlh, CTA_PROTO_ICMPV6_ID, htons(f->icmp_id));
		mnl_attr_put_u8(nlh, CTA_PROTO_ICMPV6_TYPE, f->icmp_type);
		mnl_attr_put_u8(nlh, CTA_PROTO_ICMPV6_CODE, f->icmp_code);
	}
	mnl_attr_nest_end(nlh, nest);
	mnl_attr_nest_end(nlh, tuple);
	/* The id makes the kernel refuse (ENOENT) a different entry that
	 * took the same tuple since the dump. */
	if (f->id != 0)
		mnl_attr_put_u32(nlh, CTA_ID, htonl(f->id));
	if (f->zone != 0)
		mnl_attr_put_u16(nlh, CTA_ZONE, htons(f->zone));
	if (f->judged && f->proto == IPPROTO_TCP)
		mnl_attr_put_u32(nlh, CTA_MARK, htonl(NFT_QMARK_REFUSED));
	return nlh->nlmsg_len;
}

/* ---- local addresses ---- */

struct nft_locals {
	struct policy_prefix a[NFT_LOCAL_ADDRS_MAX];
	size_t n;
};

struct nft_locals *
nft_ctmsg_locals_load(struct err *e)
{
	struct nft_locals *lc;
	struct ifaddrs *ifa, *i;

	if ((lc = calloc(1, sizeof(*lc))) == NULL) {
		err_set(e, "nft: out of memory");
		return NULL;
	}
	if (getifaddrs(&ifa) < 0) {
		err_set(e, "nft: getifaddrs: %s", strerror(errno));
		free(lc);
		return NULL;
	}
	for (i = ifa; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL)
			continue;
		if (i->ifa_addr->sa_family != AF_INET &&
		    i->ifa_addr->sa_family != AF_INET6)
			continue;
		if (lc->n == NFT_LOCAL_ADDRS_MAX) {
			/* a local address we did not see could be taken
			 * for a remote one: then cutting could break
			 * inbound flows */
			freeifaddrs(ifa);
			free(lc);
			err_set(e, "nft: more than %d local addresses",
			    NFT_LOCAL_ADDRS_MAX);
			return NULL;
		}
		if (i->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *s4 =
			    (const void *)i->ifa_addr;

			lc->a[lc->n].family = 4;
			memcpy(lc->a[lc->n].addr, &s4->sin_addr, 4);
		} else {
			const struct sockaddr_in6 *s6 =
			    (const void *)i->ifa_addr;

			lc->a[lc->n].family = 6;
			memcpy(lc->a[lc->n].addr, &s6->sin6_addr, 16);
		}
		lc->n++;
	}
	freeifaddrs(ifa);
	return lc;
}

void
nft_ctmsg_locals_free(struct nft_locals *lc)
{
	free(lc);
}

/* Loopback ranges, or an address of an interface of this namespace. */
static bool
is_local(const struct nft_locals *lc, int family, const uint8_t *a)
{
	static const uint8_t lo6[16] = {[15] = 1};
	size_t i;

	if (family == 4 && a[0] == 127)
		return true;
	if (family == 6 && memcmp(a, lo6, 16) == 0)
		return true;
	for (i = 0; i < lc->n; i++)
		if (lc->a[i].family == family &&
		    memcmp(lc->a[i].addr, a, family == 4 ? 4 : 16) == 0)
			return true;
	return false;
}

/* Where an attribute walk files what it meets: tb[type], types up to max. */
struct attrs {
	const struct nlattr **tb;
	uint16_t max;
};

static int
attrs_cb(const struct nlattr *a, void *data)
{
	const struct attrs *t = data;

	if (mnl_attr_type_valid(a, t->max) >= 0)
		t->tb[mnl_attr_get_type(a)] = a;
	return MNL_CB_OK;
}

/* The attributes nested in a into tb[0..max]; false when a is NULL or
 * malformed. */
static bool
attrs_nested(const struct nlattr *a, const struct nlattr **tb, uint16_t max)
{
	struct attrs t = {tb, max};

	return a != NULL && mnl_attr_parse_nested(a, attrs_cb, &t) >= 0;
}

static bool
attr_bytes(const struct nlattr *a, size_t len, void *out)
{
	if (a == NULL || mnl_attr_get_payload_len(a) != len)
		return false;
	memcpy(out, mnl_attr_get_payload(a), len);
	return true;
}

/* The addresses of one tuple; false when absent or malformed. */
static bool
tuple_addrs(const struct nlattr *tuple, int family, uint8_t *src, uint8_t *dst,
    const struct nlattr **proto)
{
	const struct nlattr *tt[CTA_TUPLE_MAX + 1] = {0};
	const struct nlattr *ti[CTA_IP_MAX + 1] = {0};
	bool v4 = family == 4;
	size_t w = v4 ? 4 : 16;

	if (!attrs_nested(tuple, tt, CTA_TUPLE_MAX) ||
	    !attrs_nested(tt[CTA_TUPLE_IP], ti, CTA_IP_MAX))
		return false;
	if (proto != NULL)
		*proto = tt[CTA_TUPLE_PROTO];
	return attr_bytes(ti[v4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC], w, src) &&
	    attr_bytes(ti[v4 ? CTA_IP_V4_DST : CTA_IP_V6_DST], w, dst);
}

static bool
tuple_proto(const struct nlattr *pa, struct nft_ct_flow *f)
{
	const struct nlattr *tp[CTA_PROTO_MAX + 1] = {0};
	uint16_t be;

	if (!attrs_nested(pa, tp, CTA_PROTO_MAX) ||
	    !attr_bytes(tp[CTA_PROTO_NUM], 1, &f->proto) || !proto_ok(f->proto))
		return false;
	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP) {
		if (!attr_bytes(tp[CTA_PROTO_SRC_PORT], 2, &be))
			return false;
		f->sport = ntohs(be);
		if (!attr_bytes(tp[CTA_PROTO_DST_PORT], 2, &be))
			return false;
		f->dport = ntohs(be);
		return true;
	}
	if (f->proto == IPPROTO_ICMP)
		return attr_bytes(tp[CTA_PROTO_ICMP_ID], 2, &be) &&
		    (f->icmp_id = ntohs(be), true) &&
		    attr_bytes(tp[CTA_PROTO_ICMP_TYPE], 1, &f->icmp_type) &&
		    attr_bytes(tp[CTA_PROTO_ICMP_CODE], 1, &f->icmp_code);
	return attr_bytes(tp[CTA_PROTO_ICMPV6_ID], 2, &be) &&
	    (f->icmp_id = ntohs(be), true) &&
	    attr_bytes(tp[CTA_PROTO_ICMPV6_TYPE], 1, &f->icmp_type) &&
	    attr_bytes(tp[CTA_PROTO_ICMPV6_CODE], 1, &f->icmp_code);
}

/* A TCP entry in TIME_WAIT or CLOSE: the connection is over, conntrack
 * only remembers it (for minutes). Absent or malformed: not over. */
static bool
tcp_over(const struct nlattr *protoinfo)
{
	const struct nlattr *pi[CTA_PROTOINFO_MAX + 1] = {0};
	const struct nlattr *pt[CTA_PROTOINFO_TCP_MAX + 1] = {0};
	uint8_t st;

	if (!attrs_nested(protoinfo, pi, CTA_PROTOINFO_MAX) ||
	    !attrs_nested(pi[CTA_PROTOINFO_TCP], pt, CTA_PROTOINFO_TCP_MAX) ||
	    !attr_bytes(pt[CTA_PROTOINFO_TCP_STATE], 1, &st))
		return false;
	return st == TCP_CONNTRACK_TIME_WAIT || st == TCP_CONNTRACK_CLOSE;
}

bool
nft_ctmsg_outbound(const struct nlmsghdr *nlh, uint32_t mark,
    const struct nft_locals *lc, bool any_proto, struct nft_ct_flow *f)
{
	const struct nlattr *tb[CTA_MAX + 1] = {0};
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *pa = NULL;
	uint8_t rsrc[16], rdst[16];
	uint32_t be32;
	uint16_t be16;

	memset(f, 0, sizeof(*f));
	if (g->nfgen_family == AF_INET)
		f->family = 4;
	else if (g->nfgen_family == AF_INET6)
		f->family = 6;
	else
		return false;
	if (mnl_attr_parse(
	        nlh, sizeof(*g), attrs_cb, &(struct attrs){tb, CTA_MAX}) < 0)
		return false;
	if (!tuple_addrs(tb[CTA_TUPLE_ORIG], f->family, f->src, f->dst, &pa))
		return false;
	if (!tuple_proto(pa, f)) {
		const struct nlattr *tp[CTA_PROTO_MAX + 1] = {0};

		/* renewal counts any protocol (SCTP, GRE, ...) */
		if (!any_proto || !attrs_nested(pa, tp, CTA_PROTO_MAX) ||
		    !attr_bytes(tp[CTA_PROTO_NUM], 1, &f->proto))
			return false;
	}
	/* egressd's own flows carry its mark in the ct mark */
	if (attr_bytes(tb[CTA_MARK], 4, &be32) && ntohl(be32) == mark &&
	    mark != 0)
		return false;
	/* refused by in-flight judging, or already cut by marking: the
	 * ruleset resets what its client sends (and keeps nothing learned) */
	if (attr_bytes(tb[CTA_MARK], 4, &be32) &&
	    ntohl(be32) == NFT_QMARK_REFUSED)
		return false;
	f->over = f->proto == IPPROTO_TCP && tcp_over(tb[CTA_PROTOINFO]);
	f->judged = f->proto == IPPROTO_TCP &&
	    attr_bytes(tb[CTA_MARK], 4, &be32) &&
	    (ntohl(be32) == NFT_QMARK_PENDING || ntohl(be32) == NFT_QMARK_OK);
	/* redirected (DNS, proxy): the peer is egressd, not dst */
	if (attr_bytes(tb[CTA_STATUS], 4, &be32) &&
	    (ntohl(be32) & IPS_DST_NAT) != 0)
		return false;
	/* the reply must come from dst itself (no NAT on the way) */
	if (!tuple_addrs(tb[CTA_TUPLE_REPLY], f->family, rsrc, rdst, NULL) ||
	    memcmp(rsrc, f->dst, f->family == 4 ? 4 : 16) != 0)
		return false;
	/* only flows this namespace started, to somewhere else */
	if (!is_local(lc, f->family, f->src) || is_local(lc, f->family, f->dst))
		return false;
	if (attr_bytes(tb[CTA_ID], 4, &be32))
		f->id = ntohl(be32);
	if (attr_bytes(tb[CTA_ZONE], 2, &be16))
		f->zone = ntohs(be16);
	return true;
}

void
nft_ctmsg_dump_request(void *req, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(req);
	struct nfgenmsg *g;

	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_UNSPEC;
	g->version = NFNETLINK_V0;
	g->res_id = 0;
}
