/*
 * PEEK: the first bytes read in place, and the decision.
 */
#include <errno.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h> /* ev_read, ev_write: the kicks */
#include <string.h>

#include "egressd/base/tls_ctx.h"
#include "egressd/proxy/proxy_tls.h"
#include "egressd/proxy/tls_ca.h"
#include "egressd/proxy/proxy_int.h"

/*
 * A binding could match: the client gets a leaf for its SNI from
 * egressd's CA while the origin is dialled; both handshakes run at once
 * (proxy_connect_start_relay once both are done).
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

		tls_ctx_error(why, sizeof(why));
		log_error(p->log, "proxy.leaf_failed", LOG_S("name", c->name),
		    LOG_S("error", why));
		SSL_free(ssl);
		proxy_conn_close(c, PROXY_CLIENT_TLS);
		return;
	}
	c->tls.term = true;
	if (proxy_conn_attach_cli(c, ssl) == -1) {
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
	if (!c->closed && c->st == PROXY_ST_CONNECT && c->tls.up_failed &&
	    c->tls.cli_ready)
		proxy_connect_term_fail(c);
}

/* The decision is to relay: the client's socket into a bufferevent (its
 * first bytes still in it), then the origin dialled. */
static void
proxy_dial(struct proxy_conn *c)
{
	if (proxy_conn_attach_cli(c, NULL) == -1) {
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
		r = proxy_judge_name(c, th->sni);
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
void
proxy_peek_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);
	struct tls_hello th;
	struct http_head h;
	char name[TLS_HELLO_SNI_MAX + 1];
	struct err e = {""};
	const uint8_t *buf = c->peek.buf;
	size_t len, end;
	ssize_t n;
	int status;
	enum proxy_reason r;

	(void)what;
	n = recv(fd, c->peek.buf, PROXY_PEEK_MAX, MSG_PEEK);
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
	if (!http_head_find_end(
	        (const char *)buf, len, &c->relay.hcursor, &end)) {
		if (len >= PROXY_PEEK_MAX)
			proxy_refuse_http(c, 431, PROXY_BAD_REQUEST);
		return;
	}
	c->relay.hcursor = 0;
	if (http_parse_request((const char *)buf, end, &h, &e) !=
	    HTTP_HEAD_OK) {
		proxy_refuse_http(c, h.reject_status ? h.reject_status : 400,
		    PROXY_BAD_REQUEST);
		return;
	}
	r = proxy_judge_host(c, &h, &status, name);
	if (r == PROXY_OK)
		r = proxy_judge_request(c, &h, name, &status);
	if (r != PROXY_OK) {
		proxy_refuse_http(c, status, r);
		return;
	}
	/* the head stays in the socket: proxy_req_pump forwards it once
	 * connected, judging it again (same answer: nothing ran between) */
	proxy_dial(c);
}
