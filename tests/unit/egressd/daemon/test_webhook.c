#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "egressd/base/log.h"
#include "egressd/daemon/webhook.h"

static void
test_parse_url(void **state)
{
	struct webhook_url u;
	struct err e = {""};
	(void)state;

	assert_int_equal(
	    webhook_parse_url("http://198.51.100.9/hook", &u, &e), 0);
	assert_false(u.tls);
	assert_string_equal(u.host, "198.51.100.9");
	assert_int_equal(u.port, 80);
	assert_string_equal(u.path, "/hook");
	assert_int_equal(
	    webhook_parse_url("https://hooks.test:8443", &u, &e), 0);
	assert_true(u.tls);
	assert_int_equal(u.port, 8443);
	assert_string_equal(u.path, "/");
	assert_int_equal(
	    webhook_parse_url("http://[2001:db8::9]:81/a?b=c", &u, &e), 0);
	assert_string_equal(u.host, "2001:db8::9");
	assert_int_equal(u.port, 81);
	assert_string_equal(u.path, "/a?b=c");
	assert_int_equal(webhook_parse_url("ftp://x/", &u, &e), -1);
	assert_int_equal(webhook_parse_url("http://user:pw@x/", &u, &e), -1);
	assert_null(strstr(e.msg, "pw"));
	assert_int_equal(webhook_parse_url("http://x:0/", &u, &e), -1);
	assert_int_equal(webhook_parse_url("http://x:99999/", &u, &e), -1);
	assert_int_equal(webhook_parse_url("http://x/a#frag", &u, &e), -1);
	assert_int_equal(webhook_parse_url("http:///a", &u, &e), -1);
	assert_int_equal(webhook_parse_url("http://[::1/a", &u, &e), -1);
	assert_int_equal(webhook_parse_url("http://x/a b", &u, &e), -1);
	assert_int_equal(webhook_parse_url("http://x/a\r\nX: y", &u, &e), -1);
}

static void
test_parse_status(void **state)
{
	(void)state;
	assert_int_equal(webhook_parse_status("HTTP/1.1 200 OK", 15), 200);
	assert_int_equal(webhook_parse_status("HTTP/1.0 503", 12), 503);
	assert_int_equal(webhook_parse_status("HTTP/1.1 2000", 13), -1);
	assert_int_equal(webhook_parse_status("HTTP/2 200 OK", 13), -1);
	assert_int_equal(webhook_parse_status("HTTP/1.1 099 x", 14), -1);
	assert_int_equal(webhook_parse_status("garbage", 7), -1);
}

static void
test_queue_dedup_full_backoff(void **state)
{
	static struct webhook_queue q;
	struct webhook_event *ev;
	char name[32];
	int i;
	const uint64_t t = 1000 + WEBHOOK_DEDUP_MS;
	(void)state;

	webhook_queue_init(&q);
	assert_true(webhook_queue_push(&q, "evil.test", "policy", 1000, 5));
	/* Still waiting: one more denial of the same event. */
	assert_false(webhook_queue_push(&q, "evil.test", "policy", 2000, 5));
	assert_int_equal(q.aggregated, 1);
	assert_int_equal(q.len, 1);
	assert_int_equal(webhook_queue_due(&q, 2000)->count, 2);
	/* Sent: the same name within the window is not sent again. */
	webhook_queue_begin(&q);
	webhook_queue_done(&q, true, false, 2000);
	assert_false(webhook_queue_push(&q, "evil.test", "policy", 3000, 5));
	assert_int_equal(q.deduplicated, 1);
	/* After the window the same name is news again. */
	assert_true(webhook_queue_push(&q, "evil.test", "policy", t, 5));
	assert_true(webhook_queue_push(&q, "other.test", "policy", t, 5));
	assert_int_equal(q.len, 2);

	/* Retry with exponential backoff, then give up. */
	ev = webhook_queue_due(&q, t);
	assert_non_null(ev);
	webhook_queue_done(&q, false, true, t);
	assert_null(webhook_queue_due(&q, t + WEBHOOK_RETRY_BASE_MS - 1));
	assert_int_equal(webhook_queue_wait_ms(&q, t), WEBHOOK_RETRY_BASE_MS);
	assert_non_null(webhook_queue_due(&q, t + WEBHOOK_RETRY_BASE_MS));
	webhook_queue_done(&q, false, true, t + 1000);
	assert_null(
	    webhook_queue_due(&q, t + 1000 + 2 * WEBHOOK_RETRY_BASE_MS - 1));
	for (i = 2; i < WEBHOOK_ATTEMPTS; i++)
		webhook_queue_done(&q, false, true, 100000);
	assert_int_equal(q.failed, 1);
	assert_int_equal(q.len, 1);
	/* A 4xx drops at once; a 2xx is delivered. */
	webhook_queue_done(&q, false, false, 100000);
	assert_int_equal(q.failed, 2);
	assert_int_equal(q.len, 0);
	assert_int_equal(webhook_queue_wait_ms(&q, 0), -1);

	/* Bounded: a full queue collapses its oldest into a summary. */
	for (i = 0; i < WEBHOOK_QUEUE_MAX + 10; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		assert_true(webhook_queue_push(&q, name, "policy", 500000, 5));
	}
	assert_int_equal(q.len, WEBHOOK_QUEUE_MAX);
	assert_int_equal(q.collapsed, 10);
	assert_string_equal(webhook_queue_due(&q, 500000)->name, "n10.test");
	/* A collapsed name is not "sent": reported again if it comes back. */
	assert_true(webhook_queue_push(&q, "n0.test", "policy", 500001, 5));
	webhook_queue_begin(&q);
	webhook_queue_done(&q, true, false, 500002);
	assert_int_equal(q.delivered, 2);
	/* Room again: the summary is queued, behind every named event. */
	assert_int_equal(q.len, WEBHOOK_QUEUE_MAX);
	ev = &q.ev[(q.head + q.len - 1) % WEBHOOK_QUEUE_MAX];
	assert_string_equal(ev->name, WEBHOOK_SUMMARY_NAME);
	assert_string_equal(ev->reason, "flood");
	assert_int_equal(ev->names, 11);
	assert_int_equal(ev->count, 11);
}

/*
 * The flood then the real name (issue #16 item 17): while the head is
 * being sent, 5000 distinct names, then the real one. The real one is
 * queued (never dropped), the event being sent is untouched, and the
 * flood is one summary with its count.
 */
static void
test_queue_flood_keeps_real_name(void **state)
{
	static struct webhook_queue q;
	char name[32];
	size_t i, k;
	bool real = false;
	uint64_t names = 0;
	(void)state;

	webhook_queue_init(&q);
	assert_true(webhook_queue_push(&q, "first.test", "policy", 1000, 5));
	webhook_queue_begin(&q);
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "x%zu.exfil.test", i);
		webhook_queue_push(&q, name, "policy", 1000, 5);
	}
	assert_true(webhook_queue_push(&q, "real.evil.test", "cname", 1001, 5));
	assert_int_equal(q.len, WEBHOOK_QUEUE_MAX);
	assert_string_equal(q.ev[q.head].name, "first.test");
	for (k = 0; k < q.len; k++)
		real |= strcmp(q.ev[(q.head + k) % WEBHOOK_QUEUE_MAX].name,
		            "real.evil.test") == 0;
	assert_true(real);
	/* Drain: every event is sent; the summary counts the rest. */
	while (q.len > 0) {
		struct webhook_event *ev = webhook_queue_due(&q, 2000);

		assert_non_null(ev);
		if (strcmp(ev->name, WEBHOOK_SUMMARY_NAME) == 0)
			names += ev->names;
		webhook_queue_begin(&q);
		webhook_queue_done(&q, true, false, 2000);
	}
	assert_int_equal(names, 5000 - (WEBHOOK_QUEUE_MAX - 2));
	assert_int_equal(q.delivered, 1 + 5000 + 1 - names + 1);
}

/* An in-process receiver: first answer 503, then 204. */
struct receiver {
	struct event_base *base;
	int requests;
	json_t *last;
};

static void
receiver_cb(struct evhttp_request *req, void *arg)
{
	struct receiver *r = arg;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char buf[1024];

	assert_true(n < sizeof(buf));
	evbuffer_copyout(in, buf, n);
	json_decref(r->last);
	r->last = json_loadb(buf, n, 0, NULL);
	assert_int_equal(evhttp_request_get_command(req), EVHTTP_REQ_POST);
	assert_string_equal(
	    evhttp_find_header(
	        evhttp_request_get_input_headers(req), "Content-Type"),
	    "application/json");
	r->requests++;
	evhttp_send_reply(req, r->requests == 1 ? 503 : 204, "x", NULL);
	if (r->requests == 2)
		event_base_loopexit(r->base, NULL);
}

static void
test_delivery_with_retry(void **state)
{
	struct receiver r = {0};
	struct evhttp *http;
	struct evhttp_bound_socket *bs;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct webhook_url u;
	struct webhook *w;
	struct log lg;
	struct err e = {""};
	struct timeval limit = {8, 0};
	char url[64];
	(void)state;

	r.base = event_base_new();
	http = evhttp_new(r.base);
	bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
	assert_non_null(bs);
	getsockname(
	    evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &sl);
	evhttp_set_gencb(http, receiver_cb, &r);
	snprintf(
	    url, sizeof(url), "http://127.0.0.1:%u/deny", ntohs(sin.sin_port));
	assert_int_equal(webhook_parse_url(url, &u, &e), 0);
	log_init(&lg, -1, LOG_ERROR);
	w = webhook_new(
	    r.base, &u, (struct sockaddr *)&sin, sl, 0, "sbx-7", NULL, &lg, &e);
	assert_non_null(w);
	webhook_notify(w, "evil.test", "policy");
	webhook_notify(w, "evil.test", "policy"); /* deduplicated */
	event_base_loopexit(r.base, &limit);
	event_base_dispatch(r.base);

	assert_int_equal(r.requests, 2);
	assert_non_null(r.last);
	assert_string_equal(
	    json_string_value(json_object_get(r.last, "hostname")),
	    "evil.test");
	assert_string_equal(
	    json_string_value(json_object_get(r.last, "sandboxId")), "sbx-7");
	assert_string_equal(
	    json_string_value(json_object_get(r.last, "reason")), "policy");
	/* The last reply is processed on the next loop turn. */
	struct timeval brief = {0, 200000};
	event_base_loopexit(r.base, &brief);
	event_base_dispatch(r.base);
	assert_int_equal(webhook_stats(w)->delivered, 1);
	assert_int_equal(webhook_stats(w)->deduplicated, 1);
	json_decref(r.last);
	webhook_free(w);
	evhttp_free(http);
	event_base_free(r.base);
}

/*
 * An https webhook gets a client context from base/tls_ctx.c (egressd's
 * floor, the system trust, the peer verified): it is built at start, so a
 * trust store that does not load fails webhook_new, not the first report.
 */
static void
test_tls_context(void **state)
{
	struct event_base *base = event_base_new();
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct webhook_url u;
	struct webhook *w;
	struct log lg;
	struct err e = {""};
	(void)state;

	assert_int_equal(
	    webhook_parse_url("https://hooks.test:8443/deny", &u, &e), 0);
	log_init(&lg, -1, LOG_ERROR);
	w = webhook_new(base, &u, (struct sockaddr *)&sin, sizeof(sin), 0, NULL,
	    NULL, &lg, &e);
	if (w == NULL)
		fail_msg("webhook_new: %s", e.msg);
	webhook_free(w);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_url),
	    cmocka_unit_test(test_parse_status),
	    cmocka_unit_test(test_queue_dedup_full_backoff),
	    cmocka_unit_test(test_queue_flood_keeps_real_name),
	    cmocka_unit_test(test_delivery_with_retry),
	    cmocka_unit_test(test_tls_context),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
