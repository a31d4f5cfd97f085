/*
 * bench_redact: the streaming redactor's throughput on one core (issue 18:
 * >= 1 GB/s with 64 secrets). A vault of 64 inline values of 20 to 100
 * bytes (API-key, base64 and JWT-like alphabets, so '/', '+' and '=' give
 * the percent and JSON forms too), one redactor, 16 KiB feeds, over bodies
 * of 16 MiB: random bytes; JSON-ish text with no secret; that text with
 * one of the 64 values every ~4 KiB (all 64 in turn, raw, as "Bearer v"
 * and in base64, so no value or form is met twice in a row); base64 text
 * of random bytes (the values' own alphabet: the skip filter rarely
 * skips); and near misses (every value's first 2..11 bytes and then a
 * byte that breaks it, back to back: every probe finds candidates and
 * compares them). Each body is streamed until a second of the thread's
 * CPU time has passed, best of three. The masked bytes are counted and checked against the secrets
 * put in, so a redactor that skips work cannot look fast. Prints
 * results; not a test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/policy.h"
#include "vault/vault.h"

#define BENCH_SECRETS 64u
#define BENCH_BODY (16u << 20)
#define BENCH_FEED 16384u
#define BENCH_EVERY 4096u /* bytes between secrets, about */
#define BENCH_MIN_SECONDS 1.0
#define BENCH_ROUNDS 3
#define BENCH_TARGET_MBS 1000.0 /* 1 GB/s */

/* The thread's CPU time: on a loaded machine the wall clock also counts
 * the time other processes had the core. */
static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t
rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static char secrets[BENCH_SECRETS][101];
static size_t nsecrets = BENCH_SECRETS; /* -s: the first this many */

/* 64 values: provider-style keys, base64 and JWT-like tokens. */
static void
make_secrets(uint64_t *x)
{
	static const char *const alpha[] = {
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.",
	};
	static const char *const prefix[] = {
	    "sk-", "ghp_", "", "xoxb-", "AKIA", "glpat-", "", "eyJ"};
	size_t i, j, len, pl;

	for (i = 0; i < BENCH_SECRETS; i++) {
		const char *a = alpha[i % 3];
		size_t al = strlen(a);

		len = 20 + rnd(x) % 81; /* 20..100 */
		pl = strlen(prefix[i % 8]);
		memcpy(secrets[i], prefix[i % 8], pl);
		for (j = pl; j < len; j++)
			secrets[i][j] = a[rnd(x) % al];
		if (i % 3 == 1) /* base64 padding */
			secrets[i][len - 1] = '=';
		secrets[i][len] = '\0';
	}
}

static struct vault *
make_vault(void)
{
	size_t cap = 64 + BENCH_SECRETS * 200, o = 0, i;

	char *y = malloc(cap);
	struct policy_diag d;
	struct policy *p;
	struct vault *v;
	struct err e;

	if (y == NULL)
		return NULL;
	o += (size_t)snprintf(y + o, cap - o, "credentials:\n");
	for (i = 0; i < nsecrets; i++)
		o += (size_t)snprintf(y + o, cap - o,
		    "  - {name: c%zu, source: {type: inline, value: '%s'}}\n",
		    i, secrets[i]);
	if (o >= cap) {
		free(y);
		return NULL;
	}
	policy_diag_init(&d);
	p = policy_parse_yaml(y, o, "bench", &d);
	free(y);
	if (p == NULL) {
		fprintf(stderr, "policy: %s\n", d.n ? d.msgs[0] : "?");
		policy_diag_clear(&d);
		return NULL;
	}
	policy_diag_clear(&d);
	if ((v = vault_new(p, NULL, &e)) == NULL)
		fprintf(stderr, "vault_new: %s\n", e.msg);
	policy_unref(p);
	return v;
}

static const char *const words[] = {"\"id\": ", "\"name\": \"", "\", ",
    "\"items\": [", "], ", "{", "}",
    "\"created_at\": \"2026-12-04T17:", "\"model\": \"gpt\", ",
    "\"content\": \"The quick brown fox ", "jumps over the lazy dog. ",
    "\"usage\": {\"tokens\": ", "null, ", "true, ",
    "\"object\": \"chat.completion\", ", "\n"};

/* Unpadded standard base64 of v[0..n) into o; returns its length. */
static size_t
b64(const char *v, size_t n, char *o)
{
	static const char al[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const uint8_t *u = (const uint8_t *)v;
	size_t i, k = 0;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t x =
		    (uint32_t)u[i] << 16 | (uint32_t)u[i + 1] << 8 | u[i + 2];

		o[k++] = al[x >> 18 & 63];
		o[k++] = al[x >> 12 & 63];
		o[k++] = al[x >> 6 & 63];
		o[k++] = al[x & 63];
	}
	if (n - i >= 1) {
		uint32_t x = (uint32_t)u[i] << 16 |
		    (n - i == 2 ? (uint32_t)u[i + 1] << 8 : 0);

		o[k++] = al[x >> 18 & 63];
		o[k++] = al[x >> 12 & 63];
		if (n - i == 2)
			o[k++] = al[x >> 6 & 63];
	}
	return k;
}

/* JSON-ish text; with secrets, one rendered value every ~BENCH_EVERY
 * bytes: the 64 values in turn, raw, "Bearer v" or base64 by turns.
 * Returns how many bytes the secrets cover. */
static size_t
make_text(uint8_t *b, size_t n, bool with_secrets, uint64_t *x)
{
	size_t o = 0, next = BENCH_EVERY, covered = 0, turn = 0;
	char num[32], form[256];

	while (o < n) {
		const char *w =
		    words[rnd(x) % (sizeof(words) / sizeof(*words))];
		size_t l = strlen(w);

		if (rnd(x) % 4 == 0) {
			l = (size_t)snprintf(num, sizeof(num), "%u, ",
			    (unsigned)(rnd(x) % 100000));
			w = num;
		}
		if (with_secrets && o >= next) {
			const char *s = secrets[turn % nsecrets];
			size_t sl;

			switch (turn++ / nsecrets % 3) {
			case 0:
				sl = (size_t)snprintf(
				    form, sizeof(form), "%s", s);
				break;
			case 1:
				sl = (size_t)snprintf(
				    form, sizeof(form), "Bearer %s", s);
				break;
			default:
				sl = b64(s, strlen(s), form);
				break;
			}
			if (o + sl + 2 > n)
				break;
			b[o++] = '"';
			memcpy(b + o, form, sl);
			o += sl;
			b[o++] = '"';
			covered += sl;
			next = o + BENCH_EVERY - 512 + rnd(x) % 1024;
			continue;
		}
		if (o + l > n)
			break;
		memcpy(b + o, w, l);
		o += l;
	}
	memset(b + o, ' ', n - o);
	return covered;
}

/* Base64 lines (76 columns) of random bytes. */
static void
make_b64(uint8_t *b, size_t n, uint64_t *x)
{
	size_t o = 0, k;
	char raw[57], line[80];

	while (o < n) {
		for (k = 0; k < sizeof(raw); k++)
			raw[k] = (char)rnd(x);
		k = b64(raw, sizeof(raw), line);
		line[k++] = '\n';
		if (k > n - o)
			k = n - o;
		memcpy(b + o, line, k);
		o += k;
	}
}

/* Near misses: a value's first 2..VAULT_PIECE_MIN - 1 bytes (a run of
 * VAULT_PIECE_MIN is masked: issue 34's pieces), then a byte that is not
 * its next one, over and over (every value in turn). */
static void
make_near(uint8_t *b, size_t n, uint64_t *x)
{
	size_t o = 0, turn = 0;

	while (o < n) {
		const char *s = secrets[turn++ % nsecrets];
		size_t sl = strlen(s), k;

		if (sl > VAULT_PIECE_MIN)
			sl = VAULT_PIECE_MIN;
		k = 2 + rnd(x) % (sl - 2);

		if (o + k + 1 > n)
			break;
		memcpy(b + o, s, k);
		o += k;
		b[o++] = s[k] == '#' ? '!' : '#';
	}
	memset(b + o, '#', n - o);
}

struct count {
	size_t bytes, masked;
};

/* The timed sink: what a socket write would get, without the copy. */
static void
count_emit(void *arg, const uint8_t *p, size_t n)
{
	struct count *c = arg;

	(void)p;
	c->bytes += n;
}

/* The checking sink (one untimed pass): '*' never occurs in the text
 * bodies but as a mask. */
static void
mask_emit(void *arg, const uint8_t *p, size_t n)
{
	struct count *c = arg;
	size_t i;

	c->bytes += n;
	for (i = 0; i < n; i++)
		c->masked += p[i] == '*';
}

/* MB/s of one pass over b (best of BENCH_ROUNDS, each >= 1 s). */
static double
run(struct vault_redactor *r, const uint8_t *b, size_t n, size_t *masked)
{
	struct count m = {0, 0};
	double best = 0;
	size_t o;
	int round;

	for (o = 0; o < n; o += BENCH_FEED)
		vault_redact_feed(r, b + o,
		    n - o < BENCH_FEED ? n - o : BENCH_FEED, mask_emit, &m);
	vault_redact_finish(r, mask_emit, &m);
	if (m.bytes != n) {
		fprintf(stderr, "emitted %zu of %zu bytes\n", m.bytes, n);
		exit(1);
	}
	*masked = m.masked;
	for (round = 0; round < BENCH_ROUNDS; round++) {
		struct count c = {0, 0};
		size_t passes = 0;
		double t0 = now_s(), t;

		do {
			for (o = 0; o < n; o += BENCH_FEED)
				vault_redact_feed(r, b + o,
				    n - o < BENCH_FEED ? n - o : BENCH_FEED,
				    count_emit, &c);
			vault_redact_finish(r, count_emit, &c);
			passes++;
		} while ((t = now_s() - t0) < BENCH_MIN_SECONDS);
		if (c.bytes != passes * n) {
			fprintf(stderr, "emitted %zu of %zu bytes\n", c.bytes,
			    passes * n);
			exit(1);
		}
		if ((double)(passes * n) / t / 1e6 > best)
			best = (double)(passes * n) / t / 1e6;
	}
	return best;
}

#define BENCH_BODIES 5

static bool
wanted(int argc, char **argv, size_t body)
{
	int k;

	for (k = 1; k < argc; k++)
		if (strtoul(argv[k], NULL, 10) == body)
			return true;
	return argc < 2;
}

/* Usage: bench_redact [-s N] [BODY...]: a vault of the first N values
 * (default 64); the bodies to run, by number (0-4, as printed; default
 * all), e.g. one alone under perf. */
int
main(int argc, char **argv)
{
	static const char *const names[BENCH_BODIES] = {"random bytes",
	    "JSON-ish, no secret", "JSON-ish, the secrets in turn",
	    "base64 text, no secret", "near misses, no secret"};
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct vault_redactor *r;
	struct vault *v;
	uint8_t *b;
	double mbs[BENCH_BODIES];
	size_t i, k, covered = 0, masked = 0;
	int rc = 0;

	if (argc > 2 && strcmp(argv[1], "-s") == 0) {
		nsecrets = strtoul(argv[2], NULL, 10);
		if (nsecrets < 1 || nsecrets > BENCH_SECRETS)
			return 2;
		argc -= 2;
		argv += 2;
	}
	make_secrets(&x);
	if ((v = make_vault()) == NULL || (r = vault_redactor_new(v)) == NULL ||
	    (b = malloc(BENCH_BODY)) == NULL)
		return 1;
	printf("bench_redact: %zu secrets of 20-100 bytes, holdback %zu, "
	       "%u KiB feeds, %u MiB bodies, best of %d\n",
	    nsecrets, vault_redact_holdback(v), BENCH_FEED / 1024,
	    BENCH_BODY >> 20, BENCH_ROUNDS);
	for (i = 0; i < BENCH_BODIES; i++) {
		size_t stars = 0;

		mbs[i] = 0;
		if (!wanted(argc, argv, i))
			continue;
		covered = 0;
		switch (i) {
		case 0:
			for (k = 0; k < BENCH_BODY; k += 8) {
				uint64_t w = rnd(&x);

				memcpy(b + k, &w, 8);
			}
			/* '*' is counted as masked: as many as are there */
			for (k = 0; k < BENCH_BODY; k++)
				stars += b[k] == '*';
			break;
		case 1:
		case 2:
			covered = make_text(b, BENCH_BODY, i == 2, &x);
			break;
		case 3:
			make_b64(b, BENCH_BODY, &x);
			break;
		default:
			make_near(b, BENCH_BODY, &x);
			break;
		}
		mbs[i] = run(r, b, BENCH_BODY, &masked);
		printf("%-32s %8.0f MB/s  masked %zu bytes\n", names[i], mbs[i],
		    masked);
		/* The bodies hold no '*' but the masks (and random bytes
		 * their own). */
		if (masked != covered + stars) {
			fprintf(stderr,
			    "%s: masked %zu bytes, secrets cover "
			    "%zu\n",
			    names[i], masked, covered + stars);
			rc = 1;
		}
	}
	for (i = 0; i < BENCH_BODIES; i++)
		if (wanted(argc, argv, i))
			printf("%-32s / target = %.2fx (%s 1 GB/s)\n", names[i],
			    mbs[i] / BENCH_TARGET_MBS,
			    mbs[i] >= BENCH_TARGET_MBS ? ">=" : "NOT >=");
	vault_redactor_free(r);
	vault_free(v);
	free(b);
	return rc;
}
