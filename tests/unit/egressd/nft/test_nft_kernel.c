/*
 * nft against the kernel, in a throwaway network namespace: the test
 * process unshares its own (nothing outside is touched; the namespace dies
 * with the process). Needs root (CAP_NET_ADMIN); otherwise every case is
 * skipped with a message. Inspection uses `nft` the way an operator would.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <linux/capability.h>

#include <event2/event.h>

#include "egressd/nft/nft.h"
#include "egressd/base/stats.h"
#include "policy/policy.h"
#include "ts_netns.h"
#include "ts_policy.h"

#define OUT_MAX (1u << 20)

static bool have_netns;

/* Output of a shell command (caller frees). */
static char *
run(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	char *buf = calloc(1, OUT_MAX);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, OUT_MAX - 1, f);
	buf[n] = '\0';
	pclose(f);
	return buf;
}

static void
msleep(unsigned ms)
{
	struct timespec ts = {
	    .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static int
setup(void **state)
{
	(void)state;
	if (!have_netns)
		return 0; /* each case skips itself */
	/* a fresh table for each case */
	if (system("nft delete table inet egressd 2>/dev/null") == -1)
		return -1;
	return 0;
}

static const char *p1_json =
    "{\"defaultAction\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"a.example\"},"
    "{\"action\":\"allow\",\"target\":\"b.example\"},"
    "{\"action\":\"allow\",\"target\":\"c.example\"},"
    "{\"action\":\"allow\",\"target\":\"198.51.100.0/25\","
    "\"ports\":[9],\"protocols\":[\"udp\"]}],"
    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";

static const char *p2_json =
    "{\"defaultAction\":\"deny\",\"egress\":["
    "{\"action\":\"allow\",\"target\":\"a.example\"},"
    "{\"action\":\"allow\",\"target\":\"c.example\"},"
    "{\"action\":\"deny\",\"target\":\"203.0.113.9\"}],"
    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";

static struct nft *
mk(struct stats *st)
{
	struct nft_opts o;
	struct nft *n;
	struct err e;

	nft_opts_init(&o);
	n = nft_new(&o, st, &e);
	if (n == NULL)
		fail_msg("nft_new: %s", e.msg);
	return n;
}

static void
apply(struct nft *n, const char *json)
{
	struct policy *p = ts_policy_json(json);
	struct err e;

	if (nft_apply_policy(n, p, &e) != 0)
		fail_msg("apply: %s", e.msg);
	policy_unref(p);
}

static void
learn1(struct nft *n, int family, const char *a, uint32_t ttl, const char *name)
{
	struct nft_learn_addr la = {
	    .family = (uint8_t)family, .ttl = ttl, .name = name};
	struct err e;

	assert_int_equal(
	    inet_pton(family == 4 ? AF_INET : AF_INET6, a, la.addr), 1);
	if (nft_learn(n, &la, 1, &e) != 0)
		fail_msg("learn %s: %s", a, e.msg);
}

/* Seconds left on a learned4/6 element per `nft -j`, or -1 if absent. */
static long
expires_s(const char *set, const char *addr)
{
	char cmd[256], *out, *p;
	long v = -1;

	snprintf(cmd, sizeof(cmd), "nft -j list set inet egressd %s", set);
	out = run(cmd);
	p = strstr(out, addr);
	if (p != NULL) {
		p = strstr(p, "\"expires\": ");
		if (p != NULL)
			v = strtol(p + 11, NULL, 10);
		else
			v = 0;
	}
	free(out);
	return v;
}

/* UDP sendto from an unmarked socket: 0 or errno. */
static int
udp_send(const char *dst, uint16_t port)
{
	struct sockaddr_in sin = {
	    .sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), rc = 0;

	inet_pton(AF_INET, dst, &sin.sin_addr);
	if (sendto(fd, "x", 1, 0, (struct sockaddr *)&sin, sizeof(sin)) != 1)
		rc = errno;
	close(fd);
	return rc;
}

static void
test_apply_fresh_and_again(void **state)
{
	struct stats st;
	struct nft *n;
	char *a, *b;

	(void)state;
	if (!have_netns)
		skip();
	memset(&st, 0, sizeof(st));
	n = mk(&st);
	apply(n, p1_json);
	a = run("nft list table inet egressd | grep -v 'packets [0-9]'");
	assert_non_null(strstr(a,
	    "type filter hook output priority filter; "
	    "policy drop;"));
	assert_non_null(strstr(a, "udp dport 53 redirect to :15353"));
	assert_non_null(strstr(a, "ip daddr 127.0.0.1 udp dport 15353"));
	/* re-apply the same policy: adopt path, identical ruleset */
	apply(n, p1_json);
	b = run("nft list table inet egressd | grep -v 'packets [0-9]'");
	assert_string_equal(a, b);
	assert_int_equal(st.nft_batches, 2);
	assert_int_equal(st.nft_failures, 0);
	free(a);
	free(b);
	nft_free(n);
	/* nft_free leaves the table in force */
	a = run("nft list tables");
	assert_non_null(strstr(a, "table inet egressd"));
	free(a);
}

static void
test_enforcement(void **state)
{
	struct nft_counter c[NFT_NCOUNTERS];
	struct nft *n;
	struct err e;
	size_t i;
	uint64_t dd = 0, ua = 0, lr = 0;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	/* default deny fails fast (EPERM from the output hook) */
	assert_int_equal(udp_send("203.0.113.7", 9), EPERM);
	/* CIDR rule: udp 9 allowed, udp 10 not */
	assert_int_equal(udp_send("198.51.100.7", 9), 0);
	assert_int_equal(udp_send("198.51.100.7", 10), EPERM);
	/* metadata: denied */
	assert_int_equal(udp_send("169.254.169.254", 80), EPERM);
	/* learned: allowed at once */
	learn1(n, 4, "203.0.113.7", 30, "a.example");
	assert_int_equal(udp_send("203.0.113.7", 9), 0);
	/* QUIC never */
	assert_int_equal(udp_send("203.0.113.7", 443), EPERM);
	assert_int_equal(nft_read_counters(n, c, &e), 0);
	for (i = 0; i < NFT_NCOUNTERS; i++) {
		if (strcmp(c[i].name, "default_deny") == 0)
			dd = c[i].packets;
		if (strcmp(c[i].name, "user_allow") == 0)
			ua = c[i].packets;
		if (strcmp(c[i].name, "learned") == 0)
			lr = c[i].packets;
	}
	/* >= : the namespace's own IPv6 chatter may add a packet */
	assert_true(dd >= 2);
	assert_int_equal(ua, 1);
	assert_int_equal(lr, 1);
	nft_free(n);
}

static void
test_learn_refresh_expire(void **state)
{
	struct stats st;
	struct nft *n;
	const char *names[4];
	uint8_t a[4] = {203, 0, 113, 7};
	uint8_t a6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 7};
	uint64_t gen, vgen;
	long left;

	(void)state;
	if (!have_netns)
		skip();
	memset(&st, 0, sizeof(st));
	n = mk(&st);
	apply(n, p1_json);
	learn1(n, 4, "203.0.113.7", 2, "a.example");
	learn1(n, 6, "2001:db8::7", 2, "a.example");
	assert_true(expires_s("learned4", "203.0.113.7") >= 0);
	assert_true(expires_s("learned6", "2001:db8::7") >= 0);
	assert_int_equal(nft_learned_count(n), 2);
	assert_int_equal(nft_learned_lookup(n, 4, a, names, 4), 1);
	assert_string_equal(names[0], "a.example");
	gen = nft_learned_gen(n);
	vgen = nft_verdict_gen(n);
	/* re-learn with a longer TTL: the expiry moves forward */
	msleep(1100);
	learn1(n, 4, "203.0.113.7", 20, "www.a.example");
	left = expires_s("learned4", "203.0.113.7");
	assert_true(left >= 15 && left <= 20);
	assert_int_equal(nft_learned_lookup(n, 4, a, names, 4), 2);
	/* a shorter TTL later does not cut the lease short */
	learn1(n, 4, "203.0.113.7", 2, "a.example");
	left = expires_s("learned4", "203.0.113.7");
	assert_true(left >= 15 && left <= 20);
	/* names added and leases made longer lose no verdict */
	assert_true(nft_learned_gen(n) == gen);
	/* the v6 one (ttl 2) expires in the kernel and in the mirror */
	msleep(1500);
	assert_int_equal(expires_s("learned6", "2001:db8::7"), -1);
	assert_int_equal(nft_expire_tick(n), 1);
	/* one gone: what the proxy kept judged (judge_gen) is judged again */
	assert_true(nft_learned_gen(n) != gen);
	/* ... but a verdict taught to the kernel until that lease lapsed
	 * with it: the kernel's generation stays */
	assert_true(nft_verdict_gen(n) == vgen);
	assert_true(nft_learned_until(n, 6, a6) == 0);
	assert_int_equal(nft_learned_count(n), 1);
	assert_int_equal(st.nft_learned_current, 1);
	assert_int_equal(st.nft_learned, 4);
	nft_free(n);
}

/* nft_on_forget's record of what it was told. */
struct forgot {
	int n;
	char name[64];
	int family;
	uint8_t addr[16];
};

static void
forget_cb(void *arg, const char *name, int family, const uint8_t *addr)
{
	struct forgot *f = arg;

	f->n++;
	(void)snprintf(f->name, sizeof(f->name), "%s", name);
	f->family = family;
	memcpy(f->addr, addr, 16);
}

/*
 * A name pushed out of an address by newer ones: without a forget hook
 * every kernel verdict is voided (the generation moves); with one, that
 * name and address alone are told, and the kernel's generation stays
 * (the proxy's moves: its judgments by name are judged again).
 */
static void
test_names_forgotten(void **state)
{
	struct stats st;
	struct forgot f;
	struct nft *n;
	uint8_t a[4] = {203, 0, 113, 7};
	uint64_t gen, vgen;
	char nm[64];
	int i;

	(void)state;
	if (!have_netns)
		skip();
	memset(&st, 0, sizeof(st));
	memset(&f, 0, sizeof(f));
	n = mk(&st);
	apply(n, p1_json);
	for (i = 0; i < NFT_NAMES_PER_ADDR; i++) {
		snprintf(nm, sizeof(nm), "n%d.a.example", i);
		learn1(n, 4, "203.0.113.7", 60, nm);
	}
	vgen = nft_verdict_gen(n);
	learn1(n, 4, "203.0.113.7", 60, "n8.a.example");
	assert_true(nft_verdict_gen(n) != vgen);
	nft_on_forget(n, forget_cb, &f);
	gen = nft_learned_gen(n);
	vgen = nft_verdict_gen(n);
	learn1(n, 4, "203.0.113.7", 60, "n9.a.example");
	assert_int_equal(f.n, 1);
	assert_string_equal(f.name, "n1.a.example"); /* n0 went before */
	assert_int_equal(f.family, 4);
	assert_memory_equal(f.addr, a, 4);
	assert_true(nft_verdict_gen(n) == vgen);
	assert_true(nft_learned_gen(n) != gen);
	/* a name it holds already pushes nothing out */
	learn1(n, 4, "203.0.113.7", 60, "n9.a.example");
	assert_int_equal(f.n, 1);
	nft_free(n);
}

static void
test_policy_update_prunes(void **state)
{
	struct nft *n;
	uint8_t a8[4] = {203, 0, 113, 8};
	const char *names[2];
	char *s;
	long before, after;
	uint64_t gen, vgen;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	learn1(n, 4, "203.0.113.7", 50, "a.example");
	learn1(n, 4, "203.0.113.8", 50, "b.example");
	learn1(n, 4, "203.0.113.9", 50, "c.example");
	before = expires_s("learned4", "203.0.113.7");
	gen = nft_learned_gen(n);
	vgen = nft_verdict_gen(n);
	/* p2: b.example no longer allowed, 203.0.113.9 denied by CIDR */
	apply(n, p2_json);
	assert_true(nft_learned_gen(n) != gen);
	/* names dropped before their lease: the kernel's verdicts too */
	assert_true(nft_verdict_gen(n) != vgen);
	after = expires_s("learned4", "203.0.113.7");
	assert_true(after >= 0 && after <= before); /* kept, not reset */
	assert_int_equal(expires_s("learned4", "203.0.113.8"), -1);
	assert_int_equal(expires_s("learned4", "203.0.113.9"), -1);
	assert_int_equal(nft_learned_count(n), 1);
	assert_int_equal(nft_learned_lookup(n, 4, a8, names, 2), 0);
	s = run("nft list table inet egressd");
	assert_non_null(strstr(s, "203.0.113.9")); /* the deny rule set */
	assert_null(strstr(s, "203.0.113.8"));
	free(s);
	nft_free(n);
}

static void
test_failed_apply_keeps_old(void **state)
{
	struct stats st;
	struct nft *n;
	struct policy *p2;
	struct nft_batch *b;
	struct err e;
	char *before, *after;
	char *chains[] = {"filter_out", "nat_out", "deny"};
	char *sets[] = {"ghost"}; /* not in the kernel: DELSET fails */
	struct nft_kstate ks = {.table_exists = true,
	    .chains = chains,
	    .nchains = 3,
	    .sets = sets,
	    .nsets = 1};
	struct nft_opts o;

	(void)state;
	if (!have_netns)
		skip();
	memset(&st, 0, sizeof(st));
	n = mk(&st);
	apply(n, p1_json);
	learn1(n, 4, "203.0.113.7", 50, "a.example");
	before = run("nft list ruleset | grep -v 'expires\\|packets [0-9]'");
	p2 = ts_policy_json(p2_json);
	nft_opts_init(&o);
	assert_int_equal(nft_build_ruleset(p2, &o, &ks, &b, &e), 0);
	assert_int_equal(nft_send_batch(n, b, &e), -1);
	/* which message, and the kernel's errno */
	assert_non_null(strstr(e.msg, "DELSET ghost"));
	assert_non_null(strstr(e.msg, "No such file or directory"));
	after = run("nft list ruleset | grep -v 'expires\\|packets [0-9]'");
	assert_string_equal(before, after);
	assert_int_equal(st.nft_failures, 1);
	nft_batch_free(b);
	policy_unref(p2);
	free(before);
	free(after);
	nft_free(n);
}

static void
test_adopt_after_crash(void **state)
{
	struct nft *n;
	char *s;
	uint8_t a7[4] = {203, 0, 113, 7};
	const char *names[2];

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	learn1(n, 4, "203.0.113.7", 50, "a.example");
	nft_free(n); /* "crash": the table stays */
	/* someone adds objects to our table meanwhile */
	assert_int_equal(system("nft add chain inet egressd junk && "
	                        "nft add set inet egressd junkset "
	                        "'{ type ipv4_addr; }' && "
	                        "nft add rule inet egressd junk "
	                        "ip daddr @junkset accept"),
	    0);
	n = mk(NULL);
	apply(n, p2_json);
	s = run("nft list table inet egressd");
	assert_null(strstr(s, "junk"));
	assert_non_null(strstr(s, "203.0.113.7")); /* learned kept */
	free(s);
	/* adopted into the mirror, its name recovered from the comment */
	assert_int_equal(nft_learned_count(n), 1);
	assert_int_equal(nft_learned_lookup(n, 4, a7, names, 2), 1);
	assert_string_equal(names[0], "a.example");
	s = run("nft list set inet egressd learned4");
	assert_non_null(strstr(s, "comment \"a.example\""));
	free(s);
	nft_free(n);
}

/*
 * Item 16 of issue 16: a name of 128 bytes or more kept no element
 * comment, so after a restart its address had no name and a tightening
 * that denied the name did not prune it. Now every valid name (up to 253
 * bytes) rides in the comment.
 */
static void
test_adopt_long_name(void **state)
{
	static const char *allow_json =
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"*.example\"}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	char mid[254], lng[254], deny_json[1024], *s;
	uint8_t a7[4] = {203, 0, 113, 7}, a8[4] = {203, 0, 113, 8},
	        a9[4] = {203, 0, 113, 9};
	const char *names[2];
	struct nft *n;
	size_t i;

	(void)state;
	if (!have_netns)
		skip();
	/* 3 labels of 61, then "x.y.z.example": 199 bytes (a comment);
	 * then "q." prefixes up to 253 bytes (packed) */
	memset(mid, 0, sizeof(mid));
	for (i = 0; i < 3; i++) {
		memset(mid + i * 62, 'a' + (char)i, 61);
		mid[i * 62 + 61] = '.';
	}
	strcat(mid, "x.y.z.example");
	assert_int_equal(strlen(mid), 199);
	memcpy(lng, mid, sizeof(lng));
	while (strlen(lng) < 253) {
		memmove(lng + 2, lng, strlen(lng) + 1);
		lng[0] = 'q';
		lng[1] = '.';
	}
	assert_int_equal(strlen(lng), 253);
	snprintf(deny_json, sizeof(deny_json),
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"%s\"},"
	    "{\"action\":\"deny\",\"target\":\"%s\"},"
	    "{\"action\":\"allow\",\"target\":\"*.example\"}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}",
	    mid, lng);
	n = mk(NULL);
	apply(n, allow_json);
	learn1(n, 4, "203.0.113.7", 50, mid);
	learn1(n, 4, "203.0.113.8", 50, "short.example");
	learn1(n, 4, "203.0.113.9", 50, lng);
	nft_free(n); /* restart: only the kernel remembers */
	n = mk(NULL);
	apply(n, allow_json);
	assert_int_equal(nft_learned_lookup(n, 4, a7, names, 2), 1);
	assert_string_equal(names[0], mid);
	assert_int_equal(nft_learned_lookup(n, 4, a9, names, 2), 1);
	assert_string_equal(names[0], lng);
	s = run("nft list set inet egressd learned4");
	assert_non_null(strstr(s, mid)); /* readable comment */
	free(s);
	/* the tightening denies both long names: their addresses go */
	apply(n, deny_json);
	assert_int_equal(expires_s("learned4", "203.0.113.7"), -1);
	assert_int_equal(expires_s("learned4", "203.0.113.9"), -1);
	assert_true(expires_s("learned4", "203.0.113.8") > 0);
	assert_int_equal(nft_learned_lookup(n, 4, a7, names, 2), 0);
	assert_int_equal(nft_learned_lookup(n, 4, a9, names, 2), 0);
	assert_int_equal(nft_learned_lookup(n, 4, a8, names, 2), 1);
	nft_free(n);
}

/* Whether `nft list set inet egressd SET` mentions needle. */
static bool
set_has(const char *set, const char *needle)
{
	char cmd[128], *out;
	bool has;

	snprintf(cmd, sizeof(cmd), "nft list set inet egressd %s", set);
	out = run(cmd);
	has = strstr(out, needle) != NULL;
	free(out);
	return has;
}

/*
 * Ports on name rules (issue 16 item 7): the addresses of a name with
 * limits go to limited4/6 as addr . l4proto . port; only listed ports
 * open; a policy update moves them between the sets or changes the
 * elements; a restart recovers them with their names.
 */
static void
test_name_ports(void **state)
{
	static const char *lim9 =
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.example\",\"ports\":[9],"
	    "\"protocols\":[\"udp\"]},"
	    "{\"action\":\"allow\",\"target\":\"b.example\"}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	static const char *lim10 =
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.example\",\"ports\":"
	    "[\"10-11\"],\"protocols\":[\"udp\"]},"
	    "{\"action\":\"allow\",\"target\":\"b.example\"}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	static const char *open_all =
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.example\"},"
	    "{\"action\":\"allow\",\"target\":\"b.example\"}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	static const char *deny_a = "{\"defaultAction\":\"deny\",\"egress\":["
	                            "{\"action\":\"allow\",\"target\":"
	                            "\"b.example\"}],"
	                            "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	static const char *allow_but_9 =
	    "{\"defaultAction\":\"allow\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"a.example\",\"ports\":[9],"
	    "\"protocols\":[\"udp\"]}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	uint8_t a7[4] = {203, 0, 113, 7};
	const char *names[2];
	struct nft *n;
	long left;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, lim9);
	learn1(n, 4, "203.0.113.7", 30, "a.example");
	learn1(n, 4, "203.0.113.8", 30, "b.example");
	learn1(n, 6, "2001:db8::7", 30, "a.example");
	assert_true(set_has("limited4", "203.0.113.7 . udp . 9 "));
	assert_true(set_has("limited4", "comment \"a.example\""));
	assert_true(set_has("limited6", "2001:db8::7 . udp . 9 "));
	assert_int_equal(expires_s("learned4", "203.0.113.7"), -1);
	assert_true(expires_s("learned4", "203.0.113.8") > 0);
	/* only the listed port and protocol open */
	assert_int_equal(udp_send("203.0.113.7", 9), 0);
	assert_int_equal(udp_send("203.0.113.7", 10), EPERM);
	assert_int_equal(udp_send("203.0.113.8", 10), 0); /* no limit */
	/* the limits change: the elements follow, the lease stays */
	apply(n, lim10);
	assert_false(set_has("limited4", "203.0.113.7 . udp . 9 "));
	assert_true(set_has("limited4", "203.0.113.7 . udp . 10-11 "));
	assert_int_equal(udp_send("203.0.113.7", 9), EPERM);
	assert_int_equal(udp_send("203.0.113.7", 11), 0);
	/* renewal re-learns into the limited set too */
	learn1(n, 4, "203.0.113.7", 40, "a.example");
	assert_true(set_has("limited4", "203.0.113.7 . udp . 10-11 "));
	/* a restart recovers the limited elements and their names */
	nft_free(n);
	n = mk(NULL);
	apply(n, lim10);
	assert_int_equal(nft_learned_lookup(n, 4, a7, names, 2), 1);
	assert_string_equal(names[0], "a.example");
	assert_true(set_has("limited4", "203.0.113.7 . udp . 10-11 "));
	assert_int_equal(udp_send("203.0.113.7", 11), 0);
	/* the limit goes: the address moves to the plain set */
	apply(n, open_all);
	left = expires_s("learned4", "203.0.113.7");
	assert_true(left > 0 && left <= 40);
	assert_false(set_has("limited4", "203.0.113.7"));
	assert_int_equal(udp_send("203.0.113.7", 12), 0);
	/* and back, then default allow with a denied port */
	apply(n, lim9);
	assert_int_equal(expires_s("learned4", "203.0.113.7"), -1);
	assert_true(set_has("limited4", "203.0.113.7 . udp . 9 "));
	apply(n, allow_but_9);
	assert_true(set_has("limited4", "203.0.113.7 . udp . 9 "));
	assert_int_equal(udp_send("203.0.113.7", 9), EPERM);
	assert_int_equal(udp_send("203.0.113.7", 10), 0);
	/* a.example denied: its elements go, b.example's stay */
	apply(n, deny_a);
	assert_false(set_has("limited4", "203.0.113.7"));
	assert_false(set_has("limited6", "2001:db8::7"));
	assert_int_equal(nft_learned_lookup(n, 4, a7, names, 2), 0);
	assert_true(expires_s("learned4", "203.0.113.8") > 0);
	assert_int_equal(udp_send("203.0.113.7", 9), EPERM);
	nft_free(n);
}

static void
test_teardown(void **state)
{
	struct nft *n;
	struct err e;
	char *s;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	assert_int_equal(nft_teardown(n, &e), 0);
	s = run("nft list tables");
	assert_null(strstr(s, "egressd"));
	free(s);
	/* absent table: nothing to do */
	assert_int_equal(nft_teardown(n, &e), 0);
	/* learning needs an applied ruleset */
	{
		struct nft_learn_addr la = {.family = 4};

		assert_int_equal(nft_learn(n, &la, 1, &e), -1);
	}
	nft_free(n);
}

static void
test_selfcheck(void **state)
{
	struct nft *n;
	struct err e;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	if (nft_selfcheck(n, NULL, &e) != 0)
		fail_msg("selfcheck: %s", e.msg);
	/* break only the IPv6 redirect: the check notices */
	assert_int_equal(system("nft insert rule inet egressd nat_out "
	                        "meta nfproto ipv6 udp dport 53 accept"),
	    0);
	assert_int_equal(nft_selfcheck(n, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "IPv6 DNS redirect"));
	apply(n, p1_json);
	if (nft_selfcheck(n, NULL, &e) != 0)
		fail_msg("selfcheck after re-apply: %s", e.msg);
	/* without the table the redirect is gone and the check says so */
	assert_int_equal(nft_teardown(n, &e), 0);
	assert_int_equal(nft_selfcheck(n, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "redirect"));
	nft_free(n);
}

/* Without any route (IPv6-only pods, routes that come late) too. */
static void
test_selfcheck_no_route(void **state)
{
	struct nft *n;
	struct err e;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	assert_int_equal(system("ip route del default && "
	                        "ip -6 route del default"),
	    0);
	if (nft_selfcheck(n, NULL, &e) != 0)
		fail_msg("selfcheck without routes: %s", e.msg);
	assert_int_equal(system("ip route add default via 198.51.100.1 && "
	                        "ip -6 route add default via 2001:db8:1::1"),
	    0);
	nft_free(n);
}

/* A redirect that also catches egressd's own marked sockets is refused. */
static void
test_selfcheck_mark(void **state)
{
	struct nft *n;
	struct err e;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	assert_int_equal(
	    system("nft insert rule inet egressd nat_out "
	           "meta mark 0x1 udp dport 53 redirect to :15353"),
	    0);
	assert_int_equal(nft_selfcheck(n, NULL, &e), -1);
	assert_non_null(strstr(e.msg, "mark exemption"));
	apply(n, p1_json);
	if (nft_selfcheck(n, NULL, &e) != 0)
		fail_msg("selfcheck after re-apply: %s", e.msg);
	nft_free(n);
}

struct held {
	size_t n;
	char first[32];
	int family;
};

static void
held_cb(void *arg, int family, const uint8_t *msg, size_t len,
    const struct sockaddr *peer, socklen_t peerlen)
{
	struct held *h = arg;

	(void)peerlen;
	assert_int_equal(peer->sa_family, family);
	if (h->n++ == 0) {
		h->family = family;
		(void)snprintf(h->first, sizeof(h->first), "%.*s",
		    (int)(len < 31 ? len : 31), (const char *)msg);
	}
}

static int
udp_bound(int family, const char *addr, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		inet_pton(AF_INET, addr, &s4->sin_addr);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		inet_pton(AF_INET6, addr, &s6->sin6_addr);
		sl = sizeof(*s6);
	}
	fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&ss, sl), 0);
	return fd;
}

/*
 * On the resolver's sockets, queries that were redirected before (and
 * while) the check runs are handed over in order, none dropped, none
 * left behind unread ahead of the probes.
 */
static void
test_selfcheck_hands_over(void **state)
{
	struct nft *n;
	struct err e;
	struct held h;
	struct nft_selfcheck_io io;
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(53)};
	char q[32];
	int fd4, fd6, c, i;

	(void)state;
	if (!have_netns)
		skip();
	memset(&h, 0, sizeof(h));
	fd4 = udp_bound(AF_INET, "127.0.0.1", 15353);
	fd6 = udp_bound(AF_INET6, "::1", 15353);
	n = mk(NULL);
	apply(n, p1_json);
	/* a client asking "the resolver" 198.51.100.1, no one reading yet */
	inet_pton(AF_INET, "198.51.100.1", &to.sin_addr);
	c = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(c >= 0);
	for (i = 0; i < 100; i++) {
		int k = snprintf(q, sizeof(q), "client-query-%03d", i);

		assert_int_equal(sendto(c, q, (size_t)k, 0,
		                     (struct sockaddr *)&to, sizeof(to)),
		    k);
	}
	memset(&io, 0, sizeof(io));
	io.fd4 = fd4;
	io.fd6 = fd6;
	io.foreign = held_cb;
	io.arg = &h;
	if (nft_selfcheck(n, &io, &e) != 0)
		fail_msg("selfcheck on the resolver's sockets: %s", e.msg);
	assert_int_equal(h.n, 100);
	assert_int_equal(h.family, AF_INET);
	assert_string_equal(h.first, "client-query-000");
	close(c);
	close(fd4);
	close(fd6);
	nft_free(n);
}

static void
test_renew_live(void **state)
{
	struct nft *n;
	struct err e;
	size_t renewed = 0;
	long left;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, p1_json);
	learn1(n, 4, "203.0.113.20", 3, "a.example");
	learn1(n, 4, "203.0.113.21", 3, "a.example");
	/* a flow to .20 (conntrack entry), none to .21 */
	assert_int_equal(udp_send("203.0.113.20", 9), 0);
	if (nft_renew_live(n, 10, &renewed, &e) != 0) {
		if (strstr(e.msg, "conntrack") != NULL) {
			print_message(
			    "conntrack netlink unavailable: %s\n", e.msg);
			nft_free(n);
			skip();
		}
		fail_msg("renew: %s", e.msg);
	}
	assert_int_equal(renewed, 1);
	left = expires_s("learned4", "203.0.113.20");
	assert_true(left >= 15); /* window 10 -> ttl 20 */
	{
		char *out = run("nft list set inet egressd learned4");
		char *el = strstr(out, "203.0.113.20 "), *end;

		/* the refreshed element keeps its name */
		assert_non_null(el);
		end = strpbrk(el, ",}");
		assert_non_null(end);
		*end = '\0';
		assert_non_null(strstr(el, "timeout 20s"));
		assert_non_null(strstr(el, "comment \"a.example\""));
		free(out);
	}
	left = expires_s("learned4", "203.0.113.21");
	assert_true(left >= 0 && left <= 3);
	nft_free(n);
}

/* Renewal of an address in use whose name has limits: the limited
 * elements are refreshed, with their name, not a plain element added. */
static void
test_renew_limited(void **state)
{
	static const char *lim9 =
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.example\",\"ports\":[9],"
	    "\"protocols\":[\"udp\"]}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	struct nft *n;
	struct err e;
	size_t renewed = 0;

	(void)state;
	if (!have_netns)
		skip();
	n = mk(NULL);
	apply(n, lim9);
	learn1(n, 4, "203.0.113.22", 3, "a.example");
	assert_true(set_has("limited4", "203.0.113.22 . udp . 9 timeout 3s"));
	assert_int_equal(udp_send("203.0.113.22", 9), 0);
	if (nft_renew_live(n, 10, &renewed, &e) != 0) {
		if (strstr(e.msg, "conntrack") != NULL) {
			nft_free(n);
			skip();
		}
		fail_msg("renew: %s", e.msg);
	}
	assert_int_equal(renewed, 1);
	assert_true(set_has("limited4", "203.0.113.22 . udp . 9 timeout 20s"));
	assert_true(set_has("limited4", "comment \"a.example\""));
	assert_int_equal(expires_s("learned4", "203.0.113.22"), -1);
	assert_int_equal(udp_send("203.0.113.22", 10), EPERM);
	nft_free(n);
}

static void
test_large_policy(void **state)
{
	size_t cap = 1u << 20, off, i;
	char *json = malloc(cap);
	struct policy *p;
	struct nft *n;
	struct err e;
	struct timespec t0, t1;
	double dt;

	(void)state;
	if (!have_netns)
		skip();
	assert_non_null(json);
	off = (size_t)snprintf(json, cap,
	    "{\"defaultAction\":\"deny\","
	    "\"egress\":[");
	/* 4096 rules: 3072 single IPv6 addresses, 1024 ranges with ports */
	for (i = 0; i < 4096; i++)
		off += (size_t)snprintf(json + off, cap - off,
		    i < 3072 ? "%s{\"action\":\"%s\",\"target\":"
		               "\"2001:db8:%zx::1\"}"
		             : "%s{\"action\":\"%s\",\"target\":"
		               "\"2001:db8:%zx::/64\",\"ports\":[443],"
		               "\"protocols\":[\"tcp\"]}",
		    i ? "," : "", i % 7 ? "allow" : "deny", i);
	snprintf(json + off, cap - off, "]}");
	p = ts_policy_json(json);
	n = mk(NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (nft_apply_policy(n, p, &e) != 0)
		fail_msg("apply 4096 rules: %s", e.msg);
	if (nft_apply_policy(n, p, &e) != 0)
		fail_msg("re-apply 4096 rules: %s", e.msg);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	print_message("4096 rules: apply + re-apply in %.3f s\n", dt);
	assert_true(dt < 10.0);
	nft_free(n);
	policy_unref(p);
	free(json);
}

/* ---- asynchronous learning ---- */

struct done_rec {
	int calls, rc;
	char why[256];
};

static void
done_cb(void *arg, int rc, const char *why)
{
	struct done_rec *d = arg;

	d->calls++;
	d->rc = rc;
	snprintf(d->why, sizeof(d->why), "%s", why != NULL ? why : "");
}

static uint64_t
submit1(struct nft *n, const char *a6, const char *name, struct done_rec *d)
{
	struct nft_learn_addr la = {.family = 6, .ttl = 30};
	struct err e;
	uint64_t t;

	assert_int_equal(inet_pton(AF_INET6, a6, la.addr), 1);
	t = nft_learn_submit(n, &la, 1, name, done_cb, d, &e);
	if (t == 0)
		fail_msg("submit: %s", e.msg);
	return t;
}

/* Runs the loop until every record has its callback (bounded). */
static void
loop_until(struct event_base *base, struct done_rec *d, size_t nd)
{
	size_t i, k;

	for (k = 0; k < 500; k++) {
		for (i = 0; i < nd && d[i].calls > 0; i++)
			;
		if (i == nd)
			return;
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		msleep(2);
	}
	fail_msg("callbacks did not come");
}

static void
test_learn_async_batched(void **state)
{
	struct stats st;
	struct event_base *base;
	struct done_rec d[3];
	struct nft *n;
	struct err e;
	char *s;

	(void)state;
	if (!have_netns)
		skip();
	memset(&st, 0, sizeof(st));
	memset(d, 0, sizeof(d));
	base = event_base_new();
	assert_non_null(base);
	n = mk(&st);
	/* learning needs the socket and a ruleset */
	{
		struct nft_learn_addr la = {.family = 6};

		assert_int_equal(
		    nft_learn_submit(n, &la, 1, "a.example", done_cb, d, &e),
		    0);
		assert_non_null(strstr(e.msg, "not attached"));
	}
	assert_int_equal(nft_attach(n, base, &e), 0);
	apply(n, p1_json);
	/* three answers in one loop turn: one transaction, none released
	 * before the loop ran (never from inside submit) */
	submit1(n, "2001:db8:5::1", "a.example", &d[0]);
	submit1(n, "2001:db8:5::2", "b.example", &d[1]);
	submit1(n, "2001:db8:5::1", "c.example", &d[2]);
	assert_int_equal(d[0].calls + d[1].calls + d[2].calls, 0);
	loop_until(base, d, 3);
	assert_int_equal(d[0].rc, 0);
	assert_int_equal(d[1].rc, 0);
	assert_int_equal(d[2].rc, 0);
	assert_int_equal(st.nft_learn_txns, 1);
	assert_int_equal(st.nft_learned, 2); /* duplicates merged */
	s = run("nft list set inet egressd learned6");
	assert_non_null(strstr(s, "2001:db8:5::1"));
	assert_non_null(strstr(s, "2001:db8:5::2"));
	free(s);
	{
		const char *names[4];

		assert_int_equal(nft_learned_lookup(n, 6,
		                     (const uint8_t *)"\x20\x01\x0d\xb8\x00\x05"
		                                      "\0\0\0\0\0\0\0\0\0\x01",
		                     names, 4),
		    2);
	}

	/* A policy apply between submit and ack: the answer of a name the
	 * new policy denies is not released (its address was removed). */
	memset(d, 0, sizeof(d));
	submit1(n, "2001:db8:5::3", "b.example", &d[0]);
	submit1(n, "2001:db8:5::4", "a.example", &d[1]);
	apply(n, p2_json); /* b.example no longer allowed */
	loop_until(base, d, 2);
	assert_int_equal(d[0].rc, -1);
	assert_non_null(strstr(d[0].why, "removed"));
	assert_int_equal(d[1].rc, 0);
	s = run("nft list set inet egressd learned6");
	assert_null(strstr(s, "2001:db8:5::3"));
	assert_non_null(strstr(s, "2001:db8:5::4"));
	free(s);

	/* A cancelled ticket is never called back. */
	memset(d, 0, sizeof(d));
	nft_learn_cancel(n, submit1(n, "2001:db8:5::5", "a.example", &d[0]));
	submit1(n, "2001:db8:5::6", "a.example", &d[1]);
	loop_until(base, &d[1], 1);
	assert_int_equal(d[0].calls, 0);
	/* pending tickets at free: no callback, no leak (ASan) */
	submit1(n, "2001:db8:5::7", "a.example", &d[2]);
	nft_free(n);
	assert_int_equal(d[2].calls, 0);
	event_base_free(base);
}

/*
 * Names with limits in one asynchronous transaction: one address learned
 * for a name without limits and two with limits (merged, overlapping)
 * lands in both sets once; a policy apply in between that limits the
 * plain name keeps an answer that is still open, fails one that is not.
 */
static void
test_learn_async_limited(void **state)
{
	static const char *lim =
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.example\","
	    "\"ports\":[9,10],\"protocols\":[\"udp\"]},"
	    "{\"action\":\"allow\",\"target\":\"b.example\","
	    "\"ports\":[10,11],\"protocols\":[\"udp\"]},"
	    "{\"action\":\"allow\",\"target\":\"c.example\"}],"
	    "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	static const char *lim_c = "{\"defaultAction\":\"deny\",\"egress\":["
	                           "{\"action\":\"allow\",\"target\":"
	                           "\"*.example\",\"ports\":[9],"
	                           "\"protocols\":[\"udp\"]}],"
	                           "\"dns\":{\"ttlMin\":1,\"ttlMax\":60}}";
	struct event_base *base;
	struct done_rec d[3];
	struct stats st;
	struct nft *n;
	struct err e;

	(void)state;
	if (!have_netns)
		skip();
	memset(&st, 0, sizeof(st));
	memset(d, 0, sizeof(d));
	base = event_base_new();
	assert_non_null(base);
	n = mk(&st);
	assert_int_equal(nft_attach(n, base, &e), 0);
	apply(n, lim);
	submit1(n, "2001:db8:6::1", "a.example", &d[0]);
	submit1(n, "2001:db8:6::1", "c.example", &d[1]);
	submit1(n, "2001:db8:6::9", "a.example", &d[2]);
	loop_until(base, d, 3);
	if (d[0].rc != 0 || d[1].rc != 0 || d[2].rc != 0)
		fail_msg("rc %d %d %d: %s|%s|%s", d[0].rc, d[1].rc, d[2].rc,
		    d[0].why, d[1].why, d[2].why);
	assert_int_equal(st.nft_learn_txns, 1);
	assert_true(set_has("limited6", "2001:db8:6::1 . udp . 9-10 "));
	assert_true(expires_s("learned6", "2001:db8:6::1") > 0);
	/* b.example's 10-11 overlaps a.example's 9-10, in a later
	 * transaction and twice in one: the kernel takes no overlapping
	 * interval, so the address holds one merged element */
	memset(d, 0, sizeof(d));
	submit1(n, "2001:db8:6::1", "b.example", &d[0]);
	submit1(n, "2001:db8:6::9", "b.example", &d[1]);
	loop_until(base, d, 2);
	if (d[0].rc != 0 || d[1].rc != 0)
		fail_msg(
		    "rc %d %d: %s|%s", d[0].rc, d[1].rc, d[0].why, d[1].why);
	assert_true(set_has("limited6", "2001:db8:6::1 . udp . 9-11 "));
	assert_false(set_has("limited6", "2001:db8:6::1 . udp . 9-10 "));
	assert_true(set_has("limited6", "2001:db8:6::9 . udp . 9-11 "));
	memset(d, 0, sizeof(d));
	submit1(n, "2001:db8:6::7", "a.example", &d[0]);
	submit1(n, "2001:db8:6::7", "b.example", &d[1]);
	loop_until(base, d, 2);
	assert_int_equal(d[0].rc, 0);
	assert_int_equal(d[1].rc, 0);
	assert_true(set_has("limited6", "2001:db8:6::7 . udp . 9-11 "));
	/* between submit and ack the plain name gets a limit: the answer
	 * for the limited name is still open, the plain one's is not */
	memset(d, 0, sizeof(d));
	submit1(n, "2001:db8:6::2", "c.example", &d[0]);
	submit1(n, "2001:db8:6::3", "a.example", &d[1]);
	apply(n, lim_c);
	loop_until(base, d, 2);
	assert_int_equal(d[0].rc, -1);
	assert_int_equal(expires_s("learned6", "2001:db8:6::2"), -1);
	assert_true(set_has("limited6", "2001:db8:6::2 . udp . 9 "));
	assert_int_equal(d[1].rc, -1); /* its udp 10 went with the apply */
	assert_true(set_has("limited6", "2001:db8:6::3 . udp . 9 "));
	assert_false(set_has("limited6", "2001:db8:6::3 . udp . 9-10 "));
	/* and the merged element of ::1 became udp 9 alone */
	assert_true(set_has("limited6", "2001:db8:6::1 . udp . 9 "));
	assert_false(set_has("limited6", "2001:db8:6::1 . udp . 9-11 "));
	nft_free(n);
	event_base_free(base);
}

/* A full set evicts its least recently learned elements, never fails. */
static void
test_learn_evicts(void **state)
{
	struct stats st;
	struct nft_opts o;
	struct nft *n;
	struct err e;
	char a[64];
	char *s;
	int i;

	(void)state;
	if (!have_netns)
		skip();
	memset(&st, 0, sizeof(st));
	/* an adopted set declared with another size gets this one */
	assert_int_equal(system("nft add table inet egressd && nft add set "
	                        "inet egressd learned4 '{ type ipv4_addr; "
	                        "flags timeout; size 8; }'"),
	    0);
	nft_opts_init(&o);
	o.learned_max = 16;
	n = nft_new(&o, &st, &e);
	assert_non_null(n);
	apply(n, p1_json);
	s = run("nft list set inet egressd learned4");
	assert_non_null(strstr(s, "size 32")); /* twice the knob */
	free(s);
	/* the kernel took the size: the cap is the knob (a kernel keeping
	 * 8 would make it 4) */
	assert_int_equal(nft_learned_cap(n), 16);
	for (i = 1; i <= 40; i++) {
		snprintf(a, sizeof(a), "198.51.100.%d", 100 + i);
		learn1(n, 4, a, 60, "a.example");
		/* .101 learned again every 8 steps: always among the
		 * newest, never evicted */
		if (i % 8 == 0)
			learn1(n, 4, "198.51.100.101", 60, "a.example");
	}
	assert_int_equal(nft_learned_count_family(n, 4), 16);
	assert_int_equal(st.nft_learned_set[0], 16);
	assert_int_equal(st.nft_learned_capacity, 16);
	assert_int_equal(st.nft_learned_evicted, 24);
	s = run("nft list set inet egressd learned4");
	assert_non_null(strstr(s, "198.51.100.140 "));
	assert_non_null(strstr(s, "198.51.100.126 "));
	assert_non_null(strstr(s, "198.51.100.101 "));
	assert_null(strstr(s, "198.51.100.125 "));
	assert_null(strstr(s, "198.51.100.102 "));
	free(s);
	{
		const char *names[2];

		assert_int_equal(
		    nft_learned_lookup(
		        n, 4, (const uint8_t *)"\xc6\x33\x64\x65", names, 2),
		    1);
		assert_int_equal(
		    nft_learned_lookup(
		        n, 4, (const uint8_t *)"\xc6\x33\x64\x66", names, 2),
		    0);
	}
	nft_free(n);
}

/*
 * A container without NET_ADMIN, for real: a child drops CAP_NET_ADMIN
 * and tries the first apply. The refusal must name the capability
 * (nft_err; the other missing-nftables paths are injected in
 * test_nft_err.c) and leave the table as it was.
 */
static void
test_no_cap_net_admin(void **state)
{
	struct __user_cap_header_struct h = {
	    .version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct c[2];
	int fds[2], status;
	char msg[512] = "";
	ssize_t r;
	pid_t pid;
	char *out;

	(void)state;
	if (!have_netns)
		skip();
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct policy *p = ts_policy_json(p1_json);
		struct nft_opts o;
		struct nft *n;
		struct err e;

		close(fds[0]);
		if (syscall(SYS_capget, &h, c) != 0)
			_exit(2);
		c[CAP_NET_ADMIN / 32].effective &=
		    ~(1u << (CAP_NET_ADMIN % 32));
		c[CAP_NET_ADMIN / 32].permitted &=
		    ~(1u << (CAP_NET_ADMIN % 32));
		if (syscall(SYS_capset, &h, c) != 0)
			_exit(3);
		nft_opts_init(&o);
		n = nft_new(&o, NULL, &e);
		if (n != NULL && nft_apply_policy(n, p, &e) == 0)
			_exit(4); /* applied without the capability */
		if (write(fds[1], e.msg, strlen(e.msg)) < 0)
			_exit(5);
		_exit(0);
	}
	close(fds[1]);
	r = read(fds[0], msg, sizeof(msg) - 1);
	close(fds[0]);
	assert_true(waitpid(pid, &status, 0) == pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(r > 0);
	msg[r] = '\0';
	if (strstr(msg, "CAP_NET_ADMIN") == NULL ||
	    strstr(msg, strerror(EPERM)) == NULL)
		fail_msg("refusal without the reason: %s", msg);
	out = run("nft list tables");
	assert_null(strstr(out, "table inet egressd"));
	free(out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_apply_fresh_and_again, setup),
	    cmocka_unit_test_setup(test_enforcement, setup),
	    cmocka_unit_test_setup(test_learn_refresh_expire, setup),
	    cmocka_unit_test_setup(test_names_forgotten, setup),
	    cmocka_unit_test_setup(test_policy_update_prunes, setup),
	    cmocka_unit_test_setup(test_failed_apply_keeps_old, setup),
	    cmocka_unit_test_setup(test_adopt_after_crash, setup),
	    cmocka_unit_test_setup(test_adopt_long_name, setup),
	    cmocka_unit_test_setup(test_name_ports, setup),
	    cmocka_unit_test_setup(test_teardown, setup),
	    cmocka_unit_test_setup(test_selfcheck, setup),
	    cmocka_unit_test_setup(test_selfcheck_no_route, setup),
	    cmocka_unit_test_setup(test_selfcheck_mark, setup),
	    cmocka_unit_test_setup(test_selfcheck_hands_over, setup),
	    cmocka_unit_test_setup(test_renew_live, setup),
	    cmocka_unit_test_setup(test_renew_limited, setup),
	    cmocka_unit_test_setup(test_large_policy, setup),
	    cmocka_unit_test_setup(test_learn_async_batched, setup),
	    cmocka_unit_test_setup(test_learn_async_limited, setup),
	    cmocka_unit_test_setup(test_learn_evicts, setup),
	    cmocka_unit_test_setup(test_no_cap_net_admin, setup),
	};

	have_netns = ts_netns_enter("test_nft_kernel");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
