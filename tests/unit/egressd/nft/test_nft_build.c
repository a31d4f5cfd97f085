/*
 * nft batch builder, without privileges: the pure functions turn a policy
 * into netlink bytes; we decode them back with libnftnl and check the
 * table, chains, rule order (= policy_match_addr precedence), set
 * elements and flags, and compare the whole decoded batch with a golden
 * file (EGRESSD_GOLDEN_UPDATE=1 rewrites it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <libnftnl/set.h>

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"
#include "egressd/nft/nft_elems.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_twins.h"
#include "policy/policy.h"
#include "ts_policy.h"

static const char *basic_policy =
    "{\"defaultAction\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"203.0.113.0/24\","
    "\"ports\":[443,\"8000-8080\",8080],\"protocols\":[\"tcp\"]},"
    "{\"action\":\"deny\",\"target\":\"203.0.113.9\"},"
    "{\"action\":\"allow\",\"target\":\"203.0.113.9\"},"
    "{\"action\":\"allow\",\"target\":\"2001:db8::/32\"},"
    "{\"action\":\"allow\",\"target\":\"a.example\"},"
    "{\"action\":\"allow\",\"target\":\"198.51.100.0/24\","
    "\"protocols\":[\"udp\",\"icmp\"]},"
    "{\"action\":\"allow\",\"target\":\"0.0.0.0/0\",\"ports\":[7],"
    "\"protocols\":[\"udp\"]}],"
    "\"alwaysDeny\":[\"192.0.2.0/24\",\"192.0.2.0/24\"],"
    "\"alwaysAllow\":[\"169.254.169.123\"]}";

static char *
describe(const struct policy *p, const struct nft_opts *o,
    const struct nft_kstate *ks)
{
	struct nft_batch *b;
	struct err e;
	char *s;

	if (nft_build_ruleset(p, o, ks, &b, &e) != 0)
		fail_msg("build: %s", e.msg);
	s = nft_batch_describe(b);
	assert_non_null(s);
	nft_batch_free(b);
	return s;
}

/* Line index (0-based) of the first line containing all of a and b. */
static long
line_of(const char *text, const char *a, const char *b)
{
	const char *p = text, *nl;
	long i = 0;
	char *line;

	while (*p != '\0') {
		nl = strchr(p, '\n');
		if (nl == NULL)
			nl = p + strlen(p);
		line = strndup(p, (size_t)(nl - p));
		if (strstr(line, a) != NULL && (b == NULL || strstr(line, b))) {
			free(line);
			return i;
		}
		free(line);
		i++;
		p = *nl ? nl + 1 : nl;
	}
	return -1;
}

static void
test_golden_basic(void **state)
{
	struct policy *p = ts_policy_json(basic_policy);
	struct nft_opts o;
	const char *src = getenv("EGRESSD_SRCDIR");
	char path[1024], *got, *want = NULL;
	FILE *f;
	long n;

	(void)state;
	nft_opts_init(&o);
	got = describe(p, &o, NULL);
	assert_non_null(src);
	snprintf(path, sizeof(path),
	    "%s/tests/unit/egressd/nft/golden/nft_basic.txt", src);
	if (getenv("EGRESSD_GOLDEN_UPDATE") != NULL) {
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(got, f);
		fclose(f);
	}
	f = fopen(path, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	want = calloc(1, (size_t)n + 1);
	assert_int_equal(fread(want, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	assert_string_equal(got, want);
	free(want);
	free(got);
	policy_unref(p);
}

/*
 * strdup, interposed: libnftnl copies every name (table, chain, set,
 * counter, a lookup's set, a jump's chain) with it, so failing the nth
 * call fails exactly one name. Counted only while strdup_fail_armed.
 */
static int strdup_fail_armed;
static size_t strdup_calls, strdup_fail_at;

char *
strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d;

	if (strdup_fail_armed && ++strdup_calls == strdup_fail_at)
		return NULL;
	if ((d = malloc(n)) != NULL)
		memcpy(d, s, n);
	return d;
}

/* Every name libnftnl copies, failed in turn: the build fails with "out
 * of memory" (never a batch that lacks a name, never a crash). */
static void
test_name_copy_fails(void **state)
{
	struct policy *p = ts_policy_json(basic_policy);
	struct nft_opts o;
	struct nft_batch *b;
	struct err e;
	size_t total, i;

	(void)state;
	nft_opts_init(&o);
	strdup_calls = strdup_fail_at = 0;
	strdup_fail_armed = 1;
	assert_int_equal(nft_build_ruleset(p, &o, NULL, &b, &e), 0);
	strdup_fail_armed = 0;
	total = strdup_calls;
	nft_batch_free(b);
	assert_true(total > 40);
	for (i = 1; i <= total; i++) {
		strdup_calls = 0;
		strdup_fail_at = i;
		strdup_fail_armed = 1;
		b = NULL;
		if (nft_build_ruleset(p, &o, NULL, &b, &e) != -1)
			fail_msg("strdup %zu of %zu failed: the build went on",
			    i, total);
		strdup_fail_armed = 0;
		assert_null(b);
		if (strstr(e.msg, "out of memory") == NULL)
			fail_msg("strdup %zu: %s", i, e.msg);
	}
	policy_unref(p);
}

/*
 * nftnl_set_elem_set, interposed: libnftnl copies an element's userdata
 * (the name comment) with malloc and returns -1 when that fails; the key
 * and the interval end it can refuse by length. Failing the nth call that
 * sets one of those three stands in for that; the rest go through.
 */
static int elem_fail_armed;
static size_t elem_calls, elem_fail_at;

int
nftnl_set_elem_set(
    struct nftnl_set_elem *el, uint16_t attr, const void *data, uint32_t len)
{
	static int (*real)(
	    struct nftnl_set_elem *, uint16_t, const void *, uint32_t);

	if (real == NULL)
		*(void **)&real = dlsym(RTLD_NEXT, "nftnl_set_elem_set");
	if (elem_fail_armed &&
	    (attr == NFTNL_SET_ELEM_KEY || attr == NFTNL_SET_ELEM_KEY_END ||
	        attr == NFTNL_SET_ELEM_USERDATA) &&
	    ++elem_calls == elem_fail_at)
		return -1;
	return real(el, attr, data, len);
}

/* Every element attribute libnftnl can refuse, refused in turn, for a
 * learned answer with a short name, a packed long one and port limits:
 * the build fails with "out of memory", never a batch missing a name or
 * an interval end (nor a leak: the ASan run checks that). */
static void
test_elem_set_fails(void **state)
{
	static const struct nft_limit lim[2] = {
	    {.plo = 6, .phi = 6, .lo = 443, .hi = 443},
	    {.plo = 17, .phi = 17, .lo = 5000, .hi = 5100}};
	static const char longname[] =
	    "a-very-long-label-that-goes-on-and-on-for-a-while.another-long-"
	    "label-so-the-comment-does-not-fit.example.com";
	struct nft_learn_addr a[3] = {{.family = 4,
	                                  .addr = {203, 0, 113, 10},
	                                  .ttl = 5,
	                                  .name = "api.example.com"},
	    {.family = 6,
	        .addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10},
	        .ttl = 100,
	        .name = longname},
	    {.family = 4,
	        .addr = {203, 0, 113, 11},
	        .ttl = 60,
	        .name = "api.example.com",
	        .lim = lim,
	        .nlim = 2}};
	struct nft_batch *b;
	struct err e;
	size_t total, i;

	(void)state;
	elem_calls = elem_fail_at = 0;
	elem_fail_armed = 1;
	assert_int_equal(nft_build_learn(a, 3, 1, 3600, &b, &e), 0);
	elem_fail_armed = 0;
	total = elem_calls;
	nft_batch_free(b);
	/* keys of both messages, two names, two interval ends at least */
	assert_true(total >= 10);
	for (i = 1; i <= total; i++) {
		elem_calls = 0;
		elem_fail_at = i;
		elem_fail_armed = 1;
		b = NULL;
		if (nft_build_learn(a, 3, 1, 3600, &b, &e) != -1)
			fail_msg("element attribute %zu of %zu refused: the "
			         "build went on",
			    i, total);
		elem_fail_armed = 0;
		assert_null(b);
		if (strstr(e.msg, "out of memory") == NULL)
			fail_msg("element attribute %zu: %s", i, e.msg);
	}
}

static void
test_raw_bytes(void **state)
{
	struct policy *p = ts_policy_json(basic_policy);
	struct nft_opts o;
	struct nft_batch *b;
	struct err e;
	const uint8_t *d;
	const struct nlmsghdr *nlh;
	size_t len, off = 0, i = 0, n;

	(void)state;
	nft_opts_init(&o);
	assert_int_equal(nft_build_ruleset(p, &o, NULL, &b, &e), 0);
	d = nft_batch_data(b, &len);
	n = nft_batch_nmsgs(b);
	assert_true(n > 40);
	while (off < len) {
		nlh = (const struct nlmsghdr *)(d + off);
		assert_true(nlh->nlmsg_len >= sizeof(*nlh));
		if (i == 0)
			assert_int_equal(nlh->nlmsg_type, NFNL_MSG_BATCH_BEGIN);
		else if (i == n + 1)
			assert_int_equal(nlh->nlmsg_type, NFNL_MSG_BATCH_END);
		else {
			/* every message asks for its own ack */
			assert_true(nlh->nlmsg_flags & NLM_F_ACK);
			assert_int_equal(
			    nlh->nlmsg_type >> 8, NFNL_SUBSYS_NFTABLES);
		}
		assert_int_equal(nlh->nlmsg_seq, 1 + i);
		off += NLMSG_ALIGN(nlh->nlmsg_len);
		i++;
	}
	assert_int_equal(off, len);
	assert_int_equal(i, n + 2);
	assert_string_equal(nft_batch_msg_label(b, 0), "NEWTABLE egressd");
	nft_batch_free(b);
	policy_unref(p);
}

static void
test_structure(void **state)
{
	struct policy *p = ts_policy_json(basic_policy);
	struct nft_opts o;
	char *s;
	long ad, aa, in, ud, ua24, ua0, learned, def, est, mark, nd, api, dns,
	    lo, dot;

	(void)state;
	nft_opts_init(&o);
	s = describe(p, &o, NULL);
	/* table without owner/dormant flags: survives a crash */
	assert_true(line_of(s, "NEWTABLE egressd flags 0", NULL) == 0);
	assert_true(line_of(s,
	                "NEWCHAIN filter_out type filter hook 3 prio 0 "
	                "policy 0",
	                NULL) >= 0);
	assert_true(line_of(s, "NEWCHAIN nat_out type nat hook 3 prio -100",
	                NULL) >= 0);
	assert_true(
	    line_of(s, "NEWSET learned4 keylen 4 flags 0x10", NULL) >= 0);
	assert_true(
	    line_of(s, "NEWSET learned6 keylen 16 flags 0x10", NULL) >= 0);
	/* nat: mark exemption before the redirects, 53 tcp and udp */
	assert_true(line_of(s, "nat_out", "meta load mark") <
	    line_of(s, "nat_out", "redir"));
	/* 53 -> 15353 (0x3bf9, printed in host order) */
	assert_true(line_of(s, "nat_out", "cmp eq reg 1 0x00003500") ==
	    line_of(s, "nat_out", "immediate reg 1 0x0000f93b"));
	assert_int_equal(line_of(s, "intercept_ports", NULL), -1);
	/* filter order */
	est = line_of(s, "filter_out", "ct load state");
	mark = line_of(s, "filter_out", "name own");
	nd = line_of(s, "filter_out", "name nd");
	api = line_of(s, "filter_out", "name api_block");
	dns = line_of(s, "filter_out", "name dns");
	lo = line_of(s, "filter_out", "name loopback");
	dot = line_of(s, "filter_out", "name dot");
	ad = line_of(s, "filter_out", "name always_deny");
	aa = line_of(s, "filter_out", "name always_allow");
	in = line_of(s, "filter_out", "name internal");
	ud = line_of(s, "filter_out", "name user_deny");
	ua24 = line_of(s, "filter_out", "set g9_allow4");
	ua0 = line_of(s, "filter_out", "set g11_allow4");
	learned = line_of(s, "filter_out", "name learned");
	def = line_of(s, "filter_out", "name default_deny");
	assert_true(est >= 0 && est < mark && mark < nd && nd < api &&
	    api < dns && dns < lo && lo < dot && dot < ad);
	/* layers: always-deny, always-allow, internal, user rules */
	assert_true(ad < aa && aa < in && in < ud);
	/* user: the IPv6 twins of deny 203.0.113.9 (/128 and 6to4 /48)
	 * first, then /32 deny before /32 allow (tie), before /24, before /0
	 */
	assert_true(ud == line_of(s, "filter_out", "set g4_deny6"));
	assert_true(line_of(s, "set g5_deny6", "name user_deny") >= 0);
	assert_true(line_of(s, "filter_out", "set g6_deny4") <
	    line_of(s, "filter_out", "set g7_allow4"));
	assert_true(line_of(s, "set g6_deny4", "name user_deny") >= 0);
	assert_true(ud < ua24 && ua24 < ua0 && ua0 < learned && learned < def);
	/* the resolver is accepted by destination, not by oif lo */
	assert_true(line_of(s, "name dns", "0x0100007f") >= 0);
	/* deny: tcp reset, else icmpx admin-prohibited; log rate limited */
	assert_true(line_of(s, "deny", "reject type 1 code 0") >= 0);
	assert_true(line_of(s, "deny", "reject type 2 code 3") >= 0);
	assert_true(line_of(s, "deny", "limit rate 5/second") >= 0);
	/* default deny: the last rule jumps to deny */
	assert_true(line_of(s, "name default_deny", "jump -> deny") >= 0);
	free(s);
	policy_unref(p);
}

/* Lines containing both a and b. */
static long
lines_with(const char *text, const char *a, const char *b)
{
	const char *p = text;
	long n = 0;

	while ((p = strstr(p, a)) != NULL) {
		const char *bol = p, *eol = strchr(p, '\n');
		char *line;

		while (bol > text && bol[-1] != '\n')
			bol--;
		if (eol == NULL)
			eol = p + strlen(p);
		line = strndup(bol, (size_t)(eol - bol));
		if (strstr(line, b) != NULL)
			n++;
		free(line);
		p = eol;
	}
	return n;
}

/*
 * --api-loopback-uid: off by default (no rule of the uid at all); set,
 * one accept per family, TCP only, to 127.0.0.1 or ::1 and the API port
 * only, for that uid only (0 too: root is a uid like another here, the
 * daemon warns), before the protected-port drop.
 */
static void
test_api_uid(void **state)
{
	struct policy *p = ts_policy_json(basic_policy);
	struct nft_opts o;
	char *s;
	long uid4, uid6, api;

	(void)state;
	nft_opts_init(&o);
	s = describe(p, &o, NULL);
	assert_int_equal(line_of(s, "skuid", NULL), -1);
	assert_int_equal(line_of(s, "filter_out", "name api_uid"), -1);
	free(s);

	o.api_uid_port = 18080; /* 0x46a0, big-endian: 0x0000a046 */
	o.api_uid = 1234; /* 0x4d2, host order */
	s = describe(p, &o, NULL);
	assert_int_equal(lines_with(s, "filter_out", "skuid"), 2);
	uid4 = line_of(s, "name api_uid", "0x0100007f");
	uid6 = line_of(s, "name api_uid",
	    "0x00000000 0x00000000 0x00000000 "
	    "0x01000000");
	api = line_of(s, "filter_out", "name api_block");
	assert_true(uid4 >= 0 && uid6 == uid4 + 1 && uid6 < api);
	assert_true(line_of(s, "name api_uid",
	                "meta load skuid => reg 1 ]   [ cmp eq reg 1 "
	                "0x000004d2") == uid4);
	assert_true(
	    line_of(s, "name api_uid", "cmp eq reg 1 0x0000a046") == uid4);
	assert_true(line_of(s, "name api_uid", "cmp eq reg 1 0x00000006") ==
	    uid4); /* tcp */
	assert_int_equal(lines_with(s, "name api_uid", "accept"), 2);
	assert_int_equal(lines_with(s, "name api_uid", "0x00000011"), 0);
	free(s);

	o.api_uid = 0;
	s = describe(p, &o, NULL);
	assert_int_equal(lines_with(s, "name api_uid",
	                     "meta load skuid => reg 1 ]   [ cmp eq reg 1 "
	                     "0x00000000 ]"),
	    2);
	free(s);
	policy_unref(p);
}

static void
test_elements(void **state)
{
	struct policy *p = ts_policy_json(basic_policy);
	struct nft_opts o;
	char *s;

	(void)state;
	nft_opts_init(&o);
	s = describe(p, &o, NULL);
	/* 192.0.2.0/24 listed twice: one interval */
	assert_true(line_of(s, "NEWSETELEM g2_deny4 c0000200 c0000300(end) ",
	                NULL) >= 0);
	/* always-deny 192.0.2.0/24 in its 6to4, NAT64, mapped and
	 * IPv4-compatible (::192.0.2.0/120) forms */
	assert_true(line_of(s,
	                "NEWSETELEM g1_deny6 2002c0000200000000000000000"
	                "00000 2002c000030000000000000000000000(end)",
	                NULL) >= 0);
	assert_true(line_of(s, "g0_deny6",
	                "0064ff9b0000000000000000c0000200 "
	                "0064ff9b0000000000000000c0000300(end)") >= 0);
	assert_true(line_of(s, "g0_deny6",
	                "00000000000000000000ffffc0000200 "
	                "00000000000000000000ffffc0000300(end)") >= 0);
	assert_true(line_of(s, "g0_deny6",
	                "000000000000000000000000c0000200 "
	                "000000000000000000000000c0000300(end)") >= 0);
	/* user deny 203.0.113.9 in its compatible, mapped, NAT64 and 6to4
	 * forms (F9) */
	assert_true(line_of(s,
	                "NEWSETELEM g4_deny6 "
	                "000000000000000000000000cb007109 "
	                "000000000000000000000000cb00710a(end) "
	                "00000000000000000000ffffcb007109 "
	                "00000000000000000000ffffcb00710a(end) "
	                "0064ff9b0000000000000000cb007109 "
	                "0064ff9b0000000000000000cb00710a(end) [",
	                NULL) >= 0);
	assert_true(line_of(s,
	                "NEWSETELEM g5_deny6 2002cb00710900000000000000000000 "
	                "2002cb00710a00000000000000000000(end) [",
	                NULL) >= 0);
	/* IPv4 allow rules get no twins */
	assert_int_equal(line_of(s, "allow6", "cb007100"), -1);
	assert_int_equal(line_of(s, "allow6", "c6336400"), -1);
	/* 0.0.0.0/0 reaches the top of the space: no end element */
	assert_true(line_of(s, "NEWSETELEM g11_allow4 00000000 [", NULL) >= 0);
	/* ports 443, 8000-8080, 8080 -> {443, 8000-8080} */
	assert_true(line_of(s,
	                "NEWSETELEM g9_ports 01bb 01bc(end) 1f40 "
	                "1f91(end) [",
	                NULL) >= 0);
	/* the built-in internal ranges (special_ranges.c): 0/8, 10/8,
	 * CGNAT, 127/8, Azure, link-local, 172.16/12, 192.0.0/24,
	 * 192.168/16, 198.18/15, 224/4 and 240/4 up to the top */
	assert_true(line_of(s,
	                "NEWSETELEM internal4 00000000 01000000(end) "
	                "0a000000 0b000000(end) "
	                "64400000 64800000(end) 7f000000 80000000(end) "
	                "a83f8110 a83f8111(end) "
	                "a9fe0000 a9ff0000(end) ac100000 ac200000(end) "
	                "c0000000 c0000100(end) "
	                "c0a80000 c0a90000(end) c6120000 c6140000(end) "
	                "e0000000 [",
	                NULL) >= 0);
	/* fe80::/10, fec0::/10 and ff00::/8: up to the top */
	assert_true(
	    line_of(s, "internal6", "fe800000000000000000000000000000 [") >= 0);
	/* ULA fc00::/7 (covers fd00:ec2::254) */
	assert_true(line_of(s, "internal6",
	                "fc000000000000000000000000000000 "
	                "fe000000000000000000000000000000(end)") >= 0);
	/* RFC 1918 in the NAT64, 6to4, mapped and compatible forms */
	assert_true(line_of(s, "internal6",
	                "0064ff9b00000000000000000a000000 "
	                "0064ff9b00000000000000000b000000(end)") >= 0);
	assert_true(line_of(s, "internal6",
	                "2002ac10000000000000000000000000 "
	                "2002ac20000000000000000000000000(end)") >= 0);
	assert_true(line_of(s, "internal6",
	                "00000000000000000000ffffc0a80000 "
	                "00000000000000000000ffffc0a90000(end)") >= 0);
	assert_true(line_of(s, "internal6",
	                "0000000000000000000000000a000000 "
	                "0000000000000000000000000b000000(end)") >= 0);
	assert_true(line_of(s, "protected_ports 46a0 46a1(end)", NULL) >= 0);
	free(s);
	policy_unref(p);
}

static void
test_default_allow_proxy(void **state)
{
	struct policy *p = ts_policy_json(
	    "{\"defaultAction\":\"allow\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"203.0.113.0/24\"}]}");
	struct nft_opts o;
	char *s;

	(void)state;
	nft_opts_init(&o);
	o.proxy_port = 18081;
	o.nprotected_ports = 2;
	o.protected_ports[1] = 9090;
	assert_int_equal(
	    nft_parse_prefix("198.51.100.53", &o.ns_exempt[0], NULL), 0);
	o.nns_exempt = 1;
	o.block_doh_443 = true;
	assert_int_equal(
	    nft_parse_prefix("2001:db8:53::/48", &o.doh_block[0], NULL), 0);
	o.ndoh_block = 1;
	s = describe(p, &o, NULL);
	assert_true(line_of(s, "name default_allow", "accept") >= 0);
	assert_int_equal(line_of(s, "name default_deny", NULL), -1);
	/* internal ranges still denied under default allow */
	assert_true(line_of(s, "name internal", "jump -> deny") >= 0);
	assert_true(line_of(s, "name user_deny", "jump -> deny") <
	    line_of(s, "name default_allow", NULL));
	/* proxy: intercept ports to learned addresses only; accepted by
	 * destination in the filter */
	assert_true(line_of(s,
	                "NEWSETELEM intercept_ports 0050 0051(end) "
	                "01bb 01bc(end)",
	                NULL) >= 0);
	assert_true(line_of(s, "set intercept_ports", "set learned4") >= 0);
	assert_true(line_of(s, "set intercept_ports", "0x0000a146") >= 0);
	assert_true(line_of(s, "name proxy", "0x0100007f") >= 0);
	assert_true(line_of(s, "protected_ports 2382 2383(end) 46a0 46a1(end)",
	                NULL) >= 0);
	/* exempt nameserver: not redirected, accepted on 53 */
	assert_true(line_of(s, "nat_out", "set ns_exempt4") <
	    line_of(s, "nat_out", "redir"));
	assert_true(line_of(s, "name ns_exempt", "set ns_exempt4") >= 0);
	assert_true(line_of(s, "name doh", "set doh6") >= 0);
	assert_int_equal(line_of(s, "set doh4", NULL), -1);
	free(s);
	policy_unref(p);
}

static void
test_adopt(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	char *chains[] = {"filter_out", "nat_out", "deny", "junk"};
	char *sets[] = {"learned4", "g0_allow4", "learned6", "old"};
	struct nft_learn_addr drop[2] = {
	    {.family = 4, .addr = {203, 0, 113, 7}},
	    {.family = 6, .addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 7}}};
	struct nft_kstate ks = {.table_exists = true,
	    .chains = chains,
	    .nchains = 4,
	    .sets = sets,
	    .nsets = 4,
	    .drop = drop,
	    .ndrop = 2};
	struct nft_opts o;
	char *s;
	long flush, delset, newset, firstrule;

	(void)state;
	nft_opts_init(&o);
	s = describe(p, &o, &ks);
	flush = line_of(s, "DELRULE inet egressd junk", NULL);
	assert_true(flush > 0);
	assert_true(line_of(s, "DELRULE inet egressd filter_out", NULL) > 0);
	delset = line_of(s, "DELSET g0_allow4", NULL);
	assert_true(delset > flush);
	assert_true(line_of(s, "DELSET old", NULL) > 0);
	/* learned sets are kept */
	assert_int_equal(line_of(s, "DELSET learned", NULL), -1);
	assert_true(line_of(s, "DELCHAIN junk", NULL) > delset);
	assert_int_equal(line_of(s, "DELCHAIN filter_out", NULL), -1);
	/* dropped learned elements: added (no ENOENT), then deleted */
	newset = line_of(s, "NEWSETELEM learned4 cb007107", NULL);
	assert_true(newset > 0);
	assert_true(line_of(s, "DELSETELEM learned4 cb007107", NULL) > newset);
	assert_true(line_of(s, "DELSETELEM learned6 20010db8", NULL) > 0);
	firstrule = line_of(s, "NEWRULE", NULL);
	assert_true(firstrule > newset);
	free(s);
	policy_unref(p);
}

static void
test_learn_batch(void **state)
{
	struct nft_learn_addr a[3] = {
	    {.family = 4, .addr = {203, 0, 113, 10}, .ttl = 5},
	    {.family = 6,
	        .addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10},
	        .ttl = 100},
	    {.family = 4, .addr = {203, 0, 113, 11}, .ttl = 999999}};
	struct nft_learn_addr many[NFT_LEARN_BATCH_MAX + 1];
	struct nft_batch *b;
	struct err e;
	char *s;

	(void)state;
	assert_int_equal(nft_build_learn(a, 3, 30, 3600, &b, &e), 0);
	assert_int_equal(nft_batch_nmsgs(b), 6);
	s = nft_batch_describe(b);
	assert_string_equal(s,
	    "NEWSETELEM learned4 cb00710a(timeout 30000ms) "
	    "cb00710b(timeout 3600000ms) [flags 0x405]\n"
	    "DELSETELEM learned4 cb00710a cb00710b [flags 0x5]\n"
	    "NEWSETELEM learned4 cb00710a(timeout 30000ms) "
	    "cb00710b(timeout 3600000ms) [flags 0x405]\n"
	    "NEWSETELEM learned6 20010db8000000000000000000000010(timeout "
	    "100000ms) [flags 0x405]\n"
	    "DELSETELEM learned6 20010db8000000000000000000000010 [flags "
	    "0x5]\n"
	    "NEWSETELEM learned6 20010db8000000000000000000000010(timeout "
	    "100000ms) [flags 0x405]\n");
	free(s);
	nft_batch_free(b);

	memset(many, 0, sizeof(many));
	b = (struct nft_batch *)&e; /* must be reset to NULL */
	assert_int_equal(
	    nft_build_learn(many, NFT_LEARN_BATCH_MAX + 1, 1, 2, &b, &e), -1);
	assert_null(b);
	a[1].family = 5;
	assert_int_equal(nft_build_learn(a, 3, 1, 2, &b, &e), -1);
	assert_null(b);
	assert_non_null(strstr(e.msg, "bad family"));
}

static void
test_failed_build_leaves_nothing(void **state)
{
	struct policy *p = ts_policy_json(
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"203.0.113.1\"}]}");
	struct nft_opts o;
	struct nft_batch *b;
	struct err e;

	(void)state;
	nft_opts_init(&o);
	o.dns_port = 0;
	b = (struct nft_batch *)&e;
	assert_int_equal(nft_build_ruleset(p, &o, NULL, &b, &e), -1);
	assert_null(b);
	nft_opts_init(&o);
	/* a corrupt rule deep in the build: everything built so far is
	 * freed (ASan/LSan watch this test) */
	p->rules[0].prefix.family = 9;
	b = (struct nft_batch *)&e;
	assert_int_equal(nft_build_ruleset(p, &o, NULL, &b, &e), -1);
	assert_null(b);
	assert_non_null(strstr(e.msg, "bad prefix"));
	p->rules[0].prefix.family = 4;
	policy_unref(p);
}

static void
test_teardown_and_prefix(void **state)
{
	struct nft_batch *b;
	struct policy_prefix pf;
	struct err e;
	char *s;

	(void)state;
	assert_int_equal(nft_build_teardown(&b, &e), 0);
	s = nft_batch_describe(b);
	assert_string_equal(s, "DELTABLE egressd flags 0 [flags 0x5]\n");
	free(s);
	nft_batch_free(b);

	assert_int_equal(nft_parse_prefix("198.51.100.77/24", &pf, &e), 0);
	assert_int_equal(pf.family, 4);
	assert_int_equal(pf.len, 24);
	assert_int_equal(pf.addr[3], 0); /* host bits cleared */
	assert_int_equal(nft_parse_prefix("2001:db8::1", &pf, &e), 0);
	assert_int_equal(pf.len, 128);
	assert_int_equal(nft_parse_prefix("2001:db8::/129", &pf, &e), -1);
	assert_int_equal(nft_parse_prefix("1.2.3.4/", &pf, &e), -1);
	assert_int_equal(nft_parse_prefix("a.example", &pf, &e), -1);
	assert_int_equal(nft_parse_prefix("1.2.3.4/x", &pf, &e), -1);
}

/* Long element names (issue 16 item 16): packed and back, every symbol. */
static void
test_name_pack(void **state)
{
	static const char *const ok[] = {"a", "ab", "abc", "abcd",
	    "xn--bcher-kva.example", "_srv._tcp.a-b.0123456789.z",
	    "abcdefghijklmnopqrstuvwxyz0123456789-_."};
	char name[POLICY_NAME_MAX + 1], back[POLICY_NAME_MAX + 2];
	uint8_t buf[NFT_PACKED_NAME_MAX];
	size_t i, len;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		len = nft_name_pack_(ok[i], buf, sizeof(buf));
		assert_int_equal(len, (strlen(ok[i]) + 2) / 3 * 2);
		assert_int_equal(
		    nft_name_unpack_(buf, len, back, sizeof(back)), 0);
		assert_string_equal(back, ok[i]);
	}
	memset(name, 'z', POLICY_NAME_MAX);
	name[POLICY_NAME_MAX] = '\0';
	len = nft_name_pack_(name, buf, sizeof(buf));
	assert_int_equal(len, NFT_PACKED_NAME_MAX);
	assert_int_equal(nft_name_unpack_(buf, len, back, sizeof(back)), 0);
	assert_string_equal(back, name);
	/* not names: refused, never truncated */
	assert_int_equal(nft_name_pack_("A.example", buf, sizeof(buf)), 0);
	assert_int_equal(nft_name_pack_("a b", buf, sizeof(buf)), 0);
	assert_int_equal(nft_name_pack_("", buf, sizeof(buf)), 0);
	assert_int_equal(nft_name_pack_("abcd", buf, 3), 0);
	/* bad packed input: odd length, out of range, symbol after end */
	buf[0] = 0xff;
	buf[1] = 0xff;
	assert_int_equal(nft_name_unpack_(buf, 2, back, sizeof(back)), -1);
	assert_int_equal(nft_name_unpack_(buf, 1, back, sizeof(back)), -1);
	buf[0] = 0;
	buf[1] = 1; /* "\0\0a" */
	assert_int_equal(nft_name_unpack_(buf, 2, back, sizeof(back)), -1);
	buf[1] = 0;
	assert_int_equal(nft_name_unpack_(buf, 2, back, sizeof(back)), -1);
}

static void
test_counter_names(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < NFT_NCOUNTERS; i++) {
		assert_non_null(nft_counter_name(i));
		assert_true(strlen(nft_counter_name(i)) < NFT_COUNTER_NAME_MAX);
	}
	assert_null(nft_counter_name(NFT_NCOUNTERS));
}

/* ---- property: the emitted rule order decides like policy_match_addr ---- */

#define PROP_POLICIES 150
#define PROP_QUERIES 300
#define PROP_SETS 256
#define PROP_RULES 256

struct pset {
	char name[32];
	uint32_t lo[64], hi[64]; /* host order (IPv4 / ports) */
	size_t n;
};

struct prule {
	int l4; /* 0 = any */
	int aset; /* index into sets */
	int pset; /* -1 = no port match */
	bool accept;
};

static uint32_t
lcg(uint32_t *st)
{
	*st = *st * 1103515245u + 12345u;
	return *st >> 8;
}

static uint32_t
hexval(const char *h, size_t n)
{
	uint32_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v = v << 4 |
		    (uint32_t)(h[i] <= '9' ? h[i] - '0' : h[i] - 'a' + 10);
	return v;
}

static int
find_set(struct pset *sets, size_t nsets, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < nsets; i++)
		if (strlen(sets[i].name) == len &&
		    strncmp(sets[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

/* Reads IPv4 group sets and filter rules of the g* sets from describe(). */
static void
parse_desc(char *text, struct pset *sets, size_t *nsets, struct prule *rules,
    size_t *nrules)
{
	char *line, *save = NULL, *p, *q;

	*nsets = *nrules = 0;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "NEWSETELEM g", 12) == 0) {
			struct pset *ps = &sets[*nsets];
			size_t klen;

			p = line + 11;
			q = strchr(p, ' ');
			assert_true(*nsets < PROP_SETS);
			if (strstr(line, "learned") != NULL)
				continue;
			snprintf(ps->name, sizeof(ps->name), "%.*s",
			    (int)(q - p), p);
			if (ps->name[strlen(ps->name) - 1] == '6')
				continue; /* IPv6 groups: not probed */
			ps->n = 0;
			for (p = q + 1; *p != '[';) {
				q = p;
				while (*q != ' ' && *q != '(')
					q++;
				klen = (size_t)(q - p);
				if (strncmp(q, "(end)", 5) == 0) {
					ps->hi[ps->n - 1] = hexval(p, klen) - 1;
					q += 5;
				} else {
					ps->lo[ps->n] = hexval(p, klen);
					ps->hi[ps->n] =
					    klen == 8 ? 0xffffffffu : 0xffffu;
					ps->n++;
				}
				p = q + 1;
			}
			(*nsets)++;
			continue;
		}
		if (strncmp(line, "NEWRULE inet egressd filter_out", 31) != 0 ||
		    (p = strstr(line,
		         "network header + 16 => reg 1 ]   [ "
		         "lookup reg 1 set g")) == NULL)
			continue;
		{
			struct prule *r = &rules[(*nrules)++];

			assert_true(*nrules <= PROP_RULES);
			p = strstr(p, "set g") + 4;
			q = strchr(p, ' ');
			r->aset = find_set(sets, *nsets, p, (size_t)(q - p));
			assert_true(r->aset >= 0);
			r->pset = -1;
			if ((p = strstr(line,
			         "transport header + 2 => reg 1 ]   "
			         "[ lookup reg 1 set ")) != NULL) {
				p = strstr(p, "set ") + 4;
				q = strchr(p, ' ');
				r->pset =
				    find_set(sets, *nsets, p, (size_t)(q - p));
				assert_true(r->pset >= 0);
			}
			r->l4 = 0;
			if ((p = strstr(line,
			         "meta load l4proto => reg 1 ]   [ "
			         "cmp eq reg 1 0x")) != NULL)
				r->l4 = (int)hexval(strstr(p, "0x") + 2, 8);
			r->accept = strstr(line, "jump -> deny") == NULL;
		}
	}
}

static bool
in_set(const struct pset *ps, uint32_t v)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		if (v >= ps->lo[i] && v <= ps->hi[i])
			return true;
	return false;
}

static const char *
rand_rule(uint32_t *st, char *buf, size_t len, bool deny_only, bool allow_only)
{
	static const unsigned lens[] = {0, 24, 25, 26, 28, 30, 32, 32};
	unsigned l = lens[lcg(st) % 8], host = lcg(st) % 256;
	const char *act = deny_only ? "deny"
	    : allow_only            ? "allow"
	    : lcg(st) % 2           ? "allow"
	                            : "deny";
	char ports[64] = "", protos[64] = "";
	unsigned pr = lcg(st) % 8;

	if (pr != 0 && pr != 7) {
		snprintf(protos, sizeof(protos), ",\"protocols\":[%s%s%s]",
		    pr & 1 ? "\"tcp\"" : "",
		    pr & 2 ? (pr & 1 ? ",\"udp\"" : "\"udp\"") : "",
		    pr & 4 ? ((pr & 3) ? ",\"icmp\"" : "\"icmp\"") : "");
	}
	if ((pr == 0 || (pr & 3) != 0) && lcg(st) % 2)
		snprintf(ports, sizeof(ports), ",\"ports\":[%s]",
		    lcg(st) % 2 ? "80,443" : "\"1000-2000\",443");
	if (ports[0] != '\0' && pr == 0)
		snprintf(protos, sizeof(protos), ",\"protocols\":[\"tcp\"]");
	if (l == 0)
		snprintf(buf, len,
		    "{\"action\":\"%s\",\"target\":\"0.0.0.0/0\"%s%s}", act,
		    ports, protos);
	else
		snprintf(buf, len,
		    "{\"action\":\"%s\",\"target\":\"203.0.113.%u/%u\"%s%s}",
		    act, host & ~((1u << (32 - l)) - 1), l, ports, protos);
	return buf;
}

static void
test_precedence_matches_policy(void **state)
{
	static struct pset sets[PROP_SETS];
	static struct prule rules[PROP_RULES];
	static const unsigned protos[] = {
	    POLICY_PROTO_TCP, POLICY_PROTO_UDP, POLICY_PROTO_ICMP};
	static const int l4of[] = {6, 17, 1};
	static const uint16_t qports[] = {80, 443, 1500, 7};
	char json[8192], rb[256];
	uint32_t st = 12345;
	struct nft_opts o;
	size_t it, q, nsets, nrules, i, off, nr, checked = 0, decided = 0;

	(void)state;
	nft_opts_init(&o);
	for (it = 0; it < PROP_POLICIES; it++) {
		struct policy *p;
		char *desc;

		off = (size_t)snprintf(json, sizeof(json),
		    "{\"defaultAction\":\"deny\",\"egress\":[");
		nr = 1 + lcg(&st) % 12;
		for (i = 0; i < nr; i++)
			off += (size_t)snprintf(json + off, sizeof(json) - off,
			    "%s%s", i ? "," : "",
			    rand_rule(&st, rb, sizeof(rb), false, false));
		off += (size_t)snprintf(json + off, sizeof(json) - off,
		    "],\"alwaysDeny\":[%s],\"alwaysAllow\":[%s]}",
		    rand_rule(&st, rb, sizeof(rb), true, false), "");
		/* alwaysAllow left empty half the time */
		if (lcg(&st) % 2) {
			off -= 2;
			off += (size_t)snprintf(json + off, sizeof(json) - off,
			    "%s]}",
			    rand_rule(&st, rb, sizeof(rb), false, true));
		}
		p = ts_policy_json(json);
		desc = describe(p, &o, NULL);
		parse_desc(desc, sets, &nsets, rules, &nrules);
		for (q = 0; q < PROP_QUERIES; q++) {
			uint8_t a[4] = {203, 0, 113, (uint8_t)lcg(&st)};
			unsigned pi = lcg(&st) % 3;
			uint16_t port = qports[lcg(&st) % 4];
			const struct policy_rule *pr = NULL;
			enum policy_action want;
			int got = -1; /* -1 no rule, 0 deny, 1 accept */
			uint32_t av = (uint32_t)a[0] << 24 | a[1] << 16 |
			    a[2] << 8 | a[3];

			want = policy_match_addr(
			    p, 4, a, protos[pi], pi == 2 ? 0 : port, &pr);
			for (i = 0; i < nrules; i++) {
				const struct prule *r = &rules[i];

				if (r->l4 != 0 && r->l4 != l4of[pi])
					continue;
				if (!in_set(&sets[r->aset], av))
					continue;
				if (r->pset >= 0 &&
				    (pi == 2 || !in_set(&sets[r->pset], port)))
					continue;
				got = r->accept ? 1 : 0;
				break;
			}
			if (pr == NULL) {
				if (got != -1)
					fail_msg("policy %s: %u.%u.%u.%u proto "
					         "%u port %u: no policy rule, "
					         "nft rule says %d",
					    json, a[0], a[1], a[2], a[3],
					    protos[pi], port, got);
			} else {
				decided++;
				if (got != (want == POLICY_ALLOW ? 1 : 0))
					fail_msg("policy %s: %u.%u.%u.%u proto "
					         "%u port %u: policy %s (%s), "
					         "nft %d",
					    json, a[0], a[1], a[2], a[3],
					    protos[pi], port,
					    want == POLICY_ALLOW ? "allow"
					                         : "deny",
					    pr->target, got);
			}
			checked++;
		}
		free(desc);
		policy_unref(p);
	}
	/* the generator must exercise both outcomes a lot */
	assert_true(decided > checked / 4);
	print_message("%zu queries, %zu decided by a rule\n", checked, decided);
}

/*
 * The internal sets and the DNS rebinding classifier agree (both come from
 * special_ranges.c; test_special_ranges.c walks the table): every address
 * nft treats as internal (Teredo aside, internal there as a whole) is one
 * the resolver strips, and the node/cluster ranges, ULA and the IPv6
 * spellings of every internal IPv4 address are internal to both.
 */
static void
v6_spellings(const uint8_t v4[4], uint8_t out[4][16])
{
	memset(out, 0, 4 * 16);
	out[0][1] = 0x64; /* NAT64 64:ff9b::/96 */
	out[0][2] = 0xff;
	out[0][3] = 0x9b;
	memcpy(out[0] + 12, v4, 4);
	out[1][0] = 0x20; /* 6to4 2002::/16 */
	out[1][1] = 0x02;
	memcpy(out[1] + 2, v4, 4);
	out[2][10] = out[2][11] = 0xff; /* mapped */
	memcpy(out[2] + 12, v4, 4);
	memcpy(out[3] + 12, v4, 4); /* compatible */
}

static void
test_internal_matches_dns_classifier(void **state)
{
	static const uint8_t must4[][4] = {{10, 0, 0, 0}, {10, 255, 255, 255},
	    {172, 16, 0, 1}, {172, 31, 255, 255}, {192, 168, 0, 1},
	    {192, 168, 255, 255}, {169, 254, 169, 254}, {100, 100, 100, 200},
	    {168, 63, 129, 16}, {100, 64, 0, 1}};
	static const uint8_t not4[][4] = {{9, 255, 255, 255}, {11, 0, 0, 0},
	    {172, 15, 255, 255}, {172, 32, 0, 0}, {192, 167, 255, 255},
	    {192, 169, 0, 0}, {203, 0, 113, 10}, {198, 51, 100, 1}};
	uint8_t v6[4][16], a6[16];
	uint32_t st = 777;
	size_t i, k, n4 = 0;

	(void)state;
	for (i = 0; i < sizeof(must4) / sizeof(must4[0]); i++) {
		assert_true(nft_addr_internal_(4, must4[i]));
		assert_true(dns_addr_is_internal(4, must4[i]));
		v6_spellings(must4[i], v6);
		for (k = 0; k < 4; k++) {
			assert_true(nft_addr_internal_(6, v6[k]));
			assert_true(dns_addr_is_internal(6, v6[k]));
		}
	}
	for (i = 0; i < sizeof(not4) / sizeof(not4[0]); i++) {
		assert_false(nft_addr_internal_(4, not4[i]));
		v6_spellings(not4[i], v6);
		for (k = 0; k < 4; k++)
			assert_false(nft_addr_internal_(6, v6[k]));
	}
	/* ULA, incl. AWS's fd00:ec2::254, and fe80::/10 */
	memset(a6, 0, sizeof(a6));
	a6[0] = 0xfc;
	assert_true(nft_addr_internal_(6, a6));
	a6[0] = 0xfd;
	a6[1] = 0x00;
	a6[2] = 0x0e;
	a6[3] = 0xc2;
	a6[14] = 0x02;
	a6[15] = 0x54;
	assert_true(nft_addr_internal_(6, a6));
	a6[0] = 0xfe;
	a6[1] = 0xbf;
	assert_true(nft_addr_internal_(6, a6));
	a6[1] = 0xc0; /* fec0::/10, deprecated site-local */
	assert_true(nft_addr_internal_(6, a6));
	a6[0] = 0xfb; /* below ULA */
	assert_false(nft_addr_internal_(6, a6));
	/* random addresses: nft internal => DNS internal; each IPv4 address
	 * and its four IPv6 spellings are judged alike by nft */
	for (i = 0; i < 200000; i++) {
		uint8_t a4[4];
		bool in4;

		for (k = 0; k < 4; k++)
			a4[k] = (uint8_t)lcg(&st);
		if (i % 4 == 0) /* bias towards the private ranges */
			a4[0] = (uint8_t)(i % 8 == 0 ? 10 : 172);
		in4 = nft_addr_internal_(4, a4);
		n4 += in4;
		if (in4)
			assert_true(dns_addr_is_internal(4, a4));
		v6_spellings(a4, v6);
		for (k = 0; k < 4; k++) {
			assert_int_equal(nft_addr_internal_(6, v6[k]), in4);
			if (in4)
				assert_true(dns_addr_is_internal(6, v6[k]));
		}
		for (k = 0; k < 16; k++)
			a6[k] = (uint8_t)lcg(&st);
		if (i % 2 == 0)
			a6[0] = (uint8_t)(0xfc | (a6[0] & 1));
		if (nft_addr_internal_(6, a6) &&
		    !(a6[0] == 0x20 && a6[1] == 0x01 && a6[2] == 0 &&
		        a6[3] == 0))
			assert_true(dns_addr_is_internal(6, a6));
	}
	assert_true(n4 > 20000);
}

/*
 * ---- property: the IPv6 twins of IPv4 deny rules (F5, F9) ----
 *
 * Model: the nft rules decide an IPv6 spelling (NAT64, 6to4, mapped,
 * compatible) of an IPv4 address like policy_match_addr() decides on the
 * same policy with each IPv4 deny rule (user or always-deny) written out
 * again, in its layer, as one IPv6 deny rule per spelling with the same
 * ports and protocols. IPv6 rules of their own (allows over the NAT64
 * space, ::/0, ...) compete with the twins by prefix length as usual.
 * And with no IPv6 rule at all: an IPv4 address a rule denies is denied
 * in every spelling.
 */
#define TWIN_POLICIES 120
#define TWIN_QUERIES 300

struct pset6 {
	char name[32];
	char lo[64][33], hi[64][33]; /* 32 hex digits, inclusive */
	size_t n;
};

static void
hex_dec(char *h)
{
	size_t i = 32;

	while (i-- > 0) {
		if (h[i] == '0') {
			h[i] = 'f';
			continue;
		}
		h[i] = h[i] == 'a' ? '9' : (char)(h[i] - 1);
		return;
	}
}

/* IPv6 group sets and the filter rules over them, as parse_desc(). */
static void
parse_desc6(char *text, struct pset6 *sets, size_t *nsets, struct pset *psets,
    size_t *npsets, struct prule *rules, size_t *nrules)
{
	char *line, *save = NULL, *p, *q;

	*nsets = *npsets = *nrules = 0;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "NEWSETELEM g", 12) == 0) {
			char name[32];
			size_t klen;

			p = line + 11;
			q = strchr(p, ' ');
			snprintf(name, sizeof(name), "%.*s", (int)(q - p), p);
			if (strstr(name, "_ports") != NULL) {
				struct pset *ps = &psets[(*npsets)++];

				assert_true(*npsets <= PROP_SETS);
				snprintf(
				    ps->name, sizeof(ps->name), "%s", name);
				ps->n = 0;
				for (p = q + 1; *p != '[';) {
					q = p;
					while (*q != ' ' && *q != '(')
						q++;
					klen = (size_t)(q - p);
					if (strncmp(q, "(end)", 5) == 0) {
						ps->hi[ps->n - 1] =
						    hexval(p, klen) - 1;
						q += 5;
					} else {
						ps->lo[ps->n] = hexval(p, klen);
						ps->hi[ps->n++] = 0xffffu;
					}
					p = q + 1;
				}
				continue;
			}
			if (name[strlen(name) - 1] != '6')
				continue;
			{
				struct pset6 *ps = &sets[(*nsets)++];

				assert_true(*nsets <= PROP_SETS);
				snprintf(
				    ps->name, sizeof(ps->name), "%s", name);
				ps->n = 0;
				for (p = q + 1; *p != '[';) {
					q = p;
					while (*q != ' ' && *q != '(')
						q++;
					assert_int_equal(q - p, 32);
					if (strncmp(q, "(end)", 5) == 0) {
						memcpy(
						    ps->hi[ps->n - 1], p, 32);
						hex_dec(ps->hi[ps->n - 1]);
						q += 5;
					} else {
						assert_true(ps->n < 64);
						memcpy(ps->lo[ps->n], p, 32);
						ps->lo[ps->n][32] = '\0';
						memset(ps->hi[ps->n], 'f', 32);
						ps->hi[ps->n++][32] = '\0';
					}
					p = q + 1;
				}
			}
			continue;
		}
		if (strncmp(line, "NEWRULE inet egressd filter_out", 31) != 0 ||
		    (p = strstr(line,
		         "network header + 24 => reg 1 ]   [ "
		         "lookup reg 1 set g")) == NULL)
			continue;
		{
			struct prule *r = &rules[(*nrules)++];
			size_t i;

			assert_true(*nrules <= PROP_RULES);
			p = strstr(p, "set g") + 4;
			q = strchr(p, ' ');
			r->aset = -1;
			for (i = 0; i < *nsets; i++)
				if (strlen(sets[i].name) == (size_t)(q - p) &&
				    strncmp(sets[i].name, p, (size_t)(q - p)) ==
				        0)
					r->aset = (int)i;
			assert_true(r->aset >= 0);
			r->pset = -1;
			if ((p = strstr(line,
			         "transport header + 2 => reg 1 ]   "
			         "[ lookup reg 1 set ")) != NULL) {
				p = strstr(p, "set ") + 4;
				q = strchr(p, ' ');
				r->pset = find_set(
				    psets, *npsets, p, (size_t)(q - p));
				assert_true(r->pset >= 0);
			}
			r->l4 = 0;
			if ((p = strstr(line,
			         "meta load l4proto => reg 1 ]   [ "
			         "cmp eq reg 1 0x")) != NULL)
				r->l4 = (int)hexval(strstr(p, "0x") + 2, 8);
			r->accept = strstr(line, "jump -> deny") == NULL;
		}
	}
}

static bool
in_set6(const struct pset6 *ps, const char *hex)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		if (strcmp(hex, ps->lo[i]) >= 0 && strcmp(hex, ps->hi[i]) <= 0)
			return true;
	return false;
}

/* Spelling form (0 NAT64, 1 6to4, 2 mapped, 3 compatible) of v4/len. */
static void
twin_of(const uint8_t v4[4], unsigned len, unsigned form, uint8_t a[16],
    unsigned *len6)
{
	memset(a, 0, 16);
	switch (form) {
	case 0:
		a[1] = 0x64;
		a[2] = 0xff;
		a[3] = 0x9b;
		memcpy(a + 12, v4, 4);
		*len6 = 96 + len;
		break;
	case 1:
		a[0] = 0x20;
		a[1] = 0x02;
		memcpy(a + 2, v4, 4);
		*len6 = 16 + len;
		break;
	case 2:
		a[10] = a[11] = 0xff;
		memcpy(a + 12, v4, 4);
		*len6 = 96 + len;
		break;
	default:
		memcpy(a + 12, v4, 4);
		*len6 = 96 + len;
		break;
	}
}

struct trule {
	bool deny;
	uint8_t v4[4];
	unsigned len;
	char extra[128]; /* ports/protocols JSON */
};

static void
trand(uint32_t *st, struct trule *t, bool deny_only)
{
	static const unsigned lens[] = {0, 24, 25, 26, 28, 30, 32, 32};
	unsigned pr = lcg(st) % 8;

	t->deny = deny_only || lcg(st) % 3 != 0;
	t->len = lens[lcg(st) % 8];
	t->v4[0] = 203;
	t->v4[1] = 0;
	t->v4[2] = 113;
	t->v4[3] = (uint8_t)(t->len == 0
	        ? 0
	        : (lcg(st) % 256) & ~((1u << (32 - t->len)) - 1));
	if (t->len == 0)
		memset(t->v4, 0, 4);
	t->extra[0] = '\0';
	if (pr == 1)
		snprintf(t->extra, sizeof(t->extra),
		    ",\"protocols\":[\"tcp\"],\"ports\":[80,443]");
	else if (pr == 2)
		snprintf(t->extra, sizeof(t->extra),
		    ",\"protocols\":[\"udp\",\"icmp\"]");
	else if (pr == 3)
		snprintf(t->extra, sizeof(t->extra),
		    ",\"protocols\":[\"tcp\",\"udp\"],"
		    "\"ports\":[\"1000-2000\"]");
}

/* Appends rule t (and with twins its IPv6 spellings when a deny). */
static size_t
tjson(char *buf, size_t len, size_t off, const struct trule *t, bool twins)
{
	char a4[INET_ADDRSTRLEN], a6[INET6_ADDRSTRLEN];
	uint8_t x[16];
	unsigned f, l6;

	inet_ntop(AF_INET, t->v4, a4, sizeof(a4));
	off += (size_t)snprintf(buf + off, len - off,
	    "%s{\"action\":\"%s\",\"target\":\"%s/%u\"%s}",
	    buf[off - 1] == '[' ? "" : ",", t->deny ? "deny" : "allow", a4,
	    t->len, t->extra);
	for (f = 0; twins && t->deny && f < 4; f++) {
		twin_of(t->v4, t->len, f, x, &l6);
		inet_ntop(AF_INET6, x, a6, sizeof(a6));
		off += (size_t)snprintf(buf + off, len - off,
		    ",{\"action\":\"deny\",\"target\":\"%s/%u\"%s}", a6, l6,
		    t->extra);
	}
	assert_true(off < len);
	return off;
}

/* nj: the policy; with twins, the model policy (twins written out). */
static void
twin_policy(char *buf, size_t len, bool twins, bool dallow,
    const struct trule *ur, size_t nur, const char *const *v6, size_t nv6,
    const struct trule *ad)
{
	size_t off, i;

	off =
	    (size_t)snprintf(buf, len, "{\"defaultAction\":\"%s\",\"egress\":[",
	        dallow ? "allow" : "deny");
	for (i = 0; i < nur; i++)
		off = tjson(buf, len, off, &ur[i], twins);
	for (i = 0; i < nv6; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s",
		    buf[off - 1] == '[' ? "" : ",", v6[i]);
	off += (size_t)snprintf(buf + off, len - off, "],\"alwaysDeny\":[");
	if (ad != NULL)
		off = tjson(buf, len, off, ad, twins);
	off += (size_t)snprintf(buf + off, len - off, "]}");
	assert_true(off < len);
}

static void
test_twins_match_model(void **state)
{
	static const char *const v6rules[] = {
	    "{\"action\":\"allow\",\"target\":\"::/0\"}",
	    "{\"action\":\"allow\",\"target\":\"64:ff9b::/96\"}",
	    "{\"action\":\"allow\",\"target\":\"64:ff9b::cb00:7100/120\"}",
	    "{\"action\":\"allow\",\"target\":\"64:ff9b::cb00:7109/128\"}",
	    "{\"action\":\"deny\",\"target\":\"64:ff9b::cb00:7180/121\"}",
	    "{\"action\":\"allow\",\"target\":\"2002::/16\","
	    "\"protocols\":[\"tcp\"]}",
	    "{\"action\":\"allow\",\"target\":\"2002:cb00:7100::/40\"}",
	    "{\"action\":\"allow\",\"target\":\"::ffff:0:0/96\"}",
	    "{\"action\":\"allow\",\"target\":\"::cb00:7100/120\","
	    "\"ports\":[443],\"protocols\":[\"tcp\"]}",
	};
	static struct pset6 sets[PROP_SETS];
	static struct pset psets[PROP_SETS];
	static struct prule rules[PROP_RULES];
	static const unsigned protos[] = {
	    POLICY_PROTO_TCP, POLICY_PROTO_UDP, POLICY_PROTO_ICMP};
	static const int l4of[] = {6, 17, 58};
	static const uint16_t qports[] = {80, 443, 1500, 7};
	static char nj[16384], mj[16384];
	uint32_t st = 4242;
	struct nft_opts o;
	size_t it, q, i, nsets, npsets, nrules;
	size_t checked = 0, denied = 0, v4denied = 0, twins_checked = 0;
	struct nft_twins *tw;

	(void)state;
	nft_opts_init(&o);
	for (it = 0; it < TWIN_POLICIES; it++) {
		struct trule ur[10], ad;
		const char *v6[3];
		size_t nur = 1 + lcg(&st) % 10, nv6 = 0;
		bool dallow = lcg(&st) % 4 != 0, has_ad = lcg(&st) % 2;
		struct policy *p, *m;
		char *desc;

		for (i = 0; i < nur; i++)
			trand(&st, &ur[i], false);
		trand(&st, &ad, true);
		if (it % 2 == 1)
			nv6 = 1 + lcg(&st) % 3;
		for (i = 0; i < nv6; i++)
			v6[i] = v6rules[lcg(&st) %
			    (sizeof(v6rules) / sizeof(v6rules[0]))];
		twin_policy(nj, sizeof(nj), false, dallow, ur, nur, v6, nv6,
		    has_ad ? &ad : NULL);
		twin_policy(mj, sizeof(mj), true, dallow, ur, nur, v6, nv6,
		    has_ad ? &ad : NULL);
		p = ts_policy_json(nj);
		m = ts_policy_json(mj);
		desc = describe(p, &o, NULL);
		parse_desc6(desc, sets, &nsets, psets, &npsets, rules, &nrules);
		tw = nft_twins_new_();
		assert_non_null(tw);
		for (q = 0; q < TWIN_QUERIES; q++) {
			uint8_t a4[4] = {203, 0, 113, (uint8_t)lcg(&st)},
			        a6[16];
			unsigned pi = lcg(&st) % 3, form = lcg(&st) % 4, l6;
			uint16_t port = qports[lcg(&st) % 4];
			const struct policy_rule *pr = NULL, *r4 = NULL;
			enum policy_action want, v4;
			char hex[33];
			int got = -1;

			twin_of(a4, 32, form, a6, &l6);
			for (i = 0; i < 16; i++)
				snprintf(hex + 2 * i, 3, "%02x", a6[i]);
			want = policy_match_addr(
			    m, 6, a6, protos[pi], pi == 2 ? 0 : port, &pr);
			for (i = 0; i < nrules; i++) {
				const struct prule *r = &rules[i];

				if (r->l4 != 0 && r->l4 != l4of[pi])
					continue;
				if (!in_set6(&sets[r->aset], hex))
					continue;
				if (r->pset >= 0 &&
				    (pi == 2 || !in_set(&psets[r->pset], port)))
					continue;
				got = r->accept ? 1 : 0;
				break;
			}
			if (pr == NULL ? got != -1
			               : got != (want == POLICY_ALLOW ? 1 : 0))
				fail_msg(
				    "policy %s: %s proto %u port %u: model "
				    "%s (%s), nft %d",
				    nj, hex, protos[pi], port,
				    pr == NULL                 ? "no rule"
				        : want == POLICY_ALLOW ? "allow"
				                               : "deny",
				    pr != NULL ? pr->target : "-", got);
			denied += got == 0;
			/* the flow cut and the pruning judge with
			 * nft_twins_match_(): the same decision as the
			 * model (and so the chain), rule for rule */
			{
				const struct policy_rule *tr = NULL;
				enum policy_action ta = nft_twins_match_(tw, p,
				    6, a6, protos[pi], pi == 2 ? 0 : port, &tr);

				if (ta != want || (tr == NULL) != (pr == NULL))
					fail_msg("policy %s: %s proto %u port "
					         "%u: model %d, "
					         "nft_twins_match_ %d",
					    nj, hex, protos[pi], port, want,
					    ta);
				twins_checked++;
			}
			/* the headline: no IPv6 rule of its own, a rule
			 * denies the IPv4 address: every spelling denied */
			v4 = policy_match_addr(
			    p, 4, a4, protos[pi], pi == 2 ? 0 : port, &r4);
			if (nv6 == 0 && v4 == POLICY_DENY && r4 != NULL) {
				v4denied++;
				if (got != 0)
					fail_msg("policy %s: %s denied by %s, "
					         "its spelling %s is not (%d)",
					    nj, "IPv4", r4->target, hex, got);
			}
			checked++;
		}
		nft_twins_free_(tw);
		free(desc);
		policy_unref(p);
		policy_unref(m);
	}
	assert_int_equal(twins_checked, checked);
	assert_true(denied > checked / 5);
	assert_true(v4denied > checked / 10);
	print_message("%zu IPv6 spellings, %zu denied, %zu of IPv4 addresses "
	              "a rule denies\n",
	    checked, denied, v4denied);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_golden_basic),
	    cmocka_unit_test(test_raw_bytes),
	    cmocka_unit_test(test_structure),
	    cmocka_unit_test(test_api_uid),
	    cmocka_unit_test(test_elements),
	    cmocka_unit_test(test_default_allow_proxy),
	    cmocka_unit_test(test_adopt),
	    cmocka_unit_test(test_learn_batch),
	    cmocka_unit_test(test_failed_build_leaves_nothing),
	    cmocka_unit_test(test_teardown_and_prefix),
	    cmocka_unit_test(test_name_pack),
	    cmocka_unit_test(test_counter_names),
	    cmocka_unit_test(test_internal_matches_dns_classifier),
	    cmocka_unit_test(test_precedence_matches_policy),
	    cmocka_unit_test(test_twins_match_model),
	    cmocka_unit_test(test_name_copy_fails),
	    cmocka_unit_test(test_elem_set_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
