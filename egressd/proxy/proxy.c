#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h> /* ev_read, ev_write: the kicks */
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "egressd/base/defaults.h"
#include "egressd/proto/http_chunk.h"
#include "egressd/proto/http_decode.h"
#include "egressd/proto/http_head.h"
#include "egressd/base/log.h"
#include "egressd/proxy/proxy.h"
#include "egressd/proxy/proxy_pool.h"
#include "egressd/proxy/proxy_tls.h"
#include "egressd/proxy/tls_ca.h"
#include "egressd/base/sock.h"
#include "egressd/proto/tls_hello.h"
#include "egressd/proxy/tls_sess.h"
#include "util/now.h"
#include "util/secmem.h"
#include "policy/policy_binding.h"
#include "policy/policy_apicreds.h"
#include "vault/vault.h"

/* linux/netfilter_ipv6/ip6_tables.h pulls in the iptables ABI; the one
 * constant is stable (the same number as SO_ORIGINAL_DST). */
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80
#endif

#define PROXY_MAGIC 0x50525859u /* "PRXY" */
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
	 * (proxy_close_field): its response says close to the client */
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

struct proxy_conn {
	struct proxy *p;
	struct proxy_conn *prev, *next;
	/* on p->settle: a callback of it ran in this loop turn */
	TAILQ_ENTRY(proxy_conn) settle_e;
	bool settling;
	/* the bytes of its buffers when last measured (proxy_settle_cb),
	 * counted in p->buffered */
	size_t buffered;
	enum proxy_state st;
	enum proxy_proto proto;
	struct bufferevent *cli, *up;
	int fd; /* the client's socket until cli owns it */
	struct event *peek_ev; /* PEEK: edge-triggered reads of fd */
	uint8_t *pbuf; /* PEEK: what MSG_PEEK returned */
	bool term; /* terminated TLS (else pass-through or plain) */
	bool cli_ready, up_ready, up_failed; /* terminated: handshakes */
	/* terminated: up came from the pool; up may go back to it (no
	 * request or response on it said Connection: close, no upgrade) */
	bool up_reused, up_keep;
	bool up_resumed; /* terminated: its upstream handshake resumed */
	/* the vault revision of the latest credential injected on up (a
	 * reference; NULL: none went over it). Every response on up is
	 * redacted against it, whatever its request: an origin may echo a
	 * secret it saw earlier on the connection (an error page, a
	 * /whoami). It goes to the pool with up and comes back with it. */
	struct vault *up_vault;
	bool cli_resumed; /* terminated: the client resumed a session */
	char tls_why[128]; /* the upstream TLS failure, for the log */
	/* pass-through after the decision: splice(2), no bufferevents */
	bool spliced;
	int sfd[2]; /* client, origin sockets once spliced */
	struct proxy_splice sp[2];
	struct event *timer;
	struct addr dst, peer;
	uint16_t dport, pport;
	char name[TLS_HELLO_SNI_MAX + 1]; /* SNI or first Host; "" */
	bool refused; /* decided against before upstream */
	enum proxy_reason why; /* the refusal, or why it closed */
	uint64_t t0_ms, last_ms;
	uint64_t up_bytes, down_bytes;
	bool cli_eof, up_eof; /* read side saw EOF */
	bool cli_shut, up_shut; /* we sent FIN toward it */
	/* plain HTTP */
	enum http_phase hphase, rphase; /* client -> origin, origin -> client */
	size_t hcursor, rcursor; /* http_head_find_end's scan positions */
	/* when the client's request head now arriving was first seen (the
	 * head deadline, o.head_ms, runs from there); 0: none is */
	uint64_t head_t0_ms;
	struct proxy_body hbody, rbody;
	/* forwarded requests awaiting their responses, oldest first: a
	 * ring of rq_n records from rq_first (proxy_rq_head, _push, _pop) */
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
	int refuse_status; /* a refusal waiting for the origin to finish */
	enum proxy_reason refuse_why;
	/* the refused request is the last one upstream (its body's framing
	 * was bad): no response to it will come, so it is not waited for */
	bool refuse_inflight;
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
	 * (proxy_settle_cb) */
	TAILQ_HEAD(, proxy_conn) settle;
	struct event *settle_ev;
	/* the sum of every connection's buffered (o.buf_max bounds it) */
	size_t buffered;
	struct proxy_status st;
	struct log_limiter lim;
	struct tls_ca *ca; /* termination; NULL: never */
	SSL_CTX *sctx, *cctx;
	struct tls_sess_cache *sess; /* upstream sessions to resume */
	struct proxy_pool *pool; /* idle upstream connections to reuse */
	/* pass-through pipes: npipes open (at most PROXY_PIPES_MAX), up to
	 * PROXY_PIPES_FREE empty ones kept for the next burst */
	size_t npipes, nfree;
	int pipe_free[PROXY_PIPES_FREE][2];
};

static const char *const proxy_reason_names[PROXY_NREASONS] = {
    [PROXY_OK] = "done",
    [PROXY_NO_SNI] = "no_sni",
    [PROXY_SNI_IP] = "sni_ip",
    [PROXY_ESNI] = "esni",
    [PROXY_NAME_DENIED] = "name_denied",
    [PROXY_ADDR_MISMATCH] = "addr_mismatch",
    [PROXY_BAD_HELLO] = "bad_hello",
    [PROXY_BAD_REQUEST] = "bad_request",
    [PROXY_NO_HOST] = "no_host",
    [PROXY_PORT_MISMATCH] = "port_mismatch",
    [PROXY_UNSUPPORTED] = "unsupported",
    [PROXY_NO_DST] = "no_original_dst",
    [PROXY_HELLO_TIMEOUT] = "hello_timeout",
    [PROXY_CONNECT_FAILED] = "connect_failed",
    [PROXY_CONNECT_TIMEOUT] = "connect_timeout",
    [PROXY_IDLE] = "idle",
    [PROXY_CLIENT_ERROR] = "client_error",
    [PROXY_UPSTREAM_ERROR] = "upstream_error",
    [PROXY_SHUTDOWN] = "shutdown",
    [PROXY_MISDIRECTED] = "misdirected",
    [PROXY_VAULT_MISROUTED] = "vault_misrouted",
    [PROXY_MEMORY] = "memory",
    [PROXY_UPSTREAM_TLS] = "upstream_tls",
    [PROXY_CLIENT_TLS] = "client_tls",
    [PROXY_VAULT_REFUSED] = "vault_refused",
    [PROXY_VAULT_AMBIGUOUS] = "vault_ambiguous",
    [PROXY_VAULT_UNSAFE] = "vault_unsafe",
    [PROXY_POLICY_CHANGED] = "policy_changed",
    [PROXY_VAULT_COMPRESSED] = "vault_compressed",
    [PROXY_VAULT_DECODE] = "vault_decode_failed",
    [PROXY_HEAD_TIMEOUT] = "head_timeout",
};

static const char *const proxy_state_names[PROXY_NSTATES] = {
    [PROXY_ST_PEEK] = "peek",
    [PROXY_ST_CONNECT] = "connect",
    [PROXY_ST_RELAY] = "relay",
    [PROXY_ST_REFUSE] = "refuse",
};

const char *
proxy_reason_name(enum proxy_reason r)
{
	return (unsigned)r < PROXY_NREASONS && proxy_reason_names[r] != NULL
	    ? proxy_reason_names[r]
	    : "?";
}

const char *
proxy_compressed_name(enum proxy_compressed c)
{
	static const char *const names[] = {
	    [PROXY_COMPRESSED_DECODED] = "decoded",
	    [PROXY_COMPRESSED_REFUSED] = "refused",
	    [PROXY_COMPRESSED_FAILED] = "failed",
	};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

const char *
proxy_state_name(enum proxy_state s)
{
	return (unsigned)s < PROXY_NSTATES ? proxy_state_names[s] : "?";
}

void
proxy_tls_alert(enum proxy_reason r, uint8_t out[7])
{
	/* RFC 8446 6: level fatal; decode_error for what does not parse,
	 * unrecognized_name for a missing or unusable SNI, access_denied
	 * for what the policy refuses. */
	uint8_t desc;

	switch (r) {
	case PROXY_BAD_HELLO:
		desc = 50;
		break;
	case PROXY_NO_SNI:
	case PROXY_SNI_IP:
	case PROXY_ESNI:
		desc = 112;
		break;
	default:
		desc = 49;
		break;
	}
	out[0] = 21; /* alert */
	out[1] = 3;
	out[2] = 3;
	out[3] = 0;
	out[4] = 2;
	out[5] = 2; /* fatal */
	out[6] = desc;
}

int
proxy_http_status(enum proxy_reason r)
{
	switch (r) {
	case PROXY_BAD_REQUEST:
	case PROXY_NO_HOST:
		return 400;
	case PROXY_UNSUPPORTED:
		return 501;
	case PROXY_MISDIRECTED:
	case PROXY_VAULT_MISROUTED:
		return 421;
	case PROXY_UPSTREAM_TLS:
	case PROXY_CONNECT_FAILED:
	case PROXY_CONNECT_TIMEOUT:
	case PROXY_VAULT_COMPRESSED:
	case PROXY_VAULT_DECODE:
		return 502;
	default:
		return 403;
	}
}

/* --- the request queue ---------------------------------------------------- */

/* The oldest request awaiting its response (c->rq_n > 0). */
static struct proxy_rq *
proxy_rq_head(struct proxy_conn *c)
{
	return &c->rq[c->rq_first];
}

/* Records a forwarded request h (c->rq_n < PROXY_PIPELINE_MAX); takes
 * the reference v (NULL: not a bound origin). */
static struct proxy_rq *
proxy_rq_push(struct proxy_conn *c, const struct http_head *h, struct vault *v)
{
	struct proxy_rq *r =
	    &c->rq[(c->rq_first + c->rq_n) % PROXY_PIPELINE_MAX];

	memset(r, 0, sizeof(*r));
	memcpy(r->method, h->method.p, h->method.n);
	r->method[h->method.n] = '\0';
	r->upgrade = h->conn_upgrade;
	r->http10 = h->minor == 0;
	r->vault = v;
	c->rq_n++;
	return r;
}

/* The oldest request's response is through: its record goes. */
static void
proxy_rq_pop(struct proxy_conn *c)
{
	struct proxy_rq *r = proxy_rq_head(c);

	vault_free(r->vault);
	memset(r, 0, sizeof(*r));
	c->rq_first = (c->rq_first + 1) % PROXY_PIPELINE_MAX;
	c->rq_n--;
}

/* --- connection life ------------------------------------------------------ */

static void proxy_resume_accept(struct proxy *p);

/*
 * Pass-through pipes. A spliced direction needs one only while bytes
 * are in flight, so they are lent per burst: taken from the proxy's
 * free list (or made, up to PROXY_PIPES_MAX in all) when a direction
 * reads, handed back once it is empty and the socket has nothing more.
 * Ten thousand idle pass-through connections then hold no pipe (four
 * descriptors and a pipe ring in the kernel each, before), and a busy
 * one reuses the same pipe without a syscall.
 */
static bool
proxy_pipe_get(struct proxy_splice *s)
{
	struct proxy *p = s->c->p;
	int pfd[2];

	if (s->pr != -1)
		return true;
	if (p->nfree > 0) {
		p->nfree--;
		s->pr = p->pipe_free[p->nfree][0];
		s->pw = p->pipe_free[p->nfree][1];
		return true;
	}
	if (p->npipes >= PROXY_PIPES_MAX ||
	    pipe2(pfd, O_NONBLOCK | O_CLOEXEC) == -1)
		return false;
	(void)fcntl(pfd[1], F_SETPIPE_SZ, PROXY_SPLICE_MAX);
	p->npipes++;
	s->pr = pfd[0];
	s->pw = pfd[1];
	return true;
}

/* Back to the free list when empty; closed when it still holds bytes
 * (a connection closing mid-burst). */
static void
proxy_pipe_put(struct proxy_splice *s)
{
	struct proxy *p = s->c->p;

	if (s->pr == -1)
		return;
	if (s->inpipe == 0 && p->nfree < PROXY_PIPES_FREE) {
		p->pipe_free[p->nfree][0] = s->pr;
		p->pipe_free[p->nfree][1] = s->pw;
		p->nfree++;
	} else {
		close(s->pr);
		close(s->pw);
		p->npipes--;
	}
	s->pr = s->pw = -1;
	s->inpipe = 0;
}

static void
proxy_set_state(struct proxy_conn *c, enum proxy_state st)
{
	c->p->st.by_state[c->st]--;
	c->st = st;
	c->p->st.by_state[st]++;
}

static void
proxy_arm(struct proxy_conn *c, unsigned ms)
{
	struct timeval tv = {ms / 1000, (long)(ms % 1000) * 1000};

	(void)evtimer_add(c->timer, &tv);
}

/* What a redacted response holds besides its redactor: the kept
 * trailer section (it may hold an echo of a secret: wiped), the
 * decoder (it wipes its window) and the held head and bytes (redacted
 * already). */
static void
proxy_trailers_free(struct proxy_conn *c)
{
	if (c->rtrail == NULL)
		return;
	secmem_wipe(c->rtrail, sizeof(*c->rtrail));
	free(c->rtrail);
	c->rtrail = NULL;
}

static void
proxy_red_state_free(struct proxy_conn *c)
{
	vault_redactor_free(c->red);
	c->red = NULL;
	proxy_trailers_free(c);
	http_decode_free(c->dec);
	c->dec = NULL;
	if (c->hold != NULL) {
		evbuffer_free(c->hold);
		c->hold = NULL;
	}
}

/* One vault.compressed line and its counter. */
static void
proxy_log_compressed(
    struct proxy_conn *c, enum proxy_compressed o, const char *reason)
{
	c->p->st.vault_compressed[o]++;
	log_at_(c->p->log, o == PROXY_COMPRESSED_DECODED ? LOG_INFO : LOG_WARN,
	    "vault.compressed", LOG_S("outcome", proxy_compressed_name(o)),
	    LOG_S("encoding", http_coding_name(c->dec_coding)),
	    LOG_S("mode", c->p->o.vault_decode ? "decode" : "refuse"),
	    LOG_S("reason", reason), LOG_S("name", c->name),
	    LOG_U("in", c->dec != NULL ? http_decode_in(c->dec) : 0),
	    LOG_U("out", c->dec != NULL ? http_decode_out(c->dec) : 0));
}

/*
 * A terminated client connection that ends in good order gets a TLS
 * close_notify before the FIN (RFC 8446 6.1): without it an OpenSSL 3
 * client reads an unexpected EOF, sends a fatal alert and drops the
 * session it would have resumed. One attempt on the non-blocking socket,
 * only when nothing is left unsent; a full socket buffer just skips it.
 */
static void
proxy_close_notify(struct proxy_conn *c, enum proxy_reason why)
{
	SSL *ssl;

	if (!c->term || !c->cli_ready || c->cli_eof ||
	    (why != PROXY_OK && why != PROXY_IDLE && why != PROXY_SHUTDOWN &&
	        why != PROXY_POLICY_CHANGED) ||
	    evbuffer_get_length(bufferevent_get_output(c->cli)) != 0 ||
	    (ssl = bufferevent_openssl_get_ssl(c->cli)) == NULL)
		return;
	(void)SSL_shutdown(ssl);
	ERR_clear_error();
}

/* The one close path. */
static void
proxy_conn_close(struct proxy_conn *c, enum proxy_reason why)
{
	struct proxy *p = c->p;
	char dst[ADDR_TEXT_MAX];

	if (!c->refused)
		c->why = why;
	if (c->dec != NULL) /* a response being decoded ends unfinished */
		proxy_log_compressed(
		    c, PROXY_COMPRESSED_FAILED, "connection_closed");
	/* A terminated origin's session, kept for the next connection to
	 * it (after the response: TLS 1.3 tickets have arrived by now). */
	if (c->term && c->up != NULL)
		tls_sess_keep(p->sess, bufferevent_openssl_get_ssl(c->up),
		    c->up_ready, c->name, &c->dst, c->dport);
	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	log_info(p->log, "proxy.closed",
	    LOG_S("decision",
	        c->refused                        ? "refused"
	            : c->term                     ? "terminated"
	            : c->up != NULL || c->spliced ? "passthrough"
	                                          : "none"),
	    LOG_S("reason", proxy_reason_name(c->why)),
	    LOG_S("proto",
	        c->proto == PROTO_TLS        ? "tls"
	            : c->proto == PROTO_HTTP ? "http"
	                                     : "unknown"),
	    LOG_S("dst", dst), LOG_S("name", c->name), LOG_U("up", c->up_bytes),
	    LOG_U("down", c->down_bytes), LOG_B("resumed", c->up_resumed),
	    LOG_B("cli_resumed", c->cli_resumed), LOG_B("reused", c->up_reused),
	    LOG_U("ms", now_mono_ms() - c->t0_ms));
	p->st.by_reason[c->why]++;
	p->st.by_state[c->st]--;
	p->st.active--;
	p->st.up_bytes += c->up_bytes;
	p->st.down_bytes += c->down_bytes;
	if (c->settling)
		TAILQ_REMOVE(&p->settle, c, settle_e);
	p->buffered -= c->buffered;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (c->peek_ev != NULL)
		event_free(c->peek_ev);
	free(c->pbuf);
	if (c->spliced) {
		int i;

		for (i = 0; i < 2; i++) {
			if (c->sp[i].rev != NULL)
				event_free(c->sp[i].rev);
			if (c->sp[i].wev != NULL)
				event_free(c->sp[i].wev);
			if (c->sp[i].retry != NULL)
				event_free(c->sp[i].retry);
			proxy_pipe_put(&c->sp[i]);
			close(c->sfd[i]);
		}
	}
	if (c->cli != NULL) {
		proxy_close_notify(c, why);
		bufferevent_free(c->cli);
	} else if (c->fd != -1)
		close(c->fd);
	if (c->up != NULL)
		bufferevent_free(c->up);
	proxy_red_state_free(c);
	{
		size_t i;

		for (i = 0; i < PROXY_PIPELINE_MAX; i++)
			vault_free(c->rq[i].vault);
	}
	vault_free(c->up_vault);
	event_free(c->timer);
	free(c);
	proxy_resume_accept(p);
}

static void proxy_splice_start(struct proxy_conn *c);
static void proxy_cli_read(struct bufferevent *b, void *arg);
static void proxy_write_cb(struct bufferevent *b, void *arg);
static void proxy_cli_event(struct bufferevent *b, short what, void *arg);

/*
 * The decision is made: the client's socket (its first bytes still
 * unread in the kernel) goes to a bufferevent, plain or, with ssl (taken
 * over), the server side of a terminated connection. -1: out of memory
 * (c stays consistent; the caller closes it).
 */
static int
proxy_attach_cli(struct proxy_conn *c, SSL *ssl)
{
	struct proxy *p = c->p;

	if (c->cli != NULL)
		return 0;
	if (c->peek_ev != NULL) {
		event_free(c->peek_ev);
		c->peek_ev = NULL;
	}
	free(c->pbuf);
	c->pbuf = NULL;
	if (ssl != NULL)
		c->cli = bufferevent_openssl_socket_new(p->base, c->fd, ssl,
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	else
		c->cli = bufferevent_socket_new(
		    p->base, c->fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->cli == NULL) {
		if (ssl != NULL)
			SSL_free(ssl);
		return -1;
	}
	c->fd = -1; /* the bufferevent closes it */
	bufferevent_setcb(
	    c->cli, proxy_cli_read, proxy_write_cb, proxy_cli_event, c);
	return 0;
}

/* FIN toward b (its output is flushed): close_notify first on TLS. */
static void
proxy_fin(struct bufferevent *b)
{
	SSL *ssl = bufferevent_openssl_get_ssl(b);

	if (ssl != NULL)
		(void)SSL_shutdown(ssl);
	(void)shutdown(bufferevent_getfd(b), SHUT_WR);
}

static void
proxy_log_refused(struct proxy_conn *c)
{
	char dst[ADDR_TEXT_MAX], key[ADDR_TEXT_MAX + 32];

	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	(void)snprintf(
	    key, sizeof(key), "%s|%s", dst, proxy_reason_name(c->why));
	if (!log_limiter_allow(&c->p->lim, key, now_mono_ms()))
		return;
	log_info(c->p->log, "proxy.refused",
	    LOG_S("proto", c->proto == PROTO_TLS ? "tls" : "http"),
	    LOG_S("reason", proxy_reason_name(c->why)), LOG_S("name", c->name),
	    LOG_S("dst", dst));
}

/*
 * Our answer is queued: send it, then FIN, then read and drop what the
 * client still sends for PROXY_LINGER_MS (closing with unread input
 * would reset the connection and could destroy the answer in flight).
 */
static void
proxy_refuse_send(struct proxy_conn *c, const void *msg, size_t len)
{
	if (!c->refused)
		c->p->st.refused++;
	c->refused = true;
	proxy_log_refused(c);
	if (c->up != NULL) {
		bufferevent_free(c->up);
		c->up = NULL;
	}
	if (proxy_attach_cli(c, NULL) == -1) {
		proxy_conn_close(c, c->why);
		return;
	}
	proxy_set_state(c, PROXY_ST_REFUSE);
	evbuffer_drain(bufferevent_get_input(c->cli),
	    evbuffer_get_length(bufferevent_get_input(c->cli)));
	bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
	bufferevent_setwatermark(c->cli, EV_READ, 0, 0);
	if (bufferevent_write(c->cli, msg, len) == -1) {
		proxy_conn_close(c, c->why);
		return;
	}
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	proxy_arm(c, PROXY_LINGER_MS);
}

static void
proxy_refuse_tls(struct proxy_conn *c, enum proxy_reason why)
{
	uint8_t alert[7];

	c->why = why;
	proxy_tls_alert(why, alert);
	proxy_refuse_send(c, alert, sizeof(alert));
}

/* detail: our own fixed text (never the peer's), or NULL. */
static void
proxy_refuse_http_detail(
    struct proxy_conn *c, int status, enum proxy_reason why, const char *detail)
{
	char msg[512];
	int body, n;
	char text[256];

	c->why = why;
	body = snprintf(text, sizeof(text), "egressd: %s%s%s\n",
	    proxy_reason_name(why), detail != NULL ? ": " : "",
	    detail != NULL ? detail : "");
	if (body >= (int)sizeof(text))
		body = snprintf(text, sizeof(text), "egressd: %s\n",
		    proxy_reason_name(why));
	n = snprintf(msg, sizeof(msg),
	    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
	    "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
	    status, http_reason(status), body, text);
	proxy_refuse_send(c, msg, (size_t)n);
}

static void
proxy_refuse_http(struct proxy_conn *c, int status, enum proxy_reason why)
{
	proxy_refuse_http_detail(c, status, why, NULL);
}

/* --- relaying ---------------------------------------------------------------- */

static struct bufferevent *
proxy_other(struct proxy_conn *c, struct bufferevent *b)
{
	return b == c->cli ? c->up : c->cli;
}

/* Stops src's reads while dst has PROXY_HIGH_WM queued; dst's write
 * callback (low watermark half that) resumes them. After every write
 * toward dst of what src sent (moved, rewritten or redacted). */
static void
proxy_hold_back(struct bufferevent *src, struct bufferevent *dst)
{
	if (evbuffer_get_length(bufferevent_get_output(dst)) >= PROXY_HIGH_WM)
		bufferevent_disable(src, EV_READ);
}

/*
 * Moves what src has read toward dst, at most max bytes (SIZE_MAX: all),
 * then holds src back (proxy_hold_back). -1: out of memory (the caller
 * closes).
 */
static int
proxy_move(struct proxy_conn *c, struct bufferevent *src,
    struct bufferevent *dst, size_t max)
{
	struct evbuffer *in = bufferevent_get_input(src);
	struct evbuffer *out = bufferevent_get_output(dst);
	size_t n = evbuffer_get_length(in);

	if (n > max)
		n = max;
	if (n == 0)
		return 0;
	if (evbuffer_remove_buffer(in, out, n) != (int)n)
		return -1;
	if (src == c->cli)
		c->up_bytes += n;
	else
		c->down_bytes += n;
	c->last_ms = now_mono_ms();
	proxy_hold_back(src, dst);
	return 0;
}

/*
 * A terminated client's pending response in one piece when it is small:
 * the TLS bufferevent seals one record, and makes one write(2), per
 * buffer segment, and a response is a head plus body segments (two
 * records and two syscalls for a 1 KiB answer, measured). Responses
 * are redacted before they get here, so the copy holds no secret.
 */
static void
proxy_coalesce(struct bufferevent *b)
{
	struct evbuffer *out = bufferevent_get_output(b);
	size_t n = evbuffer_get_length(out);

	if (n > 1 && n <= PROXY_COALESCE_MAX &&
	    evbuffer_peek(out, -1, NULL, NULL, 0) > 1)
		(void)evbuffer_pullup(out, -1);
}

/*
 * Writes what a bufferevent has queued in this loop turn instead of
 * after the next epoll_wait: libevent arms EPOLLOUT when the output
 * fills (and whenever EV_WRITE is enabled, even with nothing to write),
 * waits for it, writes, and disarms it: two epoll_ctl and a loop turn
 * per write on a socket that is almost always writable. Running the
 * bufferevent's own write event now writes at once (or, with nothing
 * queued, disarms it); the arm and the disarm then fall in one turn,
 * and the epoll changelist (egressd_base_new) folds them into nothing.
 * If the socket is full, the armed event carries on as usual. Only
 * during the relay (callers' duty: a plain bufferevent may still be
 * connecting before it) and, on TLS, after the handshake (its write
 * event is the handshake's until then).
 */
static void
proxy_kick(struct bufferevent *b)
{
	SSL *ssl;

	if (b == NULL || !(bufferevent_get_enabled(b) & EV_WRITE) ||
	    !event_pending(&b->ev_write, EV_WRITE, NULL))
		return;
	ssl = bufferevent_openssl_get_ssl(b);
	if (ssl != NULL && !SSL_is_init_finished(ssl))
		return;
	event_active(&b->ev_write, EV_WRITE, 1);
}

/*
 * Both TLS contexts read ahead: one read(2) takes what the socket holds
 * (a whole flight, several records) instead of two per record (header,
 * then body). OpenSSL then holds records the kernel no longer signals,
 * and bufferevent_openssl stops reading when SSL_pending() says 0, which
 * it does for a record not yet decrypted: without help those bytes wait
 * for the peer's next segment. So every loop turn in which one of a
 * connection's callbacks ran ends with proxy_settle_cb looking at it:
 * a TLS bufferevent still reading with bytes in OpenSSL gets its read
 * event run again. A partial record costs one read that finds the socket
 * empty, and stops there (no progress: no callback, no new look).
 */
static void
proxy_kick_read(struct bufferevent *b)
{
	SSL *ssl;

	if (b == NULL || !(bufferevent_get_enabled(b) & EV_READ))
		return;
	ssl = bufferevent_openssl_get_ssl(b);
	if (ssl == NULL || !SSL_is_init_finished(ssl) ||
	    SSL_has_pending(ssl) != 1)
		return;
	event_active(&b->ev_read, EV_READ, 1);
}

/* The bytes c's buffers hold: each side's input and queue, and a
 * decoded response's held start. */
static size_t
proxy_conn_bytes(const struct proxy_conn *c)
{
	struct bufferevent *b[2] = {c->cli, c->up};
	size_t n = c->hold != NULL ? evbuffer_get_length(c->hold) : 0;
	int i;

	for (i = 0; i < 2; i++)
		if (b[i] != NULL)
			n += evbuffer_get_length(bufferevent_get_input(b[i])) +
			    evbuffer_get_length(bufferevent_get_output(b[i]));
	return n;
}

/* c's callbacks ran this turn: its share of p->buffered, measured again.
 * (Each side is bounded on its own; this is the bound of them all.) */
static void
proxy_measure(struct proxy_conn *c)
{
	size_t n = proxy_conn_bytes(c);

	c->p->buffered = c->p->buffered - c->buffered + n;
	c->buffered = n;
}

/*
 * The connections' buffers together passed o.buf_max (thousands of
 * clients each filling its bounded buffers, or never reading): the one
 * holding the most is closed, then the next, until the total is under
 * again. Closing beats pausing everyone: the memory held by a client
 * that never reads is freed only by closing it, and the rest go on.
 * Runs after this turn's callbacks (nothing up the stack holds c).
 */
static void
proxy_shed(struct proxy *p)
{
	struct proxy_conn *c, *big;

	while (p->buffered > p->o.buf_max) {
		big = NULL;
		for (c = p->conns; c != NULL; c = c->next)
			if (big == NULL || c->buffered > big->buffered)
				big = c;
		if (big == NULL || big->buffered == 0)
			break; /* measured sums only: cannot happen */
		log_warn(p->log, "proxy.memory", LOG_S("name", big->name),
		    LOG_U("buffered", big->buffered),
		    LOG_U("total", p->buffered), LOG_U("max", p->o.buf_max));
		proxy_conn_close(big, PROXY_MEMORY);
	}
}

/* A callback of c runs: look at c again at the end of this loop turn.
 * (An event made active now runs in this turn, after those before it.) */
static void
proxy_touch(struct proxy_conn *c)
{
	if (c->settling)
		return;
	c->settling = true;
	TAILQ_INSERT_TAIL(&c->p->settle, c, settle_e);
	event_active(c->p->settle_ev, EV_TIMEOUT, 1);
}

static void
proxy_settle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *p = arg;
	struct proxy_conn *c;

	(void)fd;
	(void)what;
	while ((c = TAILQ_FIRST(&p->settle)) != NULL) {
		TAILQ_REMOVE(&p->settle, c, settle_e);
		c->settling = false;
		proxy_measure(c);
		if (c->st != PROXY_ST_RELAY)
			continue;
		proxy_kick_read(c->cli);
		proxy_kick_read(c->up);
	}
	if (p->buffered > p->o.buf_max)
		proxy_shed(p);
}

/* FIN toward b once its output is flushed (TCP half-close both ways). */
static void
proxy_shut(struct proxy_conn *c, struct bufferevent *b)
{
	bool *shut = b == c->cli ? &c->cli_shut : &c->up_shut;

	if (*shut || evbuffer_get_length(bufferevent_get_output(b)) != 0)
		return;
	*shut = true;
	proxy_fin(b);
}

/* Both directions ended and flushed: done. Returns true if c is gone. */
static bool
proxy_maybe_done(struct proxy_conn *c)
{
	if (c->cli_eof && c->up_eof && c->cli_shut && c->up_shut) {
		proxy_conn_close(c, PROXY_OK);
		return true;
	}
	return false;
}

/* The other side said its last: FIN toward b once b's queue is out (its
 * write callback sends it then). True if c is gone. */
static bool
proxy_fin_after(struct proxy_conn *c, struct bufferevent *b)
{
	bufferevent_setwatermark(b, EV_WRITE, 0, 0);
	proxy_shut(c, b);
	return proxy_maybe_done(c);
}

static enum proxy_reason proxy_judge_host(
    struct proxy_conn *c, const struct http_head *h, int *status, char *name);
static bool proxy_bound(struct proxy_conn *c, const char *name);
static int proxy_vault_request(struct proxy_conn *c, struct http_head *h,
    const char *name, struct evbuffer *in, size_t end, struct vault **used,
    uint64_t *body_taken, size_t *wait, int *status, enum proxy_reason *why);

/*
 * The chunked framing of lim bytes of in from offset from, fed to ch in
 * place (no pullup): *used is what it consumed. DONE or BAD (e) at the
 * first such event, DATA once ch has decoded more than max body bytes,
 * AGAIN when the lim bytes went in without either.
 */
static enum http_chunk_rc
proxy_chunk_scan(struct http_chunk *ch, struct evbuffer *in, size_t from,
    size_t lim, uint64_t max, size_t *used, struct err *e)
{
	struct evbuffer_ptr ptr;
	struct evbuffer_iovec v[16];
	const uint8_t *d;
	size_t u, nd, off, n;
	int nv, i;
	enum http_chunk_rc rc;

	*used = 0;
	while (*used < lim) {
		/* evbuffer_peek says how many extents it needed, which may
		 * be more than it filled: only v[0..16) are read */
		if (evbuffer_ptr_set(
		        in, &ptr, from + *used, EVBUFFER_PTR_SET) == -1 ||
		    (nv = evbuffer_peek(
		         in, (ev_ssize_t)(lim - *used), &ptr, v, 16)) <= 0)
			break;
		for (i = 0; i < nv && i < 16; i++) {
			n = v[i].iov_len < lim - *used ? v[i].iov_len
			                               : lim - *used;
			for (off = 0; off < n; off += u) {
				rc = http_chunk_feed(ch,
				    (const uint8_t *)v[i].iov_base + off,
				    n - off, &u, &d, &nd, e);
				*used += u;
				if (rc == HTTP_CHUNK_BAD ||
				    rc == HTTP_CHUNK_DONE)
					return rc;
				if (ch->total > max)
					return HTTP_CHUNK_DATA;
			}
		}
	}
	return HTTP_CHUNK_AGAIN;
}

/*
 * How many of the len bytes at the start of in belong to body b
 * (*take), and whether b ends there (*done). HTTP_BODY_CLOSE takes
 * everything and never ends (the origin's EOF ends it). Chunked framing
 * is checked by http_chunk; the bytes are forwarded as received, and
 * only those it consumed. -1: bad framing (e).
 */
static int
proxy_body_take(struct proxy_body *b, struct evbuffer *in, size_t *take,
    bool *done, struct err *e)
{
	size_t len = evbuffer_get_length(in);

	*take = 0;
	*done = false;
	switch (b->kind) {
	case HTTP_BODY_NONE:
		*done = true;
		return 0;
	case HTTP_BODY_LENGTH:
		*take = len < b->left ? len : (size_t)b->left;
		b->left -= *take;
		*done = b->left == 0;
		return 0;
	case HTTP_BODY_CLOSE:
		*take = len;
		return 0;
	case HTTP_BODY_CHUNKED:
		switch (
		    proxy_chunk_scan(&b->ch, in, 0, len, UINT64_MAX, take, e)) {
		case HTTP_CHUNK_BAD:
			return -1;
		case HTTP_CHUNK_DONE:
			*done = true;
			break;
		case HTTP_CHUNK_AGAIN:
		case HTTP_CHUNK_DATA:
			break;
		}
		return 0;
	}
	return 0;
}

static void
proxy_body_start(struct proxy_body *b, const struct http_head *h)
{
	b->kind = h->body;
	b->left = h->content_length;
	if (b->kind == HTTP_BODY_LENGTH && b->left == 0)
		b->kind = HTTP_BODY_NONE;
	if (b->kind == HTTP_BODY_CHUNKED)
		http_chunk_init(&b->ch);
}

/* An Upgrade the proxy relays: a GET asking for "websocket" alone
 * (h2c and anything else is refused). */
static bool
proxy_upgrade_ok(const struct http_head *h)
{
	const struct http_span *u = http_header_get(h, "upgrade", NULL);

	return u != NULL && h->conn_upgrade &&
	    http_span_eq(&h->method, "GET") && http_span_ieq(u, "websocket");
}

/* --- the Credential Vault on HTTP ------------------------------------------ */

static void
proxy_wipe_cleanup(const void *data, size_t len, void *arg)
{
	/* arg is data, without the const libevent gives it */
	(void)data;
	secmem_wipe(arg, len);
	free(arg);
}

/*
 * The index of h's Connection field when it is the only one and says
 * just "close" on an HTTP/1.1 request of a terminated connection, else
 * -1. Connection is hop-by-hop: egressd leaves it out upstream, so the
 * origin connection can go to the pool (proxy_pool.h) once the client,
 * which asked for close and so closes after the response (RFC 9112
 * §9.6), is gone. Anything else in Connection is forwarded as sent.
 */
static int
proxy_close_field(const struct proxy_conn *c, const struct http_head *h)
{
	int at = -1;
	size_t i;

	if (!c->term || h->minor != 1 || !h->conn_close || h->conn_upgrade)
		return -1;
	for (i = 0; i < h->nh; i++) {
		if (!http_span_ieq(&h->h[i].name, "connection"))
			continue;
		if (at != -1 || !http_span_ieq(&h->h[i].value, "close"))
			return -1;
		at = (int)i;
	}
	return at;
}

/*
 * Head buf[0..end) (parsed as h) into out without field skip's line (-1:
 * none) and the lines of every field named drop (NULL: none), with the
 * lines extra ("" for none) before the final CRLF. -1: no memory.
 */
static int
proxy_head_copy(struct evbuffer *out, const char *buf, size_t end,
    const struct http_head *h, int skip, const char *drop, const char *extra)
{
	size_t at = 0, i;

	for (i = 0; i < h->nh; i++) {
		const struct http_header *f = &h->h[i];
		size_t from = (size_t)(f->name.p - buf);
		size_t vend = (size_t)(f->value.p - buf) + f->value.n;
		const char *nl;

		if ((int)i != skip &&
		    !(drop != NULL && http_span_ieq(&f->name, drop)))
			continue;
		nl = memchr(buf + vend, '\n', end - vend);
		if (evbuffer_add(out, buf + at, from - at) == -1)
			return -1;
		at = nl != NULL ? (size_t)(nl - buf) + 1 : end;
	}
	/* the rest without the final CRLF, then extra and it */
	if (evbuffer_add(out, buf + at, end - 2 - at) == -1 ||
	    evbuffer_add(out, extra, strlen(extra)) == -1 ||
	    evbuffer_add(out, "\r\n", 2) == -1)
		return -1;
	return 0;
}

/*
 * Request head buf[0..end) (parsed as h) to up without field skip's line
 * (-1: none) and, with identity, with "Accept-Encoding: identity" in
 * place of the client's Accept-Encoding fields (a request on an origin
 * connection that carried a secret: its response is redacted, and a
 * compressed one would be refused). -1: no memory.
 */
static int
proxy_move_head(struct proxy_conn *c, const char *buf, size_t end,
    const struct http_head *h, int skip, bool identity)
{
	struct evbuffer *out = bufferevent_get_output(c->up);

	if (proxy_head_copy(out, buf, end, h, skip,
	        identity ? "accept-encoding" : NULL,
	        identity ? "Accept-Encoding: identity\r\n" : "") == -1)
		return -1;
	evbuffer_drain(bufferevent_get_input(c->cli), end);
	c->up_bytes += end;
	c->last_ms = now_mono_ms();
	proxy_hold_back(c->cli, c->up);
	return 0;
}

#define PROXY_CLOSE_LINE "Connection: close\r\n" /* 19 bytes */

/* Response head buf[0..end) to the client without its Connection
 * fields and with PROXY_CLOSE_LINE (the answer to a close request
 * whose close egressd kept from the origin). -1: no memory. */
static int
proxy_head_close(struct proxy_conn *c, const char *buf, size_t end,
    const struct http_head *h)
{
	if (proxy_head_copy(bufferevent_get_output(c->cli), buf, end, h, -1,
	        "connection", PROXY_CLOSE_LINE) == -1)
		return -1;
	evbuffer_drain(bufferevent_get_input(c->up), end);
	c->down_bytes += end;
	c->last_ms = now_mono_ms();
	return 0;
}

static bool
proxy_header_removed(
    const struct http_span *name, const struct vault_inject *vi)
{
	size_t i;

	if (http_span_ieq(name, "accept-encoding"))
		return true;
	for (i = 0; i < vi->nremove; i++)
		if (http_span_ieq(name, vi->remove[i]))
			return true;
	return false;
}

/* The per-binding row of name (stats.h): found, added, or the shared
 * last one once the table is full. */
static struct stats_vault_binding *
proxy_binding_row(struct proxy_status *st, const char *name)
{
	struct stats_vault_binding *r;
	size_t i;

	for (i = 0; i < st->nvault_bindings; i++)
		if (strcmp(st->vault_bindings[i].name, name) == 0)
			return &st->vault_bindings[i];
	if (st->nvault_bindings == STATS_VAULT_BINDINGS - 1)
		name = STATS_VAULT_OTHER;
	if (st->nvault_bindings == STATS_VAULT_BINDINGS)
		return &st->vault_bindings[STATS_VAULT_BINDINGS - 1];
	r = &st->vault_bindings[st->nvault_bindings++];
	(void)snprintf(r->name, sizeof(r->name), "%s", name);
	return r;
}

static void
proxy_log_inject(struct proxy_conn *c, const struct vault_inject *vi,
    const struct http_head *h, const char *name, const struct vault *v)
{
	static const char *const names[] = {
	    "no_match", "injected", "ambiguous", "refused"};
	char m[HTTP_METHOD_MAX + 1];
	size_t ml =
	    h->method.n < HTTP_METHOD_MAX ? h->method.n : HTTP_METHOD_MAX;

	memcpy(m, h->method.p, ml);
	m[ml] = '\0';
	if ((unsigned)vi->decision < 4) {
		c->p->st.vault_decisions[vi->decision]++;
		if (vi->binding != NULL)
			proxy_binding_row(&c->p->st, vi->binding)
			    ->decisions[vi->decision]++;
	}
	/* revision: the policy snapshot's; vault_revision: the API vault's
	 * (0 when the decision came from the operator's file alone). */
	log_info(c->p->log, "vault.inject",
	    LOG_S("decision",
	        (unsigned)vi->decision < 4 ? names[vi->decision] : "?"),
	    LOG_S("reason", vi->reason),
	    LOG_S("binding", vi->binding != NULL ? vi->binding : ""),
	    LOG_U("revision", vault_policy(v)->revision),
	    LOG_U("vault_revision", policy_apicreds_revision(vault_policy(v))),
	    LOG_S("host", name), LOG_U("port", c->dport), LOG_S("method", m),
	    LOG_S("path", vi->norm_path != NULL ? vi->norm_path : ""));
}

/* Adds the secret piece p[0..n) (malloc'd; taken) to out: wiped and
 * freed once sent, or when out is freed unsent. -1: out of memory. */
static int
proxy_add_secret(struct evbuffer *out, uint8_t *p, size_t n)
{
	if (evbuffer_add_reference(out, p, n, proxy_wipe_cleanup, p) == -1) {
		proxy_wipe_cleanup(p, n, p);
		return -1;
	}
	return 0;
}

/*
 * The rewritten request (tmp: plain pieces and wiped secret ones) to out
 * as one wiped piece: one TLS record and one write for a head instead of
 * one per piece. tmp is drained (its secret pieces wiped). -1: out of
 * memory (tmp left as it was).
 */
static int
proxy_add_joined(struct evbuffer *out, struct evbuffer *tmp)
{
	size_t n = evbuffer_get_length(tmp);
	uint8_t *p;

	if (n == 0)
		return 0;
	if ((p = malloc(n)) == NULL)
		return -1;
	if (evbuffer_copyout(tmp, p, n) != (ev_ssize_t)n) {
		free(p);
		return -1;
	}
	if (proxy_add_secret(out, p, n) == -1)
		return -1;
	evbuffer_drain(tmp, n);
	return 0;
}

/* Why a rewrite was refused: fixed text for the log and the decision. */
struct proxy_subst_refusal {
	int status;
	const char *reason;
};

/*
 * in[0..n), a piece of surface s, to out with its placeholders
 * substituted (vault_subst); *budget is what substitutions may still
 * produce and shrinks by what they did. 0; -1 refused (*r); -2 out of
 * memory.
 */
static int
proxy_add_subst(struct evbuffer *out, struct vault *v,
    const struct vault_inject *vi, enum vault_surface s, const char *in,
    size_t n, size_t *budget, struct proxy_subst_refusal *r)
{
	uint8_t *res;
	size_t len;
	struct err e;

	switch (vault_subst(v, vi, s, in, n, *budget, &res, &len, &e)) {
	case VAULT_SUBST_NONE:
		return n == 0 || evbuffer_add(out, in, n) == 0 ? 0 : -2;
	case VAULT_SUBST_DONE:
		*budget -= len;
		return proxy_add_secret(out, res, len) == 0 ? 0 : -2;
	case VAULT_SUBST_REFUSED:
		r->status = 400;
		r->reason = "a substituted header value holds CR, LF or NUL";
		return -1;
	case VAULT_SUBST_TOO_LARGE:
		r->status = s == VAULT_SURFACE_JSON || s == VAULT_SURFACE_FORM
		    ? 413
		    : 431;
		r->reason = "placeholder substitution too large";
		return -1;
	case VAULT_SUBST_NOMEM:
		break;
	}
	return -2;
}

/*
 * The body surface of an injected request h: a Content-Length body of 1
 * to VAULT_SUBST_BODY_MAX bytes, or a chunked one (its size is known
 * once it is all here: proxy_subst_gather), with one Content-Type, at
 * most one Content-Encoding (vault_subst_body_surface decides on them),
 * when the binding substitutes in bodies. NONE: the body is forwarded as
 * it comes.
 */
static enum vault_surface
proxy_subst_body(const struct http_head *h, const struct vault_inject *vi)
{
	const struct http_span *ct, *ce;
	size_t nct, nce;

	if (!(vi->subst_in & POLICY_SUBST_BODY))
		return VAULT_SURFACE_NONE;
	if (h->body != HTTP_BODY_CHUNKED &&
	    (h->body != HTTP_BODY_LENGTH || h->content_length == 0 ||
	        h->content_length > VAULT_SUBST_BODY_MAX))
		return VAULT_SURFACE_NONE;
	ct = http_header_get(h, "content-type", &nct);
	ce = http_header_get(h, "content-encoding", &nce);
	if (nct != 1 || nce > 1)
		return VAULT_SURFACE_NONE;
	return vault_subst_body_surface(
	    ct->p, ct->n, ce != NULL ? ce->p : NULL, ce != NULL ? ce->n : 0);
}

/*
 * The request of an injected decision, rewritten into tmp: the request
 * line with the normalized path and the query, the client's headers (Host
 * as name, the normalized host the binding matched) but
 * those vi removes and Accept-Encoding (and Expect when egressd answered
 * it, Content-Length, Transfer-Encoding and Trailer when the body is
 * rewritten: it goes with a Content-Length), "Accept-Encoding:
 * identity", the credential lines, then the body body[0..blen) of
 * surface bs when a placeholder occurs in it (*body_done). Path, query,
 * header values and body have their placeholders substituted; every
 * piece holding a value is a copy wiped once sent. 0; -1 refused (*r);
 * -2 out of memory.
 */
static int
proxy_vault_rewrite(struct proxy_conn *c, struct evbuffer *tmp, struct vault *v,
    const struct vault_inject *vi, const struct http_head *h, const char *name,
    enum vault_surface bs, const char *body, size_t blen, bool *body_done,
    struct proxy_subst_refusal *r)
{
	size_t budget = VAULT_SUBST_HEAD_MAX, nblen = 0, i;
	uint8_t *nb = NULL;
	uint8_t *sec;
	struct err e;
	int rc = 0;

	*body_done = false;
	if (bs != VAULT_SURFACE_NONE) {
		switch (vault_subst(v, vi, bs, body, blen,
		    VAULT_SUBST_BODY_OUT_MAX, &nb, &nblen, &e)) {
		case VAULT_SUBST_NONE:
		case VAULT_SUBST_DONE:
			break;
		case VAULT_SUBST_REFUSED:
		case VAULT_SUBST_TOO_LARGE:
			r->status = 413;
			r->reason = "placeholder substitution too large";
			return -1;
		case VAULT_SUBST_NOMEM:
			return -2;
		}
	}
	if (evbuffer_add(tmp, h->method.p, h->method.n) == -1 ||
	    evbuffer_add(tmp, " ", 1) == -1)
		goto nomem;
	if ((rc = proxy_add_subst(tmp, v, vi, VAULT_SURFACE_PATH, vi->norm_path,
	         vi->norm_path_len, &budget, r)) != 0)
		goto out;
	if (h->has_query) {
		if (evbuffer_add(tmp, "?", 1) == -1)
			goto nomem;
		if ((rc = proxy_add_subst(tmp, v, vi, VAULT_SURFACE_QUERY,
		         h->query.p, h->query.n, &budget, r)) != 0)
			goto out;
	}
	if (evbuffer_add(tmp, h->minor == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n",
	        11) == -1)
		goto nomem;
	for (i = 0; i < h->nh; i++) {
		const struct http_header *f = &h->h[i];

		if (proxy_header_removed(&f->name, vi) ||
		    (int)i == proxy_close_field(c, h) ||
		    (c->cont_sent && http_span_ieq(&f->name, "expect")) ||
		    (nb != NULL &&
		        (http_span_ieq(&f->name, "content-length") ||
		            http_span_ieq(&f->name, "transfer-encoding") ||
		            http_span_ieq(&f->name, "trailer"))))
			continue;
		if (evbuffer_add(tmp, f->name.p, f->name.n) == -1 ||
		    evbuffer_add(tmp, ": ", 2) == -1)
			goto nomem;
		if (http_span_ieq(&f->name, "host")) {
			/* the name the binding matched (and the origin was
			 * verified for), not the client's spelling of it:
			 * "A.TEST." may be another host to the origin */
			rc = evbuffer_add(tmp, name, strlen(name)) == 0 &&
			        (c->dport == (c->term ? 443 : 80) ||
			            evbuffer_add_printf(
			                tmp, ":%u", (unsigned)c->dport) > 0)
			    ? 0
			    : -2;
		} else if ((vi->subst_in & POLICY_SUBST_HEADER) &&
		    vault_subst_header_ok(f->name.p, f->name.n))
			rc = proxy_add_subst(tmp, v, vi, VAULT_SURFACE_HEADER,
			    f->value.p, f->value.n, &budget, r);
		else
			rc = f->value.n == 0 ||
			        evbuffer_add(tmp, f->value.p, f->value.n) == 0
			    ? 0
			    : -2;
		if (rc != 0)
			goto out;
		if (evbuffer_add(tmp, "\r\n", 2) == -1)
			goto nomem;
	}
	if (nb != NULL &&
	    evbuffer_add_printf(tmp, "Content-Length: %zu\r\n", nblen) < 0)
		goto nomem;
	if (evbuffer_add(tmp, "Accept-Encoding: identity\r\n", 27) == -1)
		goto nomem;
	/* the credential: a copy the buffer wipes once it is sent */
	if (vi->lines_len > 0) {
		if ((sec = malloc(vi->lines_len)) == NULL)
			goto nomem;
		memcpy(sec, vi->lines, vi->lines_len);
		if (proxy_add_secret(tmp, sec, vi->lines_len) == -1)
			goto nomem;
	}
	if (evbuffer_add(tmp, "\r\n", 2) == -1)
		goto nomem;
	if (nb != NULL) {
		rc = proxy_add_secret(tmp, nb, nblen) == 0 ? 0 : -2;
		nb = NULL;
		*body_done = rc == 0;
	}
	goto out;
nomem:
	rc = -2;
out:
	vault_subst_free(nb, nblen);
	return rc;
}

/*
 * A chunked body held for substitution: the framing of the first lim
 * bytes of in after the head (end bytes), scanned from where the last
 * call stopped, in place. DONE: its end is in (sub_scan bytes after the
 * head); AGAIN: not yet; DATA: more than VAULT_SUBST_BODY_MAX body bytes;
 * BAD: malformed (e). An answer once given stays. The state lives in c
 * until the request is decided (proxy_http_pump resets it).
 */
static enum http_chunk_rc
proxy_subst_scan(struct proxy_conn *c, struct evbuffer *in, size_t end,
    size_t lim, struct err *e)
{
	size_t used;

	if (!c->sub_scanning) {
		http_chunk_init(&c->sub_ch);
		c->sub_scan = 0;
		c->sub_rc = HTTP_CHUNK_AGAIN;
		c->sub_scanning = true;
	}
	if (c->sub_rc == HTTP_CHUNK_AGAIN && c->sub_scan < lim) {
		c->sub_rc = proxy_chunk_scan(&c->sub_ch, in,
		    end + (size_t)c->sub_scan, lim - (size_t)c->sub_scan,
		    VAULT_SUBST_BODY_MAX, &used, e);
		c->sub_scan += used;
	}
	return c->sub_rc;
}

/*
 * Is the body held for substitution (proxy_http_pump, c->hold_end) all
 * here, or past what is held for it, so the request can be judged again?
 * len: what in holds.
 */
static bool
proxy_hold_ready(struct proxy_conn *c, struct evbuffer *in, size_t len)
{
	struct err e;
	size_t lim;

	if (!c->sub_scanning)
		return len >= c->hold_wait;
	lim = len - c->hold_end;
	if (lim > PROXY_SUBST_WIRE_MAX)
		lim = PROXY_SUBST_WIRE_MAX;
	return proxy_subst_scan(c, in, c->hold_end, lim, &e) !=
	    HTTP_CHUNK_AGAIN ||
	    lim == PROXY_SUBST_WIRE_MAX;
}

/*
 * The body of an injected request h (end bytes of head at the start of
 * in) that is to be substituted, when all of it is here: *body, *blen
 * (a chunked one decoded into *dec, which the caller frees) and *wire,
 * the bytes of in after the head it takes. 0: here; 1: not substituted
 * after all, forwarded as it comes (a chunked body over
 * VAULT_SUBST_BODY_MAX, framed in more than PROXY_SUBST_WIRE_MAX bytes,
 * or with a trailer section); 2: not all here, call again once in holds
 * *wait bytes (a client's "Expect: 100-continue" answered); -1:
 * malformed chunked framing (e); -2: out of memory. When in is pulled up,
 * h is parsed again (its spans point into in's new first chain).
 */
static int
proxy_subst_gather(struct proxy_conn *c, struct http_head *h,
    struct evbuffer *in, size_t end, const char **body, size_t *blen,
    uint64_t *wire, uint8_t **dec, size_t *wait, struct err *e)
{
	size_t len = evbuffer_get_length(in), need, w;
	bool chunked = h->body == HTTP_BODY_CHUNKED;
	const char *buf;

	*dec = NULL;
	if (chunked) {
		size_t lim = len - end < PROXY_SUBST_WIRE_MAX
		    ? len - end
		    : PROXY_SUBST_WIRE_MAX;

		switch (proxy_subst_scan(c, in, end, lim, e)) {
		case HTTP_CHUNK_DONE:
			break;
		case HTTP_CHUNK_AGAIN:
			if (lim < PROXY_SUBST_WIRE_MAX)
				goto wait; /* more to come */
			return 1; /* framed in too many bytes */
		case HTTP_CHUNK_DATA: /* over VAULT_SUBST_BODY_MAX */
			return 1;
		case HTTP_CHUNK_BAD:
			return -1;
		}
		need = end + (size_t)c->sub_scan; /* up to the body's end */
	} else
		need = end + (size_t)h->content_length;
	if (len >= need) {
		if ((buf = (const char *)evbuffer_pullup(
		         in, (ev_ssize_t)need)) == NULL)
			return -2;
		if (http_parse_request(buf, end, h, e) != HTTP_HEAD_OK)
			return -2; /* parsed before: cannot happen */
		if (!chunked) {
			*body = buf + end;
			*blen = *wire = (size_t)h->content_length;
			return 0;
		}
		/* all here: decoded in one more pass */
		switch (http_chunk_collect((const uint8_t *)buf + end,
		    need - end, VAULT_SUBST_BODY_MAX, dec, blen, &w, e)) {
		case HTTP_CHUNK_COLLECT_DONE:
			*body = (const char *)*dec;
			*wire = w;
			return 0;
		case HTTP_CHUNK_COLLECT_AGAIN: /* the scan said done */
		case HTTP_CHUNK_COLLECT_SKIP:
			return 1;
		case HTTP_CHUNK_COLLECT_BAD:
			return -1;
		case HTTP_CHUNK_COLLECT_NOMEM:
			return -2;
		}
		return -2;
	}
wait:
	if (chunked)
		need = end + PROXY_SUBST_WIRE_MAX;
	/* decided again when the body is here */
	if (h->expect_continue && c->rq_n == 0 && !c->cont_sent) {
		c->cont_sent = true;
		if (evbuffer_add(bufferevent_get_output(c->cli),
		        "HTTP/1.1 100 Continue\r\n\r\n", 25) == -1)
			return -2;
	}
	*wait = need;
	return 2;
}

/*
 * A judged request head h (end bytes at the start of in) to a host a
 * binding could match: the vault decides. 0: forward the head as it
 * came (*used: a vault reference when the origin is a bound one, so
 * its response is redacted; NULL otherwise); 1: the rewritten request (proxy_vault_rewrite) went to the origin,
 * *body_taken bytes of body with it (drain end + *body_taken), and *used
 * holds a vault reference for the response's redaction; 2: its body is to
 * be substituted and not all here: call again once in holds *wait bytes;
 * -1: refused (*status, *why); -2: out of memory. When the body is pulled
 * up, h is parsed again (its spans point into in's new first chain).
 */
static int
proxy_vault_request(struct proxy_conn *c, struct http_head *h, const char *name,
    struct evbuffer *in, size_t end, struct vault **used, uint64_t *body_taken,
    size_t *wait, int *status, enum proxy_reason *why)
{
	struct vault *v;
	struct vault_req rq;
	struct vault_inject vi;
	struct proxy_subst_refusal r = {0, NULL};
	enum vault_surface bs;
	struct evbuffer *tmp;
	struct err e = {""};
	const char *body = NULL;
	size_t blen = 0;
	uint64_t wire = 0;
	uint8_t *dec = NULL;
	bool body_done;
	int rc = 0;

	*used = NULL;
	*body_taken = 0;
	*wait = 0;
	if (c->p->h.vault_get == NULL ||
	    (v = c->p->h.vault_get(c->p->h.arg)) == NULL)
		return 0;
	if (!vault_host_bound(v, name, c->dport)) {
		/* terminated all the same (a binding named the host when
		 * the connection began): its responses stay redacted */
		if (c->term)
			*used = vault_ref(v);
		return 0;
	}
	memset(&rq, 0, sizeof(rq));
	rq.scheme = c->term ? POLICY_SCHEME_HTTPS : POLICY_SCHEME_HTTP;
	rq.host = name;
	rq.port = c->dport;
	rq.method = h->method.p;
	rq.method_len = h->method.n;
	rq.query = h->query.p;
	rq.query_len = h->query.n;
	if (h->form == HTTP_TARGET_ORIGIN || h->form == HTTP_TARGET_ABSOLUTE) {
		rq.path = h->path.p != NULL ? h->path.p : "/";
		rq.path_len = h->path.p != NULL ? h->path.n : 1;
	} else {
		rq.path = "*";
		rq.path_len = 1;
	}
	if (vault_decide(v, &rq, &vi, &e) == -1) {
		log_error(c->p->log, "vault.decide_failed", LOG_S("host", name),
		    LOG_S("error", e.msg));
		*status = 503;
		*why = PROXY_VAULT_REFUSED;
		return -1;
	}
	switch (vi.decision) {
	case VAULT_NO_MATCH:
		/* nothing injected, but the origin is a bound one: it may
		 * give back what it stored of earlier requests (issue 34) */
		proxy_log_inject(c, &vi, h, name, v);
		*used = vault_ref(v);
		break;
	case VAULT_AMBIGUOUS:
	case VAULT_REFUSED:
		proxy_log_inject(c, &vi, h, name, v);
		*status = vi.status != 0 ? vi.status : 403;
		*why = vi.decision == VAULT_AMBIGUOUS ? PROXY_VAULT_AMBIGUOUS
		                                      : PROXY_VAULT_REFUSED;
		rc = -1;
		break;
	case VAULT_INJECTED:
		if (c->p->h.learned == NULL ||
		    !c->p->h.learned(c->p->h.arg, name, &c->dst)) {
			/* the connection may be allowed (an IP rule), but
			 * the secret goes only where its host resolved */
			vi.decision = VAULT_REFUSED;
			vi.status = 421;
			vi.reason = "address not resolved from the host";
			proxy_log_inject(c, &vi, h, name, v);
			*status = 421;
			*why = PROXY_VAULT_MISROUTED;
			rc = -1;
			break;
		}
		if ((bs = proxy_subst_body(h, &vi)) != VAULT_SURFACE_NONE) {
			rc = proxy_subst_gather(
			    c, h, in, end, &body, &blen, &wire, &dec, wait, &e);
			if (rc == -1) {
				*status = 400;
				*why = PROXY_BAD_REQUEST;
				break;
			}
			if (rc == 2 || rc == -2)
				break;
			if (rc == 1)
				bs = VAULT_SURFACE_NONE;
			rc = 0;
		}
		if ((tmp = evbuffer_new()) == NULL) {
			rc = -2;
			break;
		}
		rc = proxy_vault_rewrite(
		    c, tmp, v, &vi, h, name, bs, body, blen, &body_done, &r);
		if (rc == 0 &&
		    proxy_add_joined(bufferevent_get_output(c->up), tmp) == -1)
			rc = -2;
		evbuffer_free(tmp); /* wipes what did not go */
		if (rc == -1) {
			vi.decision = VAULT_REFUSED;
			vi.status = r.status;
			vi.reason = r.reason;
			proxy_log_inject(c, &vi, h, name, v);
			*status = r.status;
			*why = PROXY_VAULT_REFUSED;
			break;
		}
		if (rc == 0) {
			*body_taken = body_done ? wire : 0;
			c->up_bytes += end + *body_taken;
			c->last_ms = now_mono_ms();
			c->p->st.injected++;
			*used = vault_ref(v);
			proxy_log_inject(c, &vi, h, name, v);
			rc = 1;
		}
		break;
	}
	vault_inject_clear(v, &vi);
	free(dec);
	return rc;
}

/* Where a redacted response goes: the client, or the hold while a
 * decoded one's start is held back. */
static struct evbuffer *
proxy_red_out(struct proxy_conn *c)
{
	return c->hold != NULL ? c->hold : bufferevent_get_output(c->cli);
}

/* The held head and bytes go to the client (from now on, everything). */
static int
proxy_hold_release(struct proxy_conn *c)
{
	int rc;

	if (c->hold == NULL)
		return 0;
	rc = evbuffer_add_buffer(bufferevent_get_output(c->cli), c->hold);
	evbuffer_free(c->hold);
	c->hold = NULL;
	return rc;
}

/* Redacted response bytes to the client; chunked bodies are re-chunked
 * (the redaction preserves length, the spans do not follow the
 * origin's chunks). */
static void
proxy_red_emit(void *arg, const uint8_t *p, size_t n)
{
	struct proxy_conn *c = arg;
	struct evbuffer *out = proxy_red_out(c);

	if (n == 0)
		return;
	if (c->red_chunked)
		(void)evbuffer_add_printf(out, "%zx\r\n", n);
	(void)evbuffer_add(out, p, n);
	if (c->red_chunked)
		(void)evbuffer_add(out, "\r\n", 2);
	c->down_bytes += n;
}

/*
 * The Content-Encoding of a response head h to an injected request
 * (c->dec_coding): 0 none (or identity), 1 to be decoded, -1 refused
 * with *reason (fixed text). Refused: --vault-compressed refuse, a
 * coding other than gzip or deflate (or more than one), a 1xx or a 206
 * (a range of a compressed representation does not decode alone), a
 * body to an HTTP/1.0 client (decoded bodies are chunked).
 */
static int
proxy_vault_coding(
    struct proxy_conn *c, const struct http_head *h, const char **reason)
{
	size_t n;
	const struct http_span *ce = http_header_get(h, "content-encoding", &n);

	c->dec_coding = HTTP_CODING_IDENTITY;
	*reason = "";
	if (ce == NULL)
		return 0;
	c->dec_coding =
	    n > 1 ? HTTP_CODING_LIST : http_coding_parse(ce->p, ce->n);
	if (c->dec_coding == HTTP_CODING_IDENTITY)
		return 0;
	if (!c->p->o.vault_decode)
		*reason = "mode_refuse";
	else if (c->dec_coding != HTTP_CODING_GZIP &&
	    c->dec_coding != HTTP_CODING_DEFLATE)
		*reason = "unsupported_encoding";
	else if (h->status < 200 || h->status == 206)
		*reason = "partial_content";
	else if (h->body != HTTP_BODY_NONE && proxy_rq_head(c)->http10)
		*reason = "http10_client";
	else
		return 1;
	return -1;
}

/* The field f (a header or a trailer) to out, its value redacted: every
 * run of a secret's rendered forms "[REDACTED]". -1: out of memory. */
static int
proxy_add_redacted(
    struct evbuffer *out, const struct vault *v, const struct http_header *f)
{
	size_t n;
	char *red;
	int rc;

	/* a name cannot be rewritten: the field is dropped */
	if (vault_redact_any(v, f->name.p, f->name.n))
		return 0;
	red = vault_redact_header(v, f->value.p, f->value.n, &n);
	if (red == NULL && n == SIZE_MAX)
		return 0; /* no memory to redact it: dropped */
	rc = evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)f->name.n,
	         f->name.p, (int)(red != NULL ? n : f->value.n),
	         red != NULL ? red : f->value.p) < 0
	    ? -1
	    : 0;
	free(red);
	return rc;
}

/*
 * The status line line[0..n) (its CRLF included) to out, redacted like a
 * header value (the reason phrase is the origin's text); http11: its
 * version ("HTTP/1.x", checked by the parser) written as HTTP/1.1, and
 * the line redacted as it goes out. -1: out of memory.
 */
static int
proxy_add_status_line(struct evbuffer *out, const struct vault *v,
    const char *line, size_t n, bool http11)
{
	char *copy = NULL, *red;
	size_t rn;
	int rc;

	if (http11 && n >= 8) {
		if ((copy = malloc(n)) == NULL)
			return -1;
		memcpy(copy, "HTTP/1.1", 8);
		memcpy(copy + 8, line + 8, n - 8);
		line = copy;
	}
	red = vault_redact_header(v, line, n, &rn);
	rc = red != NULL     ? evbuffer_add(out, red, rn)
	    : rn == SIZE_MAX ? -1
	                     : evbuffer_add(out, line, n);
	free(red);
	free(copy);
	return rc;
}

/* A field of a response to be decoded that goes: not its framing, not
 * the coding egressd removes. */
static bool
proxy_decoded_keeps(const struct http_span *name)
{
	return !http_span_ieq(name, "content-encoding") &&
	    !http_span_ieq(name, "content-length") &&
	    !http_span_ieq(name, "transfer-encoding");
}

/*
 * A span of a redacted Content-Length body (vault_redact_scan): its bytes
 * are still in the origin's input buffer, so clean ones move to the
 * client's without a copy; masked ones are dropped and written as '*';
 * kept ones the redactor copied (a possible secret's beginning).
 */
static void
proxy_red_span(void *arg, const uint8_t *p, size_t n, unsigned flags)
{
	struct proxy_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(c->up);
	struct evbuffer *out = bufferevent_get_output(c->cli);
	uint8_t stars[256];

	if (!(flags & VAULT_SPAN_HELD)) {
		if (flags == 0) {
			(void)evbuffer_remove_buffer(in, out, n);
			c->down_bytes += n;
			return;
		}
		(void)evbuffer_drain(in, n);
		if (flags & VAULT_SPAN_KEPT)
			return;
	} else if (!(flags & VAULT_SPAN_MASKED)) {
		(void)evbuffer_add(out, p, n);
		c->down_bytes += n;
		return;
	}
	c->down_bytes += n;
	memset(stars, '*', sizeof(stars));
	for (; n > sizeof(stars); n -= sizeof(stars))
		(void)evbuffer_add(out, stars, sizeof(stars));
	(void)evbuffer_add(out, stars, n);
}

/*
 * The Content-Length body bytes in in, redacted where they are: read in
 * place through evbuffer_peek, moved on by proxy_red_span (moving and
 * dropping from the front leaves the rest of in where the redactor reads
 * it). What in holds is all that is here now: a pause (FLUSH) unless
 * the body ends in it.
 */
static void
proxy_vault_length(struct proxy_conn *c, struct evbuffer *in)
{
	struct proxy_body *b = &c->rbody;
	struct evbuffer_iovec vec[PROXY_RED_SEGS];
	struct vault_seg seg[PROXY_RED_SEGS];
	size_t n, len, i, k;
	enum vault_redact_mode mode;

	while (b->left > 0 && (len = evbuffer_get_length(in)) > 0) {
		n = len < b->left ? len : (size_t)b->left;
		k = (size_t)evbuffer_peek(
		    in, (ev_ssize_t)n, NULL, vec, PROXY_RED_SEGS);
		if (k > PROXY_RED_SEGS)
			k = PROXY_RED_SEGS;
		/* the last chain may go on past n */
		for (i = 0, len = 0; i < k && len < n; i++) {
			seg[i].p = vec[i].iov_base;
			seg[i].n =
			    vec[i].iov_len < n - len ? vec[i].iov_len : n - len;
			len += seg[i].n;
		}
		b->left -= len;
		mode = b->left == 0                 ? VAULT_REDACT_END
		    : len < evbuffer_get_length(in) ? VAULT_REDACT_MORE
		                                    : VAULT_REDACT_FLUSH;
		vault_redact_scan(c->red, seg, i, mode, proxy_red_span, c);
	}
}

/*
 * The response head of an injected request, to the client with every
 * header value redacted; with decode, as the identity response it
 * becomes: version HTTP/1.1 (egressd frames it), Content-Encoding,
 * Content-Length and Transfer-Encoding dropped, chunked when it has a
 * body. -1: the response cannot be redacted (a body until close, an
 * upgrade): the caller answers 502 instead. -2: out of memory.
 */
static int
proxy_vault_response_head(struct proxy_conn *c, const struct http_head *h,
    const char *buf, size_t end, bool decode, struct err *e)
{
	struct vault *v = proxy_rq_head(c)->vault;
	struct evbuffer *out = proxy_red_out(c);
	bool close = proxy_rq_head(c)->close && h->status >= 200;
	const char *eol;
	size_t i, rl;

	if (h->status == 101 ||
	    (h->status >= 200 && h->body == HTTP_BODY_CLOSE)) {
		(void)snprintf(e->msg, sizeof(e->msg), "%s",
		    h->status == 101
		        ? "an upgrade on an injected request"
		        : "a body until close on an injected request");
		return -1;
	}
	if (!close && !decode && !vault_redact_any(v, buf, end)) {
		/* nothing to redact anywhere in it, nothing to drop or add:
		 * as it came */
		if (evbuffer_add(out, buf, end) == -1)
			return -2;
		c->down_bytes += end;
		return 0;
	}
	eol = memchr(buf, '\n', end);
	rl = eol != NULL ? (size_t)(eol - buf) + 1 : end;
	/* the status line's reason phrase is the origin's text too; with
	 * decode, "HTTP/1.x" (checked by the parser) becomes HTTP/1.1 */
	if (proxy_add_status_line(out, v, buf, rl, decode) == -1)
		return -2;
	for (i = 0; i < h->nh; i++) {
		const struct http_header *f = &h->h[i];

		if (close && http_span_ieq(&f->name, "connection"))
			continue;
		if (decode && !proxy_decoded_keeps(&f->name))
			continue;
		if (proxy_add_redacted(out, v, f) == -1)
			return -2;
	}
	if (close && evbuffer_add(out, PROXY_CLOSE_LINE, 19) == -1)
		return -2;
	if (decode && h->body != HTTP_BODY_NONE &&
	    evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28) == -1)
		return -2;
	if (evbuffer_add(out, "\r\n", 2) == -1)
		return -2;
	c->down_bytes += end;
	return 0;
}

/*
 * The last chunk of a re-chunked redacted response, then its trailer
 * fields: those a trailer may carry (http_chunk_trailer_allowed), each
 * value redacted like a header's. -1: out of memory.
 */
static int
proxy_vault_trailers(struct proxy_conn *c)
{
	struct evbuffer *out = proxy_red_out(c);
	struct vault *v = proxy_rq_head(c)->vault;
	struct http_header f;
	size_t pos = 0;

	if (evbuffer_add(out, "0\r\n", 3) == -1)
		return -1;
	while (
	    c->rtrail != NULL && http_chunk_trailer_next(c->rtrail, &pos, &f)) {
		if (http_chunk_trailer_allowed(&f.name) &&
		    proxy_add_redacted(out, v, &f) == -1)
			return -1;
	}
	proxy_trailers_free(c);
	return evbuffer_add(out, "\r\n", 2);
}

/*
 * Body data p[0..n) of a redacted response to the redactor, decoded
 * first when it is compressed. -1: the decoding failed (e).
 */
static int
proxy_vault_data(
    struct proxy_conn *c, const uint8_t *p, size_t n, struct err *e)
{
	uint8_t out[16384];
	size_t used, got;
	enum http_decode_rc rc;

	if (c->dec == NULL) {
		vault_redact_feed(c->red, p, n, proxy_red_emit, c);
		return 0;
	}
	do {
		rc = http_decode_feed(
		    c->dec, p, n, &used, out, sizeof(out), &got, e);
		p += used;
		n -= used;
		if (got > 0)
			vault_redact_feed(c->red, out, got, proxy_red_emit, c);
		/* past the free allowance the ratio is checked: a bomb
		 * would have failed this call */
		if (rc != HTTP_DECODE_BAD && c->hold != NULL &&
		    http_decode_out(c->dec) > HTTP_DECODE_RATIO_FREE &&
		    proxy_hold_release(c) == -1)
			rc = HTTP_DECODE_BAD;
	} while (rc == HTTP_DECODE_DATA);
	secmem_wipe(out, sizeof(out)); /* decoded, not yet redacted */
	return rc == HTTP_DECODE_BAD ? -1 : 0;
}

/* Output queued toward the client, held or not: over the watermark, a
 * decoded response stops until it drains. */
static bool
proxy_decode_full(struct proxy_conn *c)
{
	return c->dec != NULL &&
	    evbuffer_get_length(bufferevent_get_output(c->cli)) +
	        (c->hold != NULL ? evbuffer_get_length(c->hold) : 0) >=
	    PROXY_HIGH_WM;
}

/*
 * Body bytes of a redacted response: LENGTH forwarded redacted (same
 * length), CHUNKED decoded, redacted and re-chunked, its trailers kept
 * and re-sent redacted; a compressed body (c->dec) decoded, redacted
 * and chunked, PROXY_DECODE_STEP compressed bytes at a time while the
 * client's queue is under the watermark. -1 bad framing (e), -2 out of
 * memory, -3 the decoding failed (e).
 */
static int
proxy_vault_body(
    struct proxy_conn *c, struct evbuffer *in, bool *done, struct err *e)
{
	struct proxy_body *b = &c->rbody;
	uint8_t tmp[16384];
	size_t n, used, nd, consumed = 0;
	size_t step = c->dec != NULL ? PROXY_DECODE_STEP : sizeof(tmp);
	const uint8_t *d;
	enum http_chunk_rc rc;

	*done = false;
	if (b->kind == HTTP_BODY_LENGTH) {
		if (c->dec == NULL)
			/* the bytes are in in: redacted where they are */
			proxy_vault_length(c, in);
		/* decoded bytes are not: decoded, then fed */
		while (c->dec != NULL && b->left > 0 &&
		    evbuffer_get_length(in) > 0 && !proxy_decode_full(c)) {
			n = evbuffer_get_length(in);
			if (n > step)
				n = step;
			if (n > b->left)
				n = (size_t)b->left;
			n = (size_t)evbuffer_remove(in, tmp, n);
			b->left -= n;
			if (proxy_vault_data(c, tmp, n, e) == -1)
				return -3;
		}
		*done = b->left == 0;
	} else if (b->kind == HTTP_BODY_CHUNKED) {
		while (!*done && evbuffer_get_length(in) > 0 &&
		    !proxy_decode_full(c)) {
			n = evbuffer_copyout(in, tmp, sizeof(tmp));
			consumed = 0;
			while (consumed < n && !proxy_decode_full(c)) {
				rc = http_chunk_feed(&b->ch, tmp + consumed,
				    n - consumed < step ? n - consumed : step,
				    &used, &d, &nd, e);
				if (rc == HTTP_CHUNK_BAD)
					return -1;
				consumed += used;
				if (rc == HTTP_CHUNK_DATA &&
				    proxy_vault_data(c, d, nd, e) == -1)
					return -3;
				if (rc == HTTP_CHUNK_DONE) {
					*done = true;
					break;
				}
			}
			evbuffer_drain(in, consumed);
		}
	} else
		*done = true;
	if (!*done && evbuffer_get_length(in) == 0) {
		/* the origin paused (SSE, long poll): hand over all but a
		 * possible secret's beginning */
		vault_redact_flush(c->red, proxy_red_emit, c);
		if (proxy_hold_release(c) == -1)
			return -2;
	}
	if (*done) {
		if (c->dec != NULL && http_decode_finish(c->dec, e) == -1)
			return -3;
		vault_redact_finish(c->red, proxy_red_emit, c);
		if (c->red_chunked && proxy_vault_trailers(c) == -1)
			return -2;
		if (proxy_hold_release(c) == -1)
			return -2;
		if (c->dec != NULL)
			proxy_log_compressed(c, PROXY_COMPRESSED_DECODED, "");
		proxy_red_state_free(c);
	}
	c->last_ms = now_mono_ms();
	if (evbuffer_get_length(bufferevent_get_output(c->cli)) >=
	        PROXY_HIGH_WM ||
	    proxy_decode_full(c))
		bufferevent_disable(c->up, EV_READ);
	return 0;
}

/*
 * Decoding a response failed (e): logged; a 502 when nothing of it went
 * out yet, else the connection is cut (the client sees a body that never
 * ended, not a complete one). -1: c is gone (or out of RELAY).
 */
static int
proxy_vault_decode_failed(struct proxy_conn *c, const struct err *e)
{
	proxy_log_compressed(c, PROXY_COMPRESSED_FAILED,
	    http_decode_why_name(http_decode_why(c->dec)));
	if (c->hold != NULL) {
		proxy_red_state_free(c);
		proxy_refuse_http_detail(c, 502, PROXY_VAULT_DECODE, e->msg);
		return -1;
	}
	proxy_red_state_free(c);
	proxy_conn_close(c, PROXY_VAULT_DECODE);
	return -1;
}

/* The redacted chunked response keeps its trailer section. -1: out of
 * memory. */
static int
proxy_keep_trailers(struct proxy_conn *c)
{
	if (c->rtrail == NULL &&
	    (c->rtrail = malloc(sizeof(*c->rtrail))) == NULL)
		return -1;
	http_chunk_keep_trailers(&c->rbody.ch, c->rtrail);
	return 0;
}

static int proxy_resp_done(struct proxy_conn *c);

/*
 * A response head h (end bytes of buf) to an injected request, judged
 * and sent redacted (or held); its body set up: redacted, and decoded
 * first when it is compressed and --vault-compressed decode. The caller
 * drains the head. -1: refused (502) or c is gone; -2: out of memory.
 */
static int
proxy_vault_response(struct proxy_conn *c, const struct http_head *h,
    const char *buf, size_t end, struct err *e)
{
	const char *reason;
	int cv = proxy_vault_coding(c, h, &reason), vr;
	bool has_body;

	if (cv == -1) {
		proxy_log_compressed(c, PROXY_COMPRESSED_REFUSED, reason);
		proxy_refuse_http_detail(c, 502, PROXY_VAULT_COMPRESSED,
		    c->p->o.vault_decode
		        ? "a compressed response egressd cannot "
		          "decode, to a request a credential "
		          "was injected into"
		        : "a compressed response to a request a "
		          "credential was injected into");
		return -1;
	}
	has_body = h->status >= 200 && h->body != HTTP_BODY_NONE;
	if (cv == 1 && has_body) {
		if ((c->dec = http_decode_new(c->dec_coding, NULL)) == NULL ||
		    (c->hold = evbuffer_new()) == NULL)
			return -2;
	}
	vr = proxy_vault_response_head(c, h, buf, end, cv == 1, e);
	if (vr == -1) {
		proxy_red_state_free(c);
		log_warn(c->p->log, "vault.unsafe_response",
		    LOG_S("name", c->name), LOG_S("error", e->msg));
		proxy_refuse_http(c, 502, PROXY_VAULT_UNSAFE);
		return -1;
	}
	if (vr == -2)
		return -2;
	if (h->status < 200)
		return 0;
	proxy_body_start(&c->rbody, h);
	if (c->rbody.kind == HTTP_BODY_NONE) {
		if (cv == 1)
			proxy_log_compressed(c, PROXY_COMPRESSED_DECODED, "");
		return proxy_resp_done(c) == -1 || c->st != PROXY_ST_RELAY ? -1
		                                                           : 0;
	}
	if ((c->red = vault_redactor_new(proxy_rq_head(c)->vault)) == NULL)
		return -2;
	c->red_chunked = c->rbody.kind == HTTP_BODY_CHUNKED || c->dec != NULL;
	if (c->rbody.kind == HTTP_BODY_CHUNKED && proxy_keep_trailers(c) == -1)
		return -2;
	c->rphase = H_BODY;
	return 0;
}

static int proxy_resp_pump(struct proxy_conn *c);

/*
 * RELAY: the timer for whichever comes first, the idle timeout (no byte
 * moved either way) or the deadline of a request head that has begun.
 */
static void
proxy_relay_arm(struct proxy_conn *c, uint64_t now)
{
	uint64_t idle = now - c->last_ms, left, hl;

	left = idle < c->p->o.idle_ms ? c->p->o.idle_ms - idle : 0;
	if (c->head_t0_ms != 0) {
		hl = now - c->head_t0_ms < c->p->o.head_ms
		    ? c->p->o.head_ms - (now - c->head_t0_ms)
		    : 0;
		if (hl < left)
			left = hl;
	}
	proxy_arm(c, (unsigned)left);
}

/*
 * The first bytes of a request head are in, not yet its end: from now
 * the whole head has o.head_ms (a byte now and then would otherwise
 * hold the connection for as long as the idle timeout allows). Bytes
 * of the head are not moved, so they do not count as activity either.
 * Not while egressd itself stops reading the client (the origin is
 * slow to take a body before it): the clock starts when reads resume.
 */
static void
proxy_head_started(struct proxy_conn *c)
{
	uint64_t now;

	if (!(bufferevent_get_enabled(c->cli) & EV_READ)) {
		c->head_t0_ms = 0;
		return;
	}
	if (c->head_t0_ms != 0)
		return;
	now = now_mono_ms();
	c->head_t0_ms = now;
	proxy_relay_arm(c, now);
}

/*
 * A refused stream is answered once no response can still come: none
 * pending, or only the refused request's own, which (its body broken)
 * the origin cannot finish, and none of it relayed yet. The origin
 * connection goes with the answer.
 */
static bool
proxy_refuse_now(const struct proxy_conn *c)
{
	return c->rq_n == 0 ||
	    (c->refuse_inflight && c->rq_n == 1 && c->rphase == H_HEAD);
}

/*
 * Plain HTTP and terminated TLS, client -> origin: each head judged,
 * bodies forwarded by their framing. A refused head stops the stream:
 * nothing more goes upstream; the refusal follows the answers to what
 * was forwarded before it. -1: c is gone.
 */
static int
proxy_http_pump(struct proxy_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->cli);
	struct http_head h;
	struct err e = {""};
	size_t len, end, take;
	bool done;
	int status, rc;
	enum proxy_reason why;
	char name[TLS_HELLO_SNI_MAX + 1];
	struct vault *used;
	uint64_t body_taken;
	size_t wait;
	int closef;
	bool taint;

	for (;;) {
		len = evbuffer_get_length(in);
		if (c->hphase == H_RAW)
			return proxy_move(c, c->cli, c->up, SIZE_MAX) == -1
			    ? (proxy_conn_close(c, PROXY_CLIENT_ERROR), -1)
			    : 0;
		if (len == 0 || c->hphase == H_STOPPED ||
		    c->hphase == H_UPGRADE)
			return 0;
		if (c->hphase == H_BODY) {
			if (proxy_body_take(&c->hbody, in, &take, &done, &e) ==
			    -1) {
				why = PROXY_BAD_REQUEST;
				status = 400;
				c->refuse_inflight = true;
				goto refuse;
			}
			if (proxy_move(c, c->cli, c->up, take) == -1)
				goto nomem;
			if (done)
				c->hphase = H_HEAD;
			else if (take == 0 ||
			    !(bufferevent_get_enabled(c->cli) & EV_READ))
				return 0;
			continue;
		}
		/* H_HEAD */
		if (c->cli_closing)
			return 0; /* nothing after a close request */
		if (c->rq_n == PROXY_PIPELINE_MAX) {
			/* resumed when a response completes */
			c->head_waiting = true;
			return 0;
		}
		if (c->hold_end != 0) {
			/* a body held for substitution is arriving (not
			 * idle): its request is judged again once it is all
			 * here, not at every read */
			c->last_ms = now_mono_ms();
			if (!proxy_hold_ready(c, in, len))
				return 0;
		}
		{
			size_t n = len < PROXY_PEEK_MAX ? len : PROXY_PEEK_MAX;
			const char *buf =
			    (const char *)evbuffer_pullup(in, (ev_ssize_t)n);

			if (!http_head_find_end(buf, n, &c->hcursor, &end)) {
				if (len >= PROXY_PEEK_MAX) {
					why = PROXY_BAD_REQUEST;
					status = 431;
					goto refuse;
				}
				/* at most a head buffered before judging */
				bufferevent_setwatermark(
				    c->cli, EV_READ, 0, PROXY_PEEK_MAX);
				proxy_head_started(c);
				return 0;
			}
			c->hcursor = 0;
			c->head_t0_ms = 0;
			if (http_parse_request(buf, end, &h, &e) !=
			    HTTP_HEAD_OK) {
				why = PROXY_BAD_REQUEST;
				status =
				    h.reject_status ? h.reject_status : 400;
				goto refuse;
			}
		}
		why = proxy_judge_host(c, &h, &status, name);
		if (why != PROXY_OK)
			goto refuse;
		if (c->rq_n > 0 && proxy_bound(c, name)) {
			/* One request at a time to a bound origin: a secret
			 * is never written behind responses still pending,
			 * whose framing a hostile client may have bent
			 * (issue 34). Resumed by proxy_resp_done; at most
			 * this head is read meanwhile. */
			bufferevent_setwatermark(
			    c->cli, EV_READ, 0, PROXY_PEEK_MAX);
			c->head_waiting = true;
			return 0;
		}
		c->head_waiting = false;
		used = NULL;
		rc = proxy_vault_request(c, &h, name, in, end, &used,
		    &body_taken, &wait, &status, &why);
		if (rc == 2) {
			/* a body to substitute: the whole request first
			 * (bytes are arriving: not idle) */
			c->hold_end = end;
			c->hold_wait = wait;
			c->last_ms = now_mono_ms();
			bufferevent_setwatermark(c->cli, EV_READ, 0, wait);
			return 0;
		}
		c->hold_end = 0;
		c->sub_scanning = false;
		c->cont_sent = false;
		if (rc == -1)
			goto refuse;
		if (rc == -2)
			goto nomem;
		/* Every response of a bound origin is redacted, whether or
		 * not its request carried a secret: origins store what they
		 * are sent and give it back later, on any connection. The
		 * origin connection stays bound from its first such request
		 * (a plain one may name other hosts later), pooled too. */
		if (used == NULL && rc == 0 && c->up_vault != NULL)
			used = vault_ref(c->up_vault);
		else if (used != NULL && used != c->up_vault) {
			vault_free(c->up_vault);
			c->up_vault = vault_ref(used);
		}
		taint = rc == 0 && used != NULL;
		{
			struct proxy_rq *r = proxy_rq_push(c, &h, used);

			closef = proxy_close_field(c, &h);
			if ((h.conn_close && closef == -1) || h.conn_upgrade)
				c->up_keep = false;
			r->close = c->cli_closing = closef != -1;
		}
		bufferevent_setwatermark(c->cli, EV_READ, 0, PROXY_IN_MAX);
		if (rc == 1) { /* its rewrite went up (with its body) */
			evbuffer_drain(in, end + (size_t)body_taken);
			/* megabytes when a body was substituted: the client
			 * waits until the origin takes them */
			proxy_hold_back(c->cli, c->up);
		} else if (closef != -1 || taint) {
			/* h's spans point into in's first chain, pulled up */
			if (proxy_move_head(c,
			        (const char *)evbuffer_pullup(
			            in, (ev_ssize_t)end),
			        end, &h, closef, taint) == -1)
				goto nomem;
		} else if (proxy_move(c, c->cli, c->up, end) == -1)
			goto nomem;
		proxy_body_start(&c->hbody, &h);
		if (body_taken > 0)
			c->hbody.kind = HTTP_BODY_NONE;
		if (h.conn_upgrade) {
			/* no body: what follows is the other protocol,
			 * relayed only once the origin said 101 */
			c->hphase = H_UPGRADE;
			bufferevent_disable(c->cli, EV_READ);
			return 0;
		}
		c->hphase = c->hbody.kind == HTTP_BODY_NONE ? H_HEAD : H_BODY;
		if (!(bufferevent_get_enabled(c->cli) & EV_READ) && !c->cli_eof)
			return 0; /* backpressure: resumed by the write cb */
	}
nomem:
	proxy_conn_close(c, PROXY_CLIENT_ERROR);
	return -1;
refuse:
	c->hphase = H_STOPPED;
	c->head_t0_ms = 0;
	c->refuse_status = status;
	c->refuse_why = why;
	bufferevent_disable(c->cli, EV_READ);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (c->up == NULL || proxy_refuse_now(c)) {
		/* nothing pending upstream: answer at once */
		proxy_refuse_http(c, status, why);
		return 0;
	}
	/* proxy_resp_pump answers once the pending responses are through;
	 * an origin that never finishes does not hold the slot */
	proxy_arm(c, c->p->o.connect_ms);
	return 0;
}

static bool proxy_pool_keep(struct proxy_conn *c);

/* The response to a close request is out: the client connection ends,
 * its origin connection to the pool when it can go there. */
static void
proxy_close_finish(struct proxy_conn *c)
{
	if (!proxy_pool_keep(c))
		proxy_conn_close(c, PROXY_OK);
}

/*
 * The origin answered the request whose body is still being forwarded:
 * whether it will read the rest as that body or as requests of their
 * own ("CL.0") is its secret, so no later response on the connection
 * could be attributed with certainty. The rest of the body is not
 * sent, the client is told Connection: close, and both connections end
 * once this response is through.
 */
static void
proxy_early_answer(struct proxy_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->cli);

	proxy_rq_head(c)->close = true;
	c->cli_closing = true;
	c->up_keep = false;
	c->hphase = H_STOPPED; /* no refuse_status: no refusal follows */
	bufferevent_disable(c->cli, EV_READ);
	evbuffer_drain(in, evbuffer_get_length(in));
}

/* The response at the head of the queue is complete. -1: c is gone. */
static int
proxy_resp_done(struct proxy_conn *c)
{
	bool was_upgrade = proxy_rq_head(c)->upgrade;
	bool was_close = proxy_rq_head(c)->close;

	proxy_red_state_free(c);
	proxy_rq_pop(c);
	c->rphase = H_HEAD;
	if (c->hphase == H_STOPPED && c->refuse_status != 0 &&
	    proxy_refuse_now(c)) {
		proxy_refuse_http(c, c->refuse_status, c->refuse_why);
		return -1; /* c lives on in REFUSE, but the pumps stop */
	}
	if (was_close) {
		/* proxy_write_cb finishes once the client has it all */
		bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
		if (evbuffer_get_length(bufferevent_get_output(c->cli)) != 0)
			return 0;
		proxy_close_finish(c);
		return -1;
	}
	if (was_upgrade && c->hphase == H_UPGRADE)
		c->hphase = H_HEAD; /* refused by the origin: HTTP goes on */
	if (c->hphase == H_HEAD && !c->cli_eof) {
		bufferevent_enable(c->cli, EV_READ);
		return proxy_http_pump(c);
	}
	if (c->hphase == H_HEAD && c->head_waiting) {
		/* the client sent its last requests and its FIN: they go
		 * now, and the FIN after them */
		if (proxy_http_pump(c) == -1 || c->st != PROXY_ST_RELAY)
			return -1;
		if (!c->head_waiting &&
		    (c->hphase == H_HEAD || c->hphase == H_BODY)) {
			if (proxy_fin_after(c, c->up))
				return -1;
		}
	}
	return 0;
}

/*
 * Origin -> client on plain HTTP and terminated TLS: every response head
 * parsed (its framing decides where the next one starts, and a 101 ends
 * HTTP on the connection), bodies by their framing. A response nobody
 * asked for, or a malformed one, closes the connection. -1: c is gone
 * (or out of RELAY).
 */
static int
proxy_resp_pump(struct proxy_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->up);
	struct http_head h;
	struct http_span m;
	struct err e = {""};
	size_t len, end, take;
	bool done;

	for (;;) {
		len = evbuffer_get_length(in);
		if (c->rphase == H_RAW) {
			if (proxy_move(c, c->up, c->cli, SIZE_MAX) == -1)
				goto nomem;
			return 0;
		}
		if (len == 0)
			return 0;
		if (c->rphase == H_BODY && c->red != NULL) {
			int vb = proxy_vault_body(c, in, &done, &e);

			if (vb == -3)
				return proxy_vault_decode_failed(c, &e);
			if (vb == -2)
				goto nomem;
			if (vb == -1)
				goto bad;
			if (done) {
				if (proxy_resp_done(c) == -1 ||
				    c->st != PROXY_ST_RELAY)
					return -1;
			} else if (!(bufferevent_get_enabled(c->up) & EV_READ))
				return 0;
			continue;
		}
		if (c->rphase == H_BODY) {
			if (proxy_body_take(&c->rbody, in, &take, &done, &e) ==
			    -1)
				goto bad;
			if (proxy_move(c, c->up, c->cli, take) == -1)
				goto nomem;
			if (done) {
				if (proxy_resp_done(c) == -1 ||
				    c->st != PROXY_ST_RELAY)
					return -1;
			} else if (take == 0 ||
			    !(bufferevent_get_enabled(c->up) & EV_READ))
				return 0;
			continue;
		}
		if (c->rq_n == 0) {
			(void)snprintf(e.msg, sizeof(e.msg),
			    "a response no request asked for");
			goto bad;
		}
		{
			size_t n = len < PROXY_PEEK_MAX ? len : PROXY_PEEK_MAX;
			const char *buf =
			    (const char *)evbuffer_pullup(in, (ev_ssize_t)n);

			if (!http_head_find_end(buf, n, &c->rcursor, &end)) {
				if (len >= PROXY_PEEK_MAX) {
					(void)snprintf(e.msg, sizeof(e.msg),
					    "response head over %d bytes",
					    PROXY_PEEK_MAX);
					goto bad;
				}
				return 0;
			}
			c->rcursor = 0;
			m.p = proxy_rq_head(c)->method;
			m.n = strlen(m.p);
			if (http_parse_response(buf, end, &m, &h, &e) !=
			    HTTP_HEAD_OK)
				goto bad;
			if (h.conn_close)
				c->up_keep = false;
			if (h.status >= 200 && h.status != 101 &&
			    c->rq_n == 1 && c->hphase == H_BODY)
				proxy_early_answer(c);
			if (proxy_rq_head(c)->vault != NULL) {
				int vr =
				    proxy_vault_response(c, &h, buf, end, &e);

				if (vr == -2)
					goto nomem;
				if (vr == -1)
					return -1;
				evbuffer_drain(in, end);
				/* a redacted head skips proxy_move: bodiless
				 * answers (HEAD, 204) to a client that never
				 * reads would queue without end */
				proxy_hold_back(c->up, c->cli);
				continue;
			}
		}
		if (proxy_rq_head(c)->close && h.status >= 200 &&
		    h.status != 101) {
			if (proxy_head_close(c,
			        (const char *)evbuffer_pullup(
			            in, (ev_ssize_t)end),
			        end, &h) == -1)
				goto nomem;
		} else if (proxy_move(c, c->up, c->cli, end) == -1)
			goto nomem;
		if (h.status == 101) {
			if (!proxy_rq_head(c)->upgrade) {
				(void)snprintf(e.msg, sizeof(e.msg),
				    "101 to a request without Upgrade");
				goto bad;
			}
			/* the other protocol, both ways, untouched */
			c->rphase = c->hphase = H_RAW;
			bufferevent_enable(c->cli, EV_READ);
			if (proxy_move(c, c->cli, c->up, SIZE_MAX) == -1)
				goto nomem;
			continue;
		}
		if (h.status < 200)
			continue; /* 100 Continue & co.: the final one follows */
		proxy_body_start(&c->rbody, &h);
		if (c->rbody.kind == HTTP_BODY_NONE) {
			if (proxy_resp_done(c) == -1 || c->st != PROXY_ST_RELAY)
				return -1;
		} else
			c->rphase = H_BODY;
	}
bad : {
	char dst[ADDR_TEXT_MAX];

	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	log_warn(c->p->log, "proxy.bad_response", LOG_S("name", c->name),
	    LOG_S("dst", dst), LOG_S("error", e.msg));
}
	proxy_conn_close(c, PROXY_UPSTREAM_ERROR);
	return -1;
nomem:
	proxy_conn_close(c, PROXY_UPSTREAM_ERROR);
	return -1;
}

/* -1: c is gone. */
static int
proxy_relay_read(struct proxy_conn *c, struct bufferevent *b)
{
	if (c->proto == PROTO_HTTP || c->term)
		return b == c->cli ? proxy_http_pump(c) : proxy_resp_pump(c);
	if (proxy_move(c, b, proxy_other(c, b), SIZE_MAX) == -1) {
		proxy_conn_close(c, PROXY_CLIENT_ERROR);
		return -1;
	}
	return 0;
}

static void
proxy_up_read(struct bufferevent *b, void *arg)
{
	struct proxy_conn *c = arg;

	proxy_touch(c);

	if (c->st != PROXY_ST_RELAY || proxy_relay_read(c, b) == -1 ||
	    c->st != PROXY_ST_RELAY)
		return;
	if (c->term)
		proxy_coalesce(c->cli);
	proxy_kick(c->cli);
}

/* Output drained below its low watermark: resume the other side's
 * reads; flush a pending FIN. */
static void
proxy_write_cb(struct bufferevent *b, void *arg)
{
	struct proxy_conn *c = arg;
	struct bufferevent *o;

	proxy_touch(c);

	if (c->st == PROXY_ST_REFUSE) {
		if (evbuffer_get_length(bufferevent_get_output(b)) == 0 &&
		    !c->cli_shut) {
			c->cli_shut = true;
			proxy_fin(b);
		}
		return;
	}
	if (c->st != PROXY_ST_RELAY)
		return;
	if (b == c->cli && c->cli_closing && c->rq_n == 0 &&
	    evbuffer_get_length(bufferevent_get_output(b)) == 0) {
		proxy_close_finish(c);
		return;
	}
	o = proxy_other(c, b);
	if (b == c->cli && c->refuse_status != 0 && c->up_eof &&
	    evbuffer_get_length(bufferevent_get_output(b)) == 0) {
		proxy_refuse_http(c, c->refuse_status, c->refuse_why);
		return;
	}
	if (!((o == c->cli) ? c->cli_eof : c->up_eof) &&
	    !(o == c->cli &&
	        (c->hphase == H_STOPPED || c->hphase == H_UPGRADE))) {
		bufferevent_enable(o, EV_READ);
		/* what waited in its input */
		if (proxy_relay_read(c, o) == -1 || c->st != PROXY_ST_RELAY)
			return;
	} else if (o == c->up && c->up_eof && c->dec != NULL &&
	    evbuffer_get_length(bufferevent_get_input(o)) > 0) {
		/* a decoded response paused at the watermark, the rest of it
		 * read before the origin's FIN */
		if (proxy_relay_read(c, o) == -1 || c->st != PROXY_ST_RELAY)
			return;
	}
	if ((o == c->cli ? c->cli_eof && !c->head_waiting : c->up_eof)) {
		proxy_shut(c, b);
		(void)proxy_maybe_done(c);
	}
}

/*
 * The client of a terminated connection left between two requests: its
 * verified upstream connection goes to the pool for the next client
 * connection to the same origin, and c closes. Only at a message
 * boundary with nothing buffered either way, every response delivered,
 * and no request or response on it that said Connection: close (the
 * origin would close it) or upgraded it. True if c is gone.
 */
static bool
proxy_pool_keep(struct proxy_conn *c)
{
	struct proxy *p = c->p;

	if (!c->term || c->up == NULL || !c->up_ready || !c->up_keep ||
	    c->up_eof || c->up_shut || c->rq_n != 0 || c->red != NULL ||
	    c->hphase != H_HEAD || c->rphase != H_HEAD ||
	    c->refuse_status != 0 ||
	    evbuffer_get_length(bufferevent_get_input(c->up)) != 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->up)) != 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->cli)) != 0 ||
	    /* bytes OpenSSL read ahead past the response (a close_notify):
	     * once idle, nothing would ever read them */
	    SSL_has_pending(bufferevent_openssl_get_ssl(c->up)) == 1)
		return false;
	tls_sess_keep(p->sess, bufferevent_openssl_get_ssl(c->up), true,
	    c->name, &c->dst, c->dport);
	proxy_pool_put(p->pool, c->up, c->up_vault, c->name, &c->dst, c->dport);
	c->up = NULL;
	c->up_vault = NULL;
	proxy_conn_close(c, PROXY_OK);
	return true;
}

/*
 * Whether the error on TLS bufferevent b is only the peer closing the
 * TCP connection without a close_notify (OpenSSL 3 reports it as
 * SSL_R_UNEXPECTED_EOF_WHILE_READING). Many servers and clients
 * (Python's ssl among them) close so: an end, not a failure. The
 * errors are consumed.
 */
static bool
proxy_dirty_eof(struct bufferevent *b)
{
	unsigned long code;
	bool eof = false, other = false;

	if (bufferevent_openssl_get_ssl(b) == NULL)
		return false;
	while ((code = bufferevent_get_openssl_error(b)) != 0) {
		if (ERR_GET_LIB(code) == 0)
			continue; /* libevent keeps SSL_get_error's value too */
		if (ERR_GET_LIB(code) == ERR_LIB_SSL &&
		    ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
			eof = true;
		else
			other = true;
	}
	return eof && !other;
}

static void
proxy_relay_event(struct proxy_conn *c, struct bufferevent *b, short what)
{
	struct bufferevent *o = proxy_other(c, b);
	bool is_cli = b == c->cli;
	bool dirty = false;

	if (what & BEV_EVENT_ERROR) {
		if (!(dirty = proxy_dirty_eof(b))) {
			proxy_conn_close(c,
			    is_cli ? PROXY_CLIENT_ERROR : PROXY_UPSTREAM_ERROR);
			return;
		}
		what |= BEV_EVENT_EOF;
	}
	if (!(what & BEV_EVENT_EOF))
		return;
	if (is_cli)
		c->cli_eof = true;
	else
		c->up_eof = true;
	/* what was read before the FIN goes first */
	if (proxy_relay_read(c, b) == -1 || c->st != PROXY_ST_RELAY)
		return;
	if (dirty && !is_cli && c->rphase == H_BODY &&
	    c->rbody.kind == HTTP_BODY_CLOSE) {
		/* a body ended by a close that was no TLS close: it may be
		 * cut short, and a clean close toward the client would say
		 * it is whole. Cut the client too. */
		proxy_conn_close(c, PROXY_UPSTREAM_ERROR);
		return;
	}
	if (is_cli && proxy_pool_keep(c))
		return;
	bufferevent_disable(b, EV_READ);
	if (!is_cli && c->refuse_status != 0) {
		if (evbuffer_get_length(bufferevent_get_output(c->cli)) == 0)
			proxy_refuse_http(c, c->refuse_status, c->refuse_why);
		else
			bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
		return;
	}
	if (is_cli && c->hphase == H_STOPPED)
		return; /* the refusal waits for the origin */
	if (is_cli && c->head_waiting)
		return; /* heads wait their turn; the FIN follows them */
	(void)proxy_fin_after(c, o);
}

/*
 * Pass-through relaying with splice(2): socket -> pipe -> socket, the
 * bytes never copied into egressd. A direction reads only while its pipe
 * is empty and waits for its destination to drain otherwise, so each
 * holds at most one pipe (PROXY_SPLICE_MAX) in flight: the backpressure.
 * -1: c is gone.
 */
static int
proxy_splice_pump(struct proxy_splice *s)
{
	struct proxy_conn *c = s->c;
	ssize_t n;

	for (;;) {
		if (s->inpipe > 0) {
			n = splice(s->pr, NULL, s->to, NULL, s->inpipe,
			    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0) {
				s->inpipe -= (size_t)n;
				if (s->dir == 0)
					c->up_bytes += (uint64_t)n;
				else
					c->down_bytes += (uint64_t)n;
				c->last_ms = now_mono_ms();
				continue;
			}
			if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				(void)event_del(s->rev);
				(void)event_add(s->wev, NULL);
				return 0;
			}
			goto fail;
		}
		(void)event_del(s->wev);
		if (s->eof) {
			proxy_pipe_put(s);
			if (!s->shut) {
				s->shut = true;
				(void)shutdown(s->to, SHUT_WR);
			}
			if (c->sp[0].shut && c->sp[1].shut) {
				proxy_conn_close(c, PROXY_OK);
				return -1;
			}
			return 0;
		}
		if (s->drained) {
			/* A short read emptied from's socket as far as it
			 * knew: wait for readiness instead of a read that
			 * would fail with EAGAIN (one syscall per transfer).
			 * rev is level-triggered, so whatever arrived since
			 * (or did not fit the pipe) wakes this again. */
			s->drained = false;
			proxy_pipe_put(s);
			(void)event_add(s->rev, NULL);
			return 0;
		}
		if (!proxy_pipe_get(s)) {
			/* every pipe is in flight (or no descriptor is
			 * left): the bytes wait in the socket */
			struct timeval tv = {0, PROXY_PIPE_RETRY_MS * 1000};

			(void)event_del(s->rev);
			(void)evtimer_add(s->retry, &tv);
			return 0;
		}
		n = splice(s->from, NULL, s->pw, NULL, PROXY_SPLICE_MAX,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			s->inpipe = (size_t)n;
			s->drained = (size_t)n < PROXY_SPLICE_MAX;
			continue;
		}
		if (n == 0) {
			s->eof = true;
			(void)event_del(s->rev);
			continue;
		}
		if (errno == EAGAIN || errno == EINTR) {
			proxy_pipe_put(s);
			(void)event_add(s->rev, NULL);
			return 0;
		}
		goto fail;
	}
fail:
	/* which side failed: a read error is from's, a write error to's;
	 * either way the connection ends */
	proxy_conn_close(c,
	    (s->dir == 0) == (s->inpipe == 0) ? PROXY_CLIENT_ERROR
	                                      : PROXY_UPSTREAM_ERROR);
	return -1;
}

static void
proxy_splice_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)proxy_splice_pump(arg);
}

static void
proxy_splice_start(struct proxy_conn *c)
{
	struct proxy *p = c->p;
	int i;

	/* Nothing was read through the bufferevents (the client's bytes
	 * wait in its socket), so they can go; their fds stay. */
	c->sfd[0] = bufferevent_getfd(c->cli);
	c->sfd[1] = bufferevent_getfd(c->up);
	(void)bufferevent_setfd(c->cli, -1);
	(void)bufferevent_setfd(c->up, -1);
	bufferevent_free(c->cli);
	bufferevent_free(c->up);
	c->cli = c->up = NULL;
	c->spliced = true;
	/* both directions whole before anything can fail: the close path
	 * looks at both */
	for (i = 0; i < 2; i++) {
		struct proxy_splice *s = &c->sp[i];

		s->c = c;
		s->dir = i;
		s->from = c->sfd[i];
		s->to = c->sfd[1 - i];
		s->pr = s->pw = -1;
	}
	for (i = 0; i < 2; i++) {
		struct proxy_splice *s = &c->sp[i];

		s->rev = event_new(
		    p->base, s->from, EV_READ | EV_PERSIST, proxy_splice_cb, s);
		s->wev = event_new(
		    p->base, s->to, EV_WRITE | EV_PERSIST, proxy_splice_cb, s);
		s->retry = evtimer_new(p->base, proxy_splice_cb, s);
		if (s->rev == NULL || s->wev == NULL || s->retry == NULL) {
			proxy_conn_close(c, PROXY_CLIENT_ERROR);
			return;
		}
	}
	(void)event_add(c->sp[1].rev, NULL);
	/* The ClientHello the peek saw waits in the client's socket: move
	 * it now, not a loop turn later (the pump arms rev0 when it is
	 * through). c may be gone after. */
	(void)proxy_splice_pump(&c->sp[0]);
}

/* Decided, connected (and, terminated, both handshakes done): relay. */
static void
proxy_start_relay(struct proxy_conn *c)
{
	proxy_set_state(c, PROXY_ST_RELAY);
	if (c->term)
		c->p->st.terminated++;
	else
		c->p->st.passthrough++;
	c->last_ms = now_mono_ms();
	(void)evtimer_del(c->timer);
	proxy_arm(c, c->p->o.idle_ms);
	if (!c->term && c->proto == PROTO_TLS) {
		proxy_splice_start(c);
		return;
	}
	bufferevent_setwatermark(c->up, EV_WRITE, PROXY_HIGH_WM / 2, 0);
	bufferevent_setwatermark(c->cli, EV_WRITE, PROXY_HIGH_WM / 2, 0);
	bufferevent_setwatermark(c->up, EV_READ, 0, PROXY_IN_MAX);
	bufferevent_setwatermark(c->cli, EV_READ, 0, PROXY_IN_MAX);
	/* bulk transfers: fewer, larger reads and writes (libevent's
	 * default is 16 KiB a call) */
	(void)bufferevent_set_max_single_read(c->up, PROXY_IO_MAX);
	(void)bufferevent_set_max_single_write(c->up, PROXY_IO_MAX);
	(void)bufferevent_set_max_single_read(c->cli, PROXY_IO_MAX);
	(void)bufferevent_set_max_single_write(c->cli, PROXY_IO_MAX);
	bufferevent_enable(c->up, EV_READ | EV_WRITE);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	if (proxy_relay_read(c, c->cli) == -1 || c->st != PROXY_ST_RELAY)
		return;
	proxy_kick(c->up);
	proxy_kick(c->cli);
}

/*
 * The TLS failure of b as text: the verify result, else OpenSSL's first
 * own error, else what the socket said. libevent queues SSL_get_error()'s
 * code (SSL_ERROR_SSL, SSL_ERROR_SYSCALL: no library part) ahead of
 * OpenSSL's errors; printed as it is, that reads "lib(0)::reason(5)".
 */
static void
proxy_tls_why(struct bufferevent *b, char *buf, size_t cap)
{
	SSL *ssl = bufferevent_openssl_get_ssl(b);
	unsigned long code, lib_code = 0;
	bool sys = false;
	long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
	int saved = errno;

	while ((code = bufferevent_get_openssl_error(b)) != 0) {
		if (ERR_GET_LIB(code) != 0) {
			if (lib_code == 0)
				lib_code = code;
		} else if (code == SSL_ERROR_SYSCALL)
			sys = true;
	}
	if (vr != X509_V_OK)
		(void)snprintf(buf, cap, "certificate verify failed: %s",
		    X509_verify_cert_error_string(vr));
	else if (lib_code != 0)
		ERR_error_string_n(lib_code, buf, cap);
	else if (sys && (saved == 0 || saved == EAGAIN))
		/* read(2) returned 0: no errno of its own (a stale EAGAIN
		 * is the last read that found nothing) */
		(void)snprintf(buf, cap, "connection closed by the peer");
	else if (sys)
		(void)snprintf(
		    buf, cap, "connection failed: %s", strerror(saved));
	else
		(void)snprintf(buf, cap, "%s", strerror(saved));
}

/* Terminated, the origin failed its TLS: the client, in its own
 * session, gets a 502; nothing was sent upstream. */
static void
proxy_term_fail(struct proxy_conn *c)
{
	char dst[ADDR_TEXT_MAX];

	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	log_warn(c->p->log, "proxy.upstream_tls_failed", LOG_S("name", c->name),
	    LOG_S("dst", dst), LOG_S("error", c->tls_why));
	proxy_refuse_http(c, 502, PROXY_UPSTREAM_TLS);
}

static void proxy_connect(struct proxy_conn *c);

static void
proxy_up_event(struct bufferevent *b, short what, void *arg)
{
	struct proxy_conn *c = arg;

	proxy_touch(c);

	if (c->st == PROXY_ST_CONNECT) {
		if (c->up_reused) {
			/* the origin closed the pooled connection while the
			 * client's handshake ran: nothing was sent on it, dial
			 * afresh */
			bufferevent_free(c->up);
			c->up = NULL;
			vault_free(c->up_vault);
			c->up_vault = NULL;
			c->up_reused = c->up_ready = false;
			proxy_connect(c);
			if (c->st == PROXY_ST_CONNECT && c->up_failed &&
			    c->cli_ready)
				proxy_term_fail(c);
			return;
		}
		if (what & BEV_EVENT_CONNECTED) {
			c->up_ready = true;
			c->up_resumed = c->term &&
			    SSL_session_reused(
			        bufferevent_openssl_get_ssl(c->up)) == 1;
			if (!c->term || c->cli_ready)
				proxy_start_relay(c);
			return;
		}
		if (!c->term) {
			proxy_conn_close(c, PROXY_CONNECT_FAILED);
			return;
		}
		c->up_failed = true;
		proxy_tls_why(b, c->tls_why, sizeof(c->tls_why));
		bufferevent_free(c->up);
		c->up = NULL;
		if (c->cli_ready)
			proxy_term_fail(c);
		return;
	}
	if (c->st == PROXY_ST_RELAY)
		proxy_relay_event(c, b, what);
}

/* --- deciding ----------------------------------------------------------------- */

static void
proxy_connect(struct proxy_conn *c)
{
	struct proxy *p = c->p;
	struct sockaddr_storage ss;
	socklen_t sl = addr_to_sockaddr(&c->dst, c->dport, &ss);
	struct err e = {""};
	int fd;

	c->up_keep = true;
	if (c->term &&
	    (c->up = proxy_pool_take(
	         p->pool, c->name, &c->dst, c->dport, &c->up_vault)) != NULL) {
		/* verified for this name and address already; reading, so
		 * the origin closing it before the relay starts is seen */
		c->up_reused = c->up_ready = true;
		p->st.upstream_reused++;
		proxy_set_state(c, PROXY_ST_CONNECT);
		(void)evtimer_del(c->timer);
		proxy_arm(c, p->o.connect_ms);
		bufferevent_setcb(
		    c->up, proxy_up_read, proxy_write_cb, proxy_up_event, c);
		/* nothing is taken from it before the relay starts */
		bufferevent_setwatermark(c->up, EV_READ, 0, PROXY_IN_MAX);
		bufferevent_enable(c->up, EV_READ);
		return;
	}
	fd = sock_open_marked(
	    c->dst.family, SOCK_STREAM | SOCK_NONBLOCK, p->o.mark, &e);
	if (fd == -1) {
		log_warn(
		    p->log, "proxy.upstream_socket", LOG_S("error", e.msg));
		proxy_conn_close(c, PROXY_CONNECT_FAILED);
		return;
	}
	{
		int one = 1;
		(void)setsockopt(
		    fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	proxy_set_state(c, PROXY_ST_CONNECT);
	(void)evtimer_del(c->timer);
	proxy_arm(c, p->o.connect_ms);
	if (c->term) {
		/* The TLS client starts once the connect completes (the
		 * socket turns writable); a failed connect fails the
		 * handshake, which answers the client 502. */
		SSL *ssl = SSL_new(p->cctx);

		if (ssl == NULL ||
		    SSL_set_tlsext_host_name(ssl, c->name) != 1 ||
		    (!p->o.ssl_insecure && SSL_set1_host(ssl, c->name) != 1) ||
		    tls_sess_offer(p->sess, ssl, c->name, &c->dst, c->dport) <
		        0 ||
		    (connect(fd, (struct sockaddr *)&ss, sl) == -1 &&
		        errno != EINPROGRESS)) {
			(void)snprintf(c->tls_why, sizeof(c->tls_why),
			    "connect: %s", strerror(errno));
			SSL_free(ssl);
			close(fd);
			c->up_failed = true;
			return;
		}
		c->up = bufferevent_openssl_socket_new(p->base, fd, ssl,
		    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (c->up == NULL) {
			SSL_free(ssl);
			close(fd);
			proxy_conn_close(c, PROXY_CONNECT_FAILED);
			return;
		}
		bufferevent_setcb(
		    c->up, proxy_up_read, proxy_write_cb, proxy_up_event, c);
		/* bufferevent_openssl reads from its handshake on, and
		 * nothing is taken before the relay starts */
		bufferevent_setwatermark(c->up, EV_READ, 0, PROXY_IN_MAX);
		return;
	}
	c->up = bufferevent_socket_new(p->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		close(fd);
		proxy_conn_close(c, PROXY_CONNECT_FAILED);
		return;
	}
	bufferevent_setcb(
	    c->up, proxy_up_read, proxy_write_cb, proxy_up_event, c);
	if (bufferevent_socket_connect(
	        c->up, (struct sockaddr *)&ss, (int)sl) == -1)
		proxy_conn_close(c, PROXY_CONNECT_FAILED);
}

/* A name (SNI or Host) for the hook: lowercase, one trailing dot off. */
static bool
proxy_norm_name(const char *s, size_t n, char *out, size_t cap)
{
	size_t i;

	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0 || n >= cap)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		out[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
	}
	out[n] = '\0';
	return true;
}

/*
 * Is a request to name (judged) on c one to a bound origin, whose every
 * response is redacted: the connection is terminated, its origin
 * connection went to a bound host before, or a binding names the host?
 */
static bool
proxy_bound(struct proxy_conn *c, const char *name)
{
	struct vault *v;

	if (c->term || c->up_vault != NULL)
		return true;
	return c->p->h.vault_get != NULL &&
	    (v = c->p->h.vault_get(c->p->h.arg)) != NULL &&
	    vault_host_bound(v, name, c->dport);
}

/* name: TLS_HELLO_SNI_MAX + 1 bytes, gets the request's host ("" when
 * it has none or a bad one). */
static enum proxy_reason
proxy_judge_host(
    struct proxy_conn *c, const struct http_head *h, int *status, char *name)
{
	struct http_span host;
	unsigned port;
	enum proxy_reason r;

	name[0] = '\0';

	*status = 403;
	if (h->host.p == NULL || h->host.n == 0) {
		*status = 400;
		return PROXY_NO_HOST;
	}
	if (http_span_ieq(&h->method, "CONNECT") ||
	    ((h->conn_upgrade || http_header_get(h, "upgrade", NULL) != NULL) &&
	        !proxy_upgrade_ok(h))) {
		*status = 501;
		return PROXY_UNSUPPORTED;
	}
	if (http_authority_split(&h->host, c->term ? 443 : 80, &host, &port) ==
	        -1 ||
	    !proxy_norm_name(host.p, host.n, name, TLS_HELLO_SNI_MAX + 1)) {
		name[0] = '\0';
		*status = 400;
		return PROXY_BAD_REQUEST;
	}
	if (c->term) {
		/* the SNI was judged and the origin verified for it: a
		 * request for another name is not this connection's */
		if (strcmp(name, c->name) != 0 || port != c->dport) {
			*status = 421;
			return PROXY_MISDIRECTED;
		}
	}
	if (port != c->dport)
		r = PROXY_PORT_MISMATCH;
	else
		r = c->p->h.judge(c->p->h.arg, name, &c->dst, c->dport);
	/* the log names the first request's host, or the one refused */
	if (!c->term && (c->name[0] == '\0' || r != PROXY_OK))
		memcpy(c->name, name, strlen(name) + 1);
	return r;
}

/*
 * A binding could match: the client gets a leaf for its SNI from
 * egressd's CA while the origin is dialled; both handshakes run at once
 * (proxy_start_relay once both are done).
 */
static void
proxy_terminate(struct proxy_conn *c)
{
	struct proxy *p = c->p;
	struct err e = {""};
	X509 *leaf = tls_ca_leaf(p->ca, c->name, &e);
	SSL *ssl;

	if (leaf == NULL) {
		log_error(p->log, "proxy.leaf_failed", LOG_S("name", c->name),
		    LOG_S("error", e.msg));
		proxy_conn_close(c, PROXY_CLIENT_TLS);
		return;
	}
	ssl = SSL_new(p->sctx);
	if (ssl == NULL || SSL_use_certificate(ssl, leaf) != 1 ||
	    SSL_use_PrivateKey(ssl, tls_ca_leaf_key(p->ca)) != 1) {
		char why[128];

		proxy_tls_error(why, sizeof(why));
		log_error(p->log, "proxy.leaf_failed", LOG_S("name", c->name),
		    LOG_S("error", why));
		SSL_free(ssl);
		proxy_conn_close(c, PROXY_CLIENT_TLS);
		return;
	}
	c->term = true;
	if (proxy_attach_cli(c, ssl) == -1) {
		proxy_conn_close(c, PROXY_CLIENT_ERROR);
		return;
	}
	/* read during the handshake, but no more than a head before the
	 * origin is there */
	bufferevent_setwatermark(c->cli, EV_READ, 0, PROXY_PEEK_MAX);
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	/* The ClientHello is in the socket (the peek read all of it): start
	 * the handshake in this loop turn, not after an epoll_wait that
	 * could only say so (the handshake event is libevent's own). */
	event_active(&c->cli->ev_read, EV_READ, 1);
	proxy_connect(c);
	if (c->st == PROXY_ST_CONNECT && c->up_failed && c->cli_ready)
		proxy_term_fail(c);
}

/* The decision is to relay: the client's socket into a bufferevent (its
 * first bytes still in it), then the origin dialled. */
static void
proxy_dial(struct proxy_conn *c)
{
	if (proxy_attach_cli(c, NULL) == -1) {
		proxy_conn_close(c, PROXY_CLIENT_ERROR);
		return;
	}
	proxy_connect(c);
}

static void
proxy_decide_tls(struct proxy_conn *c, const struct tls_hello *th)
{
	enum proxy_reason r;

	if (th->has_sni)
		memcpy(c->name, th->sni, sizeof(c->name));
	if (th->has_esni)
		r = PROXY_ESNI;
	else if (!th->has_sni)
		r = PROXY_NO_SNI;
	else if (th->sni_is_ip)
		r = PROXY_SNI_IP;
	else
		r = c->p->h.judge(c->p->h.arg, th->sni, &c->dst, c->dport);
	if (r != PROXY_OK) {
		proxy_refuse_tls(c, r);
		return;
	}
	if (c->p->ca != NULL && c->p->h.terminate != NULL &&
	    c->p->h.terminate(c->p->h.arg, c->name, c->dport)) {
		proxy_terminate(c);
		return;
	}
	proxy_dial(c);
}

/*
 * PEEK: the first bytes, read with MSG_PEEK so they stay in the socket
 * for whoever takes it over. The event is edge-triggered: it fires again
 * only when more bytes arrive, never for the ones already peeked.
 */
static void
proxy_peek_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;
	struct tls_hello th;
	struct http_head h;
	char name[TLS_HELLO_SNI_MAX + 1];
	struct err e = {""};
	const uint8_t *buf = c->pbuf;
	size_t len, end;
	ssize_t n;
	int status;
	enum proxy_reason r;

	(void)what;
	n = recv(fd, c->pbuf, PROXY_PEEK_MAX, MSG_PEEK);
	if (n == 0) {
		proxy_conn_close(c, PROXY_OK); /* left before a decision */
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			proxy_conn_close(c, PROXY_CLIENT_ERROR);
		return;
	}
	len = (size_t)n;
	if (c->proto == PROTO_UNKNOWN)
		c->proto = buf[0] == 22 ? PROTO_TLS : PROTO_HTTP;
	if (c->proto == PROTO_TLS) {
		switch (tls_hello_parse(buf, len, &th, &e)) {
		case TLS_HELLO_OK:
			proxy_decide_tls(c, &th);
			return;
		case TLS_HELLO_MORE:
			if (len < PROXY_PEEK_MAX)
				return;
			/* fallthrough */
		default:
			proxy_refuse_tls(c, PROXY_BAD_HELLO);
			return;
		}
	}
	if (!http_head_find_end((const char *)buf, len, &c->hcursor, &end)) {
		if (len >= PROXY_PEEK_MAX)
			proxy_refuse_http(c, 431, PROXY_BAD_REQUEST);
		return;
	}
	c->hcursor = 0;
	if (http_parse_request((const char *)buf, end, &h, &e) !=
	    HTTP_HEAD_OK) {
		proxy_refuse_http(c, h.reject_status ? h.reject_status : 400,
		    PROXY_BAD_REQUEST);
		return;
	}
	r = proxy_judge_host(c, &h, &status, name);
	if (r != PROXY_OK) {
		proxy_refuse_http(c, status, r);
		return;
	}
	/* the head stays in the socket: proxy_http_pump forwards it once
	 * connected, judging it again (same answer: nothing ran between) */
	proxy_dial(c);
}

static void
proxy_cli_read(struct bufferevent *b, void *arg)
{
	struct proxy_conn *c = arg;

	proxy_touch(c);

	switch (c->st) {
	case PROXY_ST_RELAY:
		if (proxy_relay_read(c, b) == 0 && c->st == PROXY_ST_RELAY)
			proxy_kick(c->up);
		break;
	case PROXY_ST_REFUSE:
		evbuffer_drain(bufferevent_get_input(b),
		    evbuffer_get_length(bufferevent_get_input(b)));
		break;
	default:
		break;
	}
}

static void
proxy_cli_event(struct bufferevent *b, short what, void *arg)
{
	struct proxy_conn *c = arg;

	proxy_touch(c);

	switch (c->st) {
	case PROXY_ST_RELAY:
		proxy_relay_event(c, b, what);
		return;
	case PROXY_ST_REFUSE:
		if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
			proxy_conn_close(c, c->why);
		return;
	case PROXY_ST_CONNECT:
		if (c->term && (what & BEV_EVENT_CONNECTED)) {
			c->cli_ready = true;
			c->cli_resumed =
			    SSL_session_reused(
			        bufferevent_openssl_get_ssl(b)) == 1;
			if (c->up_failed)
				proxy_term_fail(c);
			else if (c->up_ready)
				proxy_start_relay(c);
			return;
		}
		if (c->term && !c->cli_ready) {
			/* most often: the client does not trust egressd's CA
			 * (its alert says unknown_ca) */
			char why[128], dst[ADDR_TEXT_MAX];

			proxy_tls_why(b, why, sizeof(why));
			addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
			log_warn(c->p->log, "proxy.client_tls_failed",
			    LOG_S("name", c->name), LOG_S("dst", dst),
			    LOG_S("error", why));
			proxy_conn_close(c, PROXY_CLIENT_TLS);
			return;
		}
		/* fallthrough */
	default:
		/* the client left before a decision, or while connecting */
		proxy_conn_close(
		    c, what & BEV_EVENT_EOF ? PROXY_OK : PROXY_CLIENT_ERROR);
		return;
	}
}

static void
proxy_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = arg;
	uint64_t idle, now;

	(void)fd;
	(void)what;
	switch (c->st) {
	case PROXY_ST_PEEK:
		proxy_conn_close(c, PROXY_HELLO_TIMEOUT);
		return;
	case PROXY_ST_CONNECT:
		proxy_conn_close(c, PROXY_CONNECT_TIMEOUT);
		return;
	case PROXY_ST_REFUSE:
		proxy_conn_close(c, c->why);
		return;
	case PROXY_ST_RELAY:
		if (c->refuse_status != 0) {
			/* the origin kept the connection after our FIN */
			c->why = c->refuse_why;
			proxy_conn_close(c, c->refuse_why);
			return;
		}
		now = now_mono_ms();
		if (c->head_t0_ms != 0 &&
		    now - c->head_t0_ms >= c->p->o.head_ms) {
			/* nothing of the partial head went upstream */
			proxy_conn_close(c, PROXY_HEAD_TIMEOUT);
			return;
		}
		idle = now - c->last_ms;
		if (idle >= c->p->o.idle_ms) {
			proxy_conn_close(c, PROXY_IDLE);
			return;
		}
		proxy_relay_arm(c, now);
		return;
	default:
		return;
	}
}

/* --- accepting ---------------------------------------------------------------- */

static int
proxy_original_dst(int fd, int family, struct addr *a, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int rc;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET6)
		rc = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &sl);
	else
		rc = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &sl);
	if (rc == -1 ||
	    addr_from_sockaddr((struct sockaddr *)&ss, a, port) == -1)
		return -1;
	return 0;
}

/* The destination is the proxy itself (a direct connection, not a
 * redirect) or loopback: never relayed. */
static bool
proxy_dst_is_local(const struct addr *a)
{
	static const uint8_t v6lo[16] = {[15] = 1};

	if (a->family == AF_INET)
		return a->a[0] == 127;
	return memcmp(a->a, v6lo, 16) == 0;
}

/* peer: what accept4 returned, so no getpeername per connection. */
static void
proxy_conn_new(struct proxy *p, int fd, int family, const struct sockaddr *peer)
{
	struct proxy_conn *c = calloc(1, sizeof(*c));
	bool have_dst;

	if (c == NULL) {
		close(fd);
		return;
	}
	c->p = p;
	c->fd = fd;
	c->t0_ms = c->last_ms = now_mono_ms();
	c->st = PROXY_ST_PEEK;
	(void)addr_from_sockaddr(peer, &c->peer, &c->pport);
	have_dst = proxy_original_dst(fd, family, &c->dst, &c->dport) == 0;
	c->timer = evtimer_new(p->base, proxy_timer_cb, c);
	c->peek_ev = event_new(
	    p->base, fd, EV_READ | EV_PERSIST | EV_ET, proxy_peek_cb, c);
	c->pbuf = malloc(PROXY_PEEK_MAX);
	if (c->timer == NULL || c->peek_ev == NULL || c->pbuf == NULL) {
		if (c->timer != NULL)
			event_free(c->timer);
		if (c->peek_ev != NULL)
			event_free(c->peek_ev);
		free(c->pbuf);
		close(fd);
		free(c);
		return;
	}
	p->st.accepted++;
	p->st.active++;
	p->st.by_state[PROXY_ST_PEEK]++;
	c->next = p->conns;
	if (p->conns != NULL)
		p->conns->prev = c;
	p->conns = c;
	if (!have_dst || proxy_dst_is_local(&c->dst)) {
		if (!have_dst)
			c->dst.family = family;
		proxy_conn_close(c, PROXY_NO_DST);
		return;
	}
	(void)event_add(c->peek_ev, NULL);
	proxy_arm(c, p->o.hello_ms);
}

static void
proxy_pause_accept(struct proxy *p)
{
	size_t i;

	if (p->paused)
		return;
	p->paused = true;
	for (i = 0; i < p->nl; i++)
		(void)event_del(p->l[i].ev);
}

static void
proxy_resume_accept(struct proxy *p)
{
	size_t i;

	if (!p->paused || p->st.active >= p->o.conns_max ||
	    p->magic != PROXY_MAGIC)
		return;
	p->paused = false;
	for (i = 0; i < p->nl; i++)
		(void)event_add(p->l[i].ev, NULL);
}

static void
proxy_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct proxy *p = arg;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int i, fd, family;

	(void)what;
	if (p->magic != PROXY_MAGIC)
		abort();
	family = AF_INET;
	for (i = 0; i < (int)p->nl; i++)
		if (p->l[i].fd == lfd)
			family = p->l[i].family;
	/* One connection per wakeup (nginx's multi_accept off): the
	 * listener is level-triggered, so the loop comes back while more
	 * wait, other events get their turn in between, and the common
	 * case of one waiting connection costs no accept4 that fails with
	 * EAGAIN. */
	if (p->st.active >= p->o.conns_max) {
		proxy_pause_accept(p);
		return;
	}
	memset(&ss, 0, sizeof(ss));
	fd = accept4(
	    lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd == -1) {
		if (errno == EMFILE || errno == ENFILE) {
			/* drop the one waiting, so the listener does
			 * not stay readable forever */
			if (p->reserve_fd != -1) {
				close(p->reserve_fd);
				fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
				if (fd != -1)
					close(fd);
				p->reserve_fd =
				    open("/dev/null", O_RDONLY | O_CLOEXEC);
			}
			log_warn(p->log, "proxy.accept_failed",
			    LOG_S("error", strerror(EMFILE)));
		}
		return;
	}
	proxy_conn_new(p, fd, family, (struct sockaddr *)&ss);
}

static int
proxy_listen(struct proxy *p, int family, const char *addr, struct err *e)
{
	struct addr a;
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;
	struct proxy_listener *l = &p->l[p->nl];

	if (!addr_parse_ip(addr, strlen(addr), &a) || a.family != family) {
		err_set(e, "proxy listen address %s: not an IPv%d literal",
		    addr, family == AF_INET ? 4 : 6);
		return -1;
	}
	sl = addr_to_sockaddr(&a, p->port, &ss);
	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		err_set(e, "proxy socket: %s", strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* Heads and bodies go out as separate writes: Nagle would hold the
	 * second for the peer's delayed ACK. Set on the listener: Linux
	 * clones the listener's TCP state into every accepted socket, so
	 * this is one setsockopt, not one per connection. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (family == AF_INET6)
		(void)setsockopt(
		    fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) == -1 ||
	    listen(fd, PROXY_BACKLOG) == -1) {
		err_set(e, "proxy bind %s port %u: %s", addr, p->port,
		    strerror(errno));
		close(fd);
		return -1;
	}
	if (p->port == 0) {
		sl = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
			uint16_t port;
			struct addr b;
			if (addr_from_sockaddr(
			        (struct sockaddr *)&ss, &b, &port) == 0)
				p->port = port;
		}
	}
	l->fd = fd;
	l->family = family;
	l->ev =
	    event_new(p->base, fd, EV_READ | EV_PERSIST, proxy_accept_cb, p);
	if (l->ev == NULL || event_add(l->ev, NULL) == -1) {
		if (l->ev != NULL)
			event_free(l->ev);
		close(fd);
		err_set(e, "proxy: cannot register the listener");
		return -1;
	}
	p->nl++;
	return 0;
}

/*
 * Termination's pieces: the CA (generated on first start), the bundle
 * for the sandbox, both TLS contexts. The state directory is made if
 * missing (0755: the bundle in it is public; ca.key is 0600 itself).
 */
static int
proxy_tls_open(struct proxy *p, const struct proxy_opts *o, struct err *e)
{
	char bundle[4096];
	size_t ncerts = 0;

	if (mkdir(o->state_dir, 0755) == -1 && errno != EEXIST) {
		err_set(
		    e, "state directory %s: %s", o->state_dir, strerror(errno));
		return -1;
	}
	if ((p->ca = tls_ca_open(
	         o->state_dir, o->ca_key_file, o->ca_cert_file, e)) == NULL) {
		err_prefix(e, "proxy CA");
		return -1;
	}
	if (o->ca_bundle != NULL && o->ca_bundle[0] != '\0') {
		if (snprintf(bundle, sizeof(bundle), "%s", o->ca_bundle) >=
		    (int)sizeof(bundle)) {
			err_set(e, "CA bundle path too long");
			return -1;
		}
	} else if (snprintf(bundle, sizeof(bundle), "%s/%s", o->state_dir,
	               PROXY_BUNDLE_FILE) >= (int)sizeof(bundle)) {
		err_set(e, "state directory path too long");
		return -1;
	}
	if (tls_ca_export_bundle(p->ca, NULL, bundle, e) == -1) {
		err_prefix(e, "CA bundle");
		return -1;
	}
	if ((p->sctx = proxy_tls_server_ctx(e)) == NULL ||
	    (p->cctx = proxy_tls_client_ctx(
	         o->trust_dir, o->ssl_insecure, &ncerts, e)) == NULL)
		return -1;
	if ((p->sess = tls_sess_new()) == NULL ||
	    (p->pool = proxy_pool_new(p->base, 0, 0)) == NULL) {
		err_set(e, "TLS session cache: out of memory");
		return -1;
	}
	log_info(p->log, "proxy.tls_ready", LOG_S("state_dir", o->state_dir),
	    LOG_S("bundle", bundle),
	    LOG_S("trust_dir", o->trust_dir ? o->trust_dir : "default"),
	    LOG_U("trust_certs", ncerts), LOG_B("insecure", o->ssl_insecure));
	return 0;
}

/*
 * Descriptors for the cap: the soft RLIMIT_NOFILE is raised to what
 * conns_max connections and the reserve take (and the hard limit with
 * it, which needs CAP_SYS_RESOURCE), else to the hard limit. A limit
 * that still falls short lowers the cap rather than let accept and
 * connect fail with EMFILE under load; the reserve then shrinks to at
 * most half the limit so a tiny limit still leaves some connections.
 * Logged either way (proxy.nofile), a shortfall as a warning.
 */
static void
proxy_nofile(struct proxy *p)
{
	struct rlimit rl, want;
	rlim_t need, reserve;
	size_t asked = p->o.conns_max, fit;
	const char *how = "enough";

	need = (rlim_t)asked * PROXY_FDS_PER_CONN + 2 * PROXY_PIPES_MAX +
	    PROXY_FD_RESERVE;
	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return;
	if (rl.rlim_cur < need) {
		want.rlim_cur = need;
		want.rlim_max =
		    rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need
		    ? rl.rlim_max
		    : need;
		if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
			how = want.rlim_max != rl.rlim_max ? "raised_hard"
			                                   : "raised";
			rl = want;
		} else {
			rl.rlim_cur = rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &rl) == -1 ||
			    getrlimit(RLIMIT_NOFILE, &rl) == -1)
				return;
			how = "short";
		}
	}
	if (rl.rlim_cur >= need) {
		log_info(p->log, "proxy.nofile", LOG_S("outcome", how),
		    LOG_U("nofile", (uint64_t)rl.rlim_cur),
		    LOG_U("needed", (uint64_t)need), LOG_U("conns_max", asked));
		return;
	}
	reserve = 2 * PROXY_PIPES_MAX + PROXY_FD_RESERVE;
	if (reserve > rl.rlim_cur / 2)
		reserve = rl.rlim_cur / 2;
	fit = (size_t)((rl.rlim_cur - reserve) / PROXY_FDS_PER_CONN);
	if (fit == 0)
		fit = 1;
	p->o.conns_max = fit < asked ? fit : asked;
	log_warn(p->log, "proxy.nofile", LOG_S("outcome", how),
	    LOG_U("nofile", (uint64_t)rl.rlim_cur),
	    LOG_U("needed", (uint64_t)need), LOG_U("conns_asked", asked),
	    LOG_U("conns_max", p->o.conns_max));
}

struct proxy *
proxy_new(struct event_base *base, const struct proxy_opts *o,
    const struct proxy_hooks *h, struct log *lg, struct err *e)
{
	struct proxy *p;
	const char *l4 = o->listen4 ? o->listen4 : "127.0.0.1";
	const char *l6 = o->listen6 ? o->listen6 : "::1";

	if (h == NULL || h->judge == NULL) {
		err_set(e, "proxy: no judge hook");
		return NULL;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		err_set(e, "proxy: out of memory");
		return NULL;
	}
	p->magic = PROXY_MAGIC;
	p->base = base;
	p->log = lg;
	p->h = *h;
	p->o = *o;
	/* borrowed strings are not kept */
	p->o.listen4 = p->o.listen6 = NULL;
	p->o.state_dir = p->o.trust_dir = NULL;
	p->o.ca_key_file = p->o.ca_cert_file = NULL;
	if (p->o.conns_max == 0)
		p->o.conns_max = EGRESSD_DEFAULT_PROXY_CONNS_MAX;
	if (p->o.buf_max == 0)
		p->o.buf_max = (size_t)EGRESSD_DEFAULT_PROXY_BUFFER_MB << 20;
	proxy_nofile(p);
	if (p->o.hello_ms == 0)
		p->o.hello_ms = PROXY_HELLO_MS;
	if (p->o.connect_ms == 0)
		p->o.connect_ms = PROXY_CONNECT_MS;
	if (p->o.idle_ms == 0)
		p->o.idle_ms = PROXY_IDLE_MS;
	if (p->o.head_ms == 0)
		p->o.head_ms = PROXY_HEAD_MS;
	p->port = o->port;
	TAILQ_INIT(&p->settle);
	p->settle_ev = event_new(base, -1, 0, proxy_settle_cb, p);
	if (p->settle_ev == NULL) {
		err_set(e, "proxy: out of memory");
		free(p);
		return NULL;
	}
	log_limiter_init(&p->lim, PROXY_LOG_RATE, 2 * PROXY_LOG_RATE, 1000);
	p->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (o->state_dir != NULL && proxy_tls_open(p, o, e) == -1) {
		proxy_free(p);
		return NULL;
	}
	if ((l4[0] != '\0' && proxy_listen(p, AF_INET, l4, e) == -1) ||
	    (l6[0] != '\0' && proxy_listen(p, AF_INET6, l6, e) == -1)) {
		proxy_free(p);
		return NULL;
	}
	return p;
}

void
proxy_free(struct proxy *p)
{
	size_t i;

	if (p == NULL)
		return;
	if (p->magic != PROXY_MAGIC)
		abort();
	p->paused = true; /* closes must not re-enable the listeners */
	while (p->conns != NULL)
		proxy_conn_close(p->conns, PROXY_SHUTDOWN);
	for (i = 0; i < p->nl; i++) {
		event_free(p->l[i].ev);
		close(p->l[i].fd);
	}
	if (p->reserve_fd != -1)
		close(p->reserve_fd);
	while (p->nfree > 0) {
		p->nfree--;
		close(p->pipe_free[p->nfree][0]);
		close(p->pipe_free[p->nfree][1]);
	}
	proxy_pool_free(p->pool);
	if (p->settle_ev != NULL)
		event_free(p->settle_ev);
	SSL_CTX_free(p->sctx);
	SSL_CTX_free(p->cctx);
	tls_sess_free(p->sess);
	tls_ca_free(p->ca);
	p->magic = 0;
	free(p);
}

uint16_t
proxy_port(const struct proxy *p)
{
	return p->port;
}

size_t
proxy_rejudge(struct proxy *p)
{
	struct proxy_conn *c, *next;
	size_t closed = 0;

	/* idle upstream connections are not judged again: dialled anew if
	 * still allowed */
	(void)proxy_pool_flush(p->pool);
	for (c = p->conns; c != NULL; c = next) {
		next = c->next;
		if ((c->st != PROXY_ST_CONNECT && c->st != PROXY_ST_RELAY) ||
		    c->refused || c->name[0] == '\0')
			continue;
		if (p->h.judge(p->h.arg, c->name, &c->dst, c->dport) ==
		    PROXY_OK)
			continue;
		proxy_conn_close(c, PROXY_POLICY_CHANGED);
		closed++;
	}
	return closed;
}

void
proxy_status(const struct proxy *p, struct proxy_status *st)
{
	const struct proxy_conn *c;

	*st = p->st;
	st->paused = p->paused;
	st->upstream_idle = proxy_pool_count(p->pool);
	/* bytes of open connections count too */
	for (c = p->conns; c != NULL; c = c->next) {
		st->up_bytes += c->up_bytes;
		st->down_bytes += c->down_bytes;
	}
}
