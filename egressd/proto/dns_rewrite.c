/*
 * dns_rewrite: the answer policy as a pure decode-edit-encode step (see
 * dns_rewrite.h for the order of operations and what the caller decides).
 */
#include <stdint.h>
#include <string.h>

#include "egressd/proto/dns_rewrite.h"

static bool
addr_ok(const struct dns_rewrite_opts *o, int family, const uint8_t *a)
{
	if (o->addr_allowed != NULL)
		return o->addr_allowed(o->arg, family, a);
	return !dns_addr_is_internal(family, a);
}

static bool
name_ok(const struct dns_rewrite_opts *o, const struct dns_name *n, char *pres,
    size_t cap)
{
	if (dns_name_to_pres(n, DNS_PRES_LOWER, pres, cap) == -1)
		return false; /* cannot happen with DNS_NAME_PRES_MAX */
	if (o->name_allowed == NULL)
		return true;
	return o->name_allowed(o->arg, pres);
}

static uint32_t
clamp_ttl(const struct dns_rewrite_opts *o, uint32_t ttl)
{
	if (o->ttl_min != 0 && ttl < o->ttl_min)
		ttl = o->ttl_min;
	if (o->ttl_max != 0 && ttl > o->ttl_max)
		ttl = o->ttl_max;
	return ttl;
}

static void
report_addr(struct dns_rewrite_report *rep, int family, const uint8_t *a,
    uint32_t ttl, uint16_t source, int owner)
{
	if (rep->naddr >= DNS_ANSWER_ADDR_MAX) {
		rep->addr_truncated = true;
		return;
	}
	struct dns_addr *d = &rep->addr[rep->naddr++];
	memset(d, 0, sizeof(*d));
	d->family = family;
	memcpy(d->addr, a, family == 4 ? 4 : 16);
	d->ttl = ttl;
	d->source = source;
	d->owner = (uint8_t)owner;
}

/* An answer RR is related when its owner is on the chain (or, for a
 * DNAME, an ancestor of a chain name). */
static bool
related(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_rr *rr, const struct dns_name *owner)
{
	if (dns_chain_contains(m, c, owner))
		return true;
	if (rr->type != DNS_TYPE_DNAME)
		return false;
	if (dns_name_is_subdomain(&m->question.name, owner))
		return true;
	for (size_t i = 0; i < c->n; i++)
		if (dns_name_is_subdomain(&c->link[i].to, owner))
			return true;
	return false;
}

static bool
addr_bearing(uint16_t type)
{
	return type == DNS_TYPE_A || type == DNS_TYPE_AAAA ||
	    type == DNS_TYPE_HTTPS || type == DNS_TYPE_SVCB;
}

struct svcb_edit {
	unsigned hints_removed, ech_removed;
	bool drop_v4, drop_v6, drop_ech;
};

/* One pass of svcb_rewrite over the params of an HTTPS/SVCB rdata. */
struct svcb_pass {
	const struct dns_rewrite_opts *o;
	struct dns_rewrite_report *rep;
	struct svcb_edit *ed;
	size_t pass; /* 0: find what vanishes; 1: write buf */
	uint8_t *buf;
	size_t w; /* bytes written to buf */
	size_t used, room; /* hints kept, and how many may be */
	uint32_t ttl;
	uint16_t type;
	int learn;
};

/*
 * An ipv4hint/ipv6hint param: the addresses that pass (and fit the
 * report), or no param at all when none does.
 */
static void
svcb_hints(struct svcb_pass *p, uint16_t key, const uint8_t *v, uint16_t vl)
{
	size_t alen = key == DNS_SVC_IPV4HINT ? 4 : 16;
	int fam = key == DNS_SVC_IPV4HINT ? 4 : 6;
	size_t kept = 0, hdr = p->w;

	if (p->pass == 1)
		p->w += 4;
	for (size_t i = 0; i < vl / alen; i++) {
		const uint8_t *a = v + i * alen;
		if (!addr_ok(p->o, fam, a)) {
			if (p->pass == 0)
				p->ed->hints_removed++;
			continue;
		}
		if (p->used == p->room) {
			if (p->pass == 0) {
				p->rep->stripped_excess++;
				p->rep->addr_truncated = true;
			}
			continue;
		}
		p->used++;
		kept++;
		if (p->pass == 1) {
			memcpy(p->buf + p->w, a, alen);
			p->w += alen;
			if (p->learn >= 0)
				report_addr(
				    p->rep, fam, a, p->ttl, p->type, p->learn);
		}
	}
	if (kept == 0) {
		if (p->pass == 0 && fam == 4)
			p->ed->drop_v4 = true;
		if (p->pass == 0 && fam == 6)
			p->ed->drop_v6 = true;
		if (p->pass == 1)
			p->w = hdr;
		return;
	}
	if (p->pass == 1) {
		p->buf[hdr] = (uint8_t)(key >> 8);
		p->buf[hdr + 1] = (uint8_t)key;
		p->buf[hdr + 2] = (uint8_t)((kept * alen) >> 8);
		p->buf[hdr + 3] = (uint8_t)(kept * alen);
	}
}

/*
 * The "mandatory" param (second pass) without the keys that vanished, or
 * no param at all when none is left.
 */
static void
svcb_mandatory(struct svcb_pass *p, const uint8_t *v, uint16_t vl)
{
	const struct svcb_edit *ed = p->ed;
	size_t hdr = p->w, kept = 0;

	p->w += 4;
	for (size_t i = 0; i + 1 < vl; i += 2) {
		uint16_t k = (uint16_t)((v[i] << 8) | v[i + 1]);
		if ((k == DNS_SVC_ECH && ed->drop_ech) ||
		    (k == DNS_SVC_IPV4HINT && ed->drop_v4) ||
		    (k == DNS_SVC_IPV6HINT && ed->drop_v6))
			continue;
		p->buf[p->w++] = v[i];
		p->buf[p->w++] = v[i + 1];
		kept++;
	}
	if (kept == 0) {
		p->w = hdr;
		return;
	}
	p->buf[hdr] = 0;
	p->buf[hdr + 1] = DNS_SVC_MANDATORY;
	p->buf[hdr + 2] = (uint8_t)((kept * 2) >> 8);
	p->buf[hdr + 3] = (uint8_t)(kept * 2);
}

/*
 * Rewrites an HTTPS/SVCB rdata into buf: hint addresses filtered, empty
 * hint keys and (optionally) ech removed, "mandatory" updated. Reports
 * kept hints when learn >= 0 (the chain index of the owner). Returns the new length or -1 if the
 * rdata is malformed.
 */
static int
svcb_rewrite(const struct dns_rewrite_opts *o, const uint8_t *rd, size_t rdlen,
    uint32_t ttl, uint16_t type, int learn, struct dns_rewrite_report *rep,
    uint8_t *buf, struct err *e)
{
	struct dns_svcb s;
	struct svcb_edit ed = {0, 0, false, false, false};
	struct svcb_pass p = {.o = o,
	    .rep = rep,
	    .ed = &ed,
	    .buf = buf,
	    .ttl = ttl,
	    .type = type,
	    .learn = learn};
	size_t o2 = 2;

	/* Hints beyond the report's room are removed, like A/AAAA. */
	p.room = learn >= 0 ? DNS_ANSWER_ADDR_MAX - rep->naddr : SIZE_MAX;
	if (dns_svcb_parse(rd, rdlen, type, &s, e) == -1)
		return -1;
	/* First pass: which keys vanish, so "mandatory" can be fixed. */
	for (p.pass = 0; p.pass < 2; p.pass++) {
		p.used = 0;
		o2 = 2 + s.target.len;
		if (p.pass == 1) {
			memcpy(buf, rd, o2);
			p.w = o2;
		}
		while (o2 < rdlen) {
			uint16_t key = (uint16_t)((rd[o2] << 8) | rd[o2 + 1]);
			uint16_t vl =
			    (uint16_t)((rd[o2 + 2] << 8) | rd[o2 + 3]);
			const uint8_t *v = rd + o2 + 4;
			o2 += 4 + (size_t)vl;
			if (key == DNS_SVC_ECH &&
			    (o->flags & DNS_REWRITE_STRIP_ECH)) {
				if (p.pass == 0) {
					ed.drop_ech = true;
					ed.ech_removed++;
				}
				continue;
			}
			if (key == DNS_SVC_IPV4HINT ||
			    key == DNS_SVC_IPV6HINT) {
				svcb_hints(&p, key, v, vl);
				continue;
			}
			if (p.pass == 0)
				continue;
			if (key == DNS_SVC_MANDATORY) {
				svcb_mandatory(&p, v, vl);
				continue;
			}
			memcpy(buf + p.w, rd + o2 - 4 - vl, 4 + (size_t)vl);
			p.w += 4 + (size_t)vl;
		}
	}
	rep->stripped_hints += ed.hints_removed;
	rep->stripped_ech += ed.ech_removed;
	return (int)p.w;
}

const char *
dns_rewrite_result_str(enum dns_rewrite_result r)
{
	switch (r) {
	case DNS_REWRITE_OK:
		return "ok";
	case DNS_REWRITE_DENIED:
		return "denied";
	case DNS_REWRITE_ERROR:
		return "error";
	}
	return "unknown";
}

/*
 * The HTTPS/SVCB record rr (the i-th of m, ci its owner's chain index):
 * its TargetName checked, its TTL clamped and its rdata rewritten to the
 * arena's tail (svcb_rewrite). 1: keep rr; 0: drop it; -1: malformed.
 */
static int
rewrite_svcb_rr(struct dns_msg *m, size_t i, struct dns_rr *rr, int ci,
    const struct dns_rewrite_opts *o, struct dns_rewrite_report *rep,
    struct err *e)
{
	struct dns_svcb s;
	char pres[DNS_NAME_PRES_MAX];
	const uint8_t *rd = dns_msg_rr_rdata(m, i);
	uint8_t *buf;

	if (dns_svcb_parse(rd, rr->rdlen, rr->type, &s, e) == -1)
		return -1;
	/* A TargetName outside the chain must pass policy. */
	if (s.target.len > 1 &&
	    !dns_chain_contains(m, &rep->chain, &s.target) &&
	    !name_ok(o, &s.target, pres, sizeof(pres))) {
		rep->stripped_svcb++;
		return 0;
	}
	rr->ttl = clamp_ttl(o, rr->ttl);
	/* The rewritten rdata is never longer: it goes to the
	 * arena's tail and the record points at it. */
	if (DNS_MSG_ARENA_MAX - m->arena_used < rr->rdlen) {
		err_set(e, "no room to rewrite SVCB");
		return -1;
	}
	buf = m->arena + m->arena_used;
	int nl = svcb_rewrite(o, rd, rr->rdlen, rr->ttl, rr->type,
	    rr->section == DNS_SEC_ANSWER ? ci : -1, rep, buf, e);
	if (nl < 0)
		return -1;
	rr->rdata_off = (uint32_t)m->arena_used;
	rr->rdlen = (uint16_t)nl;
	m->arena_used += (size_t)nl;
	return 1;
}

/* Applies steps 3-6 to m in place; -1 on malformed rdata. */
static int
rewrite_rrs(struct dns_msg *m, const struct dns_rewrite_opts *o,
    struct dns_rewrite_report *rep, struct err *e)
{
	size_t w = 0;
	const struct dns_name *cq = &o->client->question.name;

	for (size_t i = 0; i < m->nrr; i++) {
		struct dns_rr rr = m->rr[i];
		struct dns_name owner;
		int ci;

		rr.ttl = rr.ttl > o->age ? rr.ttl - o->age : 0;
		dns_msg_rr_owner(m, i, &owner);
		ci = dns_chain_index(m, &rep->chain, &owner);
		if (rr.section == DNS_SEC_ADDITIONAL &&
		    (o->flags & DNS_REWRITE_DROP_ADDITIONAL))
			continue;
		if (rr.section == DNS_SEC_ANSWER &&
		    (rr.rclass != m->question.qclass ||
		        !related(m, &rep->chain, &rr, &owner))) {
			rep->stripped_unrelated++;
			continue;
		}
		/* Some stub resolvers (musl) take any A/AAAA-typed record of
		 * the answer section as an address whatever its class: only
		 * class IN ones are filtered below, so drop the others. */
		if (rr.rclass != DNS_CLASS_IN && addr_bearing(rr.type)) {
			rep->stripped_unrelated++;
			continue;
		}
		/* The client's spelling of the qname on owners too. */
		if (dns_name_equal(&owner, cq))
			memcpy(m->arena + rr.owner_off, cq->wire, cq->len);
		if (rr.rclass == DNS_CLASS_IN &&
		    (rr.type == DNS_TYPE_A || rr.type == DNS_TYPE_AAAA)) {
			int fam = rr.type == DNS_TYPE_A ? 4 : 6;
			const uint8_t *a = dns_msg_rr_rdata(m, i);
			if (!addr_ok(o, fam, a)) {
				rep->stripped_addrs++;
				continue;
			}
			rr.ttl = clamp_ttl(o, rr.ttl);
			if (rr.section == DNS_SEC_ANSWER && ci >= 0) {
				/* Only what is reported gets learned: never
				 * release an address beyond the report. */
				if (rep->naddr >= DNS_ANSWER_ADDR_MAX) {
					rep->addr_truncated = true;
					rep->stripped_excess++;
					continue;
				}
				report_addr(rep, fam, a, rr.ttl, rr.type, ci);
			}
		} else if (rr.rclass == DNS_CLASS_IN &&
		    (rr.type == DNS_TYPE_HTTPS || rr.type == DNS_TYPE_SVCB)) {
			int r = rewrite_svcb_rr(m, i, &rr, ci, o, rep, e);
			if (r < 0)
				return -1;
			if (r == 0)
				continue;
		}
		m->rr[w++] = rr;
	}
	m->nrr = w;
	memset(m->count, 0, sizeof(m->count));
	for (size_t i = 0; i < m->nrr; i++)
		m->count[m->rr[i].section]++;
	return 0;
}

enum dns_rewrite_result
dns_rewrite(struct dns_msg *m, const uint8_t *msg, size_t len,
    const struct dns_rewrite_opts *o, uint8_t *out, size_t cap, size_t *outlen,
    struct dns_rewrite_report *rep, struct err *e)
{
	const struct dns_query *cl = o->client;
	char pres[DNS_NAME_PRES_MAX];

	rep->rcode = 0;
	rep->chain.n = 0;
	rep->denied_name[0] = '\0';
	rep->naddr = 0;
	rep->addr_truncated = false;
	rep->stripped_addrs = rep->stripped_hints = rep->stripped_ech = 0;
	rep->stripped_svcb = rep->stripped_unrelated = 0;
	rep->stripped_excess = 0;
	rep->ancount = 0;
	rep->have_ttl = false;
	rep->ttl = 0;
	if (cl == NULL || !cl->have_question) {
		err_set(e, "rewrite needs the client's question");
		return DNS_REWRITE_ERROR;
	}
	if (dns_msg_parse(m, msg, len, e) == -1) {
		err_prefix(e, "upstream answer");
		return DNS_REWRITE_ERROR;
	}
	if ((m->flags & DNS_FLAG_QR) == 0) {
		err_set(e, "upstream answer has QR=0");
		return DNS_REWRITE_ERROR;
	}
	if (!dns_msg_question_matches(m, &cl->question)) {
		err_set(e, "upstream answer is for another question");
		return DNS_REWRITE_ERROR;
	}
	rep->rcode = m->rcode;
	if (dns_msg_chain(m, &rep->chain, e) == -1)
		return DNS_REWRITE_ERROR;
	for (size_t i = 0; i < rep->chain.n; i++) {
		if (!name_ok(o, &rep->chain.link[i].to, pres, sizeof(pres))) {
			memcpy(rep->denied_name, pres, sizeof(pres));
			return DNS_REWRITE_DENIED;
		}
	}
	/* The client's question spelling replaces upstream's. */
	m->question.name = cl->question.name;
	if (rewrite_rrs(m, o, rep, e) == -1)
		return DNS_REWRITE_ERROR;

	bool removed = rep->stripped_addrs || rep->stripped_hints ||
	    rep->stripped_excess || rep->stripped_ech || rep->stripped_svcb ||
	    rep->stripped_unrelated;
	uint16_t up = m->flags;
	uint16_t keep = m->flags & (DNS_FLAG_QR | DNS_FLAG_TC | 0x7800u);
	m->flags =
	    keep | DNS_FLAG_RA | (cl->flags & (DNS_FLAG_RD | DNS_FLAG_CD));
	bool ad_ok = (cl->flags & DNS_FLAG_AD) ||
	    (cl->edns.present && (cl->edns.flags & DNS_EDNS_FLAG_DO));
	if ((up & DNS_FLAG_AD) && !removed && ad_ok)
		m->flags |= DNS_FLAG_AD;
	m->id = cl->id;
	if (cl->edns.present) {
		m->edns.present = true;
		m->edns.udp_size = DNS_EDNS_UDP_SIZE;
		m->edns.version = 0;
		m->edns.flags = cl->edns.flags & DNS_EDNS_FLAG_DO;
	} else {
		m->edns.present = false;
		/* An extended rcode cannot reach a client without EDNS. */
		if (m->rcode > 0xf)
			m->rcode = DNS_RCODE_SERVFAIL;
	}
	m->edns.ext_rcode = (uint8_t)(m->rcode >> 4);
	if (dns_msg_encode(m, out, cap, outlen, e) == -1)
		return DNS_REWRITE_ERROR;
	rep->ancount = (unsigned)m->count[DNS_SEC_ANSWER];
	rep->have_ttl = dns_msg_min_ttl(m, &rep->ttl);
	return DNS_REWRITE_OK;
}
