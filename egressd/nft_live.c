/*
 * nft_live: what needs real traffic or conntrack. nft_renew_live() reads
 * the conntrack table over ctnetlink (libmnl, no libnetfilter_conntrack)
 * and refreshes learned addresses that live flows still use;
 * nft_selfcheck() proves the DNS redirect and the mark exemption with
 * real datagrams.
 */
#include <arpa/inet.h>
#include <errno.h>
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

#include "egressd/nft_int.h"

struct ct_dump {
	struct nft *n;
	const struct nft_locals *lc;
	uint32_t mark;
	uint64_t window_ms;
	struct nft_learn_addr *out;
	size_t nout;
	size_t seen;
	uint32_t ttl;
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
 * X), not egressd's own, not an inbound one (nft_ct_outbound_()).
 */
static int
ct_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct ct_dump *d = arg;
	struct nft_ct_flow f;

	if (++d->seen > NFT_CT_MAX_FLOWS)
		return MNL_CB_STOP;
	if (nft_ct_outbound_(nlh, d->mark, d->lc, true, &f))
		ct_consider(d, f.family, f.dst);
	return MNL_CB_OK;
}

int
nft_ct_dump_(struct nft *n, uint8_t *buf,
    int (*cb)(const struct nlmsghdr *, void *), void *arg, const size_t *seen,
    struct err *e)
{
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	struct nfgenmsg *g;
	char req[MNL_SOCKET_BUFFER_SIZE];
	uint32_t seq, portid;
	ssize_t r;
	int rc;

	nl = nft_sock_(n, &seq, &portid);
	nlh = mnl_nlmsg_put_header(req);
	nlh->nlmsg_type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_UNSPEC;
	g->version = NFNETLINK_V0;
	g->res_id = 0;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		err_set(e, "nft: conntrack dump: %s", strerror(errno));
		return -1;
	}
	for (;;) {
		r = mnl_socket_recvfrom(nl, buf, NFT_RECV_BUF);
		if (r < 0) {
			err_set(e, "nft: conntrack dump: %s",
			    errno == EAGAIN ? "timeout" : strerror(errno));
			return -1;
		}
		rc = mnl_cb_run(buf, (size_t)r, seq, portid, cb, arg);
		if (rc == MNL_CB_ERROR) {
			err_set(e,
			    "nft: conntrack dump: %s (is "
			    "nf_conntrack_netlink available?)",
			    strerror(errno));
			return -1;
		}
		if (rc == MNL_CB_STOP)
			break;
	}
	if (*seen > NFT_CT_MAX_FLOWS) {
		/* drain the rest of the dump so the socket stays usable */
		do {
			r = mnl_socket_recvfrom(nl, buf, NFT_RECV_BUF);
		} while (r > 0 &&
		    mnl_cb_run(buf, (size_t)r, seq, portid, NULL, NULL) ==
		        MNL_CB_OK);
	}
	return 0;
}

int
nft_renew_live(struct nft *n, uint32_t window_s, size_t *renewed, struct err *e)
{
	struct ct_dump d = {.n = n,
	    .mark = nft_mark_(n),
	    .window_ms = (uint64_t)window_s * 1000};
	struct nft_locals *lc = NULL;
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
	if ((lc = nft_locals_load_(e)) == NULL) {
		err_prefix(e, "nothing renewed");
		goto out;
	}
	d.lc = lc;
	if (nft_ct_dump_(n, buf, ct_cb, &d, &d.seen, e) == -1)
		goto out;
	if (d.nout != 0 && nft_refresh_(n, d.out, d.nout, e) < 0)
		goto out;
	if (renewed != NULL)
		*renewed = d.nout;
	rc = 0;
out:
	nft_locals_free_(lc);
	free(d.out);
	free(buf);
	return rc;
}

/* ---- self-check ---- */

/* Waits for a datagram equal to want on fd; true if it came. */
static bool
await(int fd, const uint8_t *want, size_t len, int timeout_ms)
{
	uint8_t buf[512];
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int i;
	ssize_t r;

	for (i = 0; i < NFT_SELFCHECK_TRIES; i++) {
		if (poll(&pfd, 1, timeout_ms) <= 0)
			return false;
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == (ssize_t)len && memcmp(buf, want, len) == 0)
			return true;
	}
	return false;
}

/* One datagram to [dst]:53; 0, or -1 with *err_no and e set. */
static int
probe_send(int family, uint32_t mark, const char *dst, const uint8_t *msg,
    size_t len, int *err_no, struct err *e)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, rc = -1;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(53);
		inet_pton(AF_INET, dst, &s4->sin_addr);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(53);
		inet_pton(AF_INET6, dst, &s6->sin6_addr);
		sl = sizeof(*s6);
	}
	*err_no = 0;
	fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*err_no = errno;
		err_set(e, "nft selfcheck: socket: %s", strerror(errno));
		return -1;
	}
	if (mark != 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) < 0) {
		*err_no = errno;
		err_set(e, "nft selfcheck: SO_MARK: %s", strerror(errno));
		goto out;
	}
	if (sendto(fd, msg, len, 0, (struct sockaddr *)&ss, sl) !=
	    (ssize_t)len) {
		*err_no = errno;
		err_set(e, "nft selfcheck: sendto %s port 53%s: %s", dst,
		    mark ? " (marked)" : "", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* A UDP socket bound to the loopback address of family on port. */
static int
bind_loopback(int family, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		s6->sin6_addr = in6addr_loopback;
		sl = sizeof(*s6);
	}
	fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/*
 * IPv6 part (own socket only): an unmarked datagram to 2001:db8::1:53
 * must arrive on [::1]:port. Skipped when the namespace has no IPv6
 * (no ::1, or no route: then nothing can leave over IPv6 anyway).
 */
static int
selfcheck6(uint16_t port, uint8_t *msg, size_t len, struct err *e)
{
	int fd, err_no, rc = -1;

	fd = bind_loopback(AF_INET6, port);
	if (fd < 0) {
		if (errno == EADDRNOTAVAIL || errno == EAFNOSUPPORT)
			return 0;
		err_set(e, "nft selfcheck: bind [::1]:%u: %s", port,
		    strerror(errno));
		return -1;
	}
	msg[13] = '6';
	if (probe_send(AF_INET6, 0, "2001:db8::1", msg, len, &err_no, e) < 0) {
		if (err_no == ENETUNREACH || err_no == EHOSTUNREACH) {
			err_clear(e);
			rc = 0;
		} else
			err_prefix(e, "IPv6 DNS redirect");
		goto out;
	}
	if (!await(fd, msg, len, NFT_SELFCHECK_TIMEOUT_MS)) {
		err_set(e,
		    "nft selfcheck: a datagram to [2001:db8::1]:53 did not "
		    "arrive on [::1]:%u: IPv6 DNS redirect not working",
		    port);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

int
nft_selfcheck(struct nft *n, int fd4, struct err *e)
{
	/* A DNS query header with a random id and "selfcheck" marker. */
	uint8_t msg[32] = {0, 0, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 'e', 'g',
	    'r', 'e', 's', 's', 'd', '-', 's', 'e', 'l', 'f', 'c', 'h', 'k'};
	uint16_t port = nft_dns_port_(n);
	int fd = fd4, own = -1, rc = -1, err_no;

	if (getrandom(msg, 2, 0) != 2 || getrandom(msg + 28, 4, 0) != 4) {
		err_set(e, "nft selfcheck: getrandom: %s", strerror(errno));
		return -1;
	}
	if (fd < 0) {
		own = bind_loopback(AF_INET, port);
		if (own < 0) {
			err_set(e, "nft selfcheck: bind 127.0.0.1:%u: %s", port,
			    strerror(errno));
			return -1;
		}
		fd = own;
	}
	/* 1. Unmarked, to a documentation address: must be redirected. */
	if (probe_send(AF_INET, 0, "192.0.2.1", msg, sizeof(msg), &err_no, e) <
	    0) {
		err_prefix(e, "DNS redirect");
		goto out;
	}
	if (!await(fd, msg, sizeof(msg), NFT_SELFCHECK_TIMEOUT_MS)) {
		err_set(e,
		    "nft selfcheck: a datagram to 192.0.2.1:53 did not "
		    "arrive on 127.0.0.1:%u: DNS redirect not working",
		    port);
		goto out;
	}
	/* 2. Marked (egressd's own upstream sockets): must not be. Sent to
	 * loopback so that nothing leaves the namespace. */
	msg[12] = 'E';
	if (probe_send(AF_INET, nft_mark_(n), "127.0.0.1", msg, sizeof(msg),
	        &err_no, e) < 0)
		goto out;
	if (await(fd, msg, sizeof(msg), NFT_SELFCHECK_TIMEOUT_MS / 2)) {
		err_set(e,
		    "nft selfcheck: a datagram with mark 0x%x was "
		    "redirected: mark exemption not working",
		    nft_mark_(n));
		goto out;
	}
	/* 3. IPv6, when the check owns its sockets. */
	if (own >= 0 && selfcheck6(port, msg, sizeof(msg), e) < 0)
		goto out;
	rc = 0;
out:
	if (own >= 0)
		close(own);
	return rc;
}
