/*
 * metrics: the exposition text for a known stats struct, checked line by
 * line and by promtool (the Prometheus project's own linter).
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
#include <event2/buffer.h>

#include "egressd/base/metrics.h"

#define PROMTOOL "/usr/bin/promtool"

static char *
render(const struct stats *st, const struct metrics_info *info)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *s;

	assert_non_null(b);
	assert_int_equal(metrics_render(st, info, b), 0);
	n = evbuffer_get_length(b);
	s = malloc(n + 1);
	assert_non_null(s);
	assert_int_equal(evbuffer_remove(b, s, n), (int)n);
	s[n] = '\0';
	evbuffer_free(b);
	return s;
}

static void
fill(struct stats *st)
{
	size_t i;

	memset(st, 0, sizeof(*st));
	st->dns_queries = 100;
	st->dns_allowed = 60;
	st->dns_denied = 30;
	st->dns_cname_denied = 4;
	st->dns_local = 3;
	st->dns_formerr = 2;
	st->dns_servfail = 1;
	st->dns_upstream_failures = 7;
	st->dns_upstream_tc_retries = 71;
	st->dns_overload = 72;
	st->dns_learn_memo_skips = 73;
	for (i = 0; i <= STATS_LAT_BUCKETS; i++)
		st->dns_upstream_lat_bucket[i] = i + 1;
	st->dns_upstream_lat_count =
	    (STATS_LAT_BUCKETS + 1) * (STATS_LAT_BUCKETS + 2) / 2;
	st->dns_upstream_lat_sum_s = 1.25;
	st->nft_batches = 5;
	st->nft_failures = 1;
	st->nft_learned = 42;
	st->nft_learned_current = 17;
	st->dns_query_failed[STATS_DNS_FAIL_NO_UPSTREAMS] = 81;
	st->dns_query_failed[STATS_DNS_FAIL_UPSTREAM_ERROR] = 82;
	st->dns_query_failed[STATS_DNS_FAIL_EMPTY_RESPONSE] = 83;
	st->dns_query_failed[STATS_DNS_FAIL_RCODE] = 84;
	st->nft_update_failed[STATS_NFT_OP_STATIC_APPLY] = 91;
	st->nft_update_failed[STATS_NFT_OP_DYNAMIC_ADD] = 92;
	st->nft_update_failed[STATS_NFT_OP_REMOVE] = 93;
	st->nft_update_failed[STATS_NFT_OP_REFRESH] = 94;
	st->policy_revision = 9;
	/* the proxy and two bindings' vault rows (promtool lints them) */
	st->proxy_on = true;
	st->vault_decisions[1] = 5;
	st->nvault_bindings = 2;
	strcpy(st->vault_bindings[0].name, "gh-api");
	st->vault_bindings[0].decisions[1] = 4;
	strcpy(st->vault_bindings[1].name, "openai.v1");
	st->vault_bindings[1].decisions[3] = 1;
	st->vault_compressed[0] = 8;
	st->vault_compressed[1] = 2;
	st->vault_compressed[2] = 1;
	st->policy_reloads_ok = 2;
	st->policy_reloads_failed = 1;
	st->policy_updates_ok = 6;
	st->policy_updates_failed = 3;
	st->api_requests = 11;
	st->api_unauthorized = 4;
}

static const struct metrics_info info0 = {
    .version = "0.1.0",
    .enforcement_mode = "dns+nft",
    .start_time_s = 1700000000,
    .log_lines = 123,
    .log_dropped = 0,
    .api_connections = 2,
};

static void
has_line(const char *text, const char *line)
{
	const char *p = text;
	size_t n = strlen(line);

	while ((p = strstr(p, line)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
		p++;
	}
	fail_msg("missing line: %s", line);
}

static void
test_values(void **state)
{
	struct stats st;
	char *s;

	(void)state;
	fill(&st);
	s = render(&st, &info0);
	has_line(s, "egressd_build_info{version=\"0.1.0\"} 1");
	has_line(s, "egressd_enforcement_info{mode=\"dns+nft\"} 1");
	has_line(s, "egressd_dns_queries_received_total 100");
	has_line(s, "egressd_dns_queries_total{decision=\"allowed\"} 60");
	has_line(s, "egressd_dns_queries_total{decision=\"denied\"} 30");
	has_line(s, "egressd_dns_queries_total{decision=\"cname_denied\"} 4");
	has_line(s, "egressd_dns_upstream_failures_total 7");
	has_line(s, "egressd_dns_upstream_tc_retries_total 71");
	has_line(s, "egressd_dns_overload_total 72");
	has_line(s, "egressd_dns_learn_memo_skips_total 73");
	/* Cumulative buckets: 1, 1+2, ..., and +Inf equals the count. */
	has_line(
	    s, "egressd_dns_upstream_duration_seconds_bucket{le=\"0.001\"} 1");
	has_line(
	    s, "egressd_dns_upstream_duration_seconds_bucket{le=\"0.002\"} 3");
	has_line(
	    s, "egressd_dns_upstream_duration_seconds_bucket{le=\"5.000\"} 55");
	has_line(
	    s, "egressd_dns_upstream_duration_seconds_bucket{le=\"+Inf\"} 66");
	has_line(s, "egressd_dns_upstream_duration_seconds_count 66");
	has_line(s, "egressd_dns_upstream_duration_seconds_sum 1.25");
	has_line(s, "# TYPE egressd_dns_upstream_duration_seconds histogram");
	has_line(s, "egressd_nft_batches_total 5");
	has_line(s, "egressd_nft_failures_total 1");
	has_line(s, "egressd_nft_learned_addresses 17");
	/* The reference sidecar's names and label values (docs/compat.md). */
	has_line(s, "# TYPE egress_dns_query_failed_total counter");
	has_line(
	    s, "egress_dns_query_failed_total{reason=\"no_upstreams\"} 81");
	has_line(
	    s, "egress_dns_query_failed_total{reason=\"upstream_error\"} 82");
	has_line(
	    s, "egress_dns_query_failed_total{reason=\"empty_response\"} 83");
	has_line(s, "egress_dns_query_failed_total{reason=\"rcode\"} 84");
	has_line(s, "# TYPE egress_nftables_updates_failed_total counter");
	has_line(s,
	    "egress_nftables_updates_failed_total{operation=\"static_apply\"} "
	    "91");
	has_line(s,
	    "egress_nftables_updates_failed_total{operation=\"dynamic_add\"} "
	    "92");
	has_line(
	    s, "egress_nftables_updates_failed_total{operation=\"remove\"} 93");
	has_line(s,
	    "egress_nftables_updates_failed_total{operation=\"refresh\"} 94");
	has_line(s, "egressd_policy_revision 9");
	has_line(s,
	    "egressd_vault_binding_decisions_total{binding=\"gh-api\","
	    "decision=\"injected\"} 4");
	has_line(s,
	    "egressd_vault_binding_decisions_total{binding=\"openai.v1\","
	    "decision=\"refused\"} 1");
	has_line(s,
	    "egressd_vault_compressed_responses_total{outcome=\"decoded\"} 8");
	has_line(s,
	    "egressd_vault_compressed_responses_total{outcome=\"refused\"} 2");
	has_line(s,
	    "egressd_vault_compressed_responses_total{outcome=\"failed\"} 1");
	has_line(s, "egressd_policy_reloads_total{result=\"ok\"} 2");
	has_line(s, "egressd_policy_reloads_total{result=\"failed\"} 1");
	has_line(s, "egressd_policy_updates_total{result=\"failed\"} 3");
	has_line(s, "egressd_api_requests_total 11");
	has_line(s, "egressd_api_unauthorized_total 4");
	has_line(s, "egressd_api_connections 2");
	has_line(s, "egressd_start_time_seconds 1700000000");
	free(s);
}

static void
test_label_escape(void **state)
{
	struct metrics_info info = info0;
	struct stats st;
	char *s;

	(void)state;
	memset(&st, 0, sizeof(st));
	info.version = "1\"2\\3\n4";
	s = render(&st, &info);
	has_line(s, "egressd_build_info{version=\"1\\\"2\\\\3\\n4\"} 1");
	free(s);
}

/* promtool must accept the text with no lint finding at all. */
static void
promtool_check(const char *text)
{
	char path[] = "/tmp/egressd-metrics-XXXXXX";
	char cmd[256];
	int fd, rc;
	FILE *p;
	char out[4096];
	size_t n;

	if (access(PROMTOOL, X_OK) != 0)
		fail_msg(
		    PROMTOOL " is missing (./run installs the "
		             "prometheus package); this test must not skip");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(cmd, sizeof(cmd), PROMTOOL " check metrics < %s 2>&1", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	rc = pclose(p);
	unlink(path);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0 || n != 0)
		fail_msg("promtool rc=%d: %s", rc, out);
}

static void
test_promtool(void **state)
{
	struct stats st;
	char *s;

	(void)state;
	fill(&st);
	s = render(&st, &info0);
	promtool_check(s);
	free(s);
	memset(&st, 0, sizeof(st));
	s = render(&st, &info0);
	promtool_check(s);
	free(s);
}

/* The checker itself must be able to fail: a counter without _total and
 * a broken line are reported. */
static void
test_promtool_can_fail(void **state)
{
	char cmd[256];
	int rc;

	(void)state;
	if (access(PROMTOOL, X_OK) != 0)
		fail_msg(PROMTOOL " is missing");
	snprintf(cmd, sizeof(cmd),
	    "printf '# HELP x y\\n# TYPE x counter\\nx{ 1\\n' | " PROMTOOL
	    " check metrics >/dev/null 2>&1");
	rc = system(cmd);
	assert_true(!WIFEXITED(rc) || WEXITSTATUS(rc) != 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_label_escape),
	    cmocka_unit_test(test_promtool),
	    cmocka_unit_test(test_promtool_can_fail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
