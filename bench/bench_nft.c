/*
 * bench_nft: nft_learn() latency and throughput (batches of 1 and 16
 * addresses, each one netlink transaction with every ack checked) against
 * the reference implementation's way, a forked `nft add element` per
 * answer; and the resolver's way, nft_learn_submit() with K answers of
 * one address each in flight (the daemon's event loop, acks read by an
 * event, answers sharing transactions). Runs in a private network namespace (root needed); addresses
 * are from 2001:db8::/32 and no packet is sent.
 *
 *   bench_nft [N]      N addresses per run (default 4096)
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "egressd/nft/nft.h"
#include "egressd/base/stats.h"
#include "policy/policy.h"
#include "util/now.h"

#define BENCH_N_DEFAULT 4096
#define BENCH_N_MAX 60000
#define BENCH_FORK_N 256 /* forking is slow: fewer rounds */
#define BENCH_CMD_MAX 4096

static int
dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
addr_of(size_t i, unsigned run, struct nft_learn_addr *a)
{
	memset(a, 0, sizeof(*a));
	a->family = 6;
	a->addr[0] = 0x20;
	a->addr[1] = 0x01;
	a->addr[2] = 0x0d;
	a->addr[3] = 0xb8;
	a->addr[4] = 0xbe;
	a->addr[5] = (uint8_t)run;
	a->addr[14] = (uint8_t)(i >> 8);
	a->addr[15] = (uint8_t)i;
	a->ttl = 300;
	a->name = "bench.example";
}

struct result {
	double addrs_per_s;
	double p50_ms, p99_ms;
};

static void
summarize(
    double *lat, size_t calls, size_t addrs, double total, struct result *r)
{
	qsort(lat, calls, sizeof(*lat), dcmp);
	r->addrs_per_s = (double)addrs / total;
	r->p50_ms = lat[calls / 2] * 1e3;
	r->p99_ms = lat[(calls * 99) / 100] * 1e3;
}

static int
bench_learn(
    struct nft *n, size_t total, size_t batch, unsigned run, struct result *r)
{
	struct nft_learn_addr a[16];
	size_t calls = total / batch, i, j;
	double *lat = calloc(calls, sizeof(*lat)), t0, t1, start;
	struct err e;

	if (lat == NULL)
		return -1;
	start = now_mono_s();
	for (i = 0; i < calls; i++) {
		for (j = 0; j < batch; j++)
			addr_of(i * batch + j, run, &a[j]);
		t0 = now_mono_s();
		if (nft_learn(n, a, batch, &e) < 0) {
			fprintf(stderr, "nft_learn: %s\n", e.msg);
			free(lat);
			return -1;
		}
		t1 = now_mono_s();
		lat[i] = t1 - t0;
	}
	summarize(lat, calls, calls * batch, now_mono_s() - start, r);
	free(lat);
	return 0;
}

/* The reference way: one `nft add element` process per answer. */
static int
bench_fork(size_t total, size_t batch, unsigned run, struct result *r)
{
	size_t calls = total / batch, i, j, off;
	double *lat = calloc(calls, sizeof(*lat)), t0, start;
	char cmd[BENCH_CMD_MAX + 64], elems[BENCH_CMD_MAX];
	struct nft_learn_addr a;
	int st;
	pid_t pid;

	if (lat == NULL)
		return -1;
	start = now_mono_s();
	for (i = 0; i < calls; i++) {
		off = 0;
		for (j = 0; j < batch; j++) {
			addr_of(i * batch + j, run, &a);
			off += (size_t)snprintf(elems + off,
			    sizeof(elems) - off,
			    "%s2001:db8:be%02x::%x timeout 300s", j ? ", " : "",
			    run, (unsigned)(a.addr[14] << 8 | a.addr[15]));
		}
		snprintf(cmd, sizeof(cmd),
		    "add element inet egressd learned6 { %s }", elems);
		t0 = now_mono_s();
		pid = fork();
		if (pid == 0) {
			execlp("nft", "nft", cmd, (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "nft add element failed\n");
			free(lat);
			return -1;
		}
		lat[i] = now_mono_s() - t0;
	}
	summarize(lat, calls, calls * batch, now_mono_s() - start, r);
	free(lat);
	return 0;
}

/* ---- asynchronous: K answers in flight ---- */

struct async_run {
	struct event_base *base;
	struct nft *n;
	size_t total, sent, done, failed, inflight, k;
	unsigned run;
	double *t0, *lat;
};

static int async_submit(struct async_run *a);

struct async_slot {
	struct async_run *a;
	size_t i;
};

static void
async_done_cb(void *arg, int rc, const char *why)
{
	struct async_slot *s = arg;
	struct async_run *a = s->a;

	(void)why;
	a->lat[s->i] = now_mono_s() - a->t0[s->i];
	a->done++;
	a->inflight--;
	if (rc != 0)
		a->failed++;
	free(s);
	if (async_submit(a) < 0 || a->done == a->total)
		event_base_loopbreak(a->base);
}

/* Keeps k answers in flight until total were submitted. */
static int
async_submit(struct async_run *a)
{
	struct nft_learn_addr la;
	struct async_slot *s;
	struct err e;

	while (a->inflight < a->k && a->sent < a->total) {
		s = malloc(sizeof(*s));
		if (s == NULL)
			return -1;
		s->a = a;
		s->i = a->sent;
		addr_of(a->sent, a->run, &la);
		la.addr[13] = (uint8_t)(a->sent >> 16);
		a->t0[a->sent] = now_mono_s();
		if (nft_learn_submit(
		        a->n, &la, 1, la.name, async_done_cb, s, &e) == 0) {
			fprintf(stderr, "submit: %s\n", e.msg);
			free(s);
			return -1;
		}
		a->sent++;
		a->inflight++;
	}
	return 0;
}

static int
bench_async(struct event_base *base, struct nft *n, size_t total, size_t k,
    unsigned run, struct result *r)
{
	struct async_run a = {
	    .base = base, .n = n, .total = total, .k = k, .run = run};
	double start;
	int rc = -1;

	a.t0 = calloc(total, sizeof(*a.t0));
	a.lat = calloc(total, sizeof(*a.lat));
	if (a.t0 == NULL || a.lat == NULL)
		goto out;
	start = now_mono_s();
	if (async_submit(&a) < 0)
		goto out;
	while (a.done < a.total)
		if (event_base_loop(base, EVLOOP_ONCE) < 0)
			goto out;
	if (a.failed != 0) {
		fprintf(stderr, "bench_nft: %zu learns failed\n", a.failed);
		goto out;
	}
	summarize(a.lat, total, total, now_mono_s() - start, r);
	rc = 0;
out:
	free(a.t0);
	free(a.lat);
	return rc;
}

static void
print(const char *what, const struct result *r)
{
	printf("%-34s %10.0f addr/s   p50 %8.3f ms   p99 %8.3f ms\n", what,
	    r->addrs_per_s, r->p50_ms, r->p99_ms);
}

int
main(int argc, char **argv)
{
	struct result l1, l16, lr, f1, f16, a1, a64, a512;
	struct event_base *base;
	struct stats st;
	struct nft_opts o;
	struct policy *p;
	struct nft *n;
	struct err e;
	size_t total = BENCH_N_DEFAULT;

	if (argc > 1)
		total = (size_t)strtoul(argv[1], NULL, 10);
	if (total < 16 || total > BENCH_N_MAX) {
		fprintf(stderr, "N must be 16..%d\n", BENCH_N_MAX);
		return 2;
	}
	total -= total % 16;
	if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) {
		fprintf(stderr,
		    "bench_nft: needs root and a private network "
		    "namespace (%s): skipped\n",
		    strerror(errno));
		return 0;
	}
	nft_opts_init(&o);
	o.ttl_max = 3600;
	o.learned_max = 1u << 20;
	memset(&st, 0, sizeof(st));
	p = policy_new_deny_all();
	base = event_base_new();
	n = nft_new(&o, &st, &e);
	if (p == NULL || n == NULL || base == NULL ||
	    nft_attach(n, base, &e) < 0 || nft_apply_policy(n, p, &e) < 0) {
		fprintf(stderr, "bench_nft: %s\n", e.msg);
		return 1;
	}
	printf("bench_nft: %zu addresses per nft_learn run, %d per fork run\n",
	    total, BENCH_FORK_N);
	if (bench_learn(n, total, 1, 1, &l1) < 0 ||
	    bench_learn(n, total, 16, 2, &l16) < 0)
		return 1;
	print("nft_learn, 1 address/answer", &l1);
	print("nft_learn, 16 addresses/answer", &l16);
	if (bench_learn(n, total, 1, 1, &lr) < 0)
		return 1;
	print("nft_learn refresh, 1/answer", &lr);
	if (bench_fork(BENCH_FORK_N, 1, 3, &f1) < 0 ||
	    bench_fork(BENCH_FORK_N, 16, 4, &f16) < 0) {
		printf("fork reference unavailable (nft binary?)\n");
	} else {
		print("fork nft add element, 1/answer", &f1);
		print("fork nft add element, 16/answer", &f16);
		printf("ratio (throughput, netlink/fork): batch 1 x%.1f, "
		       "batch 16 x%.1f\n",
		    l1.addrs_per_s / f1.addrs_per_s,
		    l16.addrs_per_s / f16.addrs_per_s);
		printf("ratio (p50 latency, fork/netlink): batch 1 x%.1f, "
		       "batch 16 x%.1f\n",
		    f1.p50_ms / l1.p50_ms, f16.p50_ms / l16.p50_ms);
	}
	{
		uint64_t t0 = st.nft_learn_txns;

		if (bench_async(base, n, total, 1, 5, &a1) < 0 ||
		    bench_async(base, n, total, 64, 6, &a64) < 0 ||
		    bench_async(base, n, total, 512, 7, &a512) < 0)
			return 1;
		print("submit, 1 answer in flight", &a1);
		print("submit, 64 answers in flight", &a64);
		print("submit, 512 answers in flight", &a512);
		printf("async: %zu answers in %" PRIu64 " transactions; x%.1f "
		       "nft_learn's throughput at 64 in flight\n",
		    3 * total, st.nft_learn_txns - t0,
		    a64.addrs_per_s / l1.addrs_per_s);
	}
	printf("learned in mirror: %zu\n", nft_learned_count(n));
	nft_free(n);
	event_base_free(base);
	policy_unref(p);
	return 0;
}
