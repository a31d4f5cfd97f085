/*
 * api, the other routes: /healthz and /readyz, /metrics (promtool checks
 * what goes over the wire), /v1/status, the 404s and the vault's routes
 * without a vault, and what each request logs (never the token or a body).
 * Over a real socket with fake daemon hooks (api_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "api_fixture.h"

static void
test_healthz_readyz(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	roundtrip(f, "POST", "/healthz", NULL, 200, TEXT, "ok");
	f->not_healthy = true;
	roundtrip(f, "GET", "/healthz", NULL, 503, TEXT,
	    "credential proxy not ready\n");
	f->not_healthy = false;
	roundtrip(f, "GET", "/readyz", NULL, 200, TEXT, "ok");
	f->not_ready = true;
	roundtrip(f, "GET", "/readyz", NULL, 503, TEXT, "nft not ready\n");
	roundtrip(
	    f, "POST", "/readyz", NULL, 405, TEXT, "method not allowed\n");
}

static void
test_metrics(void **state)
{
	struct fx *f = *state;
	char path[] = "/tmp/egressd-api-metrics-XXXXXX", cmd[128];
	struct resp r;
	int fd, rc;

	f->stats.dns_denied = 17;
	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	call(f, "GET", "/metrics", NULL, &r);
	expect(&r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL);
	assert_non_null(strstr(r.body,
	    "\negressd_build_info{version=\"" EGRESSD_VERSION "\"} 1\n"));
	assert_non_null(strstr(
	    r.body, "\negressd_dns_queries_total{decision=\"denied\"} 17\n"));
	assert_non_null(strstr(r.body, "\negressd_policy_revision 1\n"));
	assert_non_null(strstr(
	    r.body, "\negressd_policy_updates_total{result=\"ok\"} 1\n"));
	assert_non_null(strstr(r.body, "\negressd_api_requests_total 2\n"));
	assert_null(strstr(r.body, TOKEN));
	/* promtool must accept what goes over the wire. */
	assert_int_equal(access("/usr/bin/promtool", X_OK), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, r.body, r.bodylen), (ssize_t)r.bodylen);
	close(fd);
	snprintf(
	    cmd, sizeof(cmd), "/usr/bin/promtool check metrics < %s", path);
	rc = system(cmd);
	unlink(path);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	resp_free(&r);
	roundtrip(
	    f, "DELETE", "/metrics", NULL, 405, TEXT, "method not allowed\n");
}

static void
test_status(void **state)
{
	struct fx *f = *state;
	struct resp r;
	json_t *o, *p, *api, *l;
	json_error_t je;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	f->not_ready = true;
	call(f, "GET", "/v1/status", NULL, &r);
	expect(&r, 200, JSON, NULL);
	assert_int_equal(r.body[r.bodylen - 1], '\n');
	o = json_loadb(r.body, r.bodylen, 0, &je);
	if (o == NULL)
		fail_msg("status not JSON: %s", je.text);
	assert_string_equal(
	    json_string_value(json_object_get(o, "status")), "ok");
	assert_string_equal(
	    json_string_value(json_object_get(o, "version")), EGRESSD_VERSION);
	assert_string_equal(
	    json_string_value(json_object_get(o, "enforcementMode")),
	    "dns+nft");
	assert_true(json_is_false(json_object_get(o, "ready")));
	assert_string_equal(
	    json_string_value(json_object_get(o, "notReady")), "nft not ready");
	/* The daemon's side: the hook's plain struct, rendered here. */
	assert_string_equal(
	    json_string_value(json_object_get(o, "configuredMode")), "dns+nft");
	l = json_object_get(o, "enforced");
	assert_int_equal(json_array_size(l), 2);
	assert_string_equal(
	    json_string_value(json_array_get(l, 0)), "dns-filter");
	assert_string_equal(
	    json_string_value(json_array_get(l, 1)), "nft-default-deny");
	assert_string_equal(
	    json_string_value(json_object_get(
	        json_object_get(o, "notEnforced"), "transparentProxy")),
	    "off (--proxy)");
	assert_null(json_object_get(o, "dns"));
	assert_null(json_object_get(o, "proxy"));
	p = json_object_get(o, "policy");
	assert_int_equal(json_integer_value(json_object_get(p, "revision")), 1);
	assert_string_equal(
	    json_string_value(json_object_get(p, "source")), "api");
	assert_string_equal(
	    json_string_value(json_object_get(p, "mode")), "enforcing");
	assert_int_equal(json_integer_value(json_object_get(p, "rules")), 2);
	assert_string_equal(json_string_value(json_object_get(p, "file")),
	    "/etc/egressd/policy.yaml");
	api = json_object_get(o, "api");
	assert_string_equal(
	    json_string_value(json_object_get(api, "auth")), "token");
	l = json_object_get(api, "listeners");
	assert_int_equal(json_array_size(l), 1);
	assert_int_equal(strncmp(json_string_value(json_array_get(l, 0)),
	                     "tcp:127.0.0.1:", 14),
	    0);
	assert_null(strstr(r.body, TOKEN));
	json_decref(o);
	resp_free(&r);
}

static void
test_routes(void **state)
{
	static const char *const paths[] = {"/", "/policy/", "/policyx",
	    "/credential-vaultx", "/credential-vault/other",
	    "/credential-vault/credentials/", "/credential-vault/bindingsx",
	    "/v1/status/x", "/POLICY"};
	struct fx *f = *state;
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		roundtrip(f, "GET", paths[i], NULL, 404, TEXT,
		    "404 page not found\n");
	/* The vault's routes (the fixture has none: e2e_proxy_vault_api
	 * drives a real one). */
	roundtrip(f, "GET", "/credential-vault", NULL, 404, TEXT,
	    "credential vault not found\n");
	roundtrip(f, "GET", "/credential-vault/credentials", NULL, 404, TEXT,
	    "credential vault not found\n");
	roundtrip(f, "GET", "/credential-vault/bindings/x", NULL, 404, TEXT,
	    "credential vault not found\n");
	roundtrip(f, "GET", "/credential-vault/_active", NULL, 403, TEXT,
	    "forbidden\n");
	roundtrip(f, "POST", "/credential-vault/credentials", "{}", 405, TEXT,
	    "method not allowed\n");
	/* No vault hooks (no proxy): writes are 412, the body never read. */
	roundtrip(f, "POST", "/credential-vault", "{", 412, TEXT,
	    "credential proxy is not ready\n");
	/* The query string is not part of the route. */
	roundtrip(f, "GET", "/healthz?x=1", NULL, 200, TEXT, "ok");
}

static void
test_logs(void **state)
{
	struct fx *f = *state;
	struct resp r;
	char *logs;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "POST", "/policy", "{\"defaultAction\":\"maybe\"}", 400,
	    TEXT, NULL);
	call_full(f, "GET", "/policy?token=" TOKEN,
	    "Authorization: Bearer " TOKEN "\r\n", "", 0, &r);
	resp_free(&r);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	logs = fx_logs(f);
	assert_non_null(strstr(logs,
	    "\"lvl\":\"info\",\"ev\":\"api.request\",\"method\":\"POST\","
	    "\"path\":\"/policy\",\"status\":200"));
	/* Successful probes are routine: debug level. */
	assert_non_null(strstr(logs,
	    "\"lvl\":\"debug\",\"ev\":\"api.request\",\"method\":\"GET\","
	    "\"path\":\"/healthz\",\"status\":200"));
	assert_non_null(strstr(logs, "\"peer\":\"127.0.0.1:"));
	assert_non_null(strstr(logs,
	    "\"ev\":\"policy.updated\",\"op\":\"replace\",\"revision\":1"));
	assert_non_null(strstr(logs,
	    "\"ev\":\"policy.update_failed\",\"op\":\"replace\",\"status\":400,"
	    "\"reason\":\"invalid policy\""));
	/* Neither the token (header or query) nor request bodies. */
	assert_null(strstr(logs, TOKEN));
	assert_null(strstr(logs, "a.example.com"));
	free(logs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_healthz_readyz, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_status, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
