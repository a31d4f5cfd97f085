/*
 * nft_ct: cutting established flows that a policy update now denies.
 * Conntrack is read and edited over ctnetlink with libmnl (no
 * libnetfilter_conntrack): one dump, then IPCTNL_MSG_CT_DELETE for each
 * entry to cut, every ack checked; both on the event loop in slices
 * (nft_ctdump.c), never waited for.
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
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include "egressd/nft/nft_elems.h"
#include "egressd/nft/nft_int.h"
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
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;
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
	return nlh->nlmsg_len;
}

/* ---- local addresses ---- */

struct nft_locals {
	struct policy_prefix a[NFT_LOCAL_ADDRS_MAX];
	size_t n;
};

struct nft_locals *
nft_locals_load_(struct err *e)
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
nft_locals_free_(struct nft_locals *lc)
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

/* ---- the decision ---- */

/* What the filter chain does with a NEW packet of f (policy part). */
static bool
flow_denied(struct nft *n, const struct policy *p, struct nft_twins *tw,
    const struct nft_ct_flow *f)
{
	const struct nft_opts *o = nft_opts_(n);
	const struct policy_rule *r = NULL;
	enum policy_action act;
	unsigned pbit;
	uint16_t port = 0;
	size_t i;
	bool internal = nft_addr_internal_(f->family, f->dst);

	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP) {
		pbit = f->proto == IPPROTO_TCP ? POLICY_PROTO_TCP
		                               : POLICY_PROTO_UDP;
		port = f->dport;
		/* direct DNS to an exempt nameserver is accepted first */
		for (i = 0; port == 53 && i < o->nns_exempt; i++) {
			const struct policy_prefix *x = &o->ns_exempt[i];
			unsigned b;

			if (x->family != f->family)
				continue;
			for (b = 0; b < x->len; b++)
				if (((x->addr[b / 8] ^ f->dst[b / 8]) &
				        (0x80u >> (b % 8))) != 0)
					break;
			if (b == x->len)
				return false;
		}
	} else
		pbit = POLICY_PROTO_ICMP;
	/* without an index no IP rule can match (learned_denied() agrees);
	 * an IPv6 spelling of a denied IPv4 prefix is denied as in the
	 * chain (nft_twins_match_()) */
	act = p->index != NULL
	    ? nft_twins_match_(tw, p, f->family, f->dst, pbit, port, &r)
	    : p->default_action;
	if (r != NULL) {
		if (act == POLICY_DENY)
			return true;
		/* the internal ranges come after the overlays, before user
		 * rules */
		if (r->origin == POLICY_ORIGIN_ALWAYS_ALLOW ||
		    r->origin == POLICY_ORIGIN_INFRA)
			return false;
		return internal;
	}
	if (internal)
		return true;
	/* the learned rules: plain set, then the limited set, whose
	 * elements name protocol and port (a learned address on a port its
	 * names do not list is not open) */
	switch (nft_learned_verdict_(n, f->family, f->dst, f->proto, port)) {
	case 1:
		return false;
	case -1:
		return true;
	}
	return p->default_action == POLICY_DENY;
}

/* ---- the dump ---- */

struct ct_cut {
	struct nft *n;
	const struct policy *p;
	const struct nft_locals *lc;
	struct nft_twins *tw;
	uint32_t mark;
	struct nft_ct_flow *out;
	size_t nout;
	size_t seen; /* entries read */
	bool more; /* candidates beyond NFT_CT_DELETE_MAX */
};

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

bool
nft_ct_outbound_(const struct nlmsghdr *nlh, uint32_t mark,
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

/*
 * Every entry of the dump is judged: no count stops the reading, so
 * conntrack padded with other flows (loopback, inbound) cannot hide one
 * to cut. Only the candidates kept per pass are bounded.
 */
static int
ct_cut_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct ct_cut *d = arg;
	struct nft_ct_flow f;

	d->seen++;
	if (!nft_ct_outbound_(nlh, d->mark, d->lc, false, &f) ||
	    !flow_denied(d->n, d->p, d->tw, &f))
		return MNL_CB_OK;
	if (d->nout == NFT_CT_DELETE_MAX) {
		d->more = true;
		return MNL_CB_OK;
	}
	d->out[d->nout++] = f;
	return MNL_CB_OK;
}

_Static_assert(NFT_CT_DEL_PER_SEND *NFT_CT_DEL_MSG_MAX <= NFT_RECV_BUF,
    "delete messages fit the buffer");

/*
 * Sends the deletes of fl[0..nf) in one write and collects one ack each.
 * *cut counts the entries deleted; ENOENT (ended meanwhile) is no error.
 */
static int
ct_delete(struct nft *n, const struct nft_ct_flow *fl, size_t nf, uint8_t *buf,
    size_t *cut, int *bad_errno)
{
	struct mnl_socket *nl = NULL;
	uint32_t seq0 = 0, seq, portid = 0;
	size_t i, len = 0, k, acked = 0;
	bool got[NFT_CT_DEL_PER_SEND] = {0};
	ssize_t r;

	for (i = 0; i < nf; i++) {
		nl = nft_sock_(n, &seq, &portid);
		if (i == 0)
			seq0 = seq;
		k = nft_build_ct_delete(
		    &fl[i], seq, buf + len, NFT_RECV_BUF - len);
		if (k == 0) {
			*bad_errno = EINVAL;
			return -1;
		}
		len += k;
	}
	if (mnl_socket_sendto(nl, buf, len) < 0) {
		*bad_errno = errno;
		return -1;
	}
	while (acked < nf) {
		const struct nlmsghdr *nlh;
		int left;

		r = mnl_socket_recvfrom(nl, buf, NFT_RECV_BUF);
		if (r < 0) {
			*bad_errno = errno;
			return -1;
		}
		left = (int)r;
		for (nlh = (const struct nlmsghdr *)buf;
		     mnl_nlmsg_ok(nlh, left);
		     nlh = mnl_nlmsg_next(nlh, &left)) {
			const struct nlmsgerr *me;

			if (nlh->nlmsg_type != NLMSG_ERROR ||
			    nlh->nlmsg_seq - seq0 >= nf ||
			    got[nlh->nlmsg_seq - seq0])
				continue; /* not ours (stale) */
			got[nlh->nlmsg_seq - seq0] = true;
			acked++;
			me = mnl_nlmsg_get_payload(nlh);
			if (me->error == 0)
				(*cut)++;
			else if (me->error != -ENOENT && *bad_errno == 0)
				*bad_errno = -me->error;
		}
	}
	return 0;
}

int
nft_ct_forget_(struct nft *n, const struct nft_ct_flow *f, struct err *e)
{
	uint8_t *buf = malloc(NFT_RECV_BUF);
	size_t cut = 0;
	int bad = 0, rc;

	if (buf == NULL) {
		err_set(e, "conntrack delete: out of memory");
		return -1;
	}
	rc = ct_delete(n, f, 1, buf, &cut, &bad);
	free(buf);
	if (rc < 0 || bad != 0) {
		err_set(e, "conntrack delete: %s", strerror(bad ? bad : EIO));
		return -1;
	}
	return 0;
}

/* ---- the cut on the loop ---- */

struct nft_cut {
	struct nft *n;
	struct nft_ctd *ctd;
	struct ct_cut d;
	struct nft_locals *lc;
	struct policy *p; /* referenced while a pass runs */
	size_t cut;
	bool busy;
	nft_cut_done_fn done;
	void *arg;
};

static void
cut_release(struct nft_cut *c)
{
	nft_twins_free_(c->d.tw);
	c->d.tw = NULL;
	nft_locals_free_(c->lc);
	c->lc = NULL;
	policy_unref(c->p);
	c->p = NULL;
	c->busy = false;
}

static void
cut_finish(struct nft_cut *c, int rc, const char *why)
{
	bool more = c->d.more;

	cut_release(c);
	if (c->done != NULL)
		c->done(c->arg, rc, c->cut, rc == 0 && more, why);
}

static void
cut_deleted(void *arg, int rc, const char *why)
{
	cut_finish(arg, rc, why);
}

static void
cut_dumped(void *arg, int rc, const char *why)
{
	struct nft_cut *c = arg;
	struct err e = {""};

	if (rc != 0 || c->d.nout == 0) {
		cut_finish(c, rc, why);
		return;
	}
	if (nft_ctd_delete_(
	        c->ctd, c->d.out, c->d.nout, &c->cut, cut_deleted, c, &e) < 0)
		cut_finish(c, -1, e.msg);
}

struct nft_cut *
nft_cut_new(struct nft *n, struct event_base *base, struct err *e)
{
	struct nft_cut *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		err_set(e, "nft: out of memory");
		return NULL;
	}
	c->n = n;
	c->ctd = nft_ctd_new_(base, NFT_CT_DELETE_MAX, sizeof(*c->d.out), e);
	if (c->ctd == NULL) {
		nft_cut_free(c);
		return NULL;
	}
	return c;
}

void
nft_cut_free(struct nft_cut *c)
{
	if (c == NULL)
		return;
	nft_ctd_free_(c->ctd);
	cut_release(c);
	free(c);
}

bool
nft_cut_busy(const struct nft_cut *c)
{
	return c->busy;
}

void
nft_cut_abort(struct nft_cut *c)
{
	if (!c->busy)
		return;
	nft_ctd_abort_(c->ctd);
	cut_release(c);
}

int
nft_cut_start(struct nft_cut *c, struct policy *p, nft_cut_done_fn done,
    void *arg, struct err *e)
{
	if (c->busy) {
		err_set(e, "nft: a cut pass is already under way");
		return -1;
	}
	memset(&c->d, 0, sizeof(c->d));
	c->d.n = c->n;
	c->d.p = p;
	c->d.mark = nft_mark_(c->n);
	c->d.out = nft_ctd_results_(c->ctd);
	c->cut = 0;
	if ((c->d.tw = nft_twins_new_()) == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if ((c->lc = nft_locals_load_(e)) == NULL) {
		err_prefix(e, "flows not cut");
		cut_release(c);
		return -1;
	}
	c->d.lc = c->lc;
	c->p = policy_ref(p);
	if (nft_ctd_dump_(c->ctd, ct_cut_cb, &c->d, cut_dumped, c, e) < 0) {
		cut_release(c);
		return -1;
	}
	c->busy = true;
	c->done = done;
	c->arg = arg;
	return 0;
}

/* ---- the same, waited for (tools and tests) ---- */

struct cut_wait {
	bool over, more;
	int rc;
	size_t cut;
	char why[ERR_MSG_MAX];
};

static void
cut_wait_done(void *arg, int rc, size_t cut, bool more, const char *why)
{
	struct cut_wait *w = arg;

	w->over = true;
	w->rc = rc;
	w->cut = cut;
	w->more = more;
	(void)snprintf(w->why, sizeof(w->why), "%s", why ? why : "");
}

int
nft_cut_denied_flows(
    struct nft *n, struct policy *p, size_t *cut, struct err *e)
{
	struct event_base *base = event_base_new();
	struct nft_cut *c = NULL;
	size_t total = 0, pass;
	bool more = true;
	int rc = -1;

	if (base == NULL) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	if ((c = nft_cut_new(n, base, e)) == NULL)
		goto out;
	for (pass = 0; more && pass < NFT_CT_CUT_PASSES_MAX; pass++) {
		struct cut_wait w = {.over = false};

		if (nft_cut_start(c, p, cut_wait_done, &w, e) < 0)
			goto out;
		while (!w.over)
			if (event_base_loop(base, EVLOOP_ONCE) < 0) {
				err_set(e, "nft: event loop failed");
				goto out;
			}
		total += w.cut;
		if (w.rc != 0) {
			err_set(e, "%s", w.why);
			goto out;
		}
		more = w.more;
	}
	if (more) {
		err_set(e,
		    "nft: flows still to cut after %d passes of %d "
		    "deletions",
		    NFT_CT_CUT_PASSES_MAX, NFT_CT_DELETE_MAX);
		goto out;
	}
	rc = 0;
out:
	if (cut != NULL)
		*cut = total;
	nft_cut_free(c);
	if (base != NULL)
		event_base_free(base);
	return rc;
}
