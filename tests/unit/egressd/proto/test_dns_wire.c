/*
 * Unit tests for the DNS wire codec (egressd/proto/dns_wire.h: dns_name.c,
 * dns_msg.c, dns_build.c, dns_answer.c, dns_wire.c): hand-built packets in,
 * decoded structs and built responses (re-parsed) out.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "egressd/proto/dns_wire.h"
#include "dns_testpk.h"

static struct dns_msg *
parse_ok(const uint8_t *b, size_t n)
{
	struct dns_msg *m = dns_msg_new();
	struct err e;

	assert_non_null(m);
	err_clear(&e);
	if (dns_msg_parse(m, b, n, &e) != 0)
		fail_msg("parse failed: %s", e.msg);
	return m;
}

static bool
parses(const uint8_t *b, size_t n)
{
	struct dns_msg *m = dns_msg_new();
	struct err e;
	int r;

	assert_non_null(m);
	r = dns_msg_parse(m, b, n, &e);
	dns_msg_free(m);
	return r == 0;
}

static void
pres_of(const struct dns_name *n, unsigned flags, char *buf)
{
	assert_true(dns_name_to_pres(n, flags, buf, DNS_NAME_PRES_MAX) >= 0);
}

/* ---- client queries ---- */

static void
test_query_basic_0x20(void **state)
{
	struct pk p;
	struct dns_query q;
	char pres[DNS_NAME_PRES_MAX];

	(void)state;
	pk_hdr(&p, 0xbeef, DNS_FLAG_RD, 1, 0, 0, 0);
	pk_question(&p, "WwW.ExAmple.CoM", DNS_TYPE_AAAA);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_OK);
	assert_int_equal(q.id, 0xbeef);
	assert_true(q.have_question);
	assert_int_equal(q.question.qtype, DNS_TYPE_AAAA);
	assert_int_equal(q.question.qclass, DNS_CLASS_IN);
	assert_int_equal(q.question.name.labels, 3);
	assert_int_equal(q.question.name.len, 17);
	assert_memory_equal(q.question.name.wire, p.b + 12, 17);
	pres_of(&q.question.name, 0, pres);
	assert_string_equal(pres, "WwW.ExAmple.CoM");
	pres_of(&q.question.name, DNS_PRES_LOWER, pres);
	assert_string_equal(pres, "www.example.com");
	assert_false(q.edns.present);
	assert_int_equal(dns_query_udp_limit(&q), 512);
}

static void
test_query_drop(void **state)
{
	struct pk p;
	struct dns_query q;

	(void)state;
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, 11, &q), DNS_QUERY_DROP);
	assert_int_equal(dns_query_parse(p.b, 0, &q), DNS_QUERY_DROP);
	/* A response (QR=1) is never answered. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 0, 0, 0);
	pk_question(&p, "example.com", DNS_TYPE_A);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_DROP);
	/* A bare header with QDCOUNT 0 is a FORMERR, not a drop. */
	pk_hdr(&p, 7, 0, 0, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	assert_int_equal(q.id, 7);
	assert_false(q.have_question);
}

static void
test_query_qdcount(void **state)
{
	struct pk p;
	struct dns_query q;

	(void)state;
	pk_hdr(&p, 2, 0, 2, 0, 0, 0);
	pk_question(&p, "a.example", DNS_TYPE_A);
	pk_question(&p, "b.example", DNS_TYPE_A);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	assert_false(q.have_question);
	/* QDCOUNT 1 but the question is missing. */
	pk_hdr(&p, 3, 0, 1, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	/* Name complete, qtype/qclass cut short. */
	pk_hdr(&p, 3, 0, 1, 0, 0, 0);
	pk_name(&p, "example.com");
	pk_u16(&p, 1);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	/* Trailing garbage after the sections. */
	pk_hdr(&p, 3, 0, 1, 0, 0, 0);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_u8(&p, 0x55);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	assert_true(q.have_question); /* echoable in the FORMERR */
}

static void
test_query_notimp(void **state)
{
	struct pk p;
	struct dns_query q;

	(void)state;
	pk_hdr(&p, 9, 4u << 11, 1, 0, 0, 0); /* NOTIFY */
	pk_question(&p, "example.com", DNS_TYPE_SOA);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_NOTIMP);
	assert_int_equal(q.opcode, 4);
	assert_true(q.have_question);
	pk_hdr(&p, 9, 5u << 11, 0, 0, 0, 0); /* UPDATE without zone */
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_NOTIMP);
	assert_false(q.have_question);
}

static void
test_name_compression_loops(void **state)
{
	struct pk p;
	struct dns_query q;
	size_t off;
	struct dns_name n;

	(void)state;
	/* Question name is a pointer to itself. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_u16(&p, 0xc00c);
	pk_u16(&p, 1);
	pk_u16(&p, 1);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	/* Pointer into the header. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_u16(&p, 0xc002);
	pk_u16(&p, 1);
	pk_u16(&p, 1);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	/* Forward pointer: question points at a name after it. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_name_ptr(&p, "www", 22);
	pk_u16(&p, 1);
	pk_u16(&p, 1);
	pk_name(&p, "example");
	assert_int_equal(p.b[22], 7);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	off = 12;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), -1);
	/* The same name pointing backwards decodes. */
	pk_hdr(&p, 1, 0, 0, 0, 0, 0);
	pk_name(&p, "example");
	pk_name_ptr(&p, "www", 12);
	off = 21;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), 0);
	assert_int_equal(n.len, 13);
	/* A pointer into the middle of its own labels (a loop that the
	 * chase limit alone would only stop after 64 rounds). */
	pk_hdr(&p, 1, 0, 0, 0, 0, 0);
	pk_name_ptr(&p, "a", 12);
	off = 12;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), -1);

	/* Answer owner pointing at itself, and two names pointing at each
	 * other (A -> B -> A). */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 1, 0, 0);
	pk_question(&p, "example.com", DNS_TYPE_A);
	size_t self = p.n;
	pk_u16(&p, (uint16_t)(0xc000u | self));
	size_t at = pk_rr_fixed(&p, DNS_TYPE_A, 60);
	pk_u32(&p, 0xcb007101);
	pk_rdlen_end(&p, at);
	assert_false(parses(p.b, p.n));

	pk_hdr(&p, 1, 0, 0, 0, 0, 0);
	size_t a0 = p.n;
	pk_name_ptr(&p, "a", (uint16_t)(a0 + 4)); /* 12: 1 'a' ptr->16 */
	pk_name_ptr(&p, "b", (uint16_t)a0); /* 16: 1 'b' ptr->12 */
	off = a0 + 4;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), -1);
	off = a0;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), -1);

	/* A chain of DNS_PTR_CHASE_MAX + 1 backward pointers. */
	/* The first pointer targets the root at 12, each later one the
	 * pointer before it. */
	pk_hdr(&p, 1, 0, 0, 0, 0, 0);
	pk_u8(&p, 0);
	for (int i = 0; i <= DNS_PTR_CHASE_MAX; i++) {
		uint16_t tgt = (uint16_t)(i == 0 ? 12 : p.n - 2);
		pk_u16(&p, (uint16_t)(0xc000u | tgt));
	}
	off = p.n - 2;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), -1);
	off = 12 + 1 + 2 * (DNS_PTR_CHASE_MAX - 1);
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), 0);
	assert_int_equal(n.len, 1);

	/* A legal backward pointer with labels before it. */
	pk_hdr(&p, 1, 0, 0, 0, 0, 0);
	pk_name(&p, "example.com");
	size_t at2 = p.n;
	pk_name_ptr(&p, "WWW", 12);
	off = at2;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), 0);
	assert_int_equal(off, at2 + 6);
	char pres[DNS_NAME_PRES_MAX];
	pres_of(&n, 0, pres);
	assert_string_equal(pres, "WWW.example.com");
}

static void
test_name_bounds(void **state)
{
	struct pk p;
	struct dns_query q;
	char l63[64], l64[65], l61[62], l62[63];
	char name[300];

	(void)state;
	memset(l63, 'a', 63);
	l63[63] = '\0';
	memset(l64, 'b', 64);
	l64[64] = '\0';
	memset(l61, 'c', 61);
	l61[61] = '\0';
	memset(l62, 'd', 62);
	l62[62] = '\0';

	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_question(&p, l63, DNS_TYPE_A);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_OK);
	/* pk_name would write 64 as a length byte 0x40: extended label. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_question(&p, l64, DNS_TYPE_A);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);

	/* 3 x 63 + 61: 4*1 + 250 + root = 255 bytes, the maximum. */
	snprintf(name, sizeof(name), "%s.%s.%s.%s", l63, l63, l63, l61);
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_question(&p, name, DNS_TYPE_A);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_OK);
	assert_int_equal(q.question.name.len, 255);
	/* One byte more: 256. */
	snprintf(name, sizeof(name), "%s.%s.%s.%s", l63, l63, l63, l62);
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_question(&p, name, DNS_TYPE_A);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	/* 256 reached through a compression pointer. */
	pk_hdr(&p, 1, 0, 0, 0, 0, 0);
	snprintf(name, sizeof(name), "%s.%s.%s", l63, l63, l63);
	pk_name(&p, name); /* 193 bytes at 12 */
	size_t at = p.n;
	pk_name_ptr(&p, l62, 12);
	struct dns_name n;
	size_t off = at;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), -1);
	pk_hdr(&p, 1, 0, 0, 0, 0, 0);
	pk_name(&p, name);
	at = p.n;
	pk_name_ptr(&p, l61, 12);
	off = at;
	assert_int_equal(dns_name_decode(p.b, p.n, &off, &n), 0);
	assert_int_equal(n.len, 255);

	/* 0x80 label type is reserved. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_u8(&p, 0x81);
	pk_u8(&p, 'x');
	pk_u8(&p, 0);
	pk_u16(&p, 1);
	pk_u16(&p, 1);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
}

static void
test_query_edns(void **state)
{
	struct pk p;
	struct dns_query q;

	(void)state;
	pk_hdr(&p, 1, 0, 1, 0, 0, 1);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_opt(&p, 4096, 0, 0, DNS_EDNS_FLAG_DO);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_OK);
	assert_true(q.edns.present);
	assert_int_equal(q.edns.udp_size, 4096);
	assert_int_equal(q.edns.flags, DNS_EDNS_FLAG_DO);
	assert_int_equal(dns_query_udp_limit(&q), DNS_EDNS_UDP_SIZE);

	pk_hdr(&p, 1, 0, 1, 0, 0, 1);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_opt(&p, 100, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_OK);
	assert_int_equal(dns_query_udp_limit(&q), DNS_EDNS_UDP_MIN);

	pk_hdr(&p, 1, 0, 1, 0, 0, 1);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_opt(&p, 1200, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_OK);
	assert_int_equal(dns_query_udp_limit(&q), 1200);

	/* Version 1: BADVERS. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 1);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_opt(&p, 1232, 0, 1, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_BADVERS);
	assert_true(q.have_question);
	assert_int_equal(q.edns.version, 1);

	/* Two OPT records. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 2);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_opt(&p, 1232, 0, 0, 0);
	pk_opt(&p, 1232, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);

	/* OPT with a non-root owner. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 1);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_u16(&p, 0xc00c);
	pk_u16(&p, 41);
	pk_u16(&p, 1232);
	pk_u32(&p, 0);
	pk_u16(&p, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);

	/* OPT with a cookie option, and one with a truncated option. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 1);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_u8(&p, 0);
	pk_u16(&p, 41);
	pk_u16(&p, 1232);
	pk_u32(&p, 0);
	pk_u16(&p, 12);
	pk_u16(&p, 10); /* COOKIE */
	pk_u16(&p, 8);
	pk_bytes(&p, "12345678", 8);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_OK);
	pk_set_u16(&p, p.n - 10, 9); /* option claims 9 bytes, 8 present */
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);

	/* OPT in the answer section. */
	pk_hdr(&p, 1, 0, 1, 1, 0, 0);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_opt(&p, 1232, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
}

/* ---- responses ---- */

static void
query_of(struct dns_query *q, const char *name, uint16_t type, bool edns,
    uint16_t eflags)
{
	struct pk p;

	pk_hdr(&p, 0x1234, DNS_FLAG_RD | DNS_FLAG_CD, 1, 0, 0, edns ? 1 : 0);
	pk_question(&p, name, type);
	if (edns)
		pk_opt(&p, 4096, 0, 0, eflags);
	assert_int_equal(dns_query_parse(p.b, p.n, q), DNS_QUERY_OK);
}

static void
test_build_errors(void **state)
{
	struct dns_query q;
	uint8_t out[DNS_MSG_MAX];
	size_t n;
	struct dns_msg *m;
	struct err e;
	static const unsigned rcodes[] = {DNS_RCODE_FORMERR, DNS_RCODE_SERVFAIL,
	    DNS_RCODE_NOTIMP, DNS_RCODE_REFUSED};

	(void)state;
	query_of(&q, "MiXeD.Example.ORG", DNS_TYPE_A, false, 0);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(dns_build_error(&q, rcodes[i], NULL, out,
		                     sizeof(out), &n, &e),
		    0);
		m = parse_ok(out, n);
		assert_int_equal(m->id, 0x1234);
		assert_true(m->flags & DNS_FLAG_QR);
		assert_true(m->flags & DNS_FLAG_RD);
		assert_true(m->flags & DNS_FLAG_CD);
		assert_int_equal(m->rcode, rcodes[i]);
		assert_true(m->have_question);
		assert_memory_equal(m->question.name.wire, q.question.name.wire,
		    q.question.name.len);
		assert_int_equal(m->nrr, 0);
		assert_false(m->edns.present);
		dns_msg_free(m);
	}
	/* Too small a buffer. */
	assert_int_equal(
	    dns_build_error(&q, DNS_RCODE_SERVFAIL, NULL, out, 20, &n, &e), -1);

	/* FORMERR without a question, e.g. QDCOUNT 2. */
	struct pk p;
	pk_hdr(&p, 77, 0, 2, 0, 0, 0);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_FORMERR);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_FORMERR, NULL, out,
	                     sizeof(out), &n, &e),
	    0);
	assert_int_equal(n, DNS_HEADER_LEN);
	m = parse_ok(out, n);
	assert_int_equal(m->id, 77);
	assert_false(m->have_question);
	assert_int_equal(m->rcode, DNS_RCODE_FORMERR);
	dns_msg_free(m);

	/* BADVERS carries its upper bits in an OPT record. */
	pk_hdr(&p, 5, 0, 1, 0, 0, 1);
	pk_question(&p, "example.com", DNS_TYPE_A);
	pk_opt(&p, 1232, 0, 2, DNS_EDNS_FLAG_DO);
	assert_int_equal(dns_query_parse(p.b, p.n, &q), DNS_QUERY_BADVERS);
	assert_int_equal(dns_build_error(&q, DNS_RCODE_BADVERS, NULL, out,
	                     sizeof(out), &n, &e),
	    0);
	m = parse_ok(out, n);
	assert_int_equal(m->rcode, DNS_RCODE_BADVERS);
	assert_int_equal(m->flags & 0xf, 0);
	assert_true(m->edns.present);
	assert_int_equal(m->edns.version, 0);
	assert_int_equal(m->edns.udp_size, DNS_EDNS_UDP_SIZE);
	assert_int_equal(m->edns.flags, DNS_EDNS_FLAG_DO);
	dns_msg_free(m);

	/* TC answer: question and OPT only. */
	query_of(&q, "big.example", DNS_TYPE_TXT, true, 0);
	assert_int_equal(dns_build_truncated(&q, out, sizeof(out), &n, &e), 0);
	m = parse_ok(out, n);
	assert_true(m->flags & DNS_FLAG_TC);
	assert_true(m->edns.present);
	assert_int_equal(m->nrr, 0);
	dns_msg_free(m);
}

static void
test_build_nxdomain_soa(void **state)
{
	struct dns_query q;
	uint8_t out[DNS_MSG_MAX];
	size_t n;
	struct dns_msg *m;
	struct err e;
	struct dns_name owner, mname, rname;
	char pres[DNS_NAME_PRES_MAX];

	(void)state;
	query_of(
	    &q, "Exfil.DATA.Evil.Example", DNS_TYPE_A, true, DNS_EDNS_FLAG_DO);
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_NXDOMAIN, 30, NULL,
	                     out, sizeof(out), &n, &e),
	    0);
	m = parse_ok(out, n);
	assert_int_equal(m->rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(m->count[DNS_SEC_ANSWER], 0);
	assert_int_equal(m->count[DNS_SEC_AUTHORITY], 1);
	assert_true(m->edns.present);
	assert_int_equal(m->edns.flags, DNS_EDNS_FLAG_DO);
	assert_int_equal(m->rr[0].type, DNS_TYPE_SOA);
	assert_int_equal(m->rr[0].ttl, 30);
	dns_msg_rr_owner(m, 0, &owner);
	/* The owner is the qname exactly as the client spelled it. */
	assert_int_equal(owner.len, q.question.name.len);
	assert_memory_equal(owner.wire, q.question.name.wire, owner.len);
	const uint8_t *rd = dns_msg_rr_rdata(m, 0);
	size_t off;
	/* The arena rdata holds uncompressed names: decode them after a
	 * fake header. */
	uint8_t buf[600];
	memset(buf, 0, DNS_HEADER_LEN);
	memcpy(buf + DNS_HEADER_LEN, rd, m->rr[0].rdlen);
	off = DNS_HEADER_LEN;
	assert_int_equal(
	    dns_name_decode(buf, DNS_HEADER_LEN + m->rr[0].rdlen, &off, &mname),
	    0);
	assert_int_equal(
	    dns_name_decode(buf, DNS_HEADER_LEN + m->rr[0].rdlen, &off, &rname),
	    0);
	pres_of(&mname, 0, pres);
	assert_string_equal(pres, DNS_SOA_MNAME);
	pres_of(&rname, 0, pres);
	assert_string_equal(pres, DNS_SOA_RNAME);
	assert_int_equal(DNS_HEADER_LEN + m->rr[0].rdlen - off, 20);
	/* MINIMUM is the negative TTL. */
	assert_memory_equal(buf + off + 16, "\0\0\0\x1e", 4);
	bool have;
	uint32_t ttl;
	assert_int_equal(dns_wire_min_ttl(out, n, &have, &ttl), 0);
	assert_true(have);
	assert_int_equal(ttl, 30);
	assert_true(dns_msg_min_ttl(m, &ttl));
	assert_int_equal(ttl, 30);
	dns_msg_free(m);

	/* NODATA and a client without EDNS. */
	query_of(&q, "example.com", DNS_TYPE_MX, false, 0);
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_NOERROR, 7, NULL, out,
	                     sizeof(out), &n, &e),
	    0);
	m = parse_ok(out, n);
	assert_int_equal(m->rcode, DNS_RCODE_NOERROR);
	assert_false(m->edns.present);
	assert_int_equal(m->count[DNS_SEC_AUTHORITY], 1);
	dns_msg_free(m);
	assert_int_equal(dns_build_negative(&q, DNS_RCODE_SERVFAIL, 7, NULL,
	                     out, sizeof(out), &n, &e),
	    -1);
}

static void
test_build_localhost(void **state)
{
	struct dns_query q;
	uint8_t out[DNS_MSG_MAX];
	size_t n;
	struct dns_msg *m;
	struct err e;

	(void)state;
	query_of(&q, "LocalHost", DNS_TYPE_A, false, 0);
	assert_int_equal(
	    dns_build_localhost(&q, 5, out, sizeof(out), &n, &e), 0);
	m = parse_ok(out, n);
	assert_int_equal(m->count[DNS_SEC_ANSWER], 1);
	assert_int_equal(m->rr[0].type, DNS_TYPE_A);
	assert_memory_equal(dns_msg_rr_rdata(m, 0), "\x7f\0\0\x01", 4);
	assert_memory_equal(m->question.name.wire, "\011LocalHost", 10);
	dns_msg_free(m);

	query_of(&q, "app.localhost", DNS_TYPE_AAAA, true, 0);
	assert_int_equal(
	    dns_build_localhost(&q, 5, out, sizeof(out), &n, &e), 0);
	m = parse_ok(out, n);
	assert_int_equal(m->rr[0].type, DNS_TYPE_AAAA);
	assert_memory_equal(
	    dns_msg_rr_rdata(m, 0), "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
	assert_true(m->edns.present);
	dns_msg_free(m);

	query_of(&q, "localhost", DNS_TYPE_ANY, false, 0);
	assert_int_equal(
	    dns_build_localhost(&q, 5, out, sizeof(out), &n, &e), 0);
	m = parse_ok(out, n);
	assert_int_equal(m->count[DNS_SEC_ANSWER], 2);
	dns_msg_free(m);

	query_of(&q, "localhost", DNS_TYPE_MX, false, 0);
	assert_int_equal(
	    dns_build_localhost(&q, 5, out, sizeof(out), &n, &e), 0);
	m = parse_ok(out, n);
	assert_int_equal(m->count[DNS_SEC_ANSWER], 0);
	assert_int_equal(m->count[DNS_SEC_AUTHORITY], 1);
	dns_msg_free(m);

	query_of(&q, "localhost.example", DNS_TYPE_A, false, 0);
	assert_int_equal(
	    dns_build_localhost(&q, 5, out, sizeof(out), &n, &e), -1);
	query_of(&q, "notlocalhost", DNS_TYPE_A, false, 0);
	assert_false(dns_name_is_localhost(&q.question.name));

	/* A PTR answer built from a reverse name. */
	struct dns_local_rr rr;
	uint8_t a4[4] = {127, 0, 0, 1};
	struct dns_name rev, tgt;
	dns_ptr_name_make(4, a4, &rev);
	char pres[DNS_NAME_PRES_MAX];
	pres_of(&rev, 0, pres);
	assert_string_equal(pres, "1.0.0.127.in-addr.arpa");
	assert_int_equal(rev.len, 24);
	assert_int_equal(rev.labels, 6);
	query_of(&q, pres, DNS_TYPE_PTR, false, 0);
	assert_int_equal(dns_name_from_pres("egressd.local.", &tgt, &e), 0);
	memset(&rr, 0, sizeof(rr));
	rr.type = DNS_TYPE_PTR;
	rr.ttl = 5;
	memcpy(rr.rdata, tgt.wire, tgt.len);
	rr.rdlen = tgt.len;
	assert_int_equal(
	    dns_build_answer(&q, &rr, 1, out, sizeof(out), &n, &e), 0);
	m = parse_ok(out, n);
	assert_int_equal(m->rr[0].type, DNS_TYPE_PTR);
	assert_memory_equal(dns_msg_rr_rdata(m, 0), tgt.wire, tgt.len);
	dns_msg_free(m);
}

static void
test_ptr_names(void **state)
{
	struct dns_name n;
	struct err e;
	int fam;
	uint8_t a[16];
	char pres[DNS_NAME_PRES_MAX];
	uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0xab};

	(void)state;
	assert_int_equal(
	    dns_name_from_pres("4.3.2.1.IN-ADDR.ARPA.", &n, &e), 0);
	assert_true(dns_ptr_name_parse(&n, &fam, a));
	assert_int_equal(fam, 4);
	assert_memory_equal(a, "\x01\x02\x03\x04", 4);
	assert_int_equal(
	    dns_name_from_pres("255.0.10.192.in-addr.arpa", &n, &e), 0);
	assert_true(dns_ptr_name_parse(&n, &fam, a));
	assert_memory_equal(a, "\xc0\x0a\x00\xff", 4);
	static const char *bad[] = {"01.0.0.127.in-addr.arpa",
	    "256.0.0.127.in-addr.arpa", "0.0.127.in-addr.arpa",
	    "x.0.0.127.in-addr.arpa", "1.0.0.127.in-addr.arpa.example",
	    "1.0.0.0.0.0.ip6.arpa", "1.2.3.4.in-addr"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(dns_name_from_pres(bad[i], &n, &e), 0);
		assert_false(dns_ptr_name_parse(&n, &fam, a));
	}
	dns_ptr_name_make(6, v6, &n);
	pres_of(&n, 0, pres);
	assert_string_equal(pres,
	    "b.a.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0."
	    "0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa");
	assert_int_equal(n.len, 2 * 32 + 4 + 5 + 1);
	assert_int_equal(n.labels, 34);
	assert_true(dns_ptr_name_parse(&n, &fam, a));
	assert_int_equal(fam, 6);
	assert_memory_equal(a, v6, 16);
	/* Uppercase nibbles are accepted too. */
	pres[0] = 'B';
	assert_int_equal(dns_name_from_pres(pres, &n, &e), 0);
	assert_true(dns_ptr_name_parse(&n, &fam, a));
	assert_memory_equal(a, v6, 16);
}

static void
test_pres_escaping(void **state)
{
	struct dns_name n, n2;
	struct err e;
	char pres[DNS_NAME_PRES_MAX];
	static const uint8_t wire[] = "\003a.b\002\\x\003*\x00z\003_Ab";

	(void)state;
	/* Wire labels containing '.', '\', '*' and NUL. */
	memcpy(n.wire, wire, sizeof(wire));
	n.len = sizeof(wire);
	n.labels = 4;
	pres_of(&n, 0, pres);
	assert_string_equal(pres, "a\\046b.\\092x.\\042\\000z._Ab");
	pres_of(&n, DNS_PRES_LOWER, pres);
	assert_string_equal(pres, "a\\046b.\\092x.\\042\\000z._ab");
	/* Round trip through the parser. */
	assert_int_equal(dns_name_from_pres(pres, &n2, &e), 0);
	assert_int_equal(n2.len, n.len);
	assert_int_equal(n2.labels, 4);
	assert_memory_equal(n2.wire, "\003a.b\002\\x\003*\x00z\003_ab", n.len);
	/* The root. */
	assert_int_equal(dns_name_from_pres(".", &n2, &e), 0);
	assert_int_equal(n2.len, 1);
	pres_of(&n2, 0, pres);
	assert_string_equal(pres, "");
	/* \X escapes; trailing dot. */
	assert_int_equal(dns_name_from_pres("a\\.b.c.", &n2, &e), 0);
	assert_int_equal(n2.len, 7);
	assert_memory_equal(n2.wire, "\003a.b\001c", 7);
	/* Errors. */
	char l64[80];
	memset(l64, 'q', 64);
	l64[64] = '\0';
	assert_int_equal(dns_name_from_pres(l64, &n2, &e), -1);
	assert_int_equal(dns_name_from_pres("a..b", &n2, &e), -1);
	assert_int_equal(dns_name_from_pres(".a", &n2, &e), -1);
	assert_int_equal(dns_name_from_pres("a\\25", &n2, &e), -1);
	assert_int_equal(dns_name_from_pres("a\\256", &n2, &e), -1);
	assert_int_equal(dns_name_from_pres("a\\", &n2, &e), -1);
	char big[400];
	size_t o = 0;
	for (int i = 0; i < 128; i++) {
		big[o++] = 'x';
		big[o++] = '.';
	}
	big[o] = '\0';
	assert_int_equal(dns_name_from_pres(big, &n2, &e), -1); /* 257 */
	big[o - 4] = '\0'; /* 126 labels: 253 bytes */
	assert_int_equal(dns_name_from_pres(big, &n2, &e), 0);
	assert_int_equal(n2.len, 253);
	/* Presentation buffer too small. */
	assert_int_equal(dns_name_to_pres(&n, 0, pres, 5), -1);
	/* Equality and subdomains ignore case. */
	struct dns_name a, b;
	assert_int_equal(dns_name_from_pres("WWW.Example.COM", &a, &e), 0);
	assert_int_equal(dns_name_from_pres("example.com", &b, &e), 0);
	assert_true(dns_name_is_subdomain(&a, &b));
	assert_false(dns_name_is_subdomain(&b, &a));
	assert_false(dns_name_equal(&a, &b));
	assert_int_equal(dns_name_from_pres("www.example.com", &b, &e), 0);
	assert_true(dns_name_equal(&a, &b));
	assert_int_equal(dns_name_from_pres("ample.com", &b, &e), 0);
	assert_false(dns_name_is_subdomain(&a, &b));
}

/* dns_name_equal against the byte rule (equal after ASCII lower-casing)
 * for every byte pair at every place of a name of two 8-byte words and a
 * tail (the length byte included), the other bytes equal or of the other
 * case: the word-at-a-time compare and its tail both. */
static void
test_name_equal_fold(void **state)
{
	static const uint8_t fill[2] = {'x', 'X'};
	struct dns_name a, b;
	bool want;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.wire[0] = 19;
	memset(a.wire + 1, 'x', 19);
	a.len = 21;
	a.labels = 1;
	for (size_t f = 0; f < 2; f++)
		for (size_t pos = 0; pos < 20; pos++)
			for (int c1 = 0; c1 < 256; c1++)
				for (int c2 = 0; c2 < 256; c2++) {
					b = a;
					memset(b.wire + 1, fill[f], 19);
					a.wire[pos] = (uint8_t)c1;
					b.wire[pos] = (uint8_t)c2;
					want = (c1 >= 'A' && c1 <= 'Z' ? c1 + 32
					                               : c1) ==
					    (c2 >= 'A' && c2 <= 'Z' ? c2 + 32
					                            : c2);
					if (dns_name_equal(&a, &b) != want)
						fail_msg(
						    "pos %zu fill %c: %d vs %d",
						    pos, fill[f], c1, c2);
					a.wire[pos] = pos == 0 ? 19 : 'x';
				}
}

/* dns_name_to_pres of every byte, both flags: letters, digits, '-' and
 * '_' as themselves (letters lowered with DNS_PRES_LOWER), the rest as
 * \DDD. */
static void
test_name_pres_bytes(void **state)
{
	struct dns_name n;
	char got[16], want[16];

	(void)state;
	memset(&n, 0, sizeof(n));
	n.wire[0] = 2;
	n.wire[1] = 'a';
	n.len = 4;
	n.labels = 1;
	for (unsigned low = 0; low < 2; low++)
		for (int c = 0; c < 256; c++) {
			bool plain = (c >= 'a' && c <= 'z') ||
			    (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			    c == '-' || c == '_';
			int w = low && c >= 'A' && c <= 'Z' ? c + 32 : c;

			n.wire[2] = (uint8_t)c;
			if (plain)
				snprintf(want, sizeof(want), "a%c", w);
			else
				snprintf(want, sizeof(want), "a\\%03d", c);
			assert_int_equal(
			    dns_name_to_pres(
			        &n, low ? DNS_PRES_LOWER : 0, got, sizeof(got)),
			    (int)strlen(want));
			assert_string_equal(got, want);
		}
}

/* ---- classification ---- */

static bool
v4i(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	uint8_t x[4] = {a, b, c, d};
	return dns_addr_is_internal(4, x);
}

static bool
v6i(const char *hex)
{
	uint8_t x[16];
	for (int i = 0; i < 16; i++) {
		unsigned v;
		assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
		x[i] = (uint8_t)v;
	}
	return dns_addr_is_internal(6, x);
}

static void
test_addr_internal_v4(void **state)
{
	(void)state;
	assert_true(v4i(0, 0, 0, 0));
	assert_true(v4i(0, 1, 2, 3));
	assert_true(v4i(10, 0, 0, 1));
	assert_true(v4i(10, 255, 255, 255));
	assert_true(v4i(100, 64, 0, 1));
	assert_true(v4i(100, 127, 255, 255));
	assert_false(v4i(100, 128, 0, 0));
	assert_false(v4i(100, 63, 255, 255));
	assert_true(v4i(100, 100, 100, 200));
	assert_true(v4i(127, 0, 0, 1));
	assert_true(v4i(127, 255, 0, 9));
	assert_true(v4i(169, 254, 169, 254));
	assert_true(v4i(172, 16, 0, 1));
	assert_true(v4i(172, 31, 255, 255));
	assert_false(v4i(172, 32, 0, 0));
	assert_false(v4i(172, 15, 255, 255));
	assert_true(v4i(192, 168, 1, 1));
	assert_true(v4i(192, 0, 0, 170));
	assert_true(v4i(198, 18, 0, 1));
	assert_true(v4i(198, 19, 255, 255));
	assert_false(v4i(198, 20, 0, 0));
	assert_false(v4i(198, 17, 255, 255));
	assert_true(v4i(224, 0, 0, 251));
	assert_true(v4i(239, 255, 255, 250));
	assert_true(v4i(240, 0, 0, 1));
	assert_true(v4i(255, 255, 255, 255));
	assert_true(v4i(168, 63, 129, 16));
	assert_false(v4i(168, 63, 129, 17));
	/* Documentation ranges are the test bed's internet: NOT internal. */
	assert_false(v4i(192, 0, 2, 1));
	assert_false(v4i(198, 51, 100, 7));
	assert_false(v4i(203, 0, 113, 9));
	assert_false(v4i(8, 8, 8, 8));
	assert_false(v4i(1, 1, 1, 1));
	assert_false(v4i(223, 255, 255, 255));
	assert_false(v4i(192, 169, 0, 1));
	/* AF_INET is accepted as well; unknown families fail closed. */
	uint8_t x[16] = {8, 8, 8, 8};
	assert_false(dns_addr_is_internal(AF_INET, x));
	assert_true(dns_addr_is_internal(99, x));
}

static void
test_addr_internal_v6(void **state)
{
	(void)state;
	assert_true(v6i("00000000000000000000000000000000"));
	assert_true(v6i("00000000000000000000000000000001"));
	assert_true(v6i("fe800000000000000000000000000001"));
	assert_true(v6i("febf0000000000000000000000000001"));
	assert_true(v6i("fec00000000000000000000000000001"));
	assert_true(v6i("fc000000000000000000000000000001"));
	assert_true(v6i("fd000ec2000000000000000000000254"));
	assert_true(v6i("ff020000000000000000000000000001"));
	assert_false(v6i("fb000000000000000000000000000001"));
	/* Documentation and global unicast are not internal. */
	assert_false(v6i("20010db8000000000000000000000001"));
	assert_false(v6i("2606470000000000000000000000abcd"));
	/* IPv4-mapped. */
	assert_true(v6i("00000000000000000000ffff0a000001"));
	assert_true(v6i("00000000000000000000ffffa9fea9fe"));
	assert_true(v6i("00000000000000000000ffff7f000001"));
	assert_false(v6i("00000000000000000000ffffcb007101"));
	/* IPv4-compatible (deprecated). */
	assert_true(v6i("000000000000000000000000c0a80001"));
	assert_false(v6i("000000000000000000000000c6336407"));
	/* SIIT ::ffff:0:a.b.c.d. */
	assert_true(v6i("0000000000000000ffff00000a000001"));
	/* NAT64 well-known prefix. */
	assert_true(v6i("0064ff9b0000000000000000a9fea9fe"));
	assert_true(v6i("0064ff9b0000000000000000647f0001"));
	assert_false(v6i("0064ff9b000000000000000008080808"));
	/* Local-use NAT64 64:ff9b:1::/48: the /96 form is classified by its
	 * IPv4, any other (unknown prefix length) is internal. */
	assert_true(v6i("0064ff9b0001000000000000a9fea9fe"));
	assert_false(v6i("0064ff9b000100000000000008080808"));
	assert_true(v6i("0064ff9b00010a000000010000000000"));
	assert_true(v6i("0064ff9b00010808000808000000000"
	                "0"));
	/* 6to4: 2002:WWXX:YYZZ::. */
	assert_true(v6i("20020a00000100000000000000000001"));
	assert_true(v6i("2002a9fea9fe00000000000000000001"));
	assert_false(v6i("2002cb00710100000000000000000001"));
	/* Teredo: server 4-7, client ~12-15. */
	uint8_t t[16] = {0x20, 0x01, 0, 0, 203, 0, 113, 1, 0, 0, 0xff, 0xff,
	    (uint8_t)~203, (uint8_t)~0, (uint8_t)~113, (uint8_t)~2};
	assert_false(dns_addr_is_internal(6, t));
	t[12] = (uint8_t)~10; /* client 10.0.113.2 */
	assert_true(dns_addr_is_internal(6, t));
	t[12] = (uint8_t)~203;
	t[4] = 169; /* server 169.0.113.1: public */
	assert_false(dns_addr_is_internal(6, t));
	t[5] = 254; /* server 169.254.113.1: link-local */
	assert_true(dns_addr_is_internal(6, t));
	uint8_t v4[DNS_EMBEDDED_V4_MAX][4];
	assert_int_equal(dns_addr_embedded_v4(t, v4), 2);
	assert_memory_equal(v4[1], "\xcb\x00\x71\x02", 4);
}

/* ---- answers ---- */

/* www.example.com A: CNAME a.cdn.example.net, CNAME b.cdn.example.net,
 * A 203.0.113.5 (ttl 60) and an unrelated A. */
static void
build_cname_answer(struct pk *p)
{
	size_t at;

	pk_hdr(p, 0x4242, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA, 1, 5, 0, 0);
	pk_question(p, "www.example.com", DNS_TYPE_A);
	pk_u16(p, 0xc00c);
	at = pk_rr_fixed(p, DNS_TYPE_CNAME, 300);
	size_t t1 = p->n;
	pk_name(p, "a.cdn.example.net");
	pk_rdlen_end(p, at);
	pk_u16(p, (uint16_t)(0xc000u | t1));
	at = pk_rr_fixed(p, DNS_TYPE_CNAME, 120);
	size_t t2 = p->n;
	pk_name_ptr(p, "b", (uint16_t)(t1 + 2)); /* b.cdn.example.net */
	pk_rdlen_end(p, at);
	pk_a(p, (uint16_t)t2, 60, 203, 0, 113, 5);
	pk_a(p, (uint16_t)t2, 90, 203, 0, 113, 6);
	/* Unrelated owner. */
	pk_name(p, "other.example");
	at = pk_rr_fixed(p, DNS_TYPE_A, 10);
	pk_u32(p, 0xc6336401);
	pk_rdlen_end(p, at);
}

static void
test_answer_chain(void **state)
{
	struct pk p;
	struct dns_msg *m;
	struct dns_answer_info *ai = malloc(sizeof(*ai));
	struct err e;
	char pres[DNS_NAME_PRES_MAX];

	(void)state;
	assert_non_null(ai);
	build_cname_answer(&p);
	m = parse_ok(p.b, p.n);
	assert_int_equal(m->count[DNS_SEC_ANSWER], 5);
	assert_int_equal(dns_answer_info(m, ai, &e), 0);
	assert_int_equal(ai->rcode, 0);
	assert_false(ai->tc);
	assert_int_equal(ai->chain.n, 2);
	pres_of(&ai->chain.link[0].from, 0, pres);
	assert_string_equal(pres, "www.example.com");
	pres_of(&ai->chain.link[0].to, 0, pres);
	assert_string_equal(pres, "a.cdn.example.net");
	pres_of(&ai->chain.link[1].to, 0, pres);
	assert_string_equal(pres, "b.cdn.example.net");
	assert_int_equal(ai->chain.link[1].type, DNS_TYPE_CNAME);
	assert_int_equal(ai->naddr, 2); /* the unrelated A is not listed */
	assert_int_equal(ai->addr[0].family, 4);
	assert_memory_equal(ai->addr[0].addr, "\xcb\x00\x71\x05", 4);
	assert_int_equal(ai->addr[0].ttl, 60);
	assert_int_equal(ai->addr[0].owner, 2);
	assert_int_equal(
	    dns_chain_index(m, &ai->chain, &ai->chain.link[0].to), 1);
	assert_int_equal(dns_chain_index(m, &ai->chain, &m->question.name), 0);
	assert_true(ai->have_ttl);
	assert_int_equal(ai->ttl, 10);

	/* The question matches ignoring case only. */
	struct dns_question q;
	assert_int_equal(dns_name_from_pres("WWW.EXAMPLE.COM", &q.name, &e), 0);
	q.qtype = DNS_TYPE_A;
	q.qclass = DNS_CLASS_IN;
	assert_true(dns_msg_question_matches(m, &q));
	q.qtype = DNS_TYPE_AAAA;
	assert_false(dns_msg_question_matches(m, &q));
	q.qtype = DNS_TYPE_A;
	assert_int_equal(dns_name_from_pres("www.example.co", &q.name, &e), 0);
	assert_false(dns_msg_question_matches(m, &q));
	dns_msg_free(m);
	free(ai);
}

static void
test_answer_chain_errors(void **state)
{
	struct pk p;
	struct dns_msg *m;
	struct dns_chain c;
	struct err e;
	size_t at;

	(void)state;
	/* Loop: a -> b -> a. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 2, 0, 0);
	pk_question(&p, "a.example", DNS_TYPE_A);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
	size_t b = p.n;
	pk_name(&p, "b.example");
	pk_rdlen_end(&p, at);
	pk_u16(&p, (uint16_t)(0xc000u | b));
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
	pk_u16(&p, 0xc00c);
	pk_rdlen_end(&p, at);
	m = parse_ok(p.b, p.n);
	assert_int_equal(dns_msg_chain(m, &c, &e), -1);
	dns_msg_free(m);

	/* Two different CNAMEs for the qname. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 2, 0, 0);
	pk_question(&p, "a.example", DNS_TYPE_A);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
	pk_name(&p, "allowed.example");
	pk_rdlen_end(&p, at);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
	pk_name(&p, "denied.example");
	pk_rdlen_end(&p, at);
	m = parse_ok(p.b, p.n);
	assert_int_equal(dns_msg_chain(m, &c, &e), -1);
	dns_msg_free(m);

	/* DNS_CHAIN_MAX + 1 links: c0 -> c1 -> ... */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, DNS_CHAIN_MAX + 1, 0, 0);
	pk_question(&p, "c0.example", DNS_TYPE_A);
	for (int i = 0; i <= DNS_CHAIN_MAX; i++) {
		char o[32], t[32];
		snprintf(o, sizeof(o), "c%d.example", i);
		snprintf(t, sizeof(t), "c%d.example", i + 1);
		pk_name(&p, o);
		at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
		pk_name(&p, t);
		pk_rdlen_end(&p, at);
	}
	m = parse_ok(p.b, p.n);
	assert_int_equal(dns_msg_chain(m, &c, &e), -1);
	/* Exactly DNS_CHAIN_MAX links is fine. */
	dns_msg_free(m);
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, DNS_CHAIN_MAX, 0, 0);
	pk_question(&p, "c0.example", DNS_TYPE_A);
	for (int i = 0; i < DNS_CHAIN_MAX; i++) {
		char o[32], t[32];
		snprintf(o, sizeof(o), "c%d.example", i);
		snprintf(t, sizeof(t), "c%d.example", i + 1);
		pk_name(&p, o);
		at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
		pk_name(&p, t);
		pk_rdlen_end(&p, at);
	}
	m = parse_ok(p.b, p.n);
	assert_int_equal(dns_msg_chain(m, &c, &e), 0);
	assert_int_equal(c.n, DNS_CHAIN_MAX);
	dns_msg_free(m);
}

static void
test_answer_dname(void **state)
{
	struct pk p;
	struct dns_msg *m;
	struct dns_chain c;
	struct err e;
	char pres[DNS_NAME_PRES_MAX];
	size_t at;

	(void)state;
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 2, 0, 0);
	pk_question(&p, "x.y.example.com", DNS_TYPE_A);
	pk_u16(&p, 0xc000u | 16); /* example.com */
	at = pk_rr_fixed(&p, DNS_TYPE_DNAME, 60);
	pk_name(&p, "example.net");
	pk_rdlen_end(&p, at);
	pk_name(&p, "x.y.example.net");
	at = pk_rr_fixed(&p, DNS_TYPE_A, 60);
	pk_u32(&p, 0xcb007109);
	pk_rdlen_end(&p, at);
	m = parse_ok(p.b, p.n);
	assert_int_equal(dns_msg_chain(m, &c, &e), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.link[0].type, DNS_TYPE_DNAME);
	pres_of(&c.link[0].to, 0, pres);
	assert_string_equal(pres, "x.y.example.net");
	dns_msg_free(m);
}

static void
test_answer_malformed(void **state)
{
	struct pk p;
	size_t at;

	(void)state;
	/* RR cut short in its fixed part and in its rdata. */
	build_cname_answer(&p);
	assert_true(parses(p.b, p.n));
	for (size_t cut = 12; cut < p.n; cut++)
		assert_false(parses(p.b, cut));
	/* A record with 5 bytes of rdata. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 1, 0, 0);
	pk_question(&p, "a.example", DNS_TYPE_A);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_A, 1);
	pk_u32(&p, 1);
	pk_u8(&p, 1);
	pk_rdlen_end(&p, at);
	assert_false(parses(p.b, p.n));
	/* CNAME rdata longer than its name. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 1, 0, 0);
	pk_question(&p, "a.example", DNS_TYPE_A);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 1);
	pk_name(&p, "b.example");
	pk_u8(&p, 0);
	pk_rdlen_end(&p, at);
	assert_false(parses(p.b, p.n));
	/* Counts claiming more records than present. */
	build_cname_answer(&p);
	pk_set_u16(&p, 10, 1);
	assert_false(parses(p.b, p.n));
	/* QDCOUNT 2. */
	build_cname_answer(&p);
	pk_set_u16(&p, 4, 2);
	assert_false(parses(p.b, p.n));
}

/*
 * Pointers may only land on labels of names decoded earlier in place, so
 * a name cannot be made of a TTL, the middle of a label or opaque rdata,
 * and ageing TTLs in place cannot change one.
 */
static void
test_pointer_targets(void **state)
{
	struct pk p;
	size_t at, ttl_off, mid_off, txt_off, sig_off;
	bool have;
	uint32_t ttl;
	struct dns_msg *m;

	(void)state;
	/* Into a TTL whose bytes spell "a.": 01 61 00 00. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 2, 0, 0);
	pk_question(&p, "x.example", DNS_TYPE_A);
	pk_u16(&p, 0xc00c);
	pk_u16(&p, DNS_TYPE_A);
	pk_u16(&p, 1);
	ttl_off = p.n;
	pk_u32(&p, 0x01610000);
	pk_u16(&p, 4);
	pk_u32(&p, 0xcb007101);
	pk_u16(&p, (uint16_t)(0xc000u | ttl_off));
	at = pk_rr_fixed(&p, DNS_TYPE_A, 60);
	pk_u32(&p, 0xcb007102);
	pk_rdlen_end(&p, at);
	assert_false(parses(p.b, p.n));
	assert_int_equal(dns_wire_min_ttl(p.b, p.n, &have, &ttl), -1);
	assert_int_equal(dns_wire_age_ttls(p.b, p.n, 1), -1);
	/* The same message pointing at the qname is fine. */
	pk_set_u16(&p, p.n - 16, 0xc00c);
	assert_true(parses(p.b, p.n));

	/* Into the middle of a label: "ab\001cd" has a valid "cd" inside. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 2, 0, 0);
	pk_question(&p, "x.example", DNS_TYPE_TXT);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
	pk_u8(&p, 5);
	pk_bytes(&p, "ab", 2);
	mid_off = p.n;
	pk_bytes(&p, "\001cd", 3);
	pk_u8(&p, 0);
	pk_rdlen_end(&p, at);
	pk_u16(&p, (uint16_t)(0xc000u | mid_off));
	at = pk_rr_fixed(&p, DNS_TYPE_TXT, 60);
	pk_bytes(&p, "\001z", 2);
	pk_rdlen_end(&p, at);
	assert_false(parses(p.b, p.n));
	pk_set_u16(&p, mid_off + 4, (uint16_t)(0xc000u | (mid_off - 3)));
	assert_true(parses(p.b, p.n)); /* the label start itself is fine */

	/* Into opaque TXT rdata that happens to look like a name. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 2, 0, 0);
	pk_question(&p, "x.example", DNS_TYPE_TXT);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_TXT, 60);
	txt_off = p.n;
	pk_name(&p, "evil");
	pk_rdlen_end(&p, at);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
	pk_u16(&p, (uint16_t)(0xc000u | txt_off));
	pk_rdlen_end(&p, at);
	assert_false(parses(p.b, p.n));

	/* RRSIG signer and NSEC next names are uncompressed names inside
	 * opaque rdata; encoders do compress later names against them. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 1, 1, 0);
	pk_question(&p, "x.example", DNS_TYPE_A);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, 46, 60);
	pk_bytes(&p, "\000\001\015\002\000\000\000\074", 8);
	pk_bytes(&p, "\000\000\000\001\000\000\000\002\060\071", 10);
	sig_off = p.n;
	pk_name(&p, "signer.example");
	pk_bytes(&p, "SIGSIGSIG", 9);
	pk_rdlen_end(&p, at);
	pk_u16(&p, (uint16_t)(0xc000u | sig_off));
	at = pk_rr_fixed(&p, DNS_TYPE_NS, 60);
	pk_name_ptr(&p, "ns", (uint16_t)sig_off);
	pk_rdlen_end(&p, at);
	m = parse_ok(p.b, p.n);
	assert_int_equal(m->nrr, 2);
	dns_msg_free(m);
	assert_int_equal(dns_wire_min_ttl(p.b, p.n, &have, &ttl), 0);
}

static void
test_encode_roundtrip(void **state)
{
	struct pk p;
	struct dns_msg *m, *m2;
	uint8_t out[DNS_MSG_MAX];
	size_t n;
	struct err e;
	size_t at;

	(void)state;
	build_cname_answer(&p);
	/* Add authority NS + SOA, an MX in additional, and an OPT. */
	pk_set_u16(&p, 8, 2);
	pk_set_u16(&p, 10, 3);
	pk_u16(&p, 0xc000u | 16); /* example.com */
	at = pk_rr_fixed(&p, DNS_TYPE_NS, 3600);
	pk_name_ptr(&p, "NS1", 16);
	pk_rdlen_end(&p, at);
	pk_u16(&p, 0xc000u | 16);
	at = pk_rr_fixed(&p, DNS_TYPE_SOA, 3600);
	pk_name_ptr(&p, "ns1", 16);
	pk_name_ptr(&p, "hostmaster", 16);
	for (int i = 0; i < 5; i++)
		pk_u32(&p, (uint32_t)(100 + i));
	pk_rdlen_end(&p, at);
	pk_u16(&p, 0xc000u | 16);
	at = pk_rr_fixed(&p, DNS_TYPE_MX, 60);
	pk_u16(&p, 10);
	pk_name_ptr(&p, "mail", 16);
	pk_rdlen_end(&p, at);
	pk_u16(&p, 0xc000u | 16);
	at = pk_rr_fixed(&p, DNS_TYPE_SRV, 60);
	pk_u16(&p, 1);
	pk_u16(&p, 2);
	pk_u16(&p, 443);
	pk_name_ptr(&p, "srv", 16); /* compressed SRV target: accepted */
	pk_rdlen_end(&p, at);
	pk_opt(&p, 1232, 0, 0, DNS_EDNS_FLAG_DO);
	m = parse_ok(p.b, p.n);
	assert_int_equal(m->nrr, 9);
	assert_true(m->edns.present);
	assert_int_equal(dns_msg_encode(m, out, sizeof(out), &n, &e), 0);
	m2 = parse_ok(out, n);
	assert_true(dns_msg_equal(m, m2));
	/* Compression works: not larger than the compressed input, except
	 * for the SRV target, which is written uncompressed (+ 16). */
	assert_true(n <= p.n + 16);
	/* Too small an output buffer is an error, not an overflow. */
	assert_int_equal(dns_msg_encode(m, out, n - 1, &n, &e), -1);
	dns_msg_free(m2);
	dns_msg_free(m);
}

static void
test_wire_helpers(void **state)
{
	struct pk p;
	struct dns_query q;
	bool have;
	uint32_t ttl;
	struct dns_msg *m;

	(void)state;
	build_cname_answer(&p);
	dns_wire_set_id(p.b, p.n, 0x9999);
	assert_int_equal(p.b[0], 0x99);
	assert_int_equal(dns_wire_min_ttl(p.b, p.n, &have, &ttl), 0);
	assert_true(have);
	assert_int_equal(ttl, 10);
	assert_int_equal(dns_wire_age_ttls(p.b, p.n, 50), 0);
	m = parse_ok(p.b, p.n);
	assert_int_equal(m->rr[0].ttl, 250);
	assert_int_equal(m->rr[1].ttl, 70);
	assert_int_equal(m->rr[2].ttl, 10);
	assert_int_equal(m->rr[4].ttl, 0); /* floor */
	dns_msg_free(m);

	/* OPT "ttl" carries flags and is not aged. */
	pk_hdr(&p, 1, DNS_FLAG_QR, 1, 0, 0, 1);
	pk_question(&p, "a.example", DNS_TYPE_A);
	pk_opt(&p, 1232, 0, 0, DNS_EDNS_FLAG_DO);
	assert_int_equal(dns_wire_age_ttls(p.b, p.n, 100000), 0);
	m = parse_ok(p.b, p.n);
	assert_int_equal(m->edns.flags, DNS_EDNS_FLAG_DO);
	dns_msg_free(m);
	assert_int_equal(dns_wire_min_ttl(p.b, p.n, &have, &ttl), 0);
	assert_false(have);
	/* Malformed: refused and untouched. */
	build_cname_answer(&p);
	uint8_t copy[PK_MAX];
	memcpy(copy, p.b, p.n);
	assert_int_equal(dns_wire_age_ttls(p.b, p.n - 1, 5), -1);
	assert_memory_equal(copy, p.b, p.n);

	/* Copy the client's 0x20 spelling into a lowercased answer. */
	struct pk cq;
	pk_hdr(&cq, 1, 0, 1, 0, 0, 0);
	pk_question(&cq, "wWw.EXAMPLE.cOm", DNS_TYPE_A);
	assert_int_equal(dns_query_parse(cq.b, cq.n, &q), DNS_QUERY_OK);
	build_cname_answer(&p);
	assert_int_equal(dns_wire_copy_qname_case(p.b, p.n, &q.question), 0);
	assert_memory_equal(p.b + 12, "\003wWw\007EXAMPLE\003cOm", 17);
	pk_hdr(&cq, 1, 0, 1, 0, 0, 0);
	pk_question(&cq, "www.example.org", DNS_TYPE_A);
	assert_int_equal(dns_query_parse(cq.b, cq.n, &q), DNS_QUERY_OK);
	assert_int_equal(dns_wire_copy_qname_case(p.b, p.n, &q.question), -1);
}

static void
test_tcp_frame(void **state)
{
	uint8_t buf[80] = {0, 12};
	size_t n = 0;

	(void)state;
	assert_int_equal(dns_tcp_frame(buf, 0, &n), DNS_TCP_NEED_MORE);
	assert_int_equal(dns_tcp_frame(buf, 1, &n), DNS_TCP_NEED_MORE);
	assert_int_equal(dns_tcp_frame(buf, 13, &n), DNS_TCP_NEED_MORE);
	assert_int_equal(dns_tcp_frame(buf, 14, &n), DNS_TCP_MSG);
	assert_int_equal(n, 12);
	assert_int_equal(dns_tcp_frame(buf, 80, &n), DNS_TCP_MSG);
	assert_int_equal(n, 12);
	buf[1] = 11;
	assert_int_equal(dns_tcp_frame(buf, 80, &n), DNS_TCP_BAD);
	buf[0] = 0xff;
	buf[1] = 0xff;
	assert_int_equal(dns_tcp_frame(buf, 80, &n), DNS_TCP_NEED_MORE);
	assert_int_equal(dns_tcp_prefix(buf, 65535), 0);
	assert_memory_equal(buf, "\xff\xff", 2);
	assert_int_equal(dns_tcp_prefix(buf, 65536), -1);
}

static void
test_svcb_parse(void **state)
{
	struct pk p;
	struct dns_svcb s;
	struct err e;

	(void)state;
	p.n = 0;
	pk_u16(&p, 1);
	pk_u8(&p, 0); /* target "." */
	pk_u16(&p, DNS_SVC_ALPN);
	pk_u16(&p, 3);
	pk_bytes(&p, "\002h2", 3);
	pk_u16(&p, DNS_SVC_IPV4HINT);
	pk_u16(&p, 8);
	pk_bytes(&p, "\xcb\x00\x71\x01\x0a\x00\x00\x01", 8);
	pk_u16(&p, DNS_SVC_ECH);
	pk_u16(&p, 4);
	pk_bytes(&p, "abcd", 4);
	pk_u16(&p, DNS_SVC_IPV6HINT);
	pk_u16(&p, 16);
	pk_bytes(&p, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
	assert_int_equal(dns_svcb_parse(p.b, p.n, DNS_TYPE_HTTPS, &s, &e), 0);
	assert_int_equal(s.priority, 1);
	assert_int_equal(s.target.len, 1);
	assert_int_equal(s.nv4, 2);
	assert_int_equal(s.nv6, 1);
	assert_true(s.has_ech);
	assert_memory_equal(s.v4[1], "\x0a\0\0\x01", 4);
	/* Cut anywhere: never accepted except at a parameter boundary. */
	for (size_t cut = 0; cut < p.n; cut++) {
		bool boundary = cut == 3 || cut == 10 || cut == 22 || cut == 30;
		int r = dns_svcb_parse(p.b, cut, DNS_TYPE_HTTPS, &s, &e);
		assert_int_equal(r, boundary ? 0 : -1);
	}
	/* Keys out of order. */
	p.n = 0;
	pk_u16(&p, 1);
	pk_u8(&p, 0);
	pk_u16(&p, DNS_SVC_IPV4HINT);
	pk_u16(&p, 4);
	pk_u32(&p, 0xcb007101);
	pk_u16(&p, DNS_SVC_ALPN);
	pk_u16(&p, 3);
	pk_bytes(&p, "\002h2", 3);
	assert_int_equal(dns_svcb_parse(p.b, p.n, DNS_TYPE_HTTPS, &s, &e), -1);
	/* ipv4hint of 5 bytes. */
	p.n = 0;
	pk_u16(&p, 1);
	pk_u8(&p, 0);
	pk_u16(&p, DNS_SVC_IPV4HINT);
	pk_u16(&p, 5);
	pk_bytes(&p, "abcde", 5);
	assert_int_equal(dns_svcb_parse(p.b, p.n, DNS_TYPE_HTTPS, &s, &e), -1);
	/* Compressed target. */
	p.n = 0;
	pk_u16(&p, 1);
	pk_u16(&p, 0xc00c);
	assert_int_equal(dns_svcb_parse(p.b, p.n, DNS_TYPE_HTTPS, &s, &e), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_query_basic_0x20),
	    cmocka_unit_test(test_query_drop),
	    cmocka_unit_test(test_query_qdcount),
	    cmocka_unit_test(test_query_notimp),
	    cmocka_unit_test(test_name_compression_loops),
	    cmocka_unit_test(test_name_bounds),
	    cmocka_unit_test(test_name_equal_fold),
	    cmocka_unit_test(test_name_pres_bytes),
	    cmocka_unit_test(test_query_edns),
	    cmocka_unit_test(test_build_errors),
	    cmocka_unit_test(test_build_nxdomain_soa),
	    cmocka_unit_test(test_build_localhost),
	    cmocka_unit_test(test_ptr_names),
	    cmocka_unit_test(test_pres_escaping),
	    cmocka_unit_test(test_addr_internal_v4),
	    cmocka_unit_test(test_addr_internal_v6),
	    cmocka_unit_test(test_answer_chain),
	    cmocka_unit_test(test_answer_chain_errors),
	    cmocka_unit_test(test_answer_dname),
	    cmocka_unit_test(test_answer_malformed),
	    cmocka_unit_test(test_pointer_targets),
	    cmocka_unit_test(test_encode_roundtrip),
	    cmocka_unit_test(test_wire_helpers),
	    cmocka_unit_test(test_tcp_frame),
	    cmocka_unit_test(test_svcb_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
