/*
 * dns_release: an upstream answer on its way to the client. The answer
 * policy (dns_rewrite: CNAME/DNAME chain, internal addresses, ech, TTLs),
 * the learning of every address that survives (memoized per cache entry
 * and policy snapshot; synchronous, or queued with learn_submit), and only
 * then the reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/dns/dns_int.h"
#include "egressd/dns/dns_cache.h"
#include "egressd/proto/dns_rewrite.h"
#include "egressd/proto/dns_wire.h"

/* ---- answer policy ---- */

static bool
dns_name_allowed_cb(void *arg, const char *name)
{
	const struct policy *p = arg;

	return policy_match_domain(p, name, NULL) == POLICY_ALLOW;
}

static bool
dns_addr_allowed_cb(void *arg, int family, const uint8_t *addr)
{
	const struct policy *p = arg;

	if (p->dns.private_answers == POLICY_PRIVATE_ALLOW)
		return true;
	if (!dns_addr_is_internal(family, addr))
		return true;
	/* Rebinding defence: only an operator-listed IP/CIDR (always-allow
	 * or infra, never a user rule) lets it through. */
	return policy_addr_operator_allowed(p, family, addr);
}

/* What a learn memo is valid for: this exact policy snapshot. */
static uint64_t
dns_policy_tag(const struct policy *p)
{
	/*
	 * Pointer and revision both count: a new snapshot may get the old
	 * one's address. (x ^ (rev + 1)) | 1 made revisions 2k-1 and 2k the
	 * same tag.
	 */
	uint64_t t = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull +
	    (p->revision + 1) * 0xc2b2ae3d27d4eb4full;

	return t != 0 ? t : 1; /* never 0 ("no memo") */
}

/* The cache key of a client's query. -1: name too long. */
static int
dns_query_key(const struct dns_query *q, struct dns_cache_key *key)
{
	unsigned kflags = 0;

	if ((q->flags & DNS_FLAG_CD) != 0)
		kflags |= DNS_CACHE_KEY_CD;
	if (q->edns.present && (q->edns.flags & DNS_EDNS_FLAG_DO) != 0)
		kflags |= DNS_CACHE_KEY_DO;
	return dns_cache_key_make(key, q->question.name.wire,
	    q->question.name.len, q->question.qtype, q->question.qclass,
	    kflags);
}

/*
 * The learn of an answer finished: release it (its addresses are in the
 * allow sets), or SERVFAIL. A policy swapped in meanwhile that denies the
 * name wins: the answer is not released.
 */
static void
dns_learn_done_cb(void *arg, int rc, const char *why)
{
	struct dns_req *r = arg;
	struct dns *d;
	struct dns_conn *c;
	struct policy *now_pol;

	if (r == NULL || r->magic != DNS_REQ_MAGIC ||
	    r->state != DNS_REQ_LEARNING)
		abort();
	d = r->d;
	c = r->from.conn;
	r->ticket = 0;
	dns_req_unlink(r);
	now_pol = d->h.policy_get != NULL ? d->h.policy_get(d->h.arg) : NULL;
	if (rc == 0 && now_pol != r->pol &&
	    (now_pol == NULL ||
	        policy_match_domain(now_pol, r->qname, NULL) != POLICY_ALLOW)) {
		rc = -1;
		why = "policy changed while learning";
	}
	if (rc < 0) {
		dns_log_warn(d, "dns.learn_failed", r->qname, "learn", why);
		dns_send_error(d, &r->from, &r->q, DNS_RCODE_SERVFAIL);
	} else {
		struct dns_cache_memo *m = NULL;

		if (d->cache != NULL && r->memo_entry != 0)
			m = dns_cache_memo_find(
			    d->cache, &r->key, r->memo_entry);
		if (m != NULL && now_pol == r->pol) {
			m->tag = r->memo_tag;
			m->until_ms = r->memo_until_ms;
			/*
			 * Read now, not at submit: the delivery just checked
			 * every address of the answer is still learned, and a
			 * transaction never evicts its own addresses, so only
			 * an eviction from here on can take one away.
			 */
			m->evicted = d->st->nft_learned_evicted;
		}
		dns_send_answer(d, &r->from, &r->q, r->ans, r->anslen);
	}
	dns_req_free(r);
	if (c != NULL)
		dns_conn_after_reply(c);
}

/*
 * The learn of the n addresses in d->learn, queued (learn_submit): the
 * answer in d->out (outlen bytes) waits in a request for
 * dns_learn_done_cb, which writes the memo (tag, until_ms) if it is still
 * there. 1: queued; -1: failed.
 */
static int
dns_learn_submit(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const char *qname, struct policy *pol,
    const struct dns_cache_memo *memo, size_t outlen, size_t n, uint64_t tag,
    uint64_t until_ms, struct err *e)
{
	struct dns_req *r;

	r = calloc(1, sizeof(*r));
	if (r == NULL || (r->ans = malloc(outlen)) == NULL) {
		free(r);
		err_set(e, "out of memory");
		return -1;
	}
	r->magic = DNS_REQ_MAGIC;
	r->d = d;
	r->state = DNS_REQ_LEARNING;
	r->from = *o;
	r->q = *q;
	(void)snprintf(r->qname, sizeof(r->qname), "%s", qname);
	memcpy(r->ans, d->out, outlen);
	r->anslen = outlen;
	if (memo != NULL && dns_query_key(q, &r->key) == 0)
		r->memo_entry = memo->entry;
	r->memo_tag = tag;
	r->memo_until_ms = until_ms;
	r->ticket = d->h.learn_submit(
	    d->h.arg, qname, d->learn, n, dns_learn_done_cb, r, e);
	if (r->ticket == 0) {
		free(r->ans);
		free(r);
		return -1;
	}
	r->pol = policy_ref(pol);
	dns_req_link(d, r);
	return 1;
}

/*
 * Learns the addresses of rep unless memo proves they are still learned
 * for at least as long as the client will use this answer. 0: learned (or
 * nothing to do), release now; 1: queued (learn_submit), the answer in
 * d->out (outlen bytes) is released by dns_learn_done_cb; -1: failed.
 */
static int
dns_learn(struct dns *d, const struct dns_origin *o, const struct dns_query *q,
    const char *qname, struct policy *pol, const struct dns_rewrite_report *rep,
    struct dns_cache_memo *memo, size_t outlen, struct err *e)
{
	uint64_t now = dns_now(d), tag = dns_policy_tag(pol), lease;
	uint32_t min_ttl = UINT32_MAX, max_ttl = 0, cap;
	size_t i, n = rep->naddr;

	for (i = 0; i < n; i++) {
		if (rep->addr[i].ttl < min_ttl)
			min_ttl = rep->addr[i].ttl;
		if (rep->addr[i].ttl > max_ttl)
			max_ttl = rep->addr[i].ttl;
	}
	/*
	 * The client may use the answer until now + max_ttl; if every lease
	 * from an earlier learn (same policy) lasts at least that long, the
	 * nft round trip can be skipped: this is what makes cache hits cheap.
	 * Leases end early in two ways: a policy change (a new snapshot, so
	 * a new tag) and, with a full learned set, an eviction (the nft side
	 * counts them in the shared stats): after any eviction since the
	 * memo was written, a hit learns again rather than hand out an
	 * address that may no longer be open.
	 */
	if (memo != NULL && memo->tag == tag &&
	    memo->evicted == d->st->nft_learned_evicted &&
	    memo->until_ms >= now + (uint64_t)max_ttl * 1000u) {
		d->st->dns_learn_memo_skips++;
		return 0;
	}
	for (i = 0; i < n; i++) {
		d->learn[i].family = rep->addr[i].family;
		memcpy(d->learn[i].addr, rep->addr[i].addr, 16);
		d->learn[i].ttl = rep->addr[i].ttl + DNS_LEARN_SLACK_S;
	}
	/*
	 * The lease nft grants: our TTL + slack, cut to the lease cap
	 * (dns.ttlMax when set). Never assume more than that.
	 */
	lease = (uint64_t)min_ttl + DNS_LEARN_SLACK_S;
	cap = pol->dns.ttl_max != 0 ? pol->dns.ttl_max : DNS_LEARN_LEASE_MAX_S;
	if (lease > cap)
		lease = cap;
	if (d->h.learn_submit != NULL)
		return dns_learn_submit(d, o, q, qname, pol, memo, outlen, n,
		    tag, now + lease * 1000u, e);
	if (d->h.learn(d->h.arg, qname, d->learn, n, e) < 0) {
		if (memo != NULL)
			memo->tag = 0;
		return -1;
	}
	if (memo != NULL) {
		memo->tag = tag;
		memo->until_ms = now + lease * 1000u;
		memo->evicted = d->st->nft_learned_evicted;
	}
	return 0;
}

/*
 * Runs the answer policy on a raw upstream answer (fresh or from the
 * cache, TTLs already aged), learns what survives, and replies.
 */
/* Returns false when the answer itself is unusable (do not keep it). */
bool
dns_release(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const char *qname, struct policy *pol,
    const uint8_t *msg, size_t len, uint32_t age, struct dns_cache_memo *memo)
{
	struct dns_rewrite_opts ro;
	struct dns_rewrite_report *rep = &d->rep;
	enum dns_rewrite_result rr;
	size_t outlen = 0;
	unsigned stripped;
	uint32_t ttl_max;
	struct err e;

	memset(&ro, 0, sizeof(ro));
	ro.client = q;
	ro.addr_allowed = dns_addr_allowed_cb;
	ro.name_allowed = dns_name_allowed_cb;
	ro.arg = pol;
	ro.age = age;
	/* Clients never keep an answer longer than its addresses' lease. */
	ttl_max =
	    pol->dns.ttl_max != 0 ? pol->dns.ttl_max : DNS_LEARN_LEASE_MAX_S;
	if (ttl_max > 2 * DNS_LEARN_SLACK_S)
		ttl_max -= DNS_LEARN_SLACK_S;
	ro.ttl_max = ttl_max;
	ro.ttl_min = pol->dns.ttl_min < ttl_max ? pol->dns.ttl_min : ttl_max;
	ro.flags = DNS_REWRITE_DROP_ADDITIONAL;
	if (d->h.intercepted != NULL && d->h.intercepted(d->h.arg, qname))
		ro.flags |= DNS_REWRITE_STRIP_ECH;
	err_clear(&e);
	rr = dns_rewrite(d->scratch, msg, len, &ro, d->out, sizeof(d->out),
	    &outlen, rep, &e);
	if (rr == DNS_REWRITE_ERROR) {
		dns_log_warn(d, "dns.bad_answer", qname, "rewrite", e.msg);
		dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
		return false;
	}
	if (rr == DNS_REWRITE_DENIED) {
		d->st->dns_cname_denied++;
		dns_log_deny(d, qname, q->question.qtype, "cname",
		    rep->denied_name, NULL);
		dns_send_denied(d, o, q, DNS_DENY_CNAME, pol->dns.negative_ttl);
		return true;
	}
	if (rep->stripped_excess > 0)
		dns_log_warn(d, "dns.strip", qname, "too_many_addresses", NULL);
	stripped = rep->stripped_addrs + rep->stripped_hints;
	if (stripped > 0) {
		d->st->dns_private_stripped += stripped;
		dns_log_warn(d, "dns.strip", qname, "internal_address", NULL);
	}
	if ((d->h.learn != NULL || d->h.learn_submit != NULL) &&
	    rep->naddr > 0) {
		int lr;

		err_clear(&e);
		lr = dns_learn(d, o, q, qname, pol, rep, memo, outlen, &e);
		if (lr < 0) {
			/* Never release an answer the sandbox cannot use. */
			dns_log_warn(
			    d, "dns.learn_failed", qname, "learn", e.msg);
			dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
			return true;
		}
		if (lr > 0)
			return true; /* released once learned */
	}
	dns_send_answer(d, o, q, d->out, outlen);
	return true;
}
