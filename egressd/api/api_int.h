/*
 * api_int: what the control API's own files share: api.c (listeners,
 * routing, the module's life), api_conn.c (connections, deadlines,
 * refusals), api_auth.c (token, backoff), api_reply.c (answers),
 * api_pending.c (answers waiting for the commit queue), api_policy.c
 * (/policy), api_status.c (probes, /metrics, /v1/status), api_credvault.c
 * (the Credential Vault routes). Nothing outside egressd/api/ includes it.
 * Calls go one way: api.c -> the routes -> api_pending.c -> api_reply.c.
 */
#ifndef EGRESSD_API_INT_H
#define EGRESSD_API_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <sys/socket.h>

#include "egressd/api/api.h"
#include "egressd/api/api_frame.h"

#define API_MAGIC 0x41504921u /* "API!" */

/*
 * A peer that sent wrong tokens: after API_AUTH_FREE_FAILS of them, its
 * requests to authenticated routes are answered 429 without looking at
 * the token for a backoff that doubles from API_AUTH_BACKOFF_MS to
 * API_AUTH_BACKOFF_MAX_MS; a request refused so counts as one more
 * failure. IPv6 peers are keyed by their /64 (one host has many
 * addresses), Unix socket peers share one key. A right token clears the
 * entry; API_AUTH_FORGET_S without failures forgets it.
 */
struct api_peer {
	bool used;
	uint8_t key[17]; /* family, then the address (IPv6: /64) */
	uint32_t fails;
	uint64_t until_us, last_us;
};

/*
 * One accepted connection, from the bufferevent we create for it until
 * api_conn_sweep finds evhttp has freed that bufferevent. Every byte that
 * arrives passes api_conn_input_cb (an evbuffer callback on the input,
 * run before evhttp reads the bytes), which frames it (api_frame) to run
 * the head and body deadlines and to answer oversized requests itself.
 */
#define API_CONN_MAGIC 0x41504943u /* "APIC" */

struct api_conn {
	uint32_t magic;
	struct api *a;
	struct bufferevent *bev;
	struct api_frame fr;
	uint64_t seq; /* fr.seq the deadline was armed for */
	struct event *deadline;
	bool slot; /* holds one of the API_CONNS_MAX slots */
	bool refused; /* our own answer sent: input dropped until close */
	bool closing; /* read side shut: evhttp sees EOF and frees it */
	/* Answers waiting for the commit queue: a connection with one has no
	 * event added (evhttp stops reading until it answers), so the sweep
	 * must not take it for freed. */
	unsigned pending;
};

struct api {
	uint32_t magic;
	struct event_base *base;
	/* The TCP listener's server (TLS when tls is set) and the Unix
	 * socket's (always plain: libevent 2.1 has one bufferevent hook per
	 * server, not per listener). */
	struct evhttp *http, *http_unix;
	struct ssl_ctx_st *tls; /* SSL_CTX of --api-tls-cert, or NULL */
	struct api_hooks h;
	char *token; /* NULL when none configured */
	size_t tokenlen;
	bool insecure_no_token;
	size_t max_rules;
	struct api_timing timing; /* api_opts' with the defaults filled in */
	/* api_opts' trusted_proxies (api_auth_forwarded_tls). */
	struct api_cidr trusted_proxies[API_TRUSTED_PROXIES_MAX];
	size_t ntrusted_proxies;
	uint64_t start_time_s;
	struct log *log;
	struct stats *stats;

	struct evhttp_bound_socket *tcp, *unx;
	uint16_t tcp_port;
	char tcp_text[API_ADDR_MAX];
	char *unix_path; /* unlinked on free */

	/*
	 * Connections, tracked from accept by the bufferevent we create for
	 * each (evhttp_set_bevcb). libevent 2.1 has no close hook for a
	 * server connection, so api_conn_sweep() finds the live ones: a live
	 * connection always has its read or write event added on the base.
	 * At API_CONNS_MAX the listeners pause (new connections wait in the
	 * kernel backlog) and a timer sweeps until a slot frees.
	 */
	struct api_conn *conns[API_CONNS_MAX + 1]; /* +1: past the cap */
	size_t nall; /* entries of conns */
	size_t nconns; /* of them holding a slot */
	bool paused;
	struct event *ev_sweep;

	/* Peers that sent wrong tokens (api_auth_*). */
	struct api_peer peers[API_AUTH_PEERS];
};

/* One request being answered. */
struct api_req {
	struct api *a;
	struct evhttp_request *req;
	const char *path;
	enum evhttp_cmd_type cmd;
	int status;
	/* Vault writes may come this way (contract §4): TLS, a loopback
	 * peer, or the Unix socket. */
	bool transport_ok;
	/* For the api.request line, written when the answer goes out. */
	uint64_t t0;
	char peer[API_ADDR_MAX];
	bool quiet; /* a route whose successes log at debug */
	bool deferred; /* answered later, by an api_pending */
};

/*
 * A request whose answer waits for the commit queue (api_mutation). Owns
 * its copy of the request (r; r.req stays valid until answered, even
 * when the client has left) and holds its connection out of the sweep.
 * Created by the route, freed once answered (api_pending_free).
 */
#define API_PENDING_MAGIC 0x41504e44u /* "APND" */

struct api_pending {
	struct api_mutation m; /* first: the hooks hand back &m */
	uint32_t magic;
	struct api_req r;
	struct api_conn *c; /* NULL: not one of ours (a test's request) */
	int op; /* enum api_op or the vault's */
	/* /policy: a copy of the body the worker reads. */
	char *body;
	size_t len;
	char *path; /* r.path's copy: the answer may free the request */
	struct api_verdict v;
	const char *mode; /* of the snapshot decided against (static) */
	int code; /* a verdict decide found after the parse (vault check) */
	char msg[API_MSG_MAX];
};

/* A pending answer for r (r->deferred set), or NULL: out of memory. */
struct api_pending *api_pending_new(struct api_req *r);
/* Into the daemon's queue, or inline without one. -1: not queued, the
 * request answered 503 and p freed. */
int api_pending_submit(struct api_pending *p);
/* After the answer: the api.request line, the connection let go, p
 * freed (the body wiped: a vault body holds secrets). */
void api_pending_free(struct api_pending *p);
/* The mutation p carries. */
struct api_pending *api_pending_of(struct api_mutation *m);

/* Answers. Each sends the reply and records its status in r. */
void api_reply(struct api_req *r, int code, const char *ctype, const char *body,
    size_t len);
/* text/plain with a trailing newline, as Go's http.Error writes it. */
void api_reply_text(struct api_req *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Compact JSON plus a newline, as Go's json.Encoder writes it. Steals o. */
void api_reply_json(struct api_req *r, int code, json_t *o);
/* 405 "method not allowed" with the Allow header. */
void api_reply_405(struct api_req *r, const char *allow);

/* The api.request line of r, written when its answer went out
 * (api_reply.c). */
void api_reply_log(const struct api_req *r);

/* Probes, metrics and status (api_status.c). */
void api_status_healthz_cb(struct api_req *r); /* /healthz */
void api_status_readyz_cb(struct api_req *r); /* /readyz */
void api_status_metrics_cb(struct api_req *r); /* /metrics */
void api_status_cb(struct api_req *r); /* /v1/status */
/*
 * The probes' and /policy GET's body: {"status":"ok","mode":..,
 * "enforcementMode":..,"reason":..,"policy":..}, empty fields omitted.
 * Steals policy; NULL when out of memory.
 */
json_t *api_status_body(
    const char *mode, const char *enf, const char *reason, json_t *policy);
/* The enforcement_mode hook's answer, "" for none. */
const char *api_status_enforcement(const struct api *a);

/* The token and the wrong tokens' backoff (api_auth.c). */
bool api_auth_token_matches(const struct api *a, const char *got);
/* The request carries the token in force (or none is configured). */
bool api_auth_authorized(const struct api *a, struct evhttp_request *req);
/* The backoff key of a peer: family, then the address (IPv6: /64). */
void api_auth_peer_key(const struct sockaddr *sa, uint8_t key[17]);
/* A loopback peer or the Unix socket (vault writes may come this way). */
bool api_auth_peer_local(const struct sockaddr *sa);
/*
 * A request that came through a TLS-terminating proxy the operator
 * trusts: the peer lies in one of a's trusted_proxies and req carries
 * exactly one X-Forwarded-Proto, "https" (case-insensitive, blanks
 * around it ignored). Anything else (no header, two, "https, http", a
 * peer outside the networks) is false.
 */
bool api_auth_forwarded_tls(
    const struct api *a, const struct sockaddr *sa, struct evhttp_request *req);
/* Seconds the peer with key still waits; 0: not backing off. */
unsigned api_auth_backoff_s(struct api *a, const uint8_t key[17], uint64_t now);
void api_auth_failed(
    struct api *a, const uint8_t key[17], uint64_t now, const char *peer);
void api_auth_ok(struct api *a, const uint8_t key[17], uint64_t now);

/* /policy (api_policy.c). */
void api_policy_cb(struct api_req *r);

/* Connections (api_conn.c). */
void api_conn_free(struct api_conn *c);
/* Frees the connections evhttp has freed; resumes paused listeners. */
void api_conn_sweep(struct api *a);
void api_conn_sweep_timer_cb(evutil_socket_t fd, short what, void *arg);
/* evhttp's bufferevent hooks (plain, TLS): a tracked connection each. */
struct bufferevent *api_conn_bev_cb(struct event_base *base, void *arg);
struct bufferevent *api_conn_bev_tls_cb(struct event_base *base, void *arg);
/* evcon holds one of the API_CONNS_MAX slots (taking a free one if it
 * came in past the cap); false: none is free. */
bool api_conn_admit(struct api *a, struct evhttp_connection *evcon);

/* The Credential Vault routes (api_credvault.c). */
void api_credvault_cb(struct api_req *r); /* /credential-vault */
void api_credvault_sub_cb(struct api_req *r); /* /credential-vault/... */

#endif
