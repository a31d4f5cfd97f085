/*
 * vault_http.c and vault_http_body.c: http credential sources in the
 * vault (issue 38 item 4). The store's answer read strictly (json and
 * raw); a binding whose credential has no value yet, or one past
 * maxStale (stepped clock), is refused 502, never injected without it;
 * a fetched value is injected, a rotated one retired (still redacted);
 * a new revision of the same settings carries the value, changed
 * settings drop it; the request carries the policy's headers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ts_policy.h"
#include "vault/vault.h"
#include "vault/vault_http.h"
#include "vault/vault_http_body.h"

#define POL(extra)                                                             \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.example.com}\n"                       \
	"  - {action: allow, target: store.example.net}\n"                     \
	"credentials:\n"                                                       \
	"  - {name: st, source: {type: inline, value: store-token-1234}}\n"    \
	"  - name: k\n"                                                        \
	"    source:\n"                                                        \
	"      type: http\n"                                                   \
	"      url: https://store.example.net/v1/k\n"                          \
	"      ttl: 10\n"                                                      \
	"      maxStale: 20\n"                                                 \
	"      headers: {Authorization: {credential: st}, X-Lit: "             \
	"lit-v}\n" extra "bindings:\n"                                         \
	"  - name: b\n"                                                        \
	"    match: {hosts: [api.example.com]}\n"                              \
	"    auth: {type: bearer, credential: k}\n"

static uint64_t fake_now;

static uint64_t
fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static enum vault_decision
decide(struct vault *v, struct vault_inject *out)
{
	struct vault_req rq = {POLICY_SCHEME_HTTPS, "api.example.com", 443,
	    "GET", 3, "/x", 2, NULL, 0};
	struct err e;

	assert_int_equal(vault_decide(v, &rq, out, &e), 0);
	return out->decision;
}

static int
parse(const char *body, enum policy_http_format f, struct vault_http_value *o,
    char *buf)
{
	struct err e;

	return vault_http_body_parse((const uint8_t *)body, strlen(body), f,
	    buf, strlen(body) + 1, o, &e);
}

static void
test_body(void **state)
{
	static const char *const bad[] = {"", "[]", "{}", "{\"ttl\":5}",
	    "{\"value\":1}", "{\"value\":\"\"}", "{\"value\":\"a\\nb\"}",
	    "{\"value\":\"a\",\"value\":\"b\"}", "{\"value\":\"a\"} x",
	    "{\"value\":\"a\",\"ttl\":-1}", "{\"value\":\"a\",\"ttl\":\"x\"}",
	    "{\"value\":\"a\",\"ttl\":1.5}", "{\"value\":\"a\"",
	    "{\"value\":\"\\ud800\"}", "\xef\xbb\xbf{\"value\":\"a\"}",
	    "{\"value\":\"a\",\"x\":[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}"};
	struct vault_http_value o;
	char buf[256];
	size_t i;

	(void)state;
	assert_int_equal(parse("{\"value\":\"s\\u00e9cret\",\"ttl\":30,"
	                       "\"url\":\"https://x/\",\"headers\":{\"a\":"
	                       "\"b\"}}",
	                     POLICY_HTTP_JSON, &o, buf),
	    0);
	assert_int_equal(o.len, 7);
	assert_memory_equal(o.val,
	    "s\xc3\xa9"
	    "cret",
	    7);
	assert_int_equal(o.ttl_s, 30);
	assert_int_equal(parse(" {\"ttl\":\"7\", \"value\":\"v\"} ",
	                     POLICY_HTTP_JSON, &o, buf),
	    0);
	assert_int_equal(o.ttl_s, 7);
	assert_int_equal(
	    parse("{\"value\":\"v\"}", POLICY_HTTP_JSON, &o, buf), 0);
	assert_int_equal(o.ttl_s, 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i], POLICY_HTTP_JSON, &o, buf) != -1)
			fail_msg("accepted %s", bad[i]);
	assert_int_equal(parse("raw-value\r\n", POLICY_HTTP_RAW, &o, buf), 0);
	assert_int_equal(o.len, 9);
	assert_memory_equal(o.val, "raw-value", 9);
	assert_int_equal(parse("a\nb", POLICY_HTTP_RAW, &o, buf), -1);
	assert_int_equal(parse("\n", POLICY_HTTP_RAW, &o, buf), -1);
}

static void
test_fetch_cycle(void **state)
{
	struct policy *p = ts_policy_yaml(POL(""), "h.yaml");
	struct vault *v, *v2, *v3;
	struct vault_inject vi;
	struct vault_http_state st;
	struct err e;
	size_t n;
	char *h;

	(void)state;
	fake_now = 1000;
	assert_non_null(v = vault_new(p, NULL, &e));
	vault_set_clock(v, fake_clock, NULL);
	/* no value yet: refused 502, nothing injected */
	assert_int_equal(decide(v, &vi), VAULT_REFUSED);
	assert_int_equal(vi.status, 502);
	assert_non_null(strstr(vi.reason, "not fetched"));
	assert_null(vi.lines);
	vault_inject_clear(v, &vi);
	assert_int_equal(vault_http_state(v, "k", &st), 0);
	assert_false(st.have);
	assert_int_equal(vault_http_state(v, "st", &st), -1);
	/* fetched: injected; the store's ttl (60) capped by the policy's */
	assert_non_null(
	    v2 = vault_http_set(v, "k", "value-one-abcdef", 16, 60, 1000, &e));
	assert_int_equal(decide(v2, &vi), VAULT_INJECTED);
	assert_string_equal(
	    vi.lines, "Authorization: Bearer value-one-abcdef\r\n");
	vault_inject_clear(v2, &vi);
	assert_int_equal(vault_http_state(v2, "k", &st), 0);
	assert_true(st.have);
	assert_int_equal(st.due_ms, 11000);
	assert_int_equal(st.until_ms, 31000);
	/* rotated: the new value injected, the old one still redacted */
	fake_now = 12000;
	assert_non_null(
	    v3 = vault_http_set(v2, "k", "value-two-ghijkl", 16, 0, 12000, &e));
	assert_true(vault_http_changed(v3, v2, "k"));
	assert_int_equal(decide(v3, &vi), VAULT_INJECTED);
	assert_string_equal(
	    vi.lines, "Authorization: Bearer value-two-ghijkl\r\n");
	vault_inject_clear(v3, &vi);
	assert_true(vault_redact_any(v3, "x value-one-abcdef y", 19));
	h = vault_redact_header(v3, "value-one-abcdef", 16, &n);
	assert_non_null(h);
	assert_string_equal(h, "[REDACTED]");
	free(h);
	/* the store down: used until due (22 s) + maxStale (20 s) */
	fake_now = 41999;
	assert_int_equal(decide(v3, &vi), VAULT_INJECTED);
	vault_inject_clear(v3, &vi);
	fake_now = 42000;
	assert_int_equal(decide(v3, &vi), VAULT_REFUSED);
	assert_int_equal(vi.status, 502);
	assert_non_null(strstr(vi.reason, "maxStale"));
	vault_inject_clear(v3, &vi);
	assert_null(vault_http_set(v3, "k", "a\nb", 3, 0, 1, &e));
	assert_null(vault_http_set(v3, "st", "abc", 3, 0, 1, &e));
	vault_free(v3);
	vault_free(v2);
	vault_free(v);
	policy_unref(p);
}

static void
test_carry(void **state)
{
	struct policy *p = ts_policy_yaml(POL(""), "h.yaml");
	struct policy *q = ts_policy_yaml(POL("  - {name: z, source: {type: "
	                                      "inline, value: zzzz}}\n"),
	    "h2.yaml");
	struct policy *r = ts_policy_yaml(
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: api.example.com}\n"
	    "  - {action: allow, target: store.example.net}\n"
	    "credentials:\n"
	    "  - name: k\n"
	    "    source: {type: http, url: 'https://store.example.net/v2/k'}\n"
	    "bindings:\n"
	    "  - name: b\n"
	    "    match: {hosts: [api.example.com]}\n"
	    "    auth: {type: bearer, credential: k}\n",
	    "h3.yaml");
	struct vault *v, *v2, *v3, *v4;
	struct vault_inject vi;
	struct err e;

	(void)state;
	fake_now = 1000;
	assert_non_null(v = vault_new(p, NULL, &e));
	vault_set_clock(v, fake_clock, NULL);
	assert_non_null(
	    v2 = vault_http_set(v, "k", "carried-value-xyz", 17, 0, 1000, &e));
	/* the same settings in another snapshot: carried */
	assert_non_null(v3 = vault_new(q, v2, &e));
	assert_int_equal(decide(v3, &vi), VAULT_INJECTED);
	assert_string_equal(
	    vi.lines, "Authorization: Bearer carried-value-xyz\r\n");
	vault_inject_clear(v3, &vi);
	/* another url: fetched anew, the old value retired */
	assert_non_null(v4 = vault_new(r, v3, &e));
	assert_int_equal(decide(v4, &vi), VAULT_REFUSED);
	vault_inject_clear(v4, &vi);
	assert_true(vault_redact_any(v4, "carried-value-xyz", 17));
	vault_free(v4);
	vault_free(v3);
	vault_free(v2);
	vault_free(v);
	policy_unref(r);
	policy_unref(q);
	policy_unref(p);
}

static void
test_request(void **state)
{
	struct policy *p = ts_policy_yaml(POL(""), "h.yaml");
	struct vault_http_req rq;
	struct vault *v;
	struct err e;
	char *s;

	(void)state;
	assert_non_null(v = vault_new(p, NULL, &e));
	assert_int_equal(vault_http_request(v, "k", &rq, &e), 0);
	assert_non_null(s = strndup((const char *)rq.bytes, rq.len));
	assert_string_equal(s,
	    "GET /v1/k HTTP/1.1\r\nHost: store.example.net\r\n"
	    "User-Agent: egressd\r\nConnection: close\r\n"
	    "Authorization: store-token-1234\r\nX-Lit: lit-v\r\n\r\n");
	assert_string_equal(rq.h->host, "store.example.net");
	free(s);
	vault_http_request_clear(&rq);
	assert_null(rq.bytes);
	assert_int_equal(vault_http_request(v, "st", &rq, &e), -1);
	vault_free(v);
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_body),
	    cmocka_unit_test(test_fetch_cycle),
	    cmocka_unit_test(test_carry),
	    cmocka_unit_test(test_request),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
