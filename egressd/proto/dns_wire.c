/*
 * dns_wire: DNS messages as bytes, pure (see dns_wire.h): the in-place
 * edits of a raw message (ID, question case, TTL aging), its minimum TTL,
 * its Extended DNS Error, TCP framing, and the classification of answer
 * addresses. The codec itself is in dns_name.c (names), dns_msg.c
 * (decoding), dns_build.c (writing) and dns_answer.c (what an answer
 * says); dns_wire_int.h is what they share.
 *
 * Every read is bounded by the message length passed in; names are
 * decoded with backward-only compression pointers (each pointer must land
 * strictly before the segment it was found in, and after the header), so
 * decoding always terminates; re-encoding compresses only exact byte
 * matches, so the case of every name survives a round trip.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/proto/dns_wire_int.h"
#include "egressd/proto/special_ranges.h"

/* ---- in-place helpers ---- */

void
dns_wire_set_id(uint8_t *msg, size_t len, uint16_t id)
{
	if (len >= 2)
		wr16(msg, id);
}

int
dns_wire_copy_qname_case(uint8_t *msg, size_t len, const struct dns_question *q)
{
	size_t off = DNS_HEADER_LEN;
	struct dns_name n;

	if (len < DNS_HEADER_LEN || rd16(msg + 4) != 1)
		return -1;
	if (dns_name_decode(msg, len, &off, &n) == -1)
		return -1;
	/* Uncompressed in place iff it consumed exactly its wire length. */
	if (off - DNS_HEADER_LEN != n.len || !dns_name_equal(&n, &q->name))
		return -1;
	memcpy(msg + DNS_HEADER_LEN, q->name.wire, q->name.len);
	return 0;
}

int
dns_wire_age_ttls(uint8_t *msg, size_t len, uint32_t elapsed)
{
	struct rr_iter it;
	struct rr_pos rp;
	int r;

	/* Validate first so that a bad message is left untouched. */
	if (dns_msg_iter_init(&it, msg, len, NULL, NULL) == -1)
		return -1;
	while ((r = dns_msg_iter_next(&it, &rp)) == 1)
		;
	if (r == -1)
		return -1;
	(void)dns_msg_iter_init(&it, msg, len, NULL, NULL);
	while (dns_msg_iter_next(&it, &rp) == 1) {
		if (rp.type == DNS_TYPE_OPT)
			continue;
		wr32(msg + rp.fixed_off + 4,
		    rp.ttl > elapsed ? rp.ttl - elapsed : 0);
	}
	return 0;
}

int
dns_wire_min_ttl(const uint8_t *msg, size_t len, bool *have, uint32_t *ttl)
{
	struct rr_iter it;
	struct rr_pos rp;
	struct dns_question q;
	bool haveq, positive = false;
	uint32_t min = UINT32_MAX, soa = UINT32_MAX;
	uint8_t ext = 0;
	int r;

	*have = false;
	*ttl = 0;
	if (dns_msg_iter_init(&it, msg, len, &q, &haveq) == -1)
		return -1;
	while ((r = dns_msg_iter_next(&it, &rp)) == 1) {
		if (rp.type == DNS_TYPE_OPT) {
			ext = (uint8_t)(rp.ttl >> 24);
		} else if (rp.section == DNS_SEC_ANSWER) {
			if (rp.ttl < min)
				min = rp.ttl;
			*have = true;
			if (haveq &&
			    (rp.type == q.qtype || q.qtype == DNS_TYPE_ANY))
				positive = true;
		} else if (rp.section == DNS_SEC_AUTHORITY &&
		    rp.type == DNS_TYPE_SOA && rp.rdlen >= DNS_SOA_FIXED_LEN) {
			/* MINIMUM is the last field whatever the names are. */
			uint32_t smin = rd32(msg + rp.rdata_off + rp.rdlen - 4);
			uint32_t v = rp.ttl < smin ? rp.ttl : smin;
			if (v < soa)
				soa = v;
		}
	}
	if (r == -1) {
		*have = false;
		return -1;
	}
	unsigned rcode = (rd16(msg + 2) & 0xfu) | ((unsigned)ext << 4);
	bool negative = rcode == DNS_RCODE_NXDOMAIN ||
	    (rcode == DNS_RCODE_NOERROR && !positive);
	if (negative && soa != UINT32_MAX) {
		if (soa < min)
			min = soa;
		*have = true;
	}
	if (*have)
		*ttl = min;
	return 0;
}

/* ---- Extended DNS Errors ---- */

/* The EDE in the options of one OPT rdata: 1 found, 0 none, -1 bad. */
static int
opt_find_ede(const uint8_t *rd, size_t rdlen, struct dns_ede_seen *out)
{
	const uint8_t *val;
	size_t off = 0, vlen;
	uint16_t code;
	int r;

	while (
	    (r = dns_msg_opt_next(rd, rdlen, &off, &code, &val, &vlen)) == 1) {
		if (code != DNS_EDNS_OPT_EDE)
			continue;
		if (vlen < 2)
			return -1;
		out->code = rd16(val);
		out->text_len =
		    vlen - 2 < DNS_EDE_TEXT_MAX ? vlen - 2 : DNS_EDE_TEXT_MAX;
		memcpy(out->text, val + 2, out->text_len);
		out->text[out->text_len] = '\0';
		return 1;
	}
	return r;
}

int
dns_wire_ede(const uint8_t *msg, size_t len, struct dns_ede_seen *out)
{
	struct rr_iter it;
	struct rr_pos rp;
	int r;

	memset(out, 0, sizeof(*out));
	if (dns_msg_iter_init(&it, msg, len, NULL, NULL) == -1)
		return -1;
	while ((r = dns_msg_iter_next(&it, &rp)) == 1)
		if (rp.type == DNS_TYPE_OPT)
			return opt_find_ede(msg + rp.rdata_off, rp.rdlen, out);
	return r;
}

/* ---- TCP framing ---- */

enum dns_tcp_frame
dns_tcp_frame(const uint8_t *buf, size_t avail, size_t *msglen)
{
	if (avail < DNS_TCP_PREFIX_LEN)
		return DNS_TCP_NEED_MORE;
	size_t l = rd16(buf);
	if (l < DNS_HEADER_LEN)
		return DNS_TCP_BAD;
	if (avail - DNS_TCP_PREFIX_LEN < l)
		return DNS_TCP_NEED_MORE;
	*msglen = l;
	return DNS_TCP_MSG;
}

int
dns_tcp_prefix(uint8_t out[DNS_TCP_PREFIX_LEN], size_t len)
{
	if (len > DNS_MSG_MAX)
		return -1;
	wr16(out, (uint16_t)len);
	return 0;
}

/* ---- address classification (the table: special_ranges.c) ---- */

static bool
all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

size_t
dns_addr_embedded_v4(const uint8_t a[16], uint8_t v4[DNS_EMBEDDED_V4_MAX][4])
{
	unsigned base;
	int form = special_v4_of(a, SPECIAL_FORMS, v4[0], &base);

	if (form == SPECIAL_FORM_COMPAT && all_zero(a + 12, 3) && a[15] <= 1)
		return 0; /* :: and ::1 are classified on their own */
	if (form >= 0)
		return 1;
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		/* Teredo: server, then the client with its bits inverted. */
		memcpy(v4[0], a + 4, 4);
		for (size_t i = 0; i < 4; i++)
			v4[1][i] = (uint8_t)~a[12 + i];
		return 2;
	}
	return 0;
}

bool
dns_addr_is_internal(int family, const uint8_t *addr)
{
	if (family == AF_INET)
		family = 4;
	else if (family == AF_INET6)
		family = 6;
	return (special_addr_flags(family, addr) & SPECIAL_STRIP) != 0;
}
