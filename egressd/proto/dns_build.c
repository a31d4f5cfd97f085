/*
 * dns_build: writing DNS messages, pure (see dns_wire.h): the replies
 * egressd makes itself (errors, truncation, negative answers with a
 * synthesized SOA, local answers; an Extended DNS Error in the OPT record
 * of those that say why) and the re-encoding of a decoded message,
 * compressing only exact byte matches so the case of every name survives a
 * round trip. Nothing is written past the capacity passed in.
 */
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/proto/dns_wire_int.h"

/* Names compressed against per encoded message. */
#define DNS_COMPRESS_MAX 256
/* Largest offset a compression pointer can carry. */
#define DNS_PTR_OFF_MAX 0x3fff

/* ---- a bounded writer ---- */

struct wbuf {
	uint8_t *buf;
	size_t cap, len;
	bool overflow;
};

static bool
wb_room(struct wbuf *w, size_t n)
{
	if (w->overflow || w->cap - w->len < n) {
		w->overflow = true;
		return false;
	}
	return true;
}

static void
wb_put(struct wbuf *w, const void *p, size_t n)
{
	if (n == 0 || !wb_room(w, n))
		return;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void
wb_u16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2];

	wr16(b, v);
	wb_put(w, b, sizeof(b));
}

static void
wb_u32(struct wbuf *w, uint32_t v)
{
	uint8_t b[4];

	wr32(b, v);
	wb_put(w, b, sizeof(b));
}

/* ---- response builders ---- */

/* Header + question of a response to q; counts filled in later. */
static void
reply_start(struct wbuf *w, const struct dns_query *q, unsigned rcode,
    uint16_t extra_flags)
{
	uint16_t flags = DNS_FLAG_QR | DNS_FLAG_RA | extra_flags |
	    (uint16_t)(q->opcode << 11) |
	    (q->flags & (DNS_FLAG_RD | DNS_FLAG_CD)) | (uint16_t)(rcode & 0xf);

	wb_u16(w, q->id);
	wb_u16(w, flags);
	wb_u16(w, q->have_question ? 1 : 0);
	wb_u16(w, 0);
	wb_u16(w, 0);
	wb_u16(w, 0);
	if (q->have_question) {
		wb_put(w, q->question.name.wire, q->question.name.len);
		wb_u16(w, q->question.qtype);
		wb_u16(w, q->question.qclass);
	}
}

static void
reply_counts(struct wbuf *w, unsigned an, unsigned ns, unsigned ar)
{
	if (w->overflow)
		return;
	wr16(w->buf + 6, (uint16_t)an);
	wr16(w->buf + 8, (uint16_t)ns);
	wr16(w->buf + 10, (uint16_t)ar);
}

/* Fixed bytes of an OPT record (root owner, type, class, TTL, RDLEN). */
#define DNS_OPT_FIXED_LEN 11
/* Fixed bytes of an EDE option (OPTION-CODE, -LENGTH, INFO-CODE). */
#define DNS_EDE_FIXED_LEN 6

/*
 * How many bytes of text fit room (and DNS_EDE_TEXT_MAX), never splitting
 * a UTF-8 character: a cut lands before a lead byte, not on a
 * continuation byte.
 */
static size_t
ede_text_fit(const char *text, size_t room)
{
	size_t full, n;

	if (text == NULL)
		return 0;
	full = strnlen(text, DNS_EDE_TEXT_MAX + 1);
	n = full < DNS_EDE_TEXT_MAX ? full : DNS_EDE_TEXT_MAX;
	if (n > room)
		n = room;
	while (n > 0 && n < full && ((uint8_t)text[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/*
 * The EDE option, when it fits within the client's UDP limit (and cap)
 * after an OPT record starting at w->len; its length, 0 when left out.
 */
static size_t
reply_ede_len(const struct wbuf *w, const struct dns_query *q,
    const struct dns_ede *ede, size_t *text_len)
{
	size_t limit = dns_query_udp_limit(q), need;

	*text_len = 0;
	if (ede == NULL)
		return 0;
	if (limit > w->cap)
		limit = w->cap;
	need = w->len + DNS_OPT_FIXED_LEN + DNS_EDE_FIXED_LEN;
	if (w->overflow || need > limit)
		return 0;
	*text_len = ede_text_fit(ede->text, limit - need);
	return DNS_EDE_FIXED_LEN + *text_len;
}

/*
 * Our OPT record, if the client sent one or the rcode needs it, with the
 * EDE option ede (may be NULL) when the client sent one.
 */
static unsigned
reply_opt(struct wbuf *w, const struct dns_query *q, unsigned rcode,
    const struct dns_ede *ede)
{
	size_t text_len, ede_len;

	if (!q->edns.present && rcode <= 0xf)
		return 0;
	ede_len = q->edns.present ? reply_ede_len(w, q, ede, &text_len) : 0;
	wb_put(w, "", 1); /* root owner */
	wb_u16(w, DNS_TYPE_OPT);
	wb_u16(w, DNS_EDNS_UDP_SIZE);
	wb_u32(w,
	    ((uint32_t)(rcode >> 4) << 24) |
	        (uint32_t)(q->edns.flags & DNS_EDNS_FLAG_DO));
	wb_u16(w, (uint16_t)ede_len);
	if (ede_len > 0) {
		wb_u16(w, DNS_EDNS_OPT_EDE);
		wb_u16(w, (uint16_t)(ede_len - 4));
		wb_u16(w, ede->code);
		wb_put(w, ede->text, text_len);
	}
	return 1;
}

static int
reply_finish(struct wbuf *w, size_t *outlen, struct err *e)
{
	if (w->overflow) {
		err_set(e, "response does not fit %zu bytes", w->cap);
		return -1;
	}
	*outlen = w->len;
	return 0;
}

int
dns_build_error(const struct dns_query *q, unsigned rcode,
    const struct dns_ede *ede, uint8_t *out, size_t cap, size_t *outlen,
    struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	if (rcode > 0xfff) {
		err_set(e, "rcode %u out of range", rcode);
		return -1;
	}
	reply_start(&w, q, rcode, 0);
	unsigned ar = reply_opt(&w, q, rcode, ede);
	reply_counts(&w, 0, 0, ar);
	return reply_finish(&w, outlen, e);
}

int
dns_build_truncated(const struct dns_query *q, uint8_t *out, size_t cap,
    size_t *outlen, struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	reply_start(&w, q, DNS_RCODE_NOERROR, DNS_FLAG_TC);
	unsigned ar = reply_opt(&w, q, DNS_RCODE_NOERROR, NULL);
	reply_counts(&w, 0, 0, ar);
	return reply_finish(&w, outlen, e);
}

/* Pointer to the question name, which always sits at the header's end. */
#define DNS_QNAME_PTR (0xc000u | DNS_HEADER_LEN)

static void
put_soa(struct wbuf *w, const struct dns_query *q, uint32_t neg_ttl)
{
	/*
	 * DNS_SOA_MNAME and DNS_SOA_RNAME in wire form (the literal's NUL
	 * is the root label), spelled out once rather than converted from
	 * presentation for every denied name; test_dns_wire reads them
	 * back as the two macros.
	 */
	static const uint8_t mname[] = "\x07"
	                               "egressd\x07"
	                               "invalid";
	static const uint8_t rname[] = "\x0a"
	                               "hostmaster\x07"
	                               "egressd\x07"
	                               "invalid";

	wb_u16(w, DNS_QNAME_PTR);
	wb_u16(w, DNS_TYPE_SOA);
	wb_u16(w, q->question.qclass);
	wb_u32(w, neg_ttl);
	wb_u16(
	    w, (uint16_t)(sizeof(mname) + sizeof(rname) + DNS_SOA_FIXED_LEN));
	wb_put(w, mname, sizeof(mname));
	wb_put(w, rname, sizeof(rname));
	wb_u32(w, DNS_SOA_SERIAL);
	wb_u32(w, DNS_SOA_REFRESH);
	wb_u32(w, DNS_SOA_RETRY);
	wb_u32(w, DNS_SOA_EXPIRE);
	wb_u32(w, neg_ttl);
}

int
dns_build_negative(const struct dns_query *q, unsigned rcode, uint32_t neg_ttl,
    const struct dns_ede *ede, uint8_t *out, size_t cap, size_t *outlen,
    struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	if (!q->have_question) {
		err_set(e, "negative answer needs a question");
		return -1;
	}
	if (rcode != DNS_RCODE_NXDOMAIN && rcode != DNS_RCODE_NOERROR) {
		err_set(e, "negative answer rcode %u", rcode);
		return -1;
	}
	reply_start(&w, q, rcode, 0);
	put_soa(&w, q, neg_ttl);
	unsigned ar = reply_opt(&w, q, rcode, ede);
	reply_counts(&w, 0, 1, ar);
	return reply_finish(&w, outlen, e);
}

int
dns_build_answer(const struct dns_query *q, const struct dns_local_rr *rrs,
    size_t n, uint8_t *out, size_t cap, size_t *outlen, struct err *e)
{
	struct wbuf w = {out, cap, 0, false};

	if (!q->have_question) {
		err_set(e, "answer needs a question");
		return -1;
	}
	if (n > DNS_MSG_RR_MAX) {
		err_set(e, "too many records");
		return -1;
	}
	reply_start(&w, q, DNS_RCODE_NOERROR, 0);
	for (size_t i = 0; i < n; i++) {
		if (rrs[i].rdlen > sizeof(rrs[i].rdata)) {
			err_set(e, "rdata length %u", rrs[i].rdlen);
			return -1;
		}
		wb_u16(&w, DNS_QNAME_PTR);
		wb_u16(&w, rrs[i].type);
		wb_u16(&w, q->question.qclass);
		wb_u32(&w, rrs[i].ttl);
		wb_u16(&w, rrs[i].rdlen);
		wb_put(&w, rrs[i].rdata, rrs[i].rdlen);
	}
	unsigned ar = reply_opt(&w, q, DNS_RCODE_NOERROR, NULL);
	reply_counts(&w, (unsigned)n, 0, ar);
	return reply_finish(&w, outlen, e);
}

int
dns_build_localhost(const struct dns_query *q, uint32_t ttl, uint8_t *out,
    size_t cap, size_t *outlen, struct err *e)
{
	static const uint8_t v4[4] = {127, 0, 0, 1};
	static const uint8_t v6[16] = {[15] = 1};
	struct dns_local_rr rr[2];
	size_t n = 0;

	if (!q->have_question || !dns_name_is_localhost(&q->question.name)) {
		err_set(e, "not a localhost name");
		return -1;
	}
	uint16_t t = q->question.qtype;
	if (q->question.qclass == DNS_CLASS_IN) {
		if (t == DNS_TYPE_A || t == DNS_TYPE_ANY) {
			memset(&rr[n], 0, sizeof(rr[n]));
			rr[n].type = DNS_TYPE_A;
			rr[n].ttl = ttl;
			memcpy(rr[n].rdata, v4, sizeof(v4));
			rr[n++].rdlen = sizeof(v4);
		}
		if (t == DNS_TYPE_AAAA || t == DNS_TYPE_ANY) {
			memset(&rr[n], 0, sizeof(rr[n]));
			rr[n].type = DNS_TYPE_AAAA;
			rr[n].ttl = ttl;
			memcpy(rr[n].rdata, v6, sizeof(v6));
			rr[n++].rdlen = sizeof(v6);
		}
	}
	if (n == 0)
		return dns_build_negative(
		    q, DNS_RCODE_NOERROR, ttl, NULL, out, cap, outlen, e);
	return dns_build_answer(q, rr, n, out, cap, outlen, e);
}

/* ---- encoding with compression ---- */

struct ctab_ent {
	const uint8_t *wire; /* suffix bytes, stable while encoding */
	uint16_t len;
	uint16_t off;
};

struct enc {
	struct wbuf w;
	size_t n;
	struct ctab_ent ent[DNS_COMPRESS_MAX];
};

static void
put_name(struct enc *c, const uint8_t *wire, size_t len, bool compress)
{
	size_t pos = 0, match = len, moff = 0;

	/* Longest previously written suffix that matches exactly. */
	if (compress) {
		for (pos = 0; pos < len && wire[pos] != 0;
		     pos += 1 + (size_t)wire[pos]) {
			for (size_t i = 0; i < c->n; i++) {
				if (c->ent[i].len == len - pos &&
				    memcmp(c->ent[i].wire, wire + pos,
				        len - pos) == 0) {
					match = pos;
					moff = c->ent[i].off;
					break;
				}
			}
			if (match != len)
				break;
		}
	}
	/* Labels before the match are written in place and remembered. */
	for (pos = 0; pos < match && wire[pos] != 0;
	     pos += 1 + (size_t)wire[pos]) {
		if (c->n < DNS_COMPRESS_MAX && c->w.len <= DNS_PTR_OFF_MAX &&
		    !c->w.overflow) {
			c->ent[c->n].wire = wire + pos;
			c->ent[c->n].len = (uint16_t)(len - pos);
			c->ent[c->n].off = (uint16_t)c->w.len;
			c->n++;
		}
		wb_put(&c->w, wire + pos, 1 + (size_t)wire[pos]);
	}
	if (match != len)
		wb_u16(&c->w, (uint16_t)(0xc000u | moff));
	else
		wb_put(&c->w, "", 1);
}

/* Writes one decoded rdata, compressing names where allowed. */
static void
put_rdata(struct enc *c, const struct dns_rr *rr, const uint8_t *rd)
{
	size_t o = 0, nl;
	bool comp = dns_msg_rd_compressible(rr->type);
	enum rd_kind k = dns_msg_rd_kind(rr->type);

	if (!comp) {
		wb_put(&c->w, rd, rr->rdlen);
		return;
	}
	/* The arena holds valid uncompressed names: parse() checked them. */
	if (k == RD_U16_NAME) {
		wb_put(&c->w, rd, 2);
		o = 2;
	}
	nl = dns_name_wire_len(rd + o, rr->rdlen - o);
	put_name(c, rd + o, nl, true);
	o += nl;
	if (k == RD_2NAMES || k == RD_SOA) {
		nl = dns_name_wire_len(rd + o, rr->rdlen - o);
		put_name(c, rd + o, nl, true);
		o += nl;
	}
	wb_put(&c->w, rd + o, rr->rdlen - o);
}

int
dns_msg_encode(const struct dns_msg *m, uint8_t *out, size_t cap,
    size_t *outlen, struct err *e)
{
	/* On the stack (4 KiB): a malloc and free per answer were ~500
	 * instructions of a cached answer. */
	struct enc enc, *c = &enc;
	unsigned counts[3] = {0, 0, 0};

	if (m->rcode > 0xf && !m->edns.present) {
		err_set(e, "extended rcode %u without OPT", m->rcode);
		return -1;
	}
	if (cap > DNS_MSG_MAX)
		cap = DNS_MSG_MAX;
	c->w = (struct wbuf){out, cap, 0, false};
	c->n = 0;
	wb_u16(&c->w, m->id);
	wb_u16(&c->w, (uint16_t)((m->flags & ~0xfu) | (m->rcode & 0xf)));
	wb_u16(&c->w, m->have_question ? 1 : 0);
	wb_u16(&c->w, 0);
	wb_u16(&c->w, 0);
	wb_u16(&c->w, 0);
	if (m->have_question) {
		put_name(c, m->question.name.wire, m->question.name.len, true);
		wb_u16(&c->w, m->question.qtype);
		wb_u16(&c->w, m->question.qclass);
	}
	for (unsigned s = 0; s < 3; s++) {
		for (size_t i = 0; i < m->nrr; i++) {
			const struct dns_rr *rr = &m->rr[i];
			if (rr->section != s)
				continue;
			put_name(
			    c, m->arena + rr->owner_off, rr->owner_len, true);
			wb_u16(&c->w, rr->type);
			wb_u16(&c->w, rr->rclass);
			wb_u32(&c->w, rr->ttl);
			size_t lenpos = c->w.len;
			wb_u16(&c->w, 0);
			put_rdata(c, rr, m->arena + rr->rdata_off);
			if (c->w.overflow)
				break;
			wr16(out + lenpos, (uint16_t)(c->w.len - lenpos - 2));
			counts[s]++;
		}
	}
	if (m->edns.present) {
		wb_put(&c->w, "", 1);
		wb_u16(&c->w, DNS_TYPE_OPT);
		wb_u16(&c->w, m->edns.udp_size);
		wb_u32(&c->w,
		    ((uint32_t)(m->rcode >> 4) << 24) |
		        ((uint32_t)m->edns.version << 16) | m->edns.flags);
		wb_u16(&c->w, 0);
		counts[2]++;
	}
	bool overflow = c->w.overflow;
	size_t n = c->w.len;
	if (overflow || counts[0] > UINT16_MAX || counts[1] > UINT16_MAX ||
	    counts[2] > UINT16_MAX) {
		err_set(e, "encoded message does not fit %zu bytes", cap);
		return -1;
	}
	wr16(out + 6, (uint16_t)counts[0]);
	wr16(out + 8, (uint16_t)counts[1]);
	wr16(out + 10, (uint16_t)counts[2]);
	*outlen = n;
	return 0;
}
