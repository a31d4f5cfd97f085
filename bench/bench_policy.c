/*
 * bench_policy: domain and address lookups per second for policies of
 * 10, 1000 and 100000 rules (the index is O(labels), so the rates should
 * stay within 2x of each other), and the time to load and compile a
 * 100000-rule policy file. Prints results; not a test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy/policy.h"

#define BENCH_LOOKUPS 2000000u
#define BENCH_NAMES 4096u
#define BENCH_NAME_MAX 96u

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A policy of n rules, exact names, wildcards and CIDRs mixed, in JSON or
 * compact YAML; short targets keep 100000 rules under POLICY_FILE_MAX.
 */
static char *
make_policy(size_t n, bool yaml, size_t *len)
{
	size_t cap = 64 + n * 64, o = 0, i;
	char *j = malloc(cap);

	if (j == NULL)
		return NULL;
	o += (size_t)snprintf(
	    j + o, cap - o, yaml ? "egress:\n" : "{\"egress\":[");
	for (i = 0; i < n; i++) {
		const char *sep = yaml ? "- " : i ? "," : "";
		const char *end = yaml ? "\n" : "";
		switch (i % 4) {
		case 0:
		case 1:
			o += (size_t)snprintf(j + o, cap - o,
			    yaml ? "%s{action: allow, target: h%zu.e%zu.com}%s"
			         : "%s{\"action\":\"allow\",\"target\":"
			           "\"h%zu.e%zu.com\"}%s",
			    sep, i, i % 97, end);
			break;
		case 2:
			o += (size_t)snprintf(j + o, cap - o,
			    yaml ? "%s{action: allow, target: '*.z%zu.net'}%s"
			         : "%s{\"action\":\"allow\",\"target\":"
			           "\"*.z%zu.net\"}%s",
			    sep, i, end);
			break;
		default:
			o += (size_t)snprintf(j + o, cap - o,
			    yaml ? "%s{target: 10.%zu.%zu.0/24}%s"
			         : "%s{\"target\":\"10.%zu.%zu.0/24\"}%s",
			    sep, (i >> 8) & 0xff, i & 0xff, end);
		}
	}
	if (!yaml)
		o += (size_t)snprintf(j + o, cap - o, "]}");
	*len = o;
	return j;
}

static struct policy *
load(size_t n, double *secs)
{
	struct policy_diag d;
	struct policy *p;
	size_t len;
	char *j = make_policy(n, false, &len);
	double t0;

	if (j == NULL)
		return NULL;
	policy_diag_init(&d);
	t0 = now_s();
	p = policy_parse_json(j, len, "bench", &d);
	*secs = now_s() - t0;
	if (p == NULL && d.n > 0)
		fprintf(stderr, "load: %s\n", d.msgs[0]);
	policy_diag_clear(&d);
	free(j);
	return p;
}

/* Query names: hits on exact and wildcard rules, and misses. */
static void
make_names(size_t n, char names[][BENCH_NAME_MAX])
{
	size_t i;

	for (i = 0; i < BENCH_NAMES; i++) {
		size_t r = (i * 2654435761u) % (n ? n : 1);
		switch (i % 3) {
		case 0:
			(void)snprintf(names[i], BENCH_NAME_MAX,
			    "h%zu.e%zu.com", r & ~(size_t)3,
			    (r & ~(size_t)3) % 97);
			break;
		case 1:
			(void)snprintf(names[i], BENCH_NAME_MAX, "a.b.z%zu.net",
			    (r & ~(size_t)3) + 2);
			break;
		default:
			(void)snprintf(names[i], BENCH_NAME_MAX,
			    "miss%zu.cdn.example.org", i);
		}
	}
}

static double
bench_domains(
    const struct policy *p, char names[][BENCH_NAME_MAX], size_t *allowed)
{
	double t0 = now_s();
	size_t i;

	*allowed = 0;
	for (i = 0; i < BENCH_LOOKUPS; i++)
		*allowed += policy_match_domain(p, names[i % BENCH_NAMES],
		                NULL) == POLICY_ALLOW;
	return (double)BENCH_LOOKUPS / (now_s() - t0);
}

static double
bench_addrs(const struct policy *p, size_t *denied)
{
	double t0 = now_s();
	uint8_t a[4] = {10, 0, 0, 1};
	size_t i;

	*denied = 0;
	for (i = 0; i < BENCH_LOOKUPS; i++) {
		a[1] = (uint8_t)(i * 7);
		a[2] = (uint8_t)(i * 13);
		*denied += policy_match_addr(p, 4, a, POLICY_PROTO_TCP, 443,
		               NULL) == POLICY_DENY;
	}
	return (double)BENCH_LOOKUPS / (now_s() - t0);
}

/* Writes the 100000-rule policy to a file and times policy_load_file. */
static void
bench_file(bool yaml)
{
	char path[] = "/tmp/egressd-bench-XXXXXX";
	struct policy_diag d;
	struct policy *p;
	size_t len;
	char *buf = make_policy(100000, yaml, &len);
	int fd = mkstemp(path);
	double t0;

	if (buf == NULL || fd == -1 || write(fd, buf, len) != (ssize_t)len) {
		fprintf(stderr, "bench: cannot write %s\n", path);
		free(buf);
		return;
	}
	close(fd);
	free(buf);
	policy_diag_init(&d);
	t0 = now_s();
	p = policy_load_file(path, &d);
	printf("policy_load_file, 100000 rules, %s, %zu bytes: %.3fs%s%s\n",
	    yaml ? "YAML" : "JSON", len, now_s() - t0,
	    p ? "" : " FAILED: ", p ? "" : (d.n ? d.msgs[0] : "?"));
	policy_diag_clear(&d);
	policy_unref(p);
	unlink(path);
}

int
main(void)
{
	static const size_t sizes[] = {10, 1000, 100000};
	static char names[BENCH_NAMES][BENCH_NAME_MAX];
	double rate[3], lo = 0, hi = 0, secs;
	size_t k, allowed, denied;

	for (k = 0; k < 3; k++) {
		struct policy *p = load(sizes[k], &secs);
		if (p == NULL)
			return 1;
		make_names(sizes[k], names);
		rate[k] = bench_domains(p, names, &allowed);
		double ar = bench_addrs(p, &denied);
		printf("rules=%-6zu load+compile=%.3fs domain_lookups/s=%.0f "
		       "(allowed %zu) addr_lookups/s=%.0f (denied %zu)\n",
		    sizes[k], secs, rate[k], allowed, ar, denied);
		if (k == 0 || rate[k] < lo)
			lo = rate[k];
		if (k == 0 || rate[k] > hi)
			hi = rate[k];
		policy_unref(p);
	}
	printf("domain lookup rate spread: %.2fx (%s)\n", hi / lo,
	    hi / lo <= 2.0 ? "within 2x" : "NOT within 2x");
	bench_file(false);
	bench_file(true);
	return 0;
}
