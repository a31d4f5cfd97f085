/*
 * dns_upstream: upstream list parsing, c-ares channels in libevent,
 * failover within a budget, passive and active health.
 */
#include "egressd/dns/dns_upstream.h"
#include "egressd/base/sock.h"
#include "util/addr.h"
#include "util/fileread.h"
#include "util/now.h"

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

#define DNS_UPSTREAM_MAGIC 0x44555053u /* "DUPS" set */
#define DNS_UPSTREAM_CHAN_MAGIC 0x4455434eu /* "DUCN" channel */
#define DNS_UPSTREAM_REQ_MAGIC 0x44555251u /* "DURQ" request */
#define DNS_UPSTREAM_ATT_MAGIC 0x44554154u /* "DUAT" attempt */
#define DNS_UPSTREAM_DEAD_MAGIC 0xdeadd0d0u

/* One fd c-ares asked us to watch. */
struct dns_upstream_fd {
	struct dns_upstream_fd *next;
	int fd;
	short what; /* EV_READ|EV_WRITE */
	struct event *ev;
};

struct dns_upstream;

struct dns_upstream_chan {
	uint32_t magic;
	struct dns_upstream *up;
	bool tcp;
	ares_channel ch;
	bool ch_ok;
	struct event *timer;
	struct dns_upstream_fd *fds;
};

struct dns_upstream {
	struct dns_upstreams *set;
	struct dns_upstream_addr addr;
	struct dns_upstream_chan udp, tcp;
	bool healthy;
	bool probing;
	unsigned consecutive_failures;
	uint64_t queries, failures;
	uint64_t last_ok_ms, last_fail_ms;
	unsigned last_rtt_ms;
	/* Smoothed round trip and its variation (RFC 6298 style), ms. */
	bool have_rtt;
	unsigned srtt_ms, rttvar_ms;
};

struct dns_upstream_attempt {
	uint32_t magic;
	struct dns_upstream *up;
	struct dns_upstream_req *req; /* NULL: probe, or orphaned */
	bool probe;
	bool tcp; /* on the upstream's TCP channel (TCP query or TC retry) */
	bool counted; /* our timer already counted it as failed */
	bool hedged; /* our timer fires before the attempt timeout */
	uint64_t start_ms;
};

/* Attempts one request may have outstanding (current + stragglers). */
#define DNS_UPSTREAM_ATTEMPTS_MAX (DNS_UPSTREAMS_MAX * DNS_UPSTREAM_ROUNDS_MAX)

struct dns_upstream_req {
	uint32_t magic;
	struct dns_upstreams *set;
	LIST_ENTRY(dns_upstream_req) entry; /* set->reqs */
	uint8_t *query;
	size_t qlen;
	bool tcp;
	bool in_send; /* inside ares_send: failures are deferred */
	unsigned attempt_ms;
	uint64_t deadline_ms;
	size_t order[DNS_UPSTREAMS_MAX];
	size_t norder;
	size_t tried; /* attempts started */
	bool send_failed; /* an ares_send under in_send failed at once */
	struct dns_upstream_attempt *cur; /* the attempt the timer guards */
	/*
	 * Every attempt still in c-ares, cur included: one that timed out
	 * by our clock stays here as a straggler, and its late answer still
	 * wins while the request is pending.
	 */
	struct dns_upstream_attempt *atts[DNS_UPSTREAM_ATTEMPTS_MAX];
	size_t natts;
	struct event *timer;
	dns_upstream_done_fn done;
	void *arg;
};

struct dns_upstreams {
	uint32_t magic;
	struct event_base *base;
	struct log *lg;
	struct stats *st;
	struct dns_upstreams_opts o;
	char *probe_name;
	struct dns_upstream *ups[DNS_UPSTREAMS_MAX];
	size_t n;
	LIST_HEAD(, dns_upstream_req) reqs;
	size_t npending;
	struct event *probe_timer;
	bool lib_init;
};

/* ---- parsing (pure) ---- */

int
dns_upstream_parse(const char *s, struct dns_upstream_addr *out, struct err *e)
{
	struct addr a;

	if (s == NULL || *s == '\0') {
		err_set(e, "empty upstream");
		return -1;
	}
	if (strlen(s) >= DNS_UPSTREAM_TEXT_MAX) {
		err_set(e, "upstream too long");
		return -1;
	}
	memset(out, 0, sizeof(*out));
	if (addr_parse_hostport(s, EGRESSD_DEFAULT_DNS_UPSTREAM_PORT, 0, &a,
	        &out->port, e) == -1)
		return -1;
	out->family = a.family;
	memcpy(out->addr, a.a, sizeof(out->addr));
	addr_format_port(&a, out->port, out->text, sizeof(out->text));
	return 0;
}

int
dns_upstream_parse_list(const char *const *v, size_t n,
    struct dns_upstream_addr *out, size_t max, size_t *nout, struct err *e)
{
	size_t i;

	*nout = 0;
	if (n > max) {
		err_set(e, "too many upstreams (%zu, max %zu)", n, max);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (dns_upstream_parse(v[i], &out[i], e) < 0)
			return -1;
	*nout = n;
	return 0;
}

int
dns_upstream_parse_resolv_conf(const char *buf, size_t len,
    struct dns_upstream_addr *out, size_t max, size_t *nout, struct err *e)
{
	size_t off = 0;
	bool have_err = false;
	struct err first;

	*nout = 0;
	err_clear(&first);
	while (off < len) {
		const char *line = buf + off;
		const char *nl = memchr(line, '\n', len - off);
		size_t ll = nl != NULL ? (size_t)(nl - line) : len - off;
		char tmp[DNS_UPSTREAM_TEXT_MAX + 16];
		char *p, *word;
		struct err le;

		off += ll + (nl != NULL ? 1 : 0);
		if (ll >= sizeof(tmp))
			continue; /* no valid nameserver line is that long */
		memcpy(tmp, line, ll);
		tmp[ll] = '\0';
		p = tmp;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "nameserver", 10) != 0 ||
		    (p[10] != ' ' && p[10] != '\t'))
			continue;
		p += 10;
		while (*p == ' ' || *p == '\t')
			p++;
		word = p;
		while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\r' &&
		    *p != '#' && *p != ';')
			p++;
		*p = '\0';
		if (*nout >= max)
			break;
		if (dns_upstream_parse(word, &out[*nout], &le) < 0) {
			if (!have_err) {
				first = le;
				have_err = true;
			}
			continue;
		}
		/* resolv.conf never carries a port: "ip:port" is not glibc's. */
		if (out[*nout].port != EGRESSD_DEFAULT_DNS_UPSTREAM_PORT) {
			if (!have_err) {
				err_set(&first, "%s: ports are not valid here",
				    word);
				have_err = true;
			}
			continue;
		}
		(*nout)++;
	}
	if (*nout == 0) {
		if (have_err)
			err_set(e, "no usable nameserver: %s", first.msg);
		else
			err_set(e, "no nameserver lines");
		return -1;
	}
	return 0;
}

int
dns_upstream_from_resolv_conf(const char *path, struct dns_upstream_addr *out,
    size_t max, size_t *nout, struct err *e)
{
	char *buf;
	size_t got;
	int rc;

	*nout = 0;
	if (fileread_all(path, DNS_RESOLV_CONF_MAX, 0, &buf, &got, e) == -1) {
		err_prefix(e, "%s", path);
		return -1;
	}
	rc = dns_upstream_parse_resolv_conf(buf, got, out, max, nout, e);
	if (rc < 0)
		err_prefix(e, "%s", path);
	free(buf);
	return rc;
}

bool
dns_upstream_addr_is_loopback(const struct dns_upstream_addr *a)
{
	static const uint8_t v6lo[16] = {[15] = 1};

	if (a->family == AF_INET)
		return a->addr[0] == 127;
	return memcmp(a->addr, v6lo, 16) == 0;
}

int
dns_upstream_query_build(const uint8_t *name_wire, size_t name_len,
    uint16_t qtype, uint16_t qclass, bool cd, bool dnssec_ok, uint8_t *out,
    size_t cap, size_t *outlen)
{
	size_t need = 12 + name_len + 4 + 11;
	uint16_t flags = 0x0100; /* RD */
	uint8_t *p = out;

	if (name_len == 0 || name_len > 255 || cap < need)
		return -1;
	if (cd)
		flags |= 0x0010;
	memset(p, 0, 12);
	p[2] = (uint8_t)(flags >> 8);
	p[3] = (uint8_t)flags;
	p[5] = 1; /* QDCOUNT */
	p[11] = 1; /* ARCOUNT: the OPT */
	p += 12;
	memcpy(p, name_wire, name_len);
	p += name_len;
	*p++ = (uint8_t)(qtype >> 8);
	*p++ = (uint8_t)qtype;
	*p++ = (uint8_t)(qclass >> 8);
	*p++ = (uint8_t)qclass;
	/* OPT: root owner, type 41, class = udp size, ttl = ext/ver/flags. */
	*p++ = 0;
	*p++ = 0;
	*p++ = 41;
	*p++ = (uint8_t)(DNS_UPSTREAM_EDNS_SIZE >> 8);
	*p++ = (uint8_t)(DNS_UPSTREAM_EDNS_SIZE & 0xff);
	*p++ = 0;
	*p++ = 0;
	*p++ = dnssec_ok ? 0x80 : 0;
	*p++ = 0;
	*p++ = 0;
	*p++ = 0;
	*outlen = need;
	return 0;
}

/* Presentation name -> wire (probe names only; plain LDH labels). */
static int
dns_upstream_name_wire(const char *s, uint8_t *out, size_t cap, size_t *len)
{
	size_t o = 0;

	while (*s != '\0') {
		const char *dot = strchr(s, '.');
		size_t n = dot != NULL ? (size_t)(dot - s) : strlen(s);

		if (n == 0 || n > 63 || o + 1 + n + 1 > cap)
			return -1;
		out[o++] = (uint8_t)n;
		memcpy(out + o, s, n);
		o += n;
		s += n;
		if (*s == '.')
			s++;
	}
	if (o + 1 > cap)
		return -1;
	out[o++] = 0;
	*len = o;
	return 0;
}

/* ---- clock, health, stats ---- */

static uint64_t
dns_upstream_now(const struct dns_upstreams *u)
{
	return u->o.clock(u->o.clock_arg);
}

static const char *
dns_upstream_status_reason(int status)
{
	switch (status) {
	case ARES_ETIMEOUT:
		return "timeout";
	case ARES_ECONNREFUSED:
		return "refused";
	case ARES_ESERVFAIL:
		return "servfail";
	case ARES_EREFUSED:
		return "rcode_refused";
	case ARES_ENOTIMP:
		return "notimp";
	case ARES_EBADRESP:
		return "bad_response";
	case ARES_ECANCELLED:
		return "cancelled";
	case ARES_EDESTRUCTION:
		return "destroyed";
	default:
		return "error";
	}
}

static void
dns_upstream_mark(
    struct dns_upstream *up, bool ok, unsigned rtt_ms, const char *reason)
{
	struct dns_upstreams *u = up->set;
	uint64_t now = dns_upstream_now(u);

	up->queries++;
	if (ok) {
		up->last_ok_ms = now;
		up->last_rtt_ms = rtt_ms;
		up->consecutive_failures = 0;
		if (!up->have_rtt) {
			up->have_rtt = true;
			up->srtt_ms = rtt_ms;
			up->rttvar_ms = rtt_ms / 2;
		} else {
			unsigned d = rtt_ms > up->srtt_ms
			    ? rtt_ms - up->srtt_ms
			    : up->srtt_ms - rtt_ms;

			up->rttvar_ms = (3 * up->rttvar_ms + d) / 4;
			up->srtt_ms = (7 * up->srtt_ms + rtt_ms) / 8;
		}
		if (!up->healthy) {
			up->healthy = true;
			log_info(u->lg, "dns.upstream.up",
			    LOG_S("upstream", up->addr.text),
			    LOG_U("rtt_ms", rtt_ms));
		}
		return;
	}
	up->failures++;
	up->last_fail_ms = now;
	if (u->st != NULL)
		u->st->dns_upstream_failures++;
	if (up->consecutive_failures < 1000000u)
		up->consecutive_failures++;
	if (up->healthy &&
	    up->consecutive_failures >= DNS_UPSTREAM_FAILS_UNHEALTHY) {
		up->healthy = false;
		log_warn(u->lg, "dns.upstream.down",
		    LOG_S("upstream", up->addr.text), LOG_S("reason", reason),
		    LOG_U("failures", up->consecutive_failures));
	}
}

static void
dns_upstream_stats_latency(struct stats *st, unsigned ms)
{
	static const unsigned bounds[STATS_LAT_BUCKETS] = STATS_LAT_BOUNDS_MS;
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < STATS_LAT_BUCKETS; i++)
		if (ms <= bounds[i])
			break;
	st->dns_upstream_lat_bucket[i]++;
	st->dns_upstream_lat_count++;
	st->dns_upstream_lat_sum_s += (double)ms / 1000.0;
}

/* ---- c-ares <-> libevent ---- */

static void
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
static void
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

static void
dns_upstream_destroy(struct dns_upstream *up)
{
	if (up == NULL)
		return;
	dns_upstream_chan_clear(&up->udp);
	dns_upstream_chan_clear(&up->tcp);
	free(up);
}

static struct dns_upstream *
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

/* ---- requests ---- */

static void dns_upstream_req_next(struct dns_upstream_req *r);
static void dns_upstream_attempt_cb(
    void *arg, int status, int timeouts, unsigned char *abuf, int alen);

static void
dns_upstream_req_unlink(struct dns_upstream_req *r)
{
	LIST_REMOVE(r, entry);
	r->set->npending--;
}

/* Forgets a from r's outstanding attempts. */
static void
dns_upstream_req_drop_att(
    struct dns_upstream_req *r, struct dns_upstream_attempt *a)
{
	size_t i;

	for (i = 0; i < r->natts; i++)
		if (r->atts[i] == a) {
			r->atts[i] = r->atts[--r->natts];
			break;
		}
	if (r->cur == a)
		r->cur = NULL;
}

/* Orphans every outstanding attempt: c-ares still owns and frees them. */
static void
dns_upstream_req_orphan_all(struct dns_upstream_req *r)
{
	size_t i;

	for (i = 0; i < r->natts; i++)
		r->atts[i]->req = NULL;
	r->natts = 0;
	r->cur = NULL;
}

static void
dns_upstream_req_free(struct dns_upstream_req *r)
{
	dns_upstream_req_orphan_all(r);
	if (r->timer != NULL)
		event_free(r->timer);
	free(r->query);
	r->magic = DNS_UPSTREAM_DEAD_MAGIC;
	free(r);
}

static void
dns_upstream_req_finish(struct dns_upstream_req *r, const uint8_t *ans,
    size_t len, const char *upstream)
{
	dns_upstream_done_fn done = r->done;
	void *arg = r->arg;

	dns_upstream_req_unlink(r);
	dns_upstream_req_free(r);
	if (done != NULL)
		done(arg, ans, len, upstream);
}

/* Healthy upstreams first, each group in configured order. */
static void
dns_upstream_req_order(struct dns_upstream_req *r)
{
	struct dns_upstreams *u = r->set;
	size_t i;

	r->norder = 0;
	for (i = 0; i < u->n; i++)
		if (u->ups[i]->healthy)
			r->order[r->norder++] = i;
	for (i = 0; i < u->n; i++)
		if (!u->ups[i]->healthy)
			r->order[r->norder++] = i;
	r->tried = 0;
}

/*
 * How long the request waits on the attempt it is starting (try index t,
 * upstream up) before it starts the next one. While another upstream
 * still waits for its first try, that is a hedge: the upstream's RTO
 * (srtt + 4 rttvar, DNS_UPSTREAM_RTO_MIN_MS at least; DNS_UPSTREAM_RTO_
 * INIT_MS before the first answer), never more than the attempt timeout
 * and never more than an equal share of the budget left for the
 * upstreams not tried yet, so one silent upstream can never spend the
 * budget of a lookup another one can answer. Once every upstream had its
 * try, further attempts are retransmissions: the attempt timeout, as a
 * plain stub resolver would wait.
 */
static unsigned
dns_upstream_attempt_wait(const struct dns_upstream_req *r,
    const struct dns_upstream *up, size_t t, uint64_t left, bool *hedged)
{
	uint64_t wait = r->attempt_ms;

	*hedged = false;
	if (t + 1 < r->norder) {
		uint64_t rto = DNS_UPSTREAM_RTO_INIT_MS;
		uint64_t share = left / (r->norder - t);

		if (up->have_rtt) {
			rto = (uint64_t)up->srtt_ms + 4u * up->rttvar_ms;
			if (rto < DNS_UPSTREAM_RTO_MIN_MS)
				rto = DNS_UPSTREAM_RTO_MIN_MS;
		}
		if (rto < wait)
			wait = rto;
		if (share < wait)
			wait = share;
		*hedged = wait < r->attempt_ms;
	}
	if (wait > left)
		wait = left;
	return (unsigned)wait;
}

/* Sends r's query on c for attempt a; false if it failed at once. */
static bool
dns_upstream_att_send(struct dns_upstream_req *r, struct dns_upstream_chan *c,
    struct dns_upstream_attempt *a)
{
	bool failed;

	r->in_send = true;
	r->send_failed = false;
	ares_send(c->ch, r->query, (int)r->qlen, dns_upstream_attempt_cb, a);
	r->in_send = false;
	failed = r->send_failed;
	r->send_failed = false;
	dns_upstream_chan_rearm(c);
	return !failed;
}

static void
dns_upstream_attempt_cb(
    void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct dns_upstream_attempt *a = arg;
	struct dns_upstream_req *r;
	struct dns_upstreams *u;
	unsigned rtt;
	bool ok, was_cur;

	(void)timeouts;
	if (a == NULL || a->magic != DNS_UPSTREAM_ATT_MAGIC)
		abort();
	r = a->req;
	a->magic = DNS_UPSTREAM_DEAD_MAGIC;
	if (status == ARES_EDESTRUCTION) {
		/* Channel torn down (reload or free): the request moves on. */
		if (r != NULL)
			dns_upstream_req_drop_att(r, a);
		if (a->probe)
			a->up->probing = false;
		free(a);
		return;
	}
	u = a->up->set;
	ok = status == ARES_SUCCESS && abuf != NULL && alen >= 12;
	rtt = (unsigned)(dns_upstream_now(u) - a->start_ms);
	if (ok && !a->tcp && (abuf[2] & 0x02) != 0 && r != NULL) {
		/*
		 * TC=1 over UDP: ask the same upstream again over TCP, as the
		 * same attempt (the request's timers keep running).
		 */
		if (u->st != NULL)
			u->st->dns_upstream_tc_retries++;
		a->magic = DNS_UPSTREAM_ATT_MAGIC;
		a->tcp = true;
		if (!dns_upstream_att_send(r, &a->up->tcp, a) &&
		    r->cur == NULL && !r->in_send)
			dns_upstream_req_next(r);
		return;
	}
	if (a->probe) {
		/*
		 * A probe asks "is anybody there": any answer but SERVFAIL
		 * (REFUSED for the root NS, say) proves the upstream alive.
		 */
		bool alive =
		    ok || status == ARES_EREFUSED || status == ARES_ENOTIMP;

		a->up->probing = false;
		dns_upstream_mark(
		    a->up, alive, rtt, dns_upstream_status_reason(status));
		free(a);
		return;
	}
	/*
	 * Health follows what the attempt itself came to, whether or not the
	 * request still waits for it: a hedged attempt answered late proves
	 * the upstream alive, one that ran into c-ares' timeout counts as a
	 * failure (unless our timer counted it already).
	 */
	if (ok || !a->counted)
		dns_upstream_mark(
		    a->up, ok, rtt, dns_upstream_status_reason(status));
	if (!ok)
		log_debug(u->lg, "dns.upstream.fail",
		    LOG_S("upstream", a->up->addr.text),
		    LOG_S("reason", dns_upstream_status_reason(status)),
		    LOG_B("pending", r != NULL));
	if (r == NULL) {
		/* Orphaned: the request finished, moved on or was cancelled. */
		free(a);
		return;
	}
	was_cur = a == r->cur;
	dns_upstream_req_drop_att(r, a);
	if (ok) {
		dns_upstream_stats_latency(u->st, rtt);
		dns_upstream_req_finish(
		    r, abuf, (size_t)alen, a->up->addr.text);
		free(a);
		return;
	}
	free(a);
	if (r->in_send) {
		/* Failed inside ares_send: the sender moves on. */
		r->send_failed = true;
		return;
	}
	if (!was_cur) {
		/* A straggler gave up; the current attempt may still be on. */
		if (r->cur == NULL && r->natts == 0 &&
		    r->tried >= r->norder * DNS_UPSTREAM_ROUNDS_MAX)
			dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	dns_upstream_req_next(r);
}

static void
dns_upstream_req_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_upstream_req *r = arg;

	(void)fd;
	(void)what;
	if (r->magic != DNS_UPSTREAM_REQ_MAGIC)
		abort();
	if (dns_upstream_now(r->set) >= r->deadline_ms) {
		dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	if (r->cur != NULL) {
		/*
		 * The attempt outlived its wait: it stays as a straggler (its
		 * answer may still come and wins while we are pending) and the
		 * next upstream is asked. Only a full attempt timeout counts
		 * against the upstream's health; a hedge leaves that to the
		 * attempt's own outcome.
		 */
		if (!r->cur->hedged) {
			r->cur->counted = true;
			dns_upstream_mark(r->cur->up, false, 0, "timeout");
		} else
			log_debug(r->set->lg, "dns.upstream.hedge",
			    LOG_S("upstream", r->cur->up->addr.text));
		r->cur = NULL;
	}
	dns_upstream_req_next(r);
}

static void
dns_upstream_req_next(struct dns_upstream_req *r)
{
	struct dns_upstreams *u = r->set;
	uint64_t now = dns_upstream_now(u);
	struct dns_upstream_attempt *a;
	struct dns_upstream *up;
	struct timeval tv;
	uint64_t left;
	unsigned wait;
	size_t t;
	bool hedged;

	if (now >= r->deadline_ms || r->norder == 0) {
		dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	if (r->tried >= r->norder * DNS_UPSTREAM_ROUNDS_MAX ||
	    r->natts >= DNS_UPSTREAM_ATTEMPTS_MAX) {
		/* Nothing left to try: wait for stragglers until the end. */
		if (r->natts == 0) {
			dns_upstream_req_finish(r, NULL, 0, NULL);
			return;
		}
		left = r->deadline_ms - now;
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (long)(left % 1000) * 1000;
		evtimer_add(r->timer, &tv);
		return;
	}
	t = r->tried++;
	up = u->ups[r->order[t % r->norder]];
	a = calloc(1, sizeof(*a));
	if (a == NULL) {
		dns_upstream_req_finish(r, NULL, 0, NULL);
		return;
	}
	left = r->deadline_ms - now;
	wait = dns_upstream_attempt_wait(r, up, t, left, &hedged);
	a->magic = DNS_UPSTREAM_ATT_MAGIC;
	a->up = up;
	a->req = r;
	a->tcp = r->tcp;
	a->hedged = hedged;
	a->start_ms = now;
	r->cur = a;
	r->atts[r->natts++] = a;
	if (!dns_upstream_att_send(r, r->tcp ? &up->tcp : &up->udp, a))
		wait = 0; /* failed at once (no socket): next one next turn */
	tv.tv_sec = wait / 1000;
	tv.tv_usec = (long)(wait % 1000) * 1000;
	evtimer_add(r->timer, &tv);
}

struct dns_upstream_req *
dns_upstream_send(struct dns_upstreams *u, const uint8_t *query, size_t qlen,
    bool tcp, unsigned attempt_ms, unsigned budget_ms,
    dns_upstream_done_fn done, void *arg)
{
	struct dns_upstream_req *r;
	struct timeval zero = {0, 0};

	if (u->n == 0 || qlen < 12 || qlen > DNS_UPSTREAM_QUERY_MAX)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->magic = DNS_UPSTREAM_REQ_MAGIC;
	r->set = u;
	r->query = malloc(qlen);
	r->timer = evtimer_new(u->base, dns_upstream_req_timer_cb, r);
	if (r->query == NULL || r->timer == NULL) {
		if (r->timer != NULL)
			event_free(r->timer);
		free(r->query);
		free(r);
		return NULL;
	}
	memcpy(r->query, query, qlen);
	r->qlen = qlen;
	r->tcp = tcp;
	r->attempt_ms = attempt_ms != 0 ? attempt_ms : u->o.attempt_timeout_ms;
	if (budget_ms == 0)
		budget_ms = DNS_UPSTREAM_BUDGET_MS_DEFAULT;
	r->deadline_ms = dns_upstream_now(u) + budget_ms;
	r->done = done;
	r->arg = arg;
	dns_upstream_req_order(r);
	LIST_INSERT_HEAD(&u->reqs, r, entry);
	u->npending++;
	/*
	 * The first attempt starts on the next loop turn, so done can never
	 * run inside this call whatever happens to the attempt.
	 */
	evtimer_add(r->timer, &zero);
	return r;
}

void
dns_upstream_cancel(struct dns_upstream_req *r)
{
	if (r == NULL)
		return;
	if (r->magic != DNS_UPSTREAM_REQ_MAGIC)
		abort();
	dns_upstream_req_unlink(r);
	dns_upstream_req_free(r);
}

/* ---- probes ---- */

void
dns_upstreams_probe_now(struct dns_upstreams *u)
{
	uint8_t name[256], q[DNS_UPSTREAM_QUERY_MAX];
	size_t nlen, qlen, i;

	if (dns_upstream_name_wire(u->probe_name != NULL ? u->probe_name : "",
	        name, sizeof(name), &nlen) < 0 ||
	    dns_upstream_query_build(name, nlen,
	        u->probe_name != NULL ? DNS_UPSTREAM_PROBE_QTYPE_NAME
	                              : DNS_UPSTREAM_PROBE_QTYPE_ROOT,
	        1, false, false, q, sizeof(q), &qlen) < 0)
		return;
	for (i = 0; i < u->n; i++) {
		struct dns_upstream *up = u->ups[i];
		struct dns_upstream_attempt *a;

		if (up->probing)
			continue;
		a = calloc(1, sizeof(*a));
		if (a == NULL)
			return;
		a->magic = DNS_UPSTREAM_ATT_MAGIC;
		a->up = up;
		a->probe = true;
		a->start_ms = dns_upstream_now(u);
		up->probing = true;
		ares_send(up->udp.ch, q, (int)qlen, dns_upstream_attempt_cb, a);
		dns_upstream_chan_rearm(&up->udp);
	}
}

static void
dns_upstream_probe_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_upstreams *u = arg;

	(void)fd;
	(void)what;
	if (u->magic != DNS_UPSTREAM_MAGIC)
		abort();
	dns_upstreams_probe_now(u);
}

/* ---- the set ---- */

static int
dns_upstreams_build(struct dns_upstreams *u,
    const struct dns_upstream_addr *addrs, size_t n, struct dns_upstream **out,
    struct err *e)
{
	size_t i;

	if (n > DNS_UPSTREAMS_MAX) {
		err_set(e, "too many upstreams (%zu, max %d)", n,
		    DNS_UPSTREAMS_MAX);
		return -1;
	}
	for (i = 0; i < n; i++) {
		out[i] = dns_upstream_create(u, &addrs[i], e);
		if (out[i] == NULL) {
			while (i-- > 0)
				dns_upstream_destroy(out[i]);
			return -1;
		}
	}
	return 0;
}

struct dns_upstreams *
dns_upstreams_new(struct event_base *base,
    const struct dns_upstream_addr *addrs, size_t n,
    const struct dns_upstreams_opts *o, struct log *lg, struct stats *st,
    struct err *e)
{
	struct dns_upstreams *u;
	int rc;

	u = calloc(1, sizeof(*u));
	if (u == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	u->magic = DNS_UPSTREAM_MAGIC;
	u->base = base;
	u->lg = lg;
	u->st = st;
	if (o != NULL)
		u->o = *o;
	if (u->o.attempt_timeout_ms == 0)
		u->o.attempt_timeout_ms = DNS_UPSTREAM_ATTEMPT_MS_DEFAULT;
	if (u->o.probe_interval_ms == 0)
		u->o.probe_interval_ms = DNS_UPSTREAM_PROBE_MS_DEFAULT;
	if (u->o.clock == NULL)
		u->o.clock = now_mono_ms_clock;
	u->o.probe_name = NULL;
	if (u->o.mark != 0)
		dns_upstream_check_ephemeral(lg);
	rc = ares_library_init(ARES_LIB_INIT_ALL);
	if (rc != ARES_SUCCESS) {
		err_set(e, "ares_library_init: %s", ares_strerror(rc));
		free(u);
		return NULL;
	}
	u->lib_init = true;
	if (o != NULL && o->probe_name != NULL && o->probe_name[0] != '\0') {
		uint8_t tmp[256];
		size_t tl;

		if (dns_upstream_name_wire(
		        o->probe_name, tmp, sizeof(tmp), &tl) < 0) {
			err_set(e, "bad probe name");
			goto out_free;
		}
		u->probe_name = strdup(o->probe_name);
		if (u->probe_name == NULL) {
			err_set(e, "out of memory");
			goto out_free;
		}
	}
	if (dns_upstreams_build(u, addrs, n, u->ups, e) < 0)
		goto out_free;
	u->n = n;
	{
		struct timeval tv;

		u->probe_timer =
		    event_new(base, -1, EV_PERSIST, dns_upstream_probe_cb, u);
		if (u->probe_timer == NULL) {
			err_set(e, "event_new failed");
			goto out_free;
		}
		tv.tv_sec = u->o.probe_interval_ms / 1000;
		tv.tv_usec = (long)(u->o.probe_interval_ms % 1000) * 1000;
		event_add(u->probe_timer, &tv);
	}
	return u;
out_free:
	dns_upstreams_free(u);
	return NULL;
}

void
dns_upstreams_free(struct dns_upstreams *u)
{
	size_t i;

	if (u == NULL)
		return;
	while (!LIST_EMPTY(&u->reqs)) {
		struct dns_upstream_req *r = LIST_FIRST(&u->reqs);

		r->done = NULL;
		dns_upstream_req_unlink(r);
		dns_upstream_req_free(r);
	}
	for (i = 0; i < u->n; i++)
		dns_upstream_destroy(u->ups[i]);
	u->n = 0;
	if (u->probe_timer != NULL)
		event_free(u->probe_timer);
	free(u->probe_name);
	if (u->lib_init)
		ares_library_cleanup();
	u->magic = DNS_UPSTREAM_DEAD_MAGIC;
	free(u);
}

int
dns_upstreams_replace(struct dns_upstreams *u,
    const struct dns_upstream_addr *addrs, size_t n, struct err *e)
{
	struct dns_upstream *fresh[DNS_UPSTREAMS_MAX], *old[DNS_UPSTREAMS_MAX];
	struct dns_upstream_req *r;
	size_t nold = u->n, i;

	if (dns_upstreams_build(u, addrs, n, fresh, e) < 0)
		return -1;
	memcpy(old, u->ups, sizeof(old));
	memset(u->ups, 0, sizeof(u->ups));
	memcpy(u->ups, fresh, n * sizeof(fresh[0]));
	u->n = n;
	/* Tearing down the old channels detaches their attempts. */
	for (i = 0; i < nold; i++)
		dns_upstream_destroy(old[i]);
	/* Every pending request restarts on the new list, next loop turn. */
	LIST_FOREACH(r, &u->reqs, entry)
	{
		struct timeval zero = {0, 0};

		dns_upstream_req_orphan_all(r);
		dns_upstream_req_order(r);
		evtimer_add(r->timer, &zero);
	}
	return 0;
}

size_t
dns_upstreams_count(const struct dns_upstreams *u)
{
	return u->n;
}

size_t
dns_upstreams_healthy(const struct dns_upstreams *u)
{
	size_t i, k = 0;

	for (i = 0; i < u->n; i++)
		if (u->ups[i]->healthy)
			k++;
	return k;
}

size_t
dns_upstreams_pending(const struct dns_upstreams *u)
{
	return u->npending;
}

size_t
dns_upstreams_status(
    const struct dns_upstreams *u, struct dns_upstream_status *out, size_t max)
{
	size_t i;

	for (i = 0; i < u->n && i < max; i++) {
		const struct dns_upstream *up = u->ups[i];

		memset(&out[i], 0, sizeof(out[i]));
		memcpy(out[i].text, up->addr.text, sizeof(out[i].text));
		out[i].healthy = up->healthy;
		out[i].consecutive_failures = up->consecutive_failures;
		out[i].queries = up->queries;
		out[i].failures = up->failures;
		out[i].last_ok_ms = up->last_ok_ms;
		out[i].last_fail_ms = up->last_fail_ms;
		out[i].last_rtt_ms = up->last_rtt_ms;
	}
	return i;
}
