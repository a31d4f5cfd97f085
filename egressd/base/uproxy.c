/*
 * uproxy: the CONNECT handshake with the upstream proxy on a raw
 * non-blocking socket (uproxy.h). No bufferevent: the socket goes to
 * whoever asked (a TLS client, a splice, a relay, the webhook) with not
 * one byte of the tunnel read.
 */
#include "egressd/base/uproxy.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "egressd/base/sock.h"
#include "egressd/proto/http_connect.h"
#include "util/secmem.h"

#define UPROXY_DIAL_MAGIC 0x55505859u /* "UPXY" */

struct uproxy {
	struct addr addr;
	uint16_t port;
	enum uproxy_target by;
	struct secmem_arena *arena; /* holds auth */
	char *auth; /* the Proxy-Authorization value, or NULL */
	size_t auth_len;
};

enum dial_phase { D_CONNECT, D_WRITE, D_READ };

struct uproxy_dial {
	uint32_t magic;
	const struct uproxy *u;
	int fd;
	enum dial_phase phase;
	int conn_err; /* connect(2) failed at once: reported from the loop */
	struct event *ev, *timer;
	uproxy_done_fn cb;
	void *arg;
	/* the request (the credential in it until written, then wiped) */
	char req[HTTP_CONNECT_REQUEST_MAX];
	size_t req_len, req_off;
	/* the answer's head so far (consumed from the socket: all of it is
	 * the head's, no end was in it) */
	char head[HTTP_CONNECT_HEAD_MAX];
	size_t have;
};

static const char *const uproxy_fail_names[UPROXY_NFAILS] = {
    [UPROXY_OK] = "ok",
    [UPROXY_UNREACHABLE] = "unreachable",
    [UPROXY_AUTH] = "auth_refused",
    [UPROXY_REFUSED] = "refused",
    [UPROXY_BAD_RESPONSE] = "bad_response",
    [UPROXY_CLOSED] = "closed",
    [UPROXY_TIMEOUT] = "timeout",
};

const char *
uproxy_fail_name(enum uproxy_fail f)
{
	return (unsigned)f < UPROXY_NFAILS ? uproxy_fail_names[f] : "?";
}

struct uproxy *
uproxy_new(const struct addr *addr, uint16_t port, enum uproxy_target by,
    const char *auth, size_t auth_len, struct err *e)
{
	struct uproxy *u;

	if (port == 0) {
		err_set(e, "upstream proxy: port 0");
		return NULL;
	}
	if (auth != NULL && http_connect_auth_check(auth, auth_len, e) == -1)
		return NULL;
	if ((u = calloc(1, sizeof(*u))) == NULL) {
		err_set(e, "upstream proxy: out of memory");
		return NULL;
	}
	u->addr = *addr;
	u->port = port;
	u->by = by;
	if (auth != NULL) {
		if ((u->arena = secmem_arena_new(auth_len + 64, e)) == NULL ||
		    (u->auth = secmem_strndup(u->arena, auth, auth_len)) ==
		        NULL) {
			if (u->arena != NULL)
				err_set(e, "upstream proxy: out of memory");
			uproxy_free(u);
			return NULL;
		}
		u->auth_len = auth_len;
	}
	return u;
}

void
uproxy_free(struct uproxy *u)
{
	if (u == NULL)
		return;
	secmem_arena_free(u->arena); /* wipes the value */
	free(u);
}

void
uproxy_describe(const struct uproxy *u, char *buf, size_t cap)
{
	addr_format_port(&u->addr, u->port, buf, cap);
}

bool
uproxy_has_auth(const struct uproxy *u)
{
	return u->auth != NULL;
}

enum uproxy_target
uproxy_target_by(const struct uproxy *u)
{
	return u->by;
}

bool
uproxy_locked(const struct uproxy *u)
{
	return u->arena == NULL || secmem_arena_locked(u->arena);
}

static void
dial_free(struct uproxy_dial *d)
{
	if (d->ev != NULL)
		event_free(d->ev);
	if (d->timer != NULL)
		event_free(d->timer);
	if (d->fd != -1)
		close(d->fd);
	secmem_wipe(d->req, sizeof(d->req));
	d->magic = 0;
	free(d);
}

/* The one end of a dial: the socket to the caller or closed, cb, free. */
static void
dial_end(struct uproxy_dial *d, enum uproxy_fail f, int status)
{
	int fd = -1;

	if (f == UPROXY_OK) {
		fd = d->fd;
		d->fd = -1;
	}
	event_del(d->ev);
	d->cb(d->arg, fd, f, status);
	dial_free(d);
}

/* The request out; true once all of it went (the copy then wiped). */
static int
dial_write(struct uproxy_dial *d)
{
	ssize_t n;

	while (d->req_off < d->req_len) {
		n = send(d->fd, d->req + d->req_off, d->req_len - d->req_off,
		    MSG_NOSIGNAL);
		if (n > 0) {
			d->req_off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		return -1;
	}
	secmem_wipe(d->req, sizeof(d->req));
	return 1;
}

/*
 * The answer: peeked into head after what is already there, parsed; a
 * whole head is consumed to its end and no further, an unfinished one
 * consumed whole (no end in it: all of it is the head's), so the next
 * peek sees only new bytes.
 */
static void
dial_read(struct uproxy_dial *d)
{
	struct http_connect_resp r;
	struct err e;
	ssize_t n =
	    recv(d->fd, d->head + d->have, sizeof(d->head) - d->have, MSG_PEEK);
	size_t take;

	if (n == 0) {
		dial_end(d, UPROXY_CLOSED, 0);
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			dial_end(d, UPROXY_CLOSED, 0);
		return;
	}
	switch (http_connect_parse(d->head, d->have + (size_t)n, &r, &e)) {
	case HTTP_CONNECT_MORE:
		take = (size_t)n;
		break;
	case HTTP_CONNECT_OK:
		take = r.head_len - d->have;
		break;
	default:
		dial_end(d, UPROXY_BAD_RESPONSE, 0);
		return;
	}
	if (recv(d->fd, d->head + d->have, take, 0) != (ssize_t)take) {
		dial_end(d, UPROXY_CLOSED, 0);
		return;
	}
	d->have += take;
	if (d->have < r.head_len || r.status == 0)
		return;
	if (r.status >= 200 && r.status < 300)
		dial_end(d, UPROXY_OK, r.status);
	else
		dial_end(d, r.status == 407 ? UPROXY_AUTH : UPROXY_REFUSED,
		    r.status);
}

static void
dial_io_cb(evutil_socket_t fd, short what, void *arg)
{
	struct uproxy_dial *d = arg;
	int err = 0, rc;
	socklen_t el = sizeof(err);

	(void)fd;
	(void)what;
	if (d->magic != UPROXY_DIAL_MAGIC)
		abort();
	if (d->phase == D_CONNECT) {
		if (d->conn_err != 0 ||
		    getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &el) == -1 ||
		    err != 0) {
			dial_end(d, UPROXY_UNREACHABLE, 0);
			return;
		}
		d->phase = D_WRITE;
	}
	if (d->phase == D_WRITE) {
		if ((rc = dial_write(d)) == -1) {
			dial_end(d, UPROXY_CLOSED, 0);
			return;
		}
		if (rc == 0)
			return;
		d->phase = D_READ;
		event_del(d->ev);
		event_assign(d->ev, event_get_base(d->ev), d->fd,
		    EV_READ | EV_PERSIST, dial_io_cb, d);
		event_add(d->ev, NULL);
		return;
	}
	dial_read(d);
}

static void
dial_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct uproxy_dial *d = arg;

	(void)fd;
	(void)what;
	if (d->magic != UPROXY_DIAL_MAGIC)
		abort();
	dial_end(d, UPROXY_TIMEOUT, 0);
}

/* The socket, connecting (non-blocking) to the proxy; *conn_err: the
 * connect's own failure (no route), reported from the loop like a later
 * one, so the caller has one path. -1 and e. */
static int
dial_socket(const struct uproxy *u, uint32_t mark, int *conn_err, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl = addr_to_sockaddr(&u->addr, u->port, &ss);
	int fd, one = 1;

	fd = sock_open_marked(
	    u->addr.family, SOCK_STREAM | SOCK_NONBLOCK, mark, e);
	if (fd == -1)
		return -1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&ss, sl) == -1 &&
	    errno != EINPROGRESS)
		*conn_err = errno != 0 ? errno : ECONNREFUSED;
	return fd;
}

struct uproxy_dial *
uproxy_dial(struct event_base *base, const struct uproxy *u, uint32_t mark,
    const char *host, uint16_t port, unsigned timeout_ms, uproxy_done_fn cb,
    void *arg, struct err *e)
{
	char auth[HTTP_CONNECT_AUTHORITY_MAX + 1];
	struct uproxy_dial *d;
	unsigned ms = timeout_ms != 0 ? timeout_ms : UPROXY_DIAL_MS;
	struct timeval tv = {ms / 1000, (long)(ms % 1000) * 1000};

	if (http_connect_authority(host, port, auth, sizeof(auth), e) == -1)
		return NULL;
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		err_set(e, "upstream proxy: out of memory");
		return NULL;
	}
	d->magic = UPROXY_DIAL_MAGIC;
	d->u = u;
	d->cb = cb;
	d->arg = arg;
	d->fd = -1;
	if (http_connect_request(auth, u->auth, u->auth_len, d->req,
	        sizeof(d->req), &d->req_len, e) == -1)
		goto fail;
	if ((d->fd = dial_socket(u, mark, &d->conn_err, e)) == -1)
		goto fail;
	d->ev = event_new(base, d->fd, EV_WRITE | EV_PERSIST, dial_io_cb, d);
	d->timer = evtimer_new(base, dial_timer_cb, d);
	if (d->ev == NULL || d->timer == NULL || event_add(d->ev, NULL) == -1 ||
	    evtimer_add(d->timer, &tv) == -1) {
		err_set(e, "upstream proxy: out of memory");
		goto fail;
	}
	if (d->conn_err != 0) /* writable or not: say so next turn */
		event_active(d->ev, EV_WRITE, 1);
	return d;
fail:
	dial_free(d);
	return NULL;
}

void
uproxy_dial_cancel(struct uproxy_dial *d)
{
	if (d == NULL)
		return;
	if (d->magic != UPROXY_DIAL_MAGIC)
		abort();
	dial_free(d);
}
