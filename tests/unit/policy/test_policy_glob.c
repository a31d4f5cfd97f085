/*
 * policy_glob.c: the path patterns of request rules. What a pattern must
 * look like (policy_glob_check) and what it matches (policy_glob_match):
 * exact, prefix (a trailing star, across segments), in-segment stars
 * (never across a '/'), several stars, and the corner cases of empty
 * segments and a trailing '/'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy_glob.h"

static void
test_check_good(void **state)
{
	static const char *const good[] = {"/", "/*", "/v1", "/v1/", "/v1/*",
	    "/v1*", "/*/*/info/refs", "/*/*/git-upload-pack", "/api/v*/users",
	    "/a*b*c/d*", "/a%20b", "/~user/*", "/a;b=c/*", "/%C3%A9*"};
	struct err e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (policy_glob_check(good[i], &e) != 0)
			fail_msg("%s: %s", good[i], e.msg);
}

static void
test_check_bad(void **state)
{
	static const struct {
		const char *pat, *msg;
	} bad[] = {
	    {"", "must start with '/'"},
	    {"v1/*", "must start with '/'"},
	    {"*", "must start with '/'"},
	    {"/v1?x=1", "'?' in path pattern"},
	    {"/v1#frag", "'#' in path pattern"},
	    {"/a/**", "\"**\" in path pattern"},
	    {"/a/**/b", "\"**\" in path pattern"},
	    {"/a//b", "path pattern: "},
	    {"/a\\b", "path pattern: backslash"},
	    {"/a%2fb", "path pattern: encoded slash"},
	    {"/a/../b", "write \"/b\""},
	    {"/a/./b*", "write \"/a/b*\""},
	    {"/%7euser", "write \"/~user\""},
	    {"/a%2fb", "encoded slash"},
	    {"/caf\xc3\xa9", "non-ASCII"},
	    {"/a b", "invalid character ' '"},
	};
	struct err e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e.msg[0] = '\0';
		if (policy_glob_check(bad[i].pat, &e) != -1)
			fail_msg("accepted %s", bad[i].pat);
		if (strstr(e.msg, bad[i].msg) == NULL)
			fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].pat, e.msg,
			    bad[i].msg);
	}
}

static void
test_check_bounds(void **state)
{
	char p[POLICY_GLOB_MAX + 2];
	struct err e;
	size_t i;

	(void)state;
	p[0] = '/';
	memset(p + 1, 'a', POLICY_GLOB_MAX - 1);
	p[POLICY_GLOB_MAX] = '\0';
	assert_int_equal(policy_glob_check(p, &e), 0);
	p[POLICY_GLOB_MAX] = 'a';
	p[POLICY_GLOB_MAX + 1] = '\0';
	assert_int_equal(policy_glob_check(p, &e), -1);
	assert_non_null(strstr(e.msg, "longer than"));
	/* sixteen stars, one per segment, then seventeen */
	for (i = 0; i < POLICY_GLOB_STARS_MAX; i++)
		memcpy(p + 2 * i, "/*", 2);
	p[2 * i] = '\0';
	assert_int_equal(policy_glob_check(p, &e), 0);
	memcpy(p + 2 * i, "/*", 3);
	assert_int_equal(policy_glob_check(p, &e), -1);
	assert_non_null(strstr(e.msg, "more than 16 '*'"));
}

struct mcase {
	const char *pat, *path;
	bool match;
};

static void
run_cases(const struct mcase *c, size_t n)
{
	struct err e;
	size_t i;

	for (i = 0; i < n; i++) {
		if (policy_glob_check(c[i].pat, &e) != 0)
			fail_msg("%s: %s", c[i].pat, e.msg);
		if (policy_glob_match(c[i].pat, c[i].path) != c[i].match)
			fail_msg("\"%s\" vs \"%s\": want %s", c[i].pat,
			    c[i].path, c[i].match ? "match" : "no match");
	}
}

static void
test_match_exact(void **state)
{
	static const struct mcase c[] = {
	    {"/", "/", true},
	    {"/", "/a", false},
	    {"/v1", "/v1", true},
	    {"/v1", "/v1/", false},
	    {"/v1/", "/v1", false},
	    {"/v1/", "/v1/", true},
	    {"/v1", "/v2", false},
	    {"/v1", "/v", false},
	    {"/v1/chat", "/v1/chat/x", false},
	    {"/a%20b", "/a%20b", true},
	};

	(void)state;
	run_cases(c, sizeof(c) / sizeof(c[0]));
}

static void
test_match_prefix(void **state)
{
	static const struct mcase c[] = {
	    {"/*", "/", true},
	    {"/*", "/anything/at/all", true},
	    {"/a/b*", "/a/b", true},
	    {"/a/b*", "/a/bc", true},
	    {"/a/b*", "/a/b/c", true},
	    {"/a/b*", "/a/b/", true},
	    {"/a/b*", "/a/c", false},
	    {"/a/b*", "/a", false},
	    {"/a/*", "/a/", true},
	    {"/a/*", "/a/x/y", true},
	    {"/a/*", "/a", false},
	    {"/a/*", "/ab", false},
	    {"/v1*", "/v1beta", true},
	};

	(void)state;
	run_cases(c, sizeof(c) / sizeof(c[0]));
}

static void
test_match_segment(void **state)
{
	static const struct mcase c[] = {
	    {"/*/*/info/refs", "/o/r/info/refs", true},
	    {"/*/*/info/refs", "/o/r.git/info/refs", true},
	    {"/*/*/info/refs", "/o/info/refs", false},
	    {"/*/*/info/refs", "/o/r/x/info/refs", false},
	    {"/*/*/info/refs", "/o/r/info/refs/x", false},
	    {"/*/*/info/refs", "/o/r/info/refsx", false},
	    {"/a/*/c", "/a/x/c", true},
	    {"/a/*/c", "/a/xyz/c", true},
	    {"/a/*/c", "/a/x/y/c", false},
	    /* an empty segment: '*' matches zero bytes (such a path is
	     * never normal, so a request never carries it) */
	    {"/a/*/c", "/a//c", true},
	    {"/a/*/c", "/a/c", false},
	    {"/api/v*/users", "/api/v2/users", true},
	    {"/api/v*/users", "/api/v/users", true},
	    {"/api/v*/users", "/api/x2/users", false},
	    {"/api/v*/users", "/api/v2/x/users", false},
	    {"/x/*.json", "/x/a.json", true},
	    {"/x/*.json", "/x/.json", true},
	    {"/x/*.json", "/x/a.jso", false},
	    {"/x/*.json", "/x/a/b.json", false},
	};

	(void)state;
	run_cases(c, sizeof(c) / sizeof(c[0]));
}

static void
test_match_many_stars(void **state)
{
	static const struct mcase c[] = {
	    {"/a*b*c", "/abc", true},
	    {"/a*b*c", "/a-b-c", true},
	    {"/a*b*c", "/abbbcc", true},
	    {"/a*b*c", "/acb", false},
	    {"/a*b*c", "/ab/c", false},
	    {"/a*b*c/d*", "/axbyc/d", true},
	    {"/a*b*c/d*", "/axbyc/dz/q", true},
	    {"/a*b*c/d*", "/axbyc/e", false},
	    {"/*a*a*", "/aa", true},
	    {"/*a*a*", "/a", false},
	    /* the inner stars stay in the segment, the trailing one not */
	    {"/*a*a*", "/a/a", false},
	    {"/*a*a*", "/aa/x", true},
	    {"/*ab*ab", "/abab", true},
	    {"/*ab*ab", "/aab", false},
	    {"/*ab*ab", "/abxab", true},
	    {"/x*y", "/xy", true},
	    {"/x*y", "/xyxy", true},
	    {"/x*y", "/xyx", false},
	};

	(void)state;
	run_cases(c, sizeof(c) / sizeof(c[0]));
}

/* A hostile path against a star-heavy pattern still answers (and fast:
 * the test's timeout would catch a quadratic blow-up of this size). */
static void
test_match_long(void **state)
{
	static char path[8192];
	const char *pat = "/*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
	size_t i;

	(void)state;
	path[0] = '/';
	for (i = 1; i < sizeof(path) - 1; i++)
		path[i] = 'a';
	path[i] = '\0';
	for (i = 0; i < 2000; i++)
		assert_false(policy_glob_match(pat, path));
	path[i = sizeof(path) - 2] = 'b';
	assert_true(policy_glob_match(pat, path));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_check_good),
	    cmocka_unit_test(test_check_bad),
	    cmocka_unit_test(test_check_bounds),
	    cmocka_unit_test(test_match_exact),
	    cmocka_unit_test(test_match_prefix),
	    cmocka_unit_test(test_match_segment),
	    cmocka_unit_test(test_match_many_stars),
	    cmocka_unit_test(test_match_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
