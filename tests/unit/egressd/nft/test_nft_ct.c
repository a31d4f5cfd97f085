/*
 * nft_ct: the ctnetlink delete builder (pure, golden bytes and a decode),
 * and nft_cut_denied_flows() against the kernel in a throwaway network
 * namespace (root only; otherwise the kernel cases skip themselves).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include <cmocka.h>
#include <libmnl/libmnl.h>

#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"
#include "policy/policy.h"
#include "ts_netns.h"
#include "ts_policy.h"

static bool have_netns;

/* ---- pure: the delete message ---- */

static void
hex(const uint8_t *b, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/*
 * Golden: TCP 198.51.100.2:40000 -> 203.0.113.20:7, id 0x01020304,
 * zone 0. Decoded by hand: nlmsghdr(len 0x50, type 0x0102 = ctnetlink
 * DELETE, flags 0x0005 = REQUEST|ACK, seq 0x11223344, pid 0), nfgenmsg
 * (AF_INET, v0, res 0), CTA_TUPLE_ORIG|NESTED { CTA_TUPLE_IP|NESTED {
 * V4_SRC, V4_DST }, CTA_TUPLE_PROTO|NESTED { NUM 6, SRC_PORT 0x9c40,
 * DST_PORT 0x0007 } }, CTA_ID 0x01020304 (big endian).
 */
static const char golden_tcp4[] = "50000000020105004433221100000000"
                                  "02000000"
                                  "34000180"
                                  "14000180"
                                  "0800"
                                  "0100"
                                  "c6336402"
                                  "0800"
                                  "0200"
                                  "cb007114"
                                  "1c000280"
                                  "0500"
                                  "0100"
                                  "06000000"
                                  "0600"
                                  "0200"
                                  "9c400000"
                                  "0600"
                                  "0300"
                                  "00070000"
                                  "0800"
                                  "0c00"
                                  "01020304";

static void
test_delete_golden(void **state)
{
	struct nft_ct_flow f;
	uint8_t buf[512];
	char got[1100];
	size_t n;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.family = 4;
	f.proto = IPPROTO_TCP;
	inet_pton(AF_INET, "198.51.100.2", f.src);
	inet_pton(AF_INET, "203.0.113.20", f.dst);
	f.sport = 40000;
	f.dport = 7;
	f.id = 0x01020304;
	n = nft_build_ct_delete(&f, 0x11223344, buf, sizeof(buf));
	assert_int_equal(n, 0x50);
	hex(buf, n, got);
	assert_string_equal(got, golden_tcp4);
}

struct dec {
	int proto, type, code;
	uint16_t id16, sport, dport;
	uint32_t ctid, zone, mark;
	unsigned msg; /* IPCTNL_MSG_CT_DELETE or _NEW */
	bool src, dst;
};

static int
any_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;

	tb[mnl_attr_get_type(a) & 0xff] = a;
	return MNL_CB_OK;
}

/* Decodes with libmnl, independently of the builder's layout. */
static void
decode(const uint8_t *buf, size_t n, int family, struct dec *d)
{
	const struct nlmsghdr *nlh = (const void *)buf;
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[64] = {0}, *tt[64] = {0}, *ti[64] = {0},
	                    *tp[64] = {0};

	memset(d, 0, sizeof(*d));
	assert_true(mnl_nlmsg_ok(nlh, (int)n));
	assert_int_equal(nlh->nlmsg_len, n);
	assert_int_equal(nlh->nlmsg_type >> 8, NFNL_SUBSYS_CTNETLINK);
	d->msg = nlh->nlmsg_type & 0xff;
	assert_true(
	    d->msg == IPCTNL_MSG_CT_DELETE || d->msg == IPCTNL_MSG_CT_NEW);
	assert_int_equal(nlh->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK);
	assert_int_equal(g->nfgen_family, family == 4 ? AF_INET : AF_INET6);
	assert_true(mnl_attr_parse(nlh, sizeof(*g), any_cb, tb) >= 0);
	assert_non_null(tb[CTA_TUPLE_ORIG]);
	assert_null(tb[CTA_TUPLE_REPLY]);
	assert_true(mnl_attr_parse_nested(tb[CTA_TUPLE_ORIG], any_cb, tt) >= 0);
	assert_true(mnl_attr_parse_nested(tt[CTA_TUPLE_IP], any_cb, ti) >= 0);
	assert_true(
	    mnl_attr_parse_nested(tt[CTA_TUPLE_PROTO], any_cb, tp) >= 0);
	d->src = ti[family == 4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC] != NULL &&
	    mnl_attr_get_payload_len(
	        ti[family == 4 ? CTA_IP_V4_SRC : CTA_IP_V6_SRC]) ==
	        (family == 4 ? 4u : 16u);
	d->dst = ti[family == 4 ? CTA_IP_V4_DST : CTA_IP_V6_DST] != NULL;
	d->proto = mnl_attr_get_u8(tp[CTA_PROTO_NUM]);
	if (tp[CTA_PROTO_SRC_PORT] != NULL)
		d->sport = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_SRC_PORT]));
	if (tp[CTA_PROTO_DST_PORT] != NULL)
		d->dport = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_DST_PORT]));
	if (family == 6 && tp[CTA_PROTO_ICMPV6_ID] != NULL) {
		d->id16 = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_ICMPV6_ID]));
		d->type = mnl_attr_get_u8(tp[CTA_PROTO_ICMPV6_TYPE]);
		d->code = mnl_attr_get_u8(tp[CTA_PROTO_ICMPV6_CODE]);
	} else if (family == 4 && tp[CTA_PROTO_ICMP_ID] != NULL) {
		d->id16 = ntohs(mnl_attr_get_u16(tp[CTA_PROTO_ICMP_ID]));
		d->type = mnl_attr_get_u8(tp[CTA_PROTO_ICMP_TYPE]);
		d->code = mnl_attr_get_u8(tp[CTA_PROTO_ICMP_CODE]);
	}
	if (tb[CTA_ID] != NULL)
		d->ctid = ntohl(mnl_attr_get_u32(tb[CTA_ID]));
	if (tb[CTA_ZONE] != NULL)
		d->zone = ntohs(mnl_attr_get_u16(tb[CTA_ZONE]));
	if (tb[CTA_MARK] != NULL)
		d->mark = ntohl(mnl_attr_get_u32(tb[CTA_MARK]));
}

static void
test_delete_decodes(void **state)
{
	struct nft_ct_flow f;
	struct dec d;
	uint8_t buf[512];
	size_t n;

	(void)state;
	/* UDP over IPv6 with a zone, no id */
	memset(&f, 0, sizeof(f));
	f.family = 6;
	f.proto = IPPROTO_UDP;
	inet_pton(AF_INET6, "2001:db8:1::2", f.src);
	inet_pton(AF_INET6, "2001:db8:2::9", f.dst);
	f.sport = 5353;
	f.dport = 9;
	f.zone = 7;
	n = nft_build_ct_delete(&f, 1, buf, sizeof(buf));
	assert_true(n > 0);
	decode(buf, n, 6, &d);
	assert_true(d.src && d.dst);
	assert_int_equal(d.proto, IPPROTO_UDP);
	assert_int_equal(d.sport, 5353);
	assert_int_equal(d.dport, 9);
	assert_int_equal(d.ctid, 0);
	assert_int_equal(d.zone, 7);
	assert_int_equal(d.msg, IPCTNL_MSG_CT_DELETE);
	assert_int_equal(d.mark, 0);
	/* judged only means something for TCP: UDP is still deleted */
	f.judged = true;
	n = nft_build_ct_delete(&f, 1, buf, sizeof(buf));
	decode(buf, n, 6, &d);
	assert_int_equal(d.msg, IPCTNL_MSG_CT_DELETE);
	/* ICMP echo */
	memset(&f, 0, sizeof(f));
	f.family = 4;
	f.proto = IPPROTO_ICMP;
	f.icmp_id = 0x4242;
	f.icmp_type = 8;
	f.id = 99;
	n = nft_build_ct_delete(&f, 2, buf, sizeof(buf));
	assert_true(n > 0);
	decode(buf, n, 4, &d);
	assert_int_equal(d.proto, IPPROTO_ICMP);
	assert_int_equal(d.id16, 0x4242);
	assert_int_equal(d.type, 8);
	assert_int_equal(d.ctid, 99);
	/* ICMPv6 echo */
	f.family = 6;
	f.proto = IPPROTO_ICMPV6;
	f.icmp_type = 128;
	n = nft_build_ct_delete(&f, 3, buf, sizeof(buf));
	assert_true(n > 0);
	decode(buf, n, 6, &d);
	assert_int_equal(d.type, 128);
	assert_int_equal(d.id16, 0x4242);
}

/* A flow in-flight judging passed is cut by marking it refused, not
 * deleted: a deleted download would be picked up again from the
 * origin's next packet as an inbound flow (nft.h). No NLM_F_CREATE:
 * an entry gone meanwhile is ENOENT, as for a delete. */
static void
test_cut_judged_marks(void **state)
{
	struct nft_ct_flow f;
	struct dec d;
	uint8_t buf[512];
	size_t n;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.family = 4;
	f.proto = IPPROTO_TCP;
	inet_pton(AF_INET, "198.51.100.2", f.src);
	inet_pton(AF_INET, "203.0.113.10", f.dst);
	f.sport = 40001;
	f.dport = 443;
	f.id = 77;
	f.judged = true;
	n = nft_build_ct_delete(&f, 5, buf, sizeof(buf));
	assert_true(n > 0 && n <= NFT_CT_DEL_MSG_MAX);
	decode(buf, n, 4, &d);
	assert_int_equal(d.msg, IPCTNL_MSG_CT_NEW);
	assert_int_equal(d.mark, NFT_QMARK_REFUSED);
	assert_int_equal(d.sport, 40001);
	assert_int_equal(d.dport, 443);
	assert_int_equal(d.ctid, 77);
}

static void
test_delete_refuses(void **state)
{
	struct nft_ct_flow f;
	uint8_t buf[512];

	(void)state;
	memset(&f, 0, sizeof(f));
	f.family = 4;
	f.proto = IPPROTO_SCTP;
	assert_int_equal(nft_build_ct_delete(&f, 1, buf, sizeof(buf)), 0);
	f.proto = IPPROTO_ICMPV6; /* with family 4 */
	assert_int_equal(nft_build_ct_delete(&f, 1, buf, sizeof(buf)), 0);
	f.family = 5;
	f.proto = IPPROTO_TCP;
	assert_int_equal(nft_build_ct_delete(&f, 1, buf, sizeof(buf)), 0);
	f.family = 4;
	assert_int_equal(nft_build_ct_delete(&f, 1, buf, 64), 0);
	assert_true(nft_build_ct_delete(&f, 1, buf, sizeof(buf)) > 0);
}

/* ---- kernel ---- */

static void
learn1(struct nft *n, const char *a, const char *name)
{
	struct nft_learn_addr la = {.family = 4, .ttl = 60, .name = name};
	struct err e;

	assert_int_equal(inet_pton(AF_INET, a, la.addr), 1);
	if (nft_learn(n, &la, 1, &e) != 0)
		fail_msg("learn %s: %s", a, e.msg);
}

/* A connected UDP socket (mark 0 = unmarked) that sent one datagram. */
static int
udp_flow(const char *dst, uint16_t port, uint32_t mark)
{
	struct sockaddr_in sin = {
	    .sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	if (mark != 0)
		assert_int_equal(
		    setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)),
		    0);
	inet_pton(AF_INET, dst, &sin.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	if (send(fd, "x", 1, 0) != 1)
		fail_msg("send to %s:%u: %s", dst, port, strerror(errno));
	return fd;
}

/*
 * A datagram "from" dst back to fd's local port, sent through a raw
 * socket: conntrack takes it as the reply of fd's flow (so its next
 * packets are ESTABLISHED) and delivers it over lo.
 */
static void
fake_reply(int fd)
{
	struct sockaddr_in me, peer;
	socklen_t sl = sizeof(me);
	uint8_t pkt[29];
	int r;

	assert_int_equal(getsockname(fd, (struct sockaddr *)&me, &sl), 0);
	sl = sizeof(peer);
	assert_int_equal(getpeername(fd, (struct sockaddr *)&peer, &sl), 0);
	memset(pkt, 0, sizeof(pkt));
	pkt[0] = 0x45;
	pkt[2] = 0;
	pkt[3] = sizeof(pkt);
	pkt[8] = 64;
	pkt[9] = IPPROTO_UDP;
	memcpy(pkt + 12, &peer.sin_addr, 4);
	memcpy(pkt + 16, &me.sin_addr, 4);
	memcpy(pkt + 20, &peer.sin_port, 2);
	memcpy(pkt + 22, &me.sin_port, 2);
	pkt[25] = 9; /* udp length; checksum 0 = none */
	pkt[28] = 'r';
	r = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	assert_true(r >= 0);
	me.sin_port = 0;
	assert_int_equal(
	    sendto(r, pkt, sizeof(pkt), 0, (struct sockaddr *)&me, sizeof(me)),
	    (ssize_t)sizeof(pkt));
	close(r);
	/* the reply arrived: the flow is ESTABLISHED now */
	assert_int_equal(recv(fd, pkt, sizeof(pkt), 0), 1);
}

/* An unmarked UDP flow over IPv6 (one datagram, no reply). */
static int
udp6_flow(const char *dst, uint16_t port)
{
	struct sockaddr_in6 sin6 = {
	    .sin6_family = AF_INET6, .sin6_port = htons(port)};
	int fd = socket(AF_INET6, SOCK_DGRAM, 0);

	assert_true(fd >= 0);
	inet_pton(AF_INET6, dst, &sin6.sin6_addr);
	assert_int_equal(
	    connect(fd, (struct sockaddr *)&sin6, sizeof(sin6)), 0);
	if (send(fd, "x", 1, 0) != 1)
		fail_msg("send to [%s]:%u: %s", dst, port, strerror(errno));
	return fd;
}

/* 0 when a datagram leaves, else errno (EPERM: the ruleset dropped it). */
static int
again(int fd)
{
	return send(fd, "y", 1, 0) == 1 ? 0 : errno;
}

static const char *tight1 =
    "{\"defaultAction\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"a.example\"},"
    "{\"action\":\"allow\",\"target\":\"b.example\"},"
    "{\"action\":\"allow\",\"target\":\"203.0.113.5\"},"
    "{\"action\":\"allow\",\"target\":\"2001:db8:2::5\"}]}";
/* b.example and the CIDR gone; the local /24 explicitly denied */
static const char *tight2 =
    "{\"defaultAction\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"a.example\"},"
    "{\"action\":\"deny\",\"target\":\"198.51.100.0/24\"}]}";

static void
test_cut_on_tighten(void **state)
{
	struct policy *p1 = ts_policy_json(tight1),
	              *p2 = ts_policy_json(tight2), *p3;
	struct nft_opts o;
	struct nft *n;
	struct err e;
	size_t cut = 99;
	int f5, f20, f21, fown, flocal, lis, f6;

	(void)state;
	if (!have_netns)
		skip();
	nft_opts_init(&o);
	n = nft_new(&o, NULL, &e);
	assert_non_null(n);
	if (nft_apply_policy(n, p1, &e) != 0)
		fail_msg("apply 1: %s", e.msg);
	learn1(n, "203.0.113.20", "b.example");
	learn1(n, "203.0.113.21", "a.example");
	f5 = udp_flow("203.0.113.5", 9, 0); /* CIDR rule */
	f20 = udp_flow("203.0.113.20", 9, 0); /* b.example */
	f21 = udp_flow("203.0.113.21", 9, 0); /* a.example */
	fown = udp_flow("203.0.113.20", 10, o.mark); /* egressd's own */
	{
		struct sockaddr_in sin = {
		    .sin_family = AF_INET, .sin_port = htons(9)};

		/* a listener, so the local flow sees no port unreachable */
		lis = socket(AF_INET, SOCK_DGRAM, 0);
		inet_pton(AF_INET, "198.51.100.2", &sin.sin_addr);
		assert_int_equal(
		    bind(lis, (struct sockaddr *)&sin, sizeof(sin)), 0);
	}
	flocal = udp_flow("198.51.100.2", 9, 0); /* to a local address */
	f6 = udp6_flow("2001:db8:2::5", 9); /* IPv6 CIDR rule */
	fake_reply(f5);
	fake_reply(f20);
	fake_reply(f21);
	/* nothing denied yet: nothing cut */
	if (nft_cut_denied_flows(n, p1, &cut, &e) != 0) {
		if (strstr(e.msg, "conntrack") != NULL) {
			print_message(
			    "conntrack netlink unavailable: %s\n", e.msg);
			nft_free(n);
			skip();
		}
		fail_msg("cut 1: %s", e.msg);
	}
	assert_int_equal(cut, 0);
	if (nft_apply_policy(n, p2, &e) != 0)
		fail_msg("apply 2: %s", e.msg);
	/* the hole this closes: established flows still pass */
	assert_int_equal(again(f5), 0);
	assert_int_equal(again(f20), 0);
	if (nft_cut_denied_flows(n, p2, &cut, &e) != 0)
		fail_msg("cut 2: %s", e.msg);
	assert_int_equal(cut, 3); /* .5, .20 and 2001:db8:2::5 */
	assert_int_equal(again(f5), EPERM);
	assert_int_equal(again(f20), EPERM);
	assert_int_equal(again(f21), 0);
	assert_int_equal(again(fown), 0);
	assert_int_equal(again(flocal), 0);
	/* idempotent: nothing left to cut */
	assert_int_equal(nft_cut_denied_flows(n, p2, &cut, &e), 0);
	assert_int_equal(cut, 0);
	/* a.example gone too: its flow goes, own and local ones stay */
	p3 = ts_policy_json("{\"defaultAction\":\"deny\",\"egress\":[]}");
	if (nft_apply_policy(n, p3, &e) != 0)
		fail_msg("apply 3: %s", e.msg);
	assert_int_equal(nft_cut_denied_flows(n, p3, &cut, &e), 0);
	assert_int_equal(cut, 1);
	assert_int_equal(again(f21), EPERM);
	assert_int_equal(again(fown), 0);
	assert_int_equal(again(flocal), 0);
	close(f5);
	close(f20);
	close(f21);
	close(fown);
	close(flocal);
	close(lis);
	close(f6);
	nft_free(n);
	policy_unref(p1);
	policy_unref(p2);
	policy_unref(p3);
}

/*
 * Ports on a name (issue 16 item 7): a tightening from "a.example" to
 * "a.example, udp 9 only" cuts the flow to its learned address on port
 * 10 and keeps the one on port 9.
 */
static void
test_cut_unlisted_port(void **state)
{
	struct policy *p1 = ts_policy_json(
	                  "{\"defaultAction\":\"deny\",\"egress\":["
	                  "{\"action\":\"allow\",\"target\":"
	                  "\"a.example\"}]}"),
	              *p2 = ts_policy_json(
	                  "{\"defaultAction\":\"deny\",\"egress\":["
	                  "{\"action\":\"allow\",\"target\":\"a.example\","
	                  "\"ports\":[9],\"protocols\":[\"udp\"]}]}");
	struct nft_opts o;
	struct nft *n;
	struct err e;
	size_t cut = 99;
	int f9, f10;

	(void)state;
	if (!have_netns)
		skip();
	nft_opts_init(&o);
	n = nft_new(&o, NULL, &e);
	assert_non_null(n);
	if (nft_apply_policy(n, p1, &e) != 0)
		fail_msg("apply 1: %s", e.msg);
	learn1(n, "203.0.113.22", "a.example");
	f9 = udp_flow("203.0.113.22", 9, 0);
	f10 = udp_flow("203.0.113.22", 10, 0);
	fake_reply(f9);
	fake_reply(f10);
	if (nft_apply_policy(n, p2, &e) != 0)
		fail_msg("apply 2: %s", e.msg);
	if (nft_cut_denied_flows(n, p2, &cut, &e) != 0) {
		if (strstr(e.msg, "conntrack") != NULL) {
			nft_free(n);
			skip();
		}
		fail_msg("cut: %s", e.msg);
	}
	assert_int_equal(cut, 1);
	assert_int_equal(again(f10), EPERM);
	assert_int_equal(again(f9), 0);
	close(f9);
	close(f10);
	nft_free(n);
	policy_unref(p1);
	policy_unref(p2);
}

/* Loop turns, counted by a timer that fires on every turn. */
struct turns {
	struct event *ev;
	unsigned n;
};

static void
turn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct turns *t = arg;
	struct timeval zero = {0, 0};

	(void)fd;
	(void)what;
	t->n++;
	(void)event_add(t->ev, &zero);
}

struct pass {
	bool over, more;
	int rc;
	size_t cut;
	unsigned turns_at_end;
	struct turns *t;
};

static void
pass_done(void *arg, int rc, size_t cut, bool more, const char *why)
{
	struct pass *ps = arg;

	if (rc != 0)
		print_message("pass failed: %s\n", why ? why : "?");
	ps->over = true;
	ps->rc = rc;
	ps->cut = cut;
	ps->more = more;
	ps->turns_at_end = ps->t->n;
}

/*
 * The daemon's cut runs on its loop: 1,500 flows to an address the new
 * policy denies are cut in one pass whose deletes go in chunks of
 * NFT_CT_DEL_PER_SEND, one per loop turn, so the loop turns (a timer
 * counting them fires) at least once per chunk before the pass ends. A
 * pass aborted halfway calls nothing, and the next one cuts the rest.
 */
static void
test_cut_sliced(void **state)
{
	struct policy *p1 = ts_policy_json(tight1),
	              *p2 = ts_policy_json(tight2);
	struct event_base *base;
	struct turns t = {NULL, 0};
	struct timeval zero = {0, 0};
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct pass ps = {.t = &t}, first = {.t = &t};
	struct nft_opts o;
	struct nft_cut *c;
	struct nft *n;
	struct err e;
	const unsigned nflows = 1500;
	unsigned i, start;
	size_t total;
	int fd;

	(void)state;
	if (!have_netns)
		skip();
	nft_opts_init(&o);
	n = nft_new(&o, NULL, &e);
	assert_non_null(n);
	if (nft_apply_policy(n, p1, &e) != 0)
		fail_msg("apply 1: %s", e.msg);
	learn1(n, "203.0.113.30", "b.example");
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	inet_pton(AF_INET, "203.0.113.30", &sin.sin_addr);
	for (i = 0; i < nflows; i++) {
		sin.sin_port = htons((uint16_t)(20000 + i));
		if (sendto(fd, "x", 1, 0, (struct sockaddr *)&sin,
		        sizeof(sin)) != 1)
			fail_msg("send %u: %s", i, strerror(errno));
	}
	if (nft_apply_policy(n, p2, &e) != 0)
		fail_msg("apply 2: %s", e.msg);
	base = event_base_new();
	assert_non_null(base);
	t.ev = evtimer_new(base, turn_cb, &t);
	assert_non_null(t.ev);
	assert_int_equal(event_add(t.ev, &zero), 0);
	c = nft_cut_new(n, base, &e);
	assert_non_null(c);

	/* aborted after the dump's first slice (1,500 entries take more
	 * than one slice, and no delete goes before the dump ends): done is
	 * never called, nothing is deleted, the half-read socket is closed */
	if (nft_cut_start(c, p2, pass_done, &first, &e) != 0) {
		if (strstr(e.msg, "conntrack") != NULL)
			skip();
		fail_msg("start: %s", e.msg);
	}
	assert_true(nft_cut_busy(c));
	assert_false(first.over); /* never from inside the start */
	assert_int_equal(event_base_loop(base, EVLOOP_ONCE), 0);
	nft_cut_abort(c);
	assert_false(nft_cut_busy(c));

	total = 0;
	do {
		memset(&ps, 0, sizeof(ps));
		ps.t = &t;
		start = t.n;
		if (nft_cut_start(c, p2, pass_done, &ps, &e) != 0)
			fail_msg("start: %s", e.msg);
		while (!ps.over)
			assert_int_equal(event_base_loop(base, EVLOOP_ONCE), 0);
		assert_int_equal(ps.rc, 0);
		total += ps.cut;
	} while (ps.more);
	assert_false(first.over);
	assert_int_equal(total, nflows);
	/* one pass (1,500 < NFT_CT_DELETE_MAX), its deletes in chunks, one
	 * loop turn each */
	assert_true(ps.turns_at_end - start >=
	    (nflows + NFT_CT_DEL_PER_SEND - 1) / NFT_CT_DEL_PER_SEND);
	/* nothing left: a new pass finds nothing */
	memset(&ps, 0, sizeof(ps));
	ps.t = &t;
	assert_int_equal(nft_cut_start(c, p2, pass_done, &ps, &e), 0);
	while (!ps.over)
		assert_int_equal(event_base_loop(base, EVLOOP_ONCE), 0);
	assert_int_equal(ps.rc, 0);
	assert_int_equal(ps.cut, 0);
	nft_cut_free(c);
	event_free(t.ev);
	event_base_free(base);
	close(fd);
	nft_free(n);
	policy_unref(p1);
	policy_unref(p2);
}

/* ---- pure: how often renewal runs ---- */

/* Renewal must come round within a lease (every half of it) so that an
 * address in use never lapses: with 1 s leases a 1 s tick renewed each
 * one only as it ran out. */
static void
test_renew_interval(void **state)
{
	uint32_t ttl;

	(void)state;
	assert_int_equal(nft_renew_interval_ms(0), NFT_RENEW_MS_MIN);
	assert_int_equal(nft_renew_interval_ms(1), 500);
	assert_int_equal(nft_renew_interval_ms(2), 1000);
	assert_int_equal(nft_renew_interval_ms(4), 2000);
	assert_int_equal(nft_renew_interval_ms(20), 10000);
	assert_int_equal(nft_renew_interval_ms(3600), NFT_RENEW_MS_MAX);
	assert_int_equal(nft_renew_interval_ms(UINT32_MAX), NFT_RENEW_MS_MAX);
	/* every lease is renewed at least twice before it runs out */
	for (ttl = 1; ttl <= 100000; ttl++)
		assert_true((uint64_t)nft_renew_interval_ms(ttl) * 2 <=
		    (uint64_t)ttl * 1000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_delete_golden),
	    cmocka_unit_test(test_delete_decodes),
	    cmocka_unit_test(test_delete_refuses),
	    cmocka_unit_test(test_cut_judged_marks),
	    cmocka_unit_test(test_cut_on_tighten),
	    cmocka_unit_test(test_cut_unlisted_port),
	    cmocka_unit_test(test_cut_sliced),
	    cmocka_unit_test(test_renew_interval),
	};

	have_netns = ts_netns_enter("test_nft_ct");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
