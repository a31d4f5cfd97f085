/*
 * Listeners and accept: a new connection from the client.
 */
#include <errno.h>
#include <event2/bufferevent_ssl.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/now.h"
#include "egressd/proxy/proxy_int.h"

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
	c->magic = PROXY_CONN_MAGIC;
	c->p = p;
	c->fd = fd;
	c->t0_ms = c->last_ms = now_mono_ms();
	c->st = PROXY_ST_PEEK;
	(void)addr_from_sockaddr(peer, &c->peer, &c->pport);
	have_dst = proxy_original_dst(fd, family, &c->dst, &c->dport) == 0;
	c->timer = evtimer_new(p->base, proxy_conn_timer_cb, c);
	c->peek.ev = event_new(
	    p->base, fd, EV_READ | EV_PERSIST | EV_ET, proxy_peek_cb, c);
	c->peek.buf = malloc(PROXY_PEEK_MAX);
	if (c->timer == NULL || c->peek.ev == NULL || c->peek.buf == NULL) {
		if (c->timer != NULL)
			event_free(c->timer);
		if (c->peek.ev != NULL)
			event_free(c->peek.ev);
		free(c->peek.buf);
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
	(void)event_add(c->peek.ev, NULL);
	proxy_conn_arm(c, p->o.hello_ms);
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
		proxy_conn_pause_accept(p);
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

int
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
