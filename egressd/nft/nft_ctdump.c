/*
 * nft_ctdump: conntrack work driven by the event loop instead of waited
 * for. One ctnetlink socket of its own per user (non-blocking, its own
 * sequence numbers, never shared with a batch), a dump read in slices of
 * NFT_CT_SLICE_RECVS reads per loop turn, and conntrack deletes sent in
 * chunks of NFT_CT_DEL_PER_SEND, one chunk per loop turn, their acks read
 * the same way. A DNS answer therefore waits for one slice at most, never
 * for the whole table (bench/bench_hotpath.sh measures it).
 *
 * A leaf: it calls only the message codec (nft_ctmsg.c); what a dump
 * finds and when work ends reach its users (nft_ct.c, nft_live.c) through
 * their callbacks, so it never calls back into them by name. The blocking
 * dump (nft_ctdump_wait) reads on the caller's socket.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include "egressd/nft/nft_ctdump.h"
#include "egressd/nft/nft_ctmsg.h"
#include "egressd/nft/nft_bounds.h"

enum ctd_state {
	CTD_IDLE,
	CTD_DUMP,
	CTD_DELETE,
};

struct nft_ctd {
	struct event_base *base;
	struct mnl_socket *nl; /* NULL until needed, and after a failure */
	uint32_t portid, seq;
	struct event *ev_read, *ev_timeout, *ev_step;
	uint8_t *buf; /* NFT_RECV_BUF */
	void *results; /* room for the work's results (nft_ctdump_results) */
	enum ctd_state state;
	nft_ctdump_end_fn end;
	void *arg;
	/* CTD_DUMP */
	mnl_cb_t entry;
	void *entry_arg;
	/* CTD_DELETE: fl[next..n) still to send; the chunk in flight is
	 * [chunk, next), first sequence number seq0 */
	const struct nft_ct_flow *fl;
	size_t n, next, chunk, acked;
	uint32_t seq0;
	bool got[NFT_CT_DEL_PER_SEND];
	size_t *deleted;
	int bad_errno;
};

static void ctd_read_cb(evutil_socket_t fd, short what, void *arg);

static void
ctd_close(struct nft_ctd *c)
{
	if (c->ev_read != NULL)
		event_free(c->ev_read);
	c->ev_read = NULL;
	if (c->nl != NULL)
		mnl_socket_close(c->nl);
	c->nl = NULL;
}

static int
ctd_open(struct nft_ctd *c, struct err *e)
{
	int fd, v = (int)NFT_RCVBUF_MIN;

	if (c->nl != NULL)
		return 0;
	c->nl =
	    mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c->nl == NULL ||
	    mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err_set(e, "nft: conntrack socket: %s", strerror(errno));
		ctd_close(c);
		return -1;
	}
	c->portid = mnl_socket_get_portid(c->nl);
	fd = mnl_socket_get_fd(c->nl);
	/* room for a whole chunk's acks and a dump slice */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	c->ev_read =
	    event_new(c->base, fd, EV_READ | EV_PERSIST, ctd_read_cb, c);
	if (c->ev_read == NULL || event_add(c->ev_read, NULL) < 0) {
		err_set(e, "nft: conntrack socket: cannot watch it");
		ctd_close(c);
		return -1;
	}
	return 0;
}

/* No progress for NFT_ACK_TIMEOUT_MS ends the work: counted from now. */
static void
ctd_progress(struct nft_ctd *c)
{
	struct timeval tv = {.tv_sec = NFT_ACK_TIMEOUT_MS / 1000,
	    .tv_usec = (NFT_ACK_TIMEOUT_MS % 1000) * 1000};

	(void)event_add(c->ev_timeout, &tv);
}

static void
ctd_finish(struct nft_ctd *c, int rc, const char *why)
{
	nft_ctdump_end_fn end = c->end;
	void *arg = c->arg;

	(void)event_del(c->ev_timeout);
	(void)event_del(c->ev_step);
	if (rc != 0)
		ctd_close(c); /* half-read: never reuse */
	c->state = CTD_IDLE;
	c->end = NULL;
	c->entry = NULL;
	c->fl = NULL;
	if (end != NULL)
		end(arg, rc, rc == 0 ? NULL : why);
}

static void
ctd_fail_errno(struct nft_ctd *c, const char *what, int err)
{
	char why[ERR_MSG_MAX];

	(void)snprintf(why, sizeof(why), "nft: conntrack %s: %s", what,
	    err == EAGAIN ? "timeout" : strerror(err));
	ctd_finish(c, -1, why);
}

static void
ctd_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nft_ctd *c = arg;

	(void)fd;
	(void)what;
	ctd_fail_errno(c, c->state == CTD_DUMP ? "dump" : "delete", EAGAIN);
}

/* One slice of the dump; the read event fires again while more waits. */
static void
ctd_dump_slice(struct nft_ctd *c)
{
	char why[ERR_MSG_MAX];
	ssize_t k;
	int i, rc;

	for (i = 0; i < NFT_CT_SLICE_RECVS; i++) {
		k = mnl_socket_recvfrom(c->nl, c->buf, NFT_RECV_BUF);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (k < 0) {
			/* ENOBUFS included: the dump lost messages */
			ctd_fail_errno(c, "dump", errno);
			return;
		}
		rc = mnl_cb_run(c->buf, (size_t)k, c->seq, c->portid, c->entry,
		    c->entry_arg);
		if (rc == MNL_CB_ERROR) {
			(void)snprintf(why, sizeof(why),
			    "nft: conntrack dump: %s (is "
			    "nf_conntrack_netlink available?)",
			    strerror(errno));
			ctd_finish(c, -1, why);
			return;
		}
		if (rc == MNL_CB_STOP) {
			ctd_finish(c, 0, NULL);
			return;
		}
	}
	ctd_progress(c);
}

/* Sends the next chunk of deletes (one write). */
static void
ctd_send_chunk(struct nft_ctd *c)
{
	size_t len = 0, k, i;

	if (c->next >= c->n) {
		ctd_finish(c, 0, NULL);
		return;
	}
	c->chunk = c->next;
	c->acked = 0;
	memset(c->got, 0, sizeof(c->got));
	c->seq0 = ++c->seq;
	for (i = 0; i < NFT_CT_DEL_PER_SEND && c->next < c->n; i++) {
		k = nft_build_ct_delete(&c->fl[c->next], c->seq0 + (uint32_t)i,
		    c->buf + len, NFT_RECV_BUF - len);
		if (k == 0) {
			ctd_fail_errno(c, "delete", EINVAL);
			return;
		}
		len += k;
		c->next++;
	}
	c->seq = c->seq0 + (uint32_t)i;
	if (mnl_socket_sendto(c->nl, c->buf, len) < 0) {
		ctd_fail_errno(c, "delete", errno);
		return;
	}
	ctd_progress(c);
	/* ctnetlink handles the messages inside sendmsg: the acks are
	 * usually queued already */
	ctd_read_cb(-1, EV_READ, c);
}

/*
 * The next chunk in the next loop turn, after its poll for I/O: a zero
 * timer, not event_active(), which would run it in this very turn, chunk
 * after chunk, with no socket read in between.
 */
static void
ctd_next_turn(struct nft_ctd *c)
{
	struct timeval zero = {0, 0};

	(void)event_add(c->ev_step, &zero);
}

static void
ctd_read_acks(struct nft_ctd *c)
{
	size_t inflight = c->next - c->chunk;
	ssize_t r;

	while (c->acked < inflight) {
		const struct nlmsghdr *nlh;
		int left;

		r = mnl_socket_recvfrom(c->nl, c->buf, NFT_RECV_BUF);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r < 0) {
			ctd_fail_errno(c, "delete", errno);
			return;
		}
		left = (int)r;
		for (nlh = (const struct nlmsghdr *)c->buf;
		     mnl_nlmsg_ok(nlh, left);
		     nlh = mnl_nlmsg_next(nlh, &left)) {
			const struct nlmsgerr *me;
			uint32_t k = nlh->nlmsg_seq - c->seq0;

			if (nlh->nlmsg_type != NLMSG_ERROR || k >= inflight ||
			    c->got[k])
				continue; /* not ours (stale) */
			c->got[k] = true;
			c->acked++;
			me = mnl_nlmsg_get_payload(nlh);
			if (me->error == 0)
				(*c->deleted)++;
			else if (me->error != -ENOENT && c->bad_errno == 0)
				c->bad_errno = -me->error; /* ENOENT: ended */
		}
	}
	if (c->next < c->n) {
		ctd_next_turn(c);
		return;
	}
	if (c->bad_errno != 0)
		ctd_fail_errno(c, "delete", c->bad_errno);
	else
		ctd_finish(c, 0, NULL);
}

static void
ctd_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nft_ctd *c = arg;

	(void)fd;
	(void)what;
	if (c->state == CTD_DUMP)
		ctd_dump_slice(c);
	else if (c->state == CTD_DELETE)
		ctd_read_acks(c);
	else if (c->nl != NULL) {
		/* nothing expected: drain (stale acks) so the level-triggered
		 * event does not spin */
		while (mnl_socket_recvfrom(c->nl, c->buf, NFT_RECV_BUF) > 0)
			;
	}
}

static void
ctd_step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nft_ctd *c = arg;

	(void)fd;
	(void)what;
	if (c->state == CTD_DELETE)
		ctd_send_chunk(c);
}

struct nft_ctd *
nft_ctdump_new(
    struct event_base *base, size_t nresults, size_t size, struct err *e)
{
	struct nft_ctd *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		err_set(e, "nft: out of memory");
		return NULL;
	}
	c->base = base;
	c->buf = malloc(NFT_RECV_BUF);
	c->results = calloc(nresults, size);
	c->ev_timeout = evtimer_new(base, ctd_timeout_cb, c);
	c->ev_step = evtimer_new(base, ctd_step_cb, c);
	if (c->buf == NULL || c->results == NULL || c->ev_timeout == NULL ||
	    c->ev_step == NULL) {
		err_set(e, "nft: out of memory");
		nft_ctdump_free(c);
		return NULL;
	}
	return c;
}

void
nft_ctdump_free(struct nft_ctd *c)
{
	if (c == NULL)
		return;
	ctd_close(c);
	if (c->ev_timeout != NULL)
		event_free(c->ev_timeout);
	if (c->ev_step != NULL)
		event_free(c->ev_step);
	free(c->buf);
	free(c->results);
	free(c);
}

void *
nft_ctdump_results(struct nft_ctd *c)
{
	return c->results;
}

bool
nft_ctdump_busy(const struct nft_ctd *c)
{
	return c->state != CTD_IDLE;
}

void
nft_ctdump_abort(struct nft_ctd *c)
{
	if (c->state == CTD_IDLE)
		return;
	c->end = NULL;
	ctd_finish(c, -1, NULL);
}

int
nft_ctdump_dump(struct nft_ctd *c, mnl_cb_t entry, void *entry_arg,
    nft_ctdump_end_fn end, void *arg, struct err *e)
{
	char req[MNL_SOCKET_BUFFER_SIZE];

	if (c->state != CTD_IDLE) {
		err_set(e, "nft: conntrack dump already under way");
		return -1;
	}
	if (ctd_open(c, e) < 0)
		return -1;
	c->seq++;
	nft_ctmsg_dump_request(req, c->seq);
	if (mnl_socket_sendto(c->nl, req, ((struct nlmsghdr *)req)->nlmsg_len) <
	    0) {
		err_set(e, "nft: conntrack dump: %s", strerror(errno));
		ctd_close(c);
		return -1;
	}
	c->state = CTD_DUMP;
	c->entry = entry;
	c->entry_arg = entry_arg;
	c->end = end;
	c->arg = arg;
	ctd_progress(c);
	return 0;
}

int
nft_ctdump_delete(struct nft_ctd *c, const struct nft_ct_flow *fl, size_t n,
    size_t *deleted, nft_ctdump_end_fn end, void *arg, struct err *e)
{
	if (c->state != CTD_IDLE) {
		err_set(e, "nft: conntrack work already under way");
		return -1;
	}
	if (ctd_open(c, e) < 0)
		return -1;
	c->state = CTD_DELETE;
	c->fl = fl;
	c->n = n;
	c->next = c->chunk = 0;
	c->deleted = deleted;
	c->bad_errno = 0;
	c->end = end;
	c->arg = arg;
	/* the first chunk in the next loop turn too: end is never called
	 * from inside this call */
	ctd_next_turn(c);
	ctd_progress(c);
	return 0;
}

int
nft_ctdump_wait(struct mnl_socket *nl, uint32_t seq, uint32_t portid,
    uint8_t *buf, int (*cb)(const struct nlmsghdr *, void *), void *arg,
    const size_t *seen, struct err *e)
{
	struct nlmsghdr *nlh;
	char req[MNL_SOCKET_BUFFER_SIZE];
	ssize_t r;
	int rc;

	nft_ctmsg_dump_request(req, seq);
	nlh = (struct nlmsghdr *)req;
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
