/*
 * http_connect: the CONNECT request egressd sends an upstream proxy and
 * the strict, bounded parse of the proxy's answer; every verdict holds
 * whole and for every prefix (a prefix of a good head is MORE).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "egressd/proto/http_connect.h"

struct want {
	const char *in;
	enum http_connect_rc rc;
	int status;
	size_t tail; /* bytes after the head (the tunnel's) */
};

static const struct want cases[] = {
    {"HTTP/1.1 200 Connection established\r\n\r\n", HTTP_CONNECT_OK, 200, 0},
    {"HTTP/1.0 200 OK\r\nProxy-Agent: x\r\n\r\n\x16\x03\x03", HTTP_CONNECT_OK,
        200, 3},
    {"HTTP/1.1 200\r\n\r\n", HTTP_CONNECT_OK, 200, 0},
    {"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", HTTP_CONNECT_OK,
        204, 0},
    {"HTTP/1.1 407 Proxy Authentication Required\r\n"
     "Proxy-Authenticate: Basic realm=\"x\"\r\nContent-Length: 5\r\n\r\n"
     "nope!",
        HTTP_CONNECT_OK, 407, 5},
    {"HTTP/1.1 403 Forbidden\r\n\r\n", HTTP_CONNECT_OK, 403, 0},
    {"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n", HTTP_CONNECT_OK,
        502, 0},
    /* a body on the tunnel's answer would be read as the origin's */
    {"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd", HTTP_CONNECT_BAD, 0,
        0},
    {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HTTP_CONNECT_BAD,
        0, 0},
    {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", HTTP_CONNECT_BAD,
        0, 0},
    {"HTTP/1.1 200 OK\n\n", HTTP_CONNECT_BAD, 0, 0},
    {"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", HTTP_CONNECT_BAD, 0, 0},
    {"HTTP/1.1 200 OK\r\nX : a\r\n\r\n", HTTP_CONNECT_BAD, 0, 0},
    {"HTTP/2 200\r\n\r\n", HTTP_CONNECT_BAD, 0, 0},
    {"HTTP/1.1 2000 OK\r\n\r\n", HTTP_CONNECT_BAD, 0, 0},
    {"HTTP/1.1 099 OK\r\n\r\n", HTTP_CONNECT_BAD, 0, 0},
    {"SSH-2.0-OpenSSH_9.2\r\n\r\n", HTTP_CONNECT_BAD, 0, 0},
    {"HTTP/1.1 200 OK\r\nA\rB: c\r\n\r\n", HTTP_CONNECT_BAD, 0, 0},
};

static void
test_parse(void **state)
{
	struct http_connect_resp r;
	struct err e;
	size_t i, k, n;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct want *w = &cases[i];
		enum http_connect_rc rc;

		n = strlen(w->in);
		rc = http_connect_parse(w->in, n, &r, &e);
		if (rc != w->rc)
			fail_msg("case %zu: rc %d, want %d (%s)", i, rc, w->rc,
			    e.msg);
		if (rc == HTTP_CONNECT_OK &&
		    (r.status != w->status || n - r.head_len != w->tail))
			fail_msg("case %zu: status %d tail %zu", i, r.status,
			    n - r.head_len);
		if (rc != HTTP_CONNECT_OK)
			continue;
		/* every proper prefix of the head: MORE */
		for (k = 0; k < r.head_len; k++)
			if (http_connect_parse(w->in, k, &r, &e) !=
			    HTTP_CONNECT_MORE)
				fail_msg("case %zu: prefix %zu not MORE", i, k);
	}
}

/* No end within the bound: BAD, not MORE for ever. */
static void
test_bound(void **state)
{
	static char big[HTTP_CONNECT_HEAD_MAX + 64];
	struct http_connect_resp r;
	struct err e;
	size_t n = 0;

	(void)state;
	n += (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
	while (n + 8 < sizeof(big)) {
		memcpy(big + n, "X: y\r\n", 6);
		n += 6;
	}
	assert_int_equal(
	    http_connect_parse(big, HTTP_CONNECT_HEAD_MAX - 1, &r, &e),
	    HTTP_CONNECT_MORE);
	assert_int_equal(http_connect_parse(big, n, &r, &e), HTTP_CONNECT_BAD);
	assert_non_null(strstr(e.msg, "over"));
}

static void
test_request(void **state)
{
	char out[HTTP_CONNECT_REQUEST_MAX], a[HTTP_CONNECT_AUTHORITY_MAX + 1];
	struct err e;
	size_t len;
	static const char auth[] = "Basic dXNlcjpwYXNz";

	(void)state;
	assert_int_equal(
	    http_connect_authority("api.example.test", 443, a, sizeof(a), &e),
	    0);
	assert_string_equal(a, "api.example.test:443");
	assert_int_equal(
	    http_connect_authority("2001:db8::5", 8443, a, sizeof(a), &e), 0);
	assert_string_equal(a, "[2001:db8::5]:8443");
	assert_int_equal(
	    http_connect_authority("198.51.100.7", 80, a, sizeof(a), &e), 0);
	assert_string_equal(a, "198.51.100.7:80");
	/* nothing in a name may change the request */
	assert_int_equal(
	    http_connect_authority("a b", 443, a, sizeof(a), &e), -1);
	assert_int_equal(
	    http_connect_authority("a\r\nX: y", 443, a, sizeof(a), &e), -1);
	assert_int_equal(
	    http_connect_authority("u@h", 443, a, sizeof(a), &e), -1);
	assert_int_equal(http_connect_authority("", 443, a, sizeof(a), &e), -1);
	assert_int_equal(http_connect_authority("h", 0, a, sizeof(a), &e), -1);

	assert_int_equal(http_connect_request("h.test:443", auth, strlen(auth),
	                     out, sizeof(out), &len, &e),
	    0);
	assert_int_equal(len,
	    strlen("CONNECT h.test:443 HTTP/1.1\r\n"
	           "Host: h.test:443\r\n"
	           "Proxy-Authorization: Basic "
	           "dXNlcjpwYXNz\r\n\r\n"));
	assert_memory_equal(out,
	    "CONNECT h.test:443 HTTP/1.1\r\nHost: h.test:443\r\n"
	    "Proxy-Authorization: Basic dXNlcjpwYXNz\r\n\r\n",
	    len);
	assert_int_equal(http_connect_request(
	                     "h.test:443", NULL, 0, out, sizeof(out), &len, &e),
	    0);
	assert_memory_equal(out,
	    "CONNECT h.test:443 HTTP/1.1\r\nHost: h.test:443\r\n\r\n", len);
	/* a credential that would end the field, and the error never
	 * quotes it */
	assert_int_equal(
	    http_connect_request("h.test:443", "Basic a\r\nX: s3cr", 16, out,
	        sizeof(out), &len, &e),
	    -1);
	assert_null(strstr(e.msg, "s3cr"));
	assert_int_equal(http_connect_request("h.test:443", " Basic x", 8, out,
	                     sizeof(out), &len, &e),
	    -1);
	assert_int_equal(http_connect_request(
	                     "h.test:443", auth, 0, out, sizeof(out), &len, &e),
	    -1);
	assert_int_equal(http_connect_request("h.test:443", auth, strlen(auth),
	                     out, 20, &len, &e),
	    -1);
	assert_int_equal(http_connect_request("h .test:443", NULL, 0, out,
	                     sizeof(out), &len, &e),
	    -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_bound),
	    cmocka_unit_test(test_request),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
