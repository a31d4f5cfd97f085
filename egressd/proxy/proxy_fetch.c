/*
 * proxy_fetch: egressd's own HTTPS exchange with an operator-named
 * endpoint (proxy_fetch.h): resolve, connect marked, TLS verified, send,
 * read one bounded response, call back once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <openssl/x509_vfy.h>

#include "egressd/base/sock.h"
#include "egressd/base/uproxy.h"
#include "egressd/proto/http_chunk.h"
#include "egressd/proto/special_ranges.h"
#include "egressd/proxy/proxy_fetch.h"
#include "egressd/proxy/proxy_int.h"
#include "util/addr.h"
#include "util/secmem.h"

#define PROXY_FETCH_MAGIC 0x46455443u /* "FETC" */

struct proxy_fetch {
	uint32_t magic;
	struct proxy *p;
	char host[POLICY_NAME_MAX + 1];
	uint16_t port;
	uint8_t *req; /* secret: wiped */
	size_t reqlen, body_max;
	struct event *kick, *timer;
	/* the name being resolved; cancelled: the fetch is dropped and
	 * its resolution's callback frees it */
	struct evdns_getaddrinfo_request *dreq;
	bool cancelled;
	/* the tunnel through the upstream proxy being dialled (issue 39:
	 * every origin connection of egressd's goes through it) */
	struct uproxy_dial *dial;
	bool public_only; /* proxy_fetch_refuse_private */
	struct bufferevent *bev;
	bool shaken; /* the TLS handshake completed (BEV_EVENT_CONNECTED) */
	size_t cursor; /* http_head_find_end's */
	proxy_fetch_cb cb;
	void *arg;
};

static struct proxy_fetch *
fetch_arg(void *arg)
{
	struct proxy_fetch *f = arg;

	if (f == NULL || f->magic != PROXY_FETCH_MAGIC)
		abort();
	return f;
}

/* Everything the fetch holds, the response's bytes wiped in place. */
static void
fetch_free(struct proxy_fetch *f)
{
	if (f->bev != NULL) {
		struct evbuffer *in = bufferevent_get_input(f->bev);
		size_t n = evbuffer_get_length(in);

		if (n > 0)
			secmem_wipe(evbuffer_pullup(in, (ev_ssize_t)n), n);
		bufferevent_free(f->bev);
	}
	uproxy_dial_cancel(f->dial);
	if (f->kick != NULL)
		event_free(f->kick);
	if (f->timer != NULL)
		event_free(f->timer);
	if (f->req != NULL) {
		secmem_wipe(f->req, f->reqlen);
		free(f->req);
	}
	f->magic = 0;
	free(f);
}

static void
fetch_finish(struct proxy_fetch *f, int status, const uint8_t *body, size_t len,
    const char *err)
{
	f->cb(f->arg, status, body, len, err);
	if (f->dreq != NULL) { /* timed out while resolving */
		f->cancelled = true;
		evdns_getaddrinfo_cancel(f->dreq); /* its callback frees f */
		return;
	}
	fetch_free(f);
}

/* Whether the response in in is whole: then finished (1), or refused
 * (-1, finished too); 0: wait for more (eof: none will come). */
static int
fetch_try(struct proxy_fetch *f, bool eof)
{
	static const struct http_span post = {"POST", 4};
	struct evbuffer *in = bufferevent_get_input(f->bev);
	size_t n = evbuffer_get_length(in), end, wire, olen;
	struct http_head h;
	struct err e;
	uint8_t *out;
	const char *buf;

	for (;;) {
		buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
		if (!http_head_find_end(buf,
		        n < PROXY_FETCH_HEAD_MAX ? n : PROXY_FETCH_HEAD_MAX,
		        &f->cursor, &end))
			goto more;
		/* found: the next look (more body) finds it again */
		f->cursor = 0;
		if (http_parse_response(buf, end, &post, &h, &e) !=
		    HTTP_HEAD_OK)
			goto bad;
		if (h.status >= 200)
			break;
		evbuffer_drain(in, end); /* an interim response */
		n -= end;
		f->cursor = 0;
	}
	switch (h.body) {
	case HTTP_BODY_NONE:
		fetch_finish(f, h.status, NULL, 0, NULL);
		return 1;
	case HTTP_BODY_LENGTH:
		if (h.content_length > f->body_max)
			goto big;
		if (n - end < h.content_length)
			goto more;
		fetch_finish(f, h.status, (const uint8_t *)buf + end,
		    (size_t)h.content_length, NULL);
		return 1;
	case HTTP_BODY_CHUNKED:
		switch (http_chunk_collect((const uint8_t *)buf + end, n - end,
		    f->body_max, &out, &olen, &wire, &e)) {
		case HTTP_CHUNK_COLLECT_DONE:
			fetch_finish(f, h.status, out, olen, NULL);
			secmem_wipe(out, olen);
			free(out);
			return 1;
		case HTTP_CHUNK_COLLECT_AGAIN:
			goto more;
		case HTTP_CHUNK_COLLECT_SKIP:
			goto big;
		default:
			goto bad;
		}
	case HTTP_BODY_CLOSE:
		if (n - end > f->body_max)
			goto big;
		if (!eof)
			return 0;
		fetch_finish(
		    f, h.status, (const uint8_t *)buf + end, n - end, NULL);
		return 1;
	}
bad:
	fetch_finish(f, 0, NULL, 0, "malformed response");
	return -1;
big:
	fetch_finish(f, 0, NULL, 0, "response too large");
	return -1;
more:
	if (n >= PROXY_FETCH_HEAD_MAX + f->body_max + 4096)
		goto big;
	if (!eof)
		return 0;
	fetch_finish(f, 0, NULL, 0, "connection closed before the response");
	return -1;
}

static void
proxy_fetch_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	(void)fetch_try(fetch_arg(arg), false);
}

static void
proxy_fetch_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_fetch *f = fetch_arg(arg);
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	if (what & BEV_EVENT_CONNECTED) {
		f->shaken = true;
		return;
	}
	/* the end of the stream (servers close after a Connection: close
	 * answer, often without close_notify): what came is the answer */
	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
		(void)fetch_try(f, true);
		return;
	}
	if (ssl != NULL && SSL_get_verify_result(ssl) != X509_V_OK)
		fetch_finish(f, 0, NULL, 0, "certificate not verified");
	else if (!f->shaken)
		fetch_finish(f, 0, NULL, 0, "connect or TLS handshake failed");
	else
		fetch_finish(
		    f, 0, NULL, 0, "connection closed before the response");
}

static void
proxy_fetch_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	fetch_finish(fetch_arg(arg), 0, NULL, 0, "timed out");
}

/* The TLS client on fd (connected, or connecting), the request queued
 * behind its handshake. fd is the fetch's from here on. */
static const char *
fetch_tls(struct proxy_fetch *f, int fd)
{
	struct proxy *p = f->p;
	SSL *ssl = SSL_new(p->cctx);

	/* verified whatever --ssl-insecure says of origins */
	if (ssl == NULL || SSL_set_tlsext_host_name(ssl, f->host) != 1 ||
	    SSL_set1_host(ssl, f->host) != 1) {
		SSL_free(ssl);
		close(fd);
		return "out of memory";
	}
	SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	f->bev = bufferevent_openssl_socket_new(p->base, fd, ssl,
	    BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (f->bev == NULL) {
		SSL_free(ssl);
		close(fd);
		return "out of memory";
	}
	bufferevent_setcb(
	    f->bev, proxy_fetch_read_cb, NULL, proxy_fetch_event_cb, f);
	if (bufferevent_write(f->bev, f->req, f->reqlen) == -1 ||
	    bufferevent_enable(f->bev, EV_READ) == -1)
		return "out of memory";
	secmem_wipe(f->req, f->reqlen); /* the bufferevent has it now */
	return NULL;
}

/* The tunnel through the upstream proxy: its socket, or why not (no
 * direct connection then, ever: uproxy.h). */
static void
proxy_fetch_tunnel_cb(void *arg, int fd, enum uproxy_fail why, int status)
{
	struct proxy_fetch *f = fetch_arg(arg);
	const char *err;
	char msg[96];

	f->dial = NULL; /* uproxy frees it when this returns */
	if (fd < 0) {
		(void)snprintf(msg, sizeof(msg),
		    "upstream proxy: %s (status %d)", uproxy_fail_name(why),
		    status);
		fetch_finish(f, 0, NULL, 0, msg);
		return;
	}
	if ((err = fetch_tls(f, fd)) != NULL)
		fetch_finish(f, 0, NULL, 0, err);
}

/* Through the upstream proxy: a tunnel to the name, or to the address
 * the name resolved to (its CONNECT target mode, docs/proxy.md). */
static const char *
fetch_tunnel(struct proxy_fetch *f, const struct evutil_addrinfo *ai)
{
	const struct uproxy *u = f->p->o.upstream;
	char target[POLICY_NAME_MAX + 1];
	struct addr a;
	struct err e;

	/* a fetch refused private targets judged this address: a proxy
	 * resolving the name again could land anywhere, so it gets the
	 * address (whatever the mode) */
	if ((uproxy_target_by(u) == UPROXY_BY_ADDRESS || f->public_only) &&
	    addr_from_sockaddr(ai->ai_addr, &a, NULL) == 0)
		addr_format(&a, target, sizeof(target));
	else
		(void)snprintf(target, sizeof(target), "%s", f->host);
	f->dial = uproxy_dial(f->p->base, u, f->p->o.mark, target, f->port,
	    PROXY_FETCH_TIMEOUT_MS, proxy_fetch_tunnel_cb, f, &e);
	return f->dial == NULL ? "upstream proxy: cannot dial" : NULL;
}

/* The TLS client to ai (directly, or through the upstream proxy). */
static const char *
fetch_connect(struct proxy_fetch *f, const struct evutil_addrinfo *ai)
{
	struct proxy *p = f->p;
	struct err e;
	int fd;

	if (p->cctx == NULL)
		return "no TLS client context (termination is off)";
	if (p->o.upstream != NULL)
		return fetch_tunnel(f, ai);
	fd = sock_open_marked(
	    ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, p->o.mark, &e);
	if (fd == -1)
		return "socket failed";
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 &&
	    errno != EINPROGRESS) {
		close(fd);
		return "connect failed";
	}
	return fetch_tls(f, fd);
}

static void
proxy_fetch_dns_cb(int result, struct evutil_addrinfo *res, void *arg)
{
	struct proxy_fetch *f = fetch_arg(arg);
	struct evutil_addrinfo *ai = res;
	const char *why;

	f->dreq = NULL;
	if (f->cancelled) {
		if (res != NULL)
			evutil_freeaddrinfo(res);
		fetch_free(f);
		return;
	}
	if (result != 0 || res == NULL) {
		fetch_finish(f, 0, NULL, 0, "name did not resolve");
		return;
	}
	for (ai = res; f->public_only && ai != NULL; ai = ai->ai_next) {
		struct addr a;

		if (addr_from_sockaddr(ai->ai_addr, &a, NULL) == 0 &&
		    !(special_addr_flags(a.family == AF_INET ? 4 : 6, a.a) &
		        SPECIAL_STRIP))
			break;
	}
	if (ai == NULL) {
		evutil_freeaddrinfo(res);
		fetch_finish(
		    f, 0, NULL, 0, "private or loopback address refused");
		return;
	}
	why = fetch_connect(f, ai);
	evutil_freeaddrinfo(res);
	if (why != NULL)
		fetch_finish(f, 0, NULL, 0, why);
}

/* The resolution starts from the loop: no callback ever runs inside
 * proxy_fetch_start. */
static void
proxy_fetch_kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_fetch *f = fetch_arg(arg);
	struct evutil_addrinfo hints;
	char port[8];

	(void)fd;
	(void)what;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	(void)snprintf(port, sizeof(port), "%u", (unsigned)f->port);
	f->dreq = evdns_getaddrinfo(
	    f->p->fetch_dns, f->host, port, &hints, proxy_fetch_dns_cb, f);
}

struct proxy_fetch *
proxy_fetch_start(struct proxy *p, const char *host, uint16_t port,
    const uint8_t *req, size_t len, size_t body_max, proxy_fetch_cb cb,
    void *arg, struct err *e)
{
	struct proxy_fetch *f;
	struct timeval tv = {PROXY_FETCH_TIMEOUT_MS / 1000,
	    (PROXY_FETCH_TIMEOUT_MS % 1000) * 1000};

	if (strlen(host) > POLICY_NAME_MAX) {
		err_set(e, "host name too long");
		return NULL;
	}
	if (p->fetch_dns == NULL &&
	    (p->fetch_dns = evdns_base_new(
	         p->base, EVDNS_BASE_INITIALIZE_NAMESERVERS)) == NULL) {
		err_set(e, "no resolver (resolv.conf)");
		return NULL;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL ||
	    (f->req = malloc(len)) == NULL) {
		free(f);
		err_set(e, "out of memory");
		return NULL;
	}
	f->magic = PROXY_FETCH_MAGIC;
	f->p = p;
	memcpy(f->host, host, strlen(host) + 1);
	f->port = port;
	memcpy(f->req, req, len);
	f->reqlen = len;
	f->body_max = body_max;
	f->cb = cb;
	f->arg = arg;
	f->kick = event_new(p->base, -1, 0, proxy_fetch_kick_cb, f);
	f->timer = evtimer_new(p->base, proxy_fetch_timeout_cb, f);
	if (f->kick == NULL || f->timer == NULL ||
	    evtimer_add(f->timer, &tv) == -1) {
		fetch_free(f);
		err_set(e, "out of memory");
		return NULL;
	}
	event_active(f->kick, 0, 0);
	return f;
}

void
proxy_fetch_refuse_private(struct proxy_fetch *f)
{
	f->public_only = true;
}

void
proxy_fetch_cancel(struct proxy_fetch *f)
{
	if (f == NULL)
		return;
	if (f->dreq != NULL) {
		/* its callback comes (now or later) and frees f */
		f->cancelled = true;
		evdns_getaddrinfo_cancel(f->dreq);
		return;
	}
	fetch_free(f);
}

void
proxy_fetch_shutdown(struct proxy *p)
{
	if (p->fetch_dns != NULL)
		evdns_base_free(p->fetch_dns, 1);
	p->fetch_dns = NULL;
}
