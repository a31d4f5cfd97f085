/*
 * api, the token: both auth forms and what is open without one (contract
 * §3: 401 before 405, 405 before 412), no token at all (reads open,
 * mutations 412) or explicitly insecure, and the per-peer backoff after
 * wrong tokens. Over a real socket with fake daemon hooks (api_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_fixture.h"

static void
test_auth(void **state)
{
	struct fx *f = *state;
	struct resp r;

	call_full(f, "GET", "/policy", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: wrong\r\n", "",
	    0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	/* A prefix and an extension of the token are wrong too. */
	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: s3cret\r\n",
	    "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	/* (The right token now, before the fourth failure backs off.) */
	roundtrip(f, "GET", "/policy", NULL, 200, JSON, NULL);
	call_full(f, "GET", "/policy",
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "x\r\n", "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/policy", "Authorization: Basic " TOKEN "\r\n", "",
	    0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	assert_int_equal(f->stats.api_unauthorized, 5);

	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "opensandbox-egress-auth: " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "Authorization: Bearer " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "Authorization: bearer " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);

	/* Auth is checked before the method (reference order 401, 405). */
	call_full(f, "OPTIONS", "/policy", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	/* Mutations without a token never reach the commit. */
	call_full(f, "POST", "/policy", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	roundtrip(f, "GET", "/policy", NULL, 200, JSON, NULL);

	/* /healthz and /readyz never need it; /metrics and /v1/status do. */
	call_full(f, "GET", "/healthz", NULL, "", 0, &r);
	expect(&r, 200, TEXT, "ok");
	resp_free(&r);
	call_full(f, "GET", "/readyz", NULL, "", 0, &r);
	expect(&r, 200, TEXT, "ok");
	resp_free(&r);
	call_full(f, "GET", "/metrics", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/v1/status", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/metrics", "Authorization: Bearer " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL);
	resp_free(&r);
}

static void
test_no_token(void **state)
{
	struct fx *f = fx_alloc();
	struct resp r;
	char *logs;

	(void)state;
	f->opts.token = NULL;
	fx_start(f);
	*state = f;
	/* Reads are open, as in the reference. */
	call_full(f, "GET", "/policy", NULL, "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	/* Mutations are refused: 405 first, then 412. */
	call_full(f, "TRACE", "/policy", NULL, "", 0, &r);
	expect_text(&r, 405, "method not allowed\n");
	resp_free(&r);
	call_full(f, "POST", "/policy", NULL, "", 0, &r);
	expect_text(
	    &r, 412, "policy mutations require egress API auth token\n");
	resp_free(&r);
	call_full(f, "PATCH", "/policy", NULL, "[]", 2, &r);
	expect_text(
	    &r, 412, "policy mutations require egress API auth token\n");
	resp_free(&r);
	call_full(f, "DELETE", "/policy", NULL, "[\"a.com\"]", 9, &r);
	expect_text(
	    &r, 412, "policy mutations require egress API auth token\n");
	resp_free(&r);
	/* The vault: 405 first, then 412 (no token), before anything else. */
	call_full(f, "PUT", "/credential-vault", NULL, "{}", 2, &r);
	expect_text(&r, 405, "method not allowed\n");
	resp_free(&r);
	call_full(f, "POST", "/credential-vault", NULL, "{", 1, &r);
	expect_text(
	    &r, 412, "credential vault requires egress API auth token\n");
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"api.read_only\""));
	free(logs);
}

static void
test_no_token_insecure(void **state)
{
	struct fx *f = fx_alloc();
	struct resp r;
	char *logs;

	(void)state;
	f->opts.token = "";
	f->opts.insecure_no_token = true;
	fx_start(f);
	*state = f;
	call_full(f, "POST", "/policy", NULL, "", 0, &r);
	expect(&r, 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"reason\":\"policy "
	    "reset to default deny-all\"}\n");
	resp_free(&r);
	assert_int_equal(f->commits, 1);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"api.insecure\""));
	free(logs);
}

/* Wrong tokens back off per peer; tries during the backoff count too. */
static void
test_auth_backoff(void **state)
{
	struct fx *f = *state;
	struct resp r;
	char ra[16];
	int i;

	for (i = 0; i < API_AUTH_FREE_FAILS + 1; i++) {
		call_full(f, "GET", "/policy",
		    "OPENSANDBOX-EGRESS-AUTH: wrong\r\n", "", 0, &r);
		expect_text(&r, 401, "unauthorized\n");
		resp_free(&r);
	}
	/* Backing off: even the right token is not looked at. */
	call(f, "GET", "/policy", NULL, &r);
	expect_text(&r, 429, "too many failed authentication attempts\n");
	assert_non_null(header(&r, "Retry-After", ra, sizeof(ra)));
	assert_true(atoi(ra) >= 1 && atoi(ra) <= 3);
	resp_free(&r);
	call(f, "POST", "/policy", "{}", &r);
	assert_int_equal(r.status, 429);
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	assert_int_equal(f->stats.api_unauthorized, API_AUTH_FREE_FAILS + 3);
	/* Unauthenticated routes are not affected. */
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	{
		char *logs = fx_logs(f);
		assert_non_null(strstr(logs, "\"ev\":\"api.auth_backoff\""));
		free(logs);
	}
	/* After the backoff (doubled per try: 4 backoffs now), the right
	 * token works and clears the record. */
	spin(f, 4 * (int)f->opts.timing.backoff_ms + 200);
	call(f, "GET", "/policy", NULL, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: wrong\r\n", "",
	    0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
	    cmocka_unit_test_teardown(test_no_token, teardown),
	    cmocka_unit_test_teardown(test_no_token_insecure, teardown),
	    cmocka_unit_test_setup_teardown(test_auth_backoff, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
