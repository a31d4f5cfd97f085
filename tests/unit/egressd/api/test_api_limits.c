/*
 * api, limits and deadlines: the body cap (Content-Length and chunked) and
 * the header cap answered in the API's own words, the connection slots
 * (accept paused at the cap, silent connections one slot each), and the
 * head and body deadlines against idle and dripping (slowloris) clients.
 * Over a real socket with fake daemon hooks (api_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "api_fixture.h"
#include "util/now.h"

static void
test_body_cap(void **state)
{
	struct fx *f = *state;
	size_t n = API_BODY_MAX;
	char *big = malloc(n + 2);
	struct resp r;

	assert_non_null(big);
	/* Exactly the cap: accepted whole (white space around "{}"). */
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	call_full(f, "POST", "/policy",
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n", big, n, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	assert_int_equal(f->commits, 1);
	/* One byte over: 413, never a truncated parse. */
	memset(big, ' ', n + 1);
	big[0] = '{';
	big[n] = '}';
	call_full(f, "POST", "/policy",
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n", big, n + 1, &r);
	expect_text(&r, 413, "request body too large\n");
	resp_free(&r);
	assert_int_equal(f->commits, 1);
	free(big);
	/* Far over every bound (libevent's too): still our answer, at the
	 * head, before any of the body is sent. */
	{
		static const char req[] =
		    "POST /policy HTTP/1.1\r\nHost: x\r\n"
		    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
		    "Content-Length: 104857600\r\n\r\n";
		exchange(f, client_connect(f), req, sizeof(req) - 1, &r);
		expect_text(&r, 413, "request body too large\n");
		resp_free(&r);
	}
}

static void
test_header_cap(void **state)
{
	struct fx *f = *state;
	size_t n = API_HEADERS_MAX + 1024;
	char *h = malloc(n + 32);
	struct resp r;

	assert_non_null(h);
	memcpy(h, "X-Big: ", 7);
	memset(h + 7, 'a', n);
	memcpy(h + 7 + n, "\r\n", 3);
	call_full(f, "GET", "/policy", h, "", 0, &r);
	/* Answered in the API's own format, not libevent's HTML. */
	expect_text(&r, 431, "request header fields too large\n");
	resp_free(&r);
	free(h);
	/* Still serving. */
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
}

static void
test_connections(void **state)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	struct fx *f = *state;
	int fds[API_CONNS_MAX], extra;
	char buf[512], *logs;
	size_t i;
	ssize_t n;

	/* Keep-alive connections, one request each, all tracked. */
	for (i = 0; i < API_CONNS_MAX; i++) {
		fds[i] = client_connect(f);
		spin(f, 2);
		assert_int_equal(send(fds[i], req, sizeof(req) - 1, 0),
		    (ssize_t)(sizeof(req) - 1));
	}
	spin(f, 200);
	assert_int_equal(api_connections(f->api), API_CONNS_MAX);
	for (i = 0; i < API_CONNS_MAX; i++) {
		n = recv(fds[i], buf, sizeof(buf) - 1, MSG_DONTWAIT);
		assert_true(n > 12);
		assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
	}
	/* One more gets through the kernel's backlog but is not served while
	 * the cap holds: accept is paused. */
	extra = client_connect(f);
	spin(f, 20);
	assert_int_equal(send(extra, req, sizeof(req) - 1, MSG_NOSIGNAL),
	    (ssize_t)(sizeof(req) - 1));
	assert_int_equal(read_some(f, extra, buf, sizeof(buf), 400), -1);
	assert_int_equal(api_connections(f->api), API_CONNS_MAX);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"api.pause\""));
	free(logs);
	/* A slot frees: it is served. */
	close(fds[0]);
	n = read_some(f, extra, buf, sizeof(buf) - 1, 2000);
	assert_true(n > 12);
	assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
	close(extra);
	for (i = 1; i < API_CONNS_MAX; i++)
		close(fds[i]);
	spin(f, 300);
	assert_int_equal(api_connections(f->api), 0);

	/* Silent connections (slowloris) hold a slot each, and no more. */
	for (i = 0; i < API_CONNS_MAX; i++) {
		fds[i] = client_connect(f);
		spin(f, 2);
	}
	spin(f, 100);
	assert_int_equal(api_connections(f->api), API_CONNS_MAX);
	for (i = 0; i < API_CONNS_MAX; i++)
		close(fds[i]);
	spin(f, 300);
	assert_int_equal(api_connections(f->api), 0);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
}

/* A connection that sends nothing is closed after the head deadline; one
 * that sends not a whole head is answered 408 (text) and closed. */
static void
test_idle_timeout(void **state)
{
	struct fx *f = *state;
	char buf[256];
	int silent, partial;
	ssize_t n;

	silent = client_connect(f);
	partial = client_connect(f);
	spin(f, 20);
	assert_int_equal(send(partial, "GET /policy HT", 14, 0), 14);
	spin(f, 50);
	assert_int_equal(api_connections(f->api), 2);
	assert_int_equal(read_some(f, silent, buf, sizeof(buf),
	                     (int)f->opts.timing.head_ms + 2000),
	    0);
	n = read_some(f, partial, buf, sizeof(buf) - 1, 2000);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_int_equal(strncmp(buf, "HTTP/1.1 408 ", 13), 0);
	assert_non_null(strstr(buf, "\r\n\r\nrequest timeout\n"));
	assert_non_null(strstr(buf, "Content-Type: text/plain; charset=utf-8"));
	spin(f, (int)f->opts.timing.linger_ms + 500);
	assert_int_equal(api_connections(f->api), 0);
	close(silent);
	close(partial);
}

/*
 * Slowloris: every byte restarts evhttp's idle timer, so a client that
 * drips its head (or its body) would hold its slot for ever; the head and
 * body deadlines end it, with a 408, and the slot frees.
 */
static void
drip(struct fx *f, const char *prefix, const char *drop, int deadline_ms)
{
	uint64_t t0 = now_mono_ms(), end = t0 + (uint64_t)deadline_ms + 3000;
	int fd = client_connect(f);
	char buf[512];
	ssize_t n = -1;
	size_t k = 0;

	spin(f, 20);
	assert_int_equal(
	    send(fd, prefix, strlen(prefix), 0), (ssize_t)strlen(prefix));
	while (now_mono_ms() < end) {
		/* one byte every 200 ms: well inside the idle timeout */
		if (send(fd, drop + (k++ % strlen(drop)), 1,
		        MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
			break;
		if ((n = read_some(f, fd, buf, sizeof(buf) - 1, 200)) > 0)
			break;
	}
	assert_true(n > 0);
	buf[n] = '\0';
	assert_int_equal(strncmp(buf, "HTTP/1.1 408 ", 13), 0);
	/* ended by the deadline, not by evhttp's idle timeout */
	assert_true(now_mono_ms() - t0 >= (uint64_t)deadline_ms - 100);
	assert_true(now_mono_ms() - t0 <
	    (uint64_t)f->opts.timing.idle_s * 1000 + (uint64_t)deadline_ms);
	close(fd);
	spin(f, (int)f->opts.timing.linger_ms + 500);
	assert_int_equal(api_connections(f->api), 0);
}

static void
test_drip_head(void **state)
{
	drip(*state, "GET /policy HTTP/1.1\r\n", "X-Drip: aaaa\r\n",
	    (int)((struct fx *)*state)->opts.timing.head_ms);
}

static void
test_drip_body(void **state)
{
	drip(*state,
	    "POST /policy HTTP/1.1\r\nHost: x\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Content-Length: 1000\r\n\r\n",
	    " ", (int)((struct fx *)*state)->opts.timing.body_ms);
	assert_int_equal(((struct fx *)*state)->commits, 0);
}

/* A chunked body over the cap is refused as it arrives, in text. */
static void
test_chunked_cap(void **state)
{
	struct fx *f = *state;
	size_t chunk = 64 << 10, nchunks = API_BODY_MAX / chunk + 2, i, o;
	size_t cap = nchunks * (chunk + 16) + 512;
	char *req = malloc(cap);
	struct resp r;

	assert_non_null(req);
	o = (size_t)snprintf(req, cap,
	    "POST /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n");
	for (i = 0; i < nchunks; i++) {
		o += (size_t)snprintf(req + o, cap - o, "%zx\r\n", chunk);
		memset(req + o, ' ', chunk);
		o += chunk;
		o += (size_t)snprintf(req + o, cap - o, "\r\n");
	}
	o += (size_t)snprintf(req + o, cap - o, "0\r\n\r\n");
	exchange(f, client_connect(f), req, o, &r);
	expect_text(&r, 413, "request body too large\n");
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	free(req);
	/* A small chunked body is read as before. */
	{
		static const char ok[] =
		    "POST /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n"
		    "5\r\n{\"def\r\n"
		    "14 ext=1\r\naultAction\":\"allow\"}\r\n0\r\n\r\n";
		exchange(f, client_connect(f), ok, sizeof(ok) - 1, &r);
		expect(&r, 200, JSON, NULL);
		resp_free(&r);
	}
	assert_int_equal(f->commits, 1);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_body_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_header_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connections, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drip_head, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drip_body, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_chunked_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
