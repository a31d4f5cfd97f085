/*
 * Fuzz target for egressd/proto/dns_rewrite.c. Input: one option byte, then an
 * upstream answer. The client query is derived from the answer's question
 * (case flipped by the option byte, EDNS on or off), policy callbacks are
 * deterministic functions of their input. Invariants (abort on violation):
 *  - OK output parses, carries the client's ID and exact question bytes,
 *    and its answer count is the reported one;
 *  - every A/AAAA left anywhere in it is class IN and passes the address
 *    callback, every ipv4hint/ipv6hint too, and no ech key survives
 *    DNS_REWRITE_STRIP_ECH;
 *  - it never has more records than the input and is never larger than
 *    the input's uncompressed size (plus our OPT);
 *  - reported addresses pass the address callback; DENIED names one name
 *    the name callback denies.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/dns_rewrite.h"
#include "fuzz/fuzz_check.h"

#define OPT_EDNS 0x01u
#define OPT_DO 0x02u
#define OPT_STRIP_ECH 0x04u
#define OPT_DROP_ADD 0x08u
#define OPT_DENY_SOME 0x10u
#define OPT_CLAMP 0x20u
#define OPT_ALLOW_ALL 0x40u
#define OPT_CASE 0x80u
/* The fixed size of the OPT record egressd writes. */
#define FUZZ_OPT_LEN 11

struct fuzz_ctx {
	unsigned opt;
};

static bool
fz_addr(void *arg, int family, const uint8_t *a)
{
	const struct fuzz_ctx *c = arg;

	if (c->opt & OPT_ALLOW_ALL)
		return true;
	/* Internal, plus a deterministic slice of public space, is denied. */
	if (dns_addr_is_internal(family, a))
		return false;
	return (a[family == 4 ? 3 : 15] % 5) != 0;
}

static bool
fz_name(void *arg, const char *name)
{
	const struct fuzz_ctx *c = arg;
	unsigned h = 0;

	if ((c->opt & OPT_DENY_SOME) == 0)
		return true;
	for (const char *p = name; *p != '\0'; p++)
		h = h * 31 + (unsigned char)*p;
	return h % 3 != 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_ctx c;
	struct dns_msg *scratch = NULL, *in = NULL, *outm = NULL;
	struct dns_rewrite_report *rep = NULL;
	uint8_t *out = NULL;
	struct dns_query q;
	size_t outlen = 0;

	if (size < 1 || size - 1 > DNS_MSG_MAX)
		return 0;
	c.opt = data[0];
	data++;
	size--;
	scratch = dns_msg_new();
	in = dns_msg_new();
	outm = dns_msg_new();
	rep = malloc(sizeof(*rep));
	out = malloc(DNS_MSG_MAX);
	if (scratch == NULL || in == NULL || outm == NULL || rep == NULL ||
	    out == NULL)
		goto out_free;

	/* The client's query: the answer's question, maybe recased. */
	if (dns_msg_parse(in, data, size, NULL) == -1 || !in->have_question)
		goto out_free;
	memset(&q, 0, sizeof(q));
	q.id = (uint16_t)(in->id ^ 0x5a5a);
	q.flags = DNS_FLAG_RD;
	q.have_question = true;
	q.question = in->question;
	if (c.opt & OPT_CASE) {
		for (size_t i = 0; i < q.question.name.len; i++) {
			uint8_t ch = q.question.name.wire[i];
			if ((ch >= 'a' && ch <= 'z') ||
			    (ch >= 'A' && ch <= 'Z'))
				q.question.name.wire[i] = (uint8_t)(ch ^ 0x20);
		}
	}
	if (c.opt & OPT_EDNS) {
		q.edns.present = true;
		q.edns.udp_size = 1232;
		q.edns.flags = (c.opt & OPT_DO) ? DNS_EDNS_FLAG_DO : 0;
	}

	struct dns_rewrite_opts o = {
	    .client = &q,
	    .addr_allowed = fz_addr,
	    .name_allowed = fz_name,
	    .arg = &c,
	    .ttl_min = (c.opt & OPT_CLAMP) ? 30 : 0,
	    .ttl_max = (c.opt & OPT_CLAMP) ? 300 : 0,
	    .flags = ((c.opt & OPT_STRIP_ECH) ? DNS_REWRITE_STRIP_ECH : 0) |
	        ((c.opt & OPT_DROP_ADD) ? DNS_REWRITE_DROP_ADDITIONAL : 0),
	};
	enum dns_rewrite_result r = dns_rewrite(
	    scratch, data, size, &o, out, DNS_MSG_MAX, &outlen, rep, NULL);
	check(dns_rewrite_result_str(r) != NULL);
	if (r == DNS_REWRITE_DENIED) {
		check(!fz_name(&c, rep->denied_name));
		goto out_free;
	}
	if (r != DNS_REWRITE_OK)
		goto out_free;

	check(dns_msg_parse(outm, out, outlen, NULL) == 0);
	check(outm->id == q.id);
	check(outm->have_question);
	check(outm->question.name.len == q.question.name.len &&
	    memcmp(outm->question.name.wire, q.question.name.wire,
	        q.question.name.len) == 0);
	check(outm->count[DNS_SEC_ANSWER] == rep->ancount);
	check(outm->nrr <= in->nrr);
	check(outm->edns.present == q.edns.present);
	if (o.flags & DNS_REWRITE_DROP_ADDITIONAL)
		check(outm->count[DNS_SEC_ADDITIONAL] == 0);

	/* Never larger than the input written without compression. */
	size_t ulen = DNS_HEADER_LEN + in->question.name.len + 4 + FUZZ_OPT_LEN;
	for (size_t i = 0; i < in->nrr; i++)
		ulen += in->rr[i].owner_len + 10u + in->rr[i].rdlen;
	check(outlen <= ulen);

	for (size_t i = 0; i < outm->nrr; i++) {
		const struct dns_rr *rr = &outm->rr[i];
		const uint8_t *rd = dns_msg_rr_rdata(outm, i);
		/* No address-typed record of another class survives. */
		if (rr->type == DNS_TYPE_A || rr->type == DNS_TYPE_AAAA ||
		    rr->type == DNS_TYPE_HTTPS || rr->type == DNS_TYPE_SVCB)
			check(rr->rclass == DNS_CLASS_IN);
		if (rr->type == DNS_TYPE_A || rr->type == DNS_TYPE_AAAA) {
			check(fz_addr(&c, rr->type == DNS_TYPE_A ? 4 : 6, rd));
			if (o.ttl_min != 0)
				check(rr->ttl >= o.ttl_min &&
				    rr->ttl <= o.ttl_max);
		}
		if (rr->type == DNS_TYPE_HTTPS || rr->type == DNS_TYPE_SVCB) {
			struct dns_svcb s;
			check(dns_svcb_parse(
			          rd, rr->rdlen, rr->type, &s, NULL) == 0);
			for (size_t k = 0; k < s.nv4; k++)
				check(fz_addr(&c, 4, s.v4[k]));
			for (size_t k = 0; k < s.nv6; k++)
				check(fz_addr(&c, 6, s.v6[k]));
			if (o.flags & DNS_REWRITE_STRIP_ECH)
				check(!s.has_ech);
		}
	}
	for (size_t i = 0; i < rep->naddr; i++)
		check(fz_addr(&c, rep->addr[i].family, rep->addr[i].addr));

out_free:
	free(out);
	free(rep);
	dns_msg_free(outm);
	dns_msg_free(in);
	dns_msg_free(scratch);
	return 0;
}
