/*
 * dns_upstream: c-ares channels in libevent, failover within a budget,
 * passive and active health. The pure part (addresses, resolv.conf, query
 * bytes) is dns_upstream_parse.c.
 */
#include "egressd/dns/dns_upstream.h"
#include "egressd/dns/dns_upstream_int.h"
#include "egressd/base/sock.h"
#include "util/addr.h"
#include "util/now.h"

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- clock, health, stats ---- */

static uint64_t
dns_upstream_now(const struct dns_upstreams *u)
{
	return u->o.clock(u->o.clock_arg);
}

static const char *
dns_upstream_status_reason(int status)
{
	switch (status) {
	case ARES_ETIMEOUT:
		return "timeout";
	case ARES_ECONNREFUSED:
		return "refused";
	case ARES_ESERVFAIL:
		return "servfail";
	case ARES_EREFUSED:
		return "rcode_refused";
	case ARES_ENOTIMP:
		return "notimp";
	case ARES_EBADRESP:
		return "bad_response";
	case ARES_ECANCELLED:
		return "cancelled";
	case ARES_EDESTRUCTION:
		return "destroyed";
	default:
		return "error";
	}
}

/* What an attempt that failed with status says of the query. */
static enum stats_dns_fail
dns_upstream_fail_class(int status)
{
	switch (status) {
	case ARES_ESERVFAIL:
	case ARES_EREFUSED:
	case ARES_ENOTIMP:
	case ARES_EFORMERR:
		return STATS_DNS_FAIL_RCODE;
	case ARES_SUCCESS: /* no or a short message */
	case ARES_EBADRESP:
		return STATS_DNS_FAIL_EMPTY_RESPONSE;
	default:
		return STATS_DNS_FAIL_UPSTREAM_ERROR;
	}
}

static void
dns_upstream_mark(
    struct dns_upstream *up, bool ok, unsigned rtt_ms, const char *reason)
{
	struct dns_upstreams *u = up->set;
	uint64_t now = dns_upstream_now(u);

	up->queries++;
	if (ok) {
		up->last_ok_ms = now;
		up->last_rtt_ms = rtt_ms;
		up->consecutive_failures = 0;
		if (!up->have_rtt) {
			up->have_rtt = true;
			up->srtt_ms = rtt_ms;
			up->rttvar_ms = rtt_ms / 2;
		} else {
			unsigned d = rtt_ms > up->srtt_ms
			    ? rtt_ms - up->srtt_ms
			    : up->srtt_ms - rtt_ms;

			up->rttvar_ms = (3 * up->rttvar_ms + d) / 4;
			up->srtt_ms = (7 * up->srtt_ms + rtt_ms) / 8;
		}
		if (!up->healthy) {
			up->healthy = true;
			log_info(u->lg, "dns.upstream.up",
			    LOG_S("upstream", up->addr.text),
			    LOG_U("rtt_ms", rtt_ms));
		}
		return;
	}
	up->failures++;
	up->last_fail_ms = now;
	if (u->st != NULL)
		u->st->dns_upstream_failures++;
	if (up->consecutive_failures < 1000000u)
		up->consecutive_failures++;
	if (up->healthy &&
	    up->consecutive_failures >= DNS_UPSTREAM_FAILS_UNHEALTHY) {
		up->healthy = false;
		log_warn(u->lg, "dns.upstream.down",
		    LOG_S("upstream", up->addr.text), LOG_S("reason", reason),
		    LOG_U("failures", up->consecutive_failures));
	}
}

static void
dns_upstream_stats_latency(struct stats *st, unsigned ms)
{
	static const unsigned bounds[STATS_LAT_BUCKETS] = STATS_LAT_BOUNDS_MS;
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < STATS_LAT_BUCKETS; i++)
		if (ms <= bounds[i])
			break;
	st->dns_upstream_lat_bucket[i]++;
	st->dns_upstream_lat_count++;
	st->dns_upstream_lat_sum_s += (double)ms / 1000.0;
}

/* ---- requests ---- */

static void dns_upstream_req_next(struct dns_upstream_req *r);
static void dns_upstream_attempt_cb(
    void *arg, int status, int timeouts, unsigned char *abuf, int alen);

static void
dns_upstream_req_unlink(struct dns_upstream_req *r)
{
	LIST_REMOVE(r, entry);
	r->set->npending--;
}

/* Forgets a from r's outstanding attempts. */
static void
dns_upstream_req_drop_att(
    struct dns_upstream_req *r, struct dns_upstream_attempt *a)
{
	size_t i;

	for (i = 0; i < r->natts; i++)
		if (r->atts[i] == a) {
			r->atts[i] = r->atts[--r->natts];
			break;
		}
	if (r->cur == a)
		r->cur = NULL;
}

/* Orphans every outstanding attempt: c-ares still owns and frees them. */
static void
dns_upstream_req_orphan_all(struct dns_upstream_req *r)
{
	size_t i;

	for (i = 0; i < r->natts; i++)
		r->atts[i]->req = NULL;
	r->natts = 0;
	r->cur = NULL;
}

static void
dns_upstream_req_free(struct dns_upstream_req *r)
{
	dns_upstream_req_orphan_all(r);
	if (r->timer != NULL)
		event_free(r->timer);
	free(r->query);
	r->magic = DNS_UPSTREAM_DEAD_MAGIC;
	free(r);
}

static void
dns_upstream_req_finish(struct dns_upstream_req *r, const uint8_t *ans,
    size_t len, const char *upstream)
{
	dns_upstream_done_fn done = r->done;
	void *arg = r->arg;

	if (ans == NULL && r->set->st != NULL)
		r->set->st->dns_query_failed[r->fail]++;
	dns_upstream_req_unlink(r);
	dns_upstream_req_free(r);
	if (done != NULL)
		done(arg, ans, len, upstream);
}

/* Healthy upstreams first, each group in configured order. */
static void
dns_upstream_req_order(struct dns_upstream_req *r)
{
	struct dns_upstreams *u = r->set;
	size_t i;

	r->norder = 0;
	for (i = 0; i < u->n; i++)
		if (u->ups[i]->healthy)
			r->order[r->norder++] = i;
	for (i = 0; i < u->n; i++)
		if (!u->ups[i]->healthy)
			r->order[r->norder++] = i;
	r->tried = 0;
}

/*
 * How long the request waits on the attempt it is starting (try index t,
 * upstream up) before it starts the next one. While another upstream
 * still waits for its first try, that is a hedge: the upstream's RTO
 * (srtt + 4 rttvar, DNS_UPSTREAM_RTO_MIN_MS at least; DNS_UPSTREAM_RTO_
 * INIT_MS before the first answer), never more than the attempt timeout
 * and never more than an equal share of the budget left for the
 * upstreams not tried yet, so one silent upstream can never spend the
 * budget of a lookup another one can answer. Once every upstream had its
 * try, further attempts are retransmissions: the attempt timeout, as a
 * plain stub resolver would wait.
 */
static unsigned
dns_upstream_attempt_wait(const struct dns_upstream_req *r,
    const struct dns_upstream *up, size_t t, uint64_t left, bool *hedged)
{
	uint64_t wait = r->attempt_ms;

	*hedged = false;
	if (t + 1 < r->norder) {
		uint64_t rto = DNS_UPSTREAM_RTO_INIT_MS;
		uint64_t share = left / (r->norder - t);

		if (up->have_rtt) {
			rto = (uint64_t)up->srtt_ms + 4u * up->rttvar_ms;
			if (rto < DNS_UPSTREAM_RTO_MIN_MS)
				rto = DNS_UPSTREAM_RTO_MIN_MS;
		}
		if (rto < wait)
			wait = rto;
		if (share < wait)
			wait = share;
		*hedged = wait < r->attempt_ms;
	}
	if (wait > left)
		wait = left;
	return (unsigned)wait;
}

/* Sends r's query on c for attempt a; false if it failed at once. */
static bool
dns_upstream_att_send(struct dns_upstream_req *r, struct dns_upstream_chan *c,
    struct dns_upstream_attempt *a)
{
	bool failed;

	r->in_send = true;
	r->send_failed = false;
	ares_send(c->ch, r->query, (int)r->qlen, dns_upstream_attempt_cb, a);
	r->in_send = false;
	failed = r->send_failed;
	r->send_failed = false;
	dns_upstream_chan_rearm(c);
	return !failed;
}

/*
 * A probe asks "is anybody there": any answer but SERVFAIL (REFUSED for
 * the root NS, say) proves the upstream alive.
 */
static void
dns_upstream_probe_done(
    struct dns_upstream_attempt *a, bool ok, int status, unsigned rtt)
{
	bool alive = ok || status == ARES_EREFUSED || status == ARES_ENOTIMP;

	a->up->probing = false;
	dns_upstream_mark(
	    a->up, alive, rtt, dns_upstream_status_reason(status));
	free(a);
}

/*
 * The request's side of its attempt a that came back (ok: with the answer
 * abuf): r finishes, or moves on to its next attempt. Frees a.
 */
static void
dns_upstream_req_attempt_done(struct dns_upstream_req *r,
    struct dns_upstream_attempt *a, bool ok, const unsigned char *abuf,
    int alen, unsigned rtt)
{
	struct dns_upstreams *u = a->up->set;
	bool was_cur = a == r->cur;

	dns_upstream_req_drop_att(r, a);
	if (ok) {
		dns_upstream_stats_latency(u->st, rtt);
		dns_upstream_req_finish(
		    r, abuf, (size_t)alen, a->up->addr.text);
		free(a);
		return;
	}
	free(a);
	if (r->in_send) {
		/* Failed inside ares_send: the sender moves on. */
		r->send_failed = true;
		return;
	}
	if (!was_cur) {
		/* A straggler gave up; the current attempt may still be on. */
		if (r->cur == NULL && r->natts == 0 &&
		    r->tried >= r->norder * DNS_UPSTREAM_ROUNDS_MAX)
			dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	dns_upstream_req_next(r);
}

static void
dns_upstream_attempt_cb(
    void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct dns_upstream_attempt *a = arg;
	struct dns_upstream_req *r;
	struct dns_upstreams *u;
	unsigned rtt;
	bool ok;

	(void)timeouts;
	if (a == NULL || a->magic != DNS_UPSTREAM_ATT_MAGIC)
		abort();
	r = a->req;
	a->magic = DNS_UPSTREAM_DEAD_MAGIC;
	if (status == ARES_EDESTRUCTION) {
		/* Channel torn down (reload or free): the request moves on. */
		if (r != NULL)
			dns_upstream_req_drop_att(r, a);
		if (a->probe)
			a->up->probing = false;
		free(a);
		return;
	}
	u = a->up->set;
	ok = status == ARES_SUCCESS && abuf != NULL && alen >= 12;
	rtt = (unsigned)(dns_upstream_now(u) - a->start_ms);
	if (ok && !a->tcp && (abuf[2] & 0x02) != 0 && r != NULL) {
		/*
		 * TC=1 over UDP: ask the same upstream again over TCP, as the
		 * same attempt (the request's timers keep running).
		 */
		if (u->st != NULL)
			u->st->dns_upstream_tc_retries++;
		a->magic = DNS_UPSTREAM_ATT_MAGIC;
		a->tcp = true;
		if (!dns_upstream_att_send(r, &a->up->tcp, a) &&
		    r->cur == NULL && !r->in_send)
			dns_upstream_req_next(r);
		return;
	}
	if (a->probe) {
		dns_upstream_probe_done(a, ok, status, rtt);
		return;
	}
	/*
	 * Health follows what the attempt itself came to, whether or not the
	 * request still waits for it: a hedged attempt answered late proves
	 * the upstream alive, one that ran into c-ares' timeout counts as a
	 * failure (unless our timer counted it already).
	 */
	if (ok || !a->counted)
		dns_upstream_mark(
		    a->up, ok, rtt, dns_upstream_status_reason(status));
	if (!ok)
		log_debug(u->lg, "dns.upstream.fail",
		    LOG_S("upstream", a->up->addr.text),
		    LOG_S("reason", dns_upstream_status_reason(status)),
		    LOG_B("pending", r != NULL));
	if (r == NULL) {
		/* Orphaned: the request finished, moved on or was cancelled. */
		free(a);
		return;
	}
	if (!ok)
		r->fail = dns_upstream_fail_class(status);
	dns_upstream_req_attempt_done(r, a, ok, abuf, alen, rtt);
}

static void
dns_upstream_req_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_upstream_req *r = arg;

	(void)fd;
	(void)what;
	if (r->magic != DNS_UPSTREAM_REQ_MAGIC)
		abort();
	if (dns_upstream_now(r->set) >= r->deadline_ms) {
		dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	if (r->cur != NULL) {
		/*
		 * The attempt outlived its wait: it stays as a straggler (its
		 * answer may still come and wins while we are pending) and the
		 * next upstream is asked. Only a full attempt timeout counts
		 * against the upstream's health; a hedge leaves that to the
		 * attempt's own outcome.
		 */
		if (!r->cur->hedged) {
			r->cur->counted = true;
			dns_upstream_mark(r->cur->up, false, 0, "timeout");
		} else
			log_debug(r->set->lg, "dns.upstream.hedge",
			    LOG_S("upstream", r->cur->up->addr.text));
		r->cur = NULL;
	}
	dns_upstream_req_next(r);
}

static void
dns_upstream_req_next(struct dns_upstream_req *r)
{
	struct dns_upstreams *u = r->set;
	uint64_t now = dns_upstream_now(u);
	struct dns_upstream_attempt *a;
	struct dns_upstream *up;
	struct timeval tv;
	uint64_t left;
	unsigned wait;
	size_t t;
	bool hedged;

	if (now >= r->deadline_ms || r->norder == 0) {
		dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	if (r->tried >= r->norder * DNS_UPSTREAM_ROUNDS_MAX ||
	    r->natts >= DNS_UPSTREAM_ATTEMPTS_MAX) {
		/* Nothing left to try: wait for stragglers until the end. */
		if (r->natts == 0) {
			dns_upstream_req_finish(r, NULL, 0, NULL);
			return;
		}
		left = r->deadline_ms - now;
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (long)(left % 1000) * 1000;
		evtimer_add(r->timer, &tv);
		return;
	}
	t = r->tried++;
	up = u->ups[r->order[t % r->norder]];
	a = calloc(1, sizeof(*a));
	if (a == NULL) {
		dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	left = r->deadline_ms - now;
	wait = dns_upstream_attempt_wait(r, up, t, left, &hedged);
	a->magic = DNS_UPSTREAM_ATT_MAGIC;
	a->up = up;
	a->req = r;
	a->tcp = r->tcp;
	a->hedged = hedged;
	a->start_ms = now;
	r->cur = a;
	r->atts[r->natts++] = a;
	if (!dns_upstream_att_send(r, r->tcp ? &up->tcp : &up->udp, a))
		wait = 0; /* failed at once (no socket): next one next turn */
	tv.tv_sec = wait / 1000;
	tv.tv_usec = (long)(wait % 1000) * 1000;
	evtimer_add(r->timer, &tv);
}

struct dns_upstream_req *
dns_upstream_send(struct dns_upstreams *u, const uint8_t *query, size_t qlen,
    bool tcp, unsigned attempt_ms, unsigned budget_ms,
    dns_upstream_done_fn done, void *arg)
{
	struct dns_upstream_req *r;
	struct timeval zero = {0, 0};

	if (u->n == 0 || qlen < 12 || qlen > DNS_UPSTREAM_QUERY_MAX)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->magic = DNS_UPSTREAM_REQ_MAGIC;
	r->set = u;
	r->query = malloc(qlen);
	r->timer = evtimer_new(u->base, dns_upstream_req_timer_cb, r);
	if (r->query == NULL || r->timer == NULL) {
		if (r->timer != NULL)
			event_free(r->timer);
		free(r->query);
		free(r);
		return NULL;
	}
	memcpy(r->query, query, qlen);
	r->qlen = qlen;
	r->tcp = tcp;
	r->attempt_ms = attempt_ms != 0 ? attempt_ms : u->o.attempt_timeout_ms;
	if (budget_ms == 0)
		budget_ms = DNS_UPSTREAM_BUDGET_MS_DEFAULT;
	r->deadline_ms = dns_upstream_now(u) + budget_ms;
	r->done = done;
	r->arg = arg;
	r->fail = STATS_DNS_FAIL_UPSTREAM_ERROR;
	dns_upstream_req_order(r);
	LIST_INSERT_HEAD(&u->reqs, r, entry);
	u->npending++;
	/*
	 * The first attempt starts on the next loop turn, so done can never
	 * run inside this call whatever happens to the attempt.
	 */
	evtimer_add(r->timer, &zero);
	return r;
}

void
dns_upstream_cancel(struct dns_upstream_req *r)
{
	if (r == NULL)
		return;
	if (r->magic != DNS_UPSTREAM_REQ_MAGIC)
		abort();
	dns_upstream_req_unlink(r);
	dns_upstream_req_free(r);
}

/* ---- probes ---- */

/* Presentation name -> wire (probe names only; plain LDH labels). */
static int
dns_upstream_name_wire(const char *s, uint8_t *out, size_t cap, size_t *len)
{
	size_t o = 0;

	while (*s != '\0') {
		const char *dot = strchr(s, '.');
		size_t n = dot != NULL ? (size_t)(dot - s) : strlen(s);

		if (n == 0 || n > 63 || o + 1 + n + 1 > cap)
			return -1;
		out[o++] = (uint8_t)n;
		memcpy(out + o, s, n);
		o += n;
		s += n;
		if (*s == '.')
			s++;
	}
	if (o + 1 > cap)
		return -1;
	out[o++] = 0;
	*len = o;
	return 0;
}

void
dns_upstreams_probe_now(struct dns_upstreams *u)
{
	uint8_t name[256], q[DNS_UPSTREAM_QUERY_MAX];
	size_t nlen, qlen, i;

	if (dns_upstream_name_wire(u->probe_name != NULL ? u->probe_name : "",
	        name, sizeof(name), &nlen) < 0 ||
	    dns_upstream_query_build(name, nlen,
	        u->probe_name != NULL ? DNS_UPSTREAM_PROBE_QTYPE_NAME
	                              : DNS_UPSTREAM_PROBE_QTYPE_ROOT,
	        1, false, false, q, sizeof(q), &qlen) < 0)
		return;
	for (i = 0; i < u->n; i++) {
		struct dns_upstream *up = u->ups[i];
		struct dns_upstream_attempt *a;

		if (up->probing)
			continue;
		a = calloc(1, sizeof(*a));
		if (a == NULL)
			return;
		a->magic = DNS_UPSTREAM_ATT_MAGIC;
		a->up = up;
		a->probe = true;
		a->start_ms = dns_upstream_now(u);
		up->probing = true;
		ares_send(up->udp.ch, q, (int)qlen, dns_upstream_attempt_cb, a);
		dns_upstream_chan_rearm(&up->udp);
	}
}

static void
dns_upstream_probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_upstreams *u = arg;

	(void)fd;
	(void)what;
	if (u->magic != DNS_UPSTREAM_MAGIC)
		abort();
	dns_upstreams_probe_now(u);
}

/* ---- the set ---- */

static int
dns_upstreams_build(struct dns_upstreams *u,
    const struct dns_upstream_addr *addrs, size_t n, struct dns_upstream **out,
    struct err *e)
{
	size_t i;

	if (n > DNS_UPSTREAMS_MAX) {
		err_set(e, "too many upstreams (%zu, max %d)", n,
		    DNS_UPSTREAMS_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		out[i] = dns_upstream_create(u, &addrs[i], e);
		if (out[i] == NULL) {
			while (i-- > 0)
				dns_upstream_destroy(out[i]);
			return -1;
		}
	}
	return 0;
}

struct dns_upstreams *
dns_upstreams_new(struct event_base *base,
    const struct dns_upstream_addr *addrs, size_t n,
    const struct dns_upstreams_opts *o, struct log *lg, struct stats *st,
    struct err *e)
{
	struct dns_upstreams *u;
	int rc;

	u = calloc(1, sizeof(*u));
	if (u == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	u->magic = DNS_UPSTREAM_MAGIC;
	u->base = base;
	u->lg = lg;
	u->st = st;
	if (o != NULL)
		u->o = *o;
	if (u->o.attempt_timeout_ms == 0)
		u->o.attempt_timeout_ms = DNS_UPSTREAM_ATTEMPT_MS_DEFAULT;
	if (u->o.probe_interval_ms == 0)
		u->o.probe_interval_ms = DNS_UPSTREAM_PROBE_MS_DEFAULT;
	if (u->o.clock == NULL)
		u->o.clock = now_mono_ms_clock;
	u->o.probe_name = NULL;
	if (u->o.mark != 0)
		dns_upstream_check_ephemeral(lg);
	rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		err_set(e, "ares_library_init: %s", ares_strerror(rc));
		free(u);
		return NULL;
	}
	u->lib_init = true;
	if (o != NULL && o->probe_name != NULL && o->probe_name[0] != '\0') {
		uint8_t tmp[256];
		size_t tl;

		if (dns_upstream_name_wire(
		        o->probe_name, tmp, sizeof(tmp), &tl) < 0) {
			err_set(e, "bad probe name");
			goto out_free;
		}
		u->probe_name = strdup(o->probe_name);
		if (u->probe_name == NULL) {
			err_set(e, "out of memory");
			goto out_free;
		}
	}
	if (dns_upstreams_build(u, addrs, n, u->ups, e) < 0)
		goto out_free;
	u->n = n;
	{
		struct timeval tv;

		u->probe_timer =
		    event_new(base, -1, EV_PERSIST, dns_upstream_probe_cb, u);
		if (u->probe_timer == NULL) {
			err_set(e, "event_new failed");
			goto out_free;
		}
		tv.tv_sec = u->o.probe_interval_ms / 1000;
		tv.tv_usec = (long)(u->o.probe_interval_ms % 1000) * 1000;
		event_add(u->probe_timer, &tv);
	}
	return u;
out_free:
	dns_upstreams_free(u);
	return NULL;
}

void
dns_upstreams_free(struct dns_upstreams *u)
{
	size_t i;

	if (u == NULL)
		return;
	while (!LIST_EMPTY(&u->reqs)) {
		struct dns_upstream_req *r = LIST_FIRST(&u->reqs);

		r->done = NULL;
		dns_upstream_req_unlink(r);
		dns_upstream_req_free(r);
	}
	for (i = 0; i < u->n; i++)
		dns_upstream_destroy(u->ups[i]);
	u->n = 0;
	if (u->probe_timer != NULL)
		event_free(u->probe_timer);
	free(u->probe_name);
	if (u->lib_init)
		ares_library_cleanup();
	u->magic = DNS_UPSTREAM_DEAD_MAGIC;
	free(u);
}

int
dns_upstreams_replace(struct dns_upstreams *u,
    const struct dns_upstream_addr *addrs, size_t n, struct err *e)
{
	struct dns_upstream *fresh[DNS_UPSTREAMS_MAX], *old[DNS_UPSTREAMS_MAX];
	struct dns_upstream_req *r;
	size_t nold = u->n, i;

	if (dns_upstreams_build(u, addrs, n, fresh, e) < 0)
		return -1;
	memcpy(old, u->ups, sizeof(old));
	memset(u->ups, 0, sizeof(u->ups));
	memcpy(u->ups, fresh, n * sizeof(fresh[0]));
	u->n = n;
	/* Tearing down the old channels detaches their attempts. */
	for (i = 0; i < nold; i++)
		dns_upstream_destroy(old[i]);
	/* Every pending request restarts on the new list, next loop turn. */
	LIST_FOREACH(r, &u->reqs, entry)
	{
		struct timeval zero = {0, 0};

		dns_upstream_req_orphan_all(r);
		dns_upstream_req_order(r);
		evtimer_add(r->timer, &zero);
	}
	return 0;
}

size_t
dns_upstreams_count(const struct dns_upstreams *u)
{
	return u->n;
}

size_t
dns_upstreams_healthy(const struct dns_upstreams *u)
{
	size_t i, k = 0;

	for (i = 0; i < u->n; i++)
		if (u->ups[i]->healthy)
			k++;
	return k;
}

size_t
dns_upstreams_pending(const struct dns_upstreams *u)
{
	return u->npending;
}

size_t
dns_upstreams_status(
    const struct dns_upstreams *u, struct dns_upstream_status *out, size_t max)
{
	size_t i;

	for (i = 0; i < u->n && i < max; i++) {
		const struct dns_upstream *up = u->ups[i];

		memset(&out[i], 0, sizeof(out[i]));
		memcpy(out[i].text, up->addr.text, sizeof(out[i].text));
		out[i].healthy = up->healthy;
		out[i].consecutive_failures = up->consecutive_failures;
		out[i].queries = up->queries;
		out[i].failures = up->failures;
		out[i].last_ok_ms = up->last_ok_ms;
		out[i].last_fail_ms = up->last_fail_ms;
		out[i].last_rtt_ms = up->last_rtt_ms;
	}
	return i;
}
