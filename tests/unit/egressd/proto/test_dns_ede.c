/*
 * Unit tests for the Extended DNS Errors (RFC 8914) of the DNS wire codec:
 * the EDE option dns_build.c writes into the OPT record of the answers
 * egressd makes itself (a denied name's NXDOMAIN, REFUSED), and the
 * reader dns_wire_ede() of dns_wire.c. Queries are hand-built; the OPT
 * bytes of the answers are checked by hand too, not only by the reader.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "egressd/proto/dns_wire.h"
#include "dns_testpk.h"

#define DENIED_TEXT "egressd: denied by policy"

static const struct dns_ede denied = {DNS_EDE_BLOCKED, DENIED_TEXT};

/* A query for name/A, with an OPT record of udp size udp when edns. */
static void
query_of(struct dns_query *q, const char *name, bool edns, uint16_t udp)
{
	struct pk p;

	pk_hdr(&p, 0x4242, DNS_FLAG_RD, 1, 0, 0, edns ? 1 : 0);
	pk_question(&p, name, DNS_TYPE_A);
	if (edns)
		pk_opt(&p, udp, 0, 0, DNS_EDNS_FLAG_DO);
	assert_int_equal(dns_query_parse(p.b, p.n, q), DNS_QUERY_OK);
}

static void
parse_ok(const uint8_t *b, size_t n, struct dns_msg *m)
{
	struct err e;

	err_clear(&e);
	if (dns_msg_parse(m, b, n, &e) != 0)
		fail_msg("parse failed: %s", e.msg);
}

/* The EDE option the answer ends with: code 15, length, INFO-CODE, text. */
static void
assert_ede_tail(const uint8_t *out, size_t n, uint16_t info, const char *text)
{
	size_t tl = strlen(text), opt = 4 + 2 + tl;
	const uint8_t *o = out + n - opt;

	assert_true(n > opt + 11);
	/* OPT's RDLEN is exactly one option. */
	assert_int_equal((o[-2] << 8) | o[-1], opt);
	assert_int_equal((o[0] << 8) | o[1], DNS_EDNS_OPT_EDE);
	assert_int_equal((o[2] << 8) | o[3], 2 + tl);
	assert_int_equal((o[4] << 8) | o[5], info);
	assert_memory_equal(o + 6, text, tl);
}

static void
test_ede_nxdomain_with_opt(void **state)
{
	struct dns_query q;
	uint8_t out[DNS_MSG_MAX];
	size_t n;
	struct dns_msg *m = dns_msg_new();
	struct dns_ede_seen seen;

	(void)state;
	assert_non_null(m);
	query_of(&q, "Exfil.Evil.Example", true, 1232);
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_NXDOMAIN, 30, &denied,
	                     out, sizeof(out), &n, NULL),
	    0);
	parse_ok(out, n, m);
	assert_int_equal(m->rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(m->count[DNS_SEC_AUTHORITY], 1);
	assert_int_equal(m->rr[0].type, DNS_TYPE_SOA);
	assert_true(m->edns.present);
	assert_int_equal(m->edns.flags, DNS_EDNS_FLAG_DO);
	assert_ede_tail(out, n, DNS_EDE_BLOCKED, DENIED_TEXT);
	assert_int_equal(dns_wire_ede(out, n, &seen), 1);
	assert_int_equal(seen.code, DNS_EDE_BLOCKED);
	assert_int_equal(seen.text_len, strlen(DENIED_TEXT));
	assert_string_equal(seen.text, DENIED_TEXT);
	/* Without ede the same answer has an OPT with no option. */
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_NXDOMAIN, 30, NULL,
	                     out, sizeof(out), &n, NULL),
	    0);
	parse_ok(out, n, m);
	assert_true(m->edns.present);
	assert_int_equal(dns_wire_ede(out, n, &seen), 0);
	dns_msg_free(m);
}

static void
test_ede_no_opt_unchanged(void **state)
{
	struct dns_query q;
	uint8_t a[DNS_MSG_MAX], b[DNS_MSG_MAX];
	size_t na, nb;
	struct dns_msg *m = dns_msg_new();
	struct dns_ede_seen seen;

	(void)state;
	assert_non_null(m);
	query_of(&q, "denied.example", false, 0);
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_NXDOMAIN, 30, &denied,
	                     a, sizeof(a), &na, NULL),
	    0);
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_NXDOMAIN, 30, NULL, b,
	                     sizeof(b), &nb, NULL),
	    0);
	/* RFC 6891: no OPT to a client that sent none, byte for byte. */
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	parse_ok(a, na, m);
	assert_false(m->edns.present);
	assert_int_equal(m->rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(dns_wire_ede(a, na, &seen), 0);
	/* The same for errors. */
	assert_int_equal(dns_build_error(&q, DNS_RCODE_REFUSED, &denied, a,
	                     sizeof(a), &na, NULL),
	    0);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_REFUSED, NULL, b,
	                     sizeof(b), &nb, NULL),
	    0);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	dns_msg_free(m);
}

static void
test_ede_refused(void **state)
{
	static const struct dns_ede cls = {
	    DNS_EDE_NOT_SUPPORTED, "egressd: only class IN is served"};
	struct dns_query q;
	uint8_t out[DNS_MSG_MAX];
	size_t n;
	struct dns_msg *m = dns_msg_new();
	struct dns_ede_seen seen;

	(void)state;
	assert_non_null(m);
	query_of(&q, "version.bind", true, 512);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_REFUSED, &cls, out,
	                     sizeof(out), &n, NULL),
	    0);
	parse_ok(out, n, m);
	assert_int_equal(m->rcode, DNS_RCODE_REFUSED);
	assert_int_equal(m->nrr, 0);
	assert_ede_tail(out, n, DNS_EDE_NOT_SUPPORTED, cls.text);
	assert_int_equal(dns_wire_ede(out, n, &seen), 1);
	assert_int_equal(seen.code, DNS_EDE_NOT_SUPPORTED);
	/* No text: the option is the INFO-CODE alone. */
	struct dns_ede bare = {DNS_EDE_BLOCKED, NULL};
	assert_int_equal(dns_build_error(&q, DNS_RCODE_REFUSED, &bare, out,
	                     sizeof(out), &n, NULL),
	    0);
	assert_ede_tail(out, n, DNS_EDE_BLOCKED, "");
	dns_msg_free(m);
}

/* Builds the answer to q with text under cap; the EDE seen in it. */
static int
build_seen(const struct dns_query *q, const char *text, size_t cap,
    struct dns_ede_seen *seen, size_t *n)
{
	static uint8_t out[DNS_MSG_MAX];
	struct dns_ede ede = {DNS_EDE_BLOCKED, text};
	struct dns_msg *m = dns_msg_new();

	assert_non_null(m);
	assert_int_equal(dns_build_negative(q, DNS_RCODE_NXDOMAIN, 30, &ede,
	                     out, cap, n, NULL),
	    0);
	assert_true(*n <= cap);
	parse_ok(out, *n, m);
	assert_true(m->edns.present);
	dns_msg_free(m);
	return dns_wire_ede(out, *n, seen);
}

static void
test_ede_text_cut(void **state)
{
	struct dns_query q;
	struct dns_ede_seen seen;
	char longtext[200];
	size_t base, n;
	uint8_t out[DNS_MSG_MAX];

	(void)state;
	query_of(&q, "a.example", true, 1232);
	/* Never more than DNS_EDE_TEXT_MAX bytes of text. */
	memset(longtext, 'x', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	assert_int_equal(build_seen(&q, longtext, DNS_MSG_MAX, &seen, &n), 1);
	assert_int_equal(seen.text_len, DNS_EDE_TEXT_MAX);

	/* The size of the answer without any option. */
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_NXDOMAIN, 30, NULL,
	                     out, sizeof(out), &base, NULL),
	    0);
	/* Room for the code and 5 bytes: the text is cut, the answer fits. */
	assert_int_equal(
	    build_seen(&q, DENIED_TEXT, base + 6 + 5, &seen, &n), 1);
	assert_int_equal(n, base + 6 + 5);
	assert_string_equal(seen.text, "egres");
	/* A cut never splits a UTF-8 character (e-acute is 2 bytes). */
	assert_int_equal(
	    build_seen(&q, "ab\xc3\xa9z", base + 6 + 3, &seen, &n), 1);
	assert_string_equal(seen.text, "ab");
	assert_int_equal(
	    build_seen(&q, "ab\xc3\xa9z", base + 6 + 4, &seen, &n), 1);
	assert_string_equal(seen.text, "ab\xc3\xa9");
	/* No room for the code: the option is left out, the answer stays. */
	assert_int_equal(build_seen(&q, DENIED_TEXT, base + 5, &seen, &n), 0);
	assert_int_equal(n, base);
}

static void
test_ede_udp_limit(void **state)
{
	char name[DNS_NAME_PRES_MAX];
	struct dns_query q;
	struct dns_ede_seen seen;
	char longtext[200];
	size_t n, i, o = 0;

	(void)state;
	/*
	 * The longest name (4 labels, 253 characters), the longest text and
	 * the smallest client: the answer still fits a classic datagram.
	 */
	for (i = 0; i < 4; i++) {
		size_t l = i < 3 ? 63 : 61;
		memset(name + o, 'a' + (int)i, l);
		o += l;
		name[o++] = i < 3 ? '.' : '\0';
	}
	memset(longtext, 'y', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = '\0';
	query_of(&q, name, true, 100); /* raised to DNS_EDNS_UDP_MIN */
	assert_int_equal(build_seen(&q, longtext, DNS_MSG_MAX, &seen, &n), 1);
	assert_true(n <= dns_query_udp_limit(&q));
	assert_true(n <= DNS_UDP_CLASSIC_MAX);
	assert_int_equal(seen.code, DNS_EDE_BLOCKED);
}

static void
test_ede_reader_malformed(void **state)
{
	struct pk p;
	struct dns_ede_seen seen;
	size_t at;

	(void)state;
	/* An EDE option shorter than its INFO-CODE. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 0, 0, 1);
	pk_question(&p, "x.example", DNS_TYPE_A);
	pk_u8(&p, 0);
	pk_u16(&p, DNS_TYPE_OPT);
	pk_u16(&p, 1232);
	pk_u32(&p, 0);
	at = p.n;
	pk_u16(&p, 0);
	pk_u16(&p, DNS_EDNS_OPT_EDE);
	pk_u16(&p, 1);
	pk_u8(&p, 0);
	pk_rdlen_end(&p, at);
	assert_int_equal(dns_wire_ede(p.b, p.n, &seen), -1);
	/* Another option first, then an EDE with text: found. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 0, 0, 1);
	pk_question(&p, "x.example", DNS_TYPE_A);
	pk_u8(&p, 0);
	pk_u16(&p, DNS_TYPE_OPT);
	pk_u16(&p, 1232);
	pk_u32(&p, 0);
	at = p.n;
	pk_u16(&p, 0);
	pk_u16(&p, 10); /* COOKIE */
	pk_u16(&p, 8);
	pk_bytes(&p, "12345678", 8);
	pk_u16(&p, DNS_EDNS_OPT_EDE);
	pk_u16(&p, 4);
	pk_u16(&p, 18);
	pk_bytes(&p, "no", 2);
	pk_rdlen_end(&p, at);
	assert_int_equal(dns_wire_ede(p.b, p.n, &seen), 1);
	assert_int_equal(seen.code, 18);
	assert_string_equal(seen.text, "no");
	/* Truncated message. */
	assert_int_equal(dns_wire_ede(p.b, p.n - 3, &seen), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ede_nxdomain_with_opt),
	    cmocka_unit_test(test_ede_no_opt_unchanged),
	    cmocka_unit_test(test_ede_refused),
	    cmocka_unit_test(test_ede_text_cut),
	    cmocka_unit_test(test_ede_udp_limit),
	    cmocka_unit_test(test_ede_reader_malformed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
