/*
 * http_decode: gzip and deflate (zlib-wrapped and raw) streams made here
 * with zlib's encoder, decoded whole and in every kind of piece (input
 * split down to single bytes, output buffers down to one byte) to the
 * same bytes; the errors (corrupt, trailing, truncated) and both bomb
 * limits, with what came out before them bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "egressd/proto/http_decode.h"

enum wrap { W_GZIP, W_ZLIB, W_RAW };

/* deflateInit2's windowBits for each wrapping */
static const int wrap_bits[] = {16 + MAX_WBITS, MAX_WBITS, -MAX_WBITS};

/* in[0..n) compressed; *out malloc'd. */
static size_t
compress_buf(enum wrap w, const uint8_t *in, size_t n, uint8_t **out)
{
	z_stream z;
	size_t cap = n + n / 100 + 1024;

	memset(&z, 0, sizeof(z));
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, wrap_bits[w], 8,
	                     Z_DEFAULT_STRATEGY),
	    Z_OK);
	*out = malloc(cap);
	assert_non_null(*out);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)n;
	z.next_out = *out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	cap = z.total_out;
	deflateEnd(&z);
	return cap;
}

/* Text with some repetition (about 3:1), different for each seed. */
static uint8_t *
text(size_t n, unsigned seed)
{
	static const char *const words[] = {"alpha ", "beta ", "gamma ",
	    "delta\n", "{\"k\": 1} ", "Bearer ", "secret-ish ", "x"};
	uint8_t *p = malloc(n);
	size_t i = 0;
	uint32_t r = seed * 2654435761u + 1;

	assert_non_null(p);
	while (i < n) {
		const char *w;
		size_t k;

		r = r * 1103515245u + 12345u;
		if ((r >> 16) % 5 == 0) {
			p[i++] = (uint8_t)(r >> 8);
			continue;
		}
		w = words[(r >> 16) % 8];
		for (k = 0; w[k] != '\0' && i < n; k++)
			p[i++] = (uint8_t)w[k];
	}
	return p;
}

struct result {
	enum http_decode_rc rc; /* BAD, or AGAIN when finish passed */
	enum http_decode_why why;
	size_t nout;
	uint64_t in;
};

/*
 * Decodes in[0..n) in input pieces of step (0: whole) into output
 * buffers of cap bytes, appending to out (at most max), then finishes.
 */
static struct result
decode(enum http_coding c, const struct http_decode_limits *l,
    const uint8_t *in, size_t n, size_t step, size_t cap, uint8_t *out,
    size_t max)
{
	struct http_decode *d = http_decode_new(c, l);
	struct result r = {HTTP_DECODE_AGAIN, HTTP_DECODE_OK, 0, 0};
	uint8_t *buf = malloc(cap);
	struct err e;
	size_t off = 0;

	assert_non_null(d);
	assert_non_null(buf);
	while (off < n) {
		size_t lim = step && n - off > step ? step : n - off, used, got;
		enum http_decode_rc rc;

		do {
			rc = http_decode_feed(
			    d, in + off, lim, &used, buf, cap, &got, &e);
			assert_true(used <= lim);
			assert_true(got <= cap);
			off += used;
			lim -= used;
			if (rc == HTTP_DECODE_DATA) {
				assert_true(got > 0);
				assert_true(r.nout + got <= max);
				memcpy(out + r.nout, buf, got);
				r.nout += got;
			} else
				assert_int_equal(got, 0);
		} while (rc == HTTP_DECODE_DATA);
		if (rc == HTTP_DECODE_BAD) {
			r.rc = rc;
			goto out;
		}
		assert_int_equal(lim, 0);
	}
	if (http_decode_finish(d, &e) == -1)
		r.rc = HTTP_DECODE_BAD;
out:
	r.why = http_decode_why(d);
	r.in = http_decode_in(d);
	if (r.rc == HTTP_DECODE_BAD)
		assert_true(e.msg[0] != '\0');
	http_decode_free(d);
	free(buf);
	return r;
}

/* z[0..nz) decodes to exactly want[0..n) whole (out: room for n). */
static void
decodes_whole(enum http_coding c, const struct http_decode_limits *l,
    const uint8_t *z, size_t nz, const uint8_t *want, size_t n, uint8_t *out)
{
	struct result r = decode(c, l, z, nz, 0, 4096, out, n);

	assert_int_equal(r.rc, HTTP_DECODE_AGAIN);
	assert_int_equal(r.nout, n);
	assert_memory_equal(out, want, n);
}

static void
test_roundtrip_pieces(void **state)
{
	static const size_t steps[] = {0, 1, 2, 7, 4096};
	static const size_t caps[] = {16384, 1, 13, 4096};
	static const struct {
		enum wrap w;
		enum http_coding c;
	} kinds[] = {
	    {W_GZIP, HTTP_CODING_GZIP},
	    {W_ZLIB, HTTP_CODING_DEFLATE},
	    {W_RAW, HTTP_CODING_DEFLATE},
	};
	size_t n = 100000, k, s, o, nz;
	uint8_t *plain = text(n, 1), *z, *out = malloc(n);

	(void)state;
	assert_non_null(out);
	for (k = 0; k < 3; k++) {
		nz = compress_buf(kinds[k].w, plain, n, &z);
		for (s = 0; s < 5; s++)
			for (o = 0; o < 4; o++) {
				struct result r;

				/* single bytes with 1-byte output: slow
				 * enough once per kind */
				if (steps[s] == 1 && caps[o] == 1 && k > 0)
					continue;
				memset(out, 0, n);
				r = decode(kinds[k].c, NULL, z, nz, steps[s],
				    caps[o], out, n);
				if (r.rc != HTTP_DECODE_AGAIN || r.nout != n ||
				    memcmp(out, plain, n) != 0)
					fail_msg(
					    "kind %zu step %zu cap %zu: rc "
					    "%d why %d out %zu",
					    k, steps[s], caps[o], r.rc, r.why,
					    r.nout);
				assert_int_equal(r.in, nz);
			}
		free(z);
	}
	free(plain);
	free(out);
}

/* Members one after another (RFC 1952 2.2) decode as their sum. */
static void
test_gzip_members(void **state)
{
	uint8_t *a = text(5000, 2), *b = text(7000, 3), *za, *zb, *cat, *out;
	size_t na = compress_buf(W_GZIP, a, 5000, &za);
	size_t nb = compress_buf(W_GZIP, b, 7000, &zb);
	struct result r;

	(void)state;
	cat = malloc(na + nb);
	out = malloc(12000);
	memcpy(cat, za, na);
	memcpy(cat + na, zb, nb);
	r = decode(HTTP_CODING_GZIP, NULL, cat, na + nb, 3, 100, out, 12000);
	assert_int_equal(r.rc, HTTP_DECODE_AGAIN);
	assert_int_equal(r.nout, 12000);
	assert_memory_equal(out, a, 5000);
	assert_memory_equal(out + 5000, b, 7000);
	/* after a member, garbage is not another member */
	memcpy(cat + na, "garbage!", 8);
	r = decode(HTTP_CODING_GZIP, NULL, cat, na + 8, 0, 4096, out, 12000);
	assert_int_equal(r.rc, HTTP_DECODE_BAD);
	assert_int_equal(r.why, HTTP_DECODE_CORRUPT);
	assert_int_equal(r.nout, 5000);
	free(a), free(b), free(za), free(zb), free(cat), free(out);
}

static void
test_errors(void **state)
{
	uint8_t *p = text(3000, 4), *z, *bad, out[4000];
	size_t nz, i;
	struct result r;

	(void)state;
	/* deflate: bytes after the stream's end */
	nz = compress_buf(W_ZLIB, p, 3000, &z);
	bad = malloc(nz + 1);
	memcpy(bad, z, nz);
	bad[nz] = 0;
	r = decode(HTTP_CODING_DEFLATE, NULL, bad, nz + 1, 0, 4096, out, 4000);
	assert_int_equal(r.why, HTTP_DECODE_TRAILING);
	assert_int_equal(r.nout, 3000);
	/* truncated anywhere: never a clean end */
	for (i = 1; i < nz; i += 97) {
		r = decode(HTTP_CODING_DEFLATE, NULL, z, i, 1, 4096, out, 4000);
		if (r.rc != HTTP_DECODE_BAD || r.why != HTTP_DECODE_TRUNCATED)
			fail_msg("cut at %zu: rc %d why %d", i, r.rc, r.why);
	}
	free(z);
	free(bad);
	/* gzip: a CRC that does not match is corrupt */
	nz = compress_buf(W_GZIP, p, 3000, &z);
	z[nz - 8] ^= 1;
	r = decode(HTTP_CODING_GZIP, NULL, z, nz, 0, 4096, out, 4000);
	assert_int_equal(r.why, HTTP_DECODE_CORRUPT);
	/* truncated gzip: the last byte of the length missing */
	z[nz - 8] ^= 1;
	r = decode(HTTP_CODING_GZIP, NULL, z, nz - 1, 0, 4096, out, 4000);
	assert_int_equal(r.why, HTTP_DECODE_TRUNCATED);
	/* a deflate body of one byte cannot be a stream */
	r = decode(HTTP_CODING_DEFLATE, NULL, z, 1, 0, 4096, out, 4000);
	assert_int_equal(r.why, HTTP_DECODE_TRUNCATED);
	/* nothing at all is an empty body, not an error */
	r = decode(HTTP_CODING_GZIP, NULL, z, 0, 0, 4096, out, 4000);
	assert_int_equal(r.rc, HTTP_DECODE_AGAIN);
	assert_int_equal(r.nout, 0);
	/* not gzip at all */
	r = decode(HTTP_CODING_GZIP, NULL, p, 3000, 0, 4096, out, 4000);
	assert_int_equal(r.why, HTTP_DECODE_CORRUPT);
	assert_int_equal(r.nout, 0);
	free(z);
	free(p);
	assert_null(http_decode_new(HTTP_CODING_BR, NULL));
	assert_null(http_decode_new(HTTP_CODING_IDENTITY, NULL));
	http_decode_free(NULL);
}

/* The ratio: zeros compress about 1000:1; decoding stops after the free
 * allowance, and the call that crosses the limit gives nothing. */
static void
test_bomb_ratio(void **state)
{
	size_t n = 8u << 20, nz, k;
	uint8_t *zeros = calloc(1, n), *z, *out = malloc(n);
	struct http_decode_limits l = {UINT64_MAX, 100, 64u << 10};
	static const size_t steps[] = {0, 1, 512};
	struct result r;

	(void)state;
	nz = compress_buf(W_GZIP, zeros, n, &z);
	assert_true(nz < n / 500);
	for (k = 0; k < 3; k++) {
		r = decode(
		    HTTP_CODING_GZIP, NULL, z, nz, steps[k], 16384, out, n);
		assert_int_equal(r.rc, HTTP_DECODE_BAD);
		assert_int_equal(r.why, HTTP_DECODE_RATIO);
		/* what came out stays within the free allowance */
		assert_true(r.nout <= HTTP_DECODE_RATIO_FREE);
		r = decode(HTTP_CODING_GZIP, &l, z, nz, steps[k], 4096, out, n);
		assert_int_equal(r.why, HTTP_DECODE_RATIO);
		assert_true(r.nout <= l.ratio_free);
	}
	/* the same stream passes with the ratio off */
	l.ratio_max = 0;
	decodes_whole(HTTP_CODING_GZIP, &l, z, nz, zeros, n, out);
	free(z);
	free(zeros);
	free(out);
}

/* The size cap: exact, whatever the output buffer. */
static void
test_bomb_size(void **state)
{
	size_t n = 300000, nz, c;
	uint8_t *p = text(n, 5), *z, *out = malloc(n);
	struct http_decode_limits l = {100000, 0, 0};
	static const size_t caps[] = {1, 4096, 65536, 300000};
	struct result r;

	(void)state;
	nz = compress_buf(W_RAW, p, n, &z);
	for (c = 0; c < 4; c++) {
		r = decode(HTTP_CODING_DEFLATE, &l, z, nz, 0, caps[c], out, n);
		assert_int_equal(r.why, HTTP_DECODE_SIZE);
		assert_true(r.nout <= l.out_max);
		assert_memory_equal(out, p, r.nout);
	}
	l.out_max = n;
	decodes_whole(HTTP_CODING_DEFLATE, &l, z, nz, p, n, out);
	free(z);
	free(p);
	free(out);
}

/* A failed decoder stays failed. */
static void
test_bad_sticks(void **state)
{
	struct http_decode *d = http_decode_new(HTTP_CODING_GZIP, NULL);
	uint8_t out[64];
	size_t used, nout;
	struct err e;

	(void)state;
	assert_int_equal(http_decode_feed(d, (const uint8_t *)"xxxxxxxxxxxx",
	                     12, &used, out, sizeof(out), &nout, &e),
	    HTTP_DECODE_BAD);
	assert_int_equal(http_decode_feed(d, (const uint8_t *)"\x1f\x8b", 2,
	                     &used, out, sizeof(out), &nout, &e),
	    HTTP_DECODE_BAD);
	assert_int_equal(used, 0);
	assert_int_equal(http_decode_finish(d, &e), -1);
	assert_int_equal(http_decode_why(d), HTTP_DECODE_CORRUPT);
	assert_non_null(strstr(e.msg, "gzip"));
	http_decode_free(d);
}

static void
test_coding_parse(void **state)
{
	static const struct {
		const char *v;
		enum http_coding c;
	} cases[] = {
	    {"gzip", HTTP_CODING_GZIP},
	    {" GZip\t", HTTP_CODING_GZIP},
	    {"x-gzip", HTTP_CODING_GZIP},
	    {"deflate", HTTP_CODING_DEFLATE},
	    {"br", HTTP_CODING_BR},
	    {"zstd", HTTP_CODING_ZSTD},
	    {"compress", HTTP_CODING_COMPRESS},
	    {"identity", HTTP_CODING_IDENTITY},
	    {"identity, gzip", HTTP_CODING_GZIP},
	    {"gzip, br", HTTP_CODING_LIST},
	    {"gzip,gzip", HTTP_CODING_LIST},
	    {"gzip,", HTTP_CODING_LIST},
	    {"", HTTP_CODING_OTHER},
	    {"gzip;q=1", HTTP_CODING_OTHER},
	    {"gzipp", HTTP_CODING_OTHER},
	    {"x-custom", HTTP_CODING_OTHER},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum http_coding c =
		    http_coding_parse(cases[i].v, strlen(cases[i].v));

		if (c != cases[i].c)
			fail_msg("\"%s\": %s, want %s", cases[i].v,
			    http_coding_name(c), http_coding_name(cases[i].c));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_pieces),
	    cmocka_unit_test(test_gzip_members),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_bomb_ratio),
	    cmocka_unit_test(test_bomb_size),
	    cmocka_unit_test(test_bad_sticks),
	    cmocka_unit_test(test_coding_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
