/*
 * nft_driver: drives egressd's nft module alone, for the nft_* end-to-end
 * scenarios, until the daemon integrates it. It meets the test bed's
 * readiness contract (docs/testing.md): --log-file, --policy, and ignores
 * --dns-upstream/--http-addr/--rules-dir; logs "egressd.ready" once the
 * ruleset is applied, a stub resolver listens on 127.0.0.1/::1:15353 and
 * the self-check passed; exits 0 on SIGTERM, leaving the table in force.
 *
 * The stub resolver logs every datagram/connection ("driver.dns") and
 * answers REFUSED: scenarios use it to see where redirected DNS lands.
 *
 * Commands, one per line on the --control FIFO, each answered by a
 * "driver.cmd" log line with the same id:
 *   ID learn ADDR TTL NAME    nft_learn (one address)
 *   ID apply FILE             load FILE, nft_apply_policy
 *   ID expire | ID counters | ID teardown | ID renew WINDOW_S
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egressd/base/log.h"
#include "egressd/nft/nft.h"
#include "policy/policy.h"

#define DRV_LINE_MAX 1024
#define DRV_FDS 6

struct drv {
	struct log lg;
	struct nft *n;
	struct policy *p;
	int udp4, udp6, tcp4, tcp6, ctl, sig;
	char buf[DRV_LINE_MAX];
	size_t blen;
};

static struct policy *
load(struct drv *d, const char *path, struct err *e)
{
	struct policy_diag diag;
	struct policy *p;

	policy_diag_init(&diag);
	p = path != NULL ? policy_load_file(path, &diag)
	                 : policy_new_deny_all();
	if (p == NULL)
		policy_diag_to_err(&diag, e);
	policy_diag_clear(&diag);
	(void)d;
	return p;
}

static int
listen_on(int family, int type, uint16_t port)
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
	fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 16) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
on_udp(struct drv *d, int fd)
{
	uint8_t q[4096];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t r;

	r = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
	if (r <= 0)
		return;
	log_info(&d->lg, "driver.dns", LOG_S("proto", "udp"),
	    LOG_S("family", fd == d->udp4 ? "4" : "6"), LOG_U("bytes", r));
	if (r >= 12) {
		q[2] |= 0x80; /* QR */
		q[3] = (uint8_t)((q[3] & 0xf0) | 5); /* REFUSED */
		(void)sendto(fd, q, (size_t)r, 0, (struct sockaddr *)&from, fl);
	}
}

static void
on_tcp(struct drv *d, int fd)
{
	int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);

	if (c < 0)
		return;
	log_info(&d->lg, "driver.dns", LOG_S("proto", "tcp"),
	    LOG_S("family", fd == d->tcp4 ? "4" : "6"));
	close(c);
}

static void
reply(
    struct drv *d, const char *id, const char *cmd, int rc, const struct err *e)
{
	if (rc == 0)
		log_info(&d->lg, "driver.cmd", LOG_S("id", id),
		    LOG_S("cmd", cmd), LOG_B("ok", true),
		    LOG_U("learned", nft_learned_count(d->n)));
	else
		log_warn(&d->lg, "driver.cmd", LOG_S("id", id),
		    LOG_S("cmd", cmd), LOG_B("ok", false),
		    LOG_S("err", e->msg));
}

static void
command(struct drv *d, char *line)
{
	char *id, *cmd, *a1, *a2, *a3, *save = NULL;
	struct err e;
	int rc = -1;

	err_clear(&e);
	id = strtok_r(line, " \t", &save);
	cmd = strtok_r(NULL, " \t", &save);
	a1 = strtok_r(NULL, " \t", &save);
	a2 = strtok_r(NULL, " \t", &save);
	a3 = strtok_r(NULL, " \t", &save);
	if (id == NULL || cmd == NULL)
		return;
	if (strcmp(cmd, "learn") == 0 && a1 && a2) {
		struct nft_learn_addr la = {
		    .ttl = (uint32_t)atoi(a2), .name = a3};

		if (inet_pton(AF_INET, a1, la.addr) == 1)
			la.family = 4;
		else if (inet_pton(AF_INET6, a1, la.addr) == 1)
			la.family = 6;
		rc = nft_learn(d->n, &la, 1, &e);
	} else if (strcmp(cmd, "apply") == 0 && a1) {
		struct policy *p = load(d, a1, &e);

		if (p != NULL && (rc = nft_apply_policy(d->n, p, &e)) == 0) {
			policy_unref(d->p);
			d->p = p;
		} else
			policy_unref(p);
	} else if (strcmp(cmd, "expire") == 0) {
		nft_expire_tick(d->n);
		rc = 0;
	} else if (strcmp(cmd, "renew") == 0 && a1) {
		size_t k = 0;

		rc = nft_renew_live(d->n, (uint32_t)atoi(a1), &k, &e);
		if (rc == 0)
			log_info(&d->lg, "driver.renew", LOG_U("renewed", k));
	} else if (strcmp(cmd, "counters") == 0) {
		struct nft_counter c[NFT_NCOUNTERS];
		size_t i;

		rc = nft_read_counters(d->n, c, &e);
		for (i = 0; rc == 0 && i < NFT_NCOUNTERS; i++)
			log_info(&d->lg, "driver.counter",
			    LOG_S("name", c[i].name),
			    LOG_U("packets", c[i].packets));
	} else if (strcmp(cmd, "teardown") == 0) {
		rc = nft_teardown(d->n, &e);
	} else
		err_set(&e, "unknown command");
	reply(d, id, cmd, rc, &e);
}

static void
on_ctl(struct drv *d)
{
	ssize_t r;
	char *nl;

	r = read(d->ctl, d->buf + d->blen, sizeof(d->buf) - 1 - d->blen);
	if (r <= 0)
		return;
	d->blen += (size_t)r;
	d->buf[d->blen] = '\0';
	while ((nl = strchr(d->buf, '\n')) != NULL) {
		*nl = '\0';
		command(d, d->buf);
		d->blen -= (size_t)(nl + 1 - d->buf);
		memmove(d->buf, nl + 1, d->blen + 1);
	}
	if (d->blen == sizeof(d->buf) - 1)
		d->blen = 0; /* overlong line: drop it */
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"log-file", required_argument, NULL, 'l'},
	    {"policy", required_argument, NULL, 'p'},
	    {"control", required_argument, NULL, 'c'},
	    {"proxy-port", required_argument, NULL, 'x'},
	    {"dns-upstream", required_argument, NULL, 'u'},
	    {"http-addr", required_argument, NULL, 'h'},
	    {"rules-dir", required_argument, NULL, 'r'},
	    {NULL, 0, NULL, 0},
	};
	struct drv d;
	struct nft_opts o;
	struct err e;
	const char *logf = NULL, *polf = NULL, *ctlf = NULL;
	struct pollfd pf[DRV_FDS];
	sigset_t ss;
	int c, i, status = 1;

	memset(&d, 0, sizeof(d));
	nft_opts_init(&o);
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			logf = optarg;
			break;
		case 'p':
			polf = optarg;
			break;
		case 'c':
			ctlf = optarg;
			break;
		case 'x':
			o.proxy_port = (uint16_t)atoi(optarg);
			break;
		case 'u':
		case 'h':
		case 'r':
			break;
		default:
			return 2;
		}
	}
	log_init(&d.lg, STDOUT_FILENO, LOG_INFO);
	if (logf != NULL && log_open_file(&d.lg, logf) < 0) {
		perror(logf);
		return 1;
	}
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	d.sig = signalfd(-1, &ss, SFD_CLOEXEC);
	d.p = load(&d, polf, &e);
	if (d.p == NULL)
		goto out_fail;
	d.n = nft_new(&o, NULL, &e);
	if (d.n == NULL || nft_apply_policy(d.n, d.p, &e) < 0)
		goto out_fail;
	d.udp4 = listen_on(AF_INET, SOCK_DGRAM, o.dns_port);
	d.udp6 = listen_on(AF_INET6, SOCK_DGRAM, o.dns_port);
	d.tcp4 = listen_on(AF_INET, SOCK_STREAM, o.dns_port);
	d.tcp6 = listen_on(AF_INET6, SOCK_STREAM, o.dns_port);
	if (d.udp4 < 0 || d.udp6 < 0 || d.tcp4 < 0 || d.tcp6 < 0) {
		err_set(&e, "stub resolver: %s", strerror(errno));
		goto out_fail;
	}
	{
		/* The stub's own sockets; what arrives with the probes is
		 * dropped (the driver answers nothing before it is ready). */
		struct nft_selfcheck_io io = {.fd4 = d.udp4, .fd6 = d.udp6};

		if (nft_selfcheck(d.n, &io, &e) < 0)
			goto out_fail;
	}
	d.ctl = -1;
	if (ctlf != NULL && (d.ctl = open(ctlf, O_RDWR | O_NONBLOCK)) < 0) {
		err_set(&e, "%s: %s", ctlf, strerror(errno));
		goto out_fail;
	}
	log_info(&d.lg, "egressd.ready", LOG_S("driver", "nft_driver"),
	    LOG_U("learned", nft_learned_count(d.n)));
	for (;;) {
		int fds[DRV_FDS] = {
		    d.sig, d.udp4, d.udp6, d.tcp4, d.tcp6, d.ctl};

		for (i = 0; i < DRV_FDS; i++) {
			pf[i].fd = fds[i];
			pf[i].events = POLLIN;
			pf[i].revents = 0;
		}
		if (poll(pf, DRV_FDS, 1000) < 0 && errno != EINTR)
			break;
		nft_expire_tick(d.n);
		if (pf[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(d.sig, &si, sizeof(si)) == sizeof(si) &&
			    si.ssi_signo != SIGHUP) {
				log_info(&d.lg, "egressd.stop",
				    LOG_S("reason", "signal"));
				status = 0;
				break;
			}
		}
		if (pf[1].revents & POLLIN)
			on_udp(&d, d.udp4);
		if (pf[2].revents & POLLIN)
			on_udp(&d, d.udp6);
		if (pf[3].revents & POLLIN)
			on_tcp(&d, d.tcp4);
		if (pf[4].revents & POLLIN)
			on_tcp(&d, d.tcp6);
		if (d.ctl >= 0 && (pf[5].revents & POLLIN))
			on_ctl(&d);
	}
	goto out;
out_fail:
	log_error(&d.lg, "egressd.fatal", LOG_S("err", e.msg));
	fprintf(stderr, "nft_driver: %s\n", e.msg);
out:
	/* the table stays in force: fail closed */
	nft_free(d.n);
	policy_unref(d.p);
	if (d.udp4 > 0)
		close(d.udp4);
	if (d.udp6 > 0)
		close(d.udp6);
	if (d.tcp4 > 0)
		close(d.tcp4);
	if (d.tcp6 > 0)
		close(d.tcp6);
	if (d.ctl > 0)
		close(d.ctl);
	if (d.sig > 0)
		close(d.sig);
	log_clear(&d.lg);
	return status;
}
