/*
 * Unit tests for egressd/dns/dns_upstream*.c: upstream list parsing, resolv.conf,
 * the query we send, and the live path against fake upstreams in the same
 * event loop (answer, TC -> TCP, timeout budget, failover, health, probes,
 * cancel, reload).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dns_fake_upstream.h"
#include "dns_testpk.h"
#include "egressd/dns/dns_upstream.h"
#include "util/now.h"

/* ---- parsing ---- */

static void
test_parse_forms(void **state)
{
	struct dns_upstream_addr a;
	struct err e;

	(void)state;
	assert_int_equal(dns_upstream_parse("203.0.113.7", &a, &e), 0);
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(a.port, 53);
	assert_string_equal(a.text, "203.0.113.7:53");

	assert_int_equal(dns_upstream_parse("203.0.113.7:5353", &a, &e), 0);
	assert_int_equal(a.port, 5353);
	assert_string_equal(a.text, "203.0.113.7:5353");

	assert_int_equal(dns_upstream_parse("[2001:db8::53]:5300", &a, &e), 0);
	assert_int_equal(a.family, AF_INET6);
	assert_int_equal(a.port, 5300);
	assert_string_equal(a.text, "[2001:db8::53]:5300");

	assert_int_equal(dns_upstream_parse("2001:db8::53", &a, &e), 0);
	assert_int_equal(a.port, 53);
	assert_string_equal(a.text, "[2001:db8::53]:53");

	assert_int_equal(dns_upstream_parse("[2001:db8::1]", &a, &e), 0);
	assert_int_equal(a.port, 53);
}

static void
test_parse_rejects(void **state)
{
	static const char *bad[] = {
	    "",
	    "dns.google",
	    "resolver.example.com:53",
	    "localhost",
	    "203.0.113.7:0",
	    "203.0.113.7:65536",
	    "203.0.113.7:",
	    "203.0.113.7:53x",
	    "203.0.113.7:-1",
	    "[2001:db8::1",
	    "[2001:db8::1]x",
	    "[2001:db8::1]:",
	    "[203.0.113.7]:53",
	    "fe80::1%eth0",
	    "1.2.3",
	    "1.2.3.4.5",
	    " 203.0.113.7",
	};
	struct dns_upstream_addr a;
	struct err e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		if (dns_upstream_parse(bad[i], &a, &e) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_true(e.msg[0] != '\0');
	}
	assert_int_equal(dns_upstream_parse(NULL, &a, &e), -1);
	err_clear(&e);
	assert_int_equal(dns_upstream_parse("dns.google", &a, &e), -1);
	assert_non_null(strstr(e.msg, "hostnames"));
}

static void
test_parse_list(void **state)
{
	const char *ok[] = {"198.51.100.1", "[2001:db8::2]:53"};
	const char *bad[] = {"198.51.100.1", "ns.example.com"};
	const char *many[DNS_UPSTREAMS_MAX + 1];
	struct dns_upstream_addr a[DNS_UPSTREAMS_MAX];
	struct err e;
	size_t n, i;

	(void)state;
	assert_int_equal(
	    dns_upstream_parse_list(ok, 2, a, DNS_UPSTREAMS_MAX, &n, &e), 0);
	assert_int_equal(n, 2);
	assert_int_equal(
	    dns_upstream_parse_list(bad, 2, a, DNS_UPSTREAMS_MAX, &n, &e), -1);
	assert_int_equal(n, 0);
	for (i = 0; i < DNS_UPSTREAMS_MAX + 1; i++)
		many[i] = "198.51.100.9";
	assert_int_equal(dns_upstream_parse_list(many, DNS_UPSTREAMS_MAX + 1, a,
	                     DNS_UPSTREAMS_MAX, &n, &e),
	    -1);
}

static void
test_resolv_conf(void **state)
{
	const char conf[] = "# generated\n"
	                    "search example.com\n"
	                    "nameserver 198.51.100.53\n"
	                    "nameserver   2001:db8::35 # comment\n"
	                    "nameserver dns.example.com\n"
	                    "nameserver fe80::1%eth0\n"
	                    "\tnameserver 127.0.0.53\n"
	                    "options edns0 trust-ad\n"
	                    "nameserverx 203.0.113.1\n";
	const char none[] = "search x\nnameserver bogus\n";
	struct dns_upstream_addr a[DNS_UPSTREAMS_MAX];
	struct err e;
	size_t n;

	(void)state;
	assert_int_equal(dns_upstream_parse_resolv_conf(
	                     conf, strlen(conf), a, DNS_UPSTREAMS_MAX, &n, &e),
	    0);
	assert_int_equal(n, 3);
	assert_string_equal(a[0].text, "198.51.100.53:53");
	assert_string_equal(a[1].text, "[2001:db8::35]:53");
	assert_string_equal(a[2].text, "127.0.0.53:53");
	assert_true(dns_upstream_addr_is_loopback(&a[2]));
	assert_false(dns_upstream_addr_is_loopback(&a[0]));
	assert_int_equal(dns_upstream_parse_resolv_conf(
	                     none, strlen(none), a, DNS_UPSTREAMS_MAX, &n, &e),
	    -1);
	assert_non_null(strstr(e.msg, "bogus"));
	assert_int_equal(
	    dns_upstream_parse_resolv_conf("", 0, a, DNS_UPSTREAMS_MAX, &n, &e),
	    -1);
	assert_int_equal(dns_upstream_from_resolv_conf("/nonexistent/resolv", a,
	                     DNS_UPSTREAMS_MAX, &n, &e),
	    -1);
}

static void
test_query_build(void **state)
{
	uint8_t name[] = {3, 'W', 'w', 'W', 4, 't', 'e', 's', 't', 0};
	uint8_t out[64];
	size_t len;

	(void)state;
	assert_int_equal(dns_upstream_query_build(name, sizeof(name), 28, 1,
	                     true, true, out, sizeof(out), &len),
	    0);
	assert_int_equal(len, 12 + sizeof(name) + 4 + 11);
	assert_int_equal(out[2], 0x01); /* RD */
	assert_int_equal(out[3], 0x10); /* CD */
	assert_int_equal(out[5], 1);
	assert_int_equal(out[11], 1);
	assert_memory_equal(out + 12, name, sizeof(name)); /* case kept */
	assert_int_equal(out[12 + sizeof(name) + 1], 28);
	/* OPT: udp 1232, DO set, no options. */
	assert_int_equal(out[len - 11], 0); /* root owner */
	assert_int_equal(out[len - 10] << 8 | out[len - 9], 41);
	assert_int_equal(out[len - 8] << 8 | out[len - 7], 1232);
	assert_int_equal(out[len - 6], 0); /* ext rcode */
	assert_int_equal(out[len - 5], 0); /* version */
	assert_int_equal(out[len - 4], 0x80); /* DO */
	assert_int_equal(out[len - 2] << 8 | out[len - 1], 0); /* rdlen */
	assert_int_equal(dns_upstream_query_build(name, sizeof(name), 1, 1,
	                     false, false, out, 20, &len),
	    -1);
}

/* ---- live ---- */

struct result {
	bool done;
	bool ok;
	size_t len;
	uint8_t ans[4096];
	char who[DNS_UPSTREAM_TEXT_MAX];
	uint64_t at_ms;
};

static void
done_cb(void *arg, const uint8_t *ans, size_t len, const char *upstream)
{
	struct result *r = arg;

	r->done = true;
	r->ok = ans != NULL;
	r->at_ms = now_mono_ms();
	if (ans != NULL) {
		r->len = len < sizeof(r->ans) ? len : sizeof(r->ans);
		memcpy(r->ans, ans, r->len);
		snprintf(r->who, sizeof(r->who), "%s", upstream);
	}
}

static void
run_until(struct event_base *base, const bool *flag, unsigned max_ms)
{
	uint64_t end = now_mono_ms() + max_ms;

	while (!*flag && now_mono_ms() < end)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static void
run_for(struct event_base *base, unsigned ms)
{
	bool never = false;

	run_until(base, &never, ms);
}

struct ctx {
	struct event_base *base;
	struct log lg;
	struct stats st;
	struct fake_upstream *f1, *f2;
};

static int
setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	c->base = event_base_new();
	log_init(&c->lg, 2, LOG_ERROR);
	c->f1 = fake_upstream_new(c->base, 0);
	c->f2 = fake_upstream_new(c->base, 0);
	fake_add_a(c->f1, "www.allowed.test", "203.0.113.10", 300);
	fake_add_a(c->f2, "www.allowed.test", "203.0.113.20", 300);
	*state = c;
	return 0;
}

static int
teardown(void **state)
{
	struct ctx *c = *state;

	fake_upstream_free(c->f1);
	fake_upstream_free(c->f2);
	event_base_free(c->base);
	free(c);
	return 0;
}

static struct dns_upstreams *
make_set(struct ctx *c, struct fake_upstream **fs, size_t n,
    unsigned attempt_ms, const char *probe)
{
	struct dns_upstream_addr a[DNS_UPSTREAMS_MAX];
	struct dns_upstreams_opts o;
	struct dns_upstreams *u;
	struct err e;
	char buf[64];
	size_t i;

	for (i = 0; i < n; i++) {
		fake_upstream_addr(fs[i], buf, sizeof(buf));
		assert_int_equal(dns_upstream_parse(buf, &a[i], &e), 0);
	}
	memset(&o, 0, sizeof(o));
	o.attempt_timeout_ms = attempt_ms;
	o.probe_name = probe;
	o.probe_interval_ms = 100000;
	u = dns_upstreams_new(c->base, a, n, &o, &c->lg, &c->st, &e);
	if (u == NULL)
		fail_msg("dns_upstreams_new: %s", e.msg);
	return u;
}

static size_t
query_for(const char *name, uint16_t qtype, uint8_t *out)
{
	uint8_t w[256];
	size_t wl = pk_wire_name(name, w), len;

	assert_int_equal(dns_upstream_query_build(w, wl, qtype, 1, false, false,
	                     out, DNS_UPSTREAM_QUERY_MAX, &len),
	    0);
	return len;
}

/* The A record's address is the last 4 bytes of a single-answer reply. */
static void
assert_answer_ip(const struct result *r, const char *ip)
{
	uint8_t a[4];

	inet_pton(AF_INET, ip, a);
	assert_true(r->ok);
	assert_true(r->len > 16);
	assert_int_equal(r->ans[7], 1); /* ANCOUNT */
	assert_memory_equal(r->ans + r->len - 4, a, 4);
}

static void
test_answer_udp(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 500, NULL);
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);

	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 0, 2000, done_cb, &r));
	assert_false(r.done); /* never inside dns_upstream_send */
	run_until(c->base, &r.done, 3000);
	assert_answer_ip(&r, "203.0.113.10");
	assert_int_equal(c->f1->udp_queries, 1);
	assert_int_equal(c->f1->tcp_queries, 0);
	assert_true(c->f1->last_had_opt);
	{
		char want[64];

		fake_upstream_addr(c->f1, want, sizeof(want));
		assert_string_equal(r.who, want);
	}
	assert_int_equal(c->st.dns_upstream_lat_count, 1);
	assert_int_equal(dns_upstreams_pending(u), 0);
	dns_upstreams_free(u);
}

static void
test_tcp_query_goes_tcp(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 500, NULL);
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);

	assert_non_null(
	    dns_upstream_send(u, q, ql, true, 0, 2000, done_cb, &r));
	run_until(c->base, &r.done, 3000);
	assert_answer_ip(&r, "203.0.113.10");
	assert_int_equal(c->f1->udp_queries, 0);
	assert_int_equal(c->f1->tcp_queries, 1);
	dns_upstreams_free(u);
}

static void
test_tc_retries_over_tcp(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 500, NULL);
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);

	c->f1->mode = FAKE_TC;
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 0, 2000, done_cb, &r));
	run_until(c->base, &r.done, 3000);
	assert_answer_ip(&r, "203.0.113.10");
	assert_int_equal(r.ans[2] & 0x02, 0); /* not truncated */
	assert_int_equal(c->f1->udp_queries, 1);
	assert_int_equal(c->f1->tcp_queries, 1);
	assert_int_equal(c->st.dns_upstream_tc_retries, 1);
	dns_upstreams_free(u);
}

static void
test_down_fails_within_budget(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 200, NULL);
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	uint64_t t0;

	c->f1->mode = FAKE_DROP;
	t0 = now_mono_ms();
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 150, 500, done_cb, &r));
	run_until(c->base, &r.done, 3000);
	assert_true(r.done);
	assert_false(r.ok);
	/* Within the 500 ms budget (plus scheduling slack). */
	assert_true(r.at_ms - t0 >= 140);
	assert_true(r.at_ms - t0 < 800);
	/* Retried the only upstream while the budget lasted. */
	assert_true(c->f1->udp_queries >= 2);
	assert_true(c->st.dns_upstream_failures >= 2);
	assert_int_equal(dns_upstreams_healthy(u), 0);
	dns_upstreams_free(u);
}

static void
test_failover_and_health(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1, c->f2};
	struct dns_upstreams *u = make_set(c, fs, 2, 1000, NULL);
	struct dns_upstream_status st[DNS_UPSTREAMS_MAX];
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	int i;

	c->f1->mode = FAKE_DROP;
	for (i = 0; i < 2; i++) {
		struct result r = {0};
		uint64_t t0 = now_mono_ms();

		assert_non_null(
		    dns_upstream_send(u, q, ql, false, 150, 2000, done_cb, &r));
		run_until(c->base, &r.done, 3000);
		assert_answer_ip(&r, "203.0.113.20");
		assert_true(r.at_ms - t0 >= 140);
	}
	assert_int_equal(c->f1->udp_queries, 2);
	assert_int_equal(c->f2->udp_queries, 2);
	assert_int_equal(dns_upstreams_healthy(u), 1);
	assert_int_equal(dns_upstreams_status(u, st, DNS_UPSTREAMS_MAX), 2);
	assert_false(st[0].healthy);
	assert_true(st[1].healthy);
	assert_int_equal(st[0].consecutive_failures, 2);

	/* Now the healthy one is asked first: no wait for the dead one. */
	{
		struct result r = {0};
		uint64_t t0 = now_mono_ms();

		assert_non_null(
		    dns_upstream_send(u, q, ql, false, 150, 2000, done_cb, &r));
		run_until(c->base, &r.done, 3000);
		assert_answer_ip(&r, "203.0.113.20");
		assert_true(r.at_ms - t0 < 145); /* the dead one costs 150 */
		assert_int_equal(c->f1->udp_queries, 2);
	}
	dns_upstreams_free(u);
}

/*
 * Issue #16 item 2: a silent first upstream, attempt timeout (the policy's
 * timeoutMs, 5 s by default) longer than the 2 s budget. The lookup must
 * still be answered by the second upstream, well inside the budget.
 */
static void
test_silent_first_hedges_within_budget(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1, c->f2};
	struct dns_upstreams *u = make_set(c, fs, 2, 2000, NULL);
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	int i;

	c->f1->mode = FAKE_DROP;
	for (i = 0; i < 2; i++) {
		struct result r = {0};
		uint64_t t0 = now_mono_ms();

		assert_non_null(dns_upstream_send(
		    u, q, ql, false, 5000, 2000, done_cb, &r));
		run_until(c->base, &r.done, 3000);
		assert_answer_ip(&r, "203.0.113.20");
		/* The hedge: RTO_INIT, not the attempt timeout or budget. */
		assert_true(r.at_ms - t0 >= DNS_UPSTREAM_RTO_INIT_MS - 10);
		assert_true(r.at_ms - t0 < 1900);
	}
	/* A hedge is no failure by itself; c-ares' own timeout is. */
	run_for(c->base, 2200);
	assert_int_equal(dns_upstreams_healthy(u), 1);
	assert_true(c->st.dns_upstream_failures >= 2);
	dns_upstreams_free(u);
}

/*
 * Eight upstreams, seven silent, a 2.4 s budget: each gets a fair share
 * (300 ms), so the eighth is asked in time. The share is wide enough for a
 * loaded ASan run (a 1 s budget, 125 ms shares, failed there); without the
 * sharing the first silent upstream would take the whole budget.
 */
static void
test_budget_shared_by_all_upstreams(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[8];
	struct dns_upstreams *u;
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q), i;

	for (i = 0; i < 7; i++) {
		fs[i] = fake_upstream_new(c->base, 0);
		fs[i]->mode = FAKE_DROP;
	}
	fs[7] = c->f2;
	u = make_set(c, fs, 8, 5000, NULL);
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 5000, 2400, done_cb, &r));
	run_until(c->base, &r.done, 5000);
	assert_answer_ip(&r, "203.0.113.20");
	for (i = 0; i < 7; i++)
		assert_int_equal(fs[i]->udp_queries, 1);
	dns_upstreams_free(u);
	for (i = 0; i < 7; i++)
		fake_upstream_free(fs[i]);
}

/*
 * An upstream known to answer fast that goes silent costs its RTO (about
 * DNS_UPSTREAM_RTO_MIN_MS), not the attempt timeout; its late answer,
 * when it comes, proves it alive.
 */
static void
test_rtt_hedge_and_late_answer_alive(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1, c->f2};
	struct dns_upstreams *u = make_set(c, fs, 2, 2000, NULL);
	struct dns_upstream_status st[DNS_UPSTREAMS_MAX];
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	struct result r = {0}, r2 = {0};
	uint64_t t0;

	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 2000, 3000, done_cb, &r));
	run_until(c->base, &r.done, 3000);
	assert_answer_ip(&r, "203.0.113.10");
	c->f1->delay_ms = 700;
	t0 = now_mono_ms();
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 2000, 3000, done_cb, &r2));
	run_until(c->base, &r2.done, 3000);
	assert_answer_ip(&r2, "203.0.113.20");
	assert_true(r2.at_ms - t0 < 650);
	run_for(c->base, 900); /* f1's late answer lands on an orphan */
	assert_int_equal(dns_upstreams_status(u, st, DNS_UPSTREAMS_MAX), 2);
	assert_true(st[0].healthy);
	assert_int_equal(st[0].consecutive_failures, 0);
	assert_int_equal(st[0].failures, 0);
	dns_upstreams_free(u);
}

static void
test_late_answer_still_wins(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 2000, NULL);
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	uint64_t t0;

	/*
	 * Answers take 250 ms, attempts time out after 100 ms: the first
	 * attempt's late answer is used (retries went out meanwhile).
	 */
	c->f1->delay_ms = 250;
	t0 = now_mono_ms();
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 100, 1000, done_cb, &r));
	run_until(c->base, &r.done, 3000);
	assert_answer_ip(&r, "203.0.113.10");
	assert_true(r.at_ms - t0 >= 240);
	assert_true(r.at_ms - t0 < 950); /* before the 1 s budget */
	assert_true(c->f1->udp_queries >= 2);
	/* Slow but alive: not left marked down. */
	assert_int_equal(dns_upstreams_healthy(u), 1);
	run_for(c->base, 400); /* the retries' answers land on orphans */
	assert_int_equal(dns_upstreams_pending(u), 0);
	dns_upstreams_free(u);
}

static void
test_refused_port_fails_over_fast(void **state)
{
	struct ctx *c = *state;
	struct dns_upstream_addr a[2];
	struct dns_upstreams *u;
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	struct err e;
	char buf[64];
	int s;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	uint64_t t0;

	/* A port nobody listens on: bind, learn it, close. */
	s = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(s, (struct sockaddr *)&sin, sizeof(sin));
	getsockname(s, (struct sockaddr *)&sin, &sl);
	close(s);
	snprintf(buf, sizeof(buf), "127.0.0.1:%u", ntohs(sin.sin_port));
	assert_int_equal(dns_upstream_parse(buf, &a[0], &e), 0);
	fake_upstream_addr(c->f2, buf, sizeof(buf));
	assert_int_equal(dns_upstream_parse(buf, &a[1], &e), 0);
	u = dns_upstreams_new(c->base, a, 2, NULL, &c->lg, &c->st, &e);
	assert_non_null(u);
	t0 = now_mono_ms();
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 1000, 3000, done_cb, &r));
	run_until(c->base, &r.done, 3000);
	assert_answer_ip(&r, "203.0.113.20");
	/* ICMP port unreachable ends the attempt well before 1 s. */
	assert_true(r.at_ms - t0 < 950);
	dns_upstreams_free(u);
}

static void
test_probe_restores_health(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 200, "probe.allowed.test");
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	struct result r = {0};

	c->f1->mode = FAKE_DROP;
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 100, 450, done_cb, &r));
	run_until(c->base, &r.done, 3000);
	assert_false(r.ok);
	assert_int_equal(dns_upstreams_healthy(u), 0);
	c->f1->mode = FAKE_ANSWER;
	dns_upstreams_probe_now(u);
	run_for(c->base, 200);
	assert_true(fake_saw(c->f1, "probe.allowed.test"));
	assert_int_equal(dns_upstreams_healthy(u), 1);
	dns_upstreams_free(u);

	/* Without a configured name the probe asks for ". NS". */
	u = make_set(c, fs, 1, 200, NULL);
	c->f1->nlog = 0;
	dns_upstreams_probe_now(u);
	run_for(c->base, 200);
	assert_int_equal(c->f1->nlog, 1);
	assert_string_equal(c->f1->log[0], "");
	dns_upstreams_free(u);
}

static void
test_cancel(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 500, NULL);
	struct result r = {0};
	struct dns_upstream_req *rq;
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);

	c->f1->mode = FAKE_DROP; /* so the request is still pending */
	rq = dns_upstream_send(u, q, ql, false, 0, 2000, done_cb, &r);
	assert_non_null(rq);
	run_for(c->base, 20); /* the query leaves */
	assert_int_equal(c->f1->udp_queries, 1);
	assert_false(r.done);
	dns_upstream_cancel(rq);
	run_for(c->base, 200);
	assert_false(r.done);
	assert_int_equal(dns_upstreams_pending(u), 0);
	/* A pending request at free time is dropped silently. */
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 0, 2000, done_cb, &r));
	dns_upstreams_free(u);
	assert_false(r.done);
}

static void
test_replace_moves_pending(void **state)
{
	struct ctx *c = *state;
	struct fake_upstream *fs[] = {c->f1};
	struct dns_upstreams *u = make_set(c, fs, 1, 1000, NULL);
	struct dns_upstream_addr a;
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	struct err e;
	char buf[64];

	c->f1->mode = FAKE_DROP;
	assert_non_null(
	    dns_upstream_send(u, q, ql, false, 0, 3000, done_cb, &r));
	run_for(c->base, 20);
	assert_int_equal(c->f1->udp_queries, 1);
	fake_upstream_addr(c->f2, buf, sizeof(buf));
	assert_int_equal(dns_upstream_parse(buf, &a, &e), 0);
	assert_int_equal(dns_upstreams_replace(u, &a, 1, &e), 0);
	run_until(c->base, &r.done, 3000);
	assert_answer_ip(&r, "203.0.113.20");
	assert_int_equal(dns_upstreams_count(u), 1);
	dns_upstreams_free(u);
}

static void
test_no_upstreams(void **state)
{
	struct ctx *c = *state;
	struct dns_upstreams *u;
	struct result r = {0};
	uint8_t q[DNS_UPSTREAM_QUERY_MAX];
	size_t ql = query_for("www.allowed.test", 1, q);
	struct err e;

	u = dns_upstreams_new(c->base, NULL, 0, NULL, &c->lg, &c->st, &e);
	assert_non_null(u);
	assert_null(dns_upstream_send(u, q, ql, false, 0, 100, done_cb, &r));
	assert_null(dns_upstream_send(u, q, 5, false, 0, 100, done_cb, &r));
	dns_upstreams_free(u);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_forms),
	    cmocka_unit_test(test_parse_rejects),
	    cmocka_unit_test(test_parse_list),
	    cmocka_unit_test(test_resolv_conf),
	    cmocka_unit_test(test_query_build),
	    cmocka_unit_test_setup_teardown(test_answer_udp, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_tcp_query_goes_tcp, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_tc_retries_over_tcp, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_down_fails_within_budget, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_failover_and_health, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_refused_port_fails_over_fast, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_late_answer_still_wins, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_silent_first_hedges_within_budget, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_budget_shared_by_all_upstreams, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_rtt_hedge_and_late_answer_alive, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_probe_restores_health, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_replace_moves_pending, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_upstreams, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
