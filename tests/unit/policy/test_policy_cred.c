/*
 * policy_cred.c: credentials and bindings (contract §4): schema, defaults,
 * reserved headers, host and path rules, references, coverage by the
 * policy and ambiguity.
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
#include "policy/policy_binding.h"

#define ALLOW_GH                                                               \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.github.com}\n"                        \
	"  - {action: allow, target: '*.example.com'}\n"                       \
	"credentials:\n"                                                       \
	"  - name: gh\n"                                                       \
	"    source: {type: inline, value: s3cr3t-VALUE}\n"                    \
	"  - name: f\n"                                                        \
	"    source: {type: file, path: /run/secrets/f}\n"

static struct policy *
parse(const char *y, struct policy_diag *d)
{
	policy_diag_init(d);
	return policy_parse_yaml(y, strlen(y), "c.yaml", d);
}

static struct policy *
ok(const char *y)
{
	struct policy_diag d;
	struct policy *p = parse(y, &d);
	size_t i;

	for (i = 0; p == NULL && i < d.n; i++)
		print_error("diag: %s\n", d.msgs[i]);
	policy_diag_clear(&d);
	assert_non_null(p);
	return p;
}

static void
bad(const char *y, const char *needle)
{
	struct policy_diag d;
	size_t i;

	assert_null(parse(y, &d));
	for (i = 0; i < d.n; i++) {
		/* no message ever carries the secret */
		assert_null(strstr(d.msgs[i], "s3cr3t"));
		if (strstr(d.msgs[i], needle) != NULL)
			break;
	}
	if (i == d.n) {
		for (i = 0; i < d.n; i++)
			print_error("diag: %s\n", d.msgs[i]);
		fail_msg("missing \"%s\"", needle);
	}
	policy_diag_clear(&d);
}

static int
sink(void *arg, const uint8_t *v, size_t n)
{
	char *out = arg;

	memcpy(out, v, n);
	out[n] = '\0';
	return 0;
}

static void
test_credentials(void **state)
{
	struct policy *p = ok(ALLOW_GH);
	char got[64];

	(void)state;
	assert_int_equal(p->ncredentials, 2);
	assert_string_equal(policy_credential_name(p->credentials[0]), "gh");
	assert_int_equal(
	    policy_credential_source(p->credentials[0]), POLICY_CRED_INLINE);
	assert_int_equal(
	    policy_credential_export(p->credentials[0], sink, got), 0);
	assert_string_equal(got, "s3cr3t-VALUE");
	assert_int_equal(
	    policy_credential_source(p->credentials[1]), POLICY_CRED_FILE);
	assert_string_equal(
	    policy_credential_path(p->credentials[1]), "/run/secrets/f");
	assert_int_equal(
	    policy_credential_export(p->credentials[1], sink, got), -1);
	policy_unref(p);
}

static void
test_credential_errors(void **state)
{
	(void)state;
	bad("credentials:\n  - {name: a, source: {type: vault, value: x}}\n",
	    "unknown source type \"vault\"");
	bad("credentials:\n  - {name: a, source: {type: inline}}\n",
	    "inline source needs value");
	bad("credentials:\n  - {name: a, source: {type: file, value: "
	    "s3cr3t}}\n",
	    "file source needs path");
	bad("credentials:\n  - {name: 'a b', source: {type: inline, value: "
	    "x}}\n",
	    "name must be 1 to 64");
	bad("credentials:\n  - {name: a, source: {type: inline, value: "
	    "\"s3cr3t\\nx\"}}\n",
	    "credential value contains CR or LF");
	bad("credentials:\n  - {name: a, source: {type: inline, value: x}}\n"
	    "  - {name: a, source: {type: inline, value: y}}\n",
	    "c.yaml:3:5: duplicate credential \"a\"");
	bad("credentials:\n  - {name: a}\n",
	    "credential needs name and source");
	bad("credentials:\n  - {name: a, source: {type: inline, value: 5}}\n",
	    "credential value must be a string");
}

static void
test_binding_defaults_and_accessors(void **state)
{
	struct policy *p =
	    ok(ALLOW_GH "bindings:\n"
	                "  - name: gh-api\n"
	                "    match: {hosts: [api.github.com]}\n"
	                "    auth: {type: bearer, credential: gh}\n");

	(void)state;
	assert_int_equal(p->nbindings, 1);
	assert_string_equal(policy_binding_name(p->bindings[0]), "gh-api");
	assert_int_equal(
	    policy_binding_auth(p->bindings[0]), POLICY_AUTH_BEARER);
	assert_int_equal(policy_check_bindings(p, NULL), 0);
	policy_unref(p);
}

static void
test_binding_auth_shapes(void **state)
{
	struct policy *p;

	(void)state;
	p = ok(ALLOW_GH
	    "bindings:\n"
	    "  - name: k\n"
	    "    match: {hosts: [api.github.com], paths: ['/v1/*']}\n"
	    "    auth: {type: apiKey, name: X-Api-Key, credential: gh}\n"
	    "  - name: c\n"
	    "    match: {hosts: [api.github.com], paths: ['/v2']}\n"
	    "    auth:\n"
	    "      type: customHeaders\n"
	    "      headers: [{name: X-A, credential: gh}, {name: X-B, "
	    "credential: f}]\n"
	    "  - name: p\n"
	    "    match: {hosts: ['*.example.com']}\n"
	    "    auth:\n"
	    "      type: passthrough\n"
	    "      substitutions:\n"
	    "        - {credential: gh, placeholder: PLACEHOLDER_GH, in: "
	    "[header, body]}\n");
	assert_int_equal(p->nbindings, 3);
	assert_int_equal(
	    policy_binding_auth(p->bindings[2]), POLICY_AUTH_PASSTHROUGH);
	policy_unref(p);

	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: bearer}\n",
	    "auth needs credential");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: apiKey, credential: "
	             "gh}\n",
	    "apiKey auth needs name");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: passthrough, "
	             "credential: gh}\n",
	    "this auth type takes no credential");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: customHeaders}\n",
	    "customHeaders auth needs headers");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: oauth}\n",
	    "unknown auth type \"oauth\"");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: apiKey, name: "
	             "Content-Type, credential: gh}\n",
	    "header \"Content-Type\" is reserved");
	bad(ALLOW_GH
	    "bindings:\n  - name: x\n    match: {hosts: "
	    "[api.github.com]}\n    auth: {type: customHeaders, headers: "
	    "[{name: x-forwarded-for, credential: gh}]}\n",
	    "header \"x-forwarded-for\" is reserved");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: apiKey, name: 'a b', "
	             "credential: gh}\n",
	    "invalid header name");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: bearer, credential: "
	             "nope}\n",
	    "binding \"x\" references unknown credential \"nope\"");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: passthrough, "
	             "substitutions: [{credential: gh, placeholder: P, in: "
	             "[cookie]}]}\n",
	    "unknown surface \"cookie\"");
}

static void
test_binding_match_rules(void **state)
{
	(void)state;
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: [10.0.0.1]}\n"
	             "    auth: {type: bearer, credential: gh}\n",
	    "binding hosts are names, not addresses");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[API.github.com]}\n    auth: {type: bearer, credential: "
	             "gh}\n",
	    "must be written \"api.github.com\"");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: [localhost]}\n"
	             "    auth: {type: bearer, credential: gh}\n",
	    "needs a dot");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "['api.github.com:443']}\n    auth: {type: bearer, "
	             "credential: gh}\n",
	    "invalid host");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "['https://api.github.com/']}\n    auth: {type: bearer, "
	             "credential: gh}\n",
	    "invalid host");
	bad(ALLOW_GH
	    "bindings:\n  - name: x\n    match: {hosts: "
	    "[api.github.com], paths: ['v1']}\n    auth: {type: bearer, "
	    "credential: gh}\n",
	    "path must start with '/'");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com], paths: ['/a*/b']}\n    auth: {type: "
	             "bearer, credential: gh}\n",
	    "'*' only at the end");
	bad(ALLOW_GH
	    "bindings:\n  - name: x\n    match: {hosts: "
	    "[api.github.com], ports: [8443]}\n    auth: {type: bearer, "
	    "credential: gh}\n",
	    "port 8443 does not follow the scheme");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com], schemes: [ftp]}\n    auth: {type: "
	             "bearer, credential: gh}\n",
	    "unknown scheme \"ftp\"");
	bad(ALLOW_GH
	    "bindings:\n  - name: x\n    match: {hosts: "
	    "[api.github.com], methods: [get]}\n    auth: {type: bearer, "
	    "credential: gh}\n",
	    "unknown method \"get\"");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {paths: ['/']}\n"
	             "    auth: {type: bearer, credential: gh}\n",
	    "match needs hosts");
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: []}\n"
	             "    auth: {type: bearer, credential: gh}\n",
	    "hosts must list 1 to 64 entries");
	/* ports that follow the scheme are accepted (deprecated) */
	struct policy *p =
	    ok(ALLOW_GH "bindings:\n  - name: x\n    match: "
	                "{hosts: [api.github.com], ports: [443]}\n"
	                "    auth: {type: bearer, credential: gh}\n");
	policy_unref(p);
}

static void
test_coverage(void **state)
{
	struct policy *p;
	struct err e;

	(void)state;
	/* default allow does not count */
	bad("defaultAction: allow\n"
	    "credentials: [{name: gh, source: {type: inline, value: s3cr3t}}]\n"
	    "bindings:\n  - name: x\n    match: {hosts: [api.github.com]}\n"
	    "    auth: {type: bearer, credential: gh}\n",
	    "c.yaml:4:5: binding host \"api.github.com\" is not covered by an "
	    "explicit allow rule");
	/* an always-deny overlay uncovers an allowed host */
	bad(ALLOW_GH "alwaysDeny: [api.github.com]\n"
	             "bindings:\n  - name: x\n    match: {hosts: "
	             "[api.github.com]}\n    auth: {type: bearer, credential: "
	             "gh}\n",
	    "not covered");
	/* a wildcard host needs a wildcard allow for the whole suffix */
	bad(ALLOW_GH "bindings:\n  - name: x\n    match: {hosts: "
	             "['*.github.com']}\n    auth: {type: bearer, credential: "
	             "gh}\n",
	    "binding host \"*.github.com\" is not covered by an explicit "
	    "wildcard allow rule");
	bad("egress:\n  - {action: deny, target: secret.example.com}\n"
	    "  - {action: allow, target: '*.example.com'}\n"
	    "credentials: [{name: gh, source: {type: inline, value: s3cr3t}}]\n"
	    "bindings:\n  - name: x\n    match: {hosts: ['*.example.com']}\n"
	    "    auth: {type: bearer, credential: gh}\n",
	    "partly denied by \"secret.example.com\"");
	p = ok(ALLOW_GH
	    "bindings:\n  - name: x\n    match: {hosts: "
	    "['*.api.example.com', www.example.com]}\n    auth: {type: "
	    "bearer, credential: gh}\n");
	assert_true(policy_host_covered(p, "*.example.com", &e));
	assert_true(policy_host_covered(p, "a.example.com", &e));
	assert_false(policy_host_covered(p, "example.com", &e));
	assert_false(policy_host_covered(p, "*.github.com", &e));
	policy_unref(p);
}

static void
test_ambiguity(void **state)
{
	(void)state;
	bad(ALLOW_GH "bindings:\n"
	             "  - {name: a, match: {hosts: [api.github.com]}, auth: "
	             "{type: bearer, credential: gh}}\n"
	             "  - {name: b, match: {hosts: [api.github.com], paths: "
	             "['/repos/*']}, auth: {type: bearer, credential: f}}\n",
	    "bindings \"a\" and \"b\" can match the same request");
	bad(ALLOW_GH "bindings:\n"
	             "  - {name: a, match: {hosts: ['*.example.com']}, auth: "
	             "{type: bearer, credential: gh}}\n"
	             "  - {name: b, match: {hosts: ['*.x.example.com']}, auth: "
	             "{type: bearer, credential: f}}\n",
	    "bindings \"a\" and \"b\" can match the same request");
	bad(ALLOW_GH "bindings:\n"
	             "  - {name: a, match: {hosts: [api.github.com]}, auth: "
	             "{type: bearer, credential: gh}}\n"
	             "  - {name: a, match: {hosts: [api.github.com], methods: "
	             "[HEAD]}, auth: {type: bearer, credential: gh}}\n",
	    "duplicate binding \"a\"");
	/* disjoint by path, method, scheme, or exact-vs-wildcard: fine */
	struct policy *p = ok(
	    ALLOW_GH "bindings:\n"
	             "  - {name: a, match: {hosts: [api.github.com], paths: "
	             "['/v1/*']}, auth: {type: bearer, credential: gh}}\n"
	             "  - {name: b, match: {hosts: [api.github.com], paths: "
	             "['/v2/*']}, auth: {type: bearer, credential: gh}}\n"
	             "  - {name: c, match: {hosts: [api.github.com], paths: "
	             "['/v1/*'], methods: [HEAD]}, auth: {type: bearer, "
	             "credential: gh}}\n"
	             "  - {name: d, match: {hosts: ['*.example.com']}, auth: "
	             "{type: bearer, credential: gh}}\n"
	             "  - {name: e, match: {hosts: [www.example.com]}, auth: "
	             "{type: bearer, credential: gh}}\n");
	assert_int_equal(p->nbindings, 5);
	assert_false(policy_bindings_overlap(p->bindings[0], p->bindings[1]));
	assert_false(policy_bindings_overlap(p->bindings[3], p->bindings[4]));
	policy_unref(p);
}

static void
test_mutation_check(void **state)
{
	struct policy *p = ok(ALLOW_GH
	                  "bindings:\n  - name: x\n    match: "
	                  "{hosts: [api.github.com]}\n    auth: {type: "
	                  "bearer, credential: gh}\n"),
	              *q;
	const char *del = "[\"api.github.com\"]";
	size_t matched;
	struct err e;

	(void)state;
	q = policy_delete_json(p, del, strlen(del), &matched, &e);
	assert_non_null(q);
	/* the bindings travel with the operator configuration */
	assert_int_equal(q->nbindings, 1);
	assert_int_equal(policy_check_bindings(q, &e), -1);
	assert_string_equal(e.msg,
	    "binding host \"api.github.com\" is not "
	    "covered by an explicit allow rule");
	assert_int_equal(policy_check_bindings(p, &e), 0);
	policy_unref(q);
	policy_unref(p);
}

/* An awsSigV4 binding written back (policy_to_yaml: the file egressd
 * rewrites after /policy changes) loads again with the same fields. */
static void
test_aws_sigv4_round_trip(void **state)
{
	static const char y[] =
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: minio.example.com}\n"
	    "credentials:\n"
	    "  - {name: id, source: {type: inline, value: AKIDVALUE}}\n"
	    "  - {name: key, source: {type: inline, value: SECRETVALUE}}\n"
	    "  - {name: tok, source: {type: inline, value: TOKENVALUE}}\n"
	    "bindings:\n"
	    "  - name: m\n"
	    "    match: {hosts: [minio.example.com]}\n"
	    "    auth: {type: awsSigV4, accessKeyId: id, secretAccessKey: "
	    "key,\n"
	    "           sessionToken: tok, region: us-east-2, service: s3}\n";
	struct policy_binding_aws a;
	struct policy_diag d;
	struct policy *p, *q;
	char *out;

	(void)state;
	policy_diag_init(&d);
	p = policy_parse_yaml(y, strlen(y), "aws.yaml", &d);
	assert_non_null(p);
	assert_non_null(out = policy_to_yaml(p));
	q = policy_parse_yaml(out, strlen(out), "again.yaml", &d);
	policy_diag_clear(&d);
	assert_non_null(q);
	assert_true(policy_binding_aws(q->bindings[0], &a));
	assert_string_equal(a.access_key_id, "id");
	assert_string_equal(a.secret_access_key, "key");
	assert_string_equal(a.session_token, "tok");
	assert_string_equal(a.region, "us-east-2");
	assert_string_equal(a.service, "s3");
	assert_string_equal(
	    policy_auth_type_name(policy_binding_auth(q->bindings[0])),
	    "awsSigV4");
	free(out);
	policy_unref(q);
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_credentials),
	    cmocka_unit_test(test_credential_errors),
	    cmocka_unit_test(test_binding_defaults_and_accessors),
	    cmocka_unit_test(test_binding_auth_shapes),
	    cmocka_unit_test(test_binding_match_rules),
	    cmocka_unit_test(test_coverage),
	    cmocka_unit_test(test_ambiguity),
	    cmocka_unit_test(test_mutation_check),
	    cmocka_unit_test(test_aws_sigv4_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
