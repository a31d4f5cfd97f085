/*
 * vault_redact.c: the rendered forms of each value (written out here by
 * hand, from an independent encoder, so a wrong form fails), streaming
 * redaction against a naive reference for every split of the input, the
 * hold-back bound, overlapping occurrences, and header values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ts_policy.h"
#include "vault/vault.h"

/* Credential p's value is a/b c+d"e\f (YAML single quotes keep the
 * backslash); u is bound to nothing and redacted all the same. */
static const char *const pol =
    "defaultAction: deny\n"
    "egress:\n"
    "  - {action: allow, target: api.example.com}\n"
    "credentials:\n"
    "  - {name: k, source: {type: inline, value: s3cr3t-K}}\n"
    "  - {name: p, source: {type: inline, value: 'a/b c+d\"e\\f'}}\n"
    "  - {name: u, source: {type: inline, value: unused-U}}\n"
    "bindings:\n"
    "  - name: b\n"
    "    match: {hosts: [api.example.com]}\n"
    "    auth: {type: bearer, credential: k}\n";

/* Every form of every value of pol (Python's base64, urllib.parse.quote
 * with safe "-._~", quote_plus, json.dumps). */
static const char *const forms[] = {
    "s3cr3t-K",
    "Bearer s3cr3t-K",
    "czNjcjN0LUs",
    "a/b c+d\"e\\f",
    "Bearer a/b c+d\"e\\f",
    "YS9iIGMrZCJlXGY",
    "a%2Fb%20c%2Bd%22e%5Cf",
    "a%2fb%20c%2bd%22e%5cf",
    "a%2Fb+c%2Bd%22e%5Cf",
    "a/b c+d\\\"e\\\\f",
    "a\\/b c+d\\\"e\\\\f",
    "unused-U",
    "Bearer unused-U",
    "dW51c2VkLVU",
};
#define NFORMS (sizeof(forms) / sizeof(forms[0]))
#define LONGEST 18 /* Bearer a/b c+d"e\\f (longer forms: in pieces) */

static struct vault *
vault_of(const char *yaml)
{
	struct policy *p = ts_policy_yaml(yaml, "r.yaml");
	struct err e;
	struct vault *v;

	v = vault_new(p, NULL, &e);
	if (v == NULL)
		fail_msg("vault_new: %s", e.msg);
	policy_unref(p);
	return v;
}

/* What the client must receive: every byte of every occurrence of a
 * pattern as '*' (naive); a form longer than VAULT_PIECE_MIN (but for
 * "Bearer v", listed here only for short values) every occurrence of each
 * of its VAULT_PIECE_MIN-byte runs. */
static void
reference(const char *const *pats, size_t npats, const uint8_t *in, size_t n,
    uint8_t *out)
{
	size_t i, k, j;

	memcpy(out, in, n);
	for (k = 0; k < npats; k++) {
		size_t l = strlen(pats[k]);

		if (l <= VAULT_PIECE_MIN ||
		    strncmp(pats[k], "Bearer ", 7) == 0) {
			for (i = 0; i + l <= n; i++)
				if (memcmp(in + i, pats[k], l) == 0)
					memset(out + i, '*', l);
			continue;
		}
		for (j = 0; j + VAULT_PIECE_MIN <= l; j++)
			for (i = 0; i + VAULT_PIECE_MIN <= n; i++)
				if (memcmp(in + i, pats[k] + j,
				        VAULT_PIECE_MIN) == 0)
					memset(out + i, '*', VAULT_PIECE_MIN);
	}
}

/* Does any run of VAULT_PIECE_MIN bytes of f[0..fl) (or f whole, when
 * shorter) occur in p[0..n)? */
static bool
has_piece(const uint8_t *p, size_t n, const char *f, size_t fl)
{
	size_t j, w = fl < VAULT_PIECE_MIN ? fl : VAULT_PIECE_MIN;

	for (j = 0; j + w <= fl; j++)
		if (memmem(p, n, f + j, w) != NULL)
			return true;
	return false;
}

struct sink {
	uint8_t buf[1 << 16];
	size_t n;
};

static void
sink_emit(void *arg, const uint8_t *p, size_t n)
{
	struct sink *s = arg;

	assert_true(n > 0);
	assert_true(s->n + n <= sizeof(s->buf));
	memcpy(s->buf + s->n, p, n);
	s->n += n;
}

/* Feeds in[0..n) in pieces cut at cuts[0..ncuts) (ascending); with
 * flush, vault_redact_flush after each piece (a stream that pauses). */
static void
run_ex(struct vault_redactor *r, const uint8_t *in, size_t n,
    const size_t *cuts, size_t ncuts, struct sink *s, bool flush)
{
	size_t at = 0, i;

	s->n = 0;
	for (i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;

		vault_redact_feed(r, in + at, end - at, sink_emit, s);
		if (flush)
			vault_redact_flush(r, sink_emit, s);
		at = end;
	}
	vault_redact_finish(r, sink_emit, s);
}

static void
run(struct vault_redactor *r, const uint8_t *in, size_t n, const size_t *cuts,
    size_t ncuts, struct sink *s)
{
	run_ex(r, in, n, cuts, ncuts, s, false);
}

static void
test_forms(void **state)
{
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	uint8_t in[128], want[128];
	struct sink *s = malloc(sizeof(*s));
	size_t i, n, hl;
	char *h;

	(void)state;
	assert_non_null(r);
	assert_int_equal(vault_redact_holdback(v), LONGEST - 1);
	for (i = 0; i < NFORMS; i++) {
		n = (size_t)snprintf(
		    (char *)in, sizeof(in), "<<%s>>", forms[i]);
		memcpy(want, in, n);
		memset(want + 2, '*', strlen(forms[i]));
		run(r, in, n, NULL, 0, s);
		assert_int_equal(s->n, n);
		if (memcmp(s->buf, want, n) != 0)
			fail_msg("form \"%s\": got \"%.*s\"", forms[i], (int)n,
			    s->buf);
		h = vault_redact_header(v, (const char *)in, n, &hl);
		assert_non_null(h);
		assert_string_equal(h, "<<[REDACTED]>>");
		assert_int_equal(hl, 14);
		free(h);
	}
	/* near misses are left alone */
	n = (size_t)snprintf((char *)in, sizeof(in),
	    "s3cr3t-k s3cr3t- czNjcjN0L a%%2Fb%%20c%%2 %%20c%%2Bd%%22");
	run(r, in, n, NULL, 0, s);
	assert_int_equal(s->n, n);
	assert_memory_equal(s->buf, in, n);
	assert_null(vault_redact_header(v, (const char *)in, n, &hl));
	assert_int_equal(hl, 0);
	vault_redactor_free(r);
	free(s);
	vault_free(v);
}

static size_t
build_input(uint8_t *in, size_t cap)
{
	size_t n = 0, i;

	/* Every form, with noise that shares their first bytes. */
	for (i = 0; i < NFORMS; i++)
		n += (size_t)snprintf((char *)in + n, cap - n, "%s s3cr %s aB",
		    i % 2 ? "Bear" : "a%2F", forms[i]);
	/* Back to back, and at the very end. */
	n += (size_t)snprintf(
	    (char *)in + n, cap - n, "s3cr3t-Ks3cr3t-Kunused-U");
	assert_true(n < cap);
	return n;
}

static void
test_split_every_offset(void **state)
{
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	uint8_t in[1024], want[1024];
	size_t n, i, j, cuts[2];

	(void)state;
	n = build_input(in, sizeof(in));
	reference(forms, NFORMS, in, n, want);
	/* one piece */
	run(r, in, n, NULL, 0, s);
	assert_int_equal(s->n, n);
	assert_memory_equal(s->buf, want, n);
	/* two pieces, every cut */
	for (i = 0; i <= n; i++) {
		cuts[0] = i;
		run(r, in, n, cuts, 1, s);
		assert_int_equal(s->n, n);
		if (memcmp(s->buf, want, n) != 0)
			fail_msg("cut at %zu: %.*s", i, (int)n, s->buf);
	}
	/* three pieces: every pair of cuts within a window of the longest
	 * pattern (a match spanning three feeds) */
	for (i = 0; i <= n; i++)
		for (j = i; j <= n && j <= i + LONGEST; j++) {
			cuts[0] = i;
			cuts[1] = j;
			run(r, in, n, cuts, 2, s);
			assert_int_equal(s->n, n);
			if (memcmp(s->buf, want, n) != 0)
				fail_msg("cuts at %zu, %zu", i, j);
		}
	vault_redactor_free(r);
	free(s);
	vault_free(v);
}

static void
test_bytewise_holdback(void **state)
{
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	uint8_t in[1024], want[1024];
	size_t n, i;

	(void)state;
	n = build_input(in, sizeof(in));
	reference(forms, NFORMS, in, n, want);
	s->n = 0;
	for (i = 0; i < n; i++) {
		vault_redact_feed(r, in + i, 1, sink_emit, s);
		/* never more held back than the longest pattern - 1 */
		assert_true(i + 1 - s->n <= LONGEST - 1);
		if (i + 1 >= LONGEST - 1)
			assert_int_equal(i + 1 - s->n, LONGEST - 1);
	}
	vault_redact_finish(r, sink_emit, s);
	assert_int_equal(s->n, n);
	assert_memory_equal(s->buf, want, n);
	/* a second stream on the same redactor */
	run(r, in, n, NULL, 0, s);
	assert_memory_equal(s->buf, want, n);
	vault_redactor_free(r);
	free(s);
	vault_free(v);
}

/* Deterministic pseudo-random bytes (xorshift). */
static uint32_t
rnd(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

static void
test_random_no_leak(void **state)
{
	static const char alpha[] = "s3cr3t-KaBe% /\\\"2FcY";
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	uint8_t *in = malloc(8192), *want = malloc(8192);
	uint32_t x = 0x2545f491;
	size_t round, n, i, k, cuts[64], ncuts;

	(void)state;
	for (round = 0; round < 300; round++) {
		n = 0;
		while (n < 4000) {
			if (rnd(&x) % 8 == 0) {
				const char *f = forms[rnd(&x) % NFORMS];

				memcpy(in + n, f, strlen(f));
				n += strlen(f);
			} else {
				in[n++] = (uint8_t)
				    alpha[rnd(&x) % (sizeof(alpha) - 1)];
			}
		}
		ncuts = rnd(&x) % 64;
		for (i = 0; i < ncuts; i++)
			cuts[i] = rnd(&x) % (n + 1);
		/* ascending */
		for (i = 1; i < ncuts; i++)
			for (k = i; k > 0 && cuts[k - 1] > cuts[k]; k--) {
				size_t t = cuts[k];

				cuts[k] = cuts[k - 1];
				cuts[k - 1] = t;
			}
		reference(forms, NFORMS, in, n, want);
		run_ex(r, in, n, cuts, ncuts, s, round % 2 == 1);
		assert_int_equal(s->n, n);
		assert_memory_equal(s->buf, want, n);
		for (k = 0; k < NFORMS; k++)
			assert_null(
			    memmem(s->buf, n, forms[k], strlen(forms[k])));
	}
	vault_redactor_free(r);
	free(in);
	free(want);
	free(s);
	vault_free(v);
}

/*
 * A flush hands over everything that cannot begin a secret and keeps
 * only a possible beginning: an SSE event is not held back until the
 * next one, and a secret split across the pause is still masked.
 */
static void
test_flush(void **state)
{
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = calloc(1, sizeof(*s));
	const char *ev = "data: event 0\n\n";

	(void)state;
	assert_true(vault_redact_holdback(v) > strlen(ev));
	vault_redact_feed(r, (const uint8_t *)ev, strlen(ev), sink_emit, s);
	assert_int_equal(s->n, 0); /* held: shorter than the longest form */
	vault_redact_flush(r, sink_emit, s);
	assert_int_equal(s->n, strlen(ev));
	assert_memory_equal(s->buf, ev, strlen(ev));
	/* "s3cr3" may begin "s3cr3t-K": kept; "data: " is not */
	vault_redact_feed(r, (const uint8_t *)"data: s3cr3", 11, sink_emit, s);
	vault_redact_flush(r, sink_emit, s);
	assert_int_equal(s->n, strlen(ev) + 6);
	vault_redact_feed(r, (const uint8_t *)"t-K\n", 4, sink_emit, s);
	vault_redact_flush(r, sink_emit, s);
	vault_redact_finish(r, sink_emit, s);
	assert_int_equal(s->n, strlen(ev) + 15);
	assert_memory_equal(s->buf + strlen(ev), "data: ********\n", 15);
	vault_redactor_free(r);
	free(s);
	vault_free(v);
}

/* Occurrences that overlap are all covered, in streams and headers. */
static void
test_overlap(void **state)
{
	struct vault *v = vault_of(
	    "credentials: [{name: o, source: {type: inline, value: abab}}]\n");
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	const char *in = "xababababy abab";
	size_t hl;
	char *h;

	(void)state;
	run(r, (const uint8_t *)in, strlen(in), NULL, 0, s);
	assert_int_equal(s->n, strlen(in));
	assert_memory_equal(s->buf, "x********y ****", s->n);
	h = vault_redact_header(v, in, strlen(in), &hl);
	assert_string_equal(h, "x[REDACTED]y [REDACTED]");
	assert_int_equal(hl, strlen(h));
	free(h);
	vault_redactor_free(r);
	free(s);
	vault_free(v);
}

static void
test_header(void **state)
{
	struct vault *v = vault_of(pol);
	const char *in;
	size_t hl;
	char *h;

	(void)state;
	in = "Bearer s3cr3t-K";
	h = vault_redact_header(v, in, strlen(in), &hl);
	assert_string_equal(h, "[REDACTED]");
	free(h);
	in = "token=s3cr3t-Ks3cr3t-K; b64=czNjcjN0LUs=; u=unused-U";
	h = vault_redact_header(v, in, strlen(in), &hl);
	assert_string_equal(
	    h, "token=[REDACTED]; b64=[REDACTED]=; u=[REDACTED]");
	assert_int_equal(hl, strlen(h));
	free(h);
	/* n bounds the value: the secret past it is not looked at */
	in = "x s3cr3t-K";
	assert_null(vault_redact_header(v, in, 5, &hl));
	assert_null(vault_redact_header(v, in, 0, &hl));
	vault_free(v);
}

static void
test_no_credentials(void **state)
{
	struct vault *v = vault_of("defaultAction: allow\n");
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	size_t hl;

	(void)state;
	assert_int_equal(vault_redact_holdback(v), 0);
	s->n = 0;
	vault_redact_feed(r, (const uint8_t *)"abc", 3, sink_emit, s);
	assert_int_equal(s->n, 3);
	vault_redact_finish(r, sink_emit, s);
	assert_int_equal(s->n, 3);
	assert_null(vault_redact_header(v, "abc", 3, &hl));
	vault_redactor_free(r);
	vault_redactor_free(NULL);
	free(s);
	vault_free(v);
}

/* A large stream (more than one internal chunk) with secrets at chunk
 * boundaries of the feeder. */
static void
test_large(void **state)
{
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	size_t n = 60000, i, off;
	uint8_t *in = malloc(n), *want = malloc(n);
	struct sink *s = malloc(sizeof(*s));
	size_t cuts[16];

	(void)state;
	memset(in, 'x', n);
	for (off = 100; off + 30 < n; off += 4093)
		memcpy(
		    in + off, forms[off % NFORMS], strlen(forms[off % NFORMS]));
	/* straddling 16384 and 32768 (the redactor's own chunk size) */
	memcpy(in + 16380, "s3cr3t-K", 8);
	memcpy(in + 32760, "a%2Fb%20c%2Bd%22e%5Cf", 21);
	reference(forms, NFORMS, in, n, want);
	for (i = 0; i < 16; i++)
		cuts[i] = (i + 1) * 3500;
	run(r, in, n, cuts, 16, s);
	assert_int_equal(s->n, n);
	assert_memory_equal(s->buf, want, n);
	run(r, in, n, NULL, 0, s);
	assert_memory_equal(s->buf, want, n);
	free(in);
	free(want);
	free(s);
	vault_redactor_free(r);
	vault_free(v);
}

/*
 * The skip filter (a window as long as the shortest form moves by the
 * shift of its last two bytes): noise made of the value's own bytes, so
 * shifts of every size occur, with occurrences at every offset; and a
 * value whose shortest form is too short for the filter (every position
 * probed). Both against the naive reference, in one piece and in pieces.
 */
static void
test_skip_filter(void **state)
{
	static const char *const f8[] = {
	    "k9Zq-Xw7", "Bearer k9Zq-Xw7", "azlacS1Ydzc"};
	static const char *const f3[] = {"k9Z", "Bearer k9Z", "azla"};
	static const struct {
		const char *yaml;
		const char *const *forms;
		size_t nforms;
	} cases[] = {
	    {"credentials: [{name: a, source: {type: inline, value: "
	     "k9Zq-Xw7}}]\n",
	        f8, 3},
	    {"credentials: [{name: a, source: {type: inline, value: k9Z}}]\n",
	        f3, 3},
	};
	struct sink *s = malloc(sizeof(*s));
	size_t n = 40000, c, i, k, cuts[16];
	uint8_t *in = malloc(n), *want = malloc(n);
	uint32_t x = 0x1234567;

	(void)state;
	for (c = 0; c < 2; c++) {
		struct vault *v = vault_of(cases[c].yaml);
		struct vault_redactor *r = vault_redactor_new(v);
		const char *val = cases[c].forms[0];

		for (i = 0; i < n; i++)
			in[i] = (uint8_t)val[rnd(&x) % strlen(val)];
		for (i = 7, k = 0; i + 16 < n; i += 53 + k % 17, k++) {
			const char *f = cases[c].forms[k % cases[c].nforms];

			memcpy(in + i, f, strlen(f));
		}
		reference(cases[c].forms, cases[c].nforms, in, n, want);
		run(r, in, n, NULL, 0, s);
		assert_int_equal(s->n, n);
		assert_memory_equal(s->buf, want, n);
		for (i = 0; i < 16; i++)
			cuts[i] = (i + 1) * 2311 + rnd(&x) % 64;
		run(r, in, n, cuts, 16, s);
		assert_int_equal(s->n, n);
		assert_memory_equal(s->buf, want, n);
		vault_redactor_free(r);
		vault_free(v);
	}
	free(in);
	free(want);
	free(s);
}

/*
 * Candidates are looked up by their first q bytes (the shortest form's
 * length, at most 8): values that share those bytes, one a prefix of
 * another, must still match longest first (a shorter match would leave
 * the longer value's tail in the clear), near misses that share q bytes
 * or more must not match, and q below 8 works the same. Every split.
 */
static void
test_groups(void **state)
{
	static const char *const vals8[] = {
	    "tok-1234", "tok-12345678", "tok-12345678-extra"};
	static const char *const vals5[] = {
	    "tok-1234", "tok-12345678", "tok-12345678-extra", "q5xyz"};
	static const struct {
		const char *const *vals;
		size_t n;
	} cases[] = {{vals8, 3}, {vals5, 4}};
	struct sink *s = malloc(sizeof(*s));
	uint8_t in[512], want[512];
	char y[512];
	size_t c, i, k, n, o, cut;

	(void)state;
	for (c = 0; c < 2; c++) {
		struct vault *v;
		struct vault_redactor *r;

		o = (size_t)snprintf(y, sizeof(y), "credentials:\n");
		for (k = 0; k < cases[c].n; k++)
			o += (size_t)snprintf(y + o, sizeof(y) - o,
			    "  - {name: c%zu, source: {type: inline, value: "
			    "%s}}\n",
			    k, cases[c].vals[k]);
		v = vault_of(y);
		r = vault_redactor_new(v);
		n = (size_t)snprintf((char *)in, sizeof(in),
		    "a tok-12345678-extra b tok-12345678-extrX c tok-1234567X "
		    "d tok-123X e tok-12345678-extratok-1234 f q5xy q5xyzq5xyz "
		    "tok-1234");
		reference(cases[c].vals, cases[c].n, in, n, want);
		for (cut = 0; cut <= n; cut++) {
			run(r, in, n, &cut, 1, s);
			assert_int_equal(s->n, n);
			if (memcmp(s->buf, want, n) != 0)
				fail_msg("case %zu, cut at %zu: %.*s", c, cut,
				    (int)n, s->buf);
		}
		for (i = 0; i < cases[c].n; i++)
			assert_null(memmem(s->buf, n, cases[c].vals[i],
			    strlen(cases[c].vals[i])));
		vault_redactor_free(r);
		vault_free(v);
	}
	free(s);
}

/*
 * The skip filter's lanes (vault_redact.c): a lane ahead of the probing
 * one queues its candidates and stops when its queue is full; the
 * probing lane must then go on exactly where it stopped. With the value
 * "aaaaaaaa" every window ending in "aa" is a candidate, so a run of
 * about 258 'a' in the second lane's chunk (20000 bytes in one piece:
 * four chunks of about 5000) has about 257 of them: for one of the
 * lengths and offsets tried (where the filter's first candidate falls
 * depends on its jumps over the dots) the queue (256) fills at the one
 * before the run's last match, which alone covers the run's last byte.
 * Then runs of other lengths across the lanes' boundaries.
 */
static void
test_lanes(void **state)
{
	static const char *const pats[] = {"aaaaaaaa"};
	struct vault *v =
	    vault_of("credentials: [{name: a, source: {type: inline, value: "
	             "aaaaaaaa}}]\n");
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	size_t n = 20000, i, k, len;
	uint8_t *in = malloc(n), *want = malloc(n);

	(void)state;
	for (k = 1; k < 4 + 16 * 7; k++) {
		memset(in, '.', n);
		if (k >= 4)
			memset(in + 5100 + (k - 4) % 7, 'a', 250 + (k - 4) / 7);
		else
			/* runs of 7..300 across the lanes' boundaries */
			for (i = 60 * k, len = 7; i + len < n;
			     i += 5000 - 3 * k, len = len * 7 % 293 + 7)
				memset(in + i - len / 2, 'a', len);
		reference(pats, 1, in, n, want);
		run(r, in, n, NULL, 0, s);
		assert_int_equal(s->n, n);
		if (memcmp(s->buf, want, n) != 0)
			fail_msg("layout %zu", k);
	}
	vault_redactor_free(r);
	vault_free(v);
	free(in);
	free(want);
	free(s);
}

/*
 * The in-place interface as the proxy uses it: the response arrives in
 * writes, each write in the caller's buffer as one or more pieces (an
 * evbuffer's chains); each write is one vault_redact_scan over all its
 * pieces. The caller consumes its bytes as the spans come, and scribbles
 * over them at once (a form's bytes, so a byte the redactor read again
 * after releasing it would change the output); a clean span must point
 * at the caller's first unconsumed byte; every byte of a write is
 * consumed by the end of its scan.
 */
struct caller {
	struct sink *s;
	uint8_t *front; /* the caller's first unconsumed byte */
	size_t left; /* its unconsumed bytes in this write */
	size_t spans;
};

static void
scribble(uint8_t *p, size_t n)
{
	static const char f[] = "s3cr3t-K";
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)f[i % 8];
}

static void
caller_span(void *arg, const uint8_t *p, size_t n, unsigned flags)
{
	struct caller *c = arg;
	struct sink *s = c->s;

	assert_true(n > 0);
	c->spans++;
	if (flags & VAULT_SPAN_HELD) {
		assert_false(flags & VAULT_SPAN_KEPT);
		assert_true(s->n + n <= sizeof(s->buf));
		if (flags & VAULT_SPAN_MASKED)
			memset(s->buf + s->n, '*', n);
		else
			memcpy(s->buf + s->n, p, n);
		s->n += n;
		return;
	}
	assert_true(n <= c->left);
	if (flags & VAULT_SPAN_KEPT)
		assert_null(p);
	else if (flags & VAULT_SPAN_MASKED) {
		assert_null(p);
		memset(s->buf + s->n, '*', n);
		s->n += n;
	} else {
		assert_ptr_equal(p, c->front);
		memcpy(s->buf + s->n, p, n);
		s->n += n;
	}
	scribble(c->front, n);
	c->front += n;
	c->left -= n;
}

/* One write: in[0..n) (a copy, scribbled on) in pieces cut at cuts[]
 * (offsets into it, ascending). */
static void
scan_write(struct vault_redactor *r, uint8_t *in, size_t n, const size_t *cuts,
    size_t ncuts, enum vault_redact_mode mode, struct caller *c)
{
	struct vault_seg seg[8];
	size_t i, at = 0, k = 0;

	assert_true(ncuts < 8);
	for (i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : n;

		seg[k].p = in + at;
		seg[k++].n = end - at;
		at = end;
	}
	c->front = in;
	c->left = n;
	vault_redact_scan(r, seg, k, mode, caller_span, c);
	assert_int_equal(c->left, 0);
}

static void
test_scan_pieces(void **state)
{
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	struct caller c = {s, NULL, 0, 0};
	uint8_t in[1024], want[1024], buf[1024];
	size_t n, i, j, cuts[2];
	int mode;

	(void)state;
	n = build_input(in, sizeof(in));
	reference(forms, NFORMS, in, n, want);
	for (mode = 0; mode < 2; mode++) {
		enum vault_redact_mode md =
		    mode == 0 ? VAULT_REDACT_MORE : VAULT_REDACT_FLUSH;

		/* one write in two or three pieces: every boundary, and
		 * every pair within the longest form (a form over three
		 * pieces) */
		for (i = 0; i <= n; i++)
			for (j = i; j <= n && j <= i + LONGEST; j++) {
				memcpy(buf, in, n);
				cuts[0] = i;
				cuts[1] = j;
				s->n = 0;
				scan_write(
				    r, buf, n, cuts, j == i ? 1 : 2, md, &c);
				scan_write(r, buf + n, 0, NULL, 0,
				    VAULT_REDACT_END, &c);
				assert_int_equal(s->n, n);
				if (memcmp(s->buf, want, n) != 0)
					fail_msg(
					    "pieces cut at %zu, %zu", i, j);
			}
		/* two writes (one split at i, the second in two pieces at
		 * j): a form across writes and pieces at once */
		for (i = 0; i <= n; i++)
			for (j = i; j <= n && j <= i + LONGEST; j++) {
				memcpy(buf, in, n);
				cuts[0] = j - i;
				s->n = 0;
				scan_write(r, buf, i, NULL, 0, md, &c);
				/* at most the longest form - 1 held, and after
				 * a flush only a form's possible beginning */
				assert_true(i - s->n <= LONGEST - 1);
				if (md == VAULT_REDACT_MORE)
					assert_int_equal(i - s->n,
					    i < LONGEST - 1 ? i : LONGEST - 1);
				scan_write(r, buf + i, n - i, cuts, 1, md, &c);
				scan_write(r, buf + n, 0, NULL, 0,
				    VAULT_REDACT_END, &c);
				assert_int_equal(s->n, n);
				if (memcmp(s->buf, want, n) != 0)
					fail_msg("writes cut at %zu, piece at "
					         "%zu",
					    i, j);
			}
	}
	/* a clean body in one piece is one span: nothing copied */
	memset(buf, 'x', 600);
	s->n = 0;
	c.spans = 0;
	scan_write(r, buf, 600, NULL, 0, VAULT_REDACT_FLUSH, &c);
	assert_int_equal(c.spans, 1);
	assert_int_equal(s->n, 600);
	scan_write(r, buf, 0, NULL, 0, VAULT_REDACT_END, &c);
	vault_redactor_free(r);
	free(s);
	vault_free(v);
}

/* A flush keeps exactly a form's possible beginning, wherever the
 * pieces are cut; a stream without credentials passes in one span. */
static void
test_scan_flush(void **state)
{
	struct vault *v = vault_of(pol);
	struct vault_redactor *r = vault_redactor_new(v);
	struct sink *s = malloc(sizeof(*s));
	struct caller c = {s, NULL, 0, 0};
	const char *ev = "data: s3cr3";
	uint8_t buf[64];
	size_t i, cut;

	(void)state;
	for (i = 0; i <= strlen(ev); i++) {
		memcpy(buf, ev, strlen(ev));
		cut = i;
		s->n = 0;
		scan_write(r, buf, strlen(ev), &cut, 1, VAULT_REDACT_FLUSH, &c);
		assert_int_equal(s->n, 6);
		assert_memory_equal(s->buf, "data: ", 6);
		memcpy(buf, "t-K\n", 4);
		scan_write(r, buf, 4, NULL, 0, VAULT_REDACT_FLUSH, &c);
		assert_int_equal(s->n, 15);
		assert_memory_equal(s->buf, "data: ********\n", 15);
		scan_write(r, buf, 0, NULL, 0, VAULT_REDACT_END, &c);
	}
	vault_redactor_free(r);
	vault_free(v);
	v = vault_of("defaultAction: allow\n");
	r = vault_redactor_new(v);
	memcpy(buf, "s3cr3t-K", 8);
	s->n = 0;
	c.spans = 0;
	scan_write(r, buf, 8, NULL, 0, VAULT_REDACT_MORE, &c);
	assert_int_equal(c.spans, 1);
	assert_int_equal(s->n, 8);
	vault_redactor_free(r);
	vault_free(v);
	free(s);
}

/*
 * What common encoders write for a value, beyond the one percent-encoding
 * and the minimal JSON escaping (a finding of issue 18's fuzzing session,
 * since fixed): Python's urllib.parse.quote keeps '/', JavaScript's
 * encodeURIComponent keeps !'()*, Python's json.dumps escapes non-ASCII
 * (ensure_ascii), Go's encoding/json escapes < > & as \u003c \u003e
 * \u0026. Each is masked.
 */
static void
test_other_encoders(void **state)
{
	static const struct {
		const char *value, *encoded, *by;
	} cases[] = {
	    {"abc+def/ghi", "abc%2Bdef/ghi", "urllib.parse.quote"},
	    {"a b!c", "a%20b!c", "encodeURIComponent"},
	    {"p\xc3\xa4ss", "p\\u00e4ss", "json.dumps"},
	    {"a<b>&c", "a\\u003cb\\u003e\\u0026c", "Go json.Marshal"},
	};
	size_t i, hl, missed = 0;
	char y[256], *h;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct vault *v;

		snprintf(y, sizeof(y),
		    "credentials: [{name: c, source: {type: inline, value: "
		    "'%s'}}]\n",
		    cases[i].value);
		v = vault_of(y);
		h = vault_redact_header(
		    v, cases[i].encoded, strlen(cases[i].encoded), &hl);
		if (h == NULL || strcmp(h, "[REDACTED]") != 0) {
			print_error("%s's form \"%s\" not redacted\n",
			    cases[i].by, cases[i].encoded);
			missed++;
		}
		free(h);
		vault_free(v);
	}
	assert_int_equal(missed, 0);
}

/* ---- issue 34: every form, and pieces ---- */

/* One value, bound as a bearer token (the YAML quotes it). */
static struct vault *
vault_one(const char *val)
{
	char y[512];

	snprintf(y, sizeof(y),
	    "credentials: [{name: c, source: {type: inline, value: '%s'}}]\n",
	    val);
	return vault_of(y);
}

/* in[0..n) redacted in one piece into s. */
static void
redact1(const struct vault *v, const void *in, size_t n, struct sink *s)
{
	struct vault_redactor *r = vault_redactor_new(v);

	assert_non_null(r);
	run(r, in, n, NULL, 0, s);
	assert_int_equal(s->n, n);
	vault_redactor_free(r);
}

/*
 * Pieces: every run of VAULT_PIECE_MIN bytes of a form is masked on its
 * own (a value read back in slices), a run one shorter is not; the same
 * for a percent form and a base64 form. "Bearer v" stays masked whole.
 */
static void
test_pieces(void **state)
{
	static const char *const forms34[] = {
	    "sk-test-9f8e7d6c5b4a3928",
	    /* its base64 (Python's base64.b64encode) */
	    "c2stdGVzdC05ZjhlN2Q2YzViNGEzOTI4",
	};
	struct vault *v = vault_one(forms34[0]);
	struct vault *vp = vault_of(pol);
	struct sink *s = malloc(sizeof(*s));
	const char *pf = "a%2Fb%20c%2Bd%22e%5Cf"; /* p's percent form */
	char in[128];
	size_t k, i, w, n;

	(void)state;
	for (k = 0; k < 3; k++) {
		const char *f = k < 2 ? forms34[k] : pf;
		const struct vault *vk = k < 2 ? v : vp;

		for (w = VAULT_PIECE_MIN - 1; w <= VAULT_PIECE_MIN; w++)
			for (i = 0; i + w <= strlen(f); i++) {
				n = (size_t)snprintf(
				    in, sizeof(in), "[%.*s]", (int)w, f + i);
				redact1(vk, in, n, s);
				if (w == VAULT_PIECE_MIN) {
					assert_int_equal(s->buf[0], '[');
					assert_int_equal(s->buf[n - 1], ']');
					for (size_t j = 1; j < n - 1; j++)
						assert_int_equal(
						    s->buf[j], '*');
				} else if (memcmp(s->buf, in, n) != 0)
					fail_msg("\"%s\" masked", in);
			}
	}
	/* "Bearer v" of a long value is still masked whole (the prefix
	 * with the first piece), in bodies and header values */
	n = (size_t)snprintf(
	    in, sizeof(in), "Authorization: Bearer %s\r\n", forms34[0]);
	redact1(v, in, n, s);
	assert_memory_equal(s->buf, "Authorization: ", 15);
	for (i = 15; i < n - 2; i++)
		assert_int_equal(s->buf[i], '*');
	{
		size_t hl;
		char *h = vault_redact_header(v, in + 15, n - 17, &hl);

		assert_non_null(h);
		assert_string_equal(h, "[REDACTED]");
		free(h);
	}
	vault_free(v);
	vault_free(vp);
	free(s);
}

/*
 * base64 of a longer string with the value at each offset mod 3, e.g.
 * of a whole "Authorization: Bearer v" line (Python's base64, standard
 * and URL-safe): every character all of whose bits are the value's is
 * masked, the characters before them are not.
 */
static void
test_b64_alignments(void **state)
{
	static const struct {
		size_t pre; /* bytes before the value */
		const char *enc;
	} cases[] = {
	    {22,
	        "QXV0aG9yaXphdGlvbjogQmVhcmVyIHRvay0/Pz9+fn4+Pj4tMDEyMzQ1Njc4"
	        "OWFiDQo="},
	    {22,
	        "QXV0aG9yaXphdGlvbjogQmVhcmVyIHRvay0_Pz9-fn4-Pj4tMDEyMzQ1Njc4"
	        "OWFiDQo="},
	    {23,
	        "eEF1dGhvcml6YXRpb246IEJlYXJlciB0b2stPz8/fn5+Pj4+LTAxMjM0NTY3"
	        "ODlhYg0K"},
	    {23,
	        "eEF1dGhvcml6YXRpb246IEJlYXJlciB0b2stPz8_fn5-Pj4-LTAxMjM0NTY3"
	        "ODlhYg0K"},
	    {24,
	        "eHhBdXRob3JpemF0aW9uOiBCZWFyZXIgdG9rLT8/P35+fj4+Pi0wMTIzNDU2"
	        "Nzg5YWINCg=="},
	    {24,
	        "eHhBdXRob3JpemF0aW9uOiBCZWFyZXIgdG9rLT8_P35-fj4-Pi0wMTIzNDU2"
	        "Nzg5YWINCg=="},
	};
	const char *val = "tok-???~~~>>>-0123456789ab";
	struct vault *v = vault_one(val);
	struct sink *s = malloc(sizeof(*s));
	size_t c, i, n, d0, d1;

	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		n = strlen(cases[c].enc);
		/* characters [d0, d1) hold only the value's bits */
		d0 = (8 * cases[c].pre + 5) / 6;
		d1 = 8 * (cases[c].pre + strlen(val)) / 6;
		redact1(v, cases[c].enc, n, s);
		assert_memory_equal(s->buf, cases[c].enc, d0);
		for (i = d0; i < d1; i++)
			if (s->buf[i] != '*')
				fail_msg("case %zu: %.*s", c, (int)n, s->buf);
		/* after the value: "\r\n" and padding, left alone (the
		 * character that mixes both may be masked as the tail) */
		assert_memory_equal(
		    s->buf + d1 + 1, cases[c].enc + d1 + 1, n - d1 - 1);
	}
	vault_free(v);
	free(s);
}

/* An encoder of its own (bit by bit), for the wrapped cases. */
static size_t
b64_enc(const uint8_t *in, size_t n, char *out, bool url)
{
	const char *al = url
	    ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	    : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+"
	      "/";
	size_t i, o = 0, bits = 0;
	uint32_t acc = 0;

	for (i = 0; i < n; i++) {
		acc = acc << 8 | in[i];
		for (bits += 8; bits >= 6; bits -= 6)
			out[o++] = al[acc >> (bits - 6) & 63];
	}
	if (bits > 0)
		out[o++] = al[acc << (6 - bits) & 63];
	while (o % 4 != 0)
		out[o++] = '=';
	return o;
}

/*
 * MIME-wrapped base64 (76 columns, CRLF or LF; PEM's 64): the value at
 * every offset in the encoded text, so every way lines can cut it. With
 * the line breaks taken out of what the client gets, no run of
 * VAULT_PIECE_MIN characters of the value's own survives; a short value
 * (a form of at most VAULT_PIECE_MIN characters) never comes out whole.
 */
static void
test_b64_wrapped(void **state)
{
	static const struct {
		size_t width;
		const char *brk;
		bool url;
	} wraps[] = {{76, "\r\n", false}, {76, "\n", false}, {64, "\n", true},
	    {64, "\r\n", false}};
	static const char *const vals[] = {"tok-???~~~>>>-0123456789ab",
	    "k9Zq-Xw7", "q7-Zk9$w2Lm", "r2d2c3po"};
	struct sink *s = malloc(sizeof(*s));
	uint8_t raw[256];
	char enc[512], wr[1024];
	uint8_t out[1024];
	size_t c, w, pre, i, n, en, wn, on, d0, d1, run, vl;

	(void)state;
	for (c = 0; c < sizeof(vals) / sizeof(vals[0]); c++) {
		struct vault *v = vault_one(vals[c]);

		vl = strlen(vals[c]);
		for (w = 0; w < sizeof(wraps) / sizeof(wraps[0]); w++)
			for (pre = 0; pre < 120; pre++) {
				memset(raw, 'A' + pre % 26, pre);
				memcpy(raw + pre, vals[c], vl);
				memcpy(raw + pre + vl, " trailing text", 14);
				n = pre + vl + 14;
				en = b64_enc(raw, n, enc, wraps[w].url);
				for (i = wn = 0; i < en; i++) {
					if (i > 0 && i % wraps[w].width == 0) {
						memcpy(wr + wn, wraps[w].brk,
						    strlen(wraps[w].brk));
						wn += strlen(wraps[w].brk);
					}
					wr[wn++] = enc[i];
				}
				redact1(v, wr, wn, s);
				/* the output without the input's breaks */
				for (i = on = 0; i < wn; i++)
					if (wr[i] != '\r' && wr[i] != '\n')
						out[on++] = s->buf[i];
				assert_int_equal(on, en);
				d0 = (8 * pre + 5) / 6;
				d1 = 8 * (pre + vl) / 6;
				for (i = d0, run = 0; i < d1; i++) {
					run = out[i] == '*' ? 0 : run + 1;
					if (run >= VAULT_PIECE_MIN ||
					    run == d1 - d0)
						fail_msg(
						    "%s, width %zu, offset "
						    "%zu: %.*s",
						    vals[c], wraps[w].width,
						    pre, (int)wn, s->buf);
				}
			}
		vault_free(v);
	}
	free(s);
}

/* Hex, lower and upper case (Python's bytes.hex()), whole and in
 * pieces. */
static void
test_hex(void **state)
{
	static const char *const hex[] = {
	    "736b2d746573742d39663865376436633562346133393238",
	    "736B2D746573742D39663865376436633562346133393238",
	};
	struct vault *v = vault_one("sk-test-9f8e7d6c5b4a3928");
	struct sink *s = malloc(sizeof(*s));
	char in[128];
	size_t k, n, i;

	(void)state;
	for (k = 0; k < 2; k++) {
		n = (size_t)snprintf(in, sizeof(in), "sha=%s;", hex[k]);
		redact1(v, in, n, s);
		assert_memory_equal(s->buf, "sha=", 4);
		for (i = 4; i < n - 1; i++)
			assert_int_equal(s->buf[i], '*');
		/* a slice of the middle */
		n = (size_t)snprintf(in, sizeof(in), "<%.14s>", hex[k] + 17);
		redact1(v, in, n, s);
		assert_false(has_piece(s->buf, n, hex[k], strlen(hex[k])));
	}
	vault_free(v);
	free(s);
}

/*
 * basic: the value is base64 of "user:password" (RFC 7617); the decoded
 * pair and the password alone are masked too, in their forms (percent,
 * base64 of a longer string). A value a bearer binding uses is never
 * decoded.
 */
static void
test_basic(void **state)
{
	static const char *const yaml =
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: api.example.com}\n"
	    "  - {action: allow, target: t.example.com}\n"
	    "credentials:\n"
	    /* alice:s3cret-pass-42 */
	    "  - {name: b, source: {type: inline, value: "
	    "YWxpY2U6czNjcmV0LXBhc3MtNDI=}}\n"
	    /* bob:hunter2-hunter2 */
	    "  - {name: t, source: {type: inline, value: "
	    "Ym9iOmh1bnRlcjItaHVudGVyMg==}}\n"
	    "bindings:\n"
	    "  - name: b\n"
	    "    match: {hosts: [api.example.com]}\n"
	    "    auth: {type: basic, credential: b}\n"
	    "  - name: t\n"
	    "    match: {hosts: [t.example.com]}\n"
	    "    auth: {type: bearer, credential: t}\n";
	static const struct {
		const char *in, *want;
	} cases[] = {
	    {"hello alice:s3cret-pass-42!", "hello ********************!"},
	    {"bad password s3cret-pass-42.", "bad password **************."},
	    {"u=alice%3As3cret-pass-42", "u=**********************"},
	    /* base64 of "Basic-auth user alice:s3cret-pass-42" (Python) */
	    {"QmFzaWMtYXV0aCB1c2VyIGFsaWNlOnMzY3JldC1wYXNzLTQy",
	        "QmFzaWMtYXV0aCB1c2VyIG**************************"},
	    {"bob:hunter2-hunter2", "bob:hunter2-hunter2"},
	};
	struct vault *v = vault_of(yaml);
	struct sink *s = malloc(sizeof(*s));
	size_t c, n;

	(void)state;
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		n = strlen(cases[c].in);
		redact1(v, cases[c].in, n, s);
		if (memcmp(s->buf, cases[c].want, n) != 0)
			fail_msg("\"%s\": got \"%.*s\"", cases[c].in, (int)n,
			    s->buf);
	}
	vault_free(v);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_forms),
	    cmocka_unit_test(test_split_every_offset),
	    cmocka_unit_test(test_bytewise_holdback),
	    cmocka_unit_test(test_random_no_leak),
	    cmocka_unit_test(test_flush),
	    cmocka_unit_test(test_overlap),
	    cmocka_unit_test(test_header),
	    cmocka_unit_test(test_no_credentials),
	    cmocka_unit_test(test_large),
	    cmocka_unit_test(test_skip_filter),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_lanes),
	    cmocka_unit_test(test_scan_pieces),
	    cmocka_unit_test(test_scan_flush),
	    cmocka_unit_test(test_other_encoders),
	    cmocka_unit_test(test_pieces),
	    cmocka_unit_test(test_b64_alignments),
	    cmocka_unit_test(test_b64_wrapped),
	    cmocka_unit_test(test_hex),
	    cmocka_unit_test(test_basic),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
