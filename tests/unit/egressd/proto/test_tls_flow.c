/*
 * tls_flow and ip_tcp: a ClientHello reassembled from queued segments,
 * and the headers of the packets that carry them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corpus_file.h"

#include "egressd/proto/ip_tcp.h"
#include "egressd/proto/tls_flow.h"

static uint8_t hello[1 << 16];
static uint8_t fbuf[TLS_FLOW_BYTES_MAX];

static size_t
load(const char *name)
{
	return corpus_file("tls_hello", name, hello, sizeof(hello));
}

/* Two segments, as a post-quantum hello over a 1,460-byte MSS. */
static void
test_two_segments(void **state)
{
	struct tls_flow f;
	struct tls_hello h;
	struct err e;
	size_t n = load("python_ssl"), cut = n / 2;
	uint32_t isn = 0xfffffff0u; /* the sequence wraps inside */

	(void)state;
	tls_flow_init(&f, fbuf, sizeof(fbuf));
	assert_int_equal(
	    tls_flow_add(&f, isn, hello, cut, &h, &e), TLS_FLOW_MORE);
	/* an ACK between them changes nothing */
	assert_int_equal(tls_flow_add(&f, isn + (uint32_t)cut, NULL, 0, &h, &e),
	    TLS_FLOW_MORE);
	assert_int_equal(
	    tls_flow_add(&f, isn + (uint32_t)cut, hello + cut, n - cut, &h, &e),
	    TLS_FLOW_OK);
	assert_string_equal(h.sni, "files.pythonhosted.org");
}

/* Byte by byte (a dripping client): MORE until the last byte. */
static void
test_drip(void **state)
{
	struct tls_flow f;
	struct tls_hello h;
	struct err e;
	size_t i, n = load("curl_a_test");

	(void)state;
	tls_flow_init(&f, fbuf, sizeof(fbuf));
	for (i = 0; i + 1 < n; i++)
		assert_int_equal(
		    tls_flow_add(&f, 1000 + (uint32_t)i, hello + i, 1, &h, &e),
		    TLS_FLOW_MORE);
	assert_int_equal(
	    tls_flow_add(&f, 1000 + (uint32_t)i, hello + i, 1, &h, &e),
	    TLS_FLOW_OK);
	assert_string_equal(h.sni, "a.test");
}

/* A retransmission must repeat the bytes judged; a gap adds nothing
 * until it is filled; overlap adds only what is new. */
static void
test_retransmit_gap_overlap(void **state)
{
	struct tls_flow f;
	struct tls_hello h;
	struct err e;
	size_t n = load("curl_a_test");
	uint8_t evil[64];

	(void)state;
	tls_flow_init(&f, fbuf, sizeof(fbuf));
	assert_int_equal(tls_flow_add(&f, 0, hello, 40, &h, &e), TLS_FLOW_MORE);
	/* gap: bytes 60.. before 40..60 */
	assert_int_equal(
	    tls_flow_add(&f, 60, hello + 60, n - 60, &h, &e), TLS_FLOW_MORE);
	assert_int_equal(f.len, 40);
	/* same bytes again: fine */
	assert_int_equal(tls_flow_add(&f, 0, hello, 40, &h, &e), TLS_FLOW_MORE);
	/* overlapping resend of 20..n */
	assert_int_equal(
	    tls_flow_add(&f, 20, hello + 20, n - 20, &h, &e), TLS_FLOW_OK);
	/* a different resend of judged bytes */
	tls_flow_init(&f, fbuf, sizeof(fbuf));
	assert_int_equal(tls_flow_add(&f, 0, hello, 40, &h, &e), TLS_FLOW_MORE);
	memcpy(evil, hello, 40);
	evil[39] ^= 1;
	assert_int_equal(tls_flow_add(&f, 0, evil, 40, &h, &e), TLS_FLOW_BAD);
	assert_non_null(strstr(e.msg, "differs"));
}

static void
test_not_tls_and_bound(void **state)
{
	struct tls_flow f;
	struct tls_hello h;
	struct err e;
	uint8_t small[64];

	(void)state;
	tls_flow_init(&f, fbuf, sizeof(fbuf));
	assert_int_equal(
	    tls_flow_add(&f, 7, (const uint8_t *)"GET / HTTP/1.1", 14, &h, &e),
	    TLS_FLOW_NOT_TLS);
	/* a hello longer than the buffer is refused, never overrun */
	tls_flow_init(&f, small, sizeof(small));
	assert_int_equal(tls_flow_add(&f, 0, hello, load("python_ssl"), &h, &e),
	    TLS_FLOW_BAD);
	/* a segment far outside the window */
	tls_flow_init(&f, fbuf, sizeof(fbuf));
	assert_int_equal(tls_flow_add(&f, 0, hello, 10, &h, &e), TLS_FLOW_MORE);
	assert_int_equal(
	    tls_flow_add(&f, 0x80000000u, hello, 10, &h, &e), TLS_FLOW_BAD);
}

static void
test_ip_tcp(void **state)
{
	/* IPv4, TCP 198.51.100.1:40000 -> 203.0.113.5:443, seq 0x01020304,
	 * PSH|ACK, 3 bytes */
	uint8_t p4[43] = {0x45, 0, 0, 43, 0, 0, 0x40, 0, 64, 6, 0, 0, 198, 51,
	    100, 1, 203, 0, 113, 5, 0x9c, 0x40, 0x01, 0xbb, 1, 2, 3, 4, 0, 0, 0,
	    0, 0x50, 0x18, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c'};
	uint8_t p6[63];
	struct ip_tcp t;
	struct err e;

	(void)state;
	assert_int_equal(ip_tcp_parse(p4, sizeof(p4), &t, &e), 0);
	assert_int_equal(t.family, 4);
	assert_int_equal(t.sport, 40000);
	assert_int_equal(t.dport, 443);
	assert_int_equal(t.seq, 0x01020304u);
	assert_int_equal(t.len, 3);
	assert_memory_equal(t.data, "abc", 3);
	/* a fragment, a short total length, a bad data offset */
	p4[6] = 0x20;
	assert_int_equal(ip_tcp_parse(p4, sizeof(p4), &t, &e), -1);
	p4[6] = 0x40;
	p4[3] = 50;
	assert_int_equal(ip_tcp_parse(p4, sizeof(p4), &t, &e), -1);
	p4[3] = 43;
	p4[32] = 0xf0;
	assert_int_equal(ip_tcp_parse(p4, sizeof(p4), &t, &e), -1);
	/* IPv6 with TCP next, then with a hop-by-hop header */
	memset(p6, 0, sizeof(p6));
	p6[0] = 0x60;
	p6[5] = 23;
	p6[6] = 6;
	p6[24] = 0x20;
	p6[25] = 0x01;
	p6[26] = 0x0d;
	p6[27] = 0xb8;
	p6[40 + 2] = 0x01;
	p6[40 + 3] = 0xbb;
	p6[40 + 12] = 0x50;
	assert_int_equal(ip_tcp_parse(p6, sizeof(p6), &t, &e), 0);
	assert_int_equal(t.family, 6);
	assert_int_equal(t.dport, 443);
	assert_int_equal(t.len, 3);
	p6[6] = 0;
	assert_int_equal(ip_tcp_parse(p6, sizeof(p6), &t, &e), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_segments),
	    cmocka_unit_test(test_drip),
	    cmocka_unit_test(test_retransmit_gap_overlap),
	    cmocka_unit_test(test_not_tls_and_bound),
	    cmocka_unit_test(test_ip_tcp),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
