/*
 * http_chunk: each chunked body of fuzz/corpus/http_chunk/ (from
 * fuzz/http_corpus_gen.py) with the verdict it must get, decoded whole and
 * in pieces down to byte by byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corpus_file.h"

#include "egressd/proto/http_chunk.h"

static char buf[1 << 17];

struct cwant {
	const char *file;
	enum http_chunk_rc rc;
	const char *data;
	size_t rest; /* bytes after the body (DONE) */
};

static const struct cwant chunks[] = {
    {"ok_simple", HTTP_CHUNK_DONE, "hello", 0},
    {"ok_ext", HTTP_CHUNK_DONE, "hello", 0},
    {"ok_trailer", HTTP_CHUNK_DONE, "abc", 0},
    {"ok_upper_hex", HTTP_CHUNK_DONE, "0123456789", 16},
    {"ok_leading_zeros", HTTP_CHUNK_DONE, "hello", 0},
    {"bad_no_digits", HTTP_CHUNK_BAD, "", 0},
    {"bad_0x", HTTP_CHUNK_BAD, "", 0},
    {"bad_space_before", HTTP_CHUNK_BAD, "", 0},
    {"bad_neg", HTTP_CHUNK_BAD, "", 0},
    {"bad_overflow", HTTP_CHUNK_BAD, "", 0},
    {"bad_bare_lf", HTTP_CHUNK_BAD, "", 0},
    {"bad_data_longer", HTTP_CHUNK_BAD, "hel", 0},
    {"bad_ctl_ext", HTTP_CHUNK_BAD, "", 0},
    {"bad_trailer_fold", HTTP_CHUNK_BAD, "", 0},
    {"bad_unterminated_quote", HTTP_CHUNK_BAD, "", 0},
    {"ok_ext_bws", HTTP_CHUNK_DONE, "hello", 0},
    {"bad_ext_no_semi", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_ws_only", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_ws_token", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_eq_after_size", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_no_name", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_no_value", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_two_values", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_trailing_ws", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_quote_del", HTTP_CHUNK_BAD, "", 0},
    {"bad_ext_last_chunk", HTTP_CHUNK_BAD, "hello", 0},
    {"ok_trailer_fields", HTTP_CHUNK_DONE, "hi", 4},
    {"ok_trailer_max", HTTP_CHUNK_DONE, "", 0},
    {"bad_trailer_big", HTTP_CHUNK_BAD, "", 0},
    {"bad_trailer_space_name", HTTP_CHUNK_BAD, "", 0},
    {"bad_trailer_no_colon", HTTP_CHUNK_BAD, "", 0},
    {"bad_trailer_bare_lf", HTTP_CHUNK_BAD, "", 0},
};

/* Decodes in pieces of step bytes (0 = whole), the trailer section into
 * t when not NULL. */
static enum http_chunk_rc
decode_keep(const char *in, size_t n, size_t step, char *out, size_t *nout,
    size_t *end, struct http_chunk_trailers *t)
{
	struct http_chunk c;
	struct err e;
	size_t off = 0;

	http_chunk_init(&c);
	http_chunk_keep_trailers(&c, t);
	*nout = 0;
	while (off < n) {
		size_t lim = step && n - off > step ? step : n - off, used, nd;
		const uint8_t *d;
		enum http_chunk_rc rc = http_chunk_feed(
		    &c, (const uint8_t *)in + off, lim, &used, &d, &nd, &e);

		if (rc == HTTP_CHUNK_DATA) {
			memcpy(out + *nout, d, nd);
			*nout += nd;
		}
		off += used;
		if (rc == HTTP_CHUNK_DONE || rc == HTTP_CHUNK_BAD) {
			*end = off;
			return rc;
		}
	}
	*end = off;
	return HTTP_CHUNK_AGAIN;
}

static enum http_chunk_rc
decode(
    const char *in, size_t n, size_t step, char *out, size_t *nout, size_t *end)
{
	return decode_keep(in, n, step, out, nout, end, NULL);
}

static void
test_chunked(void **state)
{
	char out[4096];
	size_t i, s, n, nout, end;
	static const size_t steps[] = {0, 1, 2, 5};

	(void)state;
	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		const struct cwant *w = &chunks[i];

		n = corpus_file("http_chunk", w->file, buf, sizeof(buf));
		for (s = 0; s < 4; s++) {
			enum http_chunk_rc rc =
			    decode(buf, n, steps[s], out, &nout, &end);

			if (rc != w->rc)
				fail_msg("%s step %zu: rc %d, want %d", w->file,
				    steps[s], rc, w->rc);
			if (nout != strlen(w->data) ||
			    memcmp(out, w->data, nout) != 0)
				fail_msg("%s step %zu: data differs", w->file,
				    steps[s]);
			if (rc == HTTP_CHUNK_DONE && n - end != w->rest)
				fail_msg("%s: %zu bytes after the body, want "
				         "%zu",
				    w->file, n - end, w->rest);
		}
	}
}

/*
 * http_chunk_collect over every body of the corpus: a body without
 * trailers comes out whole with the framing's length, one with a
 * trailer section is skipped, a malformed one is BAD, every proper
 * prefix of a good one is AGAIN; max is inclusive.
 */
static void
test_collect(void **state)
{
	size_t i, n, k, olen, wire, dlen;
	uint8_t *out;
	struct err e;
	enum http_chunk_collect_rc rc, want;

	(void)state;
	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		const struct cwant *w = &chunks[i];
		bool trailers = strncmp(w->file, "ok_trailer", 10) == 0;

		n = corpus_file("http_chunk", w->file, buf, sizeof(buf));
		dlen = strlen(w->data);
		want = w->rc == HTTP_CHUNK_BAD ? HTTP_CHUNK_COLLECT_BAD
		    : trailers                 ? HTTP_CHUNK_COLLECT_SKIP
		                               : HTTP_CHUNK_COLLECT_DONE;
		rc = http_chunk_collect(
		    (const uint8_t *)buf, n, 1 << 20, &out, &olen, &wire, &e);
		if (rc != want)
			fail_msg("%s: rc %d, want %d (%s)", w->file, rc, want,
			    e.msg);
		if (rc != HTTP_CHUNK_COLLECT_DONE) {
			assert_null(out);
			continue;
		}
		if (olen != dlen || memcmp(out, w->data, olen) != 0)
			fail_msg("%s: body differs", w->file);
		if (wire != n - w->rest)
			fail_msg("%s: framing %zu bytes, want %zu", w->file,
			    wire, n - w->rest);
		free(out);
		for (k = 0; k < n - w->rest; k++) {
			rc = http_chunk_collect((const uint8_t *)buf, k,
			    1 << 20, &out, &olen, &wire, &e);
			if (rc != HTTP_CHUNK_COLLECT_AGAIN)
				fail_msg(
				    "%s: prefix %zu: rc %d", w->file, k, rc);
			assert_null(out);
		}
		rc = http_chunk_collect(
		    (const uint8_t *)buf, n, dlen, &out, &olen, &wire, &e);
		assert_int_equal(rc, HTTP_CHUNK_COLLECT_DONE);
		free(out);
		if (dlen == 0)
			continue;
		rc = http_chunk_collect(
		    (const uint8_t *)buf, n, dlen - 1, &out, &olen, &wire, &e);
		assert_int_equal(rc, HTTP_CHUNK_COLLECT_SKIP);
		assert_null(out);
		assert_non_null(strstr(e.msg, "over"));
	}
}

static bool
span_is(const struct http_span *s, const char *lit)
{
	return s->n == strlen(lit) && memcmp(s->p, lit, s->n) == 0;
}

/*
 * A kept trailer section comes out field by field, the same whatever the
 * segmentation: names as sent, values without their surrounding
 * whitespace (an empty one stays a field), a ':' inside a value kept.
 */
static void
test_trailer_fields(void **state)
{
	static const char *const want[][2] = {
	    {"X-A", "one two"},
	    {"x-b", ""},
	    {"Grpc-Status", "0"},
	    {"X-C", "a:b"},
	};
	static struct http_chunk_trailers t;
	static const size_t steps[] = {0, 1, 3, 7};
	char out[64];
	size_t n, s, nout, end, pos, k;
	struct http_header f;

	(void)state;
	n = corpus_file("http_chunk", "ok_trailer_fields", buf, sizeof(buf));
	for (s = 0; s < 4; s++) {
		assert_int_equal(
		    decode_keep(buf, n, steps[s], out, &nout, &end, &t),
		    HTTP_CHUNK_DONE);
		assert_int_equal(n - end, 4); /* "NEXT" is not the body's */
		pos = 0;
		for (k = 0; http_chunk_trailer_next(&t, &pos, &f); k++) {
			if (k == 4)
				fail_msg(
				    "step %zu: more than 4 fields", steps[s]);
			if (!span_is(&f.name, want[k][0]) ||
			    !span_is(&f.value, want[k][1]))
				fail_msg(
				    "step %zu: field %zu is \"%.*s: %.*s\"",
				    steps[s], k, (int)f.name.n, f.name.p,
				    (int)f.value.n, f.value.p);
		}
		assert_int_equal(k, 4);
	}
	/* no trailers: an empty section */
	n = corpus_file("http_chunk", "ok_simple", buf, sizeof(buf));
	assert_int_equal(
	    decode_keep(buf, n, 0, out, &nout, &end, &t), HTTP_CHUNK_DONE);
	pos = 0;
	assert_false(http_chunk_trailer_next(&t, &pos, &f));
	/* the largest section fits the storage whole */
	n = corpus_file("http_chunk", "ok_trailer_max", buf, sizeof(buf));
	assert_int_equal(
	    decode_keep(buf, n, 5, out, &nout, &end, &t), HTTP_CHUNK_DONE);
	pos = 0;
	assert_true(http_chunk_trailer_next(&t, &pos, &f));
	assert_true(span_is(&f.name, "X-Pad"));
	assert_int_equal(f.value.n, 16374);
	assert_false(http_chunk_trailer_next(&t, &pos, &f));
	assert_int_equal(t.len, HTTP_CHUNK_TRAILER_MAX - 1);
}

/* The fields a trailer may not carry, in any case; others pass. */
static void
test_trailer_allowed(void **state)
{
	static const char *const denied[] = {"Transfer-Encoding",
	    "content-length", "TRAILER", "Connection", "Keep-Alive", "TE",
	    "Upgrade", "Host", "Expect", "Range", "If-None-Match",
	    "Authorization", "Proxy-Authorization", "WWW-Authenticate",
	    "Set-Cookie", "Cookie", "Cache-Control", "Age", "Date", "Location",
	    "Retry-After", "Vary", "Content-Type", "Content-Encoding",
	    "Content-Range"};
	static const char *const allowed[] = {"X-Echo-Authorization",
	    "Server-Timing", "Grpc-Status", "Grpc-Message", "Digest",
	    "Content-Digest", "ETag", "X-Host", "Hosts", "T", "Tee"};
	struct http_span s;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		s.p = denied[i];
		s.n = strlen(denied[i]);
		if (http_chunk_trailer_allowed(&s))
			fail_msg("%s allowed in a trailer", denied[i]);
	}
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		s.p = allowed[i];
		s.n = strlen(allowed[i]);
		if (!http_chunk_trailer_allowed(&s))
			fail_msg("%s refused in a trailer", allowed[i]);
	}
}

/*
 * The chunk-size line: after the hex digits only ';'-led extensions
 * (optional whitespace before each ';'); the decoder stops at the first
 * byte the grammar does not allow, and says why.
 */
static void
test_ext_strict(void **state)
{
	static const struct {
		const char *line;
		size_t at; /* the offending byte; SIZE_MAX: accepted */
		const char *why;
	} cases[] = {
	    {"5;a\r\n", SIZE_MAX, NULL},
	    {"5 ; a = b\r\n", SIZE_MAX, NULL},
	    {"5\t;a=\"q\\\"\";b\r\n", SIZE_MAX, NULL},
	    {"5;a;b;c=d\r\n", SIZE_MAX, NULL},
	    {"5x\r\n", 1, "extension starts with ';'"},
	    {"5 x\r\n", 2, "not starting with ';'"},
	    {"5 \r\n", 2, "not starting with ';'"},
	    {"5\t\r\n", 2, "not starting with ';'"},
	    {"5,a\r\n", 1, "extension starts with ';'"},
	    {"5;\r\n", 2, "without a name"},
	    {"5; \r\n", 3, "without a name"},
	    {"5;a b\r\n", 4, "after a chunk extension's name"},
	    {"5;a=\r\n", 4, "without a value"},
	    {"5;a==b\r\n", 4, "without a value"},
	    {"5;a=b=c\r\n", 5, "invalid byte in a chunk extension"},
	    {"5;a=\"b\"c\r\n", 7, "invalid byte in a chunk extension"},
	    {"5;a=\"b\r\n", 6, "unterminated"},
	    {"5;a=\"\\\x01\"\r\n", 6, "invalid byte"},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct http_chunk c;
		struct err e = {""};
		const char *l = cases[i].line;
		size_t used = 0, nd;
		const uint8_t *d;
		enum http_chunk_rc rc;

		http_chunk_init(&c);
		rc = http_chunk_feed(
		    &c, (const uint8_t *)l, strlen(l), &used, &d, &nd, &e);
		if (cases[i].at == SIZE_MAX) {
			if (rc != HTTP_CHUNK_AGAIN || used != strlen(l))
				fail_msg("%zu: refused: %s", i, e.msg);
			continue;
		}
		if (rc != HTTP_CHUNK_BAD)
			fail_msg("%zu: accepted", i);
		if (used != cases[i].at)
			fail_msg("%zu: stopped at %zu, want %zu", i, used,
			    cases[i].at);
		if (strstr(e.msg, cases[i].why) == NULL)
			fail_msg("%zu: \"%s\" does not say \"%s\"", i, e.msg,
			    cases[i].why);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chunked),
	    cmocka_unit_test(test_collect),
	    cmocka_unit_test(test_ext_strict),
	    cmocka_unit_test(test_trailer_fields),
	    cmocka_unit_test(test_trailer_allowed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
