/*
 * Fuzz target for egressd/proto/http_head.c. The input is read as a request head
 * and as a response head. Invariants (abort on violation):
 *  - OK: the head lies within the input, every span lies within the head,
 *    and the head re-serialized canonically (one space, CRLF, "name: value")
 *    parses to the same method, target, version, headers and framing;
 *  - every proper prefix of an accepted head is MORE: nothing is decided
 *    on a partial head;
 *  - BAD always carries a status egressd knows how to send.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/http_head.h"
#include "fuzz/fuzz_check.h"

static bool
inside(const struct http_span *s, const char *buf, size_t n)
{
	return s->n == 0 || (s->p >= buf && s->p + s->n <= buf + n);
}

static bool
span_eq(const struct http_span *a, const struct http_span *b)
{
	return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}

static void
put(char *out, size_t *k, const void *p, size_t n)
{
	memcpy(out + *k, p, n);
	*k += n;
}

static void
check_rc(enum http_rc rc, const struct http_head *h)
{
	check(
	    rc == HTTP_HEAD_OK || rc == HTTP_HEAD_MORE || rc == HTTP_HEAD_BAD);
	if (rc == HTTP_HEAD_BAD)
		check(strcmp(http_reason(h->reject_status), "Unknown") != 0 &&
		    h->reject_status >= 400);
}

static void
check_head(const char *buf, size_t size, const struct http_head *h)
{
	size_t i;

	check(h->head_len >= 4 && h->head_len <= size &&
	    h->head_len <= HTTP_HEAD_MAX);
	check(memcmp(buf + h->head_len - 4, "\r\n\r\n", 4) == 0);
	check(h->nh <= HTTP_HEADERS_MAX);
	for (i = 0; i < h->nh; i++)
		check(inside(&h->h[i].name, buf, h->head_len) &&
		    inside(&h->h[i].value, buf, h->head_len) &&
		    h->h[i].name.n > 0);
	check(inside(&h->method, buf, h->head_len) &&
	    inside(&h->target, buf, h->head_len) &&
	    inside(&h->host, buf, h->head_len) &&
	    inside(&h->path, buf, h->head_len));
	check(h->body != HTTP_BODY_LENGTH ||
	    h->content_length < UINT64_C(1) << 62);
}

static void
request(const char *buf, size_t size)
{
	static struct http_head h, g;
	static char re[HTTP_HEAD_MAX * 2];
	struct err e;
	enum http_rc rc;
	size_t i, k = 0;

	rc = http_parse_request(buf, size, &h, &e);
	check_rc(rc, &h);
	if (rc != HTTP_HEAD_OK)
		return;
	check_head(buf, size, &h);
	check(h.is_request && (h.minor == 0 || h.minor == 1));
	for (i = 0; i<h.head_len; i += h.head_len> 512 ? 61 : 1)
		check(http_parse_request(buf, i, &g, &e) == HTTP_HEAD_MORE);
	put(re, &k, h.method.p, h.method.n);
	put(re, &k, " ", 1);
	put(re, &k, h.target.p, h.target.n);
	put(re, &k, h.minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
	for (i = 0; i < h.nh; i++) {
		put(re, &k, h.h[i].name.p, h.h[i].name.n);
		put(re, &k, ": ", 2);
		put(re, &k, h.h[i].value.p, h.h[i].value.n);
		put(re, &k, "\r\n", 2);
	}
	put(re, &k, "\r\n", 2);
	if (k > HTTP_HEAD_MAX)
		return;
	rc = http_parse_request(re, k, &g, &e);
	check(rc == HTTP_HEAD_OK);
	check(g.head_len == k && g.nh == h.nh && g.minor == h.minor);
	check(span_eq(&g.method, &h.method) && span_eq(&g.target, &h.target) &&
	    span_eq(&g.host, &h.host) && span_eq(&g.path, &h.path) &&
	    span_eq(&g.query, &h.query) && g.form == h.form);
	check(g.body == h.body && g.content_length == h.content_length &&
	    g.conn_close == h.conn_close && g.conn_upgrade == h.conn_upgrade &&
	    g.expect_continue == h.expect_continue);
	for (i = 0; i < h.nh; i++)
		check(span_eq(&g.h[i].name, &h.h[i].name) &&
		    span_eq(&g.h[i].value, &h.h[i].value));
}

static void
response(const char *buf, size_t size)
{
	static struct http_head h, g;
	static const struct http_span get = {"GET", 3}, head = {"HEAD", 4};
	struct err e;
	enum http_rc rc;

	rc = http_parse_response(buf, size, &get, &h, &e);
	check_rc(rc, &h);
	if (rc != HTTP_HEAD_OK)
		return;
	check_head(buf, size, &h);
	check(h.status >= 100 && h.status <= 999);
	check(http_parse_response(buf, size, &head, &g, &e) == HTTP_HEAD_OK);
	check(g.body == HTTP_BODY_NONE);
	if (h.body == HTTP_BODY_CLOSE)
		check(h.conn_close);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > HTTP_HEAD_MAX + 16)
		size = HTTP_HEAD_MAX + 16;
	request((const char *)data, size);
	response((const char *)data, size);
	return 0;
}
