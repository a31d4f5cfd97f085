/*
 * policy_serial.c: user JSON and canonical YAML, round trips.
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
#include "ts_policy.h"

static const char everything[] =
    "defaultAction: allow\n"
    "egress:\n"
    "  - {action: allow, target: 198.51.100.0/25, ports: [443, '8000-8080'], "
    "protocols: [udp, tcp]}\n"
    "  - {action: allow, target: API.GitHub.com.}\n"
    "  - {action: allow, target: '*.example.com'}\n"
    "  - {target: 2001:DB8::/32, protocols: [icmp]}\n"
    "  - {action: deny, target: 203.0.113.7/24}\n"
    "  - {action: allow, target: Git.Example.org, ports: [22], "
    "protocols: [tcp]}\n"
    "  - {action: allow, target: '*.cdn.example.org', ports: ['8000-8080']}\n"
    "alwaysDeny: [metadata.internal, {target: 169.254.0.0/16}, "
    "{target: mail.example.org, ports: [25]}]\n"
    "alwaysAllow: [status.example.org]\n"
    "infra: [198.51.100.53]\n"
    "logSkip: ['*.noisy.org']\n"
    "dns:\n"
    "  upstreams: ['198.51.100.53', '[2001:db8::1]:53']\n"
    "  timeoutMs: 1500\n"
    "  ttlMin: 1\n"
    "  ttlMax: 99\n"
    "  negativeTtl: 0\n"
    "  privateAnswers: allow\n"
    "  cname: allow-chains\n"
    "proxy: {interceptPorts: [443]}\n"
    "credentials:\n"
    "  - {name: gh, source: {type: inline, value: \"sup3r\\\"secret\"}}\n"
    "  - {name: f, source: {type: file, path: /run/s/f}}\n"
    "bindings:\n"
    "  - name: a\n"
    "    match: {hosts: [api.github.com], methods: [GET, HEAD], paths: "
    "['/v1/*', '/x']}\n"
    "    auth: {type: apiKey, name: X-Key, credential: gh}\n"
    "  - name: b\n"
    "    match: {schemes: [http, https], hosts: ['*.example.com']}\n"
    "    auth:\n"
    "      type: customHeaders\n"
    "      headers: [{name: X-A, credential: f}]\n"
    "      substitutions: [{credential: gh, placeholder: \"PH \\\"q\\\"\", "
    "in: [body, path]}]\n";

static int
value_is_sup3r(void *arg, const uint8_t *v, size_t n)
{
	(void)arg;
	return n == 12 && memcmp(v, "sup3r\"secret", 12) == 0 ? 0 : -1;
}

static void
test_yaml_round_trip(void **state)
{
	struct policy *a = ts_policy_yaml(everything, "a"), *b;
	char *ya, *yb, *ja, *jb;

	(void)state;
	ya = policy_to_yaml(a);
	assert_non_null(ya);
	/* The operator's inline value goes back into the operator's file,
	 * escaped (issue 18 item 2), and loads back to the same bytes. */
	assert_null(strstr(ya, "[REDACTED]"));
	assert_non_null(strstr(ya, "value: \"sup3r\\\"secret\""));
	b = ts_policy_yaml(ya, "b");
	assert_int_equal(b->ncredentials, 2);
	assert_int_equal(
	    policy_credential_export(b->credentials[0], value_is_sup3r, NULL),
	    0);
	yb = policy_to_yaml(b);
	assert_string_equal(ya, yb);
	ja = policy_user_to_json(a);
	jb = policy_user_to_json(b);
	assert_string_equal(ja, jb);
	/* spot checks of the model itself */
	assert_int_equal(b->nrules, a->nrules);
	assert_int_equal(b->nalways_deny, 3);
	/* limits on names survive both forms (issue 16 item 7) */
	assert_non_null(strstr(ja,
	    "{\"action\":\"allow\",\"target\":\"Git.Example.org\","
	    "\"ports\":[22],\"protocols\":[\"tcp\"]}"));
	assert_non_null(strstr(ja,
	    "{\"action\":\"allow\",\"target\":\"*.cdn.example.org\","
	    "\"ports\":[\"8000-8080\"]}"));
	assert_int_equal(b->rules[5].nports, 1);
	assert_int_equal(b->rules[5].ports[0].lo, 22);
	assert_int_equal(b->always_deny[2].ports[0].lo, 25);
	assert_int_equal(b->nlog_skip, 1);
	assert_true(policy_log_skip(b, "a.noisy.org"));
	assert_int_equal(b->dns.negative_ttl, 0);
	assert_int_equal(
	    b->rules[0].protocols, POLICY_PROTO_TCP | POLICY_PROTO_UDP);
	assert_string_equal(b->rules[0].target, "198.51.100.0/25");
	assert_string_equal(b->rules[1].display, "API.GitHub.com.");
	assert_string_equal(b->rules[3].target, "2001:db8::/32");
	assert_string_equal(b->rules[4].target, "203.0.113.0/24");
	assert_int_equal(b->nbindings, 2);
	policy_yaml_free(ya);
	policy_yaml_free(yb);
	free(ja);
	free(jb);
	policy_unref(a);
	policy_unref(b);
}

/* Request rules (issue 37) survive both forms, methods and paths in
 * order, paths as stored. */
static void
test_request_rules_round_trip(void **state)
{
	static const char y[] =
	    "egress:\n"
	    "  - {action: allow, target: GitHub.com, methods: [GET], paths: "
	    "['/*/*/info/refs']}\n"
	    "  - {action: allow, target: github.com, methods: [POST], ports: "
	    "[443], paths: ['/*/*/git-upload-pack', '/a;b=c/%C3%A9*']}\n"
	    "  - {action: deny, target: '*.x.test', methods: [PUT, DELETE]}\n";
	struct policy *a = ts_policy_yaml(y, "a"), *b;
	char *ya, *yb, *ja, *jb;

	(void)state;
	ya = policy_to_yaml(a);
	assert_non_null(ya);
	b = ts_policy_yaml(ya, "b");
	yb = policy_to_yaml(b);
	assert_string_equal(ya, yb);
	ja = policy_user_to_json(a);
	jb = policy_user_to_json(b);
	assert_string_equal(ja, jb);
	assert_string_equal(ja,
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"GitHub.com\","
	    "\"methods\":[\"GET\"],\"paths\":[\"/*/*/info/refs\"]},"
	    "{\"action\":\"allow\",\"target\":\"github.com\","
	    "\"ports\":[443],\"methods\":[\"POST\"],"
	    "\"paths\":[\"/*/*/git-upload-pack\",\"/a;b=c/%C3%A9*\"]},"
	    "{\"action\":\"deny\",\"target\":\"*.x.test\","
	    "\"methods\":[\"PUT\",\"DELETE\"]}]}");
	assert_int_equal(b->nrules, 3);
	assert_int_equal(b->rules[1].npaths, 2);
	assert_string_equal(b->rules[1].paths[1], "/a;b=c/%C3%A9*");
	assert_int_equal(b->rules[2].nmethods, 2);
	assert_string_equal(b->rules[2].methods[1], "DELETE");
	policy_yaml_free(ya);
	policy_yaml_free(yb);
	free(ja);
	free(jb);
	policy_unref(a);
	policy_unref(b);
}

static void
test_yaml_empty(void **state)
{
	struct policy *p = policy_new_deny_all(), *q;
	char *y = policy_to_yaml(p);

	(void)state;
	assert_non_null(strstr(y, "{}\n"));
	q = ts_policy_yaml(y, "e");
	assert_true(q->user_empty);
	free(y);
	policy_unref(q);
	policy_unref(p);
}

static void
test_yaml_reset_keeps_config(void **state)
{
	struct policy *b = ts_policy_yaml("dns: {timeoutMs: 1234}\n", "c"), *p,
	              *q;
	struct err e;
	char *y;

	(void)state;
	p = policy_replace_json(b, "", 0, 0, NULL, &e);
	assert_non_null(p);
	assert_true(p->user_empty);
	y = policy_to_yaml(p);
	assert_non_null(strstr(y, "timeoutMs: 1234"));
	q = ts_policy_yaml(y, "again");
	assert_int_equal(q->dns.timeout_ms, 1234);
	assert_string_equal(policy_mode_name(q), "deny_all");
	free(y);
	policy_unref(q);
	policy_unref(p);
	policy_unref(b);
}

static void
test_yaml_json_equivalent(void **state)
{
	const char *j = "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":"
	                "\"allow\",\"target\":\"a\\\"b.com\"}]}";
	struct policy_diag d;

	(void)state;
	/* a display with a quote cannot be a valid target, but the quoting
	 * path is exercised through a credential placeholder above; here
	 * only check the error is positioned */
	policy_diag_init(&d);
	assert_null(policy_parse_json(j, strlen(j), "j", &d));
	assert_non_null(strstr(d.msgs[0], "j:1:62: malformed target"));
	policy_diag_clear(&d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_yaml_round_trip),
	    cmocka_unit_test(test_request_rules_round_trip),
	    cmocka_unit_test(test_yaml_empty),
	    cmocka_unit_test(test_yaml_reset_keeps_config),
	    cmocka_unit_test(test_yaml_json_equivalent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
