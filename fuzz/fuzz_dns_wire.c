/*
 * Fuzz target for the DNS codec of egressd/proto/ (dns_wire.h: dns_name.c,
 * dns_msg.c, dns_build.c, dns_answer.c, dns_wire.c). The input is one DNS
 * message, read both as a client query and as an upstream answer.
 * Invariants (abort on violation):
 *  - a query that is not dropped yields responses that parse and echo the
 *    ID and the question bytes;
 *  - a denied answer (NXDOMAIN with an EDE) to an EDNS query parses, fits
 *    the client's UDP limit and carries EDE 15 with its text (a text cut
 *    to fit keeps whole UTF-8 characters); to a query without EDNS it is
 *    byte for byte the answer without EDE, no OPT;
 *  - the EDE reader never reports more than its bound;
 *  - the presentation form of any decoded name parses back to the same
 *    wire bytes (escaping is lossless, so policy sees exactly the name);
 *  - a message that parses re-encodes to bytes that parse to an equal
 *    struct, and re-encoding that is a fixed point;
 *  - the wire helpers (min TTL, TTL ageing) agree with the decoded view;
 *  - the address classifier agrees with the embedded IPv4 forms.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/dns_wire.h"
#include "fuzz/fuzz_check.h"

#define FUZZ_AGE 7u

static void
check_pres_roundtrip(const struct dns_name *n)
{
	char pres[DNS_NAME_PRES_MAX], low[DNS_NAME_PRES_MAX];
	struct dns_name back;

	check(dns_name_to_pres(n, 0, pres, sizeof(pres)) >= 0);
	check(dns_name_to_pres(n, DNS_PRES_LOWER, low, sizeof(low)) >= 0);
	check(dns_name_from_pres(pres, &back, NULL) == 0);
	check(back.len == n->len && back.labels == n->labels);
	check(memcmp(back.wire, n->wire, n->len) == 0);
	check(dns_name_from_pres(low, &back, NULL) == 0);
	check(dns_name_equal(&back, n));
	/* No raw dot inside a label: dots in pres == labels - 1. */
	size_t dots = 0;
	for (const char *p = pres; *p != '\0'; p++)
		dots += *p == '.';
	check(n->labels == 0 ? dots == 0 : dots == (size_t)n->labels - 1u);
}

static void
check_reply(
    const uint8_t *out, size_t n, const struct dns_query *q, struct dns_msg *m)
{
	check(dns_msg_parse(m, out, n, NULL) == 0);
	check(m->id == q->id);
	check((m->flags & DNS_FLAG_QR) != 0);
	check(m->have_question == q->have_question);
	if (q->have_question)
		check(m->question.name.len == q->question.name.len &&
		    memcmp(m->question.name.wire, q->question.name.wire,
		        m->question.name.len) == 0);
}

/*
 * The denied answer egressd sends (dns_send_denied): EDE 15 with its text
 * to an EDNS client, and nothing new to one without EDNS. plain is the
 * same answer built without an EDE (plain_len bytes).
 */
static void
check_denied(const struct dns_query *q, struct dns_msg *m, const uint8_t *plain,
    size_t plain_len)
{
	static const struct dns_ede denied = {
	    DNS_EDE_BLOCKED, "egressd: denied by policy"};
	/* 35 two-byte characters and an x: longer than DNS_EDE_TEXT_MAX. */
	static const struct dns_ede utf8 = {DNS_EDE_BLOCKED,
	    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9x"};
	static uint8_t out[DNS_MSG_MAX];
	struct dns_ede_seen seen;
	size_t n;

	check(dns_build_negative(q, DNS_RCODE_NXDOMAIN, 30, &denied, out,
	          sizeof(out), &n, NULL) == 0);
	check_reply(out, n, q, m);
	check(m->rcode == DNS_RCODE_NXDOMAIN);
	check(n <= dns_query_udp_limit(q));
	if (!q->edns.present) {
		check(!m->edns.present);
		check(n == plain_len && memcmp(out, plain, n) == 0);
		check(dns_wire_ede(out, n, &seen) == 0);
		return;
	}
	check(m->edns.present);
	check(dns_wire_ede(out, n, &seen) == 1);
	check(seen.code == DNS_EDE_BLOCKED);
	check(strcmp(seen.text, denied.text) == 0);
	/* The long text under a cap that cuts it: whole characters only. */
	check(dns_build_negative(q, DNS_RCODE_NXDOMAIN, 30, &utf8, out,
	          plain_len + 6 + (q->id % 70u), &n, NULL) == 0);
	check(dns_wire_ede(out, n, &seen) == 1);
	check(seen.text_len <= DNS_EDE_TEXT_MAX && seen.text_len % 2 == 0);
	check(memcmp(seen.text, utf8.text, seen.text_len) == 0);
}

static void
fuzz_query(const uint8_t *data, size_t size, struct dns_msg *m, uint8_t *out)
{
	struct dns_query q;
	size_t n;

	enum dns_query_status st = dns_query_parse(data, size, &q);
	check(dns_query_status_str(st) != NULL);
	if (st == DNS_QUERY_DROP)
		return;
	if (st == DNS_QUERY_OK)
		check(q.have_question);
	size_t lim = dns_query_udp_limit(&q);
	check(lim >= DNS_UDP_CLASSIC_MAX && lim <= DNS_EDNS_UDP_SIZE);
	unsigned rc = st == DNS_QUERY_BADVERS ? DNS_RCODE_BADVERS
	    : st == DNS_QUERY_NOTIMP          ? DNS_RCODE_NOTIMP
	                                      : DNS_RCODE_FORMERR;
	check(dns_build_error(&q, rc, NULL, out, DNS_MSG_MAX, &n, NULL) == 0);
	check_reply(out, n, &q, m);
	check(m->rcode == rc);
	check(dns_build_truncated(&q, out, DNS_MSG_MAX, &n, NULL) == 0);
	check_reply(out, n, &q, m);
	if (!q.have_question)
		return;
	check_pres_roundtrip(&q.question.name);
	check(dns_build_negative(&q, DNS_RCODE_NXDOMAIN, 30, NULL, out,
	          DNS_MSG_MAX, &n, NULL) == 0);
	check_reply(out, n, &q, m);
	uint32_t ttl;
	check(dns_msg_min_ttl(m, &ttl) && ttl == 30);
	/* Built responses fit a classic UDP message when the name does. */
	check(n <= DNS_UDP_CLASSIC_MAX);
	check_denied(&q, m, out, n);
	if (dns_name_is_localhost(&q.question.name)) {
		check(dns_build_localhost(&q, 5, out, DNS_MSG_MAX, &n, NULL) ==
		    0);
		check_reply(out, n, &q, m);
	}
	int fam;
	uint8_t a[16];
	if (dns_ptr_name_parse(&q.question.name, &fam, a)) {
		struct dns_name rev;
		dns_ptr_name_make(fam, a, &rev);
		check(dns_name_equal(&rev, &q.question.name));
	}
}

static void
fuzz_msg(const uint8_t *data, size_t size, struct dns_msg *m,
    struct dns_msg *m2, uint8_t *out, uint8_t *out2)
{
	size_t n, n2;

	if (dns_msg_parse(m, data, size, NULL) == -1) {
		bool have;
		uint32_t ttl;
		/* The raw walkers accept nothing the decoder rejects for
		 * structural reasons; they may accept more (they do not
		 * decode rdata), but never crash. */
		(void)dns_wire_min_ttl(data, size, &have, &ttl);
		return;
	}
	check(m->nrr == m->count[0] + m->count[1] + m->count[2]);
	for (size_t i = 0; i < m->nrr; i++) {
		struct dns_name o;
		dns_msg_rr_owner(m, i, &o);
		check_pres_roundtrip(&o);
	}
	if (m->have_question)
		check_pres_roundtrip(&m->question.name);

	/* The EDE reader stays within its bound. */
	struct dns_ede_seen seen;
	if (dns_wire_ede(data, size, &seen) == 1)
		check(seen.text_len <= DNS_EDE_TEXT_MAX &&
		    seen.text[seen.text_len] == '\0');

	/* Wire helpers agree with the decoded view. */
	bool have;
	uint32_t wttl = 0, mttl = 0;
	check(dns_wire_min_ttl(data, size, &have, &wttl) == 0);
	check(have == dns_msg_min_ttl(m, &mttl));
	if (have)
		check(wttl == mttl);

	/* Ageing raw input: every TTL drops by FUZZ_AGE, floor 0, and
	 * nothing else changes (no name can be made of TTL bytes). */
	memcpy(out, data, size);
	check(dns_wire_age_ttls(out, size, FUZZ_AGE) == 0);
	check(dns_msg_parse(m2, out, size, NULL) == 0);
	check(m2->nrr == m->nrr);
	for (size_t i = 0; i < m->nrr; i++) {
		uint32_t t = m->rr[i].ttl;
		check(m2->rr[i].ttl == (t > FUZZ_AGE ? t - FUZZ_AGE : 0));
		m2->rr[i].ttl = t;
	}
	check(dns_msg_equal(m, m2));

	/* Round trip. */
	if (dns_msg_encode(m, out, DNS_MSG_MAX, &n, NULL) == 0) {
		check(dns_msg_parse(m2, out, n, NULL) == 0);
		check(dns_msg_equal(m, m2));
		check(dns_msg_encode(m2, out2, DNS_MSG_MAX, &n2, NULL) == 0);
		check(n2 == n && memcmp(out, out2, n) == 0);
	}

	if (!m->have_question)
		return;
	struct dns_answer_info *ai = malloc(sizeof(*ai));
	if (ai == NULL)
		return;
	if (dns_answer_info(m, ai, NULL) == 0) {
		check(ai->chain.n <= DNS_CHAIN_MAX);
		check(ai->naddr <= DNS_ANSWER_ADDR_MAX);
		for (size_t i = 0; i < ai->chain.n; i++)
			check(dns_chain_contains(
			    m, &ai->chain, &ai->chain.link[i].to));
	}
	free(ai);

	/* Copying the question case back is a no-op for its own spelling. */
	struct dns_question q = m->question;
	memcpy(out, data, size);
	if (dns_wire_copy_qname_case(out, size, &q) == 0)
		check(memcmp(out, data, size) == 0);
}

static void
fuzz_addr(const uint8_t *data, size_t size)
{
	uint8_t v4[DNS_EMBEDDED_V4_MAX][4];

	if (size < 16)
		return;
	bool in6 = dns_addr_is_internal(6, data);
	size_t n = dns_addr_embedded_v4(data, v4);
	check(n <= DNS_EMBEDDED_V4_MAX);
	for (size_t i = 0; i < n; i++)
		if (dns_addr_is_internal(4, v4[i]))
			check(in6);
	(void)dns_addr_is_internal(4, data);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_msg *m, *m2;
	uint8_t *out, *out2;
	size_t ml;

	if (size > DNS_MSG_MAX)
		return 0;
	m = dns_msg_new();
	m2 = dns_msg_new();
	out = malloc(DNS_MSG_MAX);
	out2 = malloc(DNS_MSG_MAX);
	if (m == NULL || m2 == NULL || out == NULL || out2 == NULL)
		goto out_free;
	fuzz_query(data, size, m, out);
	fuzz_msg(data, size, m, m2, out, out2);
	fuzz_addr(data, size);
	switch (dns_tcp_frame(data, size, &ml)) {
	case DNS_TCP_MSG:
		check(ml >= DNS_HEADER_LEN && ml + 2 <= size);
		break;
	case DNS_TCP_NEED_MORE:
	case DNS_TCP_BAD:
		break;
	}
out_free:
	free(out2);
	free(out);
	dns_msg_free(m2);
	dns_msg_free(m);
	return 0;
}
