/*
 * dns_msg: decoding DNS messages, pure (see dns_wire.h). Raw walking (the
 * rdata layout of each type, the RR iterator over all sections), a client's
 * query, and struct dns_msg: decoded, compared. Every read is bounded by
 * the message length passed in.
 */
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/proto/dns_wire_int.h"

/* Fixed part of an RR after its owner: type, class, ttl, rdlen. */
#define DNS_RR_FIXED_LEN 10
/* Fixed part of a question after its name: type, class. */
#define DNS_Q_FIXED_LEN 4
/* RRSIG/SIG rdata before the signer name (type .. key tag). */
#define DNS_RRSIG_FIXED_LEN 18
/* SVCB/HTTPS rdata before the target name (priority). */
#define DNS_SVCB_FIXED_LEN 2

/* ---- rdata layouts ---- */

enum rd_kind
dns_msg_rd_kind(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_NS:
	case 3: /* MD */
	case 4: /* MF */
	case DNS_TYPE_CNAME:
	case 7: /* MB */
	case 8: /* MG */
	case 9: /* MR */
	case DNS_TYPE_PTR:
	case DNS_TYPE_DNAME:
		return RD_NAME;
	case 14: /* MINFO */
	case 17: /* RP */
		return RD_2NAMES;
	case DNS_TYPE_SOA:
		return RD_SOA;
	case DNS_TYPE_MX:
	case 18: /* AFSDB */
	case 21: /* RT */
	case 36: /* KX */
		return RD_U16_NAME;
	case 26: /* PX */
		return RD_U16_2NAMES;
	case DNS_TYPE_SRV:
		return RD_SRV;
	case 35: /* NAPTR */
		return RD_NAPTR;
	}
	return RD_OPAQUE;
}

/* Names in these types may be compressed on output (RFC 3597 s4). */
bool
dns_msg_rd_compressible(uint16_t type)
{
	switch (type) {
	case DNS_TYPE_NS:
	case 3:
	case 4:
	case DNS_TYPE_CNAME:
	case DNS_TYPE_SOA:
	case 7:
	case 8:
	case 9:
	case DNS_TYPE_PTR:
	case 14:
	case DNS_TYPE_MX:
		return true;
	}
	return false;
}

/* ---- raw message walking ---- */

/* Skips a question at *off; fills q if non-NULL. */
static int
skip_question(const uint8_t *msg, size_t len, size_t *off,
    struct dns_question *q, struct label_map *lm)
{
	struct dns_name tmp;
	struct dns_name *n = q ? &q->name : &tmp;

	if (dns_name_decode_lm(msg, len, off, n, lm) == -1)
		return -1;
	if (len - *off < DNS_Q_FIXED_LEN)
		return -1;
	if (q != NULL) {
		q->qtype = rd16(msg + *off);
		q->qclass = rd16(msg + *off + 2);
	}
	*off += DNS_Q_FIXED_LEN;
	return 0;
}

/*
 * Walks one RR's rdata: checks its layout for the types whose names are
 * expanded (and A/AAAA lengths), marks name labels in lm when given, and
 * appends the decoded rdata to m's arena when m is not NULL.
 */
struct rd_walk {
	struct dns_msg *m; /* NULL: check only */
	struct label_map *lm; /* NULL: no marking */
	const uint8_t *msg;
	size_t len, o, end;
};

static int
arena_put(struct dns_msg *m, const void *p, size_t n, uint32_t *at)
{
	if (DNS_MSG_ARENA_MAX - m->arena_used < n)
		return -1;
	*at = (uint32_t)m->arena_used;
	if (n > 0)
		memcpy(m->arena + m->arena_used, p, n);
	m->arena_used += n;
	return 0;
}

static int
rd_fixed(struct rd_walk *w, size_t n)
{
	uint32_t at;

	if (w->end - w->o < n)
		return -1;
	if (w->m != NULL && arena_put(w->m, w->msg + w->o, n, &at) == -1)
		return -1;
	w->o += n;
	return 0;
}

static int
rd_name(struct rd_walk *w)
{
	struct dns_name n;
	uint32_t at;

	if (w->o >= w->end ||
	    dns_name_decode_lm(w->msg, w->len, &w->o, &n, w->lm) == -1 ||
	    w->o > w->end)
		return -1;
	if (w->m != NULL)
		return arena_put(w->m, n.wire, n.len, &at);
	return 0;
}

/* A <character-string>: length byte and bytes. */
static int
rd_string(struct rd_walk *w)
{
	if (w->o >= w->end)
		return -1;
	return rd_fixed(w, 1 + (size_t)w->msg[w->o]);
}

/* Uncompressed names inside rdata kept opaque: still pointer targets. */
static void
rd_mark_opaque(struct rd_walk *w, uint16_t type)
{
	size_t o = w->o, rdlen = w->end - w->o;

	switch (type) {
	case 24: /* SIG */
	case 46: /* RRSIG: signer after 18 fixed bytes */
		if (rdlen > DNS_RRSIG_FIXED_LEN)
			dns_name_mark_plain(
			    w->msg, o + DNS_RRSIG_FIXED_LEN, w->end, w->lm);
		break;
	case 30: /* NXT */
	case 47: /* NSEC: next owner first */
		dns_name_mark_plain(w->msg, o, w->end, w->lm);
		break;
	case DNS_TYPE_SVCB:
	case DNS_TYPE_HTTPS: /* target after the priority */
		if (rdlen > DNS_SVCB_FIXED_LEN)
			dns_name_mark_plain(
			    w->msg, o + DNS_SVCB_FIXED_LEN, w->end, w->lm);
		break;
	}
}

static int
rd_walk(struct rd_walk *w, const struct rr_pos *rp)
{
	int r = 0;

	if (rp->rclass == DNS_CLASS_IN &&
	    ((rp->type == DNS_TYPE_A && rp->rdlen != 4) ||
	        (rp->type == DNS_TYPE_AAAA && rp->rdlen != 16)))
		return -1;
	switch (dns_msg_rd_kind(rp->type)) {
	case RD_OPAQUE:
		if (w->lm != NULL)
			rd_mark_opaque(w, rp->type);
		r = rd_fixed(w, rp->rdlen);
		break;
	case RD_NAME:
		r = rd_name(w);
		break;
	case RD_2NAMES:
		r = rd_name(w) == 0 ? rd_name(w) : -1;
		break;
	case RD_SOA:
		if (rd_name(w) == -1 || rd_name(w) == -1)
			return -1;
		r = rd_fixed(w, DNS_SOA_FIXED_LEN);
		break;
	case RD_U16_NAME:
		r = rd_fixed(w, 2) == 0 ? rd_name(w) : -1;
		break;
	case RD_U16_2NAMES:
		if (rd_fixed(w, 2) == -1 || rd_name(w) == -1)
			return -1;
		r = rd_name(w);
		break;
	case RD_SRV:
		r = rd_fixed(w, 6) == 0 ? rd_name(w) : -1;
		break;
	case RD_NAPTR:
		if (rd_fixed(w, 4) == -1 || rd_string(w) == -1 ||
		    rd_string(w) == -1 || rd_string(w) == -1)
			return -1;
		r = rd_name(w);
		break;
	}
	return r == -1 || w->o != w->end ? -1 : 0;
}

/* Decodes rdata into the arena, expanding names. */
static int
rd_decode(struct dns_msg *m, const uint8_t *msg, size_t len,
    const struct rr_pos *rp, uint32_t *at, uint16_t *outlen)
{
	struct rd_walk w = {
	    m, NULL, msg, len, rp->rdata_off, rp->rdata_off + rp->rdlen};
	size_t start = m->arena_used;

	*at = (uint32_t)start;
	if (rd_walk(&w, rp) == -1 || m->arena_used - start > UINT16_MAX)
		return -1;
	*outlen = (uint16_t)(m->arena_used - start);
	return 0;
}

/* Parses one RR at *off (owner, fixed part, rdata layout). */
static int
next_rr(const uint8_t *msg, size_t len, size_t *off, struct rr_pos *rp,
    struct label_map *lm)
{
	struct dns_name owner;

	rp->owner_off = *off;
	if (dns_name_decode_lm(msg, len, off, &owner, lm) == -1)
		return -1;
	rp->owner_root = owner.len == 1;
	if (len - *off < DNS_RR_FIXED_LEN)
		return -1;
	rp->fixed_off = *off;
	rp->type = rd16(msg + *off);
	rp->rclass = rd16(msg + *off + 2);
	rp->ttl = rd32(msg + *off + 4);
	rp->rdlen = rd16(msg + *off + 8);
	*off += DNS_RR_FIXED_LEN;
	if (len - *off < rp->rdlen)
		return -1;
	rp->rdata_off = *off;
	*off += rp->rdlen;
	struct rd_walk w = {NULL, lm, msg, len, rp->rdata_off, *off};
	return rd_walk(&w, rp);
}

/* Checks the header and question (at most one; stored in q if given). */
int
dns_msg_iter_init(struct rr_iter *it, const uint8_t *msg, size_t len,
    struct dns_question *q, bool *have_q)
{
	it->msg = msg;
	it->len = len;
	it->off = DNS_HEADER_LEN;
	it->sec = 0;
	/*
	 * Only the bits of offsets inside the message: every mark and every
	 * pointer check is of an offset below len (a name is read only
	 * while pos < len, a pointer must aim backwards). Clearing the
	 * whole 8 KiB map cost a cached answer a quarter of its
	 * instructions (four walks per answer) and 32 KiB of stores.
	 */
	memset(it->lm.bits, 0,
	    len / 8 + 1 < sizeof(it->lm.bits) ? len / 8 + 1
	                                      : sizeof(it->lm.bits));
	if (have_q != NULL)
		*have_q = false;
	if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX)
		return -1;
	uint16_t qd = rd16(msg + 4);
	it->left[0] = rd16(msg + 6);
	it->left[1] = rd16(msg + 8);
	it->left[2] = rd16(msg + 10);
	if (qd > 1)
		return -1;
	if (qd == 1) {
		if (skip_question(msg, len, &it->off, q, &it->lm) == -1)
			return -1;
		if (have_q != NULL)
			*have_q = true;
	}
	return 0;
}

/* 1: *rp is the next RR; 0: done (no trailing bytes); -1: malformed. */
int
dns_msg_iter_next(struct rr_iter *it, struct rr_pos *rp)
{
	while (it->sec < 3 && it->left[it->sec] == 0)
		it->sec++;
	if (it->sec == 3)
		return it->off == it->len ? 0 : -1;
	if (next_rr(it->msg, it->len, &it->off, rp, &it->lm) == -1)
		return -1;
	rp->section = it->sec;
	it->left[it->sec]--;
	return 1;
}

/* ---- client queries ---- */

int
dns_msg_opt_next(const uint8_t *rd, size_t rdlen, size_t *off, uint16_t *code,
    const uint8_t **val, size_t *vlen)
{
	size_t o = *off;

	if (o >= rdlen)
		return 0;
	if (rdlen - o < 4)
		return -1;
	*vlen = rd16(rd + o + 2);
	if (rdlen - o - 4 < *vlen)
		return -1;
	*code = rd16(rd + o);
	*val = rd + o + 4;
	*off = o + 4 + *vlen;
	return 1;
}

static int
parse_opt(const uint8_t *msg, const struct rr_pos *rp, struct dns_edns *ed)
{
	const uint8_t *val;
	size_t off = 0, vlen;
	uint16_t code;
	int r;

	if (ed->present || !rp->owner_root || rp->section != DNS_SEC_ADDITIONAL)
		return -1;
	/* Options must be well-formed even though they are not kept. */
	while ((r = dns_msg_opt_next(msg + rp->rdata_off, rp->rdlen, &off,
	            &code, &val, &vlen)) == 1)
		;
	if (r == -1)
		return -1;
	ed->present = true;
	ed->udp_size = rp->rclass;
	ed->ext_rcode = (uint8_t)(rp->ttl >> 24);
	ed->version = (uint8_t)(rp->ttl >> 16);
	ed->flags = (uint16_t)rp->ttl;
	return 0;
}

/*
 * Finds the OPT record of a query in the records after its question (it
 * is past it); -1 if any section is malformed.
 */
static int
query_edns(struct rr_iter *it, const uint8_t *msg, struct dns_edns *ed)
{
	struct rr_pos rp;
	int r;

	while ((r = dns_msg_iter_next(it, &rp)) == 1)
		if (rp.type == DNS_TYPE_OPT && parse_opt(msg, &rp, ed) == -1)
			return -1;
	return r;
}

enum dns_query_status
dns_query_parse(const uint8_t *msg, size_t len, struct dns_query *q)
{
	struct rr_iter it;

	memset(q, 0, sizeof(*q));
	if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX)
		return DNS_QUERY_DROP;
	q->id = rd16(msg);
	q->flags = rd16(msg + 2);
	q->opcode = (q->flags >> 11) & 0xf;
	if (q->flags & DNS_FLAG_QR)
		return DNS_QUERY_DROP;
	uint16_t qd = rd16(msg + 4);
	/* One walk: the question, then (query_edns) the records after it. */
	if (qd == 1)
		(void)dns_msg_iter_init(
		    &it, msg, len, &q->question, &q->have_question);
	if (q->opcode != DNS_OPCODE_QUERY)
		return DNS_QUERY_NOTIMP;
	if (qd != 1 || !q->have_question) {
		q->have_question = false;
		return DNS_QUERY_FORMERR;
	}
	if (query_edns(&it, msg, &q->edns) == -1) {
		memset(&q->edns, 0, sizeof(q->edns));
		return DNS_QUERY_FORMERR;
	}
	if (q->edns.present && q->edns.version > 0)
		return DNS_QUERY_BADVERS;
	return DNS_QUERY_OK;
}

const char *
dns_query_status_str(enum dns_query_status st)
{
	switch (st) {
	case DNS_QUERY_OK:
		return "ok";
	case DNS_QUERY_DROP:
		return "drop";
	case DNS_QUERY_FORMERR:
		return "formerr";
	case DNS_QUERY_NOTIMP:
		return "notimp";
	case DNS_QUERY_BADVERS:
		return "badvers";
	}
	return "unknown";
}

size_t
dns_query_udp_limit(const struct dns_query *q)
{
	if (!q->edns.present)
		return DNS_UDP_CLASSIC_MAX;
	if (q->edns.udp_size < DNS_EDNS_UDP_MIN)
		return DNS_EDNS_UDP_MIN;
	if (q->edns.udp_size > DNS_EDNS_UDP_SIZE)
		return DNS_EDNS_UDP_SIZE;
	return q->edns.udp_size;
}

/* ---- decoded messages ---- */

struct dns_msg *
dns_msg_new(void)
{
	struct dns_msg *m = malloc(sizeof(*m));

	if (m != NULL) {
		m->nrr = 0;
		m->arena_used = 0;
	}
	return m;
}

void
dns_msg_free(struct dns_msg *m)
{
	free(m);
}

/* Decodes one RR into m (the OPT record into m->edns). */
static int
msg_add_rr(struct dns_msg *m, const uint8_t *msg, size_t len,
    const struct rr_pos *rp, struct err *e)
{
	struct dns_name owner;
	size_t off = rp->owner_off;

	if (rp->type == DNS_TYPE_OPT) {
		if (parse_opt(msg, rp, &m->edns) == -1) {
			err_set(e, "bad or duplicate OPT record");
			return -1;
		}
		return 0;
	}
	if (m->nrr >= DNS_MSG_RR_MAX) {
		err_set(e, "more than %d records", DNS_MSG_RR_MAX);
		return -1;
	}
	struct dns_rr *rr = &m->rr[m->nrr];
	if (dns_name_decode(msg, len, &off, &owner) == -1 ||
	    arena_put(m, owner.wire, owner.len, &rr->owner_off) == -1) {
		err_set(e, "message too large to decode");
		return -1;
	}
	rr->owner_len = owner.len;
	rr->section = (uint8_t)rp->section;
	rr->type = rp->type;
	rr->rclass = rp->rclass;
	rr->ttl = rp->ttl;
	if (rd_decode(m, msg, len, rp, &rr->rdata_off, &rr->rdlen) == -1) {
		err_set(e, "bad rdata of type %u", rp->type);
		return -1;
	}
	m->count[rp->section]++;
	m->nrr++;
	return 0;
}

int
dns_msg_parse(struct dns_msg *m, const uint8_t *msg, size_t len, struct err *e)
{
	struct rr_iter it;
	struct rr_pos rp;
	int r;

	m->nrr = 0;
	m->arena_used = 0;
	m->rcode = 0;
	memset(m->count, 0, sizeof(m->count));
	memset(&m->edns, 0, sizeof(m->edns));
	memset(&m->question, 0, sizeof(m->question));
	m->have_question = false;
	if (len < DNS_HEADER_LEN || len > DNS_MSG_MAX) {
		err_set(e, "message length %zu", len);
		return -1;
	}
	m->id = rd16(msg);
	m->flags = rd16(msg + 2);
	if (dns_msg_iter_init(&it, msg, len, &m->question, &m->have_question) ==
	    -1) {
		err_set(e, "bad question section");
		return -1;
	}
	while ((r = dns_msg_iter_next(&it, &rp)) == 1)
		if (msg_add_rr(m, msg, len, &rp, e) == -1)
			return -1;
	if (r == -1) {
		err_set(e, "malformed record or trailing bytes");
		return -1;
	}
	m->rcode = (m->flags & 0xfu) | ((unsigned)m->edns.ext_rcode << 4);
	return 0;
}

void
dns_msg_rr_owner(const struct dns_msg *m, size_t i, struct dns_name *n)
{
	dns_name_set(n, m->arena + m->rr[i].owner_off, m->rr[i].owner_len);
}

const uint8_t *
dns_msg_rr_rdata(const struct dns_msg *m, size_t i)
{
	return m->arena + m->rr[i].rdata_off;
}

/* ---- comparing ---- */

bool
dns_msg_equal(const struct dns_msg *a, const struct dns_msg *b)
{
	if (a->id != b->id || a->flags != b->flags || a->rcode != b->rcode ||
	    a->have_question != b->have_question || a->nrr != b->nrr)
		return false;
	if (a->have_question &&
	    (a->question.name.len != b->question.name.len ||
	        memcmp(a->question.name.wire, b->question.name.wire,
	            a->question.name.len) != 0 ||
	        a->question.qtype != b->question.qtype ||
	        a->question.qclass != b->question.qclass))
		return false;
	if (a->edns.present != b->edns.present)
		return false;
	if (a->edns.present &&
	    (a->edns.udp_size != b->edns.udp_size ||
	        a->edns.version != b->edns.version ||
	        a->edns.flags != b->edns.flags))
		return false;
	for (size_t i = 0; i < a->nrr; i++) {
		const struct dns_rr *x = &a->rr[i], *y = &b->rr[i];
		if (x->section != y->section || x->type != y->type ||
		    x->rclass != y->rclass || x->ttl != y->ttl ||
		    x->owner_len != y->owner_len || x->rdlen != y->rdlen)
			return false;
		if (memcmp(a->arena + x->owner_off, b->arena + y->owner_off,
		        x->owner_len) != 0 ||
		    memcmp(a->arena + x->rdata_off, b->arena + y->rdata_off,
		        x->rdlen) != 0)
			return false;
	}
	return true;
}

bool
dns_msg_question_matches(const struct dns_msg *m, const struct dns_question *q)
{
	return m->have_question && m->question.qtype == q->qtype &&
	    m->question.qclass == q->qclass &&
	    dns_name_equal(&m->question.name, &q->name);
}
