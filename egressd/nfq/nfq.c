/*
 * nfq: the queue's netlink socket on the event loop (nfq.h).
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/event.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink_queue.h>

#include "egressd/nfq/nfq_bpf.h"
#include "egressd/nfq/nfq_int.h"
#include "egressd/nfq/nfq_msg.h"
#include "util/now.h"

#define NFQ_ACK_TIMEOUT_MS 2000
#define NFQ_READS_PER_CB 256 /* messages read per wakeup: others wait */

/* Sends one config message and waits for its ack: 0, or -1 with errno. */
static int
nfq_config(struct nfq *q, const void *msg, size_t n)
{
	uint8_t buf[MNL_SOCKET_BUFFER_SIZE];
	const struct nlmsghdr *sent = msg;
	ssize_t r;

	if (mnl_socket_sendto(q->nl, msg, n) < 0)
		return -1;
	for (;;) {
		r = mnl_socket_recvfrom(q->nl, buf, sizeof(buf));
		if (r < 0)
			return -1;
		/* only the ack of this message ends the wait */
		r = mnl_cb_run(
		    buf, (size_t)r, sent->nlmsg_seq, q->portid, NULL, NULL);
		if (r <= MNL_CB_STOP)
			return r == MNL_CB_ERROR ? -1 : 0;
	}
}

static void
nfq_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nfq *q = arg;
	const struct nlmsghdr *nlh;
	struct nfq_pkt pkt;
	struct err e;
	ssize_t r;
	int i, left;

	(void)fd;
	(void)what;
	if (q->magic != NFQ_MAGIC)
		return;
	for (i = 0; i < NFQ_READS_PER_CB; i++) {
		r = mnl_socket_recvfrom(q->nl, q->rbuf, NFQ_RECV_MAX);
		if (r < 0) {
			/* ENOBUFS: the kernel could not give us packets, and
			 * dropped them (no fail-open) */
			if (errno != EAGAIN && errno != EINTR)
				q->st.errors++;
			if (errno != ENOBUFS)
				return;
			continue;
		}
		left = (int)r;
		for (nlh = (const struct nlmsghdr *)q->rbuf;
		     mnl_nlmsg_ok(nlh, left);
		     nlh = mnl_nlmsg_next(nlh, &left)) {
			if (nlh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *ne =
				    mnl_nlmsg_get_payload(nlh);
				if (ne->error != 0)
					q->st.errors++;
				continue;
			}
			if (nfq_msg_parse(nlh, &pkt, &e) < 0 || pkt.truncated) {
				q->st.errors++;
				continue;
			}
			q->st.packets++;
			nfq_flow_packet(q, pkt.id, pkt.has_mark ? pkt.mark : 0,
			    pkt.payload, pkt.len);
		}
	}
}

/* A flow the kernel passed: the line the queue writes for its own
 * passes (nfq_flow.c), by "kernel", a tick late at most. */
static void
nfq_kernel_passed_cb(void *arg, const struct nfq_bpf_tuple *t, const char *sni)
{
	struct nfq *q = arg;
	struct addr a;
	char dst[ADDR_TEXT_MAX];

	if (t->family != 4 && t->family != 6)
		return;
	nfq_dst_addr(t->family, t->dst, &a);
	addr_format_port(&a, t->dport, dst, sizeof(dst));
	log_info(q->log, "nfq.judged", LOG_S("decision", "passthrough"),
	    LOG_S("by", "kernel"), LOG_S("name", sni), LOG_S("dst", dst));
}

/* The kernel's passes since the last tick, logged; any it could not
 * record (its ring full) said as a number. */
static void
nfq_kernel_audit(struct nfq *q)
{
	uint64_t passed, missed, unlogged;

	if (q->kb == NULL ||
	    nfq_bpf_audit_drain(q->kb, nfq_kernel_passed_cb, q) == 0)
		return;
	nfq_bpf_counts(q->kb, &passed, &missed, &unlogged);
	if (unlogged > q->kb_unlogged) {
		log_warn(q->log, "nfq.kernel_unlogged",
		    LOG_U("count", unlogged - q->kb_unlogged),
		    LOG_U("total", unlogged));
		q->kb_unlogged = unlogged;
	}
}

static void
nfq_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nfq *q = arg;

	(void)fd;
	(void)what;
	if (q->magic != NFQ_MAGIC)
		return;
	nfq_flow_sweep(q);
	nfq_kernel_audit(q);
}

/* Binds the queue; then asks whether the kernel would attach conntrack
 * to verdicts (said in the status; the marks work either way). */
static int
nfq_bind(struct nfq *q, struct err *e)
{
	uint8_t buf[NFQ_MSG_SMALL];
	size_t n;

	n = nfq_msg_bind(buf, sizeof(buf), q->o.queue_num, 1, NFQ_COPY_RANGE,
	    NFQ_QUEUE_MAXLEN, 0);
	if (nfq_config(q, buf, n) < 0) {
		err_set(e, "binding NFQUEUE %u: %s", q->o.queue_num,
		    strerror(errno));
		return -1;
	}
	n = nfq_msg_flags(buf, sizeof(buf), q->o.queue_num, 2,
	    NFQA_CFG_F_CONNTRACK, NFQA_CFG_F_CONNTRACK);
	q->st.conntrack_glue = nfq_config(q, buf, n) == 0;
	if (q->st.conntrack_glue) {
		n = nfq_msg_flags(buf, sizeof(buf), q->o.queue_num, 3, 0,
		    NFQA_CFG_F_CONNTRACK);
		if (nfq_config(q, buf, n) < 0) {
			err_set(e, "NFQUEUE %u flags: %s", q->o.queue_num,
			    strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The socket: blocking with a timeout for the bind's acks, then
 * non-blocking on the loop. */
static int
nfq_open(struct nfq *q, struct err *e)
{
	struct timeval tv = {
	    NFQ_ACK_TIMEOUT_MS / 1000, (NFQ_ACK_TIMEOUT_MS % 1000) * 1000};
	int fd, sz = (int)NFQ_RCVBUF;

	q->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (q->nl == NULL ||
	    mnl_socket_bind(q->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err_set(e, "nfnetlink socket: %s", strerror(errno));
		return -1;
	}
	q->portid = mnl_socket_get_portid(q->nl);
	fd = mnl_socket_get_fd(q->nl);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0 &&
	        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)) < 0)) {
		err_set(e, "nfnetlink socket options: %s", strerror(errno));
		return -1;
	}
	if (nfq_bind(q, e) < 0)
		return -1;
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		err_set(e, "nfnetlink socket: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The in-kernel judge when asked for and the hooks it needs are given;
 * why not, else. */
static void
nfq_kernel_load(struct nfq *q)
{
	struct err e = {""};

	if (!q->o.kernel_judge || q->h.gen == NULL || q->h.until == NULL) {
		(void)snprintf(q->kb_why, sizeof(q->kb_why), "off");
		return;
	}
	if ((q->kb = nfq_bpf_new(&e)) == NULL) {
		(void)snprintf(q->kb_why, sizeof(q->kb_why), "%s", e.msg);
		return;
	}
	nfq_bpf_set_gen(q->kb, q->h.gen(q->h.arg));
	(void)snprintf(q->kb_why, sizeof(q->kb_why), "bpf");
}

int
nfq_kernel_fd(const struct nfq *q)
{
	return q->kb != NULL ? nfq_bpf_prog_fd(q->kb) : -1;
}

void
nfq_kernel_off(struct nfq *q, const char *why)
{
	nfq_kernel_audit(q);
	nfq_bpf_free(q->kb);
	q->kb = NULL;
	(void)snprintf(q->kb_why, sizeof(q->kb_why), "%s", why);
}

void
nfq_judge_moved(struct nfq *q)
{
	if (q->kb != NULL)
		nfq_bpf_set_gen(q->kb, q->h.gen(q->h.arg));
}

struct nfq *
nfq_new(struct event_base *base, const struct nfq_opts *o,
    const struct nfq_hooks *h, struct log *log, struct err *e)
{
	struct timeval tick = {0, NFQ_TICK_MS * 1000};
	struct nfq *q = calloc(1, sizeof(*q));

	if (q == NULL || (q->rbuf = malloc(NFQ_RECV_MAX)) == NULL) {
		free(q);
		err_set(e, "nfq: out of memory");
		return NULL;
	}
	q->magic = NFQ_MAGIC;
	q->base = base;
	q->o = *o;
	if (q->o.hello_ms == 0)
		q->o.hello_ms = NFQ_HELLO_MS_DEFAULT;
	q->h = *h;
	q->log = log;
	log_limiter_init(&q->lim, 10, 20, 1000); /* as the proxy's */
	/* a missing ring only loses the re-judging by name (nfq_judged.c) */
	q->judged = calloc(NFQ_JUDGED_MAX, sizeof(*q->judged));
	if (nfq_open(q, e) < 0)
		goto fail;
	nfq_kernel_load(q);
	q->ev = event_new(base, mnl_socket_get_fd(q->nl), EV_READ | EV_PERSIST,
	    nfq_read_cb, q);
	q->tick = event_new(base, -1, EV_PERSIST, nfq_tick_cb, q);
	if (q->ev == NULL || q->tick == NULL || event_add(q->ev, NULL) < 0 ||
	    event_add(q->tick, &tick) < 0) {
		err_set(e, "nfq: event setup failed");
		goto fail;
	}
	return q;
fail:
	nfq_free(q);
	return NULL;
}

void
nfq_free(struct nfq *q)
{
	if (q == NULL)
		return;
	if (q->ev != NULL)
		event_free(q->ev);
	if (q->tick != NULL)
		event_free(q->tick);
	/* closing the socket unbinds the queue: the kernel drops what it
	 * still holds for us */
	if (q->nl != NULL)
		mnl_socket_close(q->nl);
	nfq_flow_free_all(q);
	nfq_kernel_audit(q);
	nfq_bpf_free(q->kb);
	q->magic = 0;
	free(q->judged);
	free(q->rbuf);
	free(q);
}

void
nfq_status(const struct nfq *q, struct nfq_status *out)
{
	*out = q->st;
	out->kernel = q->kb != NULL;
	out->kernel_why = q->kb_why;
	if (q->kb != NULL)
		nfq_bpf_counts(q->kb, &out->kernel_passed, &out->kernel_missed,
		    &out->kernel_unlogged);
}
