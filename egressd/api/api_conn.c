/*
 * api_conn: the API's connections under evhttp: the slot cap and the
 * sweep that finds closed ones, the head and body deadlines run from
 * api_frame, and the refusals written before evhttp sees a request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include "egressd/api/api.h"
#include "egressd/api/api_frame.h"
#include "egressd/api/api_int.h"
#include "egressd/proto/http_head.h"
#include "egressd/base/log.h"
#include "egressd/base/metrics.h"
#include "egressd/base/stats.h"
#include "util/addr.h"
#include "util/now.h"
#include "util/secmem.h"

#define API_SWEEP_MS 200 /* connection sweep period while paused */

struct api_sweep_ctx {
	struct api *a;
	bool live[API_CONNS_MAX + 1];
};

static int
api_sweep_event_cb(
    const struct event_base *base, const struct event *ev, void *arg)
{
	struct api_sweep_ctx *c = arg;
	void *cbarg = event_get_callback_arg(ev);
	size_t i;

	(void)base;
	for (i = 0; i < c->a->nall; i++)
		if (c->a->conns[i]->bev == cbarg)
			c->live[i] = true;
	return 0;
}

void
api_conn_free(struct api_conn *c)
{
	if (c == NULL)
		return;
	if (c->deadline != NULL)
		event_free(c->deadline);
	c->magic = 0;
	free(c);
}

/* Drops the connections evhttp has freed. Never call it from inside a
 * request callback: the connection being answered has no event added at
 * that moment. */
void
api_conn_sweep(struct api *a)
{
	struct api_sweep_ctx c = {.a = a};
	size_t i, n = 0;

	if (a->nall == 0)
		return;
	(void)event_base_foreach_event(a->base, api_sweep_event_cb, &c);
	for (i = 0; i < a->nall; i++) {
		if (c.live[i] || a->conns[i]->pending > 0) {
			a->conns[n++] = a->conns[i];
			continue;
		}
		if (a->conns[i]->slot)
			a->nconns--;
		api_conn_free(a->conns[i]);
	}
	a->nall = n;
}

static void
api_listeners_enable(struct api *a, bool on)
{
	struct evhttp_bound_socket *b[2] = {a->tcp, a->unx};
	size_t i;

	for (i = 0; i < 2; i++) {
		struct evconnlistener *l;
		if (b[i] == NULL ||
		    (l = evhttp_bound_socket_get_listener(b[i])) == NULL)
			continue;
		if (on)
			(void)evconnlistener_enable(l);
		else
			(void)evconnlistener_disable(l);
	}
}

void
api_conn_sweep_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct api *a = arg;

	(void)fd;
	(void)what;
	if (a == NULL || a->magic != API_MAGIC)
		abort();
	api_conn_sweep(a);
	if (a->nconns < API_CONNS_MAX) {
		a->paused = false;
		(void)event_del(a->ev_sweep);
		api_listeners_enable(a, true);
		log_info(a->log, "api.resume", LOG_U("connections", a->nconns));
	}
}

static void
api_conn_arm(struct api_conn *c, unsigned ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

	(void)event_add(c->deadline, &tv);
}

/* The deadline of what the framer reads now: the head's from its first
 * byte, the body's from the end of the head; none between requests
 * (evhttp's idle timeout, API_TIMEOUT_S, covers that). */
static void
api_conn_rearm(struct api_conn *c)
{
	c->seq = c->fr.seq;
	switch (c->fr.state) {
	case API_FRAME_HEAD:
		api_conn_arm(c, c->a->timing.head_ms);
		break;
	case API_FRAME_BODY:
	case API_FRAME_CHUNKED:
		api_conn_arm(c, c->a->timing.body_ms);
		break;
	default:
		(void)event_del(c->deadline);
	}
}

static void
api_conn_peer(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN] = "";

	buf[0] = '\0';
	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) == -1)
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(s4->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 =
		    (const struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(s6->sin6_port));
	}
}

/*
 * Answers the connection ourselves (evhttp has not seen, and never sees,
 * the request) and closes it: the answer is written straight to the
 * socket when nothing of evhttp's is still queued (on the TLS listener
 * as one record with SSL_write, then close_notify: evhttp's bufferevent
 * is not used, its write callback would take the answer for one of
 * evhttp's), the write side shut (the client sees the answer, then EOF),
 * and what the client still sends is read and dropped for
 * API_LINGER_MS, so a client busy sending its body reads the answer
 * instead of a reset. Then the read side is shut: evhttp reads EOF and
 * frees the connection.
 */
static void
api_conn_refuse(
    struct api_conn *c, int code, const char *reason, const char *text)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	int fd = bufferevent_getfd(c->bev);
	char resp[512], peer[API_ADDR_MAX];
	int n;

	c->refused = true;
	c->a->stats->api_requests++;
	(void)evbuffer_drain(in, evbuffer_get_length(in));
	n = snprintf(resp, sizeof(resp),
	    "HTTP/1.1 %d %s\r\n"
	    "Content-Type: text/plain; charset=utf-8\r\n"
	    "X-Content-Type-Options: nosniff\r\n"
	    "Connection: close\r\n"
	    "Content-Length: %zu\r\n"
	    "\r\n"
	    "%s\n",
	    code, http_reason(code), strlen(text) + 1, text);
	if (fd >= 0 && n > 0 && (size_t)n < sizeof(resp) &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
		SSL *ssl = bufferevent_openssl_get_ssl(c->bev);

		if (ssl == NULL)
			(void)send(
			    fd, resp, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		else if (SSL_is_init_finished(ssl)) {
			/* a small answer on an idle socket: one record
			 * that goes at once, or not at all */
			ERR_clear_error();
			if (SSL_write(ssl, resp, n) > 0)
				(void)SSL_shutdown(ssl);
			ERR_clear_error();
		}
	}
	if (fd >= 0)
		(void)shutdown(fd, SHUT_WR);
	api_conn_peer(fd, peer, sizeof(peer));
	log_info(c->a->log, "api.refused", LOG_I("status", code),
	    LOG_S("reason", reason), LOG_S("peer", peer));
	api_conn_arm(c, c->a->timing.linger_ms);
}

static void
api_conn_close(struct api_conn *c)
{
	int fd = bufferevent_getfd(c->bev);

	c->closing = true;
	if (fd >= 0)
		(void)shutdown(fd, SHUT_RDWR);
	/* Should EOF not come (data keeps arriving), look again. */
	api_conn_arm(c, c->a->timing.linger_ms);
}

static void
api_conn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct api_conn *c = arg;
	struct api *a;
	size_t i;
	bool mine = false;

	(void)fd;
	(void)what;
	if (c == NULL || c->magic != API_CONN_MAGIC)
		abort();
	a = c->a;
	/* evhttp may have freed the bufferevent (the client left): drop
	 * such connections first, and then only touch c if it is still
	 * one of ours (the sweep may just have freed it). */
	api_conn_sweep(a);
	for (i = 0; i < a->nall; i++)
		mine |= a->conns[i] == c;
	if (!mine)
		return;
	if (c->refused || c->closing) {
		api_conn_close(c);
		return;
	}
	switch (c->fr.state) {
	case API_FRAME_HEAD:
		api_conn_refuse(c, 408, "head deadline", "request timeout");
		break;
	case API_FRAME_BODY:
	case API_FRAME_CHUNKED:
		api_conn_refuse(c, 408, "body deadline", "request timeout");
		break;
	default:
		/* Connected and silent since accept. */
		api_conn_close(c);
	}
}

static void
api_conn_input_cb(
    struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct api_conn *c = arg;
	struct evbuffer_ptr pos;
	struct evbuffer_iovec v[16];
	size_t len = evbuffer_get_length(buf), added = info->n_added;
	enum api_frame_error fe = API_FRAME_OK;
	int i, nv;

	if (c == NULL || c->magic != API_CONN_MAGIC)
		abort();
	if (added == 0)
		return;
	if (c->refused || c->closing) {
		(void)evbuffer_drain(buf, len);
		return;
	}
	if (added > len)
		added = len; /* cannot happen: we run before evhttp reads */
	while (added > 0 && fe == API_FRAME_OK) {
		if (evbuffer_ptr_set(
		        buf, &pos, len - added, EVBUFFER_PTR_SET) == -1)
			break;
		nv = evbuffer_peek(buf, (ev_ssize_t)added, &pos, v, 16);
		if (nv <= 0)
			break;
		for (i = 0; i < nv && i < 16 && added > 0 && fe == API_FRAME_OK;
		     i++) {
			size_t k = v[i].iov_len < added ? v[i].iov_len : added;
			fe = api_frame_feed(&c->fr, v[i].iov_base, k);
			added -= k;
		}
	}
	switch (fe) {
	case API_FRAME_OK:
		break;
	case API_FRAME_HEAD_TOO_LARGE:
		api_conn_refuse(c, 431, "head too large",
		    "request header fields too large");
		return;
	case API_FRAME_BODY_TOO_LARGE:
		api_conn_refuse(
		    c, 413, "body too large", "request body too large");
		return;
	case API_FRAME_BAD:
		api_conn_refuse(c, 400, "bad framing", "bad request");
		return;
	}
	if (c->fr.seq != c->seq)
		api_conn_rearm(c);
}

static struct bufferevent *
api_bev_track(struct api *a, struct event_base *base, struct bufferevent *bev)
{
	struct api_conn *c;

	if (bev == NULL)
		return NULL;
	/* Listeners pause at the cap, so at most one arrives past it (a
	 * burst in one listener callback); api_request_cb answers it 503
	 * unless a slot has freed by then. */
	if (a->nall > API_CONNS_MAX || (c = calloc(1, sizeof(*c))) == NULL)
		return bev;
	c->magic = API_CONN_MAGIC;
	c->a = a;
	c->bev = bev;
	api_frame_init(&c->fr, API_HEADERS_MAX, API_BODY_MAX);
	if ((c->deadline = evtimer_new(base, api_conn_deadline_cb, c)) ==
	        NULL ||
	    evbuffer_add_cb(bufferevent_get_input(bev), api_conn_input_cb, c) ==
	        NULL) {
		api_conn_free(c);
		return bev;
	}
	c->slot = a->nconns < API_CONNS_MAX;
	a->nconns += c->slot;
	a->conns[a->nall++] = c;
	/* From accept, the first head must be complete in time too. */
	api_conn_arm(c, c->a->timing.head_ms);
	if (a->nconns >= API_CONNS_MAX && !a->paused) {
		struct timeval tv = {0, API_SWEEP_MS * 1000};
		a->paused = true;
		api_listeners_enable(a, false);
		(void)event_add(a->ev_sweep, &tv);
		log_warn(a->log, "api.pause", LOG_U("connections", a->nconns),
		    LOG_S("reason", "connection cap reached"));
	}
	return bev;
}

struct bufferevent *
api_conn_bev_cb(struct event_base *base, void *arg)
{
	struct api *a = arg;

	if (a == NULL || a->magic != API_MAGIC)
		abort();
	api_conn_sweep(a);
	return api_bev_track(
	    a, base, bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE));
}

/* The TLS listener: the handshake runs inside the bufferevent; what
 * api_frame and evhttp read is the decrypted stream. */
struct bufferevent *
api_conn_bev_tls_cb(struct event_base *base, void *arg)
{
	struct api *a = arg;
	struct bufferevent *bev;
	SSL *ssl;

	if (a == NULL || a->magic != API_MAGIC)
		abort();
	api_conn_sweep(a);
	if ((ssl = SSL_new(a->tls)) == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(
	    base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	return api_bev_track(a, base, bev);
}

/*
 * Whether the connection holds a slot. One that came in past the cap gets
 * one now if any is free; otherwise false.
 */
bool
api_conn_admit(struct api *a, struct evhttp_connection *evcon)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	size_t i;

	for (i = 0; i < a->nall; i++) {
		struct api_conn *c = a->conns[i];
		if (c->bev != bev)
			continue;
		if (!c->slot && a->nconns < API_CONNS_MAX) {
			c->slot = true;
			a->nconns++;
		}
		return c->slot;
	}
	return false;
}
