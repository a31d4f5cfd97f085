#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/api/api_frame.h"

#define HMAX 96
#define BMAX 100

static enum api_frame_error
feed(struct api_frame *f, const char *s)
{
	return api_frame_feed(f, (const uint8_t *)s, strlen(s));
}

/* Byte by byte: the same answer as all at once (framing never depends on
 * how the bytes were cut). */
static enum api_frame_error
feed_bytes(struct api_frame *f, const char *s)
{
	enum api_frame_error e = API_FRAME_OK;

	for (; *s != '\0' && e == API_FRAME_OK; s++)
		e = api_frame_feed(f, (const uint8_t *)s, 1);
	return e;
}

static void
both(const char *in, enum api_frame_error want, enum api_frame_state st,
    uint64_t requests)
{
	struct api_frame a, b;

	api_frame_init(&a, HMAX, BMAX);
	api_frame_init(&b, HMAX, BMAX);
	if (feed(&a, in) != want || feed_bytes(&b, in) != want)
		fail_msg(
		    "[%s]: error %d/%d, want %d", in, a.error, b.error, want);
	if (a.state != st || b.state != st)
		fail_msg(
		    "[%s]: state %d/%d, want %d", in, a.state, b.state, st);
	if (a.requests != requests || b.requests != requests)
		fail_msg("[%s]: %llu/%llu requests, want %llu", in,
		    (unsigned long long)a.requests,
		    (unsigned long long)b.requests,
		    (unsigned long long)requests);
}

static void
test_heads(void **state)
{
	(void)state;
	both("", API_FRAME_OK, API_FRAME_IDLE, 0);
	both("\r\n\r\n", API_FRAME_OK, API_FRAME_IDLE, 0);
	both("GET / HTTP/1.1\r\nHost: x\r\n", API_FRAME_OK, API_FRAME_HEAD, 0);
	both("GET / HTTP/1.1\r\nHost: x\r\n\r\n", API_FRAME_OK, API_FRAME_IDLE,
	    1);
	/* bare LF line ends, leading empty lines, pipelining */
	both("\r\nGET / HTTP/1.1\nA: b\n\nGET / HTTP/1.1\r\n\r\n", API_FRAME_OK,
	    API_FRAME_IDLE, 2);
}

static void
test_lengths(void **state)
{
	(void)state;
	both("POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab", API_FRAME_OK,
	    API_FRAME_BODY, 0);
	both("POST / HTTP/1.1\r\ncontent-length:  3 \r\n\r\nabcGET / "
	     "HTTP/1.1\r\n\r\n",
	    API_FRAME_OK, API_FRAME_IDLE, 2);
	both("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", API_FRAME_OK,
	    API_FRAME_IDLE, 1);
	/* the same length twice is fine, two lengths are not */
	both("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: "
	     "1\r\n\r\nx",
	    API_FRAME_OK, API_FRAME_IDLE, 1);
	both("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: "
	     "2\r\n\r\n",
	    API_FRAME_BAD, API_FRAME_ERROR, 0);
	both("POST / HTTP/1.1\r\nContent-Length: 1a\r\n\r\n", API_FRAME_BAD,
	    API_FRAME_ERROR, 0);
	both("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", API_FRAME_BAD,
	    API_FRAME_ERROR, 0);
	both("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", API_FRAME_BAD,
	    API_FRAME_ERROR, 0);
	/* another header whose name starts the same */
	both("POST / HTTP/1.1\r\nContent-Length-X: zz\r\n\r\n", API_FRAME_OK,
	    API_FRAME_IDLE, 1);
	/* HEAD and TRACE never have a body: the bytes are the next request */
	both("HEAD / HTTP/1.1\r\nContent-Length: 9\r\n\r\nGET / "
	     "HTTP/1.1\r\n\r\n",
	    API_FRAME_OK, API_FRAME_IDLE, 2);
}

static void
test_bounds(void **state)
{
	struct api_frame f;
	char head[HMAX + 8];
	char req[160];

	(void)state;
	/* exactly HMAX bytes of head (line ends included) pass, one more
	 * does not */
	memset(head, 'a', sizeof(head));
	memcpy(head, "GET / HTTP/1.1\r\nX: ", 19);
	memcpy(head + HMAX - 4, "\r\n\r\n", 4);
	head[HMAX] = '\0';
	both(head, API_FRAME_OK, API_FRAME_IDLE, 1);
	memcpy(head + HMAX - 4, "a\r\n\r\n", 5);
	head[HMAX + 1] = '\0';
	both(head, API_FRAME_HEAD_TOO_LARGE, API_FRAME_ERROR, 0);
	/* a head that never ends is refused at HMAX + 1 */
	api_frame_init(&f, HMAX, BMAX);
	memset(head, 'a', sizeof(head));
	assert_int_equal(
	    api_frame_feed(&f, (const uint8_t *)head, HMAX), API_FRAME_OK);
	assert_int_equal(api_frame_feed(&f, (const uint8_t *)head, 1),
	    API_FRAME_HEAD_TOO_LARGE);
	/* sticky */
	assert_int_equal(feed(&f, "\r\n\r\n"), API_FRAME_HEAD_TOO_LARGE);
	assert_int_equal(f.state, API_FRAME_ERROR);
	/* body: BMAX passes, BMAX + 1 is refused at the end of the head */
	snprintf(req, sizeof(req),
	    "POST / HTTP/1.1\r\nContent-Length: %u\r\n\r\n", BMAX);
	both(req, API_FRAME_OK, API_FRAME_BODY, 0);
	snprintf(req, sizeof(req),
	    "POST / HTTP/1.1\r\nContent-Length: %u\r\n\r\n", BMAX + 1);
	both(req, API_FRAME_BODY_TOO_LARGE, API_FRAME_ERROR, 0);
}

static void
test_chunked(void **state)
{
	(void)state;
	both("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	     "3\r\nabc\r\n0\r\n\r\n",
	    API_FRAME_OK, API_FRAME_IDLE, 1);
	/* a size extension after a space (evhttp takes it), trailers, the
	 * next request */
	both("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
	     "A ext=1\r\n0123456789\r\n0\r\nT: 1\r\n\r\nGET / HTTP/1.1\r\n\r\n",
	    API_FRAME_OK, API_FRAME_IDLE, 2);
	/* chunked wins over a length */
	both("POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: "
	     "chunked\r\n\r\n1\r\na\r\n",
	    API_FRAME_OK, API_FRAME_CHUNKED, 0);
	/* evhttp: only exactly "chunked" is chunked */
	both("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n"
	     "Content-Length: 1\r\n\r\nx",
	    API_FRAME_OK, API_FRAME_IDLE, 1);
	/* what evhttp refuses (as 413 in HTML), refused here as bad */
	both("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\n",
	    API_FRAME_BAD, API_FRAME_ERROR, 0);
	both("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	    API_FRAME_BAD, API_FRAME_ERROR, 0);
	both("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	     "1\r\naX\r\n",
	    API_FRAME_BAD, API_FRAME_ERROR, 0);
	/* the sum of the chunks is bounded, as soon as a size says so */
	both("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	     "32\r\n",
	    API_FRAME_OK, API_FRAME_CHUNKED, 0); /* 50 */
	both("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	     "65\r\n",
	    API_FRAME_BODY_TOO_LARGE, API_FRAME_ERROR, 0); /* 101 */
	both("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	     "fffffffffffffffffff\r\n",
	    API_FRAME_BODY_TOO_LARGE, API_FRAME_ERROR, 0);
}

static void
test_seq(void **state)
{
	struct api_frame f;
	uint64_t s0;

	(void)state;
	api_frame_init(&f, HMAX, BMAX);
	s0 = f.seq;
	assert_int_equal(feed(&f, "\r\n"), API_FRAME_OK);
	assert_true(f.seq == s0); /* empty lines: still idle */
	assert_int_equal(feed(&f, "P"), API_FRAME_OK);
	assert_int_equal(f.state, API_FRAME_HEAD);
	s0 = f.seq;
	assert_int_equal(feed(&f, "OST / HTTP/1.1\r\nA: b\r\n"), API_FRAME_OK);
	assert_true(f.seq == s0); /* same head: the deadline runs on */
	assert_int_equal(feed(&f, "Content-Length: 2\r\n\r\n"), API_FRAME_OK);
	assert_int_equal(f.state, API_FRAME_BODY);
	assert_true(f.seq != s0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_heads),
	    cmocka_unit_test(test_lengths),
	    cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_chunked),
	    cmocka_unit_test(test_seq),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
