/*
 * policy_target.c: name normalization and target parsing.
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
norm_ok(const char *in, const char *want)
{
	char out[POLICY_NAME_MAX + 8];
	struct err e;

	err_clear(&e);
	if (policy_name_normalize(in, out, sizeof(out), &e) != 0)
		fail_msg("\"%s\": %s", in, e.msg);
	assert_string_equal(out, want);
}

static void
norm_bad(const char *in, const char *needle)
{
	char out[POLICY_NAME_MAX + 8];
	struct err e;

	err_clear(&e);
	assert_int_equal(policy_name_normalize(in, out, sizeof(out), &e), -1);
	if (strstr(e.msg, needle) == NULL)
		fail_msg("\"%s\": \"%s\" lacks \"%s\"", in, e.msg, needle);
}

static void
test_normalize(void **state)
{
	char l63[64], l64[65], long_name[300];
	size_t o;

	(void)state;
	norm_ok("Example.COM", "example.com");
	norm_ok("example.com.", "example.com");
	norm_ok("_dmarc.example.com", "_dmarc.example.com");
	norm_ok("xn--bcher-kva.example", "xn--bcher-kva.example");
	norm_ok("*.Example.com", "*.example.com");
	norm_ok("a-b.c", "a-b.c");
	norm_ok("localhost", "localhost");
	norm_bad("", "empty name");
	norm_bad(".", "empty name");
	norm_bad("a..b", "empty label");
	norm_bad(".a.b", "empty label");
	norm_bad("-a.b", "starts or ends with '-'");
	norm_bad("a-.b", "starts or ends with '-'");
	norm_bad("b\xc3\xbc"
	         "cher.example",
	    "punycode");
	norm_bad("a.*.b", "'*' is only allowed as a leading");
	norm_bad("*a.b", "'*' is only allowed as a leading");
	norm_bad("*", "'*' is only allowed");
	norm_bad("a b.c", "invalid character ' '");
	norm_bad("a/b.c", "invalid character '/'");
	norm_bad("a\tb", "control character");
	memset(l63, 'a', 63);
	l63[63] = '\0';
	norm_ok(l63, l63);
	memset(l64, 'a', 64);
	l64[64] = '\0';
	norm_bad(l64, "label longer than 63");
	/* 253 bytes is the limit (without the trailing dot) */
	o = (size_t)snprintf(
	    long_name, sizeof(long_name), "%s.%s.%s.", l63, l63, l63);
	memset(long_name + o, 'b', 253 - o);
	long_name[253] = '\0';
	norm_ok(long_name, long_name);
	long_name[253] = '.';
	long_name[254] = '\0';
	norm_ok(long_name, (long_name[253] = '\0', long_name));
	long_name[253] = 'b';
	long_name[254] = '\0';
	norm_bad(long_name, "name longer than 253");
	/* small output buffers are refused, never overrun */
	char tiny[4];
	struct err e;
	assert_int_equal(
	    policy_name_normalize("abcdef", tiny, sizeof(tiny), &e), -1);
	assert_int_equal(
	    policy_name_normalize(NULL, tiny, sizeof(tiny), &e), -1);
}

static struct policy *
one_rule(const char *target)
{
	char j[512];
	struct policy_diag d;
	struct policy *p;

	(void)snprintf(j, sizeof(j),
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"%s\"}]}", target);
	policy_diag_init(&d);
	p = policy_parse_json(j, strlen(j), "t", &d);
	policy_diag_clear(&d);
	return p;
}

static void
target_ok(const char *in, enum policy_target_kind kind, const char *norm)
{
	struct policy *p = one_rule(in);

	if (p == NULL)
		fail_msg("target \"%s\" refused", in);
	assert_int_equal(p->rules[0].kind, kind);
	assert_string_equal(p->rules[0].target, norm);
	assert_string_equal(p->rules[0].display, in);
	policy_unref(p);
}

static void
test_targets(void **state)
{
	static const char *const bad[] = {"", "1.2.3.256", "1.2.3.4/",
	    "1.2.3.4/33", "1.2.3.4/08", "1.2.3.4/-1", "::1/129", "a.com/24",
	    "01.2.3.4", "a.com:443", "http://a.com", "*.", "**.a.com", "1.2.3",
	    "fe80::1%eth0", "a_b c"};
	size_t i;

	(void)state;
	target_ok("a.com", POLICY_TARGET_DOMAIN, "a.com");
	target_ok("*.A.com", POLICY_TARGET_WILDCARD, "*.a.com");
	target_ok("203.0.113.9", POLICY_TARGET_IP, "203.0.113.9");
	target_ok("203.0.113.9/24", POLICY_TARGET_CIDR, "203.0.113.0/24");
	target_ok("0.0.0.0/0", POLICY_TARGET_CIDR, "0.0.0.0/0");
	target_ok("2001:DB8:0:0::1", POLICY_TARGET_IP, "2001:db8::1");
	target_ok("2001:db8::ffff/33", POLICY_TARGET_CIDR, "2001:db8::/33");
	target_ok("::ffff:1.2.3.4", POLICY_TARGET_IP, "::ffff:1.2.3.4");
	struct policy *p = one_rule("203.0.113.9/25");
	assert_int_equal(p->rules[0].prefix.family, 4);
	assert_int_equal(p->rules[0].prefix.len, 25);
	assert_int_equal(p->rules[0].prefix.addr[3], 0);
	policy_unref(p);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if ((p = one_rule(bad[i])) != NULL)
			fail_msg("target \"%s\" accepted", bad[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_normalize),
	    cmocka_unit_test(test_targets),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
