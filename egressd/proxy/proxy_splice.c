/*
 * Pass-through after the decision: splice(2) both ways.
 */
#include <errno.h>
#include <fcntl.h>

#include "util/now.h"
#include "egressd/proxy/proxy_int.h"

/* What the pipe holds, out to s->to. 1: some went; 0: to is full (its
 * write event armed); -1: failed. */
static int
proxy_splice_out(struct proxy_splice *s)
{
	struct proxy_conn *c = s->c;
	ssize_t n = splice(s->pr, NULL, s->to, NULL, s->inpipe,
	    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

	if (n > 0) {
		s->inpipe -= (size_t)n;
		if (s->dir == 0)
			c->up_bytes += (uint64_t)n;
		else
			c->down_bytes += (uint64_t)n;
		c->last_ms = now_mono_ms();
		return 1;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		(void)event_del(s->rev);
		(void)event_add(s->wev, NULL);
		return 0;
	}
	return -1;
}

/* from said EOF and the pipe is empty: FIN toward to; both ways done,
 * the connection ends. */
static void
proxy_splice_eof(struct proxy_splice *s)
{
	struct proxy_conn *c = s->c;

	proxy_pipe_put(s);
	if (!s->shut) {
		s->shut = true;
		(void)shutdown(s->to, SHUT_WR);
	}
	if (c->splice.dir[0].shut && c->splice.dir[1].shut)
		proxy_conn_close(c, PROXY_OK);
}

/*
 * Pass-through relaying with splice(2): socket -> pipe -> socket, the
 * bytes never copied into egressd. A direction reads only while its pipe
 * is empty and waits for its destination to drain otherwise, so each
 * holds at most one pipe (PROXY_SPLICE_MAX) in flight: the backpressure.
 * It may close c (proxy_conn_close: freed only on the next loop turn).
 */
static void
proxy_splice_pump(struct proxy_splice *s)
{
	struct proxy_conn *c = s->c;
	ssize_t n;

	for (;;) {
		if (s->inpipe > 0) {
			n = proxy_splice_out(s);
			if (n > 0)
				continue;
			if (n == 0)
				return;
			goto fail;
		}
		(void)event_del(s->wev);
		if (s->eof) {
			proxy_splice_eof(s);
			return;
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
			return;
		}
		if (!proxy_pipe_get(s)) {
			/* every pipe is in flight (or no descriptor is
			 * left): the bytes wait in the socket */
			struct timeval tv = {0, PROXY_PIPE_RETRY_MS * 1000};

			(void)event_del(s->rev);
			(void)evtimer_add(s->retry, &tv);
			return;
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
			return;
		}
		goto fail;
	}
fail:
	/* which side failed: a read error is from's, a write error to's;
	 * either way the connection ends */
	proxy_conn_close(c,
	    (s->dir == 0) == (s->inpipe == 0) ? PROXY_CLIENT_ERROR
	                                      : PROXY_UPSTREAM_ERROR);
}

static void
proxy_splice_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_splice *s = arg;

	(void)fd;
	(void)what;
	(void)proxy_conn_arg(s->c);
	proxy_splice_pump(s);
}

void
proxy_splice_start(struct proxy_conn *c)
{
	struct proxy *p = c->p;
	int i;

	/* Nothing was read through the bufferevents (the client's bytes
	 * wait in its socket), so they can go; their fds stay. */
	c->splice.fd[0] = bufferevent_getfd(c->cli);
	c->splice.fd[1] = bufferevent_getfd(c->up);
	(void)bufferevent_setfd(c->cli, -1);
	(void)bufferevent_setfd(c->up, -1);
	bufferevent_free(c->cli);
	bufferevent_free(c->up);
	c->cli = c->up = NULL;
	c->splice.on = true;
	/* both directions whole before anything can fail: the close path
	 * looks at both */
	for (i = 0; i < 2; i++) {
		struct proxy_splice *s = &c->splice.dir[i];

		s->c = c;
		s->dir = i;
		s->from = c->splice.fd[i];
		s->to = c->splice.fd[1 - i];
		s->pr = s->pw = -1;
	}
	for (i = 0; i < 2; i++) {
		struct proxy_splice *s = &c->splice.dir[i];

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
	(void)event_add(c->splice.dir[1].rev, NULL);
	/* The ClientHello the peek saw waits in the client's socket: move
	 * it now, not a loop turn later (the pump arms rev0 when it is
	 * through). It may close c. */
	proxy_splice_pump(&c->splice.dir[0]);
}
