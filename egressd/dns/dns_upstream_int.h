/*
 * dns_upstream_int: what dns_upstream.c (requests, failover, health, the
 * set) and dns_upstream_chan.c (c-ares channels in libevent) share; not for
 * other modules, which use dns_upstream.h.
 */
#ifndef EGRESSD_DNS_UPSTREAM_INT_H
#define EGRESSD_DNS_UPSTREAM_INT_H

#include <ares.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "egressd/dns/dns_upstream.h"

struct event;
struct event_base;

#define DNS_UPSTREAM_MAGIC 0x44555053u /* "DUPS" set */
#define DNS_UPSTREAM_CHAN_MAGIC 0x4455434eu /* "DUCN" channel */
#define DNS_UPSTREAM_REQ_MAGIC 0x44555251u /* "DURQ" request */
#define DNS_UPSTREAM_ATT_MAGIC 0x44554154u /* "DUAT" attempt */
#define DNS_UPSTREAM_DEAD_MAGIC 0xdeadd0d0u

/* One fd c-ares asked us to watch. */
struct dns_upstream_fd {
	struct dns_upstream_fd *next;
	int fd;
	short what; /* EV_READ|EV_WRITE */
	struct event *ev;
};

struct dns_upstream;

struct dns_upstream_chan {
	uint32_t magic;
	struct dns_upstream *up;
	bool tcp;
	ares_channel ch;
	bool ch_ok;
	struct event *timer;
	struct dns_upstream_fd *fds;
};

struct dns_upstream {
	struct dns_upstreams *set;
	struct dns_upstream_addr addr;
	struct dns_upstream_chan udp, tcp;
	bool healthy;
	bool probing;
	unsigned consecutive_failures;
	uint64_t queries, failures;
	uint64_t last_ok_ms, last_fail_ms;
	unsigned last_rtt_ms;
	/* Smoothed round trip and its variation (RFC 6298 style), ms. */
	bool have_rtt;
	unsigned srtt_ms, rttvar_ms;
};

struct dns_upstream_attempt {
	uint32_t magic;
	struct dns_upstream *up;
	struct dns_upstream_req *req; /* NULL: probe, or orphaned */
	bool probe;
	bool tcp; /* on the upstream's TCP channel (TCP query or TC retry) */
	bool counted; /* our timer already counted it as failed */
	bool hedged; /* our timer fires before the attempt timeout */
	uint64_t start_ms;
};

/* Attempts one request may have outstanding (current + stragglers). */
#define DNS_UPSTREAM_ATTEMPTS_MAX (DNS_UPSTREAMS_MAX * DNS_UPSTREAM_ROUNDS_MAX)

struct dns_upstream_req {
	uint32_t magic;
	struct dns_upstreams *set;
	LIST_ENTRY(dns_upstream_req) entry; /* set->reqs */
	uint8_t *query;
	size_t qlen;
	bool tcp;
	bool in_send; /* inside ares_send: failures are deferred */
	unsigned attempt_ms;
	uint64_t deadline_ms;
	size_t order[DNS_UPSTREAMS_MAX];
	size_t norder;
	size_t tried; /* attempts started */
	bool send_failed; /* an ares_send under in_send failed at once */
	struct dns_upstream_attempt *cur; /* the attempt the timer guards */
	/*
	 * Every attempt still in c-ares, cur included: one that timed out
	 * by our clock stays here as a straggler, and its late answer still
	 * wins while the request is pending.
	 */
	struct dns_upstream_attempt *atts[DNS_UPSTREAM_ATTEMPTS_MAX];
	size_t natts;
	struct event *timer;
	enum stats_dns_fail fail; /* why, if it ends without an answer */
	dns_upstream_done_fn done;
	void *arg;
};

struct dns_upstreams {
	uint32_t magic;
	struct event_base *base;
	struct log *lg;
	struct stats *st;
	struct dns_upstreams_opts o;
	char *probe_name;
	struct dns_upstream *ups[DNS_UPSTREAMS_MAX];
	size_t n;
	LIST_HEAD(, dns_upstream_req) reqs;
	size_t npending;
	struct event *probe_timer;
	bool lib_init;
};

/* ---- dns_upstream_chan.c ---- */

/* Re-arms c's timer for c-ares' next timeout (after it was handed work). */
void dns_upstream_chan_rearm(struct dns_upstream_chan *c);

/* One upstream of the set u with its UDP and TCP channels; NULL and e. */
struct dns_upstream *dns_upstream_create(
    struct dns_upstreams *u, const struct dns_upstream_addr *a, struct err *e);

/* Tears up's channels down (their attempts end in ARES_EDESTRUCTION) and
 * frees it; NULL is a no-op. */
void dns_upstream_destroy(struct dns_upstream *up);

/*
 * The own port range is safe only while the kernel never hands it to the
 * sandbox's sockets: with an ip_local_port_range reaching into it, their
 * UDP from a port there is rejected (and logged once here, at start).
 */
void dns_upstream_check_ephemeral(struct log *lg);

#endif
