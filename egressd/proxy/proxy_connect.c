/*
 * Dialling the origin, the handshakes, and the start of the relay.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>

#include "egressd/proxy/proxy_pool.h"
#include "egressd/base/sock.h"
#include "util/now.h"
#include "egressd/proxy/proxy_int.h"

/* Decided, connected (and, terminated, both handshakes done): relay. */
void
proxy_connect_start_relay(struct proxy_conn *c)
{
	proxy_conn_set_state(c, PROXY_ST_RELAY);
	if (c->tls.term)
		c->p->st.terminated++;
	else
		c->p->st.passthrough++;
	c->last_ms = now_mono_ms();
	(void)evtimer_del(c->timer);
	proxy_conn_arm(c, c->p->o.idle_ms);
	if (!c->tls.term && c->proto == PROTO_TLS) {
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
	proxy_relay_read(c, c->cli);
	if (!proxy_conn_relaying(c))
		return;
	proxy_conn_kick(c->up);
	proxy_conn_kick(c->cli);
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

/* Terminated, the origin failed its TLS (or the upstream proxy gave no
 * tunnel): the client, in its own session, gets a 502; nothing was sent
 * upstream. */
void
proxy_connect_term_fail(struct proxy_conn *c)
{
	char dst[ADDR_TEXT_MAX];

	if (c->origin.via_failed) {
		/* proxy_tunnel.c logged it; up_why is our own text */
		proxy_refuse_http_detail(
		    c, 502, PROXY_UPSTREAM_PROXY, c->tls.up_why);
		return;
	}
	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	log_warn(c->p->log, "proxy.upstream_tls_failed", LOG_S("name", c->name),
	    LOG_S("dst", dst), LOG_S("error", c->tls.up_why));
	proxy_refuse_http(c, 502, PROXY_UPSTREAM_TLS);
}

static void
proxy_up_event(struct bufferevent *b, short what, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);

	proxy_conn_touch(c);

	if (c->st == PROXY_ST_CONNECT) {
		if (c->origin.reused) {
			/* the origin closed the pooled connection while the
			 * client's handshake ran: nothing was sent on it, dial
			 * afresh */
			bufferevent_free(c->up);
			c->up = NULL;
			vault_free(c->origin.vault);
			c->origin.vault = NULL;
			c->origin.reused = c->tls.up_ready = false;
			proxy_connect(c);
			if (!c->closed && c->st == PROXY_ST_CONNECT &&
			    c->tls.up_failed && c->tls.cli_ready)
				proxy_connect_term_fail(c);
			return;
		}
		if (what & BEV_EVENT_CONNECTED) {
			c->tls.up_ready = true;
			c->tls.up_resumed = c->tls.term &&
			    SSL_session_reused(
			        bufferevent_openssl_get_ssl(c->up)) == 1;
			if (!c->tls.term || c->tls.cli_ready)
				proxy_connect_start_relay(c);
			return;
		}
		if (!c->tls.term) {
			proxy_conn_close(c, PROXY_CONNECT_FAILED);
			return;
		}
		c->tls.up_failed = true;
		proxy_tls_why(b, c->tls.up_why, sizeof(c->tls.up_why));
		bufferevent_free(c->up);
		c->up = NULL;
		if (c->tls.cli_ready)
			proxy_connect_term_fail(c);
		return;
	}
	if (c->st == PROXY_ST_RELAY)
		proxy_relay_event(c, b, what);
}

static void proxy_connect_tunnelled(struct proxy_conn *c, int fd);

/* --- deciding ----------------------------------------------------------------- */

/* Terminated: an idle connection to the same origin from the pool, in
 * place of a dial. False: none. */
static bool
proxy_connect_pooled(struct proxy_conn *c)
{
	struct proxy *p = c->p;

	if (!c->tls.term ||
	    (c->up = proxy_pool_take(p->pool, c->name, &c->dst, c->dport,
	         &c->origin.vault)) == NULL)
		return false;
	/* verified for this name and address already; reading, so the
	 * origin closing it before the relay starts is seen */
	c->origin.reused = c->tls.up_ready = true;
	p->st.upstream_reused++;
	proxy_conn_set_state(c, PROXY_ST_CONNECT);
	(void)evtimer_del(c->timer);
	proxy_conn_arm(c, p->o.connect_ms);
	bufferevent_setcb(c->up, proxy_relay_up_read_cb, proxy_relay_write_cb,
	    proxy_up_event, c);
	/* nothing is taken from it before the relay starts */
	bufferevent_setwatermark(c->up, EV_READ, 0, PROXY_IN_MAX);
	bufferevent_enable(c->up, EV_READ);
	return true;
}

/* Terminated: the TLS client on fd, connecting to ss (ss NULL: fd is
 * connected already, a tunnel through the upstream proxy). The TLS
 * client starts once the connect completes (the socket turns writable);
 * a failed connect fails the handshake, which answers the client 502. */
static void
proxy_connect_tls(struct proxy_conn *c, int fd,
    const struct sockaddr_storage *ss, socklen_t sl)
{
	struct proxy *p = c->p;
	SSL *ssl = SSL_new(p->cctx);

	if (ssl == NULL || SSL_set_tlsext_host_name(ssl, c->name) != 1 ||
	    (!p->o.ssl_insecure && SSL_set1_host(ssl, c->name) != 1) ||
	    tls_sess_offer(p->sess, ssl, c->name, &c->dst, c->dport) < 0 ||
	    (ss != NULL && connect(fd, (const struct sockaddr *)ss, sl) == -1 &&
	        errno != EINPROGRESS)) {
		(void)snprintf(c->tls.up_why, sizeof(c->tls.up_why),
		    "connect: %s", strerror(errno));
		SSL_free(ssl);
		close(fd);
		c->tls.up_failed = true;
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
	bufferevent_setcb(c->up, proxy_relay_up_read_cb, proxy_relay_write_cb,
	    proxy_up_event, c);
	/* bufferevent_openssl reads from its handshake on, and nothing is
	 * taken before the relay starts */
	bufferevent_setwatermark(c->up, EV_READ, 0, PROXY_IN_MAX);
}

/* The plain (not TLS) origin side on fd, with the relay's callbacks: 0,
 * or -1 with c closed (connect_failed). */
static int
proxy_connect_plain_up(struct proxy_conn *c, int fd)
{
	c->up = bufferevent_socket_new(c->p->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (c->up == NULL) {
		close(fd);
		proxy_conn_close(c, PROXY_CONNECT_FAILED);
		return -1;
	}
	bufferevent_setcb(c->up, proxy_relay_up_read_cb, proxy_relay_write_cb,
	    proxy_up_event, c);
	return 0;
}

void
proxy_connect(struct proxy_conn *c)
{
	struct proxy *p = c->p;
	struct sockaddr_storage ss;
	socklen_t sl = addr_to_sockaddr(&c->dst, c->dport, &ss);
	struct err e = {""};
	int fd;

	c->origin.keep = true;
	if (proxy_connect_pooled(c))
		return;
	if (p->o.upstream != NULL) {
		/* never a direct dial: the tunnel or a failure */
		proxy_tunnel_dial(c, proxy_connect_tunnelled);
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
	proxy_conn_set_state(c, PROXY_ST_CONNECT);
	(void)evtimer_del(c->timer);
	proxy_conn_arm(c, p->o.connect_ms);
	if (c->tls.term) {
		proxy_connect_tls(c, fd, &ss, sl);
		return;
	}
	if (proxy_connect_plain_up(c, fd) == -1)
		return;
	if (bufferevent_socket_connect(
	        c->up, (struct sockaddr *)&ss, (int)sl) == -1)
		proxy_conn_close(c, PROXY_CONNECT_FAILED);
}

/* The upstream proxy's tunnel is up (fd, now c's), or failed (-1):
 * terminated, the 502 once the client's handshake is done; plain HTTP, a
 * 502 now; pass-through, closed (its client is inside a TLS handshake
 * egressd is not part of). Never a direct dial. */
static void
proxy_connect_tunnelled(struct proxy_conn *c, int fd)
{
	if (fd == -1 && c->tls.term) {
		c->tls.up_failed = true;
		if (c->tls.cli_ready)
			proxy_connect_term_fail(c);
		return;
	}
	if (fd == -1) {
		if (c->proto == PROTO_TLS)
			proxy_conn_close(c, PROXY_UPSTREAM_PROXY);
		else
			proxy_refuse_http_detail(
			    c, 502, PROXY_UPSTREAM_PROXY, c->tls.up_why);
		return;
	}
	if (c->tls.term) {
		proxy_connect_tls(c, fd, NULL, 0);
		if (!c->closed && c->tls.up_failed && c->tls.cli_ready)
			proxy_connect_term_fail(c);
		return;
	}
	if (proxy_connect_plain_up(c, fd) == -1)
		return;
	/* connected: what BEV_EVENT_CONNECTED does for a direct dial */
	c->tls.up_ready = true;
	proxy_connect_start_relay(c);
}

void
proxy_connect_cli_read_cb(struct bufferevent *b, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);

	proxy_conn_touch(c);

	switch (c->st) {
	case PROXY_ST_RELAY:
		proxy_relay_read(c, b);
		if (proxy_conn_relaying(c))
			proxy_conn_kick(c->up);
		break;
	case PROXY_ST_REFUSE:
		evbuffer_drain(bufferevent_get_input(b),
		    evbuffer_get_length(bufferevent_get_input(b)));
		break;
	default:
		break;
	}
}

void
proxy_connect_cli_event_cb(struct bufferevent *b, short what, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);

	proxy_conn_touch(c);

	switch (c->st) {
	case PROXY_ST_RELAY:
		proxy_relay_event(c, b, what);
		return;
	case PROXY_ST_REFUSE:
		if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
			proxy_conn_close(c, c->why);
		return;
	case PROXY_ST_CONNECT:
		if (c->tls.term && (what & BEV_EVENT_CONNECTED)) {
			c->tls.cli_ready = true;
			c->tls.cli_resumed =
			    SSL_session_reused(
			        bufferevent_openssl_get_ssl(b)) == 1;
			if (c->tls.up_failed)
				proxy_connect_term_fail(c);
			else if (c->tls.up_ready)
				proxy_connect_start_relay(c);
			return;
		}
		if (c->tls.term && !c->tls.cli_ready) {
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
