/*
 * dns_pipeline: one query from a client, any transport. Parse, answer
 * localhost and egressd's own reverse names locally, decide on the name,
 * then the cache or the upstream; the answer goes on to dns_release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/dns/dns_int.h"
#include "egressd/dns/dns_cache.h"
#include "egressd/proto/dns_wire.h"

#define DNS_QTYPE_IXFR 251
#define DNS_QTYPE_AXFR 252
#define DNS_QTYPE_MAILB 253
#define DNS_QTYPE_MAILA 254

/* ---- upstream answers ---- */

static bool
dns_cacheable(const uint8_t *ans, size_t len, uint32_t *ttl)
{
	unsigned rcode;
	bool have = false;

	if (len < DNS_HEADER_LEN)
		return false;
	rcode = ans[3] & 0x0f;
	if (ans[2] & 0x02) /* TC */
		return false;
	if (rcode != DNS_RCODE_NOERROR && rcode != DNS_RCODE_NXDOMAIN)
		return false;
	if (dns_wire_min_ttl(ans, len, &have, ttl) < 0 || !have)
		return false;
	return *ttl > 0;
}

/*
 * The policy in force for qname right now, or NULL after answering the
 * client NXDOMAIN because there is none or it denies the name.
 */
static struct policy *
dns_policy_now(struct dns *d, const char *qname, const struct dns_query *q,
    const struct dns_origin *o)
{
	const struct policy_rule *rule = NULL;
	struct policy *pol;

	pol = d->h.policy_get != NULL ? d->h.policy_get(d->h.arg) : NULL;
	if (pol == NULL) {
		/* No policy in force: fail closed, tell nobody upstream. */
		d->st->dns_denied++;
		dns_log_deny(
		    d, qname, q->question.qtype, "no_policy", NULL, NULL);
		dns_send_denied(d, o, q, DNS_DENY_NO_POLICY, 0);
		return NULL;
	}
	if (policy_match_domain(pol, qname, &rule) != POLICY_ALLOW) {
		d->st->dns_denied++;
		dns_log_deny(d, qname, q->question.qtype, "policy", NULL, rule);
		dns_send_denied(
		    d, o, q, DNS_DENY_POLICY, pol->dns.negative_ttl);
		return NULL;
	}
	return pol;
}

static void
dns_upstream_done_cb(
    void *arg, const uint8_t *ans, size_t len, const char *upstream)
{
	struct dns_req *r = arg;
	struct dns *d;
	struct dns_conn *c;
	uint32_t ttl;

	(void)upstream;
	if (r == NULL || r->magic != DNS_REQ_MAGIC)
		abort();
	d = r->d;
	r->ureq = NULL;
	r->state = DNS_REQ_DONE;
	c = r->from.conn;
	dns_req_unlink(r);
	if (ans == NULL) {
		dns_log_warn(d, "dns.servfail", r->qname, "upstream", NULL);
		dns_send_error(d, &r->from, &r->q, DNS_RCODE_SERVFAIL);
	} else {
		struct dns_cache_memo *memo = NULL;
		struct policy *pol;

		/* The raw answer is the upstream's: cache it whatever we say. */
		if (d->cache != NULL && dns_cacheable(ans, len, &ttl))
			memo = dns_cache_put(d->cache, &r->key, ans, len, ttl);
		/*
		 * Judged by the policy in force now, not the one the query
		 * was sent under: a tightening that came while the answer
		 * was in flight has already pruned the learned sets and
		 * answered its caller, so releasing (and learning) under the
		 * old snapshot would reopen what it closed.
		 */
		pol = dns_policy_now(d, r->qname, &r->q, &r->from);
		/* A malformed answer is not served again from the cache. */
		if (pol != NULL &&
		    !dns_release(
		        d, &r->from, &r->q, r->qname, pol, ans, len, 0, memo) &&
		    memo != NULL)
			dns_cache_drop(d->cache, &r->key);
	}
	dns_req_free(r);
	if (c != NULL)
		dns_conn_after_reply(c);
}

/* ---- the pipeline ---- */

static bool
dns_is_own_addr(const struct dns *d, int family, const uint8_t *a)
{
	static const uint8_t lo4[4] = {127, 0, 0, 1};
	static const uint8_t lo6[16] = {[15] = 1};

	if (family == 4)
		return memcmp(a, lo4, 4) == 0 ||
		    (d->have_own4 && memcmp(a, d->own4, 4) == 0);
	return memcmp(a, lo6, 16) == 0 ||
	    (d->have_own6 && memcmp(a, d->own6, 16) == 0);
}

/* localhost and egressd's own reverse names; true when answered. */
static bool
dns_answer_local(
    struct dns *d, const struct dns_origin *o, const struct dns_query *q)
{
	uint8_t addr[16];
	int family = 0;
	size_t len;

	if (dns_name_is_localhost(&q->question.name)) {
		d->st->dns_local++;
		if (dns_build_localhost(q, DNS_LOCAL_TTL, d->out,
		        sizeof(d->out), &len, NULL) < 0) {
			dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
			return true;
		}
		dns_send(d, o, d->out, len);
		return true;
	}
	if (!dns_ptr_name_parse(&q->question.name, &family, addr) ||
	    !dns_is_own_addr(d, family, addr))
		return false;
	d->st->dns_local++;
	if (q->question.qtype == DNS_TYPE_PTR ||
	    q->question.qtype == DNS_TYPE_ANY) {
		struct dns_local_rr rr;
		struct dns_name n;

		memset(&rr, 0, sizeof(rr));
		if (dns_name_from_pres("localhost", &n, NULL) < 0)
			return false;
		rr.type = DNS_TYPE_PTR;
		rr.ttl = DNS_LOCAL_TTL;
		memcpy(rr.rdata, n.wire, n.len);
		rr.rdlen = n.len;
		if (dns_build_answer(
		        q, &rr, 1, d->out, sizeof(d->out), &len, NULL) < 0) {
			dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
			return true;
		}
		dns_send(d, o, d->out, len);
		return true;
	}
	dns_send_negative(d, o, q, DNS_RCODE_NOERROR, DNS_LOCAL_TTL);
	return true;
}

static void
dns_forward(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const char *qname,
    const struct dns_cache_key *key, struct policy *pol)
{
	uint8_t uq[DNS_UPSTREAM_QUERY_MAX];
	size_t uqlen;
	struct dns_req *r;

	if (d->nreqs >= DNS_INFLIGHT_MAX) {
		d->st->dns_overload++;
		dns_log_warn(d, "dns.overload", qname, "inflight_cap", NULL);
		dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
		return;
	}
	if (dns_upstream_query_build(q->question.name.wire,
	        q->question.name.len, q->question.qtype, q->question.qclass,
	        (q->flags & DNS_FLAG_CD) != 0,
	        q->edns.present && (q->edns.flags & DNS_EDNS_FLAG_DO) != 0, uq,
	        sizeof(uq), &uqlen) < 0) {
		dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
		return;
	}
	r->magic = DNS_REQ_MAGIC;
	r->d = d;
	r->state = DNS_REQ_UPSTREAM;
	r->from = *o;
	r->q = *q;
	r->key = *key;
	(void)snprintf(r->qname, sizeof(r->qname), "%s", qname);
	r->ureq = dns_upstream_send(d->ups, uq, uqlen, o->tcp,
	    pol->dns.timeout_ms, d->timeout_ms, dns_upstream_done_cb, r);
	if (r->ureq == NULL) {
		free(r);
		d->st->dns_query_failed[STATS_DNS_FAIL_NO_UPSTREAMS]++;
		dns_log_warn(d, "dns.servfail", qname, "no_upstream", NULL);
		dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
		return;
	}
	/*
	 * No policy reference: the answer is judged by the policy in force
	 * when it comes back (dns_upstream_done_cb).
	 */
	dns_req_link(d, r);
}

/*
 * The answers to a query that is not served at all: malformed, not
 * implemented, not class IN, a zone transfer or mailbox query. true when
 * answered (or dropped).
 */
static bool
dns_pipeline_refused(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, enum dns_query_status qs)
{
	switch (qs) {
	case DNS_QUERY_FORMERR:
		dns_send_error(d, o, q, DNS_RCODE_FORMERR);
		return true;
	case DNS_QUERY_NOTIMP:
		dns_send_error(d, o, q, DNS_RCODE_NOTIMP);
		return true;
	case DNS_QUERY_BADVERS:
		dns_send_error(d, o, q, DNS_RCODE_BADVERS);
		return true;
	default:
		break;
	}
	if (q->question.qclass != DNS_CLASS_IN) {
		/*
		 * RFC 8914 §4.22 "Not Supported": no policy refused anything,
		 * egressd serves class IN only (CHAOS version.bind included).
		 */
		static const struct dns_ede class_ede = {
		    DNS_EDE_NOT_SUPPORTED, "egressd: only class IN is served"};

		dns_send_error_ede(d, o, q, DNS_RCODE_REFUSED, &class_ede);
		return true;
	}
	switch (q->question.qtype) {
	case DNS_QTYPE_AXFR:
	case DNS_QTYPE_IXFR:
	case DNS_QTYPE_MAILA:
	case DNS_QTYPE_MAILB:
	case DNS_TYPE_OPT:
		dns_send_error(d, o, q, DNS_RCODE_NOTIMP);
		return true;
	default:
		break;
	}
	return false;
}

/* From the cache when it holds key; true when answered. */
static bool
dns_pipeline_from_cache(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const char *qname,
    const struct dns_cache_key *key, struct policy *pol)
{
	const uint8_t *hit;
	size_t hlen = 0;
	uint32_t age = 0;
	struct dns_cache_memo *memo = NULL;

	hit = dns_cache_get(d->cache, key, &hlen, &age, &memo);
	if (hit == NULL) {
		d->st->dns_cache_misses++;
		return false;
	}
	d->st->dns_cache_hits++;
	/*
	 * Policy re-run on every hit: it may have changed. The stored answer
	 * is read, never written: the rewrite ages its TTLs in the output.
	 */
	(void)dns_release(d, o, q, qname, pol, hit, hlen, age, memo);
	return true;
}

void
dns_pipeline_handle(
    struct dns *d, const struct dns_origin *o, const uint8_t *msg, size_t len)
{
	struct dns_query q;
	enum dns_query_status qs;
	char qname[DNS_NAME_PRES_MAX];
	struct dns_cache_key key;
	struct policy *pol;
	unsigned kflags = 0;

	memset(&q, 0, sizeof(q));
	qs = dns_query_parse(msg, len, &q);
	if (qs == DNS_QUERY_DROP)
		return;
	d->st->dns_queries++;
	if (dns_pipeline_refused(d, o, &q, qs))
		return;
	if (dns_name_to_pres(
	        &q.question.name, DNS_PRES_LOWER, qname, sizeof(qname)) < 0) {
		dns_send_error(d, o, &q, DNS_RCODE_FORMERR);
		return;
	}
	if (dns_answer_local(d, o, &q))
		return;

	if ((pol = dns_policy_now(d, qname, &q, o)) == NULL)
		return;
	d->st->dns_allowed++;

	if ((q.flags & DNS_FLAG_CD) != 0)
		kflags |= DNS_CACHE_KEY_CD;
	if (q.edns.present && (q.edns.flags & DNS_EDNS_FLAG_DO) != 0)
		kflags |= DNS_CACHE_KEY_DO;
	if (dns_cache_key_make(&key, q.question.name.wire, q.question.name.len,
	        q.question.qtype, q.question.qclass, kflags) < 0) {
		dns_send_error(d, o, &q, DNS_RCODE_FORMERR);
		return;
	}
	if (d->cache != NULL &&
	    dns_pipeline_from_cache(d, o, &q, qname, &key, pol))
		return;
	dns_forward(d, o, &q, qname, &key, pol);
}
