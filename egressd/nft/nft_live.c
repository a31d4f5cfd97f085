/*
 * nft_live: what needs real traffic or conntrack. nft_renew_live() reads
 * the conntrack table over ctnetlink (libmnl, no libnetfilter_conntrack)
 * and refreshes learned addresses that live flows still use;
 * nft_selfcheck() proves the DNS redirect and the mark exemption with
 * real datagrams on loopback (no route needed, nothing leaves).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>

#include "egressd/base/sock.h"
#include "util/addr.h"
#include "util/now.h"
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_sock.h"
#include "egressd/nft/nft_learn.h"
#include "egressd/nft/nft_core.h"
#include "egressd/nft/nft_ctmsg.h"
#include "egressd/nft/nft_ctdump.h"
#include "egressd/nft/nft_ct.h"
#include "egressd/nft/nft_bounds.h"

struct ct_dump {
	struct nft *n;
	const struct nft_locals *lc;
	uint32_t mark;
	uint64_t window_ms;
	struct nft_learn_addr *out;
	size_t nout;
	size_t seen;
	uint32_t ttl;
	bool sliced; /* read on the loop: past the cap, skip, never stop */
};

static void
ct_consider(struct ct_dump *d, int family, const uint8_t *addr)
{
	const char *name;
	size_t i;
	unsigned w = family == 4 ? 4 : 16;

	if (d->nout == NFT_RENEW_MAX)
		return;
	if (!nft_expiring_(d->n, family, addr, d->window_ms, &name))
		return;
	for (i = 0; i < d->nout; i++)
		if (d->out[i].family == family &&
		    memcmp(d->out[i].addr, addr, w) == 0)
			return;
	memset(&d->out[d->nout], 0, sizeof(d->out[0]));
	d->out[d->nout].family = (uint8_t)family;
	memcpy(d->out[d->nout].addr, addr, w);
	d->out[d->nout].ttl = d->ttl;
	d->out[d->nout].name = name;
	d->nout++;
}

/*
 * Only a flow that really goes to the address renews it: not one
 * redirected to egressd (a datagram to X:53 reaches the resolver, never
 * X), not egressd's own, not an inbound one (nft_ctmsg_outbound()), and
 * not a TCP connection that is over (TIME_WAIT, CLOSE: conntrack keeps
 * those for minutes, and they kept a closed connection's address learned
 * as long).
 */
static int
ct_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct ct_dump *d = arg;
	struct nft_ct_flow f;

	if (++d->seen > NFT_CT_MAX_FLOWS)
		return d->sliced ? MNL_CB_OK : MNL_CB_STOP;
	if (nft_ctmsg_outbound(nlh, d->mark, d->lc, true, &f) && !f.over)
		ct_consider(d, f.family, f.dst);
	return MNL_CB_OK;
}

int
nft_renew_live(struct nft *n, uint32_t window_s, size_t *renewed, struct err *e)
{
	struct ct_dump d = {.n = n,
	    .mark = nft_mark_(n),
	    .window_ms = (uint64_t)window_s * 1000};
	struct nft_locals *lc = NULL;
	struct mnl_socket *nl;
	uint32_t seq, portid;
	uint8_t *buf;
	int rc = -1;

	if (renewed != NULL)
		*renewed = 0;
	if (nft_learned_count(n) == 0)
		return 0;
	/* Long enough to outlive the next timer tick twice over. */
	d.ttl = nft_ttl_clamp_(n, window_s * 2);
	d.out = calloc(NFT_RENEW_MAX, sizeof(*d.out));
	buf = malloc(NFT_RECV_BUF);
	if (d.out == NULL || buf == NULL) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	if ((lc = nft_ctmsg_locals_load(e)) == NULL) {
		err_prefix(e, "nothing renewed");
		goto out;
	}
	d.lc = lc;
	nl = nft_sock_(n, &seq, &portid);
	if (nft_ctdump_wait(nl, seq, portid, buf, ct_cb, &d, &d.seen, e) == -1)
		goto out;
	if (d.nout != 0 && nft_refresh_(n, d.out, d.nout, e) < 0)
		goto out;
	if (renewed != NULL)
		*renewed = d.nout;
	rc = 0;
out:
	nft_ctmsg_locals_free(lc);
	free(d.out);
	free(buf);
	return rc;
}

/*
 * A renewed lease lasts ttl_max from the renewal, and the next renewal
 * comes an interval later plus a dump's time: half the lease leaves that
 * margin. The floor is 500 ms, not 1 s: with 1 s leases a 1 s tick
 * renewed each address just as its lease ran out, and a connection
 * opened in between was refused.
 */
uint32_t
nft_renew_interval_ms(uint32_t ttl_max_s)
{
	uint64_t ms = (uint64_t)ttl_max_s * 1000 / 2;

	if (ms < NFT_RENEW_MS_MIN)
		return NFT_RENEW_MS_MIN;
	if (ms > NFT_RENEW_MS_MAX)
		return NFT_RENEW_MS_MAX;
	return (uint32_t)ms;
}

/* ---- asynchronous renew: the dump read in slices on the loop ---- */

struct nft_renew {
	struct nft *n;
	struct nft_ctd *ctd;
	struct ct_dump d;
	struct nft_locals *lc;
	bool busy;
	nft_renew_done_fn done;
	void *arg;
};

/* The dump ended: rc 0 refreshes what it found. */
static void
renew_end(void *arg, int rc, const char *why)
{
	struct nft_renew *r = arg;
	struct err e = {""};
	size_t renewed = 0;

	if (rc == 0 && r->d.nout != 0) {
		/* The names the dump saw may have gone meanwhile:
		 * nft_refresh_ re-reads every entry from the mirror. */
		if (nft_refresh_(r->n, r->d.out, r->d.nout, &e) < 0) {
			rc = -1;
			why = e.msg;
		} else
			renewed = r->d.nout;
	}
	nft_ctmsg_locals_free(r->lc);
	r->lc = NULL;
	r->busy = false;
	if (r->done != NULL)
		r->done(r->arg, rc, renewed, rc == 0 ? NULL : why);
}

struct nft_renew *
nft_renew_new(struct nft *n, struct event_base *base, struct err *e)
{
	struct nft_renew *r = calloc(1, sizeof(*r));

	if (r == NULL) {
		err_set(e, "nft: out of memory");
		return NULL;
	}
	r->n = n;
	r->ctd = nft_ctdump_new(base, NFT_RENEW_MAX, sizeof(*r->d.out), e);
	if (r->ctd == NULL) {
		nft_renew_free(r);
		return NULL;
	}
	return r;
}

void
nft_renew_free(struct nft_renew *r)
{
	if (r == NULL)
		return;
	nft_ctdump_free(r->ctd);
	nft_ctmsg_locals_free(r->lc);
	free(r);
}

bool
nft_renew_busy(const struct nft_renew *r)
{
	return r->busy;
}

int
nft_renew_start(struct nft_renew *r, uint32_t window_s, nft_renew_done_fn done,
    void *arg, struct err *e)
{
	if (r->busy) {
		err_set(e, "nft: conntrack dump already under way");
		return -1;
	}
	if (nft_learned_count(r->n) == 0) {
		if (done != NULL)
			done(arg, 0, 0, NULL);
		return 0;
	}
	if ((r->lc = nft_ctmsg_locals_load(e)) == NULL) {
		err_prefix(e, "nothing renewed");
		return -1;
	}
	memset(&r->d, 0, sizeof(r->d));
	r->d.n = r->n;
	r->d.lc = r->lc;
	r->d.mark = nft_mark_(r->n);
	r->d.window_ms = (uint64_t)window_s * 1000;
	r->d.ttl = nft_ttl_clamp_(r->n, window_s * 2);
	r->d.out = nft_ctdump_results(r->ctd);
	r->d.sliced = true;
	if (nft_ctdump_dump(r->ctd, ct_cb, &r->d, renew_end, r, e) < 0) {
		nft_ctmsg_locals_free(r->lc);
		r->lc = NULL;
		return -1;
	}
	r->busy = true;
	r->done = done;
	r->arg = arg;
	return 0;
}

/* ---- self-check ---- */

/* A socket one wait watches; the resolver's hand on what is not ours. */
struct sc_fd {
	int fd;
	int family;
	bool resolver;
};

struct sc {
	struct nft *n;
	const struct nft_selfcheck_io *io; /* NULL: foreign datagrams dropped */
	uint8_t *buf; /* NFT_SELFCHECK_BUF bytes */
	uint32_t mark;
	uint16_t port;
	bool mark_proven; /* by one family: the mark rule is family-blind */
};

static int64_t
sc_now_ms(void)
{
	return (int64_t)now_mono_ms();
}

/*
 * Until timeout_ms: the index in w of the socket on which a datagram equal
 * to want arrived, or -1. Every other datagram on a resolver socket is a
 * query of the sandbox, redirected like the probe: it is handed over in
 * arrival order (the probe queues behind it, so a burst delays the check
 * but cannot fail it); on the check's own sockets it is dropped.
 */
static int
sc_await(const struct sc *c, const struct sc_fd *w, size_t nw,
    const uint8_t *want, size_t len, int timeout_ms)
{
	struct pollfd pfd[2];
	int64_t end = sc_now_ms() + timeout_ms, left;
	size_t i;
	int r;

	for (i = 0; i < nw && i < 2; i++) {
		pfd[i].fd = w[i].fd;
		pfd[i].events = POLLIN;
	}
	while ((left = end - sc_now_ms()) > 0) {
		r = poll(pfd, (nfds_t)i, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		for (i = 0; i < nw && i < 2; i++) {
			struct sockaddr_storage peer;
			socklen_t pl;
			ssize_t n;

			if (pfd[i].revents == 0)
				continue;
			for (;;) {
				pl = sizeof(peer);
				n = recvfrom(pfd[i].fd, c->buf,
				    NFT_SELFCHECK_BUF, MSG_DONTWAIT | MSG_TRUNC,
				    (struct sockaddr *)&peer, &pl);
				if (n < 0)
					break; /* EAGAIN: back to poll */
				if ((size_t)n == len &&
				    memcmp(c->buf, want, len) == 0)
					return (int)i;
				if (w[i].resolver && c->io != NULL &&
				    c->io->foreign != NULL &&
				    (size_t)n <= NFT_SELFCHECK_BUF)
					c->io->foreign(c->io->arg, w[i].family,
					    c->buf, (size_t)n,
					    (struct sockaddr *)&peer, pl);
			}
		}
	}
	return -1;
}

/* addr is 4 or 16 bytes by family. */
static socklen_t
sc_sockaddr(
    struct sockaddr_storage *ss, int family, const uint8_t *addr, uint16_t port)
{
	struct addr a = {.family = family};

	memcpy(a.a, addr, family == AF_INET ? 4 : 16);
	return addr_to_sockaddr(&a, port, ss);
}

static const uint8_t sc_lo4[4] = {127, 0, 0, 1};
static const uint8_t sc_lo6[16] = {[15] = 1};

static const char *
sc_text(int family, const uint8_t *addr, char *buf, size_t len)
{
	if (inet_ntop(family, addr, buf, (socklen_t)len) == NULL)
		(void)snprintf(buf, len, "?");
	return buf;
}

/*
 * Sends one datagram to dst:port from a fresh socket bound to the
 * family's loopback address, marked when mark != 0. The tuple's conntrack
 * entry is deleted first: a killed egressd's marked probes leave
 * un-redirected entries (30 s) behind, and a new probe whose ephemeral
 * port is one of theirs would follow the stale entry instead of the
 * ruleset under test.
 */
static int
probe_send(struct sc *c, int family, uint32_t mark, const uint8_t *dst,
    uint16_t port, const uint8_t *msg, size_t len, struct err *e)
{
	const uint8_t *lo = family == AF_INET ? sc_lo4 : sc_lo6;
	struct sockaddr_storage ss;
	socklen_t sl = sc_sockaddr(&ss, family, lo, 0);
	struct nft_ct_flow f;
	uint16_t sport;
	char text[INET6_ADDRSTRLEN];
	int fd, rc = -1;

	if ((fd = sock_open_marked(family, SOCK_DGRAM, mark, e)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		err_set(e, "bind %s: %s",
		    sc_text(family, lo, text, sizeof(text)), strerror(errno));
		goto out;
	}
	sport =
	    ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
	                            : ((struct sockaddr_in6 *)&ss)->sin6_port);
	memset(&f, 0, sizeof(f));
	f.family = family == AF_INET ? 4 : 6;
	f.proto = IPPROTO_UDP;
	memcpy(f.src, lo, family == AF_INET ? 4 : 16);
	memcpy(f.dst, dst, family == AF_INET ? 4 : 16);
	f.sport = sport;
	f.dport = port;
	if (nft_ct_forget(c->n, &f, e) < 0)
		goto out;
	sl = sc_sockaddr(&ss, family, dst, port);
	if (sendto(fd, msg, len, 0, (struct sockaddr *)&ss, sl) !=
	    (ssize_t)len) {
		err_set(e, "sendto %s port %u%s: %s",
		    sc_text(family, dst, text, sizeof(text)), port,
		    mark ? " (marked)" : "", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* A UDP socket bound to addr:port of family; -1 with errno. */
static int
sc_bind(int family, const uint8_t *addr, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sc_sockaddr(&ss, family, addr, port);
	struct err e;
	int fd, saved;

	if ((fd = sock_open_local(family, SOCK_DGRAM, &e)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/*
 * Where a marked probe can land and be seen: port 53 of a random 127/8
 * address (IPv4; every one is local on lo), or of ::1. -1 when taken (a
 * DNS server of the pod on the wildcard address, say).
 */
static int
sc_sink(int family, uint8_t *addr)
{
	uint8_t r[3];
	int i, fd;

	if (family == AF_INET6) {
		memcpy(addr, sc_lo6, 16);
		return sc_bind(AF_INET6, addr, 53);
	}
	for (i = 0; i < NFT_SELFCHECK_SINK_TRIES; i++) {
		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -1;
		addr[0] = 127;
		addr[1] = (uint8_t)(1 + r[0] % 254); /* never 127.0.0.1 */
		addr[2] = r[1];
		addr[3] = (uint8_t)(1 + r[2] % 254);
		if ((fd = sc_bind(AF_INET, addr, 53)) >= 0)
			return fd;
	}
	return -1;
}

/*
 * One family: 1. an unmarked datagram to loopback port 53 arrives on the
 * resolver's socket rfd (the redirect); 2. a marked one to a sink's port
 * 53 arrives there (the exemption). Both are positive proofs, so a working
 * ruleset is confirmed as fast as loopback delivers.
 */
static int
sc_family(
    struct sc *c, int family, int rfd, uint8_t *msg, size_t len, struct err *e)
{
	const char *fam = family == AF_INET ? "IPv4" : "IPv6";
	const uint8_t *lo = family == AF_INET ? sc_lo4 : sc_lo6;
	struct sc_fd w[2] = {{rfd, family, true}, {-1, family, false}};
	char text[INET6_ADDRSTRLEN], lotext[INET6_ADDRSTRLEN];
	uint8_t sink_addr[16];
	int got, rc = -1;

	(void)sc_text(family, lo, lotext, sizeof(lotext));
	msg[12] = family == AF_INET ? '4' : '6';
	if (probe_send(c, family, 0, lo, 53, msg, len, e) < 0) {
		err_prefix(e, "%s DNS redirect", fam);
		return -1;
	}
	if (sc_await(c, w, 1, msg, len, NFT_SELFCHECK_TIMEOUT_MS) != 0) {
		err_set(e,
		    "a datagram to %s port 53 did not arrive "
		    "on the resolver's port %u: %s DNS redirect not working",
		    lotext, c->port, fam);
		return -1;
	}

	msg[12] = family == AF_INET ? 'M' : 'N';
	w[1].fd = sc_sink(family, sink_addr);
	if (w[1].fd < 0) {
		/* No sink: one family's proof covers both; else prove the
		 * absence the slow way (the only wait in the check). */
		if (c->mark_proven)
			return 0;
		if (probe_send(c, family, c->mark, lo, 53, msg, len, e) < 0)
			return -1;
		if (sc_await(c, w, 1, msg, len, NFT_SELFCHECK_TIMEOUT_MS / 2) ==
		    0) {
			err_set(e,
			    "a datagram with mark 0x%x was "
			    "redirected: mark exemption not working",
			    c->mark);
			return -1;
		}
		c->mark_proven = true;
		return 0;
	}
	if (probe_send(c, family, c->mark, sink_addr, 53, msg, len, e) < 0)
		goto out;
	got = sc_await(c, w, 2, msg, len, NFT_SELFCHECK_TIMEOUT_MS);
	if (got == 0) {
		err_set(e,
		    "a datagram with mark 0x%x was "
		    "redirected: mark exemption not working",
		    c->mark);
		goto out;
	}
	if (got != 1) {
		err_set(e,
		    "a datagram with mark 0x%x to %s port 53 "
		    "was not delivered: own-traffic exemption not working",
		    c->mark, sc_text(family, sink_addr, text, sizeof(text)));
		goto out;
	}
	c->mark_proven = true;
	rc = 0;
out:
	close(w[1].fd);
	return rc;
}

int
nft_selfcheck(struct nft *n, const struct nft_selfcheck_io *io, struct err *e)
{
	/* A DNS query header with a random id and "selfcheck" marker. */
	uint8_t msg[32] = {0, 0, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 'e', 'g',
	    'r', 'e', 's', 's', 'd', '-', 's', 'e', 'l', 'f', 'c', 'h', 'k'};
	struct sc c;
	bool own = io == NULL || (io->fd4 < 0 && io->fd6 < 0);
	int fd4 = own ? -1 : io->fd4, fd6 = own ? -1 : io->fd6, rc = -1;

	memset(&c, 0, sizeof(c));
	c.io = own ? NULL : io;
	c.n = n;
	c.mark = nft_mark_(n);
	c.port = nft_dns_port_(n);
	if (getrandom(msg, 2, 0) != 2 || getrandom(msg + 28, 4, 0) != 4) {
		err_set(e, "getrandom: %s", strerror(errno));
		return -1;
	}
	if ((c.buf = malloc(NFT_SELFCHECK_BUF)) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	if (own) {
		if ((fd4 = sc_bind(AF_INET, sc_lo4, c.port)) < 0) {
			err_set(e, "bind 127.0.0.1:%u: %s", c.port,
			    strerror(errno));
			goto out;
		}
		/* Without ::1 nothing can be redirected over IPv6 anyway. */
		if ((fd6 = sc_bind(AF_INET6, sc_lo6, c.port)) < 0 &&
		    errno != EADDRNOTAVAIL && errno != EAFNOSUPPORT) {
			err_set(
			    e, "bind [::1]:%u: %s", c.port, strerror(errno));
			goto out;
		}
	}
	if (fd4 >= 0 && sc_family(&c, AF_INET, fd4, msg, sizeof(msg), e) < 0)
		goto out;
	if (fd6 >= 0 && sc_family(&c, AF_INET6, fd6, msg, sizeof(msg), e) < 0)
		goto out;
	rc = 0;
out:
	if (own && fd4 >= 0)
		close(fd4);
	if (own && fd6 >= 0)
		close(fd6);
	free(c.buf);
	return rc;
}
