/*
 * http_head: each head of fuzz/corpus/http_head/ (real curl, python, node
 * and git requests, and the smuggling shapes of fuzz/http_corpus_gen.py)
 * with the verdict and status it must get.
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

#include "egressd/proto/http_head.h"

struct want {
	const char *file;
	enum http_rc rc;
	int status; /* reject status for BAD */
	enum http_body body;
	uint64_t len;
};

static const struct want reqs[] = {
    {"real_curl_get", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"real_curl_post", HTTP_HEAD_OK, 0, HTTP_BODY_LENGTH, 7},
    {"real_curl_chunked", HTTP_HEAD_OK, 0, HTTP_BODY_CHUNKED, 0},
    {"real_curl_proxyform", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"real_python_urllib", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"real_node_fetch", HTTP_HEAD_OK, 0, HTTP_BODY_LENGTH, 2},
    {"real_git", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_get", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_post_cl", HTTP_HEAD_OK, 0, HTTP_BODY_LENGTH, 5},
    {"ok_chunked", HTTP_HEAD_OK, 0, HTTP_BODY_CHUNKED, 0},
    {"ok_http10", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_absolute", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_absolute_port", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_options_star", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_expect", HTTP_HEAD_OK, 0, HTTP_BODY_LENGTH, 3},
    {"ok_websocket", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_pipelined", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_ows_value", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"ok_ipv6_host", HTTP_HEAD_OK, 0, HTTP_BODY_NONE, 0},
    {"more_partial", HTTP_HEAD_MORE, 0, HTTP_BODY_NONE, 0},
    {"bad_cl_te", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_te_cl", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_te_te_obfuscated", HTTP_HEAD_BAD, 501, 0, 0},
    {"bad_te_xchunked", HTTP_HEAD_BAD, 501, 0, 0},
    {"bad_te_gzip_chunked", HTTP_HEAD_BAD, 501, 0, 0},
    {"bad_te_space_colon", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_te_http10", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_two_cl", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_two_cl_same", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_cl_list", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_cl_plus", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_cl_hex", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_obs_fold", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_bare_cr", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_bare_lf", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_nul", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_two_host", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_no_host", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_host_userinfo", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_absolute_other_host", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_absolute_ftp", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_two_spaces", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_space_in_target", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_http2_preface", HTTP_HEAD_BAD, 505, 0, 0},
    {"bad_http09", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_version_12", HTTP_HEAD_BAD, 505, 0, 0},
    {"bad_expect", HTTP_HEAD_BAD, 417, 0, 0},
    {"bad_fragment", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_star_get", HTTP_HEAD_BAD, 400, 0, 0},
    {"bad_long_line", HTTP_HEAD_BAD, 414, 0, 0},
    {"bad_many_headers", HTTP_HEAD_BAD, 431, 0, 0},
    {"bad_big_head", HTTP_HEAD_BAD, 431, 0, 0},
    {"bad_ctl_value", HTTP_HEAD_BAD, 400, 0, 0},
};

static char buf[1 << 17];

static void
test_request_corpus(void **state)
{
	struct http_head h;
	struct err e;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
		const struct want *w = &reqs[i];
		enum http_rc rc;

		n = corpus_file("http_head", w->file, buf, sizeof(buf));
		err_clear(&e);
		rc = http_parse_request(buf, n, &h, &e);
		if (rc != w->rc)
			fail_msg("%s: rc %d, want %d (%s)", w->file, rc, w->rc,
			    e.msg);
		if (rc == HTTP_HEAD_BAD && h.reject_status != w->status)
			fail_msg("%s: status %d, want %d (%s)", w->file,
			    h.reject_status, w->status, e.msg);
		if (rc == HTTP_HEAD_OK &&
		    (h.body != w->body || h.content_length != w->len))
			fail_msg("%s: body %d/%llu", w->file, h.body,
			    (unsigned long long)h.content_length);
	}
}

static void
test_request_fields(void **state)
{
	struct http_head h;
	struct http_span host;
	unsigned port;
	struct err e;
	size_t n;

	(void)state;
	n = corpus_file("http_head", "real_curl_proxyform", buf, sizeof(buf));
	assert_int_equal(http_parse_request(buf, n, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(h.form, HTTP_TARGET_ABSOLUTE);
	assert_true(http_span_ieq(&h.authority, "api.example.com"));
	assert_true(http_span_ieq(&h.path, "/v1/models"));
	n = corpus_file("http_head", "ok_pipelined", buf, sizeof(buf));
	assert_int_equal(http_parse_request(buf, n, &h, &e), HTTP_HEAD_OK);
	assert_true(http_span_ieq(&h.host, "a.test"));
	/* the second request is judged on its own */
	assert_int_equal(
	    http_parse_request(buf + h.head_len, n - h.head_len, &h, &e),
	    HTTP_HEAD_OK);
	assert_true(http_span_ieq(&h.host, "evil.test"));
	n = corpus_file("http_head", "ok_ipv6_host", buf, sizeof(buf));
	assert_int_equal(http_parse_request(buf, n, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(http_authority_split(&h.host, 80, &host, &port), 0);
	{
		/* a NUL is no host character, in a name or in brackets */
		static const struct http_span nul_name = {"a\0b.test", 8},
		                              nul_v6 = {"[::\0:1]", 7};

		assert_int_equal(
		    http_authority_split(&nul_name, 80, &host, &port), -1);
		assert_int_equal(
		    http_authority_split(&nul_v6, 80, &host, &port), -1);
		assert_false(http_is_tchar('\0'));
	}
	assert_true(http_span_ieq(&host, "2001:db8::1"));
	assert_int_equal(port, 8080);
	n = corpus_file("http_head", "ok_ows_value", buf, sizeof(buf));
	assert_int_equal(http_parse_request(buf, n, &h, &e), HTTP_HEAD_OK);
	assert_true(http_span_ieq(&h.host, "a.test"));
	assert_true(http_span_ieq(http_header_get(&h, "x-a", NULL), "1"));
	n = corpus_file("http_head", "ok_websocket", buf, sizeof(buf));
	assert_int_equal(http_parse_request(buf, n, &h, &e), HTTP_HEAD_OK);
	assert_true(h.conn_upgrade);
	n = corpus_file("http_head", "ok_http10", buf, sizeof(buf));
	assert_int_equal(http_parse_request(buf, n, &h, &e), HTTP_HEAD_OK);
	assert_true(h.conn_close);
	n = corpus_file("http_head", "ok_expect", buf, sizeof(buf));
	assert_int_equal(http_parse_request(buf, n, &h, &e), HTTP_HEAD_OK);
	assert_true(h.expect_continue);
}

static void
test_find_end_linear(void **state)
{
	const char *req = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\nrest";
	size_t cursor = 0, end = 0, i, n = strlen(req);

	(void)state;
	/* dripped one byte at a time, the end shows up exactly once */
	for (i = 1; i < n; i++)
		if (http_head_find_end(req, i, &cursor, &end))
			break;
	assert_int_equal(end, n - 4);
	assert_int_equal(i, n - 4);
}

static void
test_responses(void **state)
{
	static const struct http_span get = {"GET", 3}, head = {"HEAD", 4};
	struct http_head h;
	struct err e;
	size_t n;

	(void)state;
	n = corpus_file("http_head", "resp_ok", buf, sizeof(buf));
	assert_int_equal(
	    http_parse_response(buf, n, &get, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(h.status, 200);
	assert_int_equal(h.body, HTTP_BODY_LENGTH);
	assert_int_equal(
	    http_parse_response(buf, n, &head, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(h.body, HTTP_BODY_NONE);
	n = corpus_file("http_head", "resp_chunked", buf, sizeof(buf));
	assert_int_equal(
	    http_parse_response(buf, n, &get, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(h.body, HTTP_BODY_CHUNKED);
	n = corpus_file("http_head", "resp_close", buf, sizeof(buf));
	assert_int_equal(
	    http_parse_response(buf, n, &get, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(h.body, HTTP_BODY_CLOSE);
	assert_true(h.conn_close);
	n = corpus_file("http_head", "resp_204", buf, sizeof(buf));
	assert_int_equal(
	    http_parse_response(buf, n, &get, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(h.body, HTTP_BODY_NONE);
	n = corpus_file("http_head", "resp_101", buf, sizeof(buf));
	assert_int_equal(
	    http_parse_response(buf, n, &get, &h, &e), HTTP_HEAD_OK);
	assert_true(h.conn_upgrade);
	n = corpus_file("http_head", "resp_no_reason", buf, sizeof(buf));
	assert_int_equal(
	    http_parse_response(buf, n, &get, &h, &e), HTTP_HEAD_OK);
	assert_int_equal(h.reason.n, 0);
	/* methods are case-sensitive: "head" is not HEAD, so a response
	 * to it is framed by its own fields (issue 34: Go and hyper answer
	 * "head" with a body) */
	{
		static const struct http_span lower = {"head", 4};

		n = corpus_file("http_head", "resp_ok", buf, sizeof(buf));
		assert_int_equal(
		    http_parse_response(buf, n, &lower, &h, &e), HTTP_HEAD_OK);
		assert_int_equal(h.body, HTTP_BODY_LENGTH);
	}
	/* a request is not a response */
	n = corpus_file("http_head", "ok_get", buf, sizeof(buf));
	assert_int_equal(
	    http_parse_response(buf, n, &get, &h, &e), HTTP_HEAD_BAD);
}

/* A method that is HEAD or CONNECT but for case would leave the
 * response's framing to the origin's whim: refused, 400. */
static void
test_method_case(void **state)
{
	static const char *const refused[] = {
	    "head / HTTP/1.1\r\nHost: a.test\r\n\r\n",
	    "Head / HTTP/1.1\r\nHost: a.test\r\n\r\n",
	    "hEAD / HTTP/1.1\r\nHost: a.test\r\n\r\n",
	    "connect a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
	};
	static const char *const ok[] = {
	    "HEAD / HTTP/1.1\r\nHost: a.test\r\n\r\n",
	    "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
	    "get / HTTP/1.1\r\nHost: a.test\r\n\r\n", /* its own method */
	};
	struct http_head h;
	struct err e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		assert_int_equal(
		    http_parse_request(refused[i], strlen(refused[i]), &h, &e),
		    HTTP_HEAD_BAD);
		assert_int_equal(h.reject_status, 400);
	}
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		assert_int_equal(
		    http_parse_request(ok[i], strlen(ok[i]), &h, &e),
		    HTTP_HEAD_OK);
	assert_true(http_span_eq(&h.method, "get"));
	assert_false(http_span_eq(&h.method, "GET"));
}

/* The parser's byte class table (http_head.c) against RFC 9110's
 * definitions, through the parser, for every byte value: in a header
 * name, a header value and a reason phrase. */
static bool
ref_tchar(unsigned c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') ||
	    (c != 0 && strchr("!#$%&'*+-.^_`|~", (int)c) != NULL);
}

static bool
ref_field(unsigned c)
{
	return (c >= 0x21 && c <= 0x7e) || c >= 0x80 || c == ' ' || c == '\t';
}

static void
test_byte_classes(void **state)
{
	static struct http_head h;
	struct err e;
	char line[128];
	unsigned c, k;
	int n;

	(void)state;
	for (c = 0; c < 256; c++) {
		assert_int_equal(http_is_tchar((unsigned char)c), ref_tchar(c));
		n = snprintf(line, sizeof(line),
		    "GET / HTTP/1.1\r\nHost: a.test\r\nXZA: 1\r\n\r\n");
		*strchr(line, 'Z') = (char)c; /* a byte of the name */
		/* "X:A: 1" is the field X, its value "A: 1" */
		assert_int_equal(http_parse_request(line, (size_t)n, &h, &e),
		    ref_tchar(c) || c == ':' ? HTTP_HEAD_OK : HTTP_HEAD_BAD);
		n = snprintf(line, sizeof(line),
		    "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: aZb\r\n\r\n");
		*strchr(line, 'Z') = (char)c; /* the value's middle byte */
		assert_int_equal(http_parse_request(line, (size_t)n, &h, &e),
		    ref_field(c) ? HTTP_HEAD_OK : HTTP_HEAD_BAD);
		n = snprintf(line, sizeof(line),
		    "HTTP/1.1 200 OZK\r\nContent-Length: 0\r\n\r\n");
		*strchr(line, 'Z') = (char)c; /* the reason's middle byte */
		assert_int_equal(
		    http_parse_response(line, (size_t)n, NULL, &h, &e),
		    ref_field(c) ? HTTP_HEAD_OK : HTTP_HEAD_BAD);
		/* at every offset of a long value: the parser checks 8 bytes
		 * at a time, and the byte falls at each place of a word */
		for (k = 0; k < 24; k++) {
			n = snprintf(line, sizeof(line),
			    "GET / HTTP/1.1\r\nHost: a.test\r\nX-A: "
			    "aaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n");
			line[n - 28 + (int)k] = (char)c;
			assert_int_equal(
			    http_parse_request(line, (size_t)n, &h, &e),
			    ref_field(c) ? HTTP_HEAD_OK : HTTP_HEAD_BAD);
		}
	}
}

/* What is wrong with a header line's name, in the order it is looked at. */
static void
test_name_errors(void **state)
{
	static const struct {
		const char *line, *why;
	} cases[] = {
	    {"X A: 1", "whitespace before a header's colon"},
	    {"X\tA: 1", "whitespace before a header's colon"},
	    {"XA : 1", "whitespace before a header's colon"},
	    {"X@A: 1", "header name is not a token"},
	    {"X@A 1", "header line without a name"},
	    {"X A 1", "header line without a name"},
	    {"XA", "header line without a name"},
	    {": 1", "header line without a name"},
	    {" XA: 1", "obsolete line folding"},
	    {"X(A): 1", "header name is not a token"},
	};
	static struct http_head h;
	struct err e;
	char line[128];
	size_t i;
	int n;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = snprintf(line, sizeof(line),
		    "GET / HTTP/1.1\r\nHost: a.test\r\n%s\r\n\r\n",
		    cases[i].line);
		assert_int_equal(
		    http_parse_request(line, (size_t)n, &h, &e), HTTP_HEAD_BAD);
		assert_string_equal(e.msg, cases[i].why);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_corpus),
	    cmocka_unit_test(test_request_fields),
	    cmocka_unit_test(test_find_end_linear),
	    cmocka_unit_test(test_responses),
	    cmocka_unit_test(test_method_case),
	    cmocka_unit_test(test_byte_classes),
	    cmocka_unit_test(test_name_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
