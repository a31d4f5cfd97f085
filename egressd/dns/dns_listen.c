/*
 * dns_listen: the resolver's listeners. UDP sockets read in recvmmsg
 * batches, the TCP listener and its accept, and the reading of
 * length-prefixed queries off each connection: everything that turns a
 * client's bytes into dns_pipeline_handle calls.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egressd/dns/dns_int.h"
#include "egressd/base/sock.h"
#include "egressd/proto/dns_wire.h"
#include "util/addr.h"

#define DNS_TCP_BACKLOG 128
#define DNS_EPHEMERAL_TRIES 16 /* port 0: UDP port also free for TCP */

/* ---- UDP ---- */

/*
 * The kernel's count of datagrams this socket dropped for want of buffer
 * space (SO_RXQ_OVFL), carried on every datagram: the difference since the
 * last one is what the sandbox (or a flood) lost before egressd saw it.
 */
static void
dns_udp_note_drops(struct dns_udp *u, struct msghdr *mh)
{
	struct cmsghdr *cm;

	for (cm = CMSG_FIRSTHDR(mh); cm != NULL; cm = CMSG_NXTHDR(mh, cm)) {
		uint32_t n;

		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SO_RXQ_OVFL ||
		    cm->cmsg_len < CMSG_LEN(sizeof(n)))
			continue;
		memcpy(&n, CMSG_DATA(cm), sizeof(n));
		u->d->st->dns_udp_rcvbuf_drops += (uint32_t)(n - u->ovfl_seen);
		u->ovfl_seen = n;
	}
}

/*
 * Up to DNS_UDP_BATCH datagrams per wakeup in one recvmmsg: a burst of
 * junk from the sandbox costs one system call per batch, not per datagram,
 * so the socket drains faster than a flood can fill it.
 */
static void
dns_udp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_udp *u = arg;
	struct dns *d;
	int i, n;

	(void)what;
	if (u == NULL || u->magic != DNS_UDP_MAGIC)
		abort();
	d = u->d;
	for (i = 0; i < DNS_UDP_BATCH; i++) {
		struct msghdr *mh = &d->udpmsg[i].msg_hdr;

		d->udpiov[i].iov_base = d->udpbuf[i];
		d->udpiov[i].iov_len = sizeof(d->udpbuf[i]);
		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &d->udppeer[i];
		mh->msg_namelen = sizeof(d->udppeer[i]);
		mh->msg_iov = &d->udpiov[i];
		mh->msg_iovlen = 1;
		mh->msg_control = d->udpctl[i].buf;
		mh->msg_controllen = sizeof(d->udpctl[i].buf);
		d->udpmsg[i].msg_len = 0;
	}
	n = recvmmsg(fd, d->udpmsg, DNS_UDP_BATCH, MSG_DONTWAIT, NULL);
	if (n <= 0)
		return; /* EAGAIN, or an ICMP error: nothing to do */
	dns_send_batch_begin(d, u);
	for (i = 0; i < n; i++) {
		struct msghdr *mh = &d->udpmsg[i].msg_hdr;
		struct dns_origin o;

		dns_udp_note_drops(u, mh);
		if ((mh->msg_flags & MSG_TRUNC) != 0)
			continue; /* no sane query is that big */
		if (mh->msg_namelen > sizeof(o.peer))
			continue;
		memset(&o, 0, sizeof(o));
		o.udp = u;
		memcpy(&o.peer, &d->udppeer[i], mh->msg_namelen);
		o.peerlen = mh->msg_namelen;
		dns_pipeline_handle(d, &o, d->udpbuf[i], d->udpmsg[i].msg_len);
	}
	dns_send_batch_end(d);
}

int
dns_udp_fd(const struct dns *d, int family)
{
	if (d == NULL)
		return -1;
	return family == AF_INET6 ? d->udp6.fd : d->udp4.fd;
}

void
dns_udp_input(struct dns *d, int family, const uint8_t *msg, size_t len,
    const struct sockaddr *peer, socklen_t peerlen)
{
	struct dns_origin o;
	struct dns_udp *u = family == AF_INET6 ? &d->udp6 : &d->udp4;

	if (d->magic != DNS_MAGIC)
		abort();
	/* What a read would have skipped, skipped too. */
	if (u->fd < 0 || len > DNS_UDP_RECV_MAX || peerlen > sizeof(o.peer) ||
	    peer->sa_family != family)
		return;
	memset(&o, 0, sizeof(o));
	o.udp = u;
	memcpy(&o.peer, peer, peerlen);
	o.peerlen = peerlen;
	dns_pipeline_handle(d, &o, msg, len);
}

/* The listen address of family at addr (a literal); 0 and e if it is not. */
static socklen_t
dns_listen_sockaddr(int family, const char *addr, uint16_t port,
    struct sockaddr_storage *ss, struct err *e)
{
	struct addr a;

	if (!addr_parse_ip(addr, strlen(addr), &a) || a.family != family) {
		err_set(e, "bad listen address %s", addr);
		return 0;
	}
	return addr_to_sockaddr(&a, port, ss);
}

static int
dns_udp_open(struct dns *d, struct dns_udp *u, int family, const char *addr,
    uint16_t port, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, fd;

	if ((sl = dns_listen_sockaddr(family, addr, port, &ss, e)) == 0)
		return -1;
	if ((fd = sock_open_local(family, SOCK_DGRAM | SOCK_NONBLOCK, e)) < 0)
		return -1;
	/* The default receive buffer (rmem_default, ~200 KiB) holds a few
	 * hundred small datagrams: a burst of junk from the sandbox filled
	 * it and the next real query was dropped by the kernel, so the
	 * client waited for its retry timer. DNS_UDP_RCVBUF absorbs a burst
	 * of thousands while egressd drains it; the memory is charged only
	 * while datagrams wait. */
	sock_set_buf(fd, SO_RCVBUF, DNS_UDP_RCVBUF);
	(void)setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		err_set(
		    e, "bind udp %s port %u: %s", addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	u->magic = DNS_UDP_MAGIC;
	u->d = d;
	u->fd = fd;
	u->family = family;
	u->ev =
	    event_new(d->base, fd, EV_READ | EV_PERSIST, dns_udp_read_cb, u);
	if (u->ev == NULL || event_add(u->ev, NULL) < 0) {
		err_set(e, "event_new failed");
		return -1;
	}
	return 0;
}

static uint16_t
dns_udp_port(const struct dns_udp *u)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(u->fd, (struct sockaddr *)&ss, &sl) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void
dns_udp_close(struct dns_udp *u)
{
	if (u->ev != NULL)
		event_free(u->ev);
	u->ev = NULL;
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	u->magic = DNS_DEAD_MAGIC;
}

/* ---- TCP ---- */

static void
dns_tcp_read_cb(struct bufferevent *bev, void *arg)
{
	struct dns_conn *c = arg;
	struct dns *d;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (c == NULL || c->magic != DNS_CONN_MAGIC)
		abort();
	d = c->d;
	while (c->state == DNS_CONN_OPEN) {
		struct dns_origin o;
		const uint8_t *p;
		size_t avail = evbuffer_get_length(in), mlen;

		if (c->inflight >= d->tcp_inflight_max ||
		    dns_conn_output_full(c)) {
			dns_conn_pause(c);
			return;
		}
		if (avail < DNS_TCP_PREFIX_LEN)
			return;
		p = evbuffer_pullup(in, DNS_TCP_PREFIX_LEN);
		if (p == NULL) {
			dns_conn_close(c, "oom");
			return;
		}
		mlen = (size_t)p[0] << 8 | p[1];
		if (mlen < DNS_HEADER_LEN) {
			dns_conn_close(c, "bad_length");
			return;
		}
		if (avail < DNS_TCP_PREFIX_LEN + mlen)
			return;
		p = evbuffer_pullup(in, (ssize_t)(DNS_TCP_PREFIX_LEN + mlen));
		if (p == NULL) {
			dns_conn_close(c, "oom");
			return;
		}
		memset(&o, 0, sizeof(o));
		o.tcp = true;
		o.conn = c;
		c->nqueries++;
		dns_pipeline_handle(d, &o, p + DNS_TCP_PREFIX_LEN, mlen);
		if (c->state == DNS_CONN_CLOSED)
			return;
		evbuffer_drain(in, DNS_TCP_PREFIX_LEN + mlen);
		if (c->nqueries >= d->tcp_queries_max) {
			dns_conn_set_state(c, DNS_CONN_DRAINING);
			bufferevent_disable(bev, EV_READ);
			dns_conn_after_reply(c);
			return;
		}
	}
}

static void
dns_tcp_write_cb(struct bufferevent *bev, void *arg)
{
	struct dns_conn *c = arg;

	(void)bev;
	if (c == NULL || c->magic != DNS_CONN_MAGIC)
		abort();
	dns_conn_after_reply(c);
}

static void
dns_tcp_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct dns_conn *c = arg;

	if (c == NULL || c->magic != DNS_CONN_MAGIC)
		abort();
	if (what & BEV_EVENT_ERROR) {
		dns_conn_close(c, "error");
		return;
	}
	if (what & BEV_EVENT_EOF) {
		/* The client is done sending; finish what it asked. */
		if (c->state == DNS_CONN_OPEN)
			dns_conn_set_state(c, DNS_CONN_DRAINING);
		dns_conn_after_reply(c);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		if ((what & BEV_EVENT_READING) && c->inflight > 0 &&
		    c->state == DNS_CONN_OPEN) {
			/* Not idle: we owe answers. Keep waiting. */
			if (!c->read_paused)
				bufferevent_enable(bev, EV_READ);
			return;
		}
		dns_conn_close(
		    c, (what & BEV_EVENT_WRITING) ? "write_timeout" : "idle");
	}
}

static void
dns_tcp_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct dns *d = arg;
	struct dns_conn *c;
	struct timeval tv;

	(void)l;
	(void)sa;
	(void)salen;
	if (d == NULL || d->magic != DNS_MAGIC)
		abort();
	if (d->nconns >= d->tcp_conns_max) {
		dns_log_warn(d, "dns.tcp.refused", "", "conn_cap", NULL);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	c->magic = DNS_CONN_MAGIC;
	c->d = d;
	c->id = ++d->next_conn_id;
	c->state = DNS_CONN_OPEN;
	c->bev = bufferevent_socket_new(
	    d->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (c->bev == NULL) {
		close(fd);
		free(c);
		return;
	}
	bufferevent_setcb(
	    c->bev, dns_tcp_read_cb, dns_tcp_write_cb, dns_tcp_event_cb, c);
	tv.tv_sec = d->tcp_idle_ms / 1000;
	tv.tv_usec = (long)(d->tcp_idle_ms % 1000) * 1000;
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	/* Never buffer more than two maximal messages of input. */
	bufferevent_setwatermark(
	    c->bev, EV_READ, 0, 2 * (DNS_TCP_PREFIX_LEN + DNS_MSG_MAX));
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	LIST_INSERT_HEAD(&d->conns, c, entry);
	d->nconns++;
}

static void
dns_tcp_error_cb(struct evconnlistener *l, void *arg)
{
	struct dns *d = arg;

	(void)l;
	if (d == NULL || d->magic != DNS_MAGIC)
		abort();
	/* EMFILE and friends: libevent keeps listening; say so, bounded. */
	dns_log_warn(d, "dns.tcp.accept_failed", "", "accept",
	    strerror(EVUTIL_SOCKET_ERROR()));
}

static struct evconnlistener *
dns_tcp_open(
    struct dns *d, int family, const char *addr, uint16_t port, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned flags =
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC;
	struct evconnlistener *l;

	if ((sl = dns_listen_sockaddr(family, addr, port, &ss, e)) == 0)
		return NULL;
	if (family == AF_INET6)
		flags |= LEV_OPT_BIND_IPV6ONLY;
	l = evconnlistener_new_bind(d->base, dns_tcp_accept_cb, d, flags,
	    DNS_TCP_BACKLOG, (struct sockaddr *)&ss, (int)sl);
	if (l == NULL) {
		err_set(
		    e, "bind tcp %s port %u: %s", addr, port, strerror(errno));
		return NULL;
	}
	evconnlistener_set_error_cb(l, dns_tcp_error_cb);
	return l;
}

/* ---- opening and closing ---- */

/* The listen address as bytes (own4/own6), when it is one literal. */
static bool
dns_own_addr(const char *text, int family, uint8_t *out)
{
	struct addr a;

	if (!addr_parse_ip(text, strlen(text), &a) || a.family != family)
		return false;
	memcpy(out, a.a, family == AF_INET ? 4 : 16);
	return true;
}

/* UDP and TCP on l4; the UDP port is the port of all four listeners. */
static int
dns_listen_open4(struct dns *d, const char *l4, uint16_t port, struct err *e)
{
	int tries = port == 0 ? DNS_EPHEMERAL_TRIES : 1;

	/*
	 * An ephemeral UDP port may be taken on the TCP side: then
	 * try another one (port 0 is for tests only).
	 */
	while (tries-- > 0) {
		if (dns_udp_open(d, &d->udp4, AF_INET, l4, port, e) < 0)
			return -1;
		d->port = dns_udp_port(&d->udp4);
		d->tcp4 = dns_tcp_open(d, AF_INET, l4, d->port, e);
		if (d->tcp4 != NULL)
			break;
		dns_udp_close(&d->udp4);
	}
	if (d->tcp4 == NULL)
		return -1;
	d->have_own4 = dns_own_addr(l4, AF_INET, d->own4);
	return 0;
}

/* UDP and TCP on l6, at d->port when it is set; failure is logged. */
static void
dns_listen_open6(struct dns *d, const char *l6)
{
	struct err e6;

	err_clear(&e6);
	if (dns_udp_open(d, &d->udp6, AF_INET6, l6, d->port, &e6) == 0) {
		if (d->port == 0)
			d->port = dns_udp_port(&d->udp6);
		d->tcp6 = dns_tcp_open(d, AF_INET6, l6, d->port, &e6);
	}
	if (d->tcp6 == NULL) {
		/* A host without IPv6 still gets a working resolver. */
		log_warn(d->lg, "dns.listen6_failed", LOG_S("error", e6.msg));
		dns_udp_close(&d->udp6);
	} else {
		d->have_own6 = dns_own_addr(l6, AF_INET6, d->own6);
	}
}

int
dns_listen_open(struct dns *d, const struct dns_opts *o, struct err *e)
{
	const char *l4, *l6;

	/* IPv4 first (its port is the port of all four). */
	l4 = o->listen4 != NULL ? o->listen4 : DNS_LISTEN4_DEFAULT;
	l6 = o->listen6 != NULL ? o->listen6 : DNS_LISTEN6_DEFAULT;
	d->port = o->port;
	if (l4[0] != '\0' && dns_listen_open4(d, l4, o->port, e) < 0)
		return -1;
	if (l6[0] != '\0')
		dns_listen_open6(d, l6);
	if (d->udp4.fd < 0 && d->tcp6 == NULL) {
		err_set(e, "no DNS listener could be opened");
		return -1;
	}
	return 0;
}

void
dns_listen_close(struct dns *d)
{
	if (d->tcp4 != NULL)
		evconnlistener_free(d->tcp4);
	d->tcp4 = NULL;
	if (d->tcp6 != NULL)
		evconnlistener_free(d->tcp6);
	d->tcp6 = NULL;
	if (d->udp4.fd >= 0 || d->udp4.ev != NULL)
		dns_udp_close(&d->udp4);
	if (d->udp6.fd >= 0 || d->udp6.ev != NULL)
		dns_udp_close(&d->udp6);
}
