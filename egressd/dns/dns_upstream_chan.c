/*
 * dns_upstream_chan: one upstream's two c-ares channels (UDP with EDNS,
 * TCP) inside the daemon's libevent loop: the sockets c-ares asks us to
 * watch, its timer, the source port and SO_MARK of every socket it opens.
 */
#include "egressd/dns/dns_upstream.h"
#include "egressd/dns/dns_upstream_int.h"
#include "egressd/base/sock.h"
#include "util/addr.h"

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- c-ares <-> libevent ---- */

void
dns_upstream_chan_rearm(struct dns_upstream_chan *c)
{
	struct timeval tv, *tvp;

	if (!c->ch_ok)
		return;
	tvp = ares_timeout(c->ch, NULL, &tv);
	if (tvp == NULL)
		evtimer_del(c->timer);
	else
		evtimer_add(c->timer, tvp);
}

static void
dns_upstream_sock_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_upstream_chan *c = arg;

	if (c->magic != DNS_UPSTREAM_CHAN_MAGIC)
		abort();
	ares_process_fd(c->ch, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
	    (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
	dns_upstream_chan_rearm(c);
}

static void
dns_upstream_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_upstream_chan *c = arg;

	(void)fd;
	(void)what;
	if (c->magic != DNS_UPSTREAM_CHAN_MAGIC)
		abort();
	ares_process_fd(c->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_upstream_chan_rearm(c);
}

static void
dns_upstream_sock_state_cb(
    void *data, ares_socket_t fd, int readable, int writable)
{
	struct dns_upstream_chan *c = data;
	struct dns_upstream_fd **pp, *f;
	short what =
	    (short)((readable ? EV_READ : 0) | (writable ? EV_WRITE : 0));

	if (c->magic != DNS_UPSTREAM_CHAN_MAGIC)
		abort();
	for (pp = &c->fds; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->fd == fd)
			break;
	f = *pp;
	if (what == 0) {
		if (f != NULL) {
			*pp = f->next;
			event_free(f->ev);
			free(f);
		}
		return;
	}
	if (f != NULL && f->what == what)
		return;
	if (f == NULL) {
		f = calloc(1, sizeof(*f));
		if (f == NULL) {
			log_error(c->up->set->lg, "dns.upstream.oom");
			return; /* the query times out; nothing blocks */
		}
		f->fd = fd;
		f->next = c->fds;
		c->fds = f;
	} else {
		event_free(f->ev);
		f->ev = NULL;
	}
	f->what = what;
	f->ev = event_new(
	    c->up->set->base, fd, what | EV_PERSIST, dns_upstream_sock_cb, c);
	if (f->ev != NULL)
		event_add(f->ev, NULL);
}

/*
 * Binds a UDP upstream socket to a free port of EGRESSD_DNS_SPORT_LO..HI,
 * starting at a random one (source port randomization stays). The
 * sandbox cannot have left a conntrack entry on any of them (see the
 * header), so the flow is egressd's from its first packet. Fails when
 * every port is taken: a socket on a kernel-chosen port could inherit a
 * sandbox flow's redirect.
 */
static int
dns_upstream_bind_own_port(ares_socket_t fd)
{
	const unsigned n = EGRESSD_DNS_SPORT_HI - EGRESSD_DNS_SPORT_LO + 1;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(int);
	int family = 0;
	unsigned i, start = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &sl) < 0)
		return -1;
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
		start = (unsigned)now_mono_ms();
	for (i = 0; i < n; i++) {
		uint16_t port =
		    (uint16_t)(EGRESSD_DNS_SPORT_LO + (start + i) % n);

		memset(&ss, 0, sizeof(ss));
		if (family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			s4->sin_family = AF_INET;
			s4->sin_port = htons(port);
			sl = sizeof(*s4);
		} else if (family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons(port);
			sl = sizeof(*s6);
		} else {
			errno = EAFNOSUPPORT;
			return -1;
		}
		if (bind(fd, (struct sockaddr *)&ss, sl) == 0)
			return 0;
		if (errno != EADDRINUSE)
			return -1;
	}
	errno = EADDRINUSE;
	return -1;
}

/*
 * The own port range is safe only while the kernel never hands it to the
 * sandbox's sockets: with an ip_local_port_range reaching into it, their
 * UDP from a port there is rejected (and logged once here, at start).
 */
void
dns_upstream_check_ephemeral(struct log *lg)
{
	char buf[64];
	unsigned lo = 0, hi = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	if (f == NULL)
		return;
	if (fgets(buf, sizeof(buf), f) != NULL &&
	    sscanf(buf, "%u %u", &lo, &hi) == 2 && hi >= EGRESSD_DNS_SPORT_LO &&
	    lo <= EGRESSD_DNS_SPORT_HI)
		log_warn(lg, "dns.own_ports_ephemeral",
		    LOG_U("ephemeral_lo", lo), LOG_U("ephemeral_hi", hi),
		    LOG_U("own_lo", EGRESSD_DNS_SPORT_LO),
		    LOG_U("own_hi", EGRESSD_DNS_SPORT_HI),
		    LOG_S("effect",
		        "sandbox UDP from ports in both ranges is rejected"));
	fclose(f);
}

static int
dns_upstream_sock_config_cb(ares_socket_t fd, int type, void *data)
{
	struct dns_upstream_chan *c = data;
	struct err e;

	if (c->magic != DNS_UPSTREAM_CHAN_MAGIC)
		return -1;
	if (sock_set_mark(fd, c->up->set->o.mark, &e) == -1) {
		/*
		 * Without the mark the query would be redirected back to us
		 * (or dropped) by the sandbox's own rules: refuse the socket.
		 */
		log_error(c->up->set->lg, "dns.upstream.mark_failed",
		    LOG_S("upstream", c->up->addr.text), LOG_S("error", e.msg));
		return -1;
	}
	/*
	 * TCP needs no reserved port: a SYN on a closed conntrack entry
	 * starts a new flow, and the kernel never reuses the 4-tuple of a
	 * live socket.
	 */
	if (type == SOCK_DGRAM && dns_upstream_bind_own_port(fd) < 0) {
		log_error(c->up->set->lg, "dns.upstream.bind_failed",
		    LOG_S("upstream", c->up->addr.text),
		    LOG_S("error", strerror(errno)));
		return -1;
	}
	return 0;
}

static int
dns_upstream_chan_init(struct dns_upstream_chan *c, struct dns_upstream *up,
    bool tcp, struct err *e)
{
	struct dns_upstreams *u = up->set;
	struct ares_options ao;
	struct ares_addr_port_node node;
	int optmask, rc;
	char lookups[] = "b";

	memset(c, 0, sizeof(*c));
	c->magic = DNS_UPSTREAM_CHAN_MAGIC;
	c->up = up;
	c->tcp = tcp;
	c->timer = evtimer_new(u->base, dns_upstream_timer_cb, c);
	if (c->timer == NULL) {
		err_set(e, "evtimer_new failed");
		return -1;
	}
	memset(&ao, 0, sizeof(ao));
	ao.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES |
	    ARES_FLAG_STAYOPEN | ARES_FLAG_EDNS |
	    /* TC=1 comes back to us: the retry over TCP is ours, counted. */
	    (tcp ? ARES_FLAG_USEVC : ARES_FLAG_IGNTC);
	ao.timeout = (int)u->o.attempt_timeout_ms;
	ao.tries = 1;
	ao.ednspsz = DNS_UPSTREAM_EDNS_SIZE;
	ao.sock_state_cb = dns_upstream_sock_state_cb;
	ao.sock_state_cb_data = c;
	ao.lookups = lookups;
	ao.domains = NULL;
	ao.ndomains = 0;
	optmask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
	    ARES_OPT_EDNSPSZ | ARES_OPT_SOCK_STATE_CB | ARES_OPT_LOOKUPS |
	    ARES_OPT_DOMAINS;
	rc = ares_init_options(&c->ch, &ao, optmask);
	if (rc != ARES_SUCCESS) {
		err_set(e, "ares_init_options: %s", ares_strerror(rc));
		return -1;
	}
	c->ch_ok = true;
	memset(&node, 0, sizeof(node));
	node.family = up->addr.family;
	if (up->addr.family == AF_INET)
		memcpy(&node.addr.addr4, up->addr.addr, 4);
	else
		memcpy(&node.addr.addr6, up->addr.addr, 16);
	node.udp_port = up->addr.port;
	node.tcp_port = up->addr.port;
	rc = ares_set_servers_ports(c->ch, &node);
	if (rc != ARES_SUCCESS) {
		err_set(e, "ares_set_servers_ports: %s", ares_strerror(rc));
		return -1;
	}
	ares_set_socket_configure_callback(
	    c->ch, dns_upstream_sock_config_cb, c);
	return 0;
}

/* Destroys the channel: pending attempts see ARES_EDESTRUCTION. */
static void
dns_upstream_chan_clear(struct dns_upstream_chan *c)
{
	struct dns_upstream_fd *f;

	if (c->ch_ok) {
		c->ch_ok = false;
		ares_destroy(c->ch);
	}
	while ((f = c->fds) != NULL) {
		c->fds = f->next;
		if (f->ev != NULL)
			event_free(f->ev);
		free(f);
	}
	if (c->timer != NULL)
		event_free(c->timer);
	c->timer = NULL;
	c->magic = DNS_UPSTREAM_DEAD_MAGIC;
}

void
dns_upstream_destroy(struct dns_upstream *up)
{
	if (up == NULL)
		return;
	dns_upstream_chan_clear(&up->udp);
	dns_upstream_chan_clear(&up->tcp);
	free(up);
}

struct dns_upstream *
dns_upstream_create(
    struct dns_upstreams *u, const struct dns_upstream_addr *a, struct err *e)
{
	struct dns_upstream *up = calloc(1, sizeof(*up));

	if (up == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	up->set = u;
	up->addr = *a;
	up->healthy = true; /* innocent until a query fails */
	if (dns_upstream_chan_init(&up->udp, up, false, e) < 0 ||
	    dns_upstream_chan_init(&up->tcp, up, true, e) < 0) {
		err_prefix(e, "upstream %s", a->text);
		dns_upstream_destroy(up);
		return NULL;
	}
	return up;
}
