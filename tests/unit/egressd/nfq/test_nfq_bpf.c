/*
 * nfq_bpf: the in-kernel judge, run by the kernel on packets this test
 * builds (BPF_PROG_TEST_RUN), needing root (CAP_BPF) and skipped
 * without it. A remembered verdict passes the stream's first payload
 * (where the origin's SYN-ACK said the stream starts) and nothing else:
 * not a segment at another sequence number, not after a SYN the origin
 * never acknowledged, not under another generation, not past the lease,
 * not another name.
 *
 * And the property the design rests on: the kernel never passes a hello
 * tls_hello_parse would refuse. Every tls_hello corpus file (real
 * clients' hellos among them) and many mutations of each go through
 * both; whenever the kernel read a whole hello (it passed it, or counted
 * it missed for want of a verdict), tls_hello must accept it, with a host
 * name SNI, no ECH, and the very name the kernel looked up.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/bpf.h>

#include "corpus_file.h"

#include "egressd/nfq/nfq_bpf.h"
#include "egressd/proto/tls_hello.h"
#include "util/now.h"

#define PKT_MAX 8192
#define ISN 1000u

static struct nfq_bpf *kb;
static uint16_t sport = 40000;

static int
setup(void **state)
{
	struct err e = {""};

	(void)state;
	if (kb == NULL && (kb = nfq_bpf_new(&e)) == NULL)
		fprintf(stderr, "# no in-kernel judge here: %s\n", e.msg);
	if (kb != NULL)
		nfq_bpf_set_gen(kb, 1);
	return 0;
}

#define NEED_KB()                                                              \
	do {                                                                   \
		if (kb == NULL)                                                \
			skip();                                                \
	} while (0)

/* An Ethernet frame (test runs take one) of IPv4 or IPv6 and TCP from
 * sport to 443 (reply: from 443 to sport, the addresses swapped), flags,
 * seq, ack, payload. */
static size_t
frame_dir(uint8_t *f, int family, bool reply, uint8_t flags, uint32_t seq,
    uint32_t ack, const uint8_t *p, size_t n)
{
	uint8_t *ip = f + 14, *tcp;
	size_t iphl = family == 4 ? 20 : 40;
	const char *cli = family == 4 ? "198.51.100.2" : "2001:db8::2";
	const char *srv = family == 4 ? "203.0.113.10" : "2001:db8:1::10";
	int af = family == 4 ? AF_INET : AF_INET6;
	uint16_t from = reply ? 443 : sport, to = reply ? sport : 443;

	memset(f, 0, 14 + iphl + 20);
	f[12] = family == 4 ? 0x08 : 0x86;
	f[13] = family == 4 ? 0x00 : 0xdd;
	if (family == 4) {
		ip[0] = 0x45;
		ip[2] = (uint8_t)((20 + 20 + n) >> 8);
		ip[3] = (uint8_t)(20 + 20 + n);
		ip[8] = 64;
		ip[9] = 6;
		inet_pton(af, reply ? srv : cli, ip + 12);
		inet_pton(af, reply ? cli : srv, ip + 16);
	} else {
		ip[0] = 0x60;
		ip[4] = (uint8_t)((20 + n) >> 8);
		ip[5] = (uint8_t)(20 + n);
		ip[6] = 6;
		ip[7] = 64;
		inet_pton(af, reply ? srv : cli, ip + 8);
		inet_pton(af, reply ? cli : srv, ip + 24);
	}
	tcp = ip + iphl;
	tcp[0] = (uint8_t)(from >> 8);
	tcp[1] = (uint8_t)from;
	tcp[2] = (uint8_t)(to >> 8);
	tcp[3] = (uint8_t)to;
	tcp[4] = (uint8_t)(seq >> 24);
	tcp[5] = (uint8_t)(seq >> 16);
	tcp[6] = (uint8_t)(seq >> 8);
	tcp[7] = (uint8_t)seq;
	tcp[8] = (uint8_t)(ack >> 24);
	tcp[9] = (uint8_t)(ack >> 16);
	tcp[10] = (uint8_t)(ack >> 8);
	tcp[11] = (uint8_t)ack;
	tcp[12] = 5 << 4;
	tcp[13] = flags;
	if (n != 0)
		memcpy(tcp + 20, p, n);
	return 14 + iphl + 20 + n;
}

/* The client's packet. */
static size_t
frame(uint8_t *f, int family, uint8_t flags, uint32_t seq, const uint8_t *p,
    size_t n)
{
	return frame_dir(f, family, false, flags, seq, 0, p, n);
}

/* The origin's SYN-ACK acknowledging the client's ISN. */
static size_t
synack(uint8_t *f, int family, uint32_t isn)
{
	return frame_dir(f, family, true, 0x12, 777, isn + 1, NULL, 0);
}

static int
run(const uint8_t *f, size_t n)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f,
	    .data_size_in = (__u32)n, .repeat = 1);

	assert_int_equal(bpf_prog_test_run_opts(nfq_bpf_prog_fd(kb), &o), 0);
	return (int)o.retval;
}

/* A new flow (a new source port): its SYN, the origin's SYN-ACK, then
 * hello at seq_off past where the stream starts. The program's answer. */
static int
flow(int family, const uint8_t *hello, size_t n, uint32_t seq_off)
{
	static uint8_t f[PKT_MAX];

	assert_true(n + 80 <= sizeof(f));
	sport++;
	assert_int_equal(run(f, frame(f, family, 0x02, ISN, NULL, 0)), 0);
	assert_int_equal(run(f, synack(f, family, ISN)), 0);
	return run(f, frame(f, family, 0x18, ISN + 1 + seq_off, hello, n));
}

static void
remember(int family, const char *name, uint64_t gen, uint64_t until_ms)
{
	uint8_t a[16] = {0};
	struct err e = {""};

	inet_pton(family == 4 ? AF_INET : AF_INET6,
	    family == 4 ? "203.0.113.10" : "2001:db8:1::10", a);
	assert_int_equal(
	    nfq_bpf_remember(kb, name, family, a, 443, gen, until_ms, &e), 0);
}

static uint8_t hello[PKT_MAX];
static size_t nhello;

static void
load(const char *name)
{
	nhello = corpus_file("tls_hello", name, hello, sizeof(hello));
}

/* passed_each's callback: the flow of sport with sni. */
static bool
found_cb(void *arg, const struct nfq_bpf_tuple *f, const char *sni)
{
	int *found = arg;

	if (f->sport == sport && f->dport == 443 && strcmp(sni, "a.test") == 0)
		(*found)++;
	return f->sport == sport;
}

static void
test_remembered_passes(void **state)
{
	uint64_t p0, m0, u0, p1, m1, u1;
	int found = 0;

	(void)state;
	NEED_KB();
	load("curl_a_test"); /* SNI a.test */
	nfq_bpf_counts(kb, &p0, &m0, &u0);
	assert_int_equal(flow(4, hello, nhello, 0), 0);
	nfq_bpf_counts(kb, &p1, &m1, &u1);
	assert_true(m1 == m0 + 1 && p1 == p0); /* read, no verdict */
	remember(4, "a.test", 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	nfq_bpf_counts(kb, &p1, &m1, &u1);
	assert_true(p1 == p0 + 1);
	/* the flow is remembered with its SNI, and forgotten on asking */
	assert_int_equal(nfq_bpf_passed_each(kb, found_cb, &found), 1);
	assert_int_equal(found, 1);
	found = 0;
	assert_int_equal(nfq_bpf_passed_each(kb, found_cb, &found), 0);
	/* IPv6 is its own verdict */
	assert_int_equal(flow(6, hello, nhello, 0), 0);
	remember(6, "a.test", 1, now_mono_ms() + 60000);
	assert_int_equal(flow(6, hello, nhello, 0), 1);
}

/* audit_drain's callback: how many records, and the last one. */
struct seen {
	size_t n;
	uint16_t sport, dport;
	char sni[NFQ_BPF_NAME_LEN];
};

static void
seen_cb(void *arg, const struct nfq_bpf_tuple *f, const char *sni)
{
	struct seen *s = arg;

	s->n++;
	s->sport = f->sport;
	s->dport = f->dport;
	(void)snprintf(s->sni, sizeof(s->sni), "%s", sni);
}

/* Each pass is recorded for the log, with its flow and SNI; nothing
 * else is; a full ring loses records, counts them, and takes new ones
 * once drained. */
static void
test_audit_ring(void **state)
{
	struct seen s;
	uint64_t p0, m0, u0, p1, m1, u1;
	uint16_t first;
	size_t i, n;

	(void)state;
	NEED_KB();
	load("curl_a_test"); /* SNI a.test */
	remember(4, "a.test", 1, now_mono_ms() + 60000);
	(void)nfq_bpf_audit_drain(kb, seen_cb, &s); /* earlier tests' */
	memset(&s, 0, sizeof(s));
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	first = sport;
	assert_int_equal(flow(4, hello, nhello, 1), 0); /* not the start */
	assert_int_equal(nfq_bpf_audit_drain(kb, seen_cb, &s), 1);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.sport, first);
	assert_int_equal(s.dport, 443);
	assert_string_equal(s.sni, "a.test");
	assert_int_equal(nfq_bpf_audit_drain(kb, seen_cb, &s), 0);

	/* 1,000 records of 296 bytes do not fit in 256 KiB */
	nfq_bpf_counts(kb, &p0, &m0, &u0);
	for (i = 0; i < 1000; i++)
		assert_int_equal(flow(4, hello, nhello, 0), 1);
	nfq_bpf_counts(kb, &p1, &m1, &u1);
	assert_true(p1 == p0 + 1000);
	assert_true(u1 > u0);
	n = nfq_bpf_audit_drain(kb, seen_cb, &s);
	assert_int_equal(n + (size_t)(u1 - u0), 1000);
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	assert_int_equal(nfq_bpf_audit_drain(kb, seen_cb, &s), 1);
	assert_int_equal(s.sport, sport);
}

static void
test_only_the_first_payload(void **state)
{
	static uint8_t f[PKT_MAX];

	(void)state;
	NEED_KB();
	load("curl_a_test");
	remember(4, "a.test", 1, now_mono_ms() + 60000);
	/* a segment past the stream's start: the origin would read what
	 * comes before it first */
	assert_int_equal(flow(4, hello, nhello, 100), 0);
	assert_int_equal(flow(4, hello, nhello, (uint32_t)-1), 0);
	/* no SYN-ACK seen for the flow: a SYN is not enough (one the
	 * ruleset drops after, or a second one with another sequence
	 * number, would name a start the origin never took) */
	sport++;
	assert_int_equal(run(f, frame(f, 4, 0x18, ISN + 1, hello, nhello)), 0);
	run(f, frame(f, 4, 0x02, ISN, NULL, 0));
	assert_int_equal(run(f, frame(f, 4, 0x18, ISN + 1, hello, nhello)), 0);
	/* the origin took another SYN than the hello's: not passed */
	sport++;
	run(f, frame(f, 4, 0x02, ISN, NULL, 0));
	run(f, synack(f, 4, ISN + 5000));
	assert_int_equal(run(f, frame(f, 4, 0x18, ISN + 1, hello, nhello)), 0);
	assert_int_equal(
	    run(f, frame(f, 4, 0x18, ISN + 5001, hello, nhello)), 1);
	/* a hello with FIN, or with SYN */
	sport++;
	run(f, synack(f, 4, ISN));
	assert_int_equal(run(f, frame(f, 4, 0x19, ISN + 1, hello, nhello)), 0);
	assert_int_equal(run(f, frame(f, 4, 0x1a, ISN + 1, hello, nhello)), 0);
	/* a second hello at the start of a flow passed is judged again: its
	 * next SYN-ACK is what the kernel follows */
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	assert_int_equal(run(f, frame(f, 4, 0x18, ISN + 1, hello, nhello)), 0);
}

static void
test_generation_and_lease(void **state)
{
	(void)state;
	NEED_KB();
	load("curl_a_test");
	remember(4, "a.test", 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	nfq_bpf_set_gen(kb, 2); /* the judge moved: every verdict void */
	assert_int_equal(flow(4, hello, nhello, 0), 0);
	remember(4, "a.test", 2, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	remember(4, "a.test", 2, now_mono_ms() - 1); /* the lease ran out */
	assert_int_equal(flow(4, hello, nhello, 0), 0);
	nfq_bpf_set_gen(kb, 1);
}

/* Forgetting one (name, address, port) leaves every other verdict. */
static void
test_forget_one(void **state)
{
	uint8_t a[16] = {0};

	(void)state;
	NEED_KB();
	load("curl_a_test"); /* SNI a.test */
	remember(4, "a.test", 1, now_mono_ms() + 60000);
	remember(6, "a.test", 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	inet_pton(AF_INET, "203.0.113.10", a);
	nfq_bpf_forget(kb, "a.test", 4, a, 8443); /* another port: no effect */
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	nfq_bpf_forget(kb, "a.test", 4, a, 443);
	assert_int_equal(flow(4, hello, nhello, 0), 0);
	assert_int_equal(flow(6, hello, nhello, 0), 1); /* its IPv6 stays */
	nfq_bpf_forget(kb, "a.test", 4, a, 443); /* twice: nothing to do */
	remember(4, "a.test", 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello, 0), 1);
}

/* The name looked up is the one tls_hello gives: lowercase, no dot. */
static void
test_name_as_tls_hello(void **state)
{
	struct tls_hello th;
	struct err e = {""};

	(void)state;
	NEED_KB();
	load("gen_sni_case_dot");
	assert_int_equal(tls_hello_parse(hello, nhello, &th, &e), TLS_HELLO_OK);
	remember(4, th.sni, 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello, 0), 1);
	/* an IP literal, ECH, no SNI: the queue's, verdict or not */
	remember(4, "1.2.3.4", 1, now_mono_ms() + 60000);
	load("gen_sni_ipv4");
	assert_int_equal(flow(4, hello, nhello, 0), 0);
	load("gen_ech");
	assert_int_equal(tls_hello_parse(hello, nhello, &th, &e), TLS_HELLO_OK);
	remember(4, th.sni, 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello, 0), 0);
	/* a hello in two records, or two segments: the queue's */
	load("gen_split_7");
	assert_int_equal(flow(4, hello, nhello, 0), 0);
	load("curl_a_test");
	remember(4, "a.test", 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, hello, nhello - 1, 0), 0);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* One mutation of a hello: bytes changed, a length field off by a
 * little, bytes cut or repeated. */
static size_t
mutate(uint8_t *m, const uint8_t *h, size_t n)
{
	size_t k, i, at;

	memcpy(m, h, n);
	for (k = 1 + rnd() % 3; k > 0; k--) {
		at = n != 0 ? rnd() % n : 0;
		switch (rnd() % 6) {
		case 0:
			m[at] = (uint8_t)rnd();
			break;
		case 1:
		case 2:
			m[at] = (uint8_t)(m[at] + (rnd() % 5) - 2);
			break;
		case 3:
			/* an ASCII letter changed: names and their case */
			if (m[at] >= 'a' && m[at] <= 'z')
				m[at] = (uint8_t)(m[at] - 'a' + 'A');
			else
				m[at] = "._-:0xAZ"[rnd() % 8];
			break;
		case 4:
			if (n > 1)
				n -= 1 + rnd() % (n / 8 + 1);
			break;
		default:
			i = rnd() % 16;
			if (n + i < PKT_MAX - 100 && at + i <= n) {
				memmove(m + at + i, m + at, n - at);
				n += i;
			}
			break;
		}
	}
	return n;
}

/* h through the kernel and tls_hello: the property, checked. */
static void
both(const uint8_t *h, size_t n, size_t *read)
{
	uint64_t p0, m0, u0, p1, m1, u1;
	struct tls_hello th;
	struct err e = {""};
	enum tls_hello_rc rc;
	int r;

	nfq_bpf_counts(kb, &p0, &m0, &u0);
	r = flow(4, h, n, 0);
	nfq_bpf_counts(kb, &p1, &m1, &u1);
	if (p1 == p0 && m1 == m0) {
		assert_int_equal(r, 0);
		return; /* not read whole: the queue's */
	}
	(*read)++;
	rc = tls_hello_parse(h, n, &th, &e);
	if (rc != TLS_HELLO_OK || !th.has_sni || th.sni_is_ip || th.has_ech ||
	    th.has_esni || th.consumed != n)
		fail_msg("the kernel read a hello tls_hello refuses (rc %d: "
		         "%s)",
		    (int)rc, e.msg);
	/* ... and looked up the very name tls_hello gives */
	remember(4, th.sni, 1, now_mono_ms() + 60000);
	assert_int_equal(flow(4, h, n, 0), 1);
}

static void
test_never_more_than_tls_hello(void **state)
{
	static uint8_t m[PKT_MAX];
	static const char *const files[] = {"curl_a_test", "curl_http11",
	    "node_tls", "openssl_alpn", "openssl_tls12", "python_ssl",
	    "gen_basic", "gen_alpn_many", "gen_big_padding",
	    "gen_sni_underscore", "gen_sni_case_dot", "gen_bad_dup_ext",
	    "gen_bad_psk_not_last", "gen_bad_sni_two", "gen_bad_sni_254",
	    "gen_bad_sni_long_label", "gen_bad_sni_empty_label",
	    "gen_bad_trailing_in_record", "gen_bad_no_null_comp",
	    "gen_bad_sid_33", "gen_bad_odd_suites", "gen_sni_inet_aton",
	    "gen_alpn_nul", "gen_esni"};
	size_t i, k, read = 0, reads_valid = 0;

	(void)state;
	NEED_KB();
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		load(files[i]);
		if (nhello + 100 > PKT_MAX)
			continue;
		k = read;
		both(hello, nhello, &read);
		reads_valid += read > k;
		for (k = 0; k < 1500; k++)
			both(m, mutate(m, hello, nhello), &read);
	}
	fprintf(stderr,
	    "# %zu hellos read whole in the kernel, %zu of them "
	    "unmutated\n",
	    read, reads_valid);
	/* the real clients' hellos are read in the kernel: the fast path
	 * is not a path nothing takes */
	assert_true(reads_valid >= 6);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_remembered_passes, setup),
	    cmocka_unit_test_setup(test_audit_ring, setup),
	    cmocka_unit_test_setup(test_only_the_first_payload, setup),
	    cmocka_unit_test_setup(test_generation_and_lease, setup),
	    cmocka_unit_test_setup(test_forget_one, setup),
	    cmocka_unit_test_setup(test_name_as_tls_hello, setup),
	    cmocka_unit_test_setup(test_never_more_than_tls_hello, setup),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	nfq_bpf_free(kb);
	return rc;
}
