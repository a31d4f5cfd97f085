/*
 * The runtime binding matcher and the path normalizer it depends on:
 * every bypass form of THREATS (dot segments, encoded dots and slashes,
 * "//", backslashes, path parameters, host case and trailing dot, ports,
 * method case) against a table of expected results; precedence (exact host
 * over wildcard) and ties (AMBIGUOUS); and agreement with the load-time
 * overlap check: for each pair of bindings, some request of a generated
 * set makes the two tie (AMBIGUOUS) iff policy_bindings_overlap() says
 * they overlap (an exact host and a wildcard over it both match, but do
 * not tie: the exact one wins).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy.h"
#include "policy/policy_binding.h"
#include "policy/policy_path.h"

static void
test_path_normalize(void **state)
{
	static const struct {
		const char *in, *out; /* out NULL: refused */
	} t[] = {
	    {"/", "/"},
	    {"/v1/chat", "/v1/chat"},
	    {"/a/b/../c", "/a/c"},
	    {"/a/./b", "/a/b"},
	    {"/%2e%2e/x", "/x"},
	    {"/a/%2E%2e/b", "/b"},
	    {"/../../etc", "/etc"},
	    {"/%7euser", "/~user"},
	    {"/a/%c3%a9", "/a/%C3%A9"},
	    {"/a/", "/a/"},
	    {"//v1/chat", NULL},
	    {"/a//b", NULL},
	    {"/a%2fb", NULL},
	    {"/a%2Fb", NULL},
	    {"/a%5cb", NULL},
	    {"/a\\b", NULL},
	    {"/a%00b", NULL},
	    {"/a/..;/b", NULL},
	    /* dot segments with path parameters, raw or encoded ';' */
	    {"/api/..%3B/x", NULL},
	    {"/api/..%3b/x", NULL},
	    {"/api/.%3b/x", NULL},
	    {"/api/.%3B", NULL},
	    {"/api/%2e;/x", NULL},
	    {"/api/%2E%2E%3B/x", NULL},
	    {"/api/..;x/y", NULL},
	    {"/api/.;", NULL},
	    {"/api/a/..;", NULL},
	    /* double encoding: what a second decode makes '.', '/', ';' */
	    {"/api/%252e%252e/x", NULL},
	    {"/api/%252E%252E/x", NULL},
	    {"/api/%25252e%25252e/x", NULL},
	    {"/api/%25%32%65%25%32%65/x", NULL},
	    {"/api/%25%32%45./x", NULL},
	    {"/api/x%252fy", NULL},
	    {"/api/x%255Cy", NULL},
	    {"/api/..%253B/x", NULL},
	    {"/api/x%2500", NULL},
	    {"/api/x%253F/y", NULL},
	    {"/api/x/%252e/../y", NULL},
	    /* overlong UTF-8 of '.' and '/' */
	    {"/api/%c0%ae%c0%ae/x", NULL},
	    {"/api/%C0%AF", NULL},
	    {"/api/%c1%9c", NULL},
	    /* near misses that stay */
	    {"/api/...;/x", "/api/...;/x"},
	    {"/api/a;b/x", "/api/a;b/x"},
	    {"/api/x.;/y", "/api/x.;/y"},
	    {"/api/..%3Bx/../y", NULL},
	    {"/api/100%25", "/api/100%25"},
	    {"/api/%25zz", "/api/%25zz"},
	    {"/api/%2541", "/api/%2541"},
	    {"/api/%2525", "/api/%2525"},
	    {"/api/%252", "/api/%252"},
	    {"/api/.x%3B", "/api/.x%3B"},
	    {"/api/%c2%ae", "/api/%C2%AE"},
	    {"/a?x=1", NULL},
	    {"/a#f", NULL},
	    {"a/b", NULL},
	    {"", NULL},
	    {"/a%zz", NULL},
	    {"/a%2", NULL},
	    {"/a b", NULL},
	};
	char out[64];
	struct err e;
	size_t i, n;

	(void)state;
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		assert_true(strlen(t[i].in) < sizeof(out));
		err_clear(&e);
		int rc = policy_path_normalize(
		    t[i].in, strlen(t[i].in), out, sizeof(out), &n, &e);
		if (t[i].out == NULL) {
			if (rc != -1)
				fail_msg(
				    "accepted \"%s\" as \"%s\"", t[i].in, out);
			assert_true(e.msg[0] != '\0');
			continue;
		}
		if (rc != 0)
			fail_msg("refused \"%s\": %s", t[i].in, e.msg);
		assert_string_equal(out, t[i].out);
		assert_int_equal(n, strlen(t[i].out));
		/* idempotent */
		char again[64];
		assert_int_equal(policy_path_normalize(
		                     out, n, again, sizeof(again), NULL, &e),
		    0);
		assert_string_equal(again, out);
	}
	/* a NUL inside the given length */
	assert_int_equal(
	    policy_path_normalize("/a\0b", 4, out, sizeof(out), NULL, &e), -1);
}

#define POL                                                                    \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.example.com}\n"                       \
	"  - {action: allow, target: '*.example.com'}\n"                       \
	"credentials:\n"                                                       \
	"  - name: k\n"                                                        \
	"    source: {type: inline, value: s3cr3t}\n"

static struct policy *
load(const char *y)
{
	struct policy_diag d;
	struct policy *p;
	size_t i;

	policy_diag_init(&d);
	p = policy_parse_yaml(y, strlen(y), "m.yaml", &d);
	for (i = 0; p == NULL && i < d.n; i++)
		print_error("diag: %s\n", d.msgs[i]);
	policy_diag_clear(&d);
	assert_non_null(p);
	return p;
}

static const char *
match(const struct policy *p, unsigned scheme, const char *host, uint16_t port,
    const char *method, const char *path)
{
	struct policy_request rq = {scheme, host, port, method, path};
	const struct policy_binding *b = NULL, *bn = NULL;
	enum policy_bind_result r = policy_binding_match(p, &rq, &b, NULL);
	char norm[POLICY_REQ_PATH_MAX + 1];

	/* a path in normal form: the vault's variant (no second check)
	 * answers the same */
	if (policy_path_normalize(
	        path, strlen(path), norm, sizeof(norm), NULL, NULL) == 0 &&
	    strcmp(norm, path) == 0) {
		assert_int_equal(
		    policy_binding_match_normal(p, &rq, &bn, NULL), r);
		assert_true(bn == b);
	}
	switch (r) {
	case POLICY_BIND_ONE:
		return policy_binding_name(b);
	case POLICY_BIND_NONE:
		return "none";
	case POLICY_BIND_AMBIGUOUS:
		return "ambiguous";
	case POLICY_BIND_INVALID:
		return "invalid";
	}
	return "?";
}

static void
test_match_table(void **state)
{
	struct policy *p =
	    load(POL "bindings:\n"
	             "  - name: chat\n"
	             "    match: {hosts: [api.example.com], methods: [POST], "
	             "paths: ['/v1/chat/*']}\n"
	             "    auth: {type: bearer, credential: k}\n"
	             "  - name: models\n"
	             "    match: {hosts: [api.example.com], methods: [GET], "
	             "paths: ['/v1/models']}\n"
	             "    auth: {type: bearer, credential: k}\n"
	             "  - name: wild\n"
	             "    match: {hosts: ['*.example.com'], methods: [GET]}\n"
	             "    auth: {type: bearer, credential: k}\n");
	const unsigned S = POLICY_SCHEME_HTTPS;

	(void)state;
	assert_string_equal(
	    match(p, S, "api.example.com", 0, "POST", "/v1/chat/x"), "chat");
	assert_string_equal(
	    match(p, S, "api.example.com", 443, "POST", "/v1/chat/x"), "chat");
	assert_string_equal(
	    match(p, S, "API.Example.COM.", 0, "POST", "/v1/chat/x"), "chat");
	/* the prefix is "/v1/chat/": "/v1/chatter" is not below it */
	assert_string_equal(
	    match(p, S, "api.example.com", 0, "POST", "/v1/chatter"), "none");
	assert_string_equal(
	    match(p, S, "api.example.com", 0, "post", "/v1/chat/x"), "none");
	assert_string_equal(
	    match(p, S, "api.example.com", 8443, "POST", "/v1/chat/x"), "none");
	assert_string_equal(match(p, POLICY_SCHEME_HTTP, "api.example.com", 0,
	                        "POST", "/v1/chat/x"),
	    "none");
	assert_string_equal(
	    match(p, S, "api.example.com", 0, "GET", "/v1/models"), "models");
	/* not "/v1/models": only the wildcard binding matches it */
	assert_string_equal(
	    match(p, S, "api.example.com", 0, "GET", "/v1/models/"), "wild");
	/* precedence is among the bindings that match: where no exact-host
	 * binding matches, the wildcard's does */
	assert_string_equal(
	    match(p, S, "api.example.com", 0, "GET", "/other"), "wild");
	assert_string_equal(
	    match(p, S, "cdn.example.com", 0, "GET", "/any/thing"), "wild");
	assert_string_equal(match(p, S, "example.com", 0, "GET", "/"), "none");
	assert_string_equal(
	    match(p, S, "evil-example.com", 0, "GET", "/"), "none");
	assert_string_equal(
	    match(p, S, "cdn.example.com.evil.test", 0, "GET", "/"), "none");
	assert_string_equal(
	    match(p, S, "203.0.113.7", 0, "GET", "/"), "invalid");
	/* the path must be normalized first: the matcher refuses raw forms */
	assert_string_not_equal(
	    match(p, S, "api.example.com", 0, "POST", "/v1/chat/../x"), "chat");
	policy_unref(p);
}

static void
test_ambiguous(void **state)
{
	/* Two bindings of one snapshot cannot tie (the load refuses it), so
	 * the tie is built from two snapshots' bindings. */
	struct policy *a =
	    load(POL "bindings:\n"
	             "  - name: one\n"
	             "    match: {hosts: [api.example.com]}\n"
	             "    auth: {type: bearer, credential: k}\n");
	struct policy *b =
	    load(POL "bindings:\n"
	             "  - name: two\n"
	             "    match: {hosts: [api.example.com], "
	             "paths: ['/v1/*']}\n"
	             "    auth: {type: bearer, credential: k}\n");
	const struct policy_binding *bs[2] = {a->bindings[0], b->bindings[0]};
	struct policy_request rq = {
	    POLICY_SCHEME_HTTPS, "api.example.com", 0, "GET", "/v1/x"};
	const struct policy_binding *out = (void *)&rq;

	(void)state;
	assert_true(policy_bindings_overlap(bs[0], bs[1]));
	assert_int_equal(policy_bindings_match(bs, 2, &rq, &out, NULL),
	    POLICY_BIND_AMBIGUOUS);
	assert_null(out);
	rq.path = "/v2";
	assert_int_equal(
	    policy_bindings_match(bs, 2, &rq, &out, NULL), POLICY_BIND_ONE);
	assert_ptr_equal(out, bs[0]);
	policy_unref(a);
	policy_unref(b);
}

/* Each pattern a binding of its own snapshot, for the agreement check. */
static const char *const pats[] = {
    "{hosts: [api.example.com]}",
    "{hosts: [api.example.com], paths: ['/v1/*']}",
    "{hosts: [api.example.com], paths: ['/v1/models']}",
    "{hosts: [api.example.com], paths: ['/v2/*']}",
    "{hosts: [api.example.com], methods: [POST]}",
    "{hosts: [api.example.com], methods: [GET], paths: ['/v1/*']}",
    "{hosts: ['*.example.com']}",
    "{hosts: ['*.example.com'], paths: ['/v1/*']}",
    "{hosts: [cdn.example.com]}",
    "{hosts: [api.example.com], schemes: [http]}",
};
static const char *const hosts[] = {
    "api.example.com", "cdn.example.com", "x.y.example.com"};
static const char *const paths[] = {
    "/", "/v1/", "/v1/models", "/v1/x", "/v2/", "/v2/x", "/v3"};
static const char *const methods[] = {"GET", "POST", "PUT"};

static void
test_overlap_agrees(void **state)
{
	enum { N = sizeof(pats) / sizeof(pats[0]) };
	struct policy *p[N];
	char y[1024];
	size_t i, j, h, q, m, s;

	(void)state;
	for (i = 0; i < N; i++) {
		(void)snprintf(y, sizeof(y),
		    POL "bindings:\n  - name: b%zu\n    match: %s\n"
		        "    auth: {type: bearer, credential: k}\n",
		    i, pats[i]);
		p[i] = load(y);
	}
	for (i = 0; i < N; i++)
		for (j = i + 1; j < N; j++) {
			const struct policy_binding *bi = p[i]->bindings[0];
			const struct policy_binding *bj = p[j]->bindings[0];
			const struct policy_binding *pair[2] = {bi, bj};
			bool both = false;

			for (s = 0; s < 2 && !both; s++)
				for (h = 0; h < 3; h++)
					for (q = 0; q < 7; q++)
						for (m = 0; m < 3; m++) {
							struct policy_request rq =
							    {s ? POLICY_SCHEME_HTTP
							       : POLICY_SCHEME_HTTPS,
							        hosts[h], 0,
							        methods[m],
							        paths[q]};
							const struct
							    policy_binding *o;
							if (policy_bindings_match(
							        pair, 2, &rq,
							        &o, NULL) ==
							    POLICY_BIND_AMBIGUOUS)
								both = true;
						}
			if (both != policy_bindings_overlap(bi, bj))
				fail_msg("%s / %s: matcher says %s, overlap "
				         "check says %s",
				    pats[i], pats[j],
				    both ? "a tie" : "never a tie",
				    both ? "disjoint" : "overlap");
		}
	for (i = 0; i < N; i++)
		policy_unref(p[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_path_normalize),
	    cmocka_unit_test(test_match_table),
	    cmocka_unit_test(test_ambiguous),
	    cmocka_unit_test(test_overlap_agrees),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
