/*
 * In-flight judging's rules (nft_queue.c), without privileges: the
 * builder's batch decoded with libnftnl; and the probe's transaction.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "egressd/nft/nft.h"
#include "policy/policy.h"
#include "ts_policy.h"

static char *
describe(const struct policy *p, const struct nft_opts *o)
{
	struct nft_batch *b;
	struct err e;
	char *s;

	if (nft_build_ruleset(p, o, NULL, &b, &e) != 0)
		fail_msg("build: %s", e.msg);
	s = nft_batch_describe(b);
	assert_non_null(s);
	nft_batch_free(b);
	return s;
}

/* Index of the first line holding a (and b when given), or -1. */
static long
line_of(const char *text, const char *a, const char *b)
{
	const char *p = text, *nl;
	long i = 0;

	while (*p != '\0') {
		char *line;
		bool hit;

		nl = strchr(p, '\n');
		if (nl == NULL)
			nl = p + strlen(p);
		line = strndup(p, (size_t)(nl - p));
		hit = strstr(line, a) != NULL &&
		    (b == NULL || strstr(line, b) != NULL);
		free(line);
		if (hit)
			return i;
		i++;
		p = *nl ? nl + 1 : nl;
	}
	return -1;
}

static void
queue_opts(struct nft_opts *o, enum nft_queue_kind k)
{
	nft_opts_init(o);
	o->proxy_port = 18081;
	o->queue_kind = k;
	o->queue_num = 7;
	o->queue_ports[0] = 443;
	o->nqueue_ports = 1;
}

static void
test_off_by_default(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	struct nft_opts o;
	long pend, est;
	char *s;

	(void)state;
	nft_opts_init(&o);
	o.proxy_port = 18081;
	s = describe(p, &o);
	if (getenv("NFQ_DUMP") != NULL)
		fputs(s, stderr);
	assert_int_equal(line_of(s, "queue_ports", NULL), -1);
	assert_int_equal(line_of(s, "NFQUEUE", NULL), -1);
	assert_int_equal(line_of(s, "nat_out", "0x45510001"), -1);
	/* the restart gap: no queue, yet flows another egressd marked
	 * pending are reset, refused ones stay reset, and both before the
	 * conntrack accept */
	pend = line_of(s, "filter_out", "0x45510001");
	assert_true(pend >= 0);
	assert_true(line_of(s, "0x45510001", "jump -> deny") == pend);
	assert_true(line_of(s, "0x45510001", "0x00000002") == pend);
	assert_true(line_of(s, "filter_out", "0x45510003") >= 0);
	assert_true(line_of(s, "0x45510003", "jump -> deny") >= 0);
	est = line_of(s, "filter_out   [ ct load state", "& 0x00000006");
	assert_true(est > pend);
	assert_int_equal(line_of(s, "0x45510002", NULL), -1);
	/* nor any accept of a pending flow's bare segments */
	assert_int_equal(line_of(s, "transport header + 12", NULL), -1);
	free(s);
	policy_unref(p);
}

static void
test_compat_rules(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	struct nft_opts o;
	long pend, redir, q, est, udp;
	char *s;

	(void)state;
	queue_opts(&o, NFT_QUEUE_COMPAT);
	s = describe(p, &o);
	if (getenv("NFQ_DUMP") != NULL)
		fputs(s, stderr);
	/* nat_out: learned 443 marked pending and accepted, before the
	 * proxy redirect */
	pend = line_of(s, "set queue_ports", "0x45510001");
	redir = line_of(s, "set intercept_ports", "0x0000a146");
	assert_true(pend >= 0 && redir > pend);
	assert_true(line_of(s, "set queue_ports", "0x45510001") == pend);
	assert_true(line_of(s, "set queue_ports", "set learned4") >= 0);
	assert_true(line_of(s, "set queue_ports", "set learned6") >= 0);
	/* filter_out: the verdict marks, then the queue, all before the
	 * established accept */
	q = line_of(s, "target name NFQUEUE rev 3", NULL);
	est = line_of(s, "filter_out   [ ct load state", "& 0x00000006");
	assert_true(q >= 0);
	assert_true(line_of(s, "0x45510002", "ct set mark") < q);
	assert_true(line_of(s, "0x45510003", "jump -> deny") < q);
	assert_true(line_of(s, "0x45510001", "NFQUEUE") == q);
	/* no bypass: the xt info's flags are zero (queue 7, total 1) */
	assert_true(est < 0 || q < est);
	/* UDP's conntrack accepts come before every row of in-flight
	 * judging (those concern TCP alone), UDP compared first */
	udp = line_of(s, "filter_out   [ meta load l4proto", "& 0x00000006");
	assert_true(udp >= 0);
	assert_true(line_of(s, "filter_out   [ meta load l4proto",
	                "0x00000011 ]   [ ct load state") == udp);
	assert_true(udp < line_of(s, "0x45510002", "ct set mark"));
	assert_true(line_of(s, "filter_out   [ meta load l4proto",
	                "meta load oif") == udp + 1);
	/* a Fast Open cookie SYN of a pending flow is dropped */
	assert_true(line_of(s, "tcpopt", "drop") > q);
	/* the restart gap's reset row is there too, after the queue: in
	 * queue mode it sees nothing */
	assert_true(line_of(s, "0x45510001", "jump -> deny") > q);
	assert_true(line_of(s, "0x45510001", "jump -> deny") < est);
	free(s);
	policy_unref(p);
}

/* Segments without payload of a pending flow are accepted before the
 * queue: IPv4 total length 52 / 40, IPv6 payload length 32 / 20 with TCP
 * the next header, data offset 8 / 5. (None without the queue:
 * test_off_by_default.) */
static void
test_bare_segments(void **state)
{
	static const char *const bare[][2] = {
	    {"network header + 2 => reg 1 ]   [ cmp eq reg 1 0x00003400",
	        "0x00000080 ]   [ immediate reg 0 accept"},
	    {"network header + 4 => reg 1 ]   [ cmp eq reg 1 0x00002000",
	        "0x00000080 ]   [ immediate reg 0 accept"},
	    {"network header + 2 => reg 1 ]   [ cmp eq reg 1 0x00002800",
	        "0x00000050 ]   [ immediate reg 0 accept"},
	    {"network header + 4 => reg 1 ]   [ cmp eq reg 1 0x00001400",
	        "0x00000050 ]   [ immediate reg 0 accept"},
	};
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	struct nft_opts o;
	size_t i;
	long q, l;
	char *s;

	(void)state;
	queue_opts(&o, NFT_QUEUE_COMPAT);
	s = describe(p, &o);
	q = line_of(s, "target name NFQUEUE rev 3", NULL);
	assert_true(q >= 0);
	for (i = 0; i < sizeof(bare) / sizeof(bare[0]); i++) {
		l = line_of(s, bare[i][0], bare[i][1]);
		assert_true(l >= 0 && l < q);
		assert_true(line_of(s, bare[i][0], "0x45510001") == l);
		assert_true(
		    line_of(s, bare[i][0], "transport header + 12") == l);
	}
	assert_true(line_of(s,
	                "network header + 6 => reg 1 ]   [ cmp eq reg 1 "
	                "0x00000006",
	                NULL) >= 0);
	free(s);
	policy_unref(p);
}

/* A SYN the TCP tracker ignored (a new connection on the tuple of an
 * entry that lives on: no FIN seen, the reply side's RST) carries the
 * old entry, ct state established, direction original. With the queue,
 * to a queued port of a learned address, not redirected, not egressd's
 * own: its flow is made PENDING again, ahead of every row that reads
 * the mark and of the conntrack accept, so the queue judges the new
 * hello. No such row without the queue. */
static void
test_reopen_syn(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	struct nft_opts o;
	long syn, est;
	char *s;

	(void)state;
	nft_opts_init(&o);
	o.proxy_port = 18081;
	s = describe(p, &o);
	assert_int_equal(line_of(s, "transport header + 13", NULL), -1);
	free(s);
	queue_opts(&o, NFT_QUEUE_COMPAT);
	s = describe(p, &o);
	syn = line_of(s, "transport header + 13", "set learned4");
	assert_true(syn >= 0);
	assert_true(
	    line_of(s, "transport header + 13", "set learned6") == syn + 1);
	/* the SYN test first (nearly every packet fails it there), then
	 * not egressd's own, then established */
	assert_true(line_of(s,
	                "filter_out   [ meta load l4proto => reg 1 ]   [ "
	                "cmp eq reg 1 0x00000006 ]   [ payload load 1b @ "
	                "transport header + 13 => reg 1 ]   [ bitwise reg 1 "
	                "= ( reg 1 & 0x00000012 ) ^ 0x00000000 ]   [ cmp eq "
	                "reg 1 0x00000002 ]   [ meta load mark => reg 1 ]   [ "
	                "cmp neq reg 1 0x00000001 ]   [ ct load state "
	                "=> reg 1 ]   [ bitwise reg 1 = ( reg 1 & "
	                "0x00000002 )",
	                NULL) == syn);
	assert_true(
	    line_of(s, "transport header + 13",
	        "& 0x00000020 ) ^ "
	        "0x00000000 ]   [ cmp eq reg 1 0x00000000 ]   [ ct load "
	        "direction => reg 1 ]   [ cmp eq reg 1 0x00000000 ]") == syn);
	assert_true(
	    line_of(s, "transport header + 13",
	        "( reg 1 & 0x00000012 ) ^ 0x00000000 ]   [ cmp eq reg 1 "
	        "0x00000002 ]") == syn);
	assert_true(
	    line_of(s, "transport header + 13",
	        "set queue_ports ]   [ immediate reg 1 0x45510001 ]   [ "
	        "ct set mark with reg 1 ]  [flags") == syn);
	est = line_of(s, "filter_out   [ ct load state", "& 0x00000006");
	assert_true(est > syn + 1);
	assert_true(line_of(s, "filter_out", "0x45510003") > syn + 1);
	assert_true(line_of(s, "0x45510002", "ct set mark") > syn + 1);
	assert_true(line_of(s, "NFQUEUE", NULL) > syn + 1);
	free(s);
	policy_unref(p);
}

static void
test_native_rules(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	struct nft_opts o;
	char *s;

	(void)state;
	queue_opts(&o, NFT_QUEUE_NATIVE);
	s = describe(p, &o);
	assert_true(line_of(s, "queue num 7", NULL) >= 0);
	assert_int_equal(line_of(s, "NFQUEUE", NULL), -1);
	assert_int_equal(line_of(s, "bypass", NULL), -1);
	free(s);
	policy_unref(p);
}

/* Names the proxy must see are held: a binding's hosts (exact and
 * below a wildcard, https only) and hosts with request rules; every
 * other learned address stays queued. Queueing off: nothing is held. */
static void
test_held(void **state)
{
	struct policy *p = ts_policy_yaml(
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: a.example, methods: [GET]}\n"
	    "  - {action: allow, target: b.example}\n"
	    "  - {action: allow, target: '*.w.example'}\n"
	    "  - {action: allow, target: plain.example}\n"
	    "  - {action: allow, target: other.example}\n"
	    "credentials:\n"
	    "  - {name: k, source: {type: inline, value: s3cr3t-K}}\n"
	    "bindings:\n"
	    "  - name: one\n"
	    "    match: {hosts: [b.example, '*.w.example']}\n"
	    "    auth: {type: bearer, credential: k}\n"
	    "  - name: http\n"
	    "    match: {schemes: [http], hosts: [plain.example]}\n"
	    "    auth: {type: bearer, credential: k}\n",
	    "held.yaml");
	struct nft_opts o;
	long hold, pend, redir;
	char *s;

	(void)state;
	assert_non_null(p);
	queue_opts(&o, NFT_QUEUE_COMPAT);
	assert_true(nft_queue_held(&o, p, "a.example"));
	assert_true(nft_queue_held(&o, p, "B.Example."));
	assert_true(nft_queue_held(&o, p, "x.w.example"));
	assert_false(nft_queue_held(&o, p, "w.example"));
	assert_false(nft_queue_held(&o, p, "plain.example"));
	assert_false(nft_queue_held(&o, p, "other.example"));
	assert_false(nft_queue_held(&o, p, NULL));
	s = describe(p, &o);
	if (getenv("NFQ_DUMP") != NULL)
		fputs(s, stderr);
	/* nat_out: held addresses to the proxy, then the pending mark for
	 * other learned ones, then the usual redirect */
	hold = line_of(s, "set queue_ports", "set hold4");
	pend = line_of(s, "set queue_ports", "0x45510001");
	redir = line_of(s, "set intercept_ports", "0x0000a146");
	assert_true(hold >= 0 && pend > hold && redir > pend);
	assert_true(line_of(s, "set hold4", "0x0000a146") == hold);
	assert_true(line_of(s, "set queue_ports", "set hold6") > hold);
	assert_true(line_of(s, "NFQUEUE", NULL) >= 0);
	free(s);
	nft_opts_init(&o);
	o.proxy_port = 18081;
	assert_false(nft_queue_held(&o, p, "a.example"));
	s = describe(p, &o);
	assert_int_equal(line_of(s, "hold4", NULL), -1);
	free(s);
	policy_unref(p);
}

/* A learn record with hold also enters hold4/hold6, refreshed like its
 * learned element (add, delete, add); a limited record never does; a
 * commit's hold records are added (what is there stays); removal (an
 * eviction) takes it out of the hold set too, add-then-delete. */
static void
test_hold_elements(void **state)
{
	static const struct nft_limit lim = {
	    .plo = 6, .phi = 6, .lo = 443, .hi = 443};
	struct nft_learn_addr a[3] = {{.family = 4,
	                                  .addr = {203, 0, 113, 10},
	                                  .ttl = 60,
	                                  .name = "b.example",
	                                  .hold = true},
	    {.family = 6,
	        .addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10},
	        .ttl = 60,
	        .name = "a.example"},
	    {.family = 4,
	        .addr = {203, 0, 113, 11},
	        .ttl = 60,
	        .name = "b.example",
	        .hold = true,
	        .lim = &lim,
	        .nlim = 1}};
	struct nft_batch *b;
	struct err e;
	char *s;

	(void)state;
	assert_int_equal(nft_build_learn(a, 3, 1, 3600, &b, &e), 0);
	s = nft_batch_describe(b);
	if (getenv("NFQ_DUMP") != NULL)
		fputs(s, stderr);
	assert_true(line_of(s, "NEWSETELEM hold4 cb00710a(timeout 60000ms)",
	                NULL) >= 0);
	assert_true(line_of(s, "DELSETELEM hold4 cb00710a", NULL) >= 0);
	/* the limited record and the record without hold: not held */
	assert_int_equal(line_of(s, "hold4 cb00710b", NULL), -1);
	assert_int_equal(line_of(s, "hold6", NULL), -1);
	free(s);
	nft_batch_free(b);
}

static void
test_hold_commit(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	struct nft_learn_addr h = {.family = 6,
	    .addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10},
	    .ttl = 30,
	    .name = "a.example",
	    .hold = true};
	struct nft_kstate ks;
	struct nft_opts o;
	struct nft_batch *b;
	struct err e;
	char *s;

	(void)state;
	memset(&ks, 0, sizeof(ks));
	ks.hold = &h;
	ks.nhold = 1;
	queue_opts(&o, NFT_QUEUE_COMPAT);
	assert_int_equal(nft_build_ruleset(p, &o, &ks, &b, &e), 0);
	s = nft_batch_describe(b);
	assert_true(line_of(s,
	                "NEWSETELEM hold6 20010db8000000000000000000000010"
	                "(timeout 30000ms)",
	                NULL) >= 0);
	assert_int_equal(line_of(s, "DELSETELEM hold6", NULL), -1);
	free(s);
	nft_batch_free(b);
	/* queueing off: no hold set, no element */
	o.queue_kind = NFT_QUEUE_NONE;
	assert_int_equal(nft_build_ruleset(p, &o, &ks, &b, &e), 0);
	s = nft_batch_describe(b);
	assert_int_equal(line_of(s, "hold6", NULL), -1);
	free(s);
	nft_batch_free(b);
	policy_unref(p);
}

static void
test_mark_clash(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");
	struct nft_batch *b;
	struct nft_opts o;
	struct err e;

	(void)state;
	queue_opts(&o, NFT_QUEUE_COMPAT);
	o.mark = NFT_QMARK_OK;
	assert_int_equal(nft_build_ruleset(p, &o, NULL, &b, &e), -1);
	assert_non_null(strstr(e.msg, "in-flight"));
	o.mark = NFT_QMARK_RECHECK;
	assert_int_equal(nft_build_ruleset(p, &o, NULL, &b, &e), -1);
	assert_non_null(strstr(e.msg, "in-flight"));
	policy_unref(p);
}

static void
test_probe_batch(void **state)
{
	struct nft_batch *b;
	struct err e;
	char *s;

	(void)state;
	assert_int_equal(nft_build_queue_probe(NFT_QUEUE_COMPAT, 9, &b, &e), 0);
	assert_int_equal(nft_batch_nmsgs(b), 4);
	s = nft_batch_describe(b);
	assert_non_null(s);
	/* created and deleted in one transaction: never in force */
	assert_true(line_of(s, "NEWTABLE", "egressd_probe") >= 0);
	assert_true(line_of(s, "NFQUEUE", NULL) >= 0);
	assert_true(line_of(s, "DELTABLE", "egressd_probe") >= 0);
	free(s);
	nft_batch_free(b);
	assert_string_equal(
	    nft_queue_kind_name(NFT_QUEUE_COMPAT), "xt-nfqueue");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_off_by_default),
	    cmocka_unit_test(test_compat_rules),
	    cmocka_unit_test(test_bare_segments),
	    cmocka_unit_test(test_reopen_syn),
	    cmocka_unit_test(test_native_rules),
	    cmocka_unit_test(test_held),
	    cmocka_unit_test(test_hold_elements),
	    cmocka_unit_test(test_hold_commit),
	    cmocka_unit_test(test_mark_clash),
	    cmocka_unit_test(test_probe_batch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
