/*
 * dns: the resolver's life cycle (dns.h): settings, listeners, upstreams,
 * status. The pipeline of one query starts in dns_pipeline.c; dns_int.h
 * names every file and what it owns.
 */
#include "egressd/dns/dns.h"

#include <event2/event.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "egressd/dns/dns_int.h"
#include "egressd/dns/dns_cache.h"
#include "egressd/base/log_agg.h"
#include "egressd/proto/dns_wire.h"
#include "util/addr.h"
#include "util/now.h"

#define DNS_RESOLV_CONF_DEFAULT "/etc/resolv.conf"

/* ---- clock ---- */

static uint64_t
dns_clock_thunk(void *arg)
{
	return dns_now(arg);
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

static void
dns_reaper_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;

	(void)fd;
	(void)what;
	if (d->magic != DNS_MAGIC)
		abort();
	dns_conn_reap(d);
}

static void
dns_deny_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns *d = arg;

	(void)fd;
	(void)what;
	if (d == NULL || d->magic != DNS_MAGIC)
		abort();
	dns_log_flush(d);
}

/* The settings of o and the hooks of h, defaults applied. */
static void
dns_settings(struct dns *d, const struct dns_opts *o, const struct dns_hooks *h,
    struct log *lg, struct stats *st)
{
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
}

/* The log limits, scratch, timers and cache. -1 and e: out of memory. */
static int
dns_start_state(struct dns *d, const struct dns_opts *o, struct err *e)
{
	struct timeval tv = {DNS_DENY_LOG_FLUSH_MS / 1000,
	    (DNS_DENY_LOG_FLUSH_MS % 1000) * 1000};

	log_agg_init(&d->deny_agg, DNS_DENY_LOG_RATE, DNS_DENY_LOG_BURST,
	    DNS_DENY_LOG_DEDUP_MS);
	log_limiter_init(&d->warn_lim, DNS_DENY_LOG_RATE, DNS_DENY_LOG_BURST,
	    DNS_DENY_LOG_DEDUP_MS);
	d->scratch = dns_msg_new();
	d->reaper = event_new(d->base, -1, 0, dns_reaper_cb, d);
	d->deny_flush =
	    event_new(d->base, -1, EV_PERSIST, dns_deny_flush_cb, d);
	if (d->resolv_conf == NULL || d->scratch == NULL || d->reaper == NULL ||
	    d->deny_flush == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	event_add(d->deny_flush, &tv);
	if (!o->cache_disable) {
		d->cache = dns_cache_new(o->cache_entries_max,
		    o->cache_bytes_max, dns_clock_thunk, d);
		if (d->cache == NULL) {
			err_set(e, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* dns.start: the port, the listeners and the upstreams in force. */
static void
dns_log_start(const struct dns *d, const struct dns_opts *o,
    const struct dns_upstream_addr *addrs, size_t n)
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
	log_info(d->lg, "dns.start", LOG_U("port", d->port),
	    LOG_B("ipv6", d->tcp6 != NULL), LOG_S("upstreams", list),
	    LOG_S("source", o->nupstreams > 0 ? "config" : d->resolv_conf),
	    LOG_U("mark", o->mark));
}

/* The upstream set of o (or resolv.conf), then dns.start. */
static int
dns_start_upstreams(struct dns *d, const struct dns_opts *o, struct err *e)
{
	struct dns_upstream_addr addrs[DNS_UPSTREAMS_MAX];
	struct dns_upstreams_opts uo;
	size_t n = 0;

	if (dns_resolve_upstreams(
	        d, o->upstreams, o->nupstreams, addrs, &n, e) < 0)
		return -1;
	memset(&uo, 0, sizeof(uo));
	uo.mark = o->mark;
	uo.attempt_timeout_ms = d->attempt_ms;
	uo.probe_name = o->probe_name;
	uo.probe_interval_ms = o->probe_interval_ms;
	uo.clock = dns_clock_thunk;
	uo.clock_arg = d;
	d->ups = dns_upstreams_new(d->base, addrs, n, &uo, d->lg, d->st, e);
	if (d->ups == NULL)
		return -1;
	dns_log_start(d, o, addrs, n);
	return 0;
}

struct dns *
dns_new(struct event_base *base, const struct dns_opts *o,
    const struct dns_hooks *h, struct log *lg, struct stats *st, struct err *e)
{
	struct dns *d;

	d = calloc(1, sizeof(*d));
	if (d == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	d->magic = DNS_MAGIC;
	d->base = base;
	dns_settings(d, o, h, lg, st);
	if (dns_start_state(d, o, e) < 0)
		goto out_free;
	if (dns_listen_open(d, o, e) < 0)
		goto out_free;
	if (dns_start_upstreams(d, o, e) < 0)
		goto out_free;
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
	dns_listen_close(d);
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
