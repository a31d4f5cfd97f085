/*
 * The proxy's internals, shared by the files of egressd/proxy/ only:
 * the connection and proxy structs, their bounds, and the functions one
 * stage calls in another.
 */
#ifndef EGRESSD_PROXY_PROXY_INT_H
#define EGRESSD_PROXY_PROXY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "egressd/base/log.h"
#include "egressd/base/uproxy.h"
#include "egressd/proto/http_chunk.h"
#include "egressd/proto/http_decode.h"
#include "egressd/proto/http_head.h"
#include "egressd/proto/tls_hello.h"
#include "egressd/proxy/proxy.h"
#include "egressd/proxy/tls_sess.h"
#include "policy/policy.h"
#include "util/addr.h"
#include "vault/vault.h"

/* linux/netfilter_ipv6/ip6_tables.h pulls in the iptables ABI; the one
 * constant is stable (the same number as SO_ORIGINAL_DST). */
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

#define PROXY_MAGIC 0x50525859u /* "PRXY" */
#define PROXY_CONN_MAGIC 0x50434f4eu /* "PCON" */
#define PROXY_CONN_DEAD 0xdeadc0deu /* freed by proxy_conn_reap_cb */
/* Bytes read before a decision: a whole ClientHello in its records, or a
 * whole request head, and no more. */
#define PROXY_PEEK_MAX                                                         \
	(HTTP_HEAD_MAX > TLS_HELLO_MSG_MAX + 4 * TLS_RECORD_HEADER_LEN         \
	        ? HTTP_HEAD_MAX                                                \
	        : TLS_HELLO_MSG_MAX + 4 * TLS_RECORD_HEADER_LEN)
#define PROXY_IO_MAX (128u << 10) /* bytes per read or write call */
#define PROXY_SPLICE_MAX (256u << 10) /* pipe size of a spliced direction */
/* empty pass-through pipes kept for reuse (the rest are closed) */
#define PROXY_PIPES_FREE 64
/* a spliced direction that found no pipe to lend tries again after */
#define PROXY_PIPE_RETRY_MS 20
#define PROXY_LOG_RATE 50 /* proxy.refused lines per second, burst 100 */
/* Compressed bytes decoded per step of a redacted response: with the
 * decoder's ratio cap, what one step can add to the client's queue
 * before the watermark is checked again. */
#define PROXY_DECODE_STEP 4096

enum proxy_proto { PROTO_UNKNOWN, PROTO_TLS, PROTO_HTTP };

/* Plain HTTP, client -> origin: where the request stream is. */
enum http_phase {
	H_HEAD, /* waiting for a head */
	H_BODY, /* inside a body (struct proxy_body) */
	H_UPGRADE, /* client: an Upgrade request waits for its response */
	H_RAW, /* after 101: bytes both ways, no HTTP */
	H_STOPPED, /* client: refused; nothing more goes upstream */
};

/* Requests forwarded and not yet answered (pipelining bound): the
 * client's stream pauses beyond it. */
#define PROXY_PIPELINE_MAX 16
#define PROXY_CLOSE_LINE "Connection: close\r\n" /* 19 bytes */
/* A chunked request body the vault substitutes in is held until all of
 * it is here: its framing may take this much (a body of at most
 * VAULT_SUBST_BODY_MAX in chunks of a few KiB); beyond, it is forwarded
 * as it comes, like a Content-Length body over the bound. */
#define PROXY_SUBST_WIRE_MAX (VAULT_SUBST_BODY_MAX + (64u << 10))
/* in-place redaction: chains of a response body looked at per scan */
#define PROXY_RED_SEGS 16
_Static_assert(
    PROXY_IN_MAX >= PROXY_PEEK_MAX, "a side's input bound holds a whole head");
/* What one decoding step of a compressed redacted response can queue
 * past the client's watermark: PROXY_DECODE_STEP compressed bytes at the
 * decoder's ratio cap. */
#define PROXY_DECODE_STEP_OUT                                                  \
	((size_t)PROXY_DECODE_STEP * HTTP_DECODE_RATIO_MAX)
#define PROXY_MAX2(a, b) ((a) > (b) ? (a) : (b))
/*
 * The most one connection holds in its buffers (docs/proxy.md, "Memory
 * under load"; e2e proxy_memory_bound): each side's input (a TLS side a
 * record more), or on the client's side a request held whole for
 * substitution; each side's queue to its watermark plus one step past
 * it: the other side's input moved on, a request rewritten with a
 * substituted body, a decoded step. Some 6.4 MiB; 1.3 MiB without
 * substitution. Not counted: TLS, zlib and redactor state, the
 * allocator's slack.
 */
#define PROXY_CONN_BUF_MAX                                                     \
	(PROXY_IN_MAX + PROXY_COALESCE_MAX +                                   \
	    PROXY_MAX2(PROXY_IN_MAX + PROXY_COALESCE_MAX,                      \
	        HTTP_HEAD_MAX + PROXY_SUBST_WIRE_MAX) +                        \
	    PROXY_HIGH_WM +                                                    \
	    PROXY_MAX2(PROXY_IN_MAX + PROXY_COALESCE_MAX,                      \
	        VAULT_SUBST_HEAD_MAX + VAULT_SUBST_BODY_OUT_MAX) +             \
	    PROXY_HIGH_WM +                                                    \
	    PROXY_MAX2(                                                        \
	        PROXY_IN_MAX + PROXY_COALESCE_MAX, PROXY_DECODE_STEP_OUT))
_Static_assert(PROXY_CONN_BUF_MAX < (7u << 20),
    "docs/proxy.md states under 7 MiB per connection");

/* One message body's framing, either direction. */
struct proxy_body {
	enum http_body kind;
	uint64_t left; /* HTTP_BODY_LENGTH */
	struct http_chunk ch; /* HTTP_BODY_CHUNKED */
};

/*
 * A request forwarded and not yet answered: what its response's framing
 * and treatment depend on. A response is always the oldest record's.
 */
struct proxy_rq {
	/* the method, exactly (a response to HEAD has no body; case
	 * matters) */
	char method[HTTP_METHOD_MAX + 1];
	bool upgrade; /* it asked for an upgrade: a 101 may answer it */
	/* its lone "Connection: close" was left out upstream
	 * (proxy_http_close_field): its response says close to the client */
	bool close;
	bool http10; /* no chunked framing back */
	/* the vault revision its response is redacted against (a
	 * reference): every request to a bound origin has one. NULL: the
	 * origin is not a bound one */
	struct vault *vault;
};

/* Pass-through: one direction of a spliced connection. */
struct proxy_splice {
	struct proxy_conn *c;
	int dir; /* 0: client -> origin, 1: origin -> client */
	int from, to; /* the sockets (owned by the connection's sfd) */
	/* the pipe, lent by the proxy (proxy_pipe_get) while bytes are in
	 * it and given back once it is empty and from has nothing more to
	 * read: an idle direction holds none; -1 then */
	int pr, pw;
	size_t inpipe; /* bytes in the pipe */
	bool eof, shut; /* from said EOF; FIN sent to to */
	bool drained; /* the last read took less than it asked for */
	struct event *rev, *wev;
	struct event *retry; /* no pipe to lend: try again shortly */
};

struct proxy_listener {
	int fd, family;
	struct event *ev;
};

/* PEEK: the first bytes, read in place before the decision. */
struct proxy_conn_peek {
	struct event *ev; /* edge-triggered reads of c->fd */
	uint8_t *buf; /* what MSG_PEEK returned */
};

/* Terminated TLS: the two handshakes. */
struct proxy_conn_tls {
	bool term; /* terminated TLS (else pass-through or plain) */
	bool cli_ready, up_ready, up_failed; /* the handshakes */
	bool up_resumed; /* its upstream handshake resumed */
	bool cli_resumed; /* the client resumed a session */
	char up_why[128]; /* the upstream TLS failure, for the log */
};

/* Terminated: the origin connection and the pool. */
struct proxy_conn_origin {
	/* up came from the pool; up may go back to it (no request or
	 * response on it said Connection: close, no upgrade) */
	bool reused, keep;
	/* the vault revision of the latest credential injected on up (a
	 * reference; NULL: none went over it). Every response on up is
	 * redacted against it, whatever its request: an origin may echo a
	 * secret it saw earlier on the connection (an error page, a
	 * /whoami). It goes to the pool with up and comes back with it. */
	struct vault *vault;
	/* through the upstream proxy: the CONNECT under way (NULL: none),
	 * and whether it failed (terminated: the 502 waits for the
	 * client's handshake, c->tls.up_why says why) */
	struct uproxy_dial *dial;
	void (*dial_done)(struct proxy_conn *c, int fd);
	bool via_failed;
};

/* Pass-through after the decision: splice(2), no bufferevents. */
struct proxy_conn_splice {
	bool on;
	int fd[2]; /* client, origin sockets once spliced */
	struct proxy_splice dir[2];
};

/* The HTTP/1.1 relay (plain HTTP and terminated TLS). */
struct proxy_relay {
	bool cli_eof, up_eof; /* read side saw EOF */
	bool cli_shut, up_shut; /* we sent FIN toward it */
	enum http_phase hphase, rphase; /* client -> origin, origin -> client */
	size_t hcursor, rcursor; /* http_head_find_end's scan positions */
	/* when the client's request head now arriving was first seen (the
	 * head deadline, o.head_ms, runs from there); 0: none is */
	uint64_t head_t0_ms;
	struct proxy_body hbody, rbody;
	/* forwarded requests awaiting their responses, oldest first: a
	 * ring of rq_n records from rq_first (proxy_rq_head, _push, _pop).
	 * The one place per-request state lives. */
	struct proxy_rq rq[PROXY_PIPELINE_MAX];
	size_t rq_first, rq_n;
	/* such a request was forwarded: no head after it is read, and the
	 * client connection closes once its response is out (RFC 9112
	 * §9.6), its origin connection going to the pool */
	bool cli_closing;
	/* a whole request head waits in the client's input for responses
	 * still pending (pipelining bound, or one request at a time to a
	 * bound origin): proxy_resp_done takes it up, even after the
	 * client's FIN */
	bool head_waiting;
	int refuse_status; /* a refusal waiting for the origin to finish */
	enum proxy_reason refuse_why;
	/* the refused request is the last one upstream (its body's framing
	 * was bad): no response to it will come, so it is not waited for */
	bool refuse_inflight;
	/* the request the rules denied (refuse_why PROXY_REQUEST_DENIED):
	 * what its answer says; NULL: none was */
	struct proxy_denial *denial;
	/* the request rules of the last host judged, compiled from the
	 * policy then in force (a reference to it): rebuilt when the host or
	 * the policy changes, dropped at every commit (proxy_rejudge) */
	struct policy_host_rules *rules;
};

/* A request the request rules denied (proxy_judge_request): its 403's
 * X-Egress-Denied and JSON body, and its proxy.denied line. Every field
 * is the sandbox's own request or the policy's verdict: no secret. */
struct proxy_denial {
	enum policy_req_reason reason;
	long rule; /* the deciding user rule's index; -1: none */
	char method[HTTP_METHOD_MAX + 1];
	char host[TLS_HELLO_SNI_MAX + 1];
	char path[]; /* normalized; as received when it is not judgeable */
};

/* The Credential Vault's state on the relay: the response being
 * redacted, and a request body held for substitution. */
struct proxy_conn_vault {
	/* vault_host_bound for the connection's name (c->name) on its port
	 * in the revision bound_v (a reference: no other revision can take
	 * its address while it is kept), asked again of a new revision */
	struct vault *bound_v;
	bool bound;
	/* the response being redacted (its request injected) */
	struct vault_redactor *red;
	bool red_chunked; /* re-chunk the redacted data */
	/* its trailer section (chunked only), re-sent redacted after the
	 * last chunk; wiped and freed with the response */
	struct http_chunk_trailers *rtrail;
	/* its body is compressed (--vault-compressed decode): decoded, then
	 * redacted and re-chunked as identity */
	struct http_decode *dec;
	enum http_coding dec_coding;
	/* its head and first decoded bytes, held back until
	 * HTTP_DECODE_RATIO_FREE bytes are decoded, the body ends or the
	 * origin pauses: a bomb caught by then is a clean 502, not a cut
	 * body */
	struct evbuffer *hold;
	/* egressd answered "100 Continue" itself: it waits for the body of
	 * the request at the head of the stream (placeholder substitution) */
	bool cont_sent;
	/* A request whose body is held for substitution: the head's length
	 * (0: none held) and, for a Content-Length body, the input length
	 * that completes it; the request is judged again only then. A
	 * chunked one is scanned as it arrives (each byte once, however it
	 * trickles in): the framing's state, how many bytes after the head
	 * it has seen, and its answer once it has one. */
	size_t hold_end, hold_wait;
	bool sub_scanning;
	uint64_t sub_scan;
	enum http_chunk_rc sub_rc;
	struct http_chunk sub_ch;
	/* The request at the head of the stream waits for an oauth2
	 * token (proxy_mint.c): among mint's waiters, its head unread
	 * until the answer; mint_why: why the token endpoint failed */
	struct proxy_mint *mint;
	TAILQ_ENTRY(proxy_conn) mint_e;
	char mint_why[160];
};

/*
 * A client connection, from accept to close: its life (state, deadline,
 * close path) here, each stage's state in a part of its own.
 */
struct proxy_conn {
	uint32_t magic; /* PROXY_CONN_MAGIC: its callbacks check it */
	struct proxy *p;
	struct proxy_conn *prev, *next;
	/* closed (proxy_conn_close): nothing of it is left but the struct,
	 * on p->graveyard (dead_next) until proxy_conn_reap_cb frees it on the
	 * next loop turn, since callers up the stack may still hold it */
	bool closed;
	struct proxy_conn *dead_next;
	/* on p->settle: a callback of it ran in this loop turn */
	TAILQ_ENTRY(proxy_conn) settle_e;
	bool settling;
	/* the bytes of its buffers when last measured (proxy_conn_settle_cb),
	 * counted in p->buffered */
	size_t buffered;
	enum proxy_state st;
	enum proxy_proto proto;
	struct bufferevent *cli, *up;
	int fd; /* the client's socket until cli owns it */
	struct event *timer; /* the deadline of the state */
	struct addr dst, peer;
	uint16_t dport, pport;
	char name[TLS_HELLO_SNI_MAX + 1]; /* SNI or first Host; "" */
	/* hooks.judge said PROXY_OK for name at dst:dport when
	 * hooks.judge_gen was judged_gen (proxy_judge_name): a request to
	 * that name is not judged again until the generation moves */
	bool judged;
	uint64_t judged_gen;
	bool refused; /* decided against before upstream */
	enum proxy_reason why; /* the refusal, or why it closed */
	uint64_t t0_ms, last_ms;
	uint64_t up_bytes, down_bytes;
	struct proxy_conn_peek peek;
	struct proxy_conn_tls tls;
	struct proxy_conn_origin origin;
	struct proxy_conn_splice splice;
	struct proxy_relay relay;
	struct proxy_conn_vault vault;
};

struct proxy {
	uint32_t magic;
	struct event_base *base;
	struct log *log;
	struct proxy_hooks h;
	struct proxy_opts o;
	struct proxy_listener l[2];
	size_t nl;
	uint16_t port;
	int reserve_fd; /* closed to accept-and-drop on EMFILE */
	bool paused;
	struct proxy_conn *conns;
	/* connections to look at once this loop turn's callbacks ran
	 * (proxy_conn_settle_cb) */
	TAILQ_HEAD(, proxy_conn) settle;
	struct event *settle_ev;
	/* closed connections, freed by reap_ev on the next loop turn */
	struct proxy_conn *graveyard;
	struct event *reap_ev;
	/* the sum of every connection's buffered (o.buf_max bounds it) */
	size_t buffered;
	struct proxy_status st;
	struct log_limiter lim;
	struct tls_ca *ca; /* termination; NULL: never */
	SSL_CTX *sctx, *cctx;
	struct tls_sess_cache *sess; /* upstream sessions to resume */
	struct proxy_pool *pool; /* idle upstream connections to reuse */
	/* the client side's bufferevent callbacks (proxy_conn_attach_cli), set
	 * by proxy_new: the connection's life sits below the stages they
	 * drive, and names them only through these */
	bufferevent_data_cb cli_read_cb, cli_write_cb;
	bufferevent_event_cb cli_event_cb;
	/* pass-through pipes: npipes open (at most PROXY_PIPES_MAX), up to
	 * PROXY_PIPES_FREE empty ones kept for the next burst */
	size_t npipes, nfree;
	int pipe_free[PROXY_PIPES_FREE][2];
	/* oauth2 token requests in flight, one per binding (proxy_mint.c),
	 * the resolver of egressd's own fetches (proxy_fetch.c), and the
	 * relay's resumption of a request that waited (failed: refuse it) */
	LIST_HEAD(, proxy_mint) mints;
	struct evdns_base *fetch_dns;
	void (*mint_done_cb)(struct proxy_conn *c, bool failed);
	/* http credential sources kept fetched (proxy_source.c) */
	struct proxy_sources *sources;
};

/* proxy_source.c: the background fetches of http credential sources,
 * started with the proxy (the first look at once), stopped with it. */
struct proxy_sources;
int proxy_source_start(struct proxy *p, struct err *e);
void proxy_source_free_all(struct proxy *p);

/* proxy_mint.c */
/* c's request waits for binding's token (v: the revision that said
 * VAULT_MINT); 0, or -1 (*why) when no token request can start. */
int proxy_mint_wait(struct proxy_conn *c, struct vault *v, const char *binding,
    const char **why);
/* c no longer waits (the close path). */
void proxy_mint_forget(struct proxy_conn *c);
/* Every flight cancelled, the fetch resolver freed (proxy_free). */
void proxy_mint_free_all(struct proxy *p);
/* The per-binding counters row of name (stats.h): found, added, or the
 * shared last one once the table is full. */
struct stats_vault_binding *proxy_mint_row(
    struct proxy_status *st, const char *name);

struct proxy_mint;
struct evdns_base;

/* proxy_rq.c */
struct proxy_rq *proxy_rq_head(struct proxy_conn *c);
struct proxy_rq *proxy_rq_push(
    struct proxy_conn *c, const struct http_head *h, struct vault *v);
void proxy_rq_pop(struct proxy_conn *c);

/* proxy_http.c */
void proxy_http_hold_back(struct bufferevent *src, struct bufferevent *dst);
enum http_chunk_rc proxy_http_chunk_scan(struct http_chunk *ch,
    struct evbuffer *in, size_t from, size_t lim, uint64_t max, size_t *used,
    struct err *e);
int proxy_http_body_take(struct proxy_body *b, struct evbuffer *in,
    size_t *take, bool *done, struct err *e);
void proxy_http_body_start(struct proxy_body *b, const struct http_head *h);
bool proxy_http_upgrade_ok(const struct http_head *h);
int proxy_http_close_field(
    const struct proxy_conn *c, const struct http_head *h);
int proxy_http_move_head(struct proxy_conn *c, const char *buf, size_t end,
    const struct http_head *h, int skip, bool identity);
int proxy_http_head_close(struct proxy_conn *c, const char *buf, size_t end,
    const struct http_head *h);
bool proxy_http_header_removed(
    const struct http_span *name, const struct vault_inject *vi);

/* proxy_pipe.c */
bool proxy_pipe_get(struct proxy_splice *s);
void proxy_pipe_put(struct proxy_splice *s);

/* proxy_judge.c */
bool proxy_judge_bound(struct proxy_conn *c, const char *name);
enum proxy_reason proxy_judge_name(struct proxy_conn *c, const char *name);
enum proxy_reason proxy_judge_host(
    struct proxy_conn *c, const struct http_head *h, int *status, char *name);
enum proxy_reason proxy_judge_request(struct proxy_conn *c,
    const struct http_head *h, const char *name, int *status);

/* proxy_conn.c */
void proxy_conn_set_state(struct proxy_conn *c, enum proxy_state st);
void proxy_conn_arm(struct proxy_conn *c, unsigned ms);
void proxy_conn_close(struct proxy_conn *c, enum proxy_reason why);
struct proxy_conn *proxy_conn_arg(void *arg);
bool proxy_conn_relaying(const struct proxy_conn *c);
void proxy_conn_reap_cb(evutil_socket_t fd, short what, void *arg);
int proxy_conn_attach_cli(struct proxy_conn *c, SSL *ssl);
void proxy_conn_fin(struct bufferevent *b);
struct bufferevent *proxy_conn_other(
    struct proxy_conn *c, struct bufferevent *b);
int proxy_conn_move(struct proxy_conn *c, struct bufferevent *src,
    struct bufferevent *dst, size_t max);
void proxy_conn_coalesce(struct bufferevent *b);
void proxy_conn_kick(struct bufferevent *b);
void proxy_conn_touch(struct proxy_conn *c);
void proxy_conn_settle_cb(evutil_socket_t fd, short what, void *arg);
void proxy_conn_shut(struct proxy_conn *c, struct bufferevent *b);
void proxy_conn_maybe_done(struct proxy_conn *c);
void proxy_conn_fin_after(struct proxy_conn *c, struct bufferevent *b);
void proxy_conn_head_started(struct proxy_conn *c);
void proxy_conn_timer_cb(evutil_socket_t fd, short what, void *arg);
void proxy_conn_pause_accept(struct proxy *p);

/* proxy_refuse.c */
void proxy_refuse_tls(struct proxy_conn *c, enum proxy_reason why);
void proxy_refuse_http_detail(struct proxy_conn *c, int status,
    enum proxy_reason why, const char *detail);
void proxy_refuse_http(struct proxy_conn *c, int status, enum proxy_reason why);

/* proxy_splice.c */
void proxy_splice_start(struct proxy_conn *c);

/* proxy_relay.c */
void proxy_relay_read(struct proxy_conn *c, struct bufferevent *b);
void proxy_relay_up_read_cb(struct bufferevent *b, void *arg);
void proxy_relay_write_cb(struct bufferevent *b, void *arg);
/* The request c paused for an oauth2 token goes on: decided again, or
 * refused 502 vault_token (failed; c->vault.mint_why says why). */
void proxy_relay_mint_done(struct proxy_conn *c, bool failed);
void proxy_relay_event(struct proxy_conn *c, struct bufferevent *b, short what);

/* proxy_connect.c */
/* Both sides ready (connected, and handshaken when terminated): RELAY
 * (or splice), the watermarks set, what the client sent so far relayed. */
void proxy_connect_start_relay(struct proxy_conn *c);
void proxy_connect_term_fail(struct proxy_conn *c);
void proxy_connect(struct proxy_conn *c);
void proxy_connect_cli_read_cb(struct bufferevent *b, void *arg);
void proxy_connect_cli_event_cb(struct bufferevent *b, short what, void *arg);

/* proxy_tunnel.c */
/* CONNECT through p->o.upstream to c's target (CONNECT state, its
 * deadline armed); done(c, fd) follows from the loop: fd the tunnel,
 * connected and now c's, or -1 (logged; c->origin.via_failed set and
 * c->tls.up_why says why, in egressd's words). */
void proxy_tunnel_dial(
    struct proxy_conn *c, void (*done)(struct proxy_conn *c, int fd));

/* proxy_peek.c */
void proxy_peek_cb(evutil_socket_t fd, short what, void *arg);

/* proxy_listen.c */
int proxy_listen(struct proxy *p, int family, const char *addr, struct err *e);

#endif
