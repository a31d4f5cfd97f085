/*
 * policy_json.c: the strict JSON reader (through policy_parse_json, so
 * the positions and messages are the ones users see).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"

static void
json_bad(const char *j, size_t len, const char *want)
{
	struct policy_diag d;

	policy_diag_init(&d);
	assert_null(policy_parse_json(j, len, "j", &d));
	assert_int_equal(d.n, 1);
	if (strstr(d.msgs[0], want) == NULL)
		fail_msg("\"%s\" lacks \"%s\"", d.msgs[0], want);
	policy_diag_clear(&d);
}

#define BAD(lit, want) json_bad(lit, sizeof(lit) - 1, want)

static struct policy *
json_ok(const char *j, size_t len)
{
	struct policy_diag d;
	struct policy *p;

	policy_diag_init(&d);
	p = policy_parse_json(j, len, "j", &d);
	if (p == NULL)
		fail_msg("refused: %s", d.n ? d.msgs[0] : "?");
	policy_diag_clear(&d);
	return p;
}

#define OK(lit) json_ok(lit, sizeof(lit) - 1)

static void
test_syntax_errors(void **state)
{
	(void)state;
	BAD("{", "j:1:2: expected a string key");
	BAD("{\"a\" 1}", "j:1:6: expected ':' after key");
	BAD("{\"defaultAction\":\"deny\",}", "j:1:25: expected a string key");
	BAD("[1,]", "j:1:4: unexpected character");
	BAD("[1 2]", "j:1:4: expected ',' or ']'");
	BAD("{} {}", "j:1:4: trailing characters");
	BAD("tru", "j:1:1: invalid literal");
	BAD("nulll", "j:1:5: trailing characters");
	BAD("01", "j:1:2: trailing characters");
	BAD("-", "j:1:2: invalid number");
	BAD("1.", "j:1:3: invalid number");
	BAD("1e", "j:1:3: invalid number");
	BAD("'a'", "unexpected character");
	BAD("\"abc", "unterminated string");
	BAD("{\n  \"egress\": [\n    {\"target\": \"a\tb\"}]}",
	    "j:3:18: control character in string");
	BAD("\"\\x\"", "invalid escape");
	BAD("\"\\u12\"", "invalid \\u escape");
	BAD("\"\\u0000\"", "\\u0000 in string");
	BAD("\"\\ud800\"", "lone surrogate");
	BAD("\"\\udc00\"", "lone surrogate");
	BAD("\"\\ud800\\u0041\"", "lone surrogate");
	BAD("\"\xff\"", "invalid UTF-8");
	BAD("\"\xc0\xaf\"", "invalid UTF-8");
	BAD("\"\xed\xa0\x80\"", "invalid UTF-8");
	BAD("\"\xe2\x82\"", "invalid UTF-8");
	BAD("\"a\0b\"", "control character");
}

static void
test_depth(void **state)
{
	char buf[64];
	size_t i;

	(void)state;
	for (i = 0; i < POLICY_DEPTH_MAX; i++)
		buf[i] = '[';
	for (i = 0; i < POLICY_DEPTH_MAX; i++)
		buf[POLICY_DEPTH_MAX + i] = ']';
	/* 16 levels read; the schema then refuses the list */
	json_bad(buf, 2 * POLICY_DEPTH_MAX, "expected a mapping");
	memmove(buf + 1, buf, 2 * POLICY_DEPTH_MAX);
	buf[0] = '[';
	buf[2 * POLICY_DEPTH_MAX + 1] = ']';
	json_bad(buf, 2 * POLICY_DEPTH_MAX + 2, "nesting deeper than 16");
}

static void
test_accepted_forms(void **state)
{
	struct policy *p;

	(void)state;
	/* BOM, white space, escapes that decode to a valid target */
	p = OK("\xef\xbb\xbf \r\n\t{\"egress\":[{\"action\":\"allow\","
	       "\"target\":\"\\u0061\\u002Ecom\"}]}\n");
	assert_string_equal(p->rules[0].target, "a.com");
	assert_string_equal(p->rules[0].display, "a.com");
	policy_unref(p);
	/* numbers keep their literal form: 443 is a port, 4.43e2 is not */
	p = OK("{\"egress\":[{\"target\":\"192.0.2.1\",\"ports\":[443]}]}");
	assert_int_equal(p->rules[0].ports[0].lo, 443);
	policy_unref(p);
	BAD("{\"egress\":[{\"target\":\"192.0.2.1\",\"ports\":[4.43e2]}]}",
	    "expected an integer from 1 to 65535, found \"4.43e2\"");
	BAD("{\"egress\":[{\"target\":\"192.0.2.1\",\"ports\":[-1]}]}",
	    "found \"-1\"");
	/* a port may also be written as a string */
	p = OK("{\"egress\":[{\"target\":\"192.0.2.1\",\"ports\":[\"80\"]}]}");
	assert_int_equal(p->rules[0].ports[0].hi, 80);
	policy_unref(p);
	/* UTF-8 passes the reader and is refused by the name rules */
	BAD("{\"egress\":[{\"target\":\"\xf0\x9f\x98\x80.com\"}]}", "punycode");
	BAD("{\"egress\":[{\"target\":\"\\ud83d\\ude00.com\"}]}", "punycode");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_syntax_errors),
	    cmocka_unit_test(test_depth),
	    cmocka_unit_test(test_accepted_forms),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
