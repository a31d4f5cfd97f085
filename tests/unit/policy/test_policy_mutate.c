/*
 * policy_mutate.c: JSON loading, POST/PUT replace, PATCH, DELETE and the
 * user serialization (contract §2, §3, §5.5, §6).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"
#include "ts_policy.h"

static void
assert_user_json(const struct policy *p, const char *want)
{
	char *s = policy_user_to_json(p);

	assert_non_null(s);
	assert_string_equal(s, want);
	free(s);
}

static struct policy *
replace(const struct policy *b, const char *body, size_t cap, bool *oc,
    struct err *e)
{
	return policy_replace_json(b, body, strlen(body), cap, oc, e);
}

static void
test_replace_basic(void **state)
{
	struct policy *b = ts_policy_json("{\"alwaysDeny\":[\"bad.com\"]}"), *p;
	bool oc = true;
	struct err e;

	(void)state;
	b->revision = 7;
	p = replace(b,
	    "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":"
	    "\"allow\",\"target\":\"A.com\"}]}",
	    0, &oc, &e);
	assert_non_null(p);
	assert_false(oc);
	assert_int_equal(p->revision, 8);
	assert_false(p->user_empty);
	assert_string_equal(p->source, "api");
	/* operator configuration is carried over */
	assert_int_equal(p->nalways_deny, 1);
	assert_int_equal(policy_match_domain(p, "bad.com", NULL), POLICY_DENY);
	assert_int_equal(policy_match_domain(p, "a.com", NULL), POLICY_ALLOW);
	assert_user_json(p,
	    "{\"defaultAction\":\"deny\",\"egress\":[{"
	    "\"action\":\"allow\",\"target\":\"A.com\"}]}");
	/* base is untouched and still works after p is gone */
	policy_unref(p);
	assert_int_equal(b->nrules, 0);
	assert_int_equal(policy_match_domain(b, "bad.com", NULL), POLICY_DENY);
	policy_unref(b);
}

static void
test_replace_empty_resets(void **state)
{
	static const char *const forms[] = {"", "\"\"", "null", "{}", " \n"};
	struct policy *b =
	    ts_policy_json("{\"defaultAction\":\"allow\",\"egress\":[{"
	                   "\"action\":\"allow\",\"target\":\"a.com\"}]}");
	struct err e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct policy *p = replace(b, forms[i], 0, NULL, &e);
		assert_non_null(p);
		assert_true(p->user_empty);
		assert_int_equal(p->nrules, 0);
		assert_int_equal(p->default_action, POLICY_DENY);
		assert_string_equal(policy_mode_name(p), "deny_all");
		assert_int_equal(p->revision, b->revision + 1);
		policy_unref(p);
	}
	/* NULL body with length 0 is an empty body too */
	struct policy *p = policy_replace_json(b, NULL, 0, 0, NULL, &e);
	assert_non_null(p);
	assert_true(p->user_empty);
	policy_unref(p);
	policy_unref(b);
}

static void
expect_replace_error(const char *body, const char *needle)
{
	struct policy *b = policy_new_deny_all();
	struct err e;
	bool oc = true;

	err_clear(&e);
	assert_null(replace(b, body, 0, &oc, &e));
	assert_false(oc);
	if (strstr(e.msg, needle) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", e.msg, needle);
	policy_unref(b);
}

static void
test_replace_rejects(void **state)
{
	(void)state;
	/* §5.5: unknown defaultAction and malformed targets are errors */
	expect_replace_error("{\"defaultAction\":\"block\"}",
	    "body:1:18: unknown defaultAction \"block\"");
	/* case and blanks are folded (below), other words stay errors */
	expect_replace_error(
	    "{\"defaultAction\":\"Allowed\"}", "unknown defaultAction");
	expect_replace_error(
	    "{\"defaultAction\":\"al low\"}", "unknown defaultAction");
	expect_replace_error("{\"egress\":[{\"action\":\"allow\",\"target\":"
	                     "\"a..com\"}]}",
	    "malformed target \"a..com\"");
	expect_replace_error("{\"egress\":[{\"action\":\"allow\",\"target\":"
	                     "\"10.0.0.0/33\"}]}",
	    "invalid prefix length");
	expect_replace_error("{\"egress\":[{\"action\":\"allow\",\"target\":"
	                     "\"*\"}]}",
	    "malformed target");
	expect_replace_error("{\"egress\":[{\"action\":\"allow\",\"target\":"
	                     "\"a.*.com\"}]}",
	    "malformed target");
	expect_replace_error("{\"egress\":[{\"action\":\"permit\",\"target\":"
	                     "\"a.com\"}]}",
	    "unknown action \"permit\"");
	expect_replace_error(
	    "{\"egress\":[{\"action\":\"allow\"}]}", "rule has no target");
	expect_replace_error(
	    "{\"egress\":[{\"target\":\"b\xc3\xbc.com\"}]}", "punycode");
	expect_replace_error(
	    "{\"egress\":[\"a.com\"]}", "expected a rule mapping");
	expect_replace_error(
	    "{\"alwaysDeny\":[\"a.com\"]}", "unknown key \"alwaysDeny\"");
	expect_replace_error("{\"defaultAction\":\"deny\",\"defaultAction\":"
	                     "\"allow\"}",
	    "duplicate key \"defaultAction\"");
	expect_replace_error("{\"egress\":[", "body:1:12: unexpected end");
	expect_replace_error("[]", "expected a mapping, found a list");
	expect_replace_error("{\"egress\":{}}", "expected a list");
	expect_replace_error("{\"egress\":[{\"target\":\"192.0.2.1\",\"ports\":"
	                     "[0]}]}",
	    "expected an integer from 1 to 65535");
	expect_replace_error("{\"egress\":[{\"target\":\"192.0.2.1\",\"ports\":"
	                     "[\"9-3\"]}]}",
	    "invalid port range");
	expect_replace_error(
	    "{\"egress\":[{\"target\":\"192.0.2.1\",\"protocols\":"
	    "[\"sctp\"]}]}",
	    "unknown protocol \"sctp\"");
	expect_replace_error(
	    "{\"egress\":[{\"target\":\"192.0.2.1\",\"ports\":[1],"
	    "\"protocols\":[\"icmp\"]}]}",
	    "ports need protocol tcp or udp");
}

static void
test_all_errors_reported(void **state)
{
	struct policy_diag d;
	const char *j = "{\"defaultAction\":\"x\",\n\"egress\":[\n"
	                "{\"action\":\"y\",\"target\":\"a..b\"},\n"
	                "{\"target\":\"ok.com\",\"bogus\":1}]}";

	(void)state;
	policy_diag_init(&d);
	assert_null(policy_parse_json(j, strlen(j), "f.json", &d));
	assert_int_equal(d.n, 4);
	assert_string_equal(d.msgs[0],
	    "f.json:1:18: unknown defaultAction \"x\" (allow or deny)");
	assert_string_equal(
	    d.msgs[1], "f.json:3:11: unknown action \"y\" (allow or deny)");
	assert_non_null(strstr(d.msgs[2], "f.json:3:24: malformed target"));
	assert_string_equal(d.msgs[3], "f.json:4:20: unknown key \"bogus\"");
	struct err e;
	policy_diag_to_err(&d, &e);
	assert_non_null(strstr(e.msg, "; f.json:3:11: unknown action"));
	policy_diag_clear(&d);
	assert_int_equal(d.n, 0);
}

static void
test_missing_action_is_deny(void **state)
{
	struct policy *p =
	    ts_policy_json("{\"defaultAction\":\"allow\",\"egress\":[{"
	                   "\"target\":\"a.com\"}]}");

	(void)state;
	assert_int_equal(p->rules[0].action, POLICY_DENY);
	assert_int_equal(policy_match_domain(p, "a.com", NULL), POLICY_DENY);
	policy_unref(p);
}

static void
test_empty_strings_mean_unset(void **state)
{
	struct policy *p =
	    ts_policy_json("{\"defaultAction\":\"\",\"egress\":[{"
	                   "\"action\":\"\",\"target\":\"a.com\"}]}");

	(void)state;
	assert_int_equal(p->default_action, POLICY_DENY);
	assert_int_equal(p->rules[0].action, POLICY_DENY);
	assert_false(p->user_empty);
	policy_unref(p);
	p = ts_policy_json(
	    "{\"alwaysAllow\":[{\"action\":\"\",\"target\":\"b.com\"}]}");
	assert_int_equal(p->always_allow[0].action, POLICY_ALLOW);
	policy_unref(p);
}

/* The reference lowercases and trims actions; GET shows the normal form. */
static void
test_actions_fold_case_and_blanks(void **state)
{
	struct policy *b = ts_policy_json("{}"), *p;
	bool oc = true;
	struct err e;

	(void)state;
	p = replace(b,
	    "{\"defaultAction\":\" DENY\\t\",\"egress\":["
	    "{\"action\":\"ALLOW\",\"target\":\"a.com\"},"
	    "{\"action\":\"Deny \",\"target\":\"b.com\"},"
	    "{\"action\":\"  \",\"target\":\"c.com\"}]}",
	    0, &oc, &e);
	if (p == NULL)
		fail_msg("%s", e.msg);
	assert_int_equal(p->default_action, POLICY_DENY);
	assert_int_equal(policy_match_domain(p, "a.com", NULL), POLICY_ALLOW);
	assert_int_equal(policy_match_domain(p, "b.com", NULL), POLICY_DENY);
	assert_int_equal(p->rules[2].action, POLICY_DENY); /* blank: unset */
	assert_user_json(p,
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.com\"},"
	    "{\"action\":\"deny\",\"target\":\"b.com\"},"
	    "{\"action\":\"deny\",\"target\":\"c.com\"}]}");
	policy_unref(p);
	p = replace(b, "{\"defaultAction\":\"Allow\"}", 0, &oc, &e);
	assert_non_null(p);
	assert_int_equal(p->default_action, POLICY_ALLOW);
	policy_unref(p);
	/* overlays: the folded action must still agree with the list */
	policy_unref(b);
	b = ts_policy_json("{\"alwaysAllow\":[{\"action\":\"ALLOW\",\"target\":"
	                   "\"d.com\"}]}");
	assert_int_equal(b->always_allow[0].action, POLICY_ALLOW);
	policy_unref(b);
}

static void
test_cap(void **state)
{
	struct policy *b = policy_new_deny_all(), *p;
	const char *two = "{\"egress\":[{\"target\":\"a.com\"},{\"target\":"
	                  "\"b.com\"}]}";
	bool oc = false;
	struct err e;

	(void)state;
	assert_null(replace(b, two, 1, &oc, &e));
	assert_true(oc);
	assert_string_equal(e.msg, "egress rule total count 2 exceeds limit 1");
	p = replace(b, two, 2, &oc, &e);
	assert_non_null(p);
	assert_false(oc);
	/* PATCH counts the merged result */
	const char *patch = "[{\"target\":\"c.com\"},{\"target\":\"A.com\"}]";
	assert_null(policy_patch_json(p, patch, strlen(patch), 2, &oc, &e));
	assert_true(oc);
	assert_string_equal(e.msg, "egress rule total count 3 exceeds limit 2");
	struct policy *q =
	    policy_patch_json(p, patch, strlen(patch), 3, &oc, &e);
	assert_non_null(q);
	assert_false(oc);
	policy_unref(q);
	policy_unref(p);
	policy_unref(b);
}

static void
test_patch_prepends_and_dedups(void **state)
{
	struct policy *b =
	    ts_policy_json("{\"defaultAction\":\"deny\",\"egress\":["
	                   "{\"action\":\"allow\",\"target\":\"a.com\"},"
	                   "{\"action\":\"allow\",\"target\":\"b.com\"},"
	                   "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"}]}");
	const char *body = "[{\"action\":\"deny\",\"target\":\"B.COM\"},"
	                   "{\"action\":\"allow\",\"target\":\"c.com\"},"
	                   "{\"action\":\"allow\",\"target\":\"b.com\"}]";
	struct policy *p;
	struct err e;

	(void)state;
	p = policy_patch_json(b, body, strlen(body), 0, NULL, &e);
	assert_non_null(p);
	assert_int_equal(p->revision, b->revision + 1);
	assert_user_json(p,
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"B.COM\"},"
	    "{\"action\":\"allow\",\"target\":\"c.com\"},"
	    "{\"action\":\"allow\",\"target\":\"a.com\"},"
	    "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"}]}");
	assert_int_equal(policy_match_domain(p, "b.com", NULL), POLICY_DENY);
	assert_int_equal(policy_match_domain(p, "c.com", NULL), POLICY_ALLOW);
	policy_unref(p);
	policy_unref(b);
}

/* Request rules (issue 37): a target's request rules all survive a
 * PATCH, in order, replacing every old rule of the target; duplicate
 * plain rules of a target still keep only the first. */
static void
test_patch_request_rules(void **state)
{
	struct policy *b =
	    ts_policy_json("{\"egress\":["
	                   "{\"action\":\"allow\",\"target\":\"github.com\"},"
	                   "{\"action\":\"allow\",\"target\":\"a.com\"},"
	                   "{\"action\":\"allow\",\"target\":\"github.com\","
	                   "\"methods\":[\"PUT\"]}]}");
	const char *body =
	    "[{\"action\":\"allow\",\"target\":\"github.com\","
	    "\"methods\":[\"GET\"],\"paths\":[\"/*/*/info/refs\"]},"
	    "{\"action\":\"allow\",\"target\":\"GitHub.com\","
	    "\"methods\":[\"POST\"],\"paths\":[\"/*/*/git-upload-pack\"]},"
	    "{\"action\":\"allow\",\"target\":\"c.com\"},"
	    "{\"action\":\"deny\",\"target\":\"c.com\"}]";
	struct policy_req_verdict v;
	struct policy *p, *q;
	size_t matched;
	struct err e;

	(void)state;
	p = policy_patch_json(b, body, strlen(body), 0, NULL, &e);
	assert_non_null(p);
	assert_user_json(p,
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"github.com\","
	    "\"methods\":[\"GET\"],\"paths\":[\"/*/*/info/refs\"]},"
	    "{\"action\":\"allow\",\"target\":\"GitHub.com\","
	    "\"methods\":[\"POST\"],\"paths\":[\"/*/*/git-upload-pack\"]},"
	    "{\"action\":\"allow\",\"target\":\"c.com\"},"
	    "{\"action\":\"allow\",\"target\":\"a.com\"}]}");
	assert_int_equal(policy_match_request(p, "github.com", 443, "POST",
	                     "/o/r/git-upload-pack", &v),
	    POLICY_ALLOW);
	assert_int_equal(policy_match_request(
	                     p, "github.com", 443, "PUT", "/o/r/info/refs", &v),
	    POLICY_DENY);
	assert_int_equal(v.reason, POLICY_REQ_METHOD);
	/* DELETE of the target removes all its rules */
	q = policy_delete_json(p, "[\"GITHUB.com\"]", 14, &matched, &e);
	assert_non_null(q);
	assert_int_equal(matched, 2);
	assert_user_json(q,
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"c.com\"},"
	    "{\"action\":\"allow\",\"target\":\"a.com\"}]}");
	policy_unref(q);
	policy_unref(p);
	/* a bad request rule in a PATCH body is refused with its position */
	body = "[{\"target\":\"x.com\",\"paths\":[\"/a/../b\"]}]";
	assert_null(policy_patch_json(b, body, strlen(body), 0, NULL, &e));
	assert_non_null(strstr(e.msg, "body:1:29: path pattern"));
	policy_unref(b);
}

static void
test_patch_errors(void **state)
{
	struct policy *b = policy_new_deny_all();
	struct err e;

	(void)state;
	assert_null(policy_patch_json(b, "", 0, 0, NULL, &e));
	assert_string_equal(e.msg, "empty body");
	assert_null(policy_patch_json(b, " \n", 2, 0, NULL, &e));
	assert_string_equal(e.msg, "empty body");
	assert_null(policy_patch_json(b, "[]", 2, 0, NULL, &e));
	assert_string_equal(e.msg, "empty array");
	assert_null(policy_patch_json(b, "{}", 2, 0, NULL, &e));
	assert_string_equal(e.msg, "expected a JSON array of rules");
	assert_null(policy_patch_json(b, "[{", 2, 0, NULL, &e));
	assert_non_null(strstr(e.msg, "body:1:3:"));
	const char *bad = "[{\"action\":\"maybe\",\"target\":\"a.com\"}]";
	assert_null(policy_patch_json(b, bad, strlen(bad), 0, NULL, &e));
	assert_non_null(strstr(e.msg, "unknown action \"maybe\""));
	policy_unref(b);
}

static void
test_patch_clears_user_empty(void **state)
{
	struct policy *b = policy_new_deny_all(), *p;
	const char *body = "[{\"action\":\"allow\",\"target\":\"a.com\"}]";
	struct err e;

	(void)state;
	p = policy_patch_json(b, body, strlen(body), 0, NULL, &e);
	assert_non_null(p);
	assert_false(p->user_empty);
	assert_string_equal(policy_mode_name(p), "enforcing");
	policy_unref(p);
	policy_unref(b);
}

static void
test_delete(void **state)
{
	struct policy *b =
	    ts_policy_json("{\"defaultAction\":\"allow\",\"egress\":["
	                   "{\"action\":\"deny\",\"target\":\"A.com\"},"
	                   "{\"action\":\"deny\",\"target\":\"*.b.com\"},"
	                   "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"},"
	                   "{\"action\":\"deny\",\"target\":\"c.com\"}]}");
	const char *body = "[\"a.COM.\",\"*.B.com\",\"nothing.org\"]";
	size_t matched = 99;
	struct policy *p;
	struct err e;

	(void)state;
	p = policy_delete_json(b, body, strlen(body), &matched, &e);
	assert_non_null(p);
	assert_int_equal(matched, 2);
	assert_int_equal(p->revision, b->revision + 1);
	assert_user_json(p,
	    "{\"defaultAction\":\"allow\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"},"
	    "{\"action\":\"deny\",\"target\":\"c.com\"}]}");
	policy_unref(p);

	body = "[\"10.0.0.0/8\",\"c.com\"]";
	p = policy_delete_json(b, body, strlen(body), &matched, &e);
	assert_non_null(p);
	assert_int_equal(matched, 2);
	policy_unref(p);

	body = "[\"zzz.com\",\"not a target!\"]";
	assert_null(policy_delete_json(b, body, strlen(body), &matched, &e));
	assert_int_equal(matched, 0);
	assert_string_equal(e.msg, "no matching targets found");

	assert_null(policy_delete_json(b, "", 0, &matched, &e));
	assert_string_equal(e.msg, "empty body");
	assert_null(policy_delete_json(b, "[]", 2, &matched, &e));
	assert_string_equal(e.msg, "empty array");
	assert_null(policy_delete_json(b, "[1]", 3, &matched, &e));
	assert_non_null(strstr(e.msg, "expected a target string"));
	assert_null(policy_delete_json(b, "[\"a", 3, &matched, &e));
	assert_non_null(strstr(e.msg, "unterminated string"));
	policy_unref(b);
}

static void
test_user_json_extensions(void **state)
{
	struct policy *p = ts_policy_json(
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"192.0.2.1\","
	    "\"ports\":[443,\"8000-8080\"],\"protocols\":[\"udp\",\"tcp\"]}]}");
	char *s;

	(void)state;
	assert_user_json(p,
	    "{\"defaultAction\":\"deny\",\"egress\":[{"
	    "\"action\":\"allow\",\"target\":\"192.0.2.1\","
	    "\"ports\":[443,\"8000-8080\"],"
	    "\"protocols\":[\"tcp\",\"udp\"]}]}");
	/* what GET returns, PUT accepts unchanged */
	s = policy_user_to_json(p);
	struct err e;
	struct policy *q = replace(p, s, 0, NULL, &e);
	assert_non_null(q);
	char *t = policy_user_to_json(q);
	assert_string_equal(s, t);
	free(s);
	free(t);
	policy_unref(q);
	policy_unref(p);

	p = policy_new_deny_all();
	assert_user_json(p, "{\"defaultAction\":\"deny\",\"egress\":[]}");
	policy_unref(p);
}

static void
test_body_cap(void **state)
{
	struct policy *b = policy_new_deny_all();
	size_t n = POLICY_BODY_MAX + 1;
	char *big = malloc(n);
	struct err e;

	(void)state;
	assert_non_null(big);
	memset(big, ' ', n);
	assert_null(policy_replace_json(b, big, n, 0, NULL, &e));
	assert_non_null(strstr(e.msg, "body larger than"));
	free(big);
	policy_unref(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replace_basic),
	    cmocka_unit_test(test_replace_empty_resets),
	    cmocka_unit_test(test_replace_rejects),
	    cmocka_unit_test(test_all_errors_reported),
	    cmocka_unit_test(test_missing_action_is_deny),
	    cmocka_unit_test(test_actions_fold_case_and_blanks),
	    cmocka_unit_test(test_empty_strings_mean_unset),
	    cmocka_unit_test(test_cap),
	    cmocka_unit_test(test_patch_prepends_and_dedups),
	    cmocka_unit_test(test_patch_request_rules),
	    cmocka_unit_test(test_patch_errors),
	    cmocka_unit_test(test_patch_clears_user_empty),
	    cmocka_unit_test(test_delete),
	    cmocka_unit_test(test_user_json_extensions),
	    cmocka_unit_test(test_body_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
