/*
 * api, /policy: every row of contract §3 and §6 for GET, POST/PUT (replace,
 * reset), PATCH (prepend) and DELETE, byte for byte: bad input, the
 * max-rules cap, a failed commit or vault check leave the policy in force;
 * racing PATCHes each apply once; with the daemon's commit queue (hook
 * mutate) the answer waits for the change to be in force. Over a real
 * socket with fake daemon hooks (api_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "api_fixture.h"

static void
test_get_initial(void **state)
{
	get_policy_is(*state,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":[]"
	    "}}\n");
}

static void
test_405(void **state)
{
	static const char *const methods[] = {
	    "OPTIONS", "TRACE", "CONNECT", "BREW", "get", "B@D", "HEAD"};
	struct fx *f = *state;
	struct resp r;
	char v[128];
	size_t i;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		call(f, methods[i], "/policy", NULL, &r);
		if (r.status != 405)
			fail_msg(
			    "%s: status %d\n%s", methods[i], r.status, r.raw);
		assert_non_null(header(&r, "Allow", v, sizeof(v)));
		assert_string_equal(v, "GET, POST, PUT, PATCH, DELETE");
		if (strcmp(methods[i], "HEAD") != 0)
			expect_text(&r, 405, "method not allowed\n");
		resp_free(&r);
	}
	assert_int_equal(f->commits, 0);
}

static void
test_post_put_replace(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 1);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":" POL_A "}\n");
	roundtrip(f, "PUT", "/policy", "{\"defaultAction\":\"allow\"}", 200,
	    JSON,
	    "{\"status\":\"ok\",\"mode\":\"allow_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 2);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"allow_all\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"allow\",\"egress\":["
	    "]}}\n");
	assert_int_equal(f->stats.policy_updates_ok, 2);
	assert_int_equal(f->cur->revision, 2);
}

static void
test_empty_post_resets(void **state)
{
	static const char reset[] =
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"reason\":\"policy "
	    "reset to default deny-all\"}\n";
	struct fx *f = *state;

	roundtrip(f, "PUT", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "POST", "/policy", "", 200, JSON, reset);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":[]"
	    "}}\n");
	roundtrip(f, "PUT", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "PUT", "/policy", " \r\n\t ", 200, JSON, reset);
	assert_int_equal(f->commits, 4);
	/* "{}" and null are deny-all too, but answered as a normal update. */
	roundtrip(f, "POST", "/policy", "{}", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	roundtrip(f, "POST", "/policy", "null", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
}

static void
check_unchanged(struct fx *f, unsigned commits)
{
	assert_int_equal(f->commits, commits);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":" POL_A "}\n");
}

static void
test_bad_policy(void **state)
{
	static const char *const bad[] = {
	    "{",
	    "[1,2]",
	    "{\"defaultAction\":\"maybe\"}",
	    "{\"defaultAction\":\"deny\",\"bogus\":1}",
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"a..b\"}]}",
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"1.2.3.4/40\"}]}",
	    /* Parenthesized: one element split over two lines. */
	    ("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\","
	     "\"extra\":true}]}"),
	    "{\"egress\":[{\"action\":\"permit\",\"target\":\"a.com\"}]}",
	    "\"text\"",
	};
	struct fx *f = *state;
	struct resp r;
	size_t i;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		call(f, "POST", "/policy", bad[i], &r);
		if (r.status != 400)
			fail_msg("%s accepted: %s", bad[i], r.raw);
		expect_prefix(&r, 400, "invalid policy: ");
		resp_free(&r);
	}
	check_unchanged(f, 1);
	assert_int_equal(f->stats.policy_updates_failed, i);
}

static void
test_max_rules(void **state)
{
	struct fx *f = fx_alloc();

	(void)state;
	f->opts.max_rules = 2;
	fx_start(f);
	*state = f;
	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "POST", "/policy",
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"x.com\"},"
	    "{\"action\":\"allow\",\"target\":\"y.com\"},"
	    "{\"action\":\"allow\",\"target\":\"z.com\"}]}",
	    413, TEXT, "egress rule total count 3 exceeds limit 2\n");
	/* PATCH counts the merged result. */
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"x.com\"}]", 413, TEXT,
	    "egress rule total count 3 exceeds limit 2\n");
	/* Replacing a target already there keeps the count. */
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"deny\",\"target\":\"a.example.com\"}]", 200, JSON,
	    NULL);
	assert_int_equal(f->commits, 2);
}

static void
test_patch(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	/* Prepended; the first occurrence of a target wins, case-insensitive;
	 * old rules not named follow in their order. */
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"deny\",\"target\":\"A.Example.com\"},"
	    "{\"action\":\"allow\",\"target\":\"c.example.com\"},"
	    "{\"action\":\"allow\",\"target\":\"a.example.com\"}]",
	    200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"A.Example.com\"},"
	    "{\"action\":\"allow\",\"target\":\"c.example.com\"},"
	    "{\"action\":\"deny\",\"target\":\"*.b.example.com\"}]}}\n");
	assert_int_equal(f->commits, 2);
}

static void
test_patch_errors(void **state)
{
	struct fx *f = *state;
	struct resp r;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "PATCH", "/policy", "", 400, TEXT, "empty body\n");
	roundtrip(f, "PATCH", "/policy", " \n ", 400, TEXT, "empty body\n");
	roundtrip(f, "PATCH", "/policy", "[]", 400, TEXT,
	    "invalid patch rules: empty array\n");
	roundtrip(f, "PATCH", "/policy", " [ ] ", 400, TEXT,
	    "invalid patch rules: empty array\n");
	roundtrip(f, "PATCH", "/policy", "{}", 400, TEXT,
	    "invalid patch rules: expected a JSON array of rules\n");
	roundtrip(f, "PATCH", "/policy", "[\"a.com\"]", 400, TEXT,
	    "invalid patch rules: element 0: expected a rule object\n");
	call(f, "PATCH", "/policy", "[{", &r);
	expect_prefix(&r, 400, "invalid patch rules: ");
	resp_free(&r);
	call(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"bad..name\"}]", &r);
	expect_prefix(&r, 400, "invalid merged policy: ");
	resp_free(&r);
	call(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"ok.com\",\"bogus\":1}]", &r);
	expect_prefix(&r, 400, "invalid merged policy: ");
	resp_free(&r);
	call(f, "PATCH", "/policy", "[{\"action\":\"allow\"}]", &r);
	expect_prefix(&r, 400, "invalid merged policy: ");
	resp_free(&r);
	check_unchanged(f, 1);
}

static void
test_delete(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	/* Nothing matched: 200 with the reason, nothing applied. */
	roundtrip(f, "DELETE", "/policy", "[\"zzz.example.com\"]", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"reason\":\"no matching targets found\"}\n");
	assert_int_equal(f->commits, 1);
	roundtrip(f, "DELETE", "/policy", "[\"A.EXAMPLE.COM\"]", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 2);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"*.b.example.com\"}]}}\n");
	roundtrip(f, "DELETE", "/policy", "[\"*.b.example.com\",\"nope.com\"]",
	    200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 3);
}

static void
test_delete_errors(void **state)
{
	struct fx *f = *state;
	struct resp r;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "DELETE", "/policy", "", 400, TEXT, "empty body\n");
	roundtrip(f, "DELETE", "/policy", "[]", 400, TEXT,
	    "invalid delete targets: empty array\n");
	roundtrip(f, "DELETE", "/policy", "[1]", 400, TEXT,
	    "invalid delete targets: element 0: expected a target string\n");
	roundtrip(f, "DELETE", "/policy", "\"a.com\"", 400, TEXT,
	    "invalid delete targets: expected a JSON array of target "
	    "strings\n");
	call(f, "DELETE", "/policy", "[\"a.com\"", &r);
	expect_prefix(&r, 400, "invalid delete targets: ");
	resp_free(&r);
	check_unchanged(f, 1);
}

static void
test_commit_failure(void **state)
{
	struct fx *f = *state;
	char *logs;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	f->fail_commit = true;
	roundtrip(f, "POST", "/policy", "", 500, TEXT,
	    "failed to apply nftables policy: boom\n");
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"z.com\"}]", 500, TEXT,
	    "failed to apply nftables policy: boom\n");
	roundtrip(f, "DELETE", "/policy", "[\"a.example.com\"]", 500, TEXT,
	    "failed to apply nftables policy: boom\n");
	f->fail_commit = false;
	check_unchanged(f, 1);
	assert_int_equal(f->stats.policy_updates_failed, 3);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"policy.update_failed\""));
	assert_non_null(strstr(logs, "\"reason\":\"commit failed\""));
	free(logs);
}

static void
test_vault_check(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	f->fail_vault = true;
	roundtrip(f, "POST", "/policy", "{\"defaultAction\":\"allow\"}", 400,
	    TEXT,
	    "credential vault policy validation: binding \"gh\" host "
	    "api.github.com is not allowed\n");
	roundtrip(f, "DELETE", "/policy", "[\"a.example.com\"]", 400, TEXT,
	    "credential vault policy validation: binding \"gh\" host "
	    "api.github.com is not allowed\n");
	f->fail_vault = false;
	check_unchanged(f, 1);
}

/* Racing updates (THREATS 15): PATCHes sent at once on many connections
 * are applied one by one; none is lost, revisions are consecutive. */
static void
test_racing_patches(void **state)
{
	enum { N = 16 };
	struct fx *f = *state;
	int fds[N];
	char req[512], buf[512], want[64];
	size_t i;
	struct resp r;

	for (i = 0; i < N; i++) {
		char body[96];
		int bl = snprintf(body, sizeof(body),
		    "[{\"action\":\"allow\",\"target\":\"r%zu.example.com\"}]",
		    i);
		int n = snprintf(req, sizeof(req),
		    "PATCH /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
		    "Content-Length: %d\r\n\r\n%s",
		    bl, body);
		fds[i] = client_connect(f);
		spin(f, 1);
		assert_int_equal(send(fds[i], req, (size_t)n, 0), n);
	}
	for (i = 0; i < N; i++) {
		ssize_t n = read_some(f, fds[i], buf, sizeof(buf) - 1, 3000);
		assert_true(n > 12);
		assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
		close(fds[i]);
	}
	assert_int_equal(f->commits, N);
	assert_int_equal(f->cur->revision, N);
	assert_int_equal(f->cur->nrules, N);
	call(f, "GET", "/policy", NULL, &r);
	for (i = 0; i < N; i++) {
		snprintf(want, sizeof(want), "\"r%zu.example.com\"", i);
		assert_non_null(strstr(r.body, want));
	}
	resp_free(&r);
}

/*
 * With the daemon's commit queue (hook mutate): the answer waits until the
 * mutation is in force, the loop keeps serving meanwhile, the decide sees
 * the snapshot in force at the mutation's turn (not at its arrival), a
 * client that left gets its change anyway (answered into the void: ASan
 * checks nothing freed is used), and a full queue is 503.
 */
static void
test_deferred(void **state)
{
	struct fx *f = *state;
	static const char patch[] =
	    "PATCH /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Content-Length: 46\r\n\r\n"
	    "[{\"action\":\"allow\",\"target\":\"q1.example.com\"}]";
	static const char patch2[] =
	    "PATCH /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Content-Length: 46\r\n\r\n"
	    "[{\"action\":\"allow\",\"target\":\"q2.example.com\"}]";
	char buf[1024], *logs;
	int a, b;
	ssize_t n;
	struct resp r;

	api_free(f->api);
	f->hooks.mutate = fx_mutate;
	f->hooks.policy_commit = NULL;
	fx_start(f);

	a = client_connect(f);
	spin(f, 2);
	assert_int_equal(
	    send(a, patch, sizeof(patch) - 1, 0), (ssize_t)(sizeof(patch) - 1));
	b = client_connect(f);
	spin(f, 2);
	assert_int_equal(send(b, patch2, sizeof(patch2) - 1, 0),
	    (ssize_t)(sizeof(patch2) - 1));
	spin(f, 50);
	assert_int_equal(f->nheld, 2);
	/* Queued: no answer yet, and the loop still serves. */
	assert_int_equal(read_some(f, a, buf, sizeof(buf), 50), -1);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	assert_int_equal(f->commits, 0);

	/* b leaves while its change waits behind a's. */
	close(b);
	spin(f, 20);

	fx_complete(f, 0);
	n = read_some(f, a, buf, sizeof(buf) - 1, 2000);
	assert_true(n > 12);
	assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
	close(a);
	assert_int_equal(f->commits, 1);

	/* b's turn: decided against a's result, committed, answered to
	 * nobody. */
	fx_complete(f, 1);
	spin(f, 50);
	assert_int_equal(f->commits, 2);
	assert_int_equal(f->cur->revision, 2);
	assert_int_equal(f->cur->nrules, 2);
	call(f, "GET", "/policy", NULL, &r);
	assert_non_null(strstr(r.body, "\"q1.example.com\""));
	assert_non_null(strstr(r.body, "\"q2.example.com\""));
	resp_free(&r);
	logs = fx_logs(f);
	/* Each request line written once, when its answer went out. */
	assert_non_null(strstr(logs,
	    "\"method\":\"PATCH\",\"path\":\"/policy\","
	    "\"status\":200"));
	assert_null(strstr(logs, "\"status\":0"));
	free(logs);

	/* A full queue: 503 with its words, nothing held. */
	f->nheld = 0;
	f->queue_full = true;
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"q3.example.com\"}]", 503, TEXT,
	    "1024 changes are waiting already\n");
	assert_int_equal(f->nheld, 0);
	assert_int_equal(f->commits, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_get_initial, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_405, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_post_put_replace, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_empty_post_resets, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_policy, setup, teardown),
	    cmocka_unit_test_teardown(test_max_rules, teardown),
	    cmocka_unit_test_setup_teardown(test_patch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_patch_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_delete_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_commit_failure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_vault_check, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_racing_patches, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deferred, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
