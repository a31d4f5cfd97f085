/*
 * Unit tests for egressd/proto/dns_rewrite.c: upstream answers built by hand,
 * rewritten, and the output re-parsed to check what the client would see.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "egressd/proto/dns_rewrite.h"
#include "dns_testpk.h"

struct fixture {
	struct dns_msg *scratch, *out_msg;
	struct dns_query client;
	struct dns_rewrite_opts opts;
	struct dns_rewrite_report rep;
	uint8_t out[DNS_MSG_MAX];
	size_t outlen;
	struct err e;
	/* Callback state. */
	const char *deny_name;
	unsigned name_calls;
	char seen[8][DNS_NAME_PRES_MAX];
	bool allow_10;
};

static bool
name_cb(void *arg, const char *name)
{
	struct fixture *f = arg;

	if (f->name_calls < 8)
		snprintf(f->seen[f->name_calls], DNS_NAME_PRES_MAX, "%s", name);
	f->name_calls++;
	return f->deny_name == NULL || strcmp(name, f->deny_name) != 0;
}

static bool
addr_cb(void *arg, int family, const uint8_t *a)
{
	struct fixture *f = arg;

	/* An operator CIDR allowing 10.0.0.0/8 on top of the default. */
	if (f->allow_10 && family == 4 && a[0] == 10)
		return true;
	return !dns_addr_is_internal(family, a);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	f->scratch = dns_msg_new();
	f->out_msg = dns_msg_new();
	if (f->scratch == NULL || f->out_msg == NULL)
		return -1;
	f->opts.client = &f->client;
	f->opts.name_allowed = name_cb;
	f->opts.addr_allowed = addr_cb;
	f->opts.arg = f;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	dns_msg_free(f->scratch);
	dns_msg_free(f->out_msg);
	free(f);
	return 0;
}

static void
client_query(struct fixture *f, const char *name, uint16_t type, bool edns,
    uint16_t eflags)
{
	struct pk p;

	pk_hdr(&p, 0xc11e, DNS_FLAG_RD, 1, 0, 0, edns ? 1 : 0);
	pk_question(&p, name, type);
	if (edns)
		pk_opt(&p, 1232, 0, 0, eflags);
	assert_int_equal(dns_query_parse(p.b, p.n, &f->client), DNS_QUERY_OK);
}

static enum dns_rewrite_result
run(struct fixture *f, const struct pk *up)
{
	enum dns_rewrite_result r;

	err_clear(&f->e);
	r = dns_rewrite(f->scratch, up->b, up->n, &f->opts, f->out,
	    sizeof(f->out), &f->outlen, &f->rep, &f->e);
	if (r == DNS_REWRITE_OK) {
		struct err e2;
		/* The output always parses. */
		if (dns_msg_parse(f->out_msg, f->out, f->outlen, &e2) != 0)
			fail_msg("output does not parse: %s", e2.msg);
		assert_int_equal(
		    f->out_msg->count[DNS_SEC_ANSWER], f->rep.ancount);
	}
	return r;
}

/* Count of answer RRs of a type in the re-parsed output. */
static size_t
out_count(struct fixture *f, uint16_t type, unsigned section)
{
	size_t n = 0;

	for (size_t i = 0; i < f->out_msg->nrr; i++)
		if (f->out_msg->rr[i].type == type &&
		    f->out_msg->rr[i].section == section)
			n++;
	return n;
}

static void
upstream_hdr(struct pk *p, const char *qname, uint16_t qtype, uint16_t an,
    uint16_t ns, uint16_t ar)
{
	pk_hdr(p, 0x7777, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA | DNS_FLAG_AA,
	    1, an, ns, ar);
	pk_question(p, qname, qtype);
}

static void
test_rebinding_v4(void **state)
{
	struct fixture *f = *state;
	struct pk p;

	client_query(f, "app.example.com", DNS_TYPE_A, false, 0);
	upstream_hdr(&p, "app.example.com", DNS_TYPE_A, 4, 0, 0);
	pk_a(&p, 12, 300, 10, 0, 0, 1);
	pk_a(&p, 12, 300, 169, 254, 169, 254);
	pk_a(&p, 12, 300, 203, 0, 113, 7);
	pk_a(&p, 12, 100, 198, 51, 100, 8);
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_addrs, 2);
	assert_int_equal(f->rep.ancount, 2);
	assert_int_equal(out_count(f, DNS_TYPE_A, DNS_SEC_ANSWER), 2);
	assert_int_equal(f->rep.naddr, 2);
	assert_memory_equal(f->rep.addr[0].addr, "\xcb\x00\x71\x07", 4);
	assert_memory_equal(f->rep.addr[1].addr, "\xc6\x33\x64\x08", 4);
	assert_int_equal(f->rep.addr[1].ttl, 100);
	assert_int_equal(f->rep.addr[0].source, DNS_TYPE_A);
	/* The client's ID, RD; no OPT since the client sent none; AA off. */
	assert_int_equal(f->out_msg->id, 0xc11e);
	assert_true(f->out_msg->flags & DNS_FLAG_QR);
	assert_true(f->out_msg->flags & DNS_FLAG_RD);
	assert_true(f->out_msg->flags & DNS_FLAG_RA);
	assert_false(f->out_msg->flags & DNS_FLAG_AA);
	assert_false(f->out_msg->edns.present);
	assert_true(f->rep.have_ttl);
	assert_int_equal(f->rep.ttl, 100);

	/* With an operator allow for 10/8 the first one stays. */
	f->allow_10 = true;
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_addrs, 1);
	assert_int_equal(f->rep.naddr, 3);

	/* Default classifier when no callback is given. */
	f->opts.addr_allowed = NULL;
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_addrs, 2);
	assert_int_equal(f->rep.naddr, 2);
}

static void
test_rebinding_v6_forms(void **state)
{
	struct fixture *f = *state;
	struct pk p;
	static const uint8_t mapped[16] = {
	    [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 1};
	static const uint8_t nat64[16] = {0, 0x64, 0xff,
	    0x9b, [12] = 169, [13] = 254, [14] = 169, [15] = 254};
	static const uint8_t sixtofour[16] = {
	    0x20, 0x02, 192, 168, 0, 1, [15] = 1};
	static const uint8_t ula[16] = {
	    0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
	static const uint8_t doc[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x10};

	client_query(f, "v6.example.com", DNS_TYPE_AAAA, true, 0);
	upstream_hdr(&p, "v6.example.com", DNS_TYPE_AAAA, 5, 0, 0);
	pk_aaaa(&p, 12, 60, mapped);
	pk_aaaa(&p, 12, 60, nat64);
	pk_aaaa(&p, 12, 60, sixtofour);
	pk_aaaa(&p, 12, 60, ula);
	pk_aaaa(&p, 12, 60, doc);
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_addrs, 4);
	assert_int_equal(f->rep.ancount, 1);
	assert_int_equal(f->rep.naddr, 1);
	assert_int_equal(f->rep.addr[0].family, 6);
	assert_memory_equal(f->rep.addr[0].addr, doc, 16);
	assert_memory_equal(dns_msg_rr_rdata(f->out_msg, 0), doc, 16);
	/* The client sent EDNS: the answer has our OPT. */
	assert_true(f->out_msg->edns.present);
	assert_int_equal(f->out_msg->edns.udp_size, DNS_EDNS_UDP_SIZE);
}

static void
test_cname_chain_policy(void **state)
{
	struct fixture *f = *state;
	struct pk p;
	size_t at;

	client_query(f, "api.allowed.example", DNS_TYPE_A, false, 0);
	upstream_hdr(&p, "api.allowed.example", DNS_TYPE_A, 3, 0, 0);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 300);
	size_t t1 = p.n;
	pk_name(&p, "Edge.CDN.example");
	pk_rdlen_end(&p, at);
	pk_u16(&p, (uint16_t)(0xc000u | t1));
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 300);
	size_t t2 = p.n;
	pk_name(&p, "internal.denied.example");
	pk_rdlen_end(&p, at);
	pk_a(&p, (uint16_t)t2, 60, 203, 0, 113, 50);

	/* Every chain target goes to policy, lowercased, in order. */
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->name_calls, 2);
	assert_string_equal(f->seen[0], "edge.cdn.example");
	assert_string_equal(f->seen[1], "internal.denied.example");
	assert_int_equal(f->rep.chain.n, 2);
	assert_int_equal(f->rep.naddr, 1);
	assert_int_equal(f->rep.addr[0].owner, 2); /* the second target */
	assert_int_equal(f->rep.ancount, 3);

	/* One denied name: DENIED, and which one. */
	f->name_calls = 0;
	f->deny_name = "internal.denied.example";
	f->outlen = 12345;
	assert_int_equal(run(f, &p), DNS_REWRITE_DENIED);
	assert_string_equal(f->rep.denied_name, "internal.denied.example");
	assert_int_equal(f->outlen, 12345); /* nothing written */
	f->deny_name = "edge.cdn.example";
	assert_int_equal(run(f, &p), DNS_REWRITE_DENIED);
	assert_string_equal(f->rep.denied_name, "edge.cdn.example");
}

static void
test_unrelated_and_additional(void **state)
{
	struct fixture *f = *state;
	struct pk p;
	size_t at;

	client_query(f, "www.example.com", DNS_TYPE_A, false, 0);
	upstream_hdr(&p, "www.example.com", DNS_TYPE_A, 3, 1, 2);
	pk_a(&p, 12, 60, 203, 0, 113, 1);
	/* Unrelated A and CNAME in the answer section. */
	pk_name(&p, "evil.example");
	at = pk_rr_fixed(&p, DNS_TYPE_A, 60);
	pk_u32(&p, 0xcb007163);
	pk_rdlen_end(&p, at);
	pk_name(&p, "cache.poison.example");
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 60);
	pk_name(&p, "evil.example");
	pk_rdlen_end(&p, at);
	/* Authority NS; additional glue: one internal, one public. */
	pk_u16(&p, 0xc000u | 16);
	at = pk_rr_fixed(&p, DNS_TYPE_NS, 60);
	size_t ns = p.n;
	pk_name_ptr(&p, "ns1", 16);
	pk_rdlen_end(&p, at);
	pk_a(&p, (uint16_t)ns, 60, 192, 168, 1, 1);
	pk_a(&p, (uint16_t)ns, 60, 198, 51, 100, 53);
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_unrelated, 2);
	assert_int_equal(f->rep.stripped_addrs, 1);
	assert_int_equal(f->rep.ancount, 1);
	assert_int_equal(f->out_msg->count[DNS_SEC_AUTHORITY], 1);
	assert_int_equal(f->out_msg->count[DNS_SEC_ADDITIONAL], 1);
	/* Glue is not learned: only the chain's own addresses are. */
	assert_int_equal(f->rep.naddr, 1);

	f->opts.flags = DNS_REWRITE_DROP_ADDITIONAL;
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->out_msg->count[DNS_SEC_ADDITIONAL], 0);
	assert_int_equal(f->out_msg->count[DNS_SEC_AUTHORITY], 1);
}

static void
test_other_class(void **state)
{
	struct fixture *f = *state;
	struct pk p;

	/* A class CH "A" record with an internal address, owned by the
	 * qname: musl would use it. It must not reach the client. */
	client_query(f, "www.example.com", DNS_TYPE_A, false, 0);
	upstream_hdr(&p, "www.example.com", DNS_TYPE_A, 2, 0, 1);
	pk_a(&p, 12, 60, 203, 0, 113, 1);
	pk_u16(&p, 0xc00c);
	pk_u16(&p, DNS_TYPE_A);
	pk_u16(&p, 3); /* CH */
	pk_u32(&p, 60);
	pk_u16(&p, 4);
	pk_u32(&p, 0x0a000001);
	/* And one in the additional section. */
	pk_u16(&p, 0xc00c);
	pk_u16(&p, DNS_TYPE_A);
	pk_u16(&p, 3);
	pk_u32(&p, 60);
	pk_u16(&p, 4);
	pk_u32(&p, 0x7f000001);
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_unrelated, 2);
	assert_int_equal(f->out_msg->nrr, 1);
	assert_int_equal(f->out_msg->rr[0].rclass, DNS_CLASS_IN);
	assert_int_equal(f->rep.naddr, 1);
}

static void
test_case_and_opt(void **state)
{
	struct fixture *f = *state;
	struct pk p;
	struct dns_name owner;

	client_query(
	    f, "MiXeD.ExAmPlE.CoM", DNS_TYPE_A, true, DNS_EDNS_FLAG_DO);
	/* Upstream lowercased everything and sent its own OPT + AD. */
	pk_hdr(&p, 0x7777, DNS_FLAG_QR | DNS_FLAG_RA | DNS_FLAG_AD, 1, 1, 0, 1);
	pk_question(&p, "mixed.example.com", DNS_TYPE_A);
	pk_name(&p, "mixed.example.com");
	size_t at = pk_rr_fixed(&p, DNS_TYPE_A, 60);
	pk_u32(&p, 0xcb007101);
	pk_rdlen_end(&p, at);
	pk_opt(&p, 4096, 0, 0, 0);
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_memory_equal(f->out + 12, "\005MiXeD\007ExAmPlE\003CoM", 19);
	dns_msg_rr_owner(f->out_msg, 0, &owner);
	assert_memory_equal(owner.wire, "\005MiXeD\007ExAmPlE\003CoM", 19);
	assert_true(f->out_msg->edns.present);
	assert_int_equal(f->out_msg->edns.udp_size, DNS_EDNS_UDP_SIZE);
	assert_int_equal(f->out_msg->edns.flags, DNS_EDNS_FLAG_DO);
	/* Client asked with DO and nothing was removed: AD survives. */
	assert_true(f->out_msg->flags & DNS_FLAG_AD);
	/* RD was set by the client, not by this upstream answer. */
	assert_true(f->out_msg->flags & DNS_FLAG_RD);

	/* Without EDNS in the query: no OPT, no AD. */
	client_query(f, "mixed.example.com", DNS_TYPE_A, false, 0);
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_false(f->out_msg->edns.present);
	assert_false(f->out_msg->flags & DNS_FLAG_AD);
}

static void
test_ttl_clamp(void **state)
{
	struct fixture *f = *state;
	struct pk p;

	client_query(f, "t.example", DNS_TYPE_A, false, 0);
	upstream_hdr(&p, "t.example", DNS_TYPE_A, 3, 0, 0);
	pk_a(&p, 12, 1, 203, 0, 113, 1);
	pk_a(&p, 12, 86400, 203, 0, 113, 2);
	pk_a(&p, 12, 120, 203, 0, 113, 3);
	f->opts.ttl_min = 30;
	f->opts.ttl_max = 600;
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->out_msg->rr[0].ttl, 30);
	assert_int_equal(f->out_msg->rr[1].ttl, 600);
	assert_int_equal(f->out_msg->rr[2].ttl, 120);
	assert_int_equal(f->rep.addr[0].ttl, 30);
	assert_int_equal(f->rep.addr[1].ttl, 600);
	f->opts.ttl_min = 0;
	f->opts.ttl_max = 0;
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->out_msg->rr[0].ttl, 1);
	assert_int_equal(f->out_msg->rr[1].ttl, 86400);
}

/* A cache hit's age comes off every TTL (floor 0) before the clamps. */
static void
test_ttl_age(void **state)
{
	struct fixture *f = *state;
	struct pk p;
	uint8_t before[sizeof(p.b)];
	size_t at, t;

	client_query(f, "t.example", DNS_TYPE_A, false, 0);
	upstream_hdr(&p, "t.example", DNS_TYPE_A, 3, 0, 0);
	pk_u16(&p, 0xc00c);
	at = pk_rr_fixed(&p, DNS_TYPE_CNAME, 300);
	t = p.n;
	pk_name(&p, "u.example");
	pk_rdlen_end(&p, at);
	pk_a(&p, (uint16_t)t, 300, 203, 0, 113, 1);
	pk_a(&p, (uint16_t)t, 50, 203, 0, 113, 2);
	memcpy(before, p.b, p.n);
	f->opts.age = 100;
	f->opts.ttl_min = 30;
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->out_msg->nrr, 3);
	assert_int_equal(f->out_msg->rr[0].ttl, 200); /* CNAME: aged only */
	assert_int_equal(f->out_msg->rr[1].ttl, 200);
	/* aged past zero, then raised to ttl_min as a fresh 0 would be */
	assert_int_equal(f->out_msg->rr[2].ttl, 30);
	assert_int_equal(f->rep.naddr, 2);
	assert_int_equal(f->rep.addr[0].ttl, 200);
	assert_int_equal(f->rep.addr[1].ttl, 30);
	/* the stored answer is read, not aged in place */
	assert_memory_equal(before, p.b, p.n);
}

/* HTTPS rdata: priority 1, target ".", alpn h2, ipv4hint, ech, ipv6hint,
 * mandatory listing alpn + ipv4hint. */
static void
pk_https(struct pk *p, uint16_t owner_off, const char *target)
{
	static const uint8_t v6int[16] = {0xfe, 0x80, [15] = 1};
	static const uint8_t v6loop[16] = {[15] = 1};

	pk_u16(p, (uint16_t)(0xc000u | owner_off));
	size_t at = pk_rr_fixed(p, DNS_TYPE_HTTPS, 300);
	pk_u16(p, 1);
	pk_name(p, target);
	pk_u16(p, DNS_SVC_MANDATORY);
	pk_u16(p, 4);
	pk_u16(p, DNS_SVC_ALPN);
	pk_u16(p, DNS_SVC_IPV4HINT);
	pk_u16(p, DNS_SVC_ALPN);
	pk_u16(p, 3);
	pk_bytes(p, "\002h2", 3);
	pk_u16(p, DNS_SVC_IPV4HINT);
	pk_u16(p, 12);
	pk_bytes(p, "\x0a\x00\x00\x01\xcb\x00\x71\x09\xa9\xfe\xa9\xfe", 12);
	pk_u16(p, DNS_SVC_ECH);
	pk_u16(p, 5);
	pk_bytes(p,
	    "\x00\x03"
	    "abc",
	    5);
	pk_u16(p, DNS_SVC_IPV6HINT);
	pk_u16(p, 32);
	pk_bytes(p, v6int, 16);
	pk_bytes(p, v6loop, 16);
	pk_rdlen_end(p, at);
}

static void
test_https_hints(void **state)
{
	struct fixture *f = *state;
	struct pk p;
	struct dns_svcb s;
	struct err e;

	client_query(f, "svc.example", DNS_TYPE_HTTPS, false, 0);
	upstream_hdr(&p, "svc.example", DNS_TYPE_HTTPS, 1, 0, 0);
	pk_https(&p, 12, "");
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.ancount, 1);
	assert_int_equal(f->rep.stripped_hints, 4);
	assert_int_equal(f->rep.stripped_ech, 0);
	assert_int_equal(f->rep.naddr, 1);
	assert_int_equal(f->rep.addr[0].source, DNS_TYPE_HTTPS);
	assert_memory_equal(f->rep.addr[0].addr, "\xcb\x00\x71\x09", 4);
	assert_int_equal(dns_svcb_parse(dns_msg_rr_rdata(f->out_msg, 0),
	                     f->out_msg->rr[0].rdlen, DNS_TYPE_HTTPS, &s, &e),
	    0);
	assert_int_equal(s.nv4, 1);
	assert_int_equal(s.nv6, 0); /* key removed: an empty list is invalid */
	assert_true(s.has_ech);
	/* mandatory still lists alpn and ipv4hint (both present). */
	const uint8_t *rd = dns_msg_rr_rdata(f->out_msg, 0);
	assert_memory_equal(rd + 3, "\x00\x00\x00\x04\x00\x01\x00\x04", 8);

	/* Strip ech too, and allow no v4 hint: ipv4hint leaves mandatory. */
	f->opts.flags = DNS_REWRITE_STRIP_ECH;
	f->opts.addr_allowed = NULL;
	p.b[p.n - 32 - 4 - 5 - 4 - 12 + 4] = 10; /* 203.0.113.9 -> 10.0.113.9 */
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_hints, 5);
	assert_int_equal(f->rep.stripped_ech, 1);
	assert_int_equal(f->rep.naddr, 0);
	assert_int_equal(dns_svcb_parse(dns_msg_rr_rdata(f->out_msg, 0),
	                     f->out_msg->rr[0].rdlen, DNS_TYPE_HTTPS, &s, &e),
	    0);
	assert_int_equal(s.nv4, 0);
	assert_false(s.has_ech);
	rd = dns_msg_rr_rdata(f->out_msg, 0);
	/* priority, ".", mandatory=[alpn], alpn=h2: nothing else. */
	assert_int_equal(f->out_msg->rr[0].rdlen, 3 + 6 + 7);
	assert_memory_equal(
	    rd + 3, "\x00\x00\x00\x02\x00\x01\x00\x01\x00\x03\x02h2", 13);
}

/*
 * More addresses than the report holds: the ones beyond it are removed
 * from the answer (never released unlearned), A/AAAA and hints alike.
 */
static void
test_addr_cap(void **state)
{
	struct fixture *f = *state;
	struct pk p;
	struct dns_svcb s;
	struct err e;
	size_t i;

	client_query(f, "many.example", DNS_TYPE_A, true, 0);
	upstream_hdr(&p, "many.example", DNS_TYPE_A, 300, 0, 0);
	for (i = 0; i < 300; i++)
		pk_a(&p, 12, 300, 203, 0, (uint8_t)(113 + i / 256),
		    (uint8_t)(i % 256));
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.naddr, DNS_ANSWER_ADDR_MAX);
	assert_true(f->rep.addr_truncated);
	assert_int_equal(f->rep.stripped_excess, 300 - DNS_ANSWER_ADDR_MAX);
	assert_int_equal(f->rep.stripped_addrs, 0);
	assert_int_equal(
	    out_count(f, DNS_TYPE_A, DNS_SEC_ANSWER), DNS_ANSWER_ADDR_MAX);
	/* Exactly the reported ones are released. */
	for (i = 0; i < f->out_msg->nrr; i++)
		assert_memory_equal(
		    dns_msg_rr_rdata(f->out_msg, i), f->rep.addr[i].addr, 4);

	/* An HTTPS record whose hints do not all fit keeps what fits: 255
	 * A records, then two allowed ipv4hints (10.0.0.1 with the operator
	 * allow, 203.0.113.9): room for one. */
	f->allow_10 = true;
	client_query(f, "svc.example", DNS_TYPE_HTTPS, false, 0);
	upstream_hdr(&p, "svc.example", DNS_TYPE_HTTPS, 256, 0, 0);
	for (i = 0; i < DNS_ANSWER_ADDR_MAX - 1; i++)
		pk_a(&p, 12, 300, 198, 51, 100, (uint8_t)i);
	pk_https(&p, 12, "");
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.naddr, DNS_ANSWER_ADDR_MAX);
	assert_int_equal(f->rep.stripped_excess, 1);
	assert_true(f->rep.addr_truncated);
	assert_memory_equal(
	    f->rep.addr[DNS_ANSWER_ADDR_MAX - 1].addr, "\x0a\x00\x00\x01", 4);
	for (i = 0; i < f->out_msg->nrr; i++)
		if (f->out_msg->rr[i].type == DNS_TYPE_HTTPS)
			break;
	assert_true(i < f->out_msg->nrr);
	assert_int_equal(dns_svcb_parse(dns_msg_rr_rdata(f->out_msg, i),
	                     f->out_msg->rr[i].rdlen, DNS_TYPE_HTTPS, &s, &e),
	    0);
	assert_int_equal(s.nv4, 1); /* the released hint is the learned one */
}

static void
test_https_target_policy(void **state)
{
	struct fixture *f = *state;
	struct pk p;

	client_query(f, "svc.example", DNS_TYPE_HTTPS, false, 0);
	upstream_hdr(&p, "svc.example", DNS_TYPE_HTTPS, 2, 0, 0);
	pk_https(&p, 12, "pool.denied.example");
	pk_https(&p, 12, "pool.ok.example");
	f->deny_name = "pool.denied.example";
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.stripped_svcb, 1);
	assert_int_equal(f->rep.ancount, 1);
	assert_int_equal(f->rep.naddr, 1);
}

static void
test_errors(void **state)
{
	struct fixture *f = *state;
	struct pk p;

	client_query(f, "a.example", DNS_TYPE_A, false, 0);
	/* Another question. */
	upstream_hdr(&p, "b.example", DNS_TYPE_A, 1, 0, 0);
	pk_a(&p, 12, 60, 203, 0, 113, 1);
	assert_int_equal(run(f, &p), DNS_REWRITE_ERROR);
	/* Another type. */
	upstream_hdr(&p, "a.example", DNS_TYPE_AAAA, 0, 0, 0);
	assert_int_equal(run(f, &p), DNS_REWRITE_ERROR);
	/* Truncated. */
	upstream_hdr(&p, "a.example", DNS_TYPE_A, 1, 0, 0);
	pk_a(&p, 12, 60, 203, 0, 113, 1);
	p.n--;
	assert_int_equal(run(f, &p), DNS_REWRITE_ERROR);
	/* A query, not a response. */
	pk_hdr(&p, 1, 0, 1, 0, 0, 0);
	pk_question(&p, "a.example", DNS_TYPE_A);
	assert_int_equal(run(f, &p), DNS_REWRITE_ERROR);
	/* Output buffer too small. */
	upstream_hdr(&p, "a.example", DNS_TYPE_A, 1, 0, 0);
	pk_a(&p, 12, 60, 203, 0, 113, 1);
	assert_int_equal(dns_rewrite(f->scratch, p.b, p.n, &f->opts, f->out, 20,
	                     &f->outlen, &f->rep, &f->e),
	    DNS_REWRITE_ERROR);
	/* An NXDOMAIN passes through with its SOA and rcode. */
	pk_hdr(&p, 9, DNS_FLAG_QR | DNS_FLAG_RA | 3, 1, 0, 1, 0);
	pk_question(&p, "a.example", DNS_TYPE_A);
	pk_u16(&p, 0xc000u | 14); /* "example" */
	size_t at = pk_rr_fixed(&p, DNS_TYPE_SOA, 900);
	pk_name(&p, "ns.example");
	pk_name(&p, "h.example");
	for (int i = 0; i < 4; i++)
		pk_u32(&p, 1);
	pk_u32(&p, 45);
	pk_rdlen_end(&p, at);
	assert_int_equal(run(f, &p), DNS_REWRITE_OK);
	assert_int_equal(f->rep.rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(f->out_msg->rcode, DNS_RCODE_NXDOMAIN);
	assert_true(f->rep.have_ttl);
	assert_int_equal(f->rep.ttl, 45);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_rebinding_v4, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ttl_age, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_rebinding_v6_forms, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_cname_chain_policy, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_unrelated_and_additional, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_class, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_case_and_opt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ttl_clamp, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_addr_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_https_hints, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_https_target_policy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
