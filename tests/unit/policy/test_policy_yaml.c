/*
 * policy_yaml.c: the YAML reader, the full file schema shared with JSON,
 * and policy_load_file.
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
#include "ts_policy.h"

/* Expects failure and every needle among the messages, in order. */
static void
yaml_bad(const char *y, const char *const *needles, size_t n)
{
	struct policy_diag d;
	size_t i, k = 0;

	policy_diag_init(&d);
	assert_null(policy_parse_yaml(y, strlen(y), "p.yaml", &d));
	for (i = 0; i < d.n && k < n; i++)
		if (strstr(d.msgs[i], needles[k]) != NULL)
			k++;
	if (k != n) {
		for (i = 0; i < d.n; i++)
			print_error("diag: %s\n", d.msgs[i]);
		fail_msg("missing \"%s\"", needles[k]);
	}
	policy_diag_clear(&d);
}

#define BAD(y, ...)                                                            \
	do {                                                                   \
		const char *const nd_[] = {__VA_ARGS__};                       \
		yaml_bad(y, nd_, sizeof(nd_) / sizeof(nd_[0]));                \
	} while (0)

static const char full[] =
    "# a complete file\n"
    "defaultAction: deny\n"
    "egress:\n"
    "  - action: allow\n"
    "    target: api.github.com\n"
    "  - {action: allow, target: '*.pypi.org'}\n"
    "  - {action: allow, target: 198.51.100.0/24, ports: [443], protocols: "
    "[tcp]}\n"
    "  - action: deny\n"
    "    target: 203.0.113.0/24\n"
    "alwaysDeny: [metadata.internal, 169.254.169.254]\n"
    "alwaysAllow:\n"
    "  - target: status.example.com\n"
    "infra:\n"
    "  - 198.51.100.53\n"
    "dns:\n"
    "  upstreams: ['198.51.100.53', '198.51.100.54:5353', "
    "'[2001:db8::53]:53']\n"
    "  timeoutMs: 2000\n"
    "  ttlMin: 10\n"
    "  ttlMax: 600\n"
    "  negativeTtl: 5\n"
    "  privateAnswers: allow\n"
    "  cname: allow-chains\n"
    "proxy:\n"
    "  interceptPorts: [443, 8443]\n";

static void
test_full_file(void **state)
{
	struct policy *p = ts_policy_yaml(full, "p.yaml");

	(void)state;
	assert_int_equal(p->revision, 1);
	assert_string_equal(p->source, "p.yaml");
	assert_int_equal(p->nrules, 4);
	assert_int_equal(p->rules[1].kind, POLICY_TARGET_WILDCARD);
	assert_int_equal(p->rules[2].kind, POLICY_TARGET_CIDR);
	assert_int_equal(p->rules[2].nports, 1);
	assert_int_equal(p->rules[2].protocols, POLICY_PROTO_TCP);
	assert_string_equal(p->rules[0].loc.file, "p.yaml");
	assert_int_equal(p->rules[0].loc.line, 4);
	assert_int_equal(p->rules[0].loc.col, 5);
	assert_int_equal(p->nalways_deny, 2);
	assert_int_equal(p->always_deny[1].kind, POLICY_TARGET_IP);
	assert_int_equal(p->nalways_allow, 1);
	assert_int_equal(p->ninfra, 1);
	assert_int_equal(p->dns.nupstreams, 3);
	assert_string_equal(p->dns.upstreams[2], "[2001:db8::53]:53");
	assert_int_equal(p->dns.timeout_ms, 2000);
	assert_int_equal(p->dns.ttl_min, 10);
	assert_int_equal(p->dns.ttl_max, 600);
	assert_int_equal(p->dns.negative_ttl, 5);
	assert_int_equal(p->dns.private_answers, POLICY_PRIVATE_ALLOW);
	assert_int_equal(p->dns.cname_mode, POLICY_CNAME_ALLOW_CHAINS);
	assert_int_equal(p->proxy.nintercept_ports, 2);
	assert_int_equal(p->proxy.intercept_ports[1], 8443);
	assert_int_equal(
	    policy_match_domain(p, "x.pypi.org", NULL), POLICY_ALLOW);
	assert_int_equal(
	    policy_match_domain(p, "metadata.internal", NULL), POLICY_DENY);
	policy_unref(p);
}

static void
test_json_and_yaml_same_model(void **state)
{
	const char *j =
	    "{\"defaultAction\":\"allow\",\"egress\":[{\"action\":"
	    "\"deny\",\"target\":\"192.0.2.1\",\"ports\":[\"1-2\"]}]}";
	struct policy_diag d;
	struct policy *a, *b;
	char *sa, *sb;

	(void)state;
	policy_diag_init(&d);
	a = policy_parse_json(j, strlen(j), "j", &d);
	/* JSON is YAML: the YAML reader gives the same model */
	b = policy_parse_yaml(j, strlen(j), "y", &d);
	assert_non_null(a);
	assert_non_null(b);
	sa = policy_user_to_json(a);
	sb = policy_user_to_json(b);
	assert_string_equal(sa, sb);
	free(sa);
	free(sb);
	policy_unref(a);
	policy_unref(b);
	policy_diag_clear(&d);
}

static void
test_empty_yaml(void **state)
{
	struct policy *p;

	(void)state;
	p = ts_policy_yaml("", "p.yaml");
	assert_true(p->user_empty);
	policy_unref(p);
	p = ts_policy_yaml("# only a comment\n", "p.yaml");
	assert_true(p->user_empty);
	policy_unref(p);
	p = ts_policy_yaml("{}\n", "p.yaml");
	assert_true(p->user_empty);
	policy_unref(p);
	p = ts_policy_yaml("~\n", "p.yaml");
	assert_true(p->user_empty);
	policy_unref(p);
}

static void
test_all_errors_with_positions(void **state)
{
	(void)state;
	BAD("defaultAction: maybe\n"
	    "egres: []\n"
	    "egress:\n"
	    "  - target: a..com\n"
	    "  - action: allow\n"
	    "    target: ok.com\n"
	    "    colour: red\n"
	    "dns:\n"
	    "  timeoutMs: -1\n"
	    "  ttlMin: 100\n"
	    "  ttlMax: 50\n",
	    "p.yaml:1:16: unknown defaultAction \"maybe\"",
	    "p.yaml:2:1: unknown key \"egres\"",
	    "p.yaml:4:13: malformed target \"a..com\"",
	    "p.yaml:7:5: unknown key \"colour\"",
	    "p.yaml:9:14: expected an integer from 1 to 120000",
	    "p.yaml:10:3: dns.ttlMin 100 exceeds dns.ttlMax 50");
}

static void
test_duplicates_types_anchors(void **state)
{
	(void)state;
	BAD("defaultAction: deny\ndefaultAction: allow\n",
	    "p.yaml:2:1: duplicate key \"defaultAction\"");
	BAD("egress: {a: 1}\n", "p.yaml:1:9: expected a list, found a mapping");
	BAD("defaultAction: [deny]\n", "expected a string, found a list");
	BAD("defaultAction: true\n", "expected a string, found a boolean");
	BAD("egress:\n  - &r {action: allow, target: a.com}\n  - *r\n",
	    "p.yaml:2:5: anchors and aliases are not allowed",
	    "p.yaml:3:5: anchors and aliases are not allowed");
	BAD("defaultAction: !!str deny\n", "tags are not allowed");
	BAD("a: 1\n---\nb: 2\n", "more than one document");
	BAD("egress: [\n", "p.yaml:");
	BAD("proxy: {interceptPorts: [0, 70000, x]}\n",
	    "expected an integer from 1 to 65535, found \"0\"",
	    "found \"70000\"", "expected a number, found a string");
	BAD("dns: {upstreams: [dns.google, '1.1.1.1:0', '[::1', '::1:53x']}\n",
	    "upstream \"dns.google\" is not an IP literal",
	    "upstream \"1.1.1.1:0\"", "upstream \"[::1\"",
	    "upstream \"::1:53x\"");
	BAD("dns: {privateAnswers: keep, cname: loose}\n",
	    "unknown privateAnswers \"keep\"", "unknown cname \"loose\"");
	BAD("alwaysDeny:\n  - {action: allow, target: a.com}\n",
	    "alwaysDeny rules can only deny");
	BAD("infra:\n  - {action: deny, target: a.com}\n",
	    "infra rules can only allow");
	BAD("7: x\n", "keys must be strings");
}

static void
test_depth_limit(void **state)
{
	char buf[256];
	size_t i, o = 0;

	(void)state;
	o += (size_t)snprintf(buf + o, sizeof(buf) - o, "egress: ");
	for (i = 0; i < POLICY_DEPTH_MAX + 2; i++)
		buf[o++] = '[';
	for (i = 0; i < POLICY_DEPTH_MAX + 2; i++)
		buf[o++] = ']';
	buf[o] = '\0';
	BAD(buf, "nesting deeper than 16");
}

static void
test_yes_no_are_strings(void **state)
{
	(void)state;
	/* YAML 1.2 core schema: "no" stays a string, so this is an
	 * unknown defaultAction, not the boolean false. */
	BAD("defaultAction: no\n", "unknown defaultAction \"no\"");
}

static char *
write_tmp(const char *content, size_t len)
{
	char *path = strdup("/tmp/egressd-policy-XXXXXX");
	int fd;

	assert_non_null(path);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, len), (ssize_t)len);
	close(fd);
	return path;
}

static void
test_load_file(void **state)
{
	struct policy_diag d;
	struct policy *p;
	char *path;

	(void)state;
	policy_diag_init(&d);
	path = write_tmp(full, strlen(full));
	p = policy_load_file(path, &d);
	assert_non_null(p);
	assert_string_equal(p->source, path);
	assert_string_equal(p->rules[0].loc.file, path);
	policy_unref(p);
	unlink(path);
	free(path);

	/* JSON files go to the JSON reader: its messages, its positions */
	const char *j = "\n  {\"defaultAction\": \"deny\",\n \"egress\": 5}";
	path = write_tmp(j, strlen(j));
	assert_null(policy_load_file(path, &d));
	assert_int_equal(d.n, 1);
	assert_non_null(strstr(d.msgs[0],
	    ":3:12: expected a list, found a "
	    "number"));
	policy_diag_clear(&d);
	unlink(path);
	free(path);

	assert_null(policy_load_file("/nonexistent/egressd.yaml", &d));
	assert_int_equal(d.n, 1);
	assert_non_null(strstr(d.msgs[0], "no such file"));
	policy_diag_clear(&d);
	assert_null(policy_load_file("/tmp", &d));
	assert_non_null(strstr(d.msgs[0], "not a regular file"));
	policy_diag_clear(&d);
}

/* The limit is the caller's (--policy-file-max), checked on the bytes. */
static void
test_file_too_large(void **state)
{
	size_t n = 64 << 10;
	char *big = malloc(n);
	struct policy_diag d;
	struct policy *p;
	char *path;

	(void)state;
	assert_non_null(big);
	memset(big, '#', n);
	path = write_tmp(big, n);
	policy_diag_init(&d);
	assert_null(policy_load_file_max(path, n - 1, &d));
	assert_non_null(strstr(d.msgs[0], "larger than 65535 bytes"));
	policy_diag_clear(&d);
	p = policy_load_file_max(path, n, &d); /* exactly the limit: loads */
	assert_non_null(p);
	policy_unref(p);
	policy_diag_clear(&d);
	unlink(path);
	free(path);
	free(big);
}

/* The rule cap of a file counts every list, before any item is built. */
static void
test_file_rule_cap(void **state)
{
	size_t n = POLICY_FILE_RULES_MAX + 1, cap = 2 * n + 32, o = 0, i;
	char *buf = malloc(cap);
	struct policy_diag d;

	(void)state;
	assert_non_null(buf);
	o += (size_t)snprintf(buf + o, cap - o, "{\"logSkip\":[");
	for (i = 0; i < n; i++) {
		buf[o++] = '0';
		buf[o++] = i + 1 < n ? ',' : ']';
	}
	buf[o++] = '}';
	policy_diag_init(&d);
	assert_null(policy_parse_json(buf, o, "many.json", &d));
	assert_int_equal(d.n, 1);
	assert_non_null(strstr(d.msgs[0], "more than 1000000 rules"));
	policy_diag_clear(&d);
	free(buf);
}

/* A 100000-rule file of realistic names is more than 4 MiB; it loads. */
static void
test_file_100k_rules(void **state)
{
	size_t n = 100000, cap = n * 96 + 64, o = 0, i;
	char *buf = malloc(cap);
	struct policy_diag d;
	struct policy *p;
	char *path;

	(void)state;
	assert_non_null(buf);
	o += (size_t)snprintf(buf + o, cap - o, "egress:\n");
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(buf + o, cap - o,
		    "  - action: ALLOW\n    target: api-%06zu.service.example."
		    "com\n",
		    i);
	assert_true(o > (4u << 20));
	path = write_tmp(buf, o);
	policy_diag_init(&d);
	p = policy_load_file(path, &d);
	if (p == NULL)
		fail_msg("%s", d.n > 0 ? d.msgs[0] : "?");
	assert_int_equal(p->nrules, n);
	assert_int_equal(
	    policy_match_domain(p, "api-099999.service.example.com", NULL),
	    POLICY_ALLOW);
	policy_unref(p);
	policy_diag_clear(&d);
	unlink(path);
	free(path);
	free(buf);
}

static void
test_diag_cap(void **state)
{
	struct policy_diag d;
	char *y = malloc(64 * 1024);
	size_t o = 0, i;

	(void)state;
	assert_non_null(y);
	o += (size_t)snprintf(y, 64 * 1024, "egress:\n");
	for (i = 0; i < 300; i++)
		o += (size_t)snprintf(
		    y + o, 64 * 1024 - o, "  - {target: 'bad%zu..x'}\n", i);
	policy_diag_init(&d);
	assert_null(policy_parse_yaml(y, o, "p.yaml", &d));
	assert_int_equal(d.n, POLICY_DIAG_MAX);
	assert_true(d.truncated);
	struct err e;
	policy_diag_to_err(&d, &e);
	assert_true(strlen(e.msg) < ERR_MSG_MAX);
	policy_diag_clear(&d);
	free(y);
}

/* The complete example of docs/policy.md loads and means what it says. */
static void
test_docs_example(void **state)
{
	const char *src = getenv("EGRESSD_SRCDIR");
	char path[4096], *doc, *start, *end;
	struct policy_diag d;
	struct policy *p;
	FILE *f;
	long n;

	(void)state;
	if (src == NULL)
		skip();
	(void)snprintf(path, sizeof(path), "%s/docs/policy.md", src);
	assert_non_null(f = fopen(path, "r"));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	assert_non_null(doc = calloc(1, (size_t)n + 1));
	assert_int_equal(fread(doc, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	assert_non_null(
	    start = strstr(doc, "```yaml\n# /etc/egressd/policy.yaml"));
	start += strlen("```yaml\n");
	assert_non_null(end = strstr(start, "```"));
	policy_diag_init(&d);
	p = policy_parse_yaml(start, (size_t)(end - start), "policy.md", &d);
	for (size_t i = 0; p == NULL && i < d.n; i++)
		print_error("diag: %s\n", d.msgs[i]);
	assert_non_null(p);
	assert_int_equal(p->nrules, 5);
	assert_int_equal(p->rules[4].action, POLICY_DENY);
	assert_int_equal(
	    policy_match_domain(p, "x.pypi.org", NULL), POLICY_ALLOW);
	assert_int_equal(policy_match_domain(p, "pypi.org", NULL), POLICY_DENY);
	assert_int_equal(p->nbindings, 1);
	assert_int_equal(p->ncredentials, 2);
	assert_true(policy_log_skip(p, "a.telemetry.example.org"));
	policy_unref(p);
	policy_diag_clear(&d);
	free(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full_file),
	    cmocka_unit_test(test_json_and_yaml_same_model),
	    cmocka_unit_test(test_empty_yaml),
	    cmocka_unit_test(test_all_errors_with_positions),
	    cmocka_unit_test(test_duplicates_types_anchors),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_yes_no_are_strings),
	    cmocka_unit_test(test_load_file),
	    cmocka_unit_test(test_file_too_large),
	    cmocka_unit_test(test_file_100k_rules),
	    cmocka_unit_test(test_file_rule_cap),
	    cmocka_unit_test(test_diag_cap),
	    cmocka_unit_test(test_docs_example),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
