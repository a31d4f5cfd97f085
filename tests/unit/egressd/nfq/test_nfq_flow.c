/*
 * nfq_flow: queued packets through their flows, without a kernel. The
 * verdicts are caught (the binary links with --wrap=nfq_verdict), the
 * clock is the test's: a hello in two segments held then passed with
 * the OK mark, a denied one refused, a drip refused at the packet or the
 * time bound, and a table full of judged flows making room for new ones
 * (it did not: a sandbox opening over NFQ_FLOWS_MAX TLS connections per
 * NFQ_JUDGED_KEEP_MS had its new ones refused).
 */
#include <fcntl.h>
#include <linux/netfilter.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "corpus_file.h"

#include "egressd/base/defaults.h"
#include "egressd/nfq/nfq_int.h"

#define VMAX 4096

static struct {
	uint32_t id, verdict, mark;
} got[VMAX];
static size_t ngot;
static uint64_t now_ms;
static uint8_t hello[1 << 16];
static size_t nhello;

void __wrap_nfq_verdict(
    struct nfq *q, uint32_t id, uint32_t verdict, uint32_t mark);

void
__wrap_nfq_verdict(struct nfq *q, uint32_t id, uint32_t verdict, uint32_t mark)
{
	(void)q;
	assert_true(ngot < VMAX);
	got[ngot].id = id;
	got[ngot].verdict = verdict;
	got[ngot++].mark = mark;
}

static uint64_t
clock_cb(void *arg)
{
	(void)arg;
	return now_ms;
}

/* The policy: a.test allowed, and files.pythonhosted.org while
 * pypi_ok; held_name needs the proxy. */
static bool pypi_ok;
static const char *held_name;

static const char *
judge_cb(void *arg, const char *name, const struct addr *dst, uint16_t port)
{
	(void)arg;
	(void)dst;
	assert_int_equal(port, 443);
	return strcmp(name, "a.test") == 0 ||
	        (pypi_ok && strcmp(name, "files.pythonhosted.org") == 0)
	    ? NULL
	    : "name_denied";
}

static bool
held_cb(void *arg, const char *name, uint16_t port)
{
	(void)arg;
	(void)port;
	return held_name != NULL && strcmp(name, held_name) == 0;
}

/* The addresses hold_cb was handed (the hold set's fallback). */
static struct addr holds[4];
static size_t nholds;

static void
hold_cb(void *arg, const struct addr *dst)
{
	(void)arg;
	assert_true(nholds < 4);
	holds[nholds++] = *dst;
}

static struct nfq_flow_id cut_ids[8];
static size_t ncut;

static void
cut_cb(void *arg, const struct nfq_flow_id *f)
{
	(void)arg;
	assert_true(ncut < 8);
	cut_ids[ncut++] = *f;
}

static struct log lg;

static struct nfq *
fake_queue(void)
{
	struct nfq *q = calloc(1, sizeof(*q));

	assert_non_null(q);
	log_init(&lg, open("/dev/null", O_WRONLY | O_CLOEXEC), LOG_INFO);
	q->magic = NFQ_MAGIC;
	q->o.hello_ms = 5000;
	q->o.clock = clock_cb;
	q->h.judge = judge_cb;
	q->h.held = held_cb;
	q->h.hold = hold_cb;
	q->log = &lg;
	q->judged = calloc(NFQ_JUDGED_MAX, sizeof(*q->judged));
	assert_non_null(q->judged);
	pypi_ok = false;
	held_name = NULL;
	ncut = nholds = 0;
	log_limiter_init(&q->lim, 10, 20, 1000);
	ngot = 0;
	now_ms = 1000000;
	return q;
}

static void
fake_free(struct nfq *q)
{
	nfq_flow_free_all(q);
	close(lg.fd);
	free(q->judged);
	free(q);
}

/* One IPv4 TCP packet from sport to 203.0.113.10:443 with seq and data. */
static size_t
pkt(uint8_t *p, uint16_t sport, uint32_t seq, const uint8_t *d, size_t n)
{
	size_t tot = 40 + n;

	memset(p, 0, 40);
	p[0] = 0x45;
	p[2] = (uint8_t)(tot >> 8);
	p[3] = (uint8_t)tot;
	p[8] = 64;
	p[9] = 6;
	memcpy(p + 12, (const uint8_t[]){198, 51, 100, 2}, 4);
	memcpy(p + 16, (const uint8_t[]){203, 0, 113, 10}, 4);
	p[20] = (uint8_t)(sport >> 8);
	p[21] = (uint8_t)sport;
	p[22] = 443 >> 8;
	p[23] = 443 & 0xff;
	p[24] = (uint8_t)(seq >> 24);
	p[25] = (uint8_t)(seq >> 16);
	p[26] = (uint8_t)(seq >> 8);
	p[27] = (uint8_t)seq;
	p[32] = 5 << 4;
	p[33] = 0x18; /* ACK PSH */
	if (n > 0)
		memcpy(p + 40, d, n);
	return tot;
}

static void
send_seg(struct nfq *q, uint32_t id, uint16_t sport, uint32_t seq,
    const uint8_t *d, size_t n)
{
	static uint8_t buf[70000];

	nfq_flow_packet(q, id, 0, buf, pkt(buf, sport, seq, d, n));
}

static void
load(const char *name)
{
	nhello = corpus_file("tls_hello", name, hello, sizeof(hello));
	assert_true(nhello > 100);
}

static void
test_two_segments_pass(void **state)
{
	struct nfq *q = fake_queue();

	(void)state;
	load("curl_a_test");
	send_seg(q, 1, 40000, 5000, hello, 100);
	assert_int_equal(ngot, 0); /* held: no verdict yet */
	send_seg(q, 2, 40000, 5100, hello + 100, nhello - 100);
	assert_int_equal(ngot, 2);
	assert_int_equal(got[0].id, 1);
	assert_int_equal(got[1].id, 2);
	assert_int_equal(got[0].verdict, NF_REPEAT);
	assert_int_equal(got[0].mark, EGRESSD_QMARK_OK);
	assert_int_equal(got[1].mark, EGRESSD_QMARK_OK);
	assert_int_equal(q->st.judged, 1);
	/* a late packet on the judged flow's tuple: the ruleset decides
	 * by its flow's ct mark (RECHECK) */
	send_seg(q, 3, 40000, 5000 + (uint32_t)nhello, hello, 10);
	assert_int_equal(got[2].verdict, NF_REPEAT);
	assert_int_equal(got[2].mark, EGRESSD_QMARK_RECHECK);
	/* a bare ACK of another pending flow passes without a mark */
	send_seg(q, 4, 40001, 1, NULL, 0);
	assert_int_equal(got[3].verdict, NF_ACCEPT);
	assert_int_equal(got[3].mark, 0);
	fake_free(q);
}

/* A new connection reusing the 5-tuple of a flow judged OK, with a
 * hello naming a denied host: the first time it is sent back with
 * RECHECK (its ct mark decides); back with RECHECK (its flow still
 * pending: a new connection), it is judged afresh and refused, never
 * given the old flow's OK. */
static void
test_reused_tuple_judged_afresh(void **state)
{
	static uint8_t buf[70000];
	static uint8_t a[1 << 16];
	struct nfq *q = fake_queue();
	size_t na;

	(void)state;
	load("curl_a_test");
	memcpy(a, hello, nhello);
	na = nhello;
	send_seg(q, 1, 40010, 1000, a, na);
	assert_int_equal(got[0].mark, EGRESSD_QMARK_OK);
	load("python_ssl"); /* SNI files.pythonhosted.org: denied here */
	send_seg(q, 2, 40010, 900000, hello, nhello);
	assert_int_equal(ngot, 2);
	assert_int_equal(got[1].verdict, NF_REPEAT);
	assert_int_equal(got[1].mark, EGRESSD_QMARK_RECHECK);
	assert_int_equal(q->st.refused, 0);
	nfq_flow_packet(q, 3, EGRESSD_QMARK_RECHECK, buf,
	    pkt(buf, 40010, 900000, hello, nhello));
	assert_int_equal(ngot, 3);
	assert_int_equal(got[2].id, 3);
	assert_int_equal(got[2].verdict, NF_REPEAT);
	assert_int_equal(got[2].mark, EGRESSD_QMARK_REFUSED);
	assert_int_equal(q->st.refused, 1);
	assert_int_equal(q->st.flows, 1);
	/* and the same with an allowed hello: judged again, OK */
	nfq_flow_packet(
	    q, 4, EGRESSD_QMARK_RECHECK, buf, pkt(buf, 40010, 5, a, na));
	assert_int_equal(got[3].mark, EGRESSD_QMARK_OK);
	assert_int_equal(q->st.judged, 2);
	fake_free(q);
}

static void
test_denied_refused(void **state)
{
	struct nfq *q = fake_queue();

	(void)state;
	load("python_ssl"); /* SNI files.pythonhosted.org: denied here */
	send_seg(q, 7, 40002, 1, hello, nhello);
	assert_int_equal(ngot, 1);
	assert_int_equal(got[0].verdict, NF_REPEAT);
	assert_int_equal(got[0].mark, EGRESSD_QMARK_REFUSED);
	assert_int_equal(q->st.refused, 1);
	fake_free(q);
}

/* A drip: refused at NFQ_HOLD_MAX held packets, every one of them. */
static void
test_drip_hold_bound(void **state)
{
	struct nfq *q = fake_queue();
	uint32_t i;

	(void)state;
	load("curl_a_test");
	for (i = 0; i < NFQ_HOLD_MAX; i++)
		send_seg(q, i + 1, 40003, 100 + i, hello + i, 1);
	assert_int_equal(ngot, 0);
	send_seg(q, 1000, 40003, 100 + i, hello + i, 1);
	assert_int_equal(ngot, NFQ_HOLD_MAX + 1);
	for (i = 0; i < ngot; i++)
		assert_int_equal(got[i].mark, EGRESSD_QMARK_REFUSED);
	fake_free(q);
}

/* A hello that stops: refused by the sweep once hello_ms passed. */
static void
test_drip_time_bound(void **state)
{
	struct nfq *q = fake_queue();

	(void)state;
	load("curl_a_test");
	send_seg(q, 1, 40004, 1, hello, 10);
	now_ms += 4999;
	nfq_flow_sweep(q);
	assert_int_equal(ngot, 0);
	now_ms += 1;
	nfq_flow_sweep(q);
	assert_int_equal(ngot, 1);
	assert_int_equal(got[0].mark, EGRESSD_QMARK_REFUSED);
	assert_int_equal(q->st.timeouts, 1);
	fake_free(q);
}

/* NFQ_FLOWS_MAX flows judged: a new one a second later still gets
 * judged (the judged ones make room); within the grace it is refused
 * (fail closed) rather than forgetting flows whose late packets may
 * still come. */
static void
test_full_table_makes_room(void **state)
{
	struct nfq *q = fake_queue();
	uint32_t i;

	(void)state;
	load("curl_a_test");
	for (i = 0; i < NFQ_FLOWS_MAX; i++)
		send_seg(q, i, (uint16_t)(10000 + i), 1, hello, nhello);
	assert_int_equal(q->st.judged, NFQ_FLOWS_MAX);
	assert_int_equal(q->st.flows, NFQ_FLOWS_MAX);
	ngot = 0;
	now_ms += NFQ_JUDGED_GRACE_MS - 1;
	send_seg(q, 5000, 60000, 1, hello, nhello);
	assert_int_equal(got[0].mark, EGRESSD_QMARK_REFUSED);
	now_ms += 1;
	send_seg(q, 5001, 60001, 1, hello, nhello);
	assert_int_equal(got[1].mark, EGRESSD_QMARK_OK);
	assert_int_equal(q->st.flows, 1);
	fake_free(q);
}

/* A busy client: 3,000 TLS connections at 1,500 a second, each judged
 * in flight; none is refused for want of room (with a 1 s grace the
 * table was full of flows judged within it from the 1,025th on). */
static void
test_busy_client_never_full(void **state)
{
	struct nfq *q = fake_queue();
	uint32_t i, refused = 0;

	(void)state;
	load("curl_a_test");
	for (i = 0; i < 3000; i++) {
		ngot = 0;
		if (i % 3 == 0)
			now_ms += 2;
		send_seg(q, i, (uint16_t)(10000 + i), 1, hello, nhello);
		assert_int_equal(ngot, 1);
		refused += got[0].mark != EGRESSD_QMARK_OK;
	}
	assert_int_equal(refused, 0);
	assert_int_equal(q->st.judged, 3000);
	assert_true(q->st.flows <= NFQ_FLOWS_MAX);
	fake_free(q);
}

/* After a policy change the passed flows are judged again by name: one
 * whose SNI is now denied (its address may well stay allowed) and one
 * whose host now needs the proxy are handed over once; the rest stay. */
/* A hello naming a host the proxy must see, on an address not yet
 * known to be held: refused (it cannot be read from here), and the
 * address handed to the hold set so the client's next try meets the
 * proxy. */
static void
test_held_refused_and_held(void **state)
{
	struct nfq *q = fake_queue();

	(void)state;
	held_name = "a.test";
	load("curl_a_test");
	send_seg(q, 9, 40003, 1, hello, nhello);
	assert_int_equal(ngot, 1);
	assert_int_equal(got[0].verdict, NF_REPEAT);
	assert_int_equal(got[0].mark, EGRESSD_QMARK_REFUSED);
	assert_int_equal(q->st.refused, 1);
	assert_int_equal(q->st.judged, 0);
	assert_int_equal(nholds, 1);
	assert_int_equal(holds[0].family, AF_INET);
	assert_memory_equal(
	    holds[0].a, ((const uint8_t[]){203, 0, 113, 10}), 4);
	/* a denied name is refused as denied: nothing to hold */
	load("python_ssl");
	send_seg(q, 10, 40004, 1, hello, nhello);
	assert_int_equal(q->st.refused, 2);
	assert_int_equal(nholds, 1);
	fake_free(q);
}

static void
test_rejudge_by_name(void **state)
{
	struct nfq *q = fake_queue();
	static uint8_t a[1 << 16];
	size_t na;

	(void)state;
	pypi_ok = true;
	load("curl_a_test");
	memcpy(a, hello, nhello);
	na = nhello;
	send_seg(q, 1, 41000, 1, a, na);
	load("python_ssl");
	send_seg(q, 2, 41001, 1, hello, nhello);
	assert_int_equal(q->st.judged, 2);
	assert_int_equal(nfq_rejudge(q, cut_cb, NULL), 0);
	pypi_ok = false; /* the PATCH: deny files.pythonhosted.org */
	assert_int_equal(nfq_rejudge(q, cut_cb, NULL), 1);
	assert_int_equal(cut_ids[0].sport, 41001);
	assert_int_equal(cut_ids[0].dport, 443);
	assert_int_equal(cut_ids[0].family, 4);
	assert_memory_equal(
	    cut_ids[0].dst, ((const uint8_t[]){203, 0, 113, 10}), 4);
	assert_int_equal(nfq_rejudge(q, cut_cb, NULL), 0); /* forgotten */
	held_name = "a.test"; /* a binding or request rules for a.test */
	assert_int_equal(nfq_rejudge(q, cut_cb, NULL), 1);
	assert_int_equal(cut_ids[1].sport, 41000);
	assert_int_equal(nfq_rejudge(q, cut_cb, NULL), 0);
	fake_free(q);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_segments_pass),
	    cmocka_unit_test(test_reused_tuple_judged_afresh),
	    cmocka_unit_test(test_denied_refused),
	    cmocka_unit_test(test_drip_hold_bound),
	    cmocka_unit_test(test_drip_time_bound),
	    cmocka_unit_test(test_full_table_makes_room),
	    cmocka_unit_test(test_busy_client_never_full),
	    cmocka_unit_test(test_held_refused_and_held),
	    cmocka_unit_test(test_rejudge_by_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
