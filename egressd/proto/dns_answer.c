/*
 * dns_answer: reading a decoded answer, pure (see dns_wire.h): the
 * CNAME/DNAME chain from the question, HTTPS/SVCB parameters, the
 * addresses and TTLs an answer carries.
 */
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/dns_wire.h"
#include "egressd/proto/dns_wire_int.h"

/* ---- chains ---- */

int
dns_chain_index(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *n)
{
	if (dns_name_equal(&m->question.name, n))
		return 0;
	for (size_t i = 0; i < c->n; i++)
		if (dns_name_equal(&c->link[i].to, n))
			return (int)i + 1;
	return -1;
}

static bool
chain_seen(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *n)
{
	return dns_chain_index(m, c, n) >= 0;
}

bool
dns_chain_contains(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *name)
{
	return chain_seen(m, c, name);
}

/*
 * Replaces the suffix `owner` of `cur` by `target`: the DNAME
 * substitution of RFC 6672. -1 if the result is too long.
 */
static int
dname_subst(const struct dns_name *cur, const struct dns_name *owner,
    const struct dns_name *target, struct dns_name *out)
{
	size_t at;

	if (!dns_name_suffix_at(cur, owner->len, &at))
		return -1;
	if (at + target->len > DNS_NAME_WIRE_MAX)
		return -1;
	memcpy(out->wire, cur->wire, at);
	memcpy(out->wire + at, target->wire, target->len);
	dns_name_set(out, out->wire, at + target->len);
	return 0;
}

int
dns_msg_chain(const struct dns_msg *m, struct dns_chain *c, struct err *e)
{
	struct dns_name cur;

	c->n = 0;
	if (!m->have_question) {
		err_set(e, "no question");
		return -1;
	}
	cur = m->question.name;
	for (;;) {
		struct dns_name next = {.len = 0}, owner, tgt;
		size_t ncname = 0;
		bool have_dname = false;
		uint16_t type = 0;

		for (size_t i = 0; i < m->nrr; i++) {
			const struct dns_rr *rr = &m->rr[i];
			if (rr->section != DNS_SEC_ANSWER)
				continue;
			if (rr->type != DNS_TYPE_CNAME &&
			    rr->type != DNS_TYPE_DNAME)
				continue;
			dns_msg_rr_owner(m, i, &owner);
			dns_name_set(&tgt, dns_msg_rr_rdata(m, i), rr->rdlen);
			if (rr->type == DNS_TYPE_CNAME &&
			    dns_name_equal(&owner, &cur)) {
				/* Two aliases for one name: which would the
				 * client follow? Refuse to guess. */
				if (ncname > 0 &&
				    !dns_name_equal(&next, &tgt)) {
					err_set(e, "conflicting CNAME records");
					return -1;
				}
				ncname++;
				next = tgt;
				type = DNS_TYPE_CNAME;
			} else if (rr->type == DNS_TYPE_DNAME && ncname == 0 &&
			    !have_dname && !dns_name_equal(&owner, &cur) &&
			    dns_name_is_subdomain(&cur, &owner)) {
				if (dname_subst(&cur, &owner, &tgt, &next) ==
				    -1) {
					err_set(e, "DNAME result too long");
					return -1;
				}
				have_dname = true;
				type = DNS_TYPE_DNAME;
			}
		}
		if (ncname == 0 && !have_dname)
			return 0;
		if (chain_seen(m, c, &next)) {
			err_set(e, "alias loop");
			return -1;
		}
		if (c->n >= DNS_CHAIN_MAX) {
			err_set(e, "alias chain longer than %d", DNS_CHAIN_MAX);
			return -1;
		}
		c->link[c->n].type = type;
		c->link[c->n].from = cur;
		c->link[c->n].to = next;
		c->n++;
		cur = next;
	}
}

/* ---- SVCB ---- */

/*
 * An ipv4hint or ipv6hint value: vl bytes of w-byte addresses appended to
 * dst (the bytes of DNS_SVCB_HINT_MAX rows of w, *n used); the rest past the cap
 * sets hints_truncated. -1 when vl is no whole, non-zero number of them.
 */
static int
svc_hints(const uint8_t *v, uint16_t vl, size_t w, uint8_t *dst, size_t *n,
    struct dns_svcb *s)
{
	if (vl == 0 || vl % w != 0)
		return -1;
	for (size_t i = 0; i < vl / w; i++) {
		if (*n >= DNS_SVCB_HINT_MAX) {
			s->hints_truncated = true;
			break;
		}
		memcpy(dst + w * (*n)++, v + w * i, w);
	}
	return 0;
}

int
dns_svcb_parse(const uint8_t *rd, size_t rdlen, uint16_t type,
    struct dns_svcb *s, struct err *e)
{
	size_t o = 2, nl;
	int last = -1;

	memset(s, 0, sizeof(*s));
	s->type = type;
	if (rdlen < 3) {
		err_set(e, "SVCB rdata too short");
		return -1;
	}
	s->priority = rd16(rd);
	if ((nl = dns_name_wire_len(rd + o, rdlen - o)) == 0) {
		err_set(e, "SVCB target is not an uncompressed name");
		return -1;
	}
	dns_name_set(&s->target, rd + o, nl);
	o += nl;
	while (o < rdlen) {
		if (rdlen - o < 4) {
			err_set(e, "SVCB param truncated");
			return -1;
		}
		uint16_t key = rd16(rd + o), vl = rd16(rd + o + 2);
		o += 4;
		if ((int)key <= last || rdlen - o < vl) {
			err_set(e, "SVCB params out of order or truncated");
			return -1;
		}
		last = key;
		const uint8_t *v = rd + o;
		switch (key) {
		case DNS_SVC_MANDATORY:
			if (vl == 0 || vl % 2 != 0)
				goto bad;
			break;
		case DNS_SVC_IPV4HINT:
			if (svc_hints(v, vl, 4, (uint8_t *)s->v4, &s->nv4, s) ==
			    -1)
				goto bad;
			break;
		case DNS_SVC_IPV6HINT:
			if (svc_hints(
			        v, vl, 16, (uint8_t *)s->v6, &s->nv6, s) == -1)
				goto bad;
			break;
		case DNS_SVC_ECH:
			s->has_ech = true;
			break;
		case DNS_SVC_PORT:
			if (vl != 2)
				goto bad;
			break;
		}
		o += vl;
	}
	return 0;
bad:
	err_set(e, "SVCB param %d has a bad length", last);
	return -1;
}

/* ---- answers and TTLs ---- */

bool
dns_msg_min_ttl(const struct dns_msg *m, uint32_t *ttl)
{
	bool have = false, positive = false;
	uint32_t min = UINT32_MAX, soa = UINT32_MAX;

	for (size_t i = 0; i < m->nrr; i++) {
		const struct dns_rr *rr = &m->rr[i];
		if (rr->section == DNS_SEC_ANSWER) {
			if (rr->ttl < min)
				min = rr->ttl;
			have = true;
			if (m->have_question &&
			    (rr->type == m->question.qtype ||
			        m->question.qtype == DNS_TYPE_ANY))
				positive = true;
		} else if (rr->section == DNS_SEC_AUTHORITY &&
		    rr->type == DNS_TYPE_SOA &&
		    rr->rdlen >= DNS_SOA_FIXED_LEN) {
			uint32_t smin =
			    rd32(dns_msg_rr_rdata(m, i) + rr->rdlen - 4);
			uint32_t v = rr->ttl < smin ? rr->ttl : smin;
			if (v < soa)
				soa = v;
		}
	}
	bool negative = (m->rcode == DNS_RCODE_NXDOMAIN) ||
	    (m->rcode == DNS_RCODE_NOERROR && !positive);
	if (negative && soa != UINT32_MAX) {
		if (soa < min)
			min = soa;
		have = true;
	}
	if (have)
		*ttl = min;
	return have;
}

int
dns_answer_info(
    const struct dns_msg *m, struct dns_answer_info *ai, struct err *e)
{
	ai->rcode = m->rcode;
	ai->tc = (m->flags & DNS_FLAG_TC) != 0;
	ai->naddr = 0;
	ai->nsvcb = 0;
	ai->addr_truncated = false;
	ai->svcb_truncated = false;
	if (dns_msg_chain(m, &ai->chain, e) == -1)
		return -1;
	for (size_t i = 0; i < m->nrr; i++) {
		const struct dns_rr *rr = &m->rr[i];
		struct dns_name owner;
		if (rr->section != DNS_SEC_ANSWER || rr->rclass != DNS_CLASS_IN)
			continue;
		if (rr->type != DNS_TYPE_A && rr->type != DNS_TYPE_AAAA &&
		    rr->type != DNS_TYPE_HTTPS && rr->type != DNS_TYPE_SVCB)
			continue;
		dns_msg_rr_owner(m, i, &owner);
		int ci = dns_chain_index(m, &ai->chain, &owner);
		if (ci < 0)
			continue;
		if (rr->type == DNS_TYPE_A || rr->type == DNS_TYPE_AAAA) {
			if (ai->naddr >= DNS_ANSWER_ADDR_MAX) {
				ai->addr_truncated = true;
				continue;
			}
			struct dns_addr *a = &ai->addr[ai->naddr++];
			memset(a, 0, sizeof(*a));
			a->family = rr->type == DNS_TYPE_A ? 4 : 6;
			memcpy(a->addr, dns_msg_rr_rdata(m, i), rr->rdlen);
			a->ttl = rr->ttl;
			a->source = rr->type;
			a->owner = (uint8_t)ci;
			continue;
		}
		if (ai->nsvcb >= DNS_SVCB_MAX) {
			ai->svcb_truncated = true;
			continue;
		}
		if (dns_svcb_parse(dns_msg_rr_rdata(m, i), rr->rdlen, rr->type,
		        &ai->svcb[ai->nsvcb], e) == -1)
			return -1;
		ai->svcb[ai->nsvcb++].ttl = rr->ttl;
	}
	ai->have_ttl = dns_msg_min_ttl(m, &ai->ttl);
	return 0;
}
