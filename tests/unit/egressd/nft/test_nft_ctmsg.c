/*
 * nft_ctmsg: a conntrack dump entry read into a flow. Entries built with
 * libmnl as the kernel sends them; the TCP state decides whether a flow
 * is over (TIME_WAIT, CLOSE: it renews no learned address).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netfilter/nf_conntrack_tcp.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include <cmocka.h>
#include <libmnl/libmnl.h>

#include "egressd/nft/nft.h"
#include "egressd/nft/nft_ctmsg.h"

#define NO_STATE (-1)

/* One direction's tuple: src:sport -> dst:dport, IPv4, proto. */
static void
put_tuple(struct nlmsghdr *nlh, uint16_t type, const char *src, const char *dst,
    uint8_t proto, uint16_t sport, uint16_t dport)
{
	struct nlattr *t = mnl_attr_nest_start(nlh, type);
	struct nlattr *ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
	struct nlattr *pr;
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, src, &a), 1);
	mnl_attr_put(nlh, CTA_IP_V4_SRC, 4, &a);
	assert_int_equal(inet_pton(AF_INET, dst, &a), 1);
	mnl_attr_put(nlh, CTA_IP_V4_DST, 4, &a);
	mnl_attr_nest_end(nlh, ip);
	pr = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
	mnl_attr_put_u8(nlh, CTA_PROTO_NUM, proto);
	mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(sport));
	mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(dport));
	mnl_attr_nest_end(nlh, pr);
	mnl_attr_nest_end(nlh, t);
}

/* A dump entry: this host (127.0.0.1) to 203.0.113.9:443 over proto,
 * with the TCP state st (NO_STATE: no CTA_PROTOINFO). */
static struct nlmsghdr *
entry(uint8_t *buf, uint8_t proto, int st)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *g;

	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_INET;
	g->version = NFNETLINK_V0;
	put_tuple(
	    nlh, CTA_TUPLE_ORIG, "127.0.0.1", "203.0.113.9", proto, 40000, 443);
	put_tuple(nlh, CTA_TUPLE_REPLY, "203.0.113.9", "127.0.0.1", proto, 443,
	    40000);
	if (st != NO_STATE) {
		struct nlattr *pi = mnl_attr_nest_start(nlh, CTA_PROTOINFO);
		struct nlattr *pt = mnl_attr_nest_start(nlh, CTA_PROTOINFO_TCP);

		mnl_attr_put_u8(nlh, CTA_PROTOINFO_TCP_STATE, (uint8_t)st);
		mnl_attr_nest_end(nlh, pt);
		mnl_attr_nest_end(nlh, pi);
	}
	return nlh;
}

static void
test_tcp_over_by_state(void **state)
{
	static const struct {
		int st;
		bool over;
	} cases[] = {
	    {TCP_CONNTRACK_SYN_SENT, false},
	    {TCP_CONNTRACK_ESTABLISHED, false},
	    {TCP_CONNTRACK_FIN_WAIT, false},
	    {TCP_CONNTRACK_CLOSE_WAIT, false},
	    {TCP_CONNTRACK_LAST_ACK, false},
	    {TCP_CONNTRACK_TIME_WAIT, true},
	    {TCP_CONNTRACK_CLOSE, true},
	    {NO_STATE, false},
	};
	uint8_t buf[MNL_SOCKET_BUFFER_SIZE];
	struct err e = {""};
	struct nft_locals *lc = nft_ctmsg_locals_load(&e);
	struct nft_ct_flow f;
	size_t i;

	(void)state;
	assert_non_null(lc);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_true(nft_ctmsg_outbound(
		    entry(buf, IPPROTO_TCP, cases[i].st), 0, lc, true, &f));
		assert_int_equal(f.proto, IPPROTO_TCP);
		assert_int_equal(f.dport, 443);
		assert_int_equal(f.over, cases[i].over);
	}
	nft_ctmsg_locals_free(lc);
}

/* The state attribute is TCP's: a UDP entry is never over by it. */
static void
test_udp_never_over(void **state)
{
	uint8_t buf[MNL_SOCKET_BUFFER_SIZE];
	struct err e = {""};
	struct nft_locals *lc = nft_ctmsg_locals_load(&e);
	struct nft_ct_flow f;

	(void)state;
	assert_non_null(lc);
	assert_true(nft_ctmsg_outbound(
	    entry(buf, IPPROTO_UDP, NO_STATE), 0, lc, true, &f));
	assert_int_equal(f.proto, IPPROTO_UDP);
	assert_false(f.over);
	nft_ctmsg_locals_free(lc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tcp_over_by_state),
	    cmocka_unit_test(test_udp_never_over),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
