/*
 * policy_overlay.c: the always-rules directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "policy/policy.h"

struct tdir {
	char path[64];
};

static void
put(const struct tdir *t, const char *name, const char *content)
{
	char p[128];
	FILE *f;

	(void)snprintf(p, sizeof(p), "%s/%s", t->path, name);
	assert_non_null(f = fopen(p, "w"));
	fputs(content, f);
	fclose(f);
}

static void
rm(const struct tdir *t, const char *name)
{
	char p[128];

	(void)snprintf(p, sizeof(p), "%s/%s", t->path, name);
	(void)unlink(p);
}

static int
setup(void **state)
{
	struct tdir *t = malloc(sizeof(*t));

	if (t == NULL)
		return -1;
	(void)snprintf(t->path, sizeof(t->path), "/tmp/egressd-ov-XXXXXX");
	if (mkdtemp(t->path) == NULL)
		return -1;
	*state = t;
	return 0;
}

static int
teardown(void **state)
{
	struct tdir *t = *state;

	rm(t, "deny.always");
	rm(t, "allow.always");
	rm(t, "log_skip.always");
	rmdir(t->path);
	free(t);
	return 0;
}

static struct policy *
base_policy(void)
{
	const char *j = "{\"defaultAction\":\"allow\",\"alwaysDeny\":"
	                "[\"file-deny.com\"],\"egress\":[{\"action\":\"deny\","
	                "\"target\":\"good.com\"}]}";
	struct policy_diag d;
	struct policy *p;

	policy_diag_init(&d);
	p = policy_parse_json(j, strlen(j), "base", &d);
	policy_diag_clear(&d);
	assert_non_null(p);
	return p;
}

static void
test_missing_files_are_empty(void **state)
{
	struct tdir *t = *state;
	struct policy *b = base_policy(), *p;
	struct policy_diag d;

	policy_diag_init(&d);
	p = policy_with_overlays_dir(b, t->path, &d);
	assert_non_null(p);
	assert_int_equal(d.n, 0);
	assert_int_equal(p->nalways_deny, 1);
	assert_int_equal(p->nalways_allow, 0);
	assert_int_equal(p->nrules, 1);
	assert_int_equal(p->revision, b->revision);
	policy_unref(p);
	policy_unref(b);
}

static void
test_overlays_apply(void **state)
{
	struct tdir *t = *state;
	struct policy *b = base_policy(), *p, *q;
	struct policy_diag d;

	put(t, "deny.always",
	    "# comment\n\nevil.com\n  *.tracker.net  # ads\n"
	    "203.0.113.0/24\r\n");
	put(t, "allow.always", "good.com\nevil.com\n");
	put(t, "log_skip.always", "*.noisy.org\n");
	policy_diag_init(&d);
	p = policy_with_overlays_dir(b, t->path, &d);
	assert_non_null(p);
	assert_int_equal(p->nalways_deny, 4);
	assert_string_equal(p->always_deny[0].target, "file-deny.com");
	assert_string_equal(p->always_deny[2].target, "*.tracker.net");
	assert_int_equal(p->always_deny[2].loc.line, 4);
	assert_int_equal(p->always_deny[2].loc.col, 3);
	assert_int_equal(policy_match_domain(p, "evil.com", NULL), POLICY_DENY);
	assert_int_equal(
	    policy_match_domain(p, "a.tracker.net", NULL), POLICY_DENY);
	assert_int_equal(
	    policy_match_domain(p, "file-deny.com", NULL), POLICY_DENY);
	/* allow.always beats the user's deny */
	assert_int_equal(
	    policy_match_domain(p, "good.com", NULL), POLICY_ALLOW);
	uint8_t a[4] = {203, 0, 113, 9};
	assert_int_equal(policy_match_addr(p, 4, a, 0, 0, NULL), POLICY_DENY);
	assert_true(policy_log_skip(p, "x.NOISY.org."));
	assert_false(policy_log_skip(p, "noisy.org"));
	assert_int_equal(p->log_skip[0].origin, POLICY_ORIGIN_LOG_SKIP);
	/* decisions are not affected by log_skip */
	assert_int_equal(
	    policy_match_domain(p, "x.noisy.org", NULL), POLICY_ALLOW);

	/* the canonical YAML (what the daemon persists) carries the file's
	 * own overlay rules only: the directory's are re-read from it */
	char *y = policy_to_yaml(p);
	assert_non_null(y);
	assert_non_null(strstr(y, "file-deny.com"));
	assert_null(strstr(y, "evil.com"));
	assert_null(strstr(y, "noisy.org"));
	free(y);

	/* reloading replaces the directory's part only */
	rm(t, "deny.always");
	q = policy_with_overlays_dir(p, t->path, &d);
	assert_non_null(q);
	assert_int_equal(q->nalways_deny, 1);
	assert_int_equal(
	    policy_match_domain(q, "evil.com", NULL), POLICY_ALLOW);
	assert_int_equal(d.n, 0);
	policy_unref(p);
	policy_unref(q);
	policy_unref(b);
}

static void
test_bad_lines(void **state)
{
	struct tdir *t = *state;
	struct policy *b = base_policy();
	struct policy_diag d;
	char want[160];

	put(t, "deny.always", "ok.com\n  a..b\nx.com y.com\n");
	put(t, "log_skip.always", "10.0.0.1\n");
	policy_diag_init(&d);
	assert_null(policy_with_overlays_dir(b, t->path, &d));
	assert_int_equal(d.n, 3);
	(void)snprintf(
	    want, sizeof(want), "%s/deny.always:2:3: malformed", t->path);
	assert_non_null(strstr(d.msgs[0], want));
	(void)snprintf(want, sizeof(want),
	    "%s/deny.always:3:6: one target per line", t->path);
	assert_string_equal(d.msgs[1], want);
	assert_non_null(strstr(d.msgs[2],
	    "log_skip.always:1:1: log_skip "
	    "targets are names"));
	policy_diag_clear(&d);
	policy_unref(b);
}

static void
test_overlay_uncovering_binding_refused(void **state)
{
	struct tdir *t = *state;
	const char *y = "egress: [{action: allow, target: api.github.com}]\n"
	                "credentials: [{name: c, source: {type: inline, value: "
	                "v}}]\n"
	                "bindings:\n  - name: b\n    match: {hosts: "
	                "[api.github.com]}\n    auth: {type: bearer, "
	                "credential: c}\n";
	struct policy_diag d;
	struct policy *b, *p;

	policy_diag_init(&d);
	b = policy_parse_yaml(y, strlen(y), "p.yaml", &d);
	assert_non_null(b);
	put(t, "deny.always", "api.github.com\n");
	assert_null(policy_with_overlays_dir(b, t->path, &d));
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0],
	    "p.yaml:4:5: binding host "
	    "\"api.github.com\" is not covered by "
	    "an explicit allow rule");
	policy_diag_clear(&d);
	put(t, "deny.always", "other.com\n");
	p = policy_with_overlays_dir(b, t->path, &d);
	assert_non_null(p);
	assert_int_equal(p->nbindings, 1);
	policy_unref(p);
	policy_unref(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_missing_files_are_empty, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_overlays_apply, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_lines, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_overlay_uncovering_binding_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
