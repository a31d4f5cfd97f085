/*
 * nfq_floor: the least a queued packet's trip through user space can
 * cost on this machine, for bench_proxy.sh's queue_floor stage (issue
 * 36). It binds egressd's queue in egressd's place and gives every
 * packet the verdict an accepted hello gets (NF_REPEAT with the OK
 * mark), judging nothing: no event loop, no flow table, no TLS parse.
 * What egressd's trip costs beyond this one's is egressd's own work;
 * what this one costs is the kernel's queueing and the wakeup.
 *
 *   nfq_floor QUEUE SECONDS [spin] [after=US]
 *
 * "spin" polls the socket without sleeping (a core kept busy: a
 * measurement of the wakeup's share, never a way to run). "after=US"
 * keeps the CPU busy US microseconds after each read's verdicts, before
 * it reads again (sleeps): what work done after a verdict, in the same
 * wakeup, costs the connection (egressd writes a log line there). Ends after
 * SECONDS or on SIGTERM, and prints the verdicts it gave. Not a test
 * and not a bench_* program (./run bench would run it bare).
 */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>

#include "egressd/base/defaults.h"
#include "egressd/nfq/nfq_msg.h"
#include "util/now.h"

#define FLOOR_RECV (65535 + 4096)

static volatile sig_atomic_t floor_stop;

static void
floor_on_term(int sig)
{
	(void)sig;
	floor_stop = 1;
}

static int
floor_bind(struct mnl_socket *nl, unsigned queue)
{
	uint8_t buf[NFQ_MSG_SMALL], ack[MNL_SOCKET_BUFFER_SIZE];
	size_t n =
	    nfq_msg_bind(buf, sizeof(buf), (uint16_t)queue, 1, 65535, 4096, 0);
	ssize_t r;

	if (n == 0 || mnl_socket_sendto(nl, buf, n) < 0)
		return -1;
	r = mnl_socket_recvfrom(nl, ack, sizeof(ack));
	if (r < 0)
		return -1;
	return mnl_cb_run(ack, (size_t)r, 1, mnl_socket_get_portid(nl), NULL,
	           NULL) == MNL_CB_ERROR
	    ? -1
	    : 0;
}

/* The CPU kept busy for us microseconds (no sleep, no system call). */
static void
floor_busy(unsigned us)
{
	uint64_t end = now_mono_us() + us;

	while (now_mono_us() < end)
		;
}

/* Every packet in one read gets its verdict; returns how many. */
static unsigned
floor_verdicts(
    struct mnl_socket *nl, unsigned queue, const uint8_t *rbuf, ssize_t r)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)rbuf;
	uint8_t v[NFQ_MSG_SMALL];
	struct nfq_pkt pkt;
	struct err e;
	unsigned done = 0;
	int left = (int)r;
	size_t n;

	for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
		if (nfq_msg_parse(nlh, &pkt, &e) < 0)
			continue;
		n = nfq_msg_verdict(v, sizeof(v), (uint16_t)queue, pkt.id,
		    NF_REPEAT, EGRESSD_QMARK_OK);
		if (n > 0 && mnl_socket_sendto(nl, v, n) >= 0)
			done++;
	}
	return done;
}

int
main(int argc, char **argv)
{
	struct mnl_socket *nl;
	uint64_t end;
	unsigned queue, secs, done = 0, after_us = 0;
	uint8_t *rbuf;
	int spin = 0, i;
	ssize_t r;

	if (argc < 3) {
		fprintf(stderr,
		    "usage: nfq_floor QUEUE SECONDS [spin] [after=US]\n");
		return 2;
	}
	queue = (unsigned)strtoul(argv[1], NULL, 10);
	secs = (unsigned)strtoul(argv[2], NULL, 10);
	for (i = 3; i < argc; i++) {
		if (strcmp(argv[i], "spin") == 0)
			spin = 1;
		else if (strncmp(argv[i], "after=", 6) == 0)
			after_us = (unsigned)strtoul(argv[i] + 6, NULL, 10);
		else {
			fprintf(stderr, "nfq_floor: unknown %s\n", argv[i]);
			return 2;
		}
	}
	signal(SIGTERM, floor_on_term);
	rbuf = malloc(FLOOR_RECV);
	nl = mnl_socket_open(NETLINK_NETFILTER);
	if (rbuf == NULL || nl == NULL ||
	    mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ||
	    floor_bind(nl, queue) < 0) {
		fprintf(stderr, "nfq_floor: binding queue %u: %s\n", queue,
		    strerror(errno));
		return 1;
	}
	{
		/* a blocked read wakes once a second to see the clock */
		struct timeval tv = {1, 0};
		setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
		    sizeof(tv));
	}
	end = now_mono_ms() + (uint64_t)secs * 1000;
	fprintf(stderr, "nfq_floor: queue %u bound (%s, %u us after)\n", queue,
	    spin ? "spin" : "blocking", after_us);
	while (!floor_stop) {
		r = recv(mnl_socket_get_fd(nl), rbuf, FLOOR_RECV,
		    spin ? MSG_DONTWAIT : 0);
		if (r > 0) {
			done += floor_verdicts(nl, queue, rbuf, r);
			if (after_us > 0)
				floor_busy(after_us);
		} else if (r < 0 && errno != EAGAIN && errno != EINTR &&
		    errno != ENOBUFS)
			break;
		if (now_mono_ms() >= end)
			break;
	}
	fprintf(stderr, "nfq_floor: %u verdicts\n", done);
	mnl_socket_close(nl);
	free(rbuf);
	return 0;
}
