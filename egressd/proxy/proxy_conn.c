/*
 * A connection's life: state, deadlines, refusals, the one close
 * path, and the end-of-turn settling.
 */
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h> /* ev_read, ev_write: the kicks */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/err.h>

#include "util/now.h"
#include "egressd/proxy/proxy_int.h"
#include "egressd/proxy/proxy_vault.h"

static void proxy_conn_resume_accept(struct proxy *p);

void
proxy_conn_set_state(struct proxy_conn *c, enum proxy_state st)
{
	c->p->st.by_state[c->st]--;
	c->st = st;
	c->p->st.by_state[st]++;
}

void
proxy_conn_arm(struct proxy_conn *c, unsigned ms)
{
	struct timeval tv = {ms / 1000, (long)(ms % 1000) * 1000};

	(void)evtimer_add(c->timer, &tv);
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

	if (!c->tls.term || !c->tls.cli_ready || c->relay.cli_eof ||
	    (why != PROXY_OK && why != PROXY_IDLE && why != PROXY_SHUTDOWN &&
	        why != PROXY_POLICY_CHANGED) ||
	    evbuffer_get_length(bufferevent_get_output(c->cli)) != 0 ||
	    (ssl = bufferevent_openssl_get_ssl(c->cli)) == NULL)
		return;
	(void)SSL_shutdown(ssl);
	ERR_clear_error();
}

/* The proxy.closed line: what c was and carried. */
static void
proxy_log_closed(struct proxy_conn *c)
{
	char dst[ADDR_TEXT_MAX];

	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	log_info(c->p->log, "proxy.closed",
	    LOG_S("decision",
	        c->refused                          ? "refused"
	            : c->tls.term                   ? "terminated"
	            : c->up != NULL || c->splice.on ? "passthrough"
	                                            : "none"),
	    LOG_S("reason", proxy_reason_name(c->why)),
	    LOG_S("proto",
	        c->proto == PROTO_TLS        ? "tls"
	            : c->proto == PROTO_HTTP ? "http"
	                                     : "unknown"),
	    LOG_S("dst", dst), LOG_S("name", c->name), LOG_U("up", c->up_bytes),
	    LOG_U("down", c->down_bytes), LOG_B("resumed", c->tls.up_resumed),
	    LOG_B("cli_resumed", c->tls.cli_resumed),
	    LOG_B("reused", c->origin.reused),
	    LOG_U("ms", now_mono_ms() - c->t0_ms));
}

/* A spliced connection's events, pipes and sockets. */
static void
proxy_splice_release(struct proxy_conn *c)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (c->splice.dir[i].rev != NULL)
			event_free(c->splice.dir[i].rev);
		if (c->splice.dir[i].wev != NULL)
			event_free(c->splice.dir[i].wev);
		if (c->splice.dir[i].retry != NULL)
			event_free(c->splice.dir[i].retry);
		proxy_pipe_put(&c->splice.dir[i]);
		close(c->splice.fd[i]);
	}
}

/* What c holds besides the struct itself: its events, sockets and
 * bufferevents, its redaction state and vault references. */
static void
proxy_conn_release(struct proxy_conn *c, enum proxy_reason why)
{
	size_t i;

	if (c->peek.ev != NULL)
		event_free(c->peek.ev);
	c->peek.ev = NULL;
	free(c->peek.buf);
	c->peek.buf = NULL;
	if (c->splice.on)
		proxy_splice_release(c);
	if (c->cli != NULL) {
		proxy_close_notify(c, why);
		bufferevent_free(c->cli);
	} else if (c->fd != -1)
		close(c->fd);
	c->cli = NULL;
	c->fd = -1;
	if (c->up != NULL)
		bufferevent_free(c->up);
	c->up = NULL;
	uproxy_dial_cancel(c->origin.dial);
	c->origin.dial = NULL;
	proxy_vault_clear(c);
	for (i = 0; i < PROXY_PIPELINE_MAX; i++) {
		vault_free(c->relay.rq[i].vault);
		c->relay.rq[i].vault = NULL;
	}
	vault_free(c->origin.vault);
	c->origin.vault = NULL;
	vault_free(c->vault.bound_v);
	c->vault.bound_v = NULL;
	free(c->relay.denial);
	c->relay.denial = NULL;
	policy_host_rules_free(c->relay.rules);
	c->relay.rules = NULL;
	event_free(c->timer);
	c->timer = NULL;
}

/*
 * The one close path. Idempotent (a second close keeps the first
 * reason). Everything c holds is released now; the struct itself goes
 * to the graveyard and is freed on the next loop turn (proxy_conn_reap_cb),
 * since callers up the stack may still hold it: they see it closed
 * (proxy_conn_relaying) and return.
 */
void
proxy_conn_close(struct proxy_conn *c, enum proxy_reason why)
{
	struct proxy *p = c->p;

	if (c->closed)
		return;
	if (!c->refused)
		c->why = why;
	proxy_mint_forget(c); /* its token, if it waited, serves others */
	if (c->vault.dec != NULL) /* a response being decoded ends unfinished */
		proxy_vault_log_compressed(
		    c, PROXY_COMPRESSED_FAILED, "connection_closed");
	/* A terminated origin's session, kept for the next connection to
	 * it (after the response: TLS 1.3 tickets have arrived by now). */
	if (c->tls.term && c->up != NULL)
		tls_sess_keep(p->sess, bufferevent_openssl_get_ssl(c->up),
		    c->tls.up_ready, c->name, &c->dst, c->dport);
	proxy_log_closed(c);
	p->st.by_reason[c->why]++;
	p->st.by_state[c->st]--;
	p->st.active--;
	p->st.up_bytes += c->up_bytes;
	p->st.down_bytes += c->down_bytes;
	if (c->settling)
		TAILQ_REMOVE(&p->settle, c, settle_e);
	c->settling = false;
	p->buffered -= c->buffered;
	c->buffered = 0;
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		p->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	proxy_conn_release(c, why);
	c->closed = true;
	c->dead_next = p->graveyard;
	p->graveyard = c;
	event_active(p->reap_ev, EV_TIMEOUT, 1);
	proxy_conn_resume_accept(p);
}

/* The graveyard emptied: closed connections freed once nothing up the
 * stack holds them (the next loop turn, or proxy_free). */
void
proxy_conn_reap_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *p = arg;
	struct proxy_conn *c;

	(void)fd;
	(void)what;
	if (p->magic != PROXY_MAGIC)
		abort();
	while ((c = p->graveyard) != NULL) {
		p->graveyard = c->dead_next;
		c->magic = PROXY_CONN_DEAD;
		free(c);
	}
}

/* The connection a callback was given: a live one, or the process
 * stops (a freed or foreign pointer would be worse). */
struct proxy_conn *
proxy_conn_arg(void *arg)
{
	struct proxy_conn *c = arg;

	if (c->magic != PROXY_CONN_MAGIC)
		abort();
	return c;
}

/* Whether the relay goes on with c: not closed, and still relaying (a
 * refusal moves it to REFUSE; its pumps stop then too). */
bool
proxy_conn_relaying(const struct proxy_conn *c)
{
	return !c->closed && c->st == PROXY_ST_RELAY;
}

/*
 * The decision is made: the client's socket (its first bytes still
 * unread in the kernel) goes to a bufferevent, plain or, with ssl (taken
 * over), the server side of a terminated connection. -1: out of memory
 * (c stays consistent; the caller closes it).
 */
int
proxy_conn_attach_cli(struct proxy_conn *c, SSL *ssl)
{
	struct proxy *p = c->p;

	if (c->cli != NULL)
		return 0;
	if (c->peek.ev != NULL) {
		event_free(c->peek.ev);
		c->peek.ev = NULL;
	}
	free(c->peek.buf);
	c->peek.buf = NULL;
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
	    c->cli, p->cli_read_cb, p->cli_write_cb, p->cli_event_cb, c);
	return 0;
}

/* FIN toward b (its output is flushed): close_notify first on TLS. */
void
proxy_conn_fin(struct bufferevent *b)
{
	SSL *ssl = bufferevent_openssl_get_ssl(b);

	if (ssl != NULL)
		(void)SSL_shutdown(ssl);
	(void)shutdown(bufferevent_getfd(b), SHUT_WR);
}

/* --- relaying ---------------------------------------------------------------- */

struct bufferevent *
proxy_conn_other(struct proxy_conn *c, struct bufferevent *b)
{
	return b == c->cli ? c->up : c->cli;
}

/*
 * Moves what src has read toward dst, at most max bytes (SIZE_MAX: all),
 * then holds src back (proxy_http_hold_back). -1: out of memory (the caller
 * closes).
 */
int
proxy_conn_move(struct proxy_conn *c, struct bufferevent *src,
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
	proxy_http_hold_back(src, dst);
	return 0;
}

/*
 * A terminated client's pending response in one piece when it is small:
 * the TLS bufferevent seals one record, and makes one write(2), per
 * buffer segment, and a response is a head plus body segments (two
 * records and two syscalls for a 1 KiB answer, measured). Responses
 * are redacted before they get here, so the copy holds no secret.
 */
void
proxy_conn_coalesce(struct bufferevent *b)
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
void
proxy_conn_kick(struct bufferevent *b)
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
 * connection's callbacks ran ends with proxy_conn_settle_cb looking at it:
 * a TLS bufferevent still reading with bytes in OpenSSL gets its read
 * event run again. A partial record costs one read that finds the socket
 * empty, and stops there (no progress: no callback, no new look).
 */
static void
proxy_conn_kick_read(struct bufferevent *b)
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
	size_t n =
	    c->vault.hold != NULL ? evbuffer_get_length(c->vault.hold) : 0;
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
void
proxy_conn_touch(struct proxy_conn *c)
{
	if (c->settling)
		return;
	c->settling = true;
	TAILQ_INSERT_TAIL(&c->p->settle, c, settle_e);
	event_active(c->p->settle_ev, EV_TIMEOUT, 1);
}

void
proxy_conn_settle_cb(evutil_socket_t fd, short what, void *arg)
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
		proxy_conn_kick_read(c->cli);
		proxy_conn_kick_read(c->up);
	}
	if (p->buffered > p->o.buf_max)
		proxy_shed(p);
}

/* FIN toward b once its output is flushed (TCP half-close both ways). */
void
proxy_conn_shut(struct proxy_conn *c, struct bufferevent *b)
{
	bool *shut = b == c->cli ? &c->relay.cli_shut : &c->relay.up_shut;

	if (*shut || evbuffer_get_length(bufferevent_get_output(b)) != 0)
		return;
	*shut = true;
	proxy_conn_fin(b);
}

/* Both directions ended and flushed: done (c closes). */
void
proxy_conn_maybe_done(struct proxy_conn *c)
{
	if (c->relay.cli_eof && c->relay.up_eof && c->relay.cli_shut &&
	    c->relay.up_shut)
		proxy_conn_close(c, PROXY_OK);
}

/* The other side said its last: FIN toward b once b's queue is out (its
 * write callback sends it then). c may close. */
void
proxy_conn_fin_after(struct proxy_conn *c, struct bufferevent *b)
{
	bufferevent_setwatermark(b, EV_WRITE, 0, 0);
	proxy_conn_shut(c, b);
	proxy_conn_maybe_done(c);
}

/*
 * RELAY: the timer for whichever comes first, the idle timeout (no byte
 * moved either way) or the deadline of a request head that has begun.
 */
static void
proxy_conn_relay_arm(struct proxy_conn *c, uint64_t now)
{
	uint64_t idle = now - c->last_ms, left, hl;

	left = idle < c->p->o.idle_ms ? c->p->o.idle_ms - idle : 0;
	if (c->relay.head_t0_ms != 0) {
		hl = now - c->relay.head_t0_ms < c->p->o.head_ms
		    ? c->p->o.head_ms - (now - c->relay.head_t0_ms)
		    : 0;
		if (hl < left)
			left = hl;
	}
	proxy_conn_arm(c, (unsigned)left);
}

/*
 * The first bytes of a request head are in, not yet its end: from now
 * the whole head has o.head_ms (a byte now and then would otherwise
 * hold the connection for as long as the idle timeout allows). Bytes
 * of the head are not moved, so they do not count as activity either.
 * Not while egressd itself stops reading the client (the origin is
 * slow to take a body before it): the clock starts when reads resume.
 */
void
proxy_conn_head_started(struct proxy_conn *c)
{
	uint64_t now;

	if (!(bufferevent_get_enabled(c->cli) & EV_READ)) {
		c->relay.head_t0_ms = 0;
		return;
	}
	if (c->relay.head_t0_ms != 0)
		return;
	now = now_mono_ms();
	c->relay.head_t0_ms = now;
	proxy_conn_relay_arm(c, now);
}

void
proxy_conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);
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
		if (c->relay.refuse_status != 0) {
			/* the origin kept the connection after our FIN */
			c->why = c->relay.refuse_why;
			proxy_conn_close(c, c->relay.refuse_why);
			return;
		}
		now = now_mono_ms();
		if (c->relay.head_t0_ms != 0 &&
		    now - c->relay.head_t0_ms >= c->p->o.head_ms) {
			/* nothing of the partial head went upstream */
			proxy_conn_close(c, PROXY_HEAD_TIMEOUT);
			return;
		}
		idle = now - c->last_ms;
		if (idle >= c->p->o.idle_ms) {
			proxy_conn_close(c, PROXY_IDLE);
			return;
		}
		proxy_conn_relay_arm(c, now);
		return;
	default:
		return;
	}
}

void
proxy_conn_pause_accept(struct proxy *p)
{
	size_t i;

	if (p->paused)
		return;
	p->paused = true;
	for (i = 0; i < p->nl; i++)
		(void)event_del(p->l[i].ev);
}

static void
proxy_conn_resume_accept(struct proxy *p)
{
	size_t i;

	if (!p->paused || p->st.active >= p->o.conns_max ||
	    p->magic != PROXY_MAGIC)
		return;
	p->paused = false;
	for (i = 0; i < p->nl; i++)
		(void)event_add(p->l[i].ev, NULL);
}
