/*
 * The HTTP/1.1 relay: requests up, responses down, one queue of
 * request records between them.
 */
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "egressd/proxy/proxy_pool.h"
#include "util/now.h"
#include "egressd/proxy/proxy_int.h"
#include "egressd/proxy/proxy_vault.h"

static void proxy_resp_done(struct proxy_conn *c);
static void proxy_resp_pump(struct proxy_conn *c);
static void proxy_pool_keep(struct proxy_conn *c);

/*
 * Decoding a response failed (e): logged; a 502 when nothing of it went
 * out yet, else the connection is cut (the client sees a body that never
 * ended, not a complete one). Either way the relay of c ends.
 */
static void
proxy_vault_decode_failed(struct proxy_conn *c, const struct err *e)
{
	proxy_vault_log_compressed(c, PROXY_COMPRESSED_FAILED,
	    http_decode_why_name(http_decode_why(c->vault.dec)));
	if (c->vault.hold != NULL) {
		proxy_vault_clear(c);
		proxy_refuse_http_detail(c, 502, PROXY_VAULT_DECODE, e->msg);
		return;
	}
	proxy_vault_clear(c);
	proxy_conn_close(c, PROXY_VAULT_DECODE);
}

/* The vault's answer to a response head (proxy_vault_response) carried
 * out. -1: out of memory. */
static int
proxy_relay_vault_head(struct proxy_conn *c, const struct http_head *h,
    const char *buf, size_t end, struct err *e)
{
	switch (proxy_vault_response(c, h, buf, end, e)) {
	case PROXY_VAULT_RC_COMPRESSED:
		proxy_refuse_http_detail(c, 502, PROXY_VAULT_COMPRESSED,
		    c->p->o.vault_decode
		        ? "a compressed response egressd cannot "
		          "decode, to a request a credential "
		          "was injected into"
		        : "a compressed response to a request a "
		          "credential was injected into");
		break;
	case PROXY_VAULT_RC_UNSAFE:
		proxy_refuse_http(c, 502, PROXY_VAULT_UNSAFE);
		break;
	case PROXY_VAULT_RC_NOMEM:
		return -1;
	case PROXY_VAULT_RC_DONE:
		proxy_resp_done(c);
		break;
	case PROXY_VAULT_RC_BODY:
		c->relay.rphase = H_BODY;
		break;
	case PROXY_VAULT_RC_INTERIM:
		break;
	}
	return 0;
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
	return c->relay.rq_n == 0 ||
	    (c->relay.refuse_inflight && c->relay.rq_n == 1 &&
	        c->relay.rphase == H_HEAD);
}

/* What one step of the request pump says next. */
enum proxy_pump {
	PROXY_PUMP_NEXT, /* go on with what the input holds */
	PROXY_PUMP_WAIT, /* stop here: more bytes or a response first */
	PROXY_PUMP_REFUSE, /* the stream is refused (status, why) */
	PROXY_PUMP_NOMEM, /* out of memory: the pump closes */
	PROXY_PUMP_BAD, /* a malformed response (e): the pump closes */
	PROXY_PUMP_GONE, /* c closed, or refused (out of RELAY) */
};

/* H_BODY: the request body's next bytes, forwarded by its framing. */
static enum proxy_pump
proxy_pump_body(struct proxy_conn *c, struct evbuffer *in, int *status,
    enum proxy_reason *why)
{
	struct err e = {""};
	size_t take;
	bool done;

	if (proxy_http_body_take(&c->relay.hbody, in, &take, &done, &e) == -1) {
		*why = PROXY_BAD_REQUEST;
		*status = 400;
		c->relay.refuse_inflight = true;
		return PROXY_PUMP_REFUSE;
	}
	if (proxy_conn_move(c, c->cli, c->up, take) == -1)
		return PROXY_PUMP_NOMEM;
	if (done)
		c->relay.hphase = H_HEAD;
	else if (take == 0 || !(bufferevent_get_enabled(c->cli) & EV_READ))
		return PROXY_PUMP_WAIT;
	return PROXY_PUMP_NEXT;
}

/* H_HEAD: whether a head may be read now. */
static bool
proxy_pump_head_gate(struct proxy_conn *c, struct evbuffer *in, size_t len)
{
	if (c->relay.cli_closing)
		return false; /* nothing after a close request */
	if (c->relay.rq_n == PROXY_PIPELINE_MAX) {
		/* resumed when a response completes */
		c->relay.head_waiting = true;
		return false;
	}
	if (c->vault.mint != NULL)
		return false; /* its token first (proxy_relay_mint_done) */
	if (c->vault.hold_end != 0) {
		/* a body held for substitution is arriving (not idle): its
		 * request is judged again once it is all here, not at every
		 * read */
		c->last_ms = now_mono_ms();
		if (!proxy_vault_hold_ready(c, in, len))
			return false;
	}
	return true;
}

/* The head at the start of in (len bytes), found and parsed into h
 * (end: its length). */
static enum proxy_pump
proxy_pump_head_parse(struct proxy_conn *c, struct evbuffer *in, size_t len,
    struct http_head *h, size_t *end, int *status, enum proxy_reason *why)
{
	size_t n = len < PROXY_PEEK_MAX ? len : PROXY_PEEK_MAX;
	const char *buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
	struct err e = {""};

	if (!http_head_find_end(buf, n, &c->relay.hcursor, end)) {
		if (len >= PROXY_PEEK_MAX) {
			*why = PROXY_BAD_REQUEST;
			*status = 431;
			return PROXY_PUMP_REFUSE;
		}
		/* at most a head buffered before judging */
		bufferevent_setwatermark(c->cli, EV_READ, 0, PROXY_PEEK_MAX);
		proxy_conn_head_started(c);
		return PROXY_PUMP_WAIT;
	}
	c->relay.hcursor = 0;
	c->relay.head_t0_ms = 0;
	if (http_parse_request(buf, *end, h, &e) != HTTP_HEAD_OK) {
		*why = PROXY_BAD_REQUEST;
		*status = h->reject_status ? h->reject_status : 400;
		return PROXY_PUMP_REFUSE;
	}
	return PROXY_PUMP_NEXT;
}

/*
 * A judged head h (end bytes of in) goes upstream: its record queued,
 * its bytes moved (rc 1: its rewrite went up already, with body_taken
 * bytes of body; else moved as they are, or edited), its body's framing
 * set up.
 */
static enum proxy_pump
proxy_pump_forward(struct proxy_conn *c, struct http_head *h,
    struct evbuffer *in, size_t end, int rc, struct vault *used,
    uint64_t body_taken)
{
	struct proxy_rq *r;
	int closef;
	bool taint;

	/* Every response of a bound origin is redacted, whether or not its
	 * request carried a secret: origins store what they are sent and
	 * give it back later, on any connection. The origin connection
	 * stays bound from its first such request (a plain one may name
	 * other hosts later), pooled too. */
	if (used == NULL && rc == 0 && c->origin.vault != NULL)
		used = vault_ref(c->origin.vault);
	else if (used != NULL && used != c->origin.vault) {
		vault_free(c->origin.vault);
		c->origin.vault = vault_ref(used);
	}
	taint = rc == 0 && used != NULL;
	r = proxy_rq_push(c, h, used);
	closef = proxy_http_close_field(c, h);
	if ((h->conn_close && closef == -1) || h->conn_upgrade)
		c->origin.keep = false;
	r->close = c->relay.cli_closing = closef != -1;
	bufferevent_setwatermark(c->cli, EV_READ, 0, PROXY_IN_MAX);
	if (rc == 1) { /* its rewrite went up (with its body) */
		evbuffer_drain(in, end + (size_t)body_taken);
		/* megabytes when a body was substituted: the client waits
		 * until the origin takes them */
		proxy_http_hold_back(c->cli, c->up);
	} else if (closef != -1 || taint) {
		/* h's spans point into in's first chain, pulled up */
		if (proxy_http_move_head(c,
		        (const char *)evbuffer_pullup(in, (ev_ssize_t)end), end,
		        h, closef, taint) == -1)
			return PROXY_PUMP_NOMEM;
	} else if (proxy_conn_move(c, c->cli, c->up, end) == -1)
		return PROXY_PUMP_NOMEM;
	proxy_http_body_start(&c->relay.hbody, h);
	if (body_taken > 0)
		c->relay.hbody.kind = HTTP_BODY_NONE;
	if (h->conn_upgrade) {
		/* no body: what follows is the other protocol, relayed only
		 * once the origin said 101 */
		c->relay.hphase = H_UPGRADE;
		bufferevent_disable(c->cli, EV_READ);
		return PROXY_PUMP_WAIT;
	}
	c->relay.hphase =
	    c->relay.hbody.kind == HTTP_BODY_NONE ? H_HEAD : H_BODY;
	if (!(bufferevent_get_enabled(c->cli) & EV_READ) && !c->relay.cli_eof)
		return PROXY_PUMP_WAIT; /* backpressure: resumed by the write
					 * cb */
	return PROXY_PUMP_NEXT;
}

/* H_HEAD: the next request head read, judged, given to the vault and
 * forwarded. */
static enum proxy_pump
proxy_pump_head(struct proxy_conn *c, struct evbuffer *in, size_t len,
    int *status, enum proxy_reason *why)
{
	struct http_head h;
	char name[TLS_HELLO_SNI_MAX + 1];
	struct vault *used = NULL;
	uint64_t body_taken;
	size_t end, wait;
	enum proxy_pump pr;
	int rc;

	if (!proxy_pump_head_gate(c, in, len))
		return PROXY_PUMP_WAIT;
	pr = proxy_pump_head_parse(c, in, len, &h, &end, status, why);
	if (pr != PROXY_PUMP_NEXT)
		return pr;
	*why = proxy_judge_host(c, &h, status, name);
	if (*why == PROXY_OK)
		*why = proxy_judge_request(c, &h, name, status);
	if (*why != PROXY_OK)
		return PROXY_PUMP_REFUSE;
	if (c->relay.rq_n > 0 && proxy_judge_bound(c, name)) {
		/* One request at a time to a bound origin: a secret is never
		 * written behind responses still pending, whose framing a
		 * hostile client may have bent (issue 34). Resumed by
		 * proxy_resp_done; at most this head is read meanwhile. */
		bufferevent_setwatermark(c->cli, EV_READ, 0, PROXY_PEEK_MAX);
		c->relay.head_waiting = true;
		return PROXY_PUMP_WAIT;
	}
	c->relay.head_waiting = false;
	rc = proxy_vault_request(
	    c, &h, name, in, end, &used, &body_taken, &wait, status, why);
	if (rc == 2) {
		/* a body to substitute: the whole request first (bytes are
		 * arriving: not idle) */
		c->vault.hold_end = end;
		c->vault.hold_wait = wait;
		c->last_ms = now_mono_ms();
		bufferevent_setwatermark(c->cli, EV_READ, 0, wait);
		return PROXY_PUMP_WAIT;
	}
	if (rc == 3) {
		/* an oauth2 token is being minted: the head stays in the
		 * input, judged again once it is in (at most a head more is
		 * read meanwhile) */
		bufferevent_setwatermark(c->cli, EV_READ, 0, PROXY_PEEK_MAX);
		return PROXY_PUMP_WAIT;
	}
	c->vault.hold_end = 0;
	c->vault.sub_scanning = false;
	c->vault.cont_sent = false;
	if (rc == -1)
		return PROXY_PUMP_REFUSE;
	if (rc == -2)
		return PROXY_PUMP_NOMEM;
	return proxy_pump_forward(c, &h, in, end, rc, used, body_taken);
}

/* A refused head stops the stream: nothing more goes upstream; the
 * refusal follows the answers to what was forwarded before it. */
static void
proxy_pump_refuse(struct proxy_conn *c, struct evbuffer *in, int status,
    enum proxy_reason why)
{
	c->relay.hphase = H_STOPPED;
	c->relay.head_t0_ms = 0;
	c->relay.refuse_status = status;
	c->relay.refuse_why = why;
	bufferevent_disable(c->cli, EV_READ);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (c->up == NULL || proxy_refuse_now(c)) {
		/* nothing pending upstream: answer at once */
		proxy_refuse_http(c, status, why);
		return;
	}
	/* proxy_resp_pump answers once the pending responses are through;
	 * an origin that never finishes does not hold the slot */
	proxy_conn_arm(c, c->p->o.connect_ms);
}

/*
 * Plain HTTP and terminated TLS, client -> origin: each head judged,
 * bodies forwarded by their framing. A refused head stops the stream:
 * nothing more goes upstream; the refusal follows the answers to what
 * was forwarded before it. It may refuse or close c.
 */
static void
proxy_req_pump(struct proxy_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->cli);
	enum proxy_reason why = PROXY_OK;
	enum proxy_pump pr;
	int status = 0;
	size_t len;

	for (;;) {
		len = evbuffer_get_length(in);
		if (c->relay.hphase == H_RAW) {
			if (proxy_conn_move(c, c->cli, c->up, SIZE_MAX) == -1)
				proxy_conn_close(c, PROXY_CLIENT_ERROR);
			return;
		}
		if (len == 0 || c->relay.hphase == H_STOPPED ||
		    c->relay.hphase == H_UPGRADE)
			return;
		if (c->relay.hphase == H_BODY)
			pr = proxy_pump_body(c, in, &status, &why);
		else
			pr = proxy_pump_head(c, in, len, &status, &why);
		switch (pr) {
		case PROXY_PUMP_NEXT:
			continue;
		case PROXY_PUMP_WAIT:
			return;
		case PROXY_PUMP_NOMEM:
			proxy_conn_close(c, PROXY_CLIENT_ERROR);
			return;
		case PROXY_PUMP_REFUSE:
		default:
			proxy_pump_refuse(c, in, status, why);
			return;
		}
	}
}

void
proxy_relay_mint_done(struct proxy_conn *c, bool failed)
{
	proxy_conn_touch(c);
	if (!proxy_conn_relaying(c))
		return;
	if (failed) {
		/* never sent without its token: 502, the reason with it */
		proxy_pump_refuse(
		    c, bufferevent_get_input(c->cli), 502, PROXY_VAULT_TOKEN);
		return;
	}
	proxy_req_pump(c);
	if (proxy_conn_relaying(c))
		proxy_conn_kick(c->up);
}

/* The response to a close request is out: the client connection ends,
 * its origin connection to the pool when it can go there. */
static void
proxy_close_finish(struct proxy_conn *c)
{
	proxy_pool_keep(c);
	proxy_conn_close(c, PROXY_OK); /* a no-op when it went to the pool */
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
	c->relay.cli_closing = true;
	c->origin.keep = false;
	c->relay.hphase = H_STOPPED; /* no refuse_status: no refusal follows */
	bufferevent_disable(c->cli, EV_READ);
	evbuffer_drain(in, evbuffer_get_length(in));
}

/* The response at the head of the queue is complete. It may refuse or
 * close c: the pumps go on only while it relays (proxy_conn_relaying). */
static void
proxy_resp_done(struct proxy_conn *c)
{
	bool was_upgrade = proxy_rq_head(c)->upgrade;
	bool was_close = proxy_rq_head(c)->close;

	proxy_vault_clear(c);
	proxy_rq_pop(c);
	c->relay.rphase = H_HEAD;
	if (c->relay.hphase == H_STOPPED && c->relay.refuse_status != 0 &&
	    proxy_refuse_now(c)) {
		proxy_refuse_http(
		    c, c->relay.refuse_status, c->relay.refuse_why);
		return; /* c lives on in REFUSE, but the pumps stop */
	}
	if (was_close) {
		/* proxy_relay_write_cb finishes once the client has it all */
		bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
		if (evbuffer_get_length(bufferevent_get_output(c->cli)) == 0)
			proxy_close_finish(c);
		return;
	}
	if (was_upgrade && c->relay.hphase == H_UPGRADE)
		c->relay.hphase =
		    H_HEAD; /* refused by the origin: HTTP goes on */
	if (c->relay.hphase == H_HEAD && !c->relay.cli_eof) {
		bufferevent_enable(c->cli, EV_READ);
		proxy_req_pump(c);
		return;
	}
	if (c->relay.hphase == H_HEAD && c->relay.head_waiting) {
		/* the client sent its last requests and its FIN: they go
		 * now, and the FIN after them */
		proxy_req_pump(c);
		if (proxy_conn_relaying(c) && !c->relay.head_waiting &&
		    (c->relay.hphase == H_HEAD || c->relay.hphase == H_BODY))
			proxy_conn_fin_after(c, c->up);
	}
}

/* H_BODY of a response: its next bytes, redacted (c->vault.red) or moved by
 * their framing; the response done at its end. */
static enum proxy_pump
proxy_rpump_body(struct proxy_conn *c, struct evbuffer *in, struct err *e)
{
	bool red = c->vault.red != NULL, done;
	size_t take = 0;
	int vb;

	if (red) {
		vb = proxy_vault_body(c, in, &done, e);
		if (vb == -3) {
			proxy_vault_decode_failed(c, e);
			return PROXY_PUMP_GONE;
		}
		if (vb == -2)
			return PROXY_PUMP_NOMEM;
		if (vb == -1)
			return PROXY_PUMP_BAD;
	} else {
		if (proxy_http_body_take(
		        &c->relay.rbody, in, &take, &done, e) == -1)
			return PROXY_PUMP_BAD;
		if (proxy_conn_move(c, c->up, c->cli, take) == -1)
			return PROXY_PUMP_NOMEM;
	}
	if (done) {
		proxy_resp_done(c);
		return proxy_conn_relaying(c) ? PROXY_PUMP_NEXT
		                              : PROXY_PUMP_GONE;
	}
	if ((!red && take == 0) || !(bufferevent_get_enabled(c->up) & EV_READ))
		return PROXY_PUMP_WAIT;
	return PROXY_PUMP_NEXT;
}

/* A response head h (end bytes of in) not redacted: moved (with
 * Connection: close when its request's was left out), then its body's
 * framing, or the other protocol after a 101. */
static enum proxy_pump
proxy_rpump_forward(struct proxy_conn *c, struct evbuffer *in,
    const struct http_head *h, size_t end, struct err *e)
{
	if (proxy_rq_head(c)->close && h->status >= 200 && h->status != 101) {
		if (proxy_http_head_close(c,
		        (const char *)evbuffer_pullup(in, (ev_ssize_t)end), end,
		        h) == -1)
			return PROXY_PUMP_NOMEM;
	} else if (proxy_conn_move(c, c->up, c->cli, end) == -1)
		return PROXY_PUMP_NOMEM;
	if (h->status == 101) {
		if (!proxy_rq_head(c)->upgrade) {
			(void)snprintf(e->msg, sizeof(e->msg),
			    "101 to a request without Upgrade");
			return PROXY_PUMP_BAD;
		}
		/* the other protocol, both ways, untouched */
		c->relay.rphase = c->relay.hphase = H_RAW;
		bufferevent_enable(c->cli, EV_READ);
		if (proxy_conn_move(c, c->cli, c->up, SIZE_MAX) == -1)
			return PROXY_PUMP_NOMEM;
		return PROXY_PUMP_NEXT;
	}
	if (h->status < 200)
		return PROXY_PUMP_NEXT; /* 100 Continue & co.: the final one
					 * follows */
	proxy_http_body_start(&c->relay.rbody, h);
	if (c->relay.rbody.kind != HTTP_BODY_NONE) {
		c->relay.rphase = H_BODY;
		return PROXY_PUMP_NEXT;
	}
	proxy_resp_done(c);
	return proxy_conn_relaying(c) ? PROXY_PUMP_NEXT : PROXY_PUMP_GONE;
}

/* H_HEAD of a response: parsed against its request's method, then
 * redacted (its request went to a bound origin) or forwarded. */
static enum proxy_pump
proxy_rpump_head(
    struct proxy_conn *c, struct evbuffer *in, size_t len, struct err *e)
{
	size_t n = len < PROXY_PEEK_MAX ? len : PROXY_PEEK_MAX, end;
	struct http_head h;
	struct http_span m;
	const char *buf;

	if (c->relay.rq_n == 0) {
		(void)snprintf(
		    e->msg, sizeof(e->msg), "a response no request asked for");
		return PROXY_PUMP_BAD;
	}
	buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
	if (!http_head_find_end(buf, n, &c->relay.rcursor, &end)) {
		if (len < PROXY_PEEK_MAX)
			return PROXY_PUMP_WAIT;
		(void)snprintf(e->msg, sizeof(e->msg),
		    "response head over %d bytes", PROXY_PEEK_MAX);
		return PROXY_PUMP_BAD;
	}
	c->relay.rcursor = 0;
	m.p = proxy_rq_head(c)->method;
	m.n = strlen(m.p);
	if (http_parse_response(buf, end, &m, &h, e) != HTTP_HEAD_OK)
		return PROXY_PUMP_BAD;
	if (h.conn_close)
		c->origin.keep = false;
	if (h.status >= 200 && h.status != 101 && c->relay.rq_n == 1 &&
	    c->relay.hphase == H_BODY)
		proxy_early_answer(c);
	if (proxy_rq_head(c)->vault == NULL)
		return proxy_rpump_forward(c, in, &h, end, e);
	if (proxy_relay_vault_head(c, &h, buf, end, e) == -1)
		return PROXY_PUMP_NOMEM;
	if (!proxy_conn_relaying(c))
		return PROXY_PUMP_GONE;
	evbuffer_drain(in, end);
	/* a redacted head skips proxy_conn_move: bodiless answers (HEAD, 204)
	 * to a client that never reads would queue without end */
	proxy_http_hold_back(c->up, c->cli);
	return PROXY_PUMP_NEXT;
}

/*
 * Origin -> client on plain HTTP and terminated TLS: every response head
 * parsed (its framing decides where the next one starts, and a 101 ends
 * HTTP on the connection), bodies by their framing. A response nobody
 * asked for, or a malformed one, closes the connection.
 */
static void
proxy_resp_pump(struct proxy_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->up);
	struct err e = {""};
	char dst[ADDR_TEXT_MAX];
	enum proxy_pump pr;
	size_t len;

	for (;;) {
		len = evbuffer_get_length(in);
		if (c->relay.rphase == H_RAW) {
			if (proxy_conn_move(c, c->up, c->cli, SIZE_MAX) == -1)
				break;
			return;
		}
		if (len == 0)
			return;
		if (c->relay.rphase == H_BODY)
			pr = proxy_rpump_body(c, in, &e);
		else
			pr = proxy_rpump_head(c, in, len, &e);
		if (pr == PROXY_PUMP_NEXT)
			continue;
		if (pr == PROXY_PUMP_WAIT || pr == PROXY_PUMP_GONE)
			return;
		if (pr == PROXY_PUMP_BAD) {
			addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
			log_warn(c->p->log, "proxy.bad_response",
			    LOG_S("name", c->name), LOG_S("dst", dst),
			    LOG_S("error", e.msg));
		}
		break;
	}
	proxy_conn_close(c, PROXY_UPSTREAM_ERROR);
}

/* What b has read, relayed: HTTP by the pumps, anything else as it is.
 * It may refuse or close c (proxy_conn_relaying says whether it goes on). */
void
proxy_relay_read(struct proxy_conn *c, struct bufferevent *b)
{
	if (c->proto == PROTO_HTTP || c->tls.term) {
		if (b == c->cli)
			proxy_req_pump(c);
		else
			proxy_resp_pump(c);
		return;
	}
	if (proxy_conn_move(c, b, proxy_conn_other(c, b), SIZE_MAX) == -1)
		proxy_conn_close(c, PROXY_CLIENT_ERROR);
}

void
proxy_relay_up_read_cb(struct bufferevent *b, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);

	proxy_conn_touch(c);

	if (!proxy_conn_relaying(c))
		return;
	proxy_relay_read(c, b);
	if (!proxy_conn_relaying(c))
		return;
	if (c->tls.term)
		proxy_conn_coalesce(c->cli);
	proxy_conn_kick(c->cli);
}

/* Output drained below its low watermark: resume the other side's
 * reads; flush a pending FIN. */
void
proxy_relay_write_cb(struct bufferevent *b, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);
	struct bufferevent *o;

	proxy_conn_touch(c);

	if (c->st == PROXY_ST_REFUSE) {
		if (evbuffer_get_length(bufferevent_get_output(b)) == 0 &&
		    !c->relay.cli_shut) {
			c->relay.cli_shut = true;
			proxy_conn_fin(b);
		}
		return;
	}
	if (c->st != PROXY_ST_RELAY)
		return;
	if (b == c->cli && c->relay.cli_closing && c->relay.rq_n == 0 &&
	    evbuffer_get_length(bufferevent_get_output(b)) == 0) {
		proxy_close_finish(c);
		return;
	}
	o = proxy_conn_other(c, b);
	if (b == c->cli && c->relay.refuse_status != 0 && c->relay.up_eof &&
	    evbuffer_get_length(bufferevent_get_output(b)) == 0) {
		proxy_refuse_http(
		    c, c->relay.refuse_status, c->relay.refuse_why);
		return;
	}
	if (!((o == c->cli) ? c->relay.cli_eof : c->relay.up_eof) &&
	    !(o == c->cli &&
	        (c->relay.hphase == H_STOPPED ||
	            c->relay.hphase == H_UPGRADE))) {
		/* mostly still enabled: bufferevent_enable would re-add the
		 * read event for nothing (no bufferevent timeouts here) */
		if (!(bufferevent_get_enabled(o) & EV_READ))
			bufferevent_enable(o, EV_READ);
		/* what waited in its input */
		proxy_relay_read(c, o);
		if (!proxy_conn_relaying(c))
			return;
	} else if (o == c->up && c->relay.up_eof && c->vault.dec != NULL &&
	    evbuffer_get_length(bufferevent_get_input(o)) > 0) {
		/* a decoded response paused at the watermark, the rest of it
		 * read before the origin's FIN */
		proxy_relay_read(c, o);
		if (!proxy_conn_relaying(c))
			return;
	}
	if ((o == c->cli ? c->relay.cli_eof && !c->relay.head_waiting
	                 : c->relay.up_eof)) {
		proxy_conn_shut(c, b);
		proxy_conn_maybe_done(c);
	}
}

/*
 * The client of a terminated connection left between two requests: its
 * verified upstream connection goes to the pool for the next client
 * connection to the same origin, and c closes. Only at a message
 * boundary with nothing buffered either way, every response delivered,
 * and no request or response on it that said Connection: close (the
 * origin would close it) or upgraded it. Else nothing changes (c stays
 * open).
 */
static void
proxy_pool_keep(struct proxy_conn *c)
{
	struct proxy *p = c->p;

	if (!c->tls.term || c->up == NULL || !c->tls.up_ready ||
	    !c->origin.keep || c->relay.up_eof || c->relay.up_shut ||
	    c->relay.rq_n != 0 || c->vault.red != NULL ||
	    c->relay.hphase != H_HEAD || c->relay.rphase != H_HEAD ||
	    c->relay.refuse_status != 0 ||
	    evbuffer_get_length(bufferevent_get_input(c->up)) != 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->up)) != 0 ||
	    evbuffer_get_length(bufferevent_get_output(c->cli)) != 0 ||
	    /* bytes OpenSSL read ahead past the response (a close_notify):
	     * once idle, nothing would ever read them */
	    SSL_has_pending(bufferevent_openssl_get_ssl(c->up)) == 1)
		return;
	tls_sess_keep(p->sess, bufferevent_openssl_get_ssl(c->up), true,
	    c->name, &c->dst, c->dport);
	proxy_pool_put(
	    p->pool, c->up, c->origin.vault, c->name, &c->dst, c->dport);
	c->up = NULL;
	c->origin.vault = NULL;
	proxy_conn_close(c, PROXY_OK);
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

/*
 * Whether an error on the origin's side loses nothing: every request it
 * was sent has its whole response (none is waiting, none is half read)
 * and nothing of it is left unread. An origin that closed after its last
 * response (Connection: close) answers our FIN or close_notify, which
 * crossed its close, with a reset: an end, as a clean close would be.
 */
static bool
proxy_up_idle(const struct proxy_conn *c)
{
	return c->relay.rq_n == 0 && c->relay.rphase == H_HEAD &&
	    evbuffer_get_length(bufferevent_get_input(c->up)) == 0;
}

void
proxy_relay_event(struct proxy_conn *c, struct bufferevent *b, short what)
{
	struct bufferevent *o = proxy_conn_other(c, b);
	bool is_cli = b == c->cli;
	bool dirty = false;

	if (what & BEV_EVENT_ERROR) {
		dirty = proxy_dirty_eof(b) || (!is_cli && proxy_up_idle(c));
		if (!dirty) {
			proxy_conn_close(c,
			    is_cli ? PROXY_CLIENT_ERROR : PROXY_UPSTREAM_ERROR);
			return;
		}
		what |= BEV_EVENT_EOF;
	}
	if (!(what & BEV_EVENT_EOF))
		return;
	if (is_cli)
		c->relay.cli_eof = true;
	else
		c->relay.up_eof = true;
	/* what was read before the FIN goes first */
	proxy_relay_read(c, b);
	if (!proxy_conn_relaying(c))
		return;
	if (dirty && !is_cli && c->relay.rphase == H_BODY &&
	    c->relay.rbody.kind == HTTP_BODY_CLOSE) {
		/* a body ended by a close that was no TLS close: it may be
		 * cut short, and a clean close toward the client would say
		 * it is whole. Cut the client too. */
		proxy_conn_close(c, PROXY_UPSTREAM_ERROR);
		return;
	}
	if (is_cli) {
		proxy_pool_keep(c);
		if (c->closed)
			return; /* its origin connection went to the pool */
	}
	bufferevent_disable(b, EV_READ);
	if (!is_cli && c->relay.refuse_status != 0) {
		if (evbuffer_get_length(bufferevent_get_output(c->cli)) == 0)
			proxy_refuse_http(
			    c, c->relay.refuse_status, c->relay.refuse_why);
		else
			bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
		return;
	}
	if (is_cli && c->relay.hphase == H_STOPPED)
		return; /* the refusal waits for the origin */
	if (is_cli && c->relay.head_waiting)
		return; /* heads wait their turn; the FIN follows them */
	proxy_conn_fin_after(c, o);
}
