/*
 * policy_request.c and the request rules of the schema (issue 37):
 * methods and paths parsed on egress name rules only, with FILE:LINE:COL
 * errors; the host-level verdict ignoring deny request rules (index,
 * reach, binding coverage); policy_match_request's verdicts and reasons
 * (the git rules, wildcards, ports, defaults, overlays, invalid
 * input); policy_host_has_request_rules.
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
#include "ts_policy.h"

/* Expects failure and each needle in some message. */
static void
yaml_bad(const char *y, const char *const *needles, size_t n)
{
	struct policy_diag d;
	size_t i, k;

	policy_diag_init(&d);
	assert_null(policy_parse_yaml(y, strlen(y), "p.yaml", &d));
	for (k = 0; k < n; k++) {
		for (i = 0; i < d.n; i++)
			if (strstr(d.msgs[i], needles[k]) != NULL)
				break;
		if (i == d.n) {
			for (i = 0; i < d.n; i++)
				print_error("diag: %s\n", d.msgs[i]);
			fail_msg("missing \"%s\"", needles[k]);
		}
	}
	policy_diag_clear(&d);
}

#define BAD(y, ...)                                                            \
	do {                                                                   \
		const char *const nd_[] = {__VA_ARGS__};                       \
		yaml_bad(y, nd_, sizeof(nd_) / sizeof(nd_[0]));                \
	} while (0)

/* The rules. */
static const char git_rules[] =
    "defaultAction: deny\n"
    "egress:\n"
    "  - {action: allow, target: github.com, methods: [GET], paths: "
    "[\"/*/*/info/refs\"]}\n"
    "  - {action: allow, target: github.com, methods: [POST], paths: "
    "[\"/*/*/git-upload-pack\"]}\n"
    "  - {action: allow, target: api.github.com, methods: [GET, HEAD]}\n"
    "  - {action: deny,  target: \"*.githubusercontent.com\", methods: "
    "[POST, PUT, PATCH, DELETE]}\n";

static void
test_parse_good(void **state)
{
	struct policy *p = ts_policy_yaml(git_rules, "git.yaml");
	const struct policy_rule *r;

	(void)state;
	assert_int_equal(p->nrules, 4);
	r = &p->rules[0];
	assert_true(policy_rule_is_request(r));
	assert_int_equal(r->nmethods, 1);
	assert_string_equal(r->methods[0], "GET");
	assert_int_equal(r->npaths, 1);
	assert_string_equal(r->paths[0], "/*/*/info/refs");
	r = &p->rules[2];
	assert_int_equal(r->nmethods, 2);
	assert_string_equal(r->methods[1], "HEAD");
	assert_int_equal(r->npaths, 0);
	assert_true(policy_rule_is_request(r));
	assert_int_equal(p->rules[3].kind, POLICY_TARGET_WILDCARD);
	assert_true(policy_rule_is_request(&p->rules[3]));
	policy_unref(p);
	/* JSON shares the walker; ports compose; paths alone */
	p = ts_policy_json("{\"egress\":[{\"action\":\"allow\",\"target\":"
	                   "\"a.test\",\"ports\":[443],\"paths\":[\"/v1/*\"]},"
	                   "{\"action\":\"allow\",\"target\":\"b.test\"}]}");
	assert_true(policy_rule_is_request(&p->rules[0]));
	assert_int_equal(p->rules[0].nmethods, 0);
	assert_int_equal(p->rules[0].nports, 1);
	assert_false(policy_rule_is_request(&p->rules[1]));
	policy_unref(p);
	/* a custom token, digits, '-' and '_' */
	p = ts_policy_yaml("egress:\n  - {action: allow, target: a.test, "
	                   "methods: [PROPFIND, M-SEARCH, X_1]}\n",
	    "t");
	assert_int_equal(p->rules[0].nmethods, 3);
	policy_unref(p);
}

static void
test_parse_positions(void **state)
{
	(void)state;
	BAD("egress:\n"
	    "  - target: a.test\n"
	    "    action: allow\n"
	    "    methods: [GET, get]\n",
	    "p.yaml:4:20: invalid method \"get\"");
	BAD("egress:\n"
	    "  - target: a.test\n"
	    "    paths: [\"/a/../b\"]\n",
	    "p.yaml:3:13: path pattern \"/a/../b\" is not in normal form: "
	    "write \"/b\"");
	BAD("egress:\n"
	    "  - {target: 203.0.113.7, methods: [GET]}\n",
	    "p.yaml:2:36: methods and paths need a name target");
	BAD("alwaysAllow:\n"
	    "  - {target: a.test, paths: [\"/x\"]}\n",
	    "p.yaml:2:29: methods and paths are allowed on egress rules only");
}

static void
test_parse_bad(void **state)
{
	(void)state;
	BAD("egress:\n  - {target: a.test, methods: []}\n",
	    "methods must list 1 to 16 entries");
	BAD("egress:\n  - {target: a.test, paths: []}\n",
	    "paths must list 1 to 64 entries");
	BAD("egress:\n  - {target: a.test, methods: GET}\n",
	    "expected a list, found a string");
	BAD("egress:\n  - {target: a.test, methods: [GET, POST, GET]}\n",
	    "duplicate method \"GET\"");
	BAD("egress:\n  - {target: a.test, paths: [\"/a\", \"/a\"]}\n",
	    "duplicate path \"/a\"");
	BAD("egress:\n  - {target: a.test, methods: [\"G T\", 1GET, \"\"]}\n",
	    "invalid method \"G T\"", "invalid method \"1GET\"",
	    "invalid method \"\"");
	BAD("egress:\n  - {target: a.test, methods: "
	    "[ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG]}\n",
	    "invalid method");
	BAD("egress:\n  - {target: a.test, paths: [v1, \"/a?b\", \"/a/**\"]}\n",
	    "must start with '/'", "'?' in path pattern", "\"**\"");
	BAD("egress:\n  - {target: 10.0.0.0/8, paths: [\"/\"]}\n",
	    "need a name target");
	BAD("egress:\n  - {target: a.test, protocols: [udp], paths: [\"/\"]}\n",
	    "need protocol tcp");
	BAD("alwaysDeny:\n  - {target: a.test, methods: [GET]}\n",
	    "egress rules only");
	BAD("infra:\n  - {target: a.test, methods: [GET]}\n",
	    "egress rules only");
	BAD("logSkip:\n  - {target: a.test, methods: [GET]}\n",
	    "egress rules only");
	/* the API body schema too */
	{
		struct err e;
		struct policy *b = policy_new_deny_all();
		const char body[] = "{\"egress\":[{\"action\":\"allow\","
		                    "\"target\":\"1.2.3.4\",\"methods\":"
		                    "[\"GET\"]}]}";

		assert_null(
		    policy_replace_json(b, body, strlen(body), 0, NULL, &e));
		assert_non_null(strstr(e.msg, "need a name target"));
		policy_unref(b);
	}
}

/* ---- the verdicts ---- */

struct rq {
	const char *host;
	uint16_t port;
	const char *method, *path;
	enum policy_action act;
	enum policy_req_reason why;
	long index;
};

/* The form compiled for the host (what the proxy keeps per connection)
 * gives the same verdict; it trusts the path to be normal, so a case
 * INVALID for its path alone is not its to judge. */
static void
run_compiled(
    struct policy *p, const struct rq *c, const struct policy_req_verdict *want)
{
	struct policy_req_verdict v;
	struct policy_host_rules *hr;

	if (c->host == NULL || c->method == NULL || c->path == NULL)
		return;
	hr = policy_host_rules_new(p, c->host, c->port);
	assert_non_null(hr);
	assert_true(policy_host_rules_for(hr, p, c->host, c->port));
	assert_int_equal(policy_host_rules_any(hr),
	    policy_host_has_request_rules(p, c->host, c->port));
	(void)policy_host_rules_match(hr, c->method, c->path, &v);
	if (want->reason != POLICY_REQ_INVALID || v.reason == want->reason) {
		assert_int_equal(v.action, want->action);
		assert_int_equal(v.reason, want->reason);
		assert_int_equal(v.index, want->index);
		assert_ptr_equal(v.rule, want->rule);
	}
	policy_host_rules_free(hr);
}

static void
run(struct policy *p, const struct rq *c, size_t n)
{
	struct policy_req_verdict v;
	size_t i;

	for (i = 0; i < n; i++) {
		enum policy_action a = policy_match_request(
		    p, c[i].host, c[i].port, c[i].method, c[i].path, &v);
		if (a != c[i].act || v.action != a || v.reason != c[i].why ||
		    v.index != c[i].index)
			fail_msg("%s %s%s port %u: got %d/%s/%ld want "
			         "%d/%s/%ld",
			    c[i].method ? c[i].method : "(null)", c[i].host,
			    c[i].path ? c[i].path : "(null)", c[i].port, a,
			    policy_req_reason_name(v.reason), v.index, c[i].act,
			    policy_req_reason_name(c[i].why), c[i].index);
		assert_true(v.index < 0
		        ? v.rule == NULL || v.rule->origin != POLICY_ORIGIN_USER
		        : v.rule == &p->rules[v.index]);
		run_compiled(p, &c[i], &v);
	}
}

#define RUN(p, ...)                                                            \
	do {                                                                   \
		const struct rq c_[] = {__VA_ARGS__};                          \
		run(p, c_, sizeof(c_) / sizeof(c_[0]));                        \
	} while (0)

#define A POLICY_ALLOW
#define D POLICY_DENY
#define OK POLICY_REQ_ALLOWED

static void
test_git(void **state)
{
	struct policy *p = ts_policy_yaml(git_rules, "git.yaml");

	(void)state;
	RUN(p, {"github.com", 443, "GET", "/o/r/info/refs", A, OK, 0},
	    {"GitHub.COM.", 443, "GET", "/o/r.git/info/refs", A, OK, 0},
	    {"github.com", 443, "POST", "/o/r/git-upload-pack", A, OK, 1},
	    /* push: no allow rule takes the path */
	    {"github.com", 443, "POST", "/o/r/git-receive-pack", D,
	        POLICY_REQ_PATH, -1},
	    /* a rule takes the path, with another method */
	    {"github.com", 443, "DELETE", "/o/r/info/refs", D,
	        POLICY_REQ_METHOD, -1},
	    {"github.com", 443, "get", "/o/r/info/refs", D, POLICY_REQ_METHOD,
	        -1},
	    {"github.com", 443, "GET", "/o/r/x/info/refs", D, POLICY_REQ_PATH,
	        -1},
	    {"api.github.com", 443, "HEAD", "/repos/x", A, OK, 2},
	    {"api.github.com", 443, "POST", "/gists", D, POLICY_REQ_METHOD, -1},
	    /* no rule allows these hosts at all */
	    {"x.github.com", 443, "GET", "/", D, POLICY_REQ_HOST, -1},
	    {"raw.githubusercontent.com", 443, "GET", "/", D, POLICY_REQ_HOST,
	        -1},
	    {"raw.githubusercontent.com", 443, "PUT", "/", D, POLICY_REQ_METHOD,
	        3});
	/* host level: both hosts allowed, the deny request rule no host */
	assert_int_equal(policy_match_domain(p, "github.com", NULL), A);
	assert_int_equal(policy_match_domain(p, "api.github.com", NULL), A);
	assert_int_equal(
	    policy_match_domain(p, "raw.githubusercontent.com", NULL), D);
	policy_unref(p);
}

static void
test_wildcard_deny_first(void **state)
{
	struct policy *p = ts_policy_yaml(
	    "egress:\n"
	    "  - {action: deny, target: \"*.x.test\", methods: [POST]}\n"
	    "  - {action: allow, target: a.x.test}\n"
	    "  - {action: deny, target: \"*.x.test\", paths: [\"/admin*\"]}\n"
	    "  - {action: allow, target: \"*.x.test\"}\n",
	    "t");

	(void)state;
	RUN(p, {"a.x.test", 443, "POST", "/", D, POLICY_REQ_METHOD, 0},
	    {"a.x.test", 443, "GET", "/admin", A, OK, 1},
	    {"b.x.test", 443, "GET", "/admin/x", D, POLICY_REQ_PATH, 2},
	    {"b.x.test", 443, "GET", "/adminx", D, POLICY_REQ_PATH, 2},
	    {"b.x.test", 443, "GET", "/", A, OK, 3},
	    {"b.x.test", 80, "PUT", "/x", A, OK, 3},
	    {"x.test", 443, "GET", "/", D, POLICY_REQ_HOST, -1});
	/* host level: the deny request rules deny no host */
	assert_int_equal(policy_match_domain(p, "a.x.test", NULL), A);
	assert_int_equal(policy_match_domain(p, "b.x.test", NULL), A);
	assert_int_equal(policy_match_domain(p, "x.test", NULL), D);
	policy_unref(p);
}

static void
test_host_level_ignores_deny_requests(void **state)
{
	struct policy *p = ts_policy_yaml(
	    "egress:\n"
	    "  - {action: deny, target: \"*.x.test\", methods: [POST]}\n"
	    "  - {action: allow, target: \"*.x.test\"}\n"
	    "  - {action: deny, target: y.test, paths: [\"/\"]}\n"
	    "  - {action: allow, target: z.test, methods: [GET], ports: "
	    "[443]}\n",
	    "t");
	const struct policy_rule *r = NULL;
	struct policy_reach reach;
	struct err e;

	(void)state;
	assert_int_equal(policy_match_domain(p, "a.x.test", &r), A);
	assert_ptr_equal(r, &p->rules[1]);
	/* a host named only by a deny request rule falls to the default */
	assert_int_equal(policy_match_domain(p, "y.test", &r), D);
	assert_null(r);
	/* an allow request rule allows its host, with its ports */
	assert_int_equal(policy_match_domain_reach(p, "z.test", &r, &reach), A);
	assert_ptr_equal(r, &p->rules[3]);
	assert_true(policy_reach_allows(&reach, POLICY_PROTO_TCP, 443));
	assert_false(policy_reach_allows(&reach, POLICY_PROTO_TCP, 80));
	/* a binding on *.x.test is covered: the deny below denies requests */
	assert_true(policy_host_covered(p, "*.x.test", &e));
	assert_true(policy_host_covered(p, "z.test", &e));
	policy_unref(p);
	/* default allow: the deny request rule still denies no host */
	p = ts_policy_yaml("defaultAction: allow\n"
	                   "egress:\n"
	                   "  - {action: deny, target: y.test, methods: "
	                   "[DELETE]}\n",
	    "t");
	assert_int_equal(policy_match_domain(p, "y.test", NULL), A);
	RUN(p, {"y.test", 443, "DELETE", "/", D, POLICY_REQ_METHOD, 0},
	    {"y.test", 443, "GET", "/", A, OK, -1});
	policy_unref(p);
}

static void
test_ports(void **state)
{
	struct policy *p = ts_policy_yaml(
	    "egress:\n"
	    "  - {action: allow, target: a.test, ports: [443], methods: "
	    "[GET]}\n"
	    "  - {action: allow, target: a.test, ports: [8080], methods: "
	    "[POST]}\n"
	    "  - {action: deny, target: b.test, ports: [80], methods: [GET]}\n"
	    "  - {action: allow, target: b.test}\n",
	    "t");

	(void)state;
	RUN(p, {"a.test", 443, "GET", "/", A, OK, 0},
	    {"a.test", 443, "POST", "/", D, POLICY_REQ_METHOD, -1},
	    {"a.test", 8080, "POST", "/", A, OK, 1},
	    {"a.test", 8080, "GET", "/", D, POLICY_REQ_METHOD, -1},
	    /* no rule of the host applies on that port */
	    {"a.test", 80, "GET", "/", D, POLICY_REQ_HOST, -1},
	    {"b.test", 80, "GET", "/", D, POLICY_REQ_METHOD, 2},
	    {"b.test", 443, "GET", "/", A, OK, 3});
	assert_true(policy_host_has_request_rules(p, "a.test", 443));
	assert_true(policy_host_has_request_rules(p, "A.test.", 8080));
	assert_false(policy_host_has_request_rules(p, "a.test", 80));
	assert_true(policy_host_has_request_rules(p, "b.test", 80));
	assert_false(policy_host_has_request_rules(p, "b.test", 443));
	assert_false(policy_host_has_request_rules(p, "c.test", 443));
	assert_false(policy_host_has_request_rules(p, "bad..name", 443));
	policy_unref(p);
}

static void
test_plain_rules_and_defaults(void **state)
{
	struct policy *p = ts_policy_yaml(
	    "defaultAction: allow\n"
	    "egress:\n"
	    "  - {action: deny, target: a.test}\n"
	    "  - {action: allow, target: a.test, methods: [GET]}\n"
	    "  - {action: allow, target: b.test, methods: [GET]}\n",
	    "t");

	(void)state;
	RUN(p,
	    /* a plain deny first: the host is denied, the later allow
	     * takes the method, so only the host is to blame */
	    {"a.test", 443, "GET", "/", D, POLICY_REQ_HOST, 0},
	    /* ... with another method: the allow would take the path */
	    {"a.test", 443, "POST", "/", D, POLICY_REQ_METHOD, 0},
	    {"b.test", 443, "GET", "/", A, OK, 2},
	    /* default allow: what no rule takes goes */
	    {"b.test", 443, "POST", "/", A, OK, -1},
	    {"c.test", 443, "DELETE", "/x", A, OK, -1});
	assert_false(policy_host_has_request_rules(p, "c.test", 443));
	policy_unref(p);
	p = ts_policy_yaml(
	    "egress:\n  - {action: allow, target: c.test}\n", "t");
	RUN(p, {"c.test", 443, "DELETE", "/x", A, OK, 0},
	    {"d.test", 443, "GET", "/", D, POLICY_REQ_HOST, -1});
	assert_false(policy_host_has_request_rules(p, "c.test", 443));
	policy_unref(p);
}

static void
test_overlays_first(void **state)
{
	struct policy *p = ts_policy_yaml(
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: \"*.o.test\", methods: [GET]}\n"
	    "alwaysDeny:\n"
	    "  - {target: bad.o.test}\n"
	    "  - {target: p.o.test, ports: [8443]}\n"
	    "alwaysAllow: [ops.o.test]\n"
	    "infra: [infra.o.test]\n",
	    "t");
	struct policy_req_verdict v;

	(void)state;
	RUN(p, {"bad.o.test", 443, "GET", "/", D, POLICY_REQ_HOST, -1},
	    {"p.o.test", 8443, "GET", "/", D, POLICY_REQ_HOST, -1},
	    {"p.o.test", 443, "GET", "/", A, OK, 0},
	    {"ops.o.test", 443, "DELETE", "/", A, OK, -1},
	    {"infra.o.test", 443, "POST", "/", A, OK, -1},
	    {"x.o.test", 443, "POST", "/", D, POLICY_REQ_METHOD, -1});
	(void)policy_match_request(p, "ops.o.test", 443, "PUT", "/", &v);
	assert_non_null(v.rule);
	assert_int_equal(v.rule->origin, POLICY_ORIGIN_ALWAYS_ALLOW);
	(void)policy_match_request(p, "bad.o.test", 443, "GET", "/", &v);
	assert_int_equal(v.rule->origin, POLICY_ORIGIN_ALWAYS_DENY);
	policy_unref(p);
}

static void
test_invalid(void **state)
{
	struct policy *p = ts_policy_yaml(
	    "defaultAction: allow\n"
	    "egress:\n  - {action: allow, target: a.test, paths: [\"/a/*\"]}\n",
	    "t");
	struct policy_req_verdict v;

	(void)state;
	RUN(p, {"a.test", 443, "GET", "/a/../b", D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, "GET", "/a//b", D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, "GET", "/a/%2e%2e/b", D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, "GET", "/a/%7e", D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, "GET", "a/b", D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, "GET", "/a?x", D, POLICY_REQ_INVALID, -1},
	    {"a..test", 443, "GET", "/a/b", D, POLICY_REQ_INVALID, -1},
	    {"", 443, "GET", "/a/b", D, POLICY_REQ_INVALID, -1},
	    {NULL, 443, "GET", "/a/b", D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, NULL, "/a/b", D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, "GET", NULL, D, POLICY_REQ_INVALID, -1},
	    {"a.test", 443, "GET", "/a/~", A, OK, 0});
	assert_int_equal(
	    policy_match_request(NULL, "a.test", 443, "GET", "/", &v), D);
	assert_int_equal(v.reason, POLICY_REQ_INVALID);
	policy_unref(p);
}

static void
test_reason_names(void **state)
{
	(void)state;
	assert_null(policy_req_reason_name(POLICY_REQ_ALLOWED));
	assert_string_equal(
	    policy_req_reason_name(POLICY_REQ_METHOD), "method");
	assert_string_equal(policy_req_reason_name(POLICY_REQ_PATH), "path");
	assert_string_equal(policy_req_reason_name(POLICY_REQ_HOST), "host");
	assert_string_equal(
	    policy_req_reason_name(POLICY_REQ_INVALID), "invalid");
}

/* A host with a hundred request rules: the last one decides. */
static void
test_many_rules(void **state)
{
	static char y[16384];
	struct policy *p;
	size_t o, i;

	(void)state;
	o = (size_t)snprintf(y, sizeof(y), "egress:\n");
	for (i = 0; i < 100; i++)
		o += (size_t)snprintf(y + o, sizeof(y) - o,
		    "  - {action: allow, target: m.test, methods: [GET], "
		    "paths: [\"/r%zu/*\"]}\n",
		    i);
	assert_true(o < sizeof(y));
	p = ts_policy_yaml(y, "t");
	RUN(p, {"m.test", 443, "GET", "/r99/x", A, OK, 99},
	    {"m.test", 443, "GET", "/r100/x", D, POLICY_REQ_PATH, -1},
	    {"m.test", 443, "PUT", "/r7/x", D, POLICY_REQ_METHOD, -1});
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_good),
	    cmocka_unit_test(test_parse_positions),
	    cmocka_unit_test(test_parse_bad),
	    cmocka_unit_test(test_git),
	    cmocka_unit_test(test_wildcard_deny_first),
	    cmocka_unit_test(test_host_level_ignores_deny_requests),
	    cmocka_unit_test(test_ports),
	    cmocka_unit_test(test_plain_rules_and_defaults),
	    cmocka_unit_test(test_overlays_first),
	    cmocka_unit_test(test_invalid),
	    cmocka_unit_test(test_reason_names),
	    cmocka_unit_test(test_many_rules),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
