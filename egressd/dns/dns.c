/*
 * dns: listeners, the per-query pipeline, TCP connection handling. The
 * wire work is dns_wire/dns_rewrite's; the upstream side dns_upstream's;
 * this file decides and glues.
 */
#include "egressd/dns/dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egressd/dns/dns_cache.h"
#include "egressd/proto/dns_rewrite.h"
#include "egressd/proto/dns_wire.h"
#include "egressd/base/log_agg.h"
#include "egressd/base/sock.h"
#include "util/addr.h"
#include "util/now.h"

#define DNS_MAGIC 0x444e5352u /* "DNSR" */
#define DNS_UDP_MAGIC 0x444e5544u /* "DNUD" */
#define DNS_CONN_MAGIC 0x444e5443u /* "DNTC" */
#define DNS_REQ_MAGIC 0x444e5251u /* "DNRQ" */
#define DNS_DEAD_MAGIC 0xdeadd15cu
#define DNS_TCP_BACKLOG 128
#define DNS_EPHEMERAL_TRIES 16 /* port 0: UDP port also free for TCP */
#define DNS_QTYPE_IXFR 251
#define DNS_QTYPE_AXFR 252
#define DNS_QTYPE_MAILB 253
#define DNS_QTYPE_MAILA 254
#define DNS_RESOLV_CONF_DEFAULT "/etc/resolv.conf"

struct dns;
struct dns_conn;

struct dns_udp {
	uint32_t magic;
	struct dns *d;
	int fd;
	int family;
	struct event *ev;
	uint32_t ovfl_seen; /* last SO_RXQ_OVFL count the kernel reported */
};

/* Where a query came from and where its answer goes. */
struct dns_origin {
	bool tcp;
	struct dns_udp *udp;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct dns_conn *conn;
};

enum dns_conn_state {
	DNS_CONN_OPEN = 0, /* reading queries */
	DNS_CONN_DRAINING, /* no more reads; close when answers are out */
	DNS_CONN_CLOSED, /* closed, waiting to be freed */
};

struct dns_req;

struct dns_conn {
	uint32_t magic;
	struct dns *d;
	uint64_t id;
	enum dns_conn_state state;
	struct bufferevent *bev;
	unsigned inflight, nqueries;
	bool read_paused;
	LIST_HEAD(, dns_req) reqs; /* queries of this connection in flight */
	LIST_ENTRY(dns_conn) entry; /* d->conns, then d->graveyard */
};

enum dns_req_state {
	DNS_REQ_UPSTREAM = 0, /* waiting for dns_upstream */
	DNS_REQ_DONE,
	DNS_REQ_LEARNING, /* answer ready, waiting for its learn ack */
};

/* A query waiting for its upstream answer, or for its learn. */
struct dns_req {
	uint32_t magic;
	struct dns *d;
	enum dns_req_state state;
	struct dns_origin from;
	LIST_ENTRY(dns_req) centry; /* from.conn->reqs, while from.conn */
	LIST_ENTRY(dns_req) entry; /* d->reqs */
	struct policy *pol; /* DNS_REQ_LEARNING: learned under; own ref */
	struct dns_query q;
	struct dns_cache_key key;
	char qname[DNS_NAME_PRES_MAX];
	struct dns_upstream_req *ureq;
	/* DNS_REQ_LEARNING: the answer to release, and the memo to write. */
	uint64_t ticket;
	uint8_t *ans;
	size_t anslen;
	uint64_t memo_entry, memo_tag, memo_until_ms;
};

struct dns {
	uint32_t magic;
	struct event_base *base;
	struct dns_hooks h;
	struct log *lg;
	struct stats *st;
	struct stats st_local; /* when the caller passes no stats */

	/* Settings, defaults applied. */
	unsigned timeout_ms, attempt_ms;
	unsigned tcp_conns_max, tcp_idle_ms, tcp_queries_max, tcp_inflight_max;
	char *resolv_conf;

	uint16_t port;
	struct dns_udp udp4, udp6;
	struct evconnlistener *tcp4, *tcp6;
	uint8_t own4[4], own6[16];
	bool have_own4, have_own6;

	struct dns_upstreams *ups;
	struct dns_cache *cache;

	LIST_HEAD(, dns_conn) conns, graveyard;
	size_t nconns;
	struct event *reaper;
	uint64_t next_conn_id;

	LIST_HEAD(, dns_req) reqs;
	size_t nreqs;

	struct log_agg deny_agg; /* dns.deny lines, per-name aggregated */
	struct event *deny_flush;
	struct log_limiter warn_lim;

	/* Scratch for the hot path (one query at a time). */
	struct dns_msg *scratch;
	struct dns_rewrite_report rep;
	struct dns_learn_addr learn[DNS_ANSWER_ADDR_MAX];
	/* One recvmmsg batch: a buffer, address and control block each. */
	uint8_t udpbuf[DNS_UDP_BATCH][DNS_UDP_RECV_MAX];
	struct sockaddr_storage udppeer[DNS_UDP_BATCH];
	struct iovec udpiov[DNS_UDP_BATCH];
	struct mmsghdr udpmsg[DNS_UDP_BATCH];
	union {
		struct cmsghdr align;
		uint8_t buf[CMSG_SPACE(sizeof(uint32_t))];
	} udpctl[DNS_UDP_BATCH];
	uint8_t out[DNS_MSG_MAX];
	uint8_t tmp[DNS_MSG_MAX];
	uint8_t hit[DNS_MSG_MAX];
};

/* ---- clock ---- */

/* The injected clock, or the real one (dns_new). */
static uint64_t
dns_now(const struct dns *d)
{
	return d->h.clock_ms(d->h.arg);
}

static uint64_t
dns_clock_thunk(void *arg)
{
	return dns_now(arg);
}

/* ---- replies ---- */

static void dns_conn_close(struct dns_conn *c, const char *reason);
static void dns_conn_after_reply(struct dns_conn *c);

static void
dns_send(
    struct dns *d, const struct dns_origin *o, const uint8_t *buf, size_t len)
{
	if (!o->tcp) {
		if (o->udp == NULL || o->udp->fd < 0)
			return;
		/* UDP: a full socket buffer drops the answer; the client retries. */
		(void)sendto(o->udp->fd, buf, len, MSG_DONTWAIT,
		    (const struct sockaddr *)&o->peer, o->peerlen);
		return;
	}
	if (o->conn == NULL || o->conn->state == DNS_CONN_CLOSED) {
		(void)d;
		return;
	}
	{
		uint8_t pfx[DNS_TCP_PREFIX_LEN];

		if (dns_tcp_prefix(pfx, len) < 0)
			return;
		if (bufferevent_write(o->conn->bev, pfx, sizeof(pfx)) < 0 ||
		    bufferevent_write(o->conn->bev, buf, len) < 0)
			dns_conn_close(o->conn, "write_failed");
	}
}

static void
dns_send_error(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode)
{
	size_t len;

	if (rcode == DNS_RCODE_SERVFAIL)
		d->st->dns_servfail++;
	else if (rcode == DNS_RCODE_FORMERR)
		d->st->dns_formerr++;
	if (dns_build_error(q, rcode, d->out, sizeof(d->out), &len, NULL) < 0)
		return;
	dns_send(d, o, d->out, len);
}

static void
dns_send_negative(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode, uint32_t ttl)
{
	size_t len;

	if (dns_build_negative(
	        q, rcode, ttl, d->out, sizeof(d->out), &len, NULL) < 0) {
		dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
		return;
	}
	dns_send(d, o, d->out, len);
}

/* UDP answers above the client's limit become TC=1 ("ask over TCP"). */
static void
dns_send_answer(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const uint8_t *buf, size_t len)
{
	size_t tlen;

	if (!o->tcp && len > dns_query_udp_limit(q)) {
		if (dns_build_truncated(
		        q, d->tmp, sizeof(d->tmp), &tlen, NULL) < 0)
			return;
		dns_send(d, o, d->tmp, tlen);
		return;
	}
	dns_send(d, o, buf, len);
}

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

/* One dns.deny line; count = the denials of that name it stands for. */
static void
dns_deny_emit_cb(void *arg, const struct log_agg_rec *r, uint64_t count)
{
	struct dns *d = arg;

	log_info(d->lg, "dns.deny", LOG_S("name", r->name),
	    LOG_U("qtype", r->qtype), LOG_S("reason", r->reason),
	    r->denied[0] != '\0' ? LOG_S("denied", r->denied) : LOG_BEGIN_,
	    r->rule[0] != '\0' ? LOG_S("rule", r->rule) : LOG_BEGIN_,
	    LOG_U("count", count));
}

static void
dns_log_deny(struct dns *d, const char *qname, uint16_t qtype,
    const char *reason, const char *denied, const struct policy_rule *rule)
{
	struct log_agg_rec rec;
	struct policy *pol;
	uint64_t count;

	/* log_skip.always: expected denials, neither logged nor notified. */
	pol = d->h.policy_get != NULL ? d->h.policy_get(d->h.arg) : NULL;
	if (pol != NULL && policy_log_skip(pol, qname))
		return;
	if (d->h.on_deny != NULL)
		d->h.on_deny(d->h.arg, qname, reason);
	/*
	 * Rate-limited per name, never dropped by name: what the limit
	 * holds back is written by the next flush (dns_deny_flush_cb).
	 */
	log_agg_rec_set(&rec, qname, qtype, reason, denied,
	    rule != NULL ? rule->display : NULL);
	if (log_agg_event(&d->deny_agg, &rec, dns_now(d), &count))
		dns_deny_emit_cb(d, &rec, count);
}

static void
dns_deny_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;
	struct log_agg_summary sum;

	(void)fd;
	(void)what;
	if (d == NULL || d->magic != DNS_MAGIC)
		abort();
	log_agg_flush(&d->deny_agg, dns_now(d), dns_deny_emit_cb, d, &sum);
	if (sum.names > 0 || sum.events > 0)
		log_warn(d->lg, "dns.deny_summary", LOG_S("reason", "flood"),
		    LOG_U("names", sum.names), LOG_U("events", sum.events));
}

static void
dns_log_warn(struct dns *d, const char *ev, const char *qname,
    const char *reason, const char *detail)
{
	char key[DNS_NAME_PRES_MAX + 64];

	(void)snprintf(key, sizeof(key), "%s|%s", ev, qname);
	if (!log_limiter_allow(&d->warn_lim, key, dns_now(d)))
		return;
	log_warn(d->lg, ev, LOG_S("name", qname), LOG_S("reason", reason),
	    detail != NULL ? LOG_S("detail", detail) : LOG_BEGIN_);
}

/*
 * Runs the answer policy on a raw upstream answer (fresh or from the
 * cache, TTLs already aged), learns what survives, and replies.
 */
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

static void dns_req_link(struct dns *d, struct dns_req *r);
static void dns_req_unlink(struct dns_req *r);
static void dns_req_free(struct dns_req *r);
static void dns_learn_done_cb(void *arg, int rc, const char *why);

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
	struct dns_req *r;

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
	 */
	if (memo != NULL && memo->tag == tag &&
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
	if (d->h.learn_submit != NULL) {
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
		r->memo_until_ms = now + lease * 1000u;
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
	if (d->h.learn(d->h.arg, qname, d->learn, n, e) < 0) {
		if (memo != NULL)
			memo->tag = 0;
		return -1;
	}
	if (memo != NULL) {
		memo->tag = tag;
		memo->until_ms = now + lease * 1000u;
	}
	return 0;
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
		}
		dns_send_answer(d, &r->from, &r->q, r->ans, r->anslen);
	}
	dns_req_free(r);
	if (c != NULL)
		dns_conn_after_reply(c);
}

/* Returns false when the answer itself is unusable (do not keep it). */
static bool
dns_release(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const char *qname, struct policy *pol,
    const uint8_t *msg, size_t len, struct dns_cache_memo *memo)
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
		dns_send_negative(
		    d, o, q, DNS_RCODE_NXDOMAIN, pol->dns.negative_ttl);
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

/* ---- requests in flight ---- */

static void
dns_req_unlink(struct dns_req *r)
{
	LIST_REMOVE(r, entry);
	r->d->nreqs--;
	if (r->from.conn != NULL) {
		LIST_REMOVE(r, centry);
		r->from.conn->inflight--;
	}
}

/* Into d->reqs and, for TCP, its connection's list (counted in flight). */
static void
dns_req_link(struct dns *d, struct dns_req *r)
{
	LIST_INSERT_HEAD(&d->reqs, r, entry);
	d->nreqs++;
	if (r->from.conn != NULL) {
		LIST_INSERT_HEAD(&r->from.conn->reqs, r, centry);
		r->from.conn->inflight++;
	}
}

static void
dns_req_free(struct dns_req *r)
{
	free(r->ans);
	policy_unref(r->pol);
	r->magic = DNS_DEAD_MAGIC;
	free(r);
}

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
		dns_send_negative(d, o, q, DNS_RCODE_NXDOMAIN, 0);
		return NULL;
	}
	if (policy_match_domain(pol, qname, &rule) != POLICY_ALLOW) {
		d->st->dns_denied++;
		dns_log_deny(d, qname, q->question.qtype, "policy", NULL, rule);
		dns_send_negative(
		    d, o, q, DNS_RCODE_NXDOMAIN, pol->dns.negative_ttl);
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
		        d, &r->from, &r->q, r->qname, pol, ans, len, memo) &&
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

/* One query from a client, any transport. */
static void
dns_handle(
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
	switch (qs) {
	case DNS_QUERY_FORMERR:
		dns_send_error(d, o, &q, DNS_RCODE_FORMERR);
		return;
	case DNS_QUERY_NOTIMP:
		dns_send_error(d, o, &q, DNS_RCODE_NOTIMP);
		return;
	case DNS_QUERY_BADVERS:
		dns_send_error(d, o, &q, DNS_RCODE_BADVERS);
		return;
	default:
		break;
	}
	if (q.question.qclass != DNS_CLASS_IN) {
		dns_send_error(d, o, &q, DNS_RCODE_REFUSED);
		return;
	}
	switch (q.question.qtype) {
	case DNS_QTYPE_AXFR:
	case DNS_QTYPE_IXFR:
	case DNS_QTYPE_MAILA:
	case DNS_QTYPE_MAILB:
	case DNS_TYPE_OPT:
		dns_send_error(d, o, &q, DNS_RCODE_NOTIMP);
		return;
	default:
		break;
	}
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
	if (d->cache != NULL) {
		const uint8_t *hit;
		size_t hlen = 0;
		uint32_t age = 0;
		struct dns_cache_memo *memo = NULL;

		hit = dns_cache_get(d->cache, &key, &hlen, &age, &memo);
		if (hit != NULL && hlen <= sizeof(d->hit)) {
			d->st->dns_cache_hits++;
			/* A copy: the stored answer stays as the upstream sent it. */
			memcpy(d->hit, hit, hlen);
			if (dns_wire_age_ttls(d->hit, hlen, age) < 0) {
				dns_send_error(d, o, &q, DNS_RCODE_SERVFAIL);
				return;
			}
			/* Policy re-run on every hit: it may have changed. */
			(void)dns_release(
			    d, o, &q, qname, pol, d->hit, hlen, memo);
			return;
		}
		d->st->dns_cache_misses++;
	}
	dns_forward(d, o, &q, qname, &key, pol);
}

/* ---- UDP ---- */

/*
 * The kernel's count of datagrams this socket dropped for want of buffer
 * space (SO_RXQ_OVFL), carried on every datagram: the difference since the
 * last one is what the sandbox (or a flood) lost before egressd saw it.
 */
static void
dns_udp_note_drops(struct dns_udp *u, struct msghdr *mh)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		uint32_t n;

		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SO_RXQ_OVFL ||
		    cm->cmsg_len < CMSG_LEN(sizeof(n)))
			continue;
		memcpy(&n, CMSG_DATA(cm), sizeof(n));
		u->d->st->dns_udp_rcvbuf_drops += (uint32_t)(n - u->ovfl_seen);
		u->ovfl_seen = n;
	}
}

/*
 * Up to DNS_UDP_BATCH datagrams per wakeup in one recvmmsg: a burst of
 * junk from the sandbox costs one system call per batch, not per datagram,
 * so the socket drains faster than a flood can fill it.
 */
static void
dns_udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_udp *u = arg;
	struct dns *d;
	int i, n;

	(void)what;
	if (u == NULL || u->magic != DNS_UDP_MAGIC)
		abort();
	d = u->d;
	for (i = 0; i < DNS_UDP_BATCH; i++) {
		struct msghdr *mh = &d->udpmsg[i].msg_hdr;

		d->udpiov[i].iov_base = d->udpbuf[i];
		d->udpiov[i].iov_len = sizeof(d->udpbuf[i]);
		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &d->udppeer[i];
		mh->msg_namelen = sizeof(d->udppeer[i]);
		mh->msg_iov = &d->udpiov[i];
		mh->msg_iovlen = 1;
		mh->msg_control = d->udpctl[i].buf;
		mh->msg_controllen = sizeof(d->udpctl[i].buf);
		d->udpmsg[i].msg_len = 0;
	}
	n = recvmmsg(fd, d->udpmsg, DNS_UDP_BATCH, MSG_DONTWAIT, NULL);
	if (n <= 0)
		return; /* EAGAIN, or an ICMP error: nothing to do */
	for (i = 0; i < n; i++) {
		struct msghdr *mh = &d->udpmsg[i].msg_hdr;
		struct dns_origin o;

		dns_udp_note_drops(u, mh);
		if ((mh->msg_flags & MSG_TRUNC) != 0)
			continue; /* no sane query is that big */
		if (mh->msg_namelen > sizeof(o.peer))
			continue;
		memset(&o, 0, sizeof(o));
		o.udp = u;
		memcpy(&o.peer, &d->udppeer[i], mh->msg_namelen);
		o.peerlen = mh->msg_namelen;
		dns_handle(d, &o, d->udpbuf[i], d->udpmsg[i].msg_len);
	}
}

int
dns_udp_fd(const struct dns *d, int family)
{
	if (d == NULL)
		return -1;
	return family == AF_INET6 ? d->udp6.fd : d->udp4.fd;
}

void
dns_udp_input(struct dns *d, int family, const uint8_t *msg, size_t len,
    const struct sockaddr *peer, socklen_t peerlen)
{
	struct dns_origin o;
	struct dns_udp *u = family == AF_INET6 ? &d->udp6 : &d->udp4;

	if (d->magic != DNS_MAGIC)
		abort();
	/* What a read would have skipped, skipped too. */
	if (u->fd < 0 || len > DNS_UDP_RECV_MAX || peerlen > sizeof(o.peer) ||
	    peer->sa_family != family)
		return;
	memset(&o, 0, sizeof(o));
	o.udp = u;
	memcpy(&o.peer, peer, peerlen);
	o.peerlen = peerlen;
	dns_handle(d, &o, msg, len);
}

/* The listen address of family at addr (a literal); 0 and e if it is not. */
static socklen_t
dns_listen_sockaddr(int family, const char *addr, uint16_t port,
    struct sockaddr_storage *ss, struct err *e)
{
	struct addr a;

	if (!addr_parse_ip(addr, strlen(addr), &a) || a.family != family) {
		err_set(e, "bad listen address %s", addr);
		return 0;
	}
	return addr_to_sockaddr(&a, port, ss);
}

static int
dns_udp_open(struct dns *d, struct dns_udp *u, int family, const char *addr,
    uint16_t port, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, fd;

	if ((sl = dns_listen_sockaddr(family, addr, port, &ss, e)) == 0)
		return -1;
	if ((fd = sock_open_local(family, SOCK_DGRAM | SOCK_NONBLOCK, e)) < 0)
		return -1;
	/* The default receive buffer (rmem_default, ~200 KiB) holds a few
	 * hundred small datagrams: a burst of junk from the sandbox filled
	 * it and the next real query was dropped by the kernel, so the
	 * client waited for its retry timer. DNS_UDP_RCVBUF absorbs a burst
	 * of thousands while egressd drains it; the memory is charged only
	 * while datagrams wait. */
	sock_set_buf(fd, SO_RCVBUF, DNS_UDP_RCVBUF);
	(void)setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		err_set(
		    e, "bind udp %s port %u: %s", addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	u->magic = DNS_UDP_MAGIC;
	u->d = d;
	u->fd = fd;
	u->family = family;
	u->ev =
	    event_new(d->base, fd, EV_READ | EV_PERSIST, dns_udp_read_cb, u);
	if (u->ev == NULL || event_add(u->ev, NULL) < 0) {
		err_set(e, "event_new failed");
		return -1;
	}
	return 0;
}

static uint16_t
dns_udp_port(const struct dns_udp *u)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(u->fd, (struct sockaddr *)&ss, &sl) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void
dns_udp_close(struct dns_udp *u)
{
	if (u->ev != NULL)
		event_free(u->ev);
	u->ev = NULL;
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	u->magic = DNS_DEAD_MAGIC;
}

/* ---- TCP ---- */

static void
dns_conn_set_state(struct dns_conn *c, enum dns_conn_state to)
{
	static const char *const names[] = {"open", "draining", "closed"};

	if (c->state == to)
		return;
	log_debug(c->d->lg, "dns.tcp.state", LOG_U("conn", c->id),
	    LOG_S("from", names[c->state]), LOG_S("to", names[to]));
	c->state = to;
}

static void
dns_reaper_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;

	(void)fd;
	(void)what;
	if (d->magic != DNS_MAGIC)
		abort();
	while (!LIST_EMPTY(&d->graveyard)) {
		struct dns_conn *c = LIST_FIRST(&d->graveyard);

		LIST_REMOVE(c, entry);
		c->magic = DNS_DEAD_MAGIC;
		free(c);
	}
}

/*
 * The one close path. Idempotent; reason is a fixed string. Queries still
 * in flight stay in flight but lose their way back. The struct itself is
 * freed on the next loop turn, since callers up the stack may hold it.
 */
static void
dns_conn_close(struct dns_conn *c, const char *reason)
{
	struct dns *d = c->d;
	struct dns_req *r;

	if (c->state == DNS_CONN_CLOSED)
		return;
	dns_conn_set_state(c, DNS_CONN_CLOSED);
	log_debug(d->lg, "dns.tcp.close", LOG_U("conn", c->id),
	    LOG_S("reason", reason), LOG_U("queries", c->nqueries));
	/* They are no longer on any connection's list (dns_req_unlink). */
	LIST_FOREACH(r, &c->reqs, centry)
	r->from.conn = NULL;
	LIST_INIT(&c->reqs);
	c->inflight = 0;
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	c->bev = NULL;
	LIST_REMOVE(c, entry);
	d->nconns--;
	LIST_INSERT_HEAD(&d->graveyard, c, entry);
	event_active(d->reaper, EV_TIMEOUT, 0);
}

static bool
dns_conn_output_full(const struct dns_conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev)) >
	    DNS_TCP_OUTBUF_MAX;
}

static void
dns_conn_pause(struct dns_conn *c)
{
	if (c->read_paused)
		return;
	c->read_paused = true;
	bufferevent_disable(c->bev, EV_READ);
}

/* Called when an answer went out or a query finished. */
static void
dns_conn_after_reply(struct dns_conn *c)
{
	if (c->state == DNS_CONN_CLOSED)
		return;
	if (c->state == DNS_CONN_DRAINING) {
		if (c->inflight == 0 &&
		    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
			dns_conn_close(c, "done");
		return;
	}
	if (c->read_paused && c->inflight < c->d->tcp_inflight_max &&
	    !dns_conn_output_full(c)) {
		c->read_paused = false;
		bufferevent_enable(c->bev, EV_READ);
		/* Frames may already be buffered: run the read cb again. */
		bufferevent_trigger(c->bev, EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
	}
}

static void
dns_conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct dns_conn *c = arg;
	struct dns *d;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (c == NULL || c->magic != DNS_CONN_MAGIC)
		abort();
	d = c->d;
	while (c->state == DNS_CONN_OPEN) {
		struct dns_origin o;
		const uint8_t *p;
		size_t avail = evbuffer_get_length(in), mlen;

		if (c->inflight >= d->tcp_inflight_max ||
		    dns_conn_output_full(c)) {
			dns_conn_pause(c);
			return;
		}
		if (avail < DNS_TCP_PREFIX_LEN)
			return;
		p = evbuffer_pullup(in, DNS_TCP_PREFIX_LEN);
		if (p == NULL) {
			dns_conn_close(c, "oom");
			return;
		}
		mlen = (size_t)p[0] << 8 | p[1];
		if (mlen < DNS_HEADER_LEN) {
			dns_conn_close(c, "bad_length");
			return;
		}
		if (avail < DNS_TCP_PREFIX_LEN + mlen)
			return;
		p = evbuffer_pullup(in, (ssize_t)(DNS_TCP_PREFIX_LEN + mlen));
		if (p == NULL) {
			dns_conn_close(c, "oom");
			return;
		}
		memset(&o, 0, sizeof(o));
		o.tcp = true;
		o.conn = c;
		c->nqueries++;
		dns_handle(d, &o, p + DNS_TCP_PREFIX_LEN, mlen);
		if (c->state == DNS_CONN_CLOSED)
			return;
		evbuffer_drain(in, DNS_TCP_PREFIX_LEN + mlen);
		if (c->nqueries >= d->tcp_queries_max) {
			dns_conn_set_state(c, DNS_CONN_DRAINING);
			bufferevent_disable(bev, EV_READ);
			dns_conn_after_reply(c);
			return;
		}
	}
}

static void
dns_conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct dns_conn *c = arg;

	(void)bev;
	if (c == NULL || c->magic != DNS_CONN_MAGIC)
		abort();
	dns_conn_after_reply(c);
}

static void
dns_conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct dns_conn *c = arg;

	if (c == NULL || c->magic != DNS_CONN_MAGIC)
		abort();
	if (what & BEV_EVENT_ERROR) {
		dns_conn_close(c, "error");
		return;
	}
	if (what & BEV_EVENT_EOF) {
		/* The client is done sending; finish what it asked. */
		if (c->state == DNS_CONN_OPEN)
			dns_conn_set_state(c, DNS_CONN_DRAINING);
		dns_conn_after_reply(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if ((what & BEV_EVENT_READING) && c->inflight > 0 &&
		    c->state == DNS_CONN_OPEN) {
			/* Not idle: we owe answers. Keep waiting. */
			if (!c->read_paused)
				bufferevent_enable(bev, EV_READ);
			return;
		}
		dns_conn_close(
		    c, (what & BEV_EVENT_WRITING) ? "write_timeout" : "idle");
	}
}

static void
dns_tcp_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct dns *d = arg;
	struct dns_conn *c;
	struct timeval tv;

	(void)l;
	(void)sa;
	(void)salen;
	if (d == NULL || d->magic != DNS_MAGIC)
		abort();
	if (d->nconns >= d->tcp_conns_max) {
		dns_log_warn(d, "dns.tcp.refused", "", "conn_cap", NULL);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	c->magic = DNS_CONN_MAGIC;
	c->d = d;
	c->id = ++d->next_conn_id;
	c->state = DNS_CONN_OPEN;
	c->bev = bufferevent_socket_new(
	    d->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (c->bev == NULL) {
		close(fd);
		free(c);
		return;
	}
	bufferevent_setcb(
	    c->bev, dns_conn_read_cb, dns_conn_write_cb, dns_conn_event_cb, c);
	tv.tv_sec = d->tcp_idle_ms / 1000;
	tv.tv_usec = (long)(d->tcp_idle_ms % 1000) * 1000;
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	/* Never buffer more than two maximal messages of input. */
	bufferevent_setwatermark(
	    c->bev, EV_READ, 0, 2 * (DNS_TCP_PREFIX_LEN + DNS_MSG_MAX));
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	LIST_INSERT_HEAD(&d->conns, c, entry);
	d->nconns++;
}

static void
dns_tcp_error_cb(struct evconnlistener *l, void *arg)
{
	struct dns *d = arg;

	(void)l;
	if (d == NULL || d->magic != DNS_MAGIC)
		abort();
	/* EMFILE and friends: libevent keeps listening; say so, bounded. */
	dns_log_warn(d, "dns.tcp.accept_failed", "", "accept",
	    strerror(EVUTIL_SOCKET_ERROR()));
}

static struct evconnlistener *
dns_tcp_open(
    struct dns *d, int family, const char *addr, uint16_t port, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned flags =
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC;
	struct evconnlistener *l;

	if ((sl = dns_listen_sockaddr(family, addr, port, &ss, e)) == 0)
		return NULL;
	if (family == AF_INET6)
		flags |= LEV_OPT_BIND_IPV6ONLY;
	l = evconnlistener_new_bind(d->base, dns_tcp_accept_cb, d, flags,
	    DNS_TCP_BACKLOG, (struct sockaddr *)&ss, (int)sl);
	if (l == NULL) {
		err_set(
		    e, "bind tcp %s port %u: %s", addr, port, strerror(errno));
		return NULL;
	}
	evconnlistener_set_error_cb(l, dns_tcp_error_cb);
	return l;
}

/* ---- upstream configuration ---- */

static int
dns_resolve_upstreams(struct dns *d, const char *const *v, size_t n,
    struct dns_upstream_addr *out, size_t *nout, struct err *e)
{
	size_t i;

	if (n > 0) {
		if (dns_upstream_parse_list(
		        v, n, out, DNS_UPSTREAMS_MAX, nout, e) < 0)
			return -1;
	} else if (dns_upstream_from_resolv_conf(
	               d->resolv_conf, out, DNS_UPSTREAMS_MAX, nout, e) < 0) {
		return -1;
	}
	for (i = 0; i < *nout; i++) {
		static const uint8_t zero[16];
		const struct dns_upstream_addr *a = &out[i];

		if (memcmp(a->addr, zero, a->family == AF_INET ? 4 : 16) == 0) {
			err_set(e, "upstream %s: unspecified address", a->text);
			return -1;
		}
		/* Our own listener as upstream would be a forwarding loop. */
		if (dns_upstream_addr_is_loopback(a) && a->port == d->port) {
			err_set(e, "upstream %s is egressd's own listener",
			    a->text);
			return -1;
		}
		if (dns_upstream_addr_is_loopback(a))
			log_warn(d->lg, "dns.upstream.loopback",
			    LOG_S("upstream", a->text),
			    LOG_S("reason",
			        "reachable only with SO_MARK exempt from the "
			        "redirect"));
	}
	return 0;
}

/* ---- life cycle ---- */

/* The listen address as bytes (own4/own6), when it is one literal. */
static bool
dns_own_addr(const char *text, int family, uint8_t *out)
{
	struct addr a;

	if (!addr_parse_ip(text, strlen(text), &a) || a.family != family)
		return false;
	memcpy(out, a.a, family == AF_INET ? 4 : 16);
	return true;
}

struct dns *
dns_new(struct event_base *base, const struct dns_opts *o,
    const struct dns_hooks *h, struct log *lg, struct stats *st, struct err *e)
{
	struct dns_upstream_addr addrs[DNS_UPSTREAMS_MAX];
	struct dns_upstreams_opts uo;
	const char *l4, *l6;
	size_t n = 0;
	struct dns *d;
	struct err e6;

	d = calloc(1, sizeof(*d));
	if (d == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	d->magic = DNS_MAGIC;
	d->base = base;
	if (h != NULL)
		d->h = *h;
	if (d->h.clock_ms == NULL)
		d->h.clock_ms = now_mono_ms_clock;
	d->lg = lg;
	d->st = st != NULL ? st : &d->st_local;
	d->udp4.fd = d->udp6.fd = -1;
	d->timeout_ms =
	    o->timeout_ms != 0 ? o->timeout_ms : DNS_UPSTREAM_BUDGET_MS_DEFAULT;
	d->attempt_ms = o->attempt_timeout_ms != 0
	    ? o->attempt_timeout_ms
	    : DNS_UPSTREAM_ATTEMPT_MS_DEFAULT;
	if (d->attempt_ms > d->timeout_ms)
		d->attempt_ms = d->timeout_ms;
	d->tcp_conns_max =
	    o->tcp_conns_max ? o->tcp_conns_max : DNS_TCP_CONNS_MAX;
	d->tcp_idle_ms = o->tcp_idle_ms ? o->tcp_idle_ms : DNS_TCP_IDLE_MS;
	d->tcp_queries_max =
	    o->tcp_queries_max ? o->tcp_queries_max : DNS_TCP_QUERIES_MAX;
	d->tcp_inflight_max =
	    o->tcp_inflight_max ? o->tcp_inflight_max : DNS_TCP_INFLIGHT_MAX;
	d->resolv_conf = strdup(
	    o->resolv_conf != NULL ? o->resolv_conf : DNS_RESOLV_CONF_DEFAULT);
	log_agg_init(&d->deny_agg, DNS_DENY_LOG_RATE, DNS_DENY_LOG_BURST,
	    DNS_DENY_LOG_DEDUP_MS);
	log_limiter_init(&d->warn_lim, DNS_DENY_LOG_RATE, DNS_DENY_LOG_BURST,
	    DNS_DENY_LOG_DEDUP_MS);
	d->scratch = dns_msg_new();
	d->reaper = event_new(base, -1, 0, dns_reaper_cb, d);
	d->deny_flush = event_new(base, -1, EV_PERSIST, dns_deny_flush_cb, d);
	if (d->resolv_conf == NULL || d->scratch == NULL || d->reaper == NULL ||
	    d->deny_flush == NULL) {
		err_set(e, "out of memory");
		goto out_free;
	}
	{
		struct timeval tv = {DNS_DENY_LOG_FLUSH_MS / 1000,
		    (DNS_DENY_LOG_FLUSH_MS % 1000) * 1000};

		event_add(d->deny_flush, &tv);
	}
	if (!o->cache_disable) {
		d->cache = dns_cache_new(o->cache_entries_max,
		    o->cache_bytes_max, dns_clock_thunk, d);
		if (d->cache == NULL) {
			err_set(e, "out of memory");
			goto out_free;
		}
	}

	/* Listeners: IPv4 first (its port is the port of all four). */
	l4 = o->listen4 != NULL ? o->listen4 : DNS_LISTEN4_DEFAULT;
	l6 = o->listen6 != NULL ? o->listen6 : DNS_LISTEN6_DEFAULT;
	d->port = o->port;
	if (l4[0] != '\0') {
		int tries = o->port == 0 ? DNS_EPHEMERAL_TRIES : 1;

		/*
		 * An ephemeral UDP port may be taken on the TCP side: then
		 * try another one (port 0 is for tests only).
		 */
		while (tries-- > 0) {
			if (dns_udp_open(d, &d->udp4, AF_INET, l4, o->port, e) <
			    0)
				goto out_free;
			d->port = dns_udp_port(&d->udp4);
			d->tcp4 = dns_tcp_open(d, AF_INET, l4, d->port, e);
			if (d->tcp4 != NULL)
				break;
			dns_udp_close(&d->udp4);
		}
		if (d->tcp4 == NULL)
			goto out_free;
		d->have_own4 = dns_own_addr(l4, AF_INET, d->own4);
	}
	if (l6[0] != '\0') {
		err_clear(&e6);
		if (dns_udp_open(d, &d->udp6, AF_INET6, l6, d->port, &e6) ==
		    0) {
			if (d->port == 0)
				d->port = dns_udp_port(&d->udp6);
			d->tcp6 = dns_tcp_open(d, AF_INET6, l6, d->port, &e6);
		}
		if (d->tcp6 == NULL) {
			/* A host without IPv6 still gets a working resolver. */
			log_warn(
			    lg, "dns.listen6_failed", LOG_S("error", e6.msg));
			dns_udp_close(&d->udp6);
		} else {
			d->have_own6 = dns_own_addr(l6, AF_INET6, d->own6);
		}
	}
	if (d->udp4.fd < 0 && d->tcp6 == NULL) {
		err_set(e, "no DNS listener could be opened");
		goto out_free;
	}

	if (dns_resolve_upstreams(
	        d, o->upstreams, o->nupstreams, addrs, &n, e) < 0)
		goto out_free;
	memset(&uo, 0, sizeof(uo));
	uo.mark = o->mark;
	uo.attempt_timeout_ms = d->attempt_ms;
	uo.probe_name = o->probe_name;
	uo.probe_interval_ms = o->probe_interval_ms;
	uo.clock = dns_clock_thunk;
	uo.clock_arg = d;
	d->ups = dns_upstreams_new(base, addrs, n, &uo, lg, d->st, e);
	if (d->ups == NULL)
		goto out_free;
	{
		char list[DNS_UPSTREAMS_MAX * DNS_UPSTREAM_TEXT_MAX];
		size_t i, off = 0;

		list[0] = '\0';
		for (i = 0; i < n && off < sizeof(list); i++) {
			int k = snprintf(list + off, sizeof(list) - off, "%s%s",
			    i ? "," : "", addrs[i].text);

			if (k < 0)
				break;
			off += (size_t)k;
		}
		log_info(lg, "dns.start", LOG_U("port", d->port),
		    LOG_B("ipv6", d->tcp6 != NULL), LOG_S("upstreams", list),
		    LOG_S("source",
		        o->nupstreams > 0 ? "config" : d->resolv_conf),
		    LOG_U("mark", o->mark));
	}
	return d;
out_free:
	dns_free(d);
	return NULL;
}

void
dns_free(struct dns *d)
{
	if (d == NULL)
		return;
	while (!LIST_EMPTY(&d->conns))
		dns_conn_close(LIST_FIRST(&d->conns), "shutdown");
	while (!LIST_EMPTY(&d->reqs)) {
		struct dns_req *r = LIST_FIRST(&d->reqs);

		if (r->ureq != NULL)
			dns_upstream_cancel(r->ureq);
		r->ureq = NULL;
		if (r->ticket != 0 && d->h.learn_cancel != NULL)
			d->h.learn_cancel(d->h.arg, r->ticket);
		r->ticket = 0;
		dns_req_unlink(r);
		dns_req_free(r);
	}
	dns_upstreams_free(d->ups);
	if (d->tcp4 != NULL)
		evconnlistener_free(d->tcp4);
	if (d->tcp6 != NULL)
		evconnlistener_free(d->tcp6);
	if (d->udp4.fd >= 0 || d->udp4.ev != NULL)
		dns_udp_close(&d->udp4);
	if (d->udp6.fd >= 0 || d->udp6.ev != NULL)
		dns_udp_close(&d->udp6);
	if (d->reaper != NULL) {
		dns_reaper_cb(-1, 0, d);
		event_free(d->reaper);
	}
	if (d->deny_flush != NULL) {
		/* What the rate limit still holds is written, not lost. */
		dns_deny_flush_cb(-1, 0, d);
		event_free(d->deny_flush);
	}
	dns_cache_free(d->cache);
	dns_msg_free(d->scratch);
	free(d->resolv_conf);
	d->magic = DNS_DEAD_MAGIC;
	free(d);
}

int
dns_set_upstreams(
    struct dns *d, const char *const *upstreams, size_t n, struct err *e)
{
	struct dns_upstream_addr addrs[DNS_UPSTREAMS_MAX];
	size_t got = 0;

	if (dns_resolve_upstreams(d, upstreams, n, addrs, &got, e) < 0)
		return -1;
	if (dns_upstreams_replace(d->ups, addrs, got, e) < 0)
		return -1;
	/* Answers from the old upstreams are not the new ones' answers. */
	dns_flush_cache(d);
	log_info(d->lg, "dns.upstreams", LOG_U("count", got));
	return 0;
}

void
dns_flush_cache(struct dns *d)
{
	if (d->cache != NULL)
		dns_cache_flush(d->cache);
}

uint16_t
dns_port(const struct dns *d)
{
	return d->port;
}

void
dns_status(const struct dns *d, struct dns_status *out)
{
	memset(out, 0, sizeof(*out));
	out->port = d->port;
	out->udp4 = d->udp4.fd >= 0;
	out->tcp4 = d->tcp4 != NULL;
	out->udp6 = d->udp6.fd >= 0;
	out->tcp6 = d->tcp6 != NULL;
	out->nupstreams = dns_upstreams_count(d->ups);
	out->nhealthy = dns_upstreams_healthy(d->ups);
	(void)dns_upstreams_status(d->ups, out->upstream, DNS_UPSTREAMS_MAX);
	if (d->cache != NULL) {
		out->cache_entries = dns_cache_count(d->cache);
		out->cache_bytes = dns_cache_bytes(d->cache);
		out->cache_evictions = dns_cache_evictions(d->cache);
	}
	out->inflight = d->nreqs;
	out->tcp_conns = d->nconns;
}

bool
dns_ready(const struct dns *d, const char **why)
{
	const char *w = NULL;

	if (d == NULL)
		w = "dns not started";
	else if (d->udp4.fd < 0 && d->udp6.fd < 0)
		w = "dns listener not bound";
	else if (dns_upstreams_count(d->ups) == 0)
		w = "no dns upstream";
	else if (dns_upstreams_healthy(d->ups) == 0)
		w = "all dns upstreams down";
	if (why != NULL)
		*why = w;
	return w == NULL;
}
