/*
 * dns_int: what the resolver's files share (not for other modules, which
 * use dns.h): the structs, and what each file offers the others. Each file
 * calls only files below it (no call cycle):
 *
 *   dns.c           life cycle: dns_new, dns_free, status, reload
 *   dns_listen.c    UDP sockets, TCP listener and accept, TCP framing
 *   dns_pipeline.c  one query: parse, local names, policy, cache, upstream
 *   dns_release.c   an answer: answer policy, learn, then the reply
 *   dns_send.c      the reply, over the transport the query came by; the
 *                   Extended DNS Error of each refusal (dns_send_denied)
 *   dns_conn.c      a TCP connection's state and its one close path
 *   dns_log.c       dns.deny (aggregated) and rate-limited warnings
 *   dns_req.c       queries in flight
 *
 * and, beside them, dns_cache.c and dns_upstream*.c (own headers).
 */
#ifndef EGRESSD_DNS_INT_H
#define EGRESSD_DNS_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "egressd/dns/dns.h"
#include "egressd/dns/dns_cache.h"
#include "egressd/base/log_agg.h"
#include "egressd/proto/dns_rewrite.h"
#include "egressd/proto/dns_wire.h"

struct bufferevent;
struct event;
struct evconnlistener;

#define DNS_MAGIC 0x444e5352u /* "DNSR" */
#define DNS_UDP_MAGIC 0x444e5544u /* "DNUD" */
#define DNS_CONN_MAGIC 0x444e5443u /* "DNTC" */
#define DNS_REQ_MAGIC 0x444e5251u /* "DNRQ" */
#define DNS_DEAD_MAGIC 0xdeadd15cu

struct dns;
struct dns_conn;
struct dns_udp;

/*
 * The UDP answers of one recvmmsg batch, sent together by one sendmmsg
 * when the batch is done (dns_send_batch_end): one system call for the
 * batch instead of one per answer. A slot holds any answer egressd sends
 * over UDP (it truncates above DNS_EDNS_UDP_SIZE); a bigger one goes out
 * at once.
 */
struct dns_udp_outq {
	struct dns_udp *u; /* the socket the batch came in by; NULL: none */
	unsigned n;
	struct mmsghdr msg[DNS_UDP_BATCH];
	struct iovec iov[DNS_UDP_BATCH];
	struct sockaddr_storage peer[DNS_UDP_BATCH];
	uint8_t buf[DNS_UDP_BATCH][DNS_EDNS_UDP_SIZE];
};

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
	struct dns_udp_outq outq;
	uint8_t out[DNS_MSG_MAX];
	uint8_t tmp[DNS_MSG_MAX];
};

/* The injected clock, or the real one (dns_new). */
static inline uint64_t
dns_now(const struct dns *d)
{
	return d->h.clock_ms(d->h.arg);
}

/* ---- dns_listen.c ---- */

/*
 * Binds the UDP and TCP listeners o asks for (IPv4 first: its port is the
 * port of all four) and starts reading. An IPv6 listener that cannot bind
 * is logged, not fatal. -1 and e: nothing usable could be bound.
 */
int dns_listen_open(struct dns *d, const struct dns_opts *o, struct err *e);
/* Closes every listener (not the connections accepted from them). */
void dns_listen_close(struct dns *d);

/* ---- dns_pipeline.c ---- */

/* One query from a client, any transport; msg is borrowed. */
void dns_pipeline_handle(
    struct dns *d, const struct dns_origin *o, const uint8_t *msg, size_t len);

/* ---- dns_release.c ---- */

/*
 * Runs the answer policy on a raw upstream answer (fresh or from the
 * cache, TTLs already aged), learns what survives, and replies. Returns
 * false when the answer itself is unusable (do not keep it).
 */
bool dns_release(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const char *qname, struct policy *pol,
    const uint8_t *msg, size_t len, uint32_t age, struct dns_cache_memo *memo);

/* ---- dns_send.c ---- */

void dns_send(
    struct dns *d, const struct dns_origin *o, const uint8_t *buf, size_t len);
/*
 * From begin to end, UDP answers to queries that came in by u are queued
 * and sent by end in one sendmmsg (each still attempted once, as dns_send
 * would: a full socket buffer or an error drops that answer only).
 */
void dns_send_batch_begin(struct dns *d, struct dns_udp *u);
void dns_send_batch_end(struct dns *d);
void dns_send_error(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode);
/* The same with an Extended DNS Error (borrowed; NULL for none). */
void dns_send_error_ede(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode, const struct dns_ede *ede);
void dns_send_negative(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode, uint32_t ttl);

/*
 * Why a name is denied; each has its own EXTRA-TEXT, a fixed string that
 * names no rule (the client reads it: dig prints it).
 */
enum dns_deny_why {
	DNS_DENY_POLICY = 0, /* the policy denies the name */
	DNS_DENY_NO_POLICY, /* no policy in force: fail closed */
	DNS_DENY_CNAME, /* a CNAME/DNAME target of the answer is denied */
};
/*
 * NXDOMAIN with the synthesized SOA (TTL ttl) and, to a client that sent
 * an OPT record, the Extended DNS Error 15 "Blocked" with why's text.
 */
void dns_send_denied(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, enum dns_deny_why why, uint32_t ttl);
/* UDP answers above the client's limit become TC=1 ("ask over TCP"). */
void dns_send_answer(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const uint8_t *buf, size_t len);

/* ---- dns_conn.c ---- */

void dns_conn_set_state(struct dns_conn *c, enum dns_conn_state to);
/*
 * The one close path. Idempotent; reason is a fixed string. Queries still
 * in flight stay in flight but lose their way back. The struct itself is
 * freed on the next loop turn (dns_conn_reap), since callers up the stack
 * may hold it.
 */
void dns_conn_close(struct dns_conn *c, const char *reason);
/* Frees the connections closed since the last call. */
void dns_conn_reap(struct dns *d);
bool dns_conn_output_full(const struct dns_conn *c);
void dns_conn_pause(struct dns_conn *c);
/* Called when an answer went out or a query finished. */
void dns_conn_after_reply(struct dns_conn *c);

/* ---- dns_req.c ---- */

/* Into d->reqs and, for TCP, its connection's list (counted in flight). */
void dns_req_link(struct dns *d, struct dns_req *r);
void dns_req_unlink(struct dns_req *r);
void dns_req_free(struct dns_req *r);

/* ---- dns_log.c ---- */

/* A denial of qname: the on_deny hook, then dns.deny (aggregated). */
void dns_log_deny(struct dns *d, const char *qname, uint16_t qtype,
    const char *reason, const char *denied, const struct policy_rule *rule);
/* Writes what the rate limit holds back (every DNS_DENY_LOG_FLUSH_MS). */
void dns_log_flush(struct dns *d);
/* A warning, at most DNS_DENY_LOG_RATE a second per (ev, qname). */
void dns_log_warn(struct dns *d, const char *ev, const char *qname,
    const char *reason, const char *detail);

#endif
