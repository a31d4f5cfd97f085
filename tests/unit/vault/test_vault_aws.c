/*
 * vault_aws.c and the awsSigV4 binding (policy_binding_walk.c,
 * policy_aws.c): the schema (three credentials by name, region and
 * service stated or carried by the host, refused at load when neither),
 * the scope of AWS host names, the decision (the sandbox's signature
 * headers removed, a presigned query refused), the signed lines (S3's
 * path rewritten into its canonical form, the query forwarded canonical),
 * and the redactor masking the key id, the secret and the token.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy/policy_aws.h"
#include "ts_policy.h"
#include "vault/vault.h"
#include "vault/vault_sigv4.h"

#define AKID "AKIAREALKEYID0000001"
#define SECRET "realSecretKey/0123456789abcdefghijABCDEFGH"
#define TOKEN "realSessionToken+0123456789abcdefghij=="

static const char *const pol =
    "defaultAction: deny\n"
    "egress:\n"
    "  - {action: allow, target: '*.s3.us-east-1.amazonaws.com'}\n"
    "  - {action: allow, target: s3.us-east-1.amazonaws.com}\n"
    "  - {action: allow, target: bedrock-runtime.us-west-2.amazonaws.com}\n"
    "  - {action: allow, target: minio.example.com}\n"
    "credentials:\n"
    "  - {name: id, source: {type: inline, value: " AKID "}}\n"
    "  - {name: key, source: {type: inline, value: " SECRET "}}\n"
    "  - {name: tok, source: {type: inline, value: '" TOKEN "'}}\n"
    "bindings:\n"
    "  - name: s3\n"
    "    match: {hosts: [s3.us-east-1.amazonaws.com, "
    "'*.s3.us-east-1.amazonaws.com']}\n"
    "    auth: {type: awsSigV4, accessKeyId: id, secretAccessKey: key}\n"
    "  - name: bedrock\n"
    "    auth: {type: awsSigV4, accessKeyId: id, secretAccessKey: key, "
    "sessionToken: tok}\n"
    "    match: {hosts: [bedrock-runtime.us-west-2.amazonaws.com]}\n"
    "  - name: minio\n"
    "    match: {hosts: [minio.example.com]}\n"
    "    auth: {type: awsSigV4, accessKeyId: id, secretAccessKey: key, "
    "region: eu-west-1, service: s3}\n";

static void
t_scope(void **state)
{
	char r[POLICY_AWS_REGION_MAX + 1], s[POLICY_AWS_SERVICE_MAX + 1];
	static const char *const cases[][3] = {
	    {"s3.us-east-1.amazonaws.com", "us-east-1", "s3"},
	    {"bucket.s3.eu-west-3.amazonaws.com", "eu-west-3", "s3"},
	    {"a.b.s3.us-east-2.amazonaws.com", "us-east-2", "s3"},
	    {"s3.dualstack.ap-south-1.amazonaws.com", "ap-south-1", "s3"},
	    {"bucket.s3-us-west-1.amazonaws.com", "us-west-1", "s3"},
	    {"bucket.s3.amazonaws.com", "us-east-1", "s3"},
	    {"s3.amazonaws.com", "us-east-1", "s3"},
	    {"*.s3.us-east-1.amazonaws.com", "us-east-1", "s3"},
	    {"bedrock-runtime.us-east-1.amazonaws.com", "us-east-1", "bedrock"},
	    {"sts.us-gov-west-1.amazonaws.com", "us-gov-west-1", "sts"},
	    {"abc.execute-api.eu-central-1.amazonaws.com", "eu-central-1",
	        "execute-api"},
	    {"email.us-east-1.amazonaws.com", "us-east-1", "ses"},
	};
	static const char *const none[] = {"iam.amazonaws.com", "amazonaws.com",
	    "s3.us-east-1.amazonaws.com.evil.test", "example.com",
	    "x.us-east-1.amazonaws.co", "us-east-1.amazonaws.com",
	    "bucket.s3.useast1.amazonaws.com"};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!policy_aws_scope(cases[i][0], r, s))
			fail_msg("no scope for %s", cases[i][0]);
		assert_string_equal(r, cases[i][1]);
		assert_string_equal(s, cases[i][2]);
	}
	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		if (policy_aws_scope(none[i], r, s))
			fail_msg("a scope for %s: %s/%s", none[i], r, s);
}

/* The policy text with the bindings replaced: the load error, "" when
 * it loaded. */
static void
load_fails(const char *bindings, const char *want)
{
	char text[4096];
	struct policy_diag d;
	struct policy *p;
	struct err e;

	(void)snprintf(text, sizeof(text),
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: api.example.com}\n"
	    "credentials:\n"
	    "  - {name: id, source: {type: inline, value: " AKID "}}\n"
	    "  - {name: key, source: {type: inline, value: " SECRET "}}\n"
	    "bindings:\n%s",
	    bindings);
	err_clear(&e);
	policy_diag_init(&d);
	p = policy_parse_yaml(text, strlen(text), "aws.yaml", &d);
	policy_diag_to_err(&d, &e);
	policy_diag_clear(&d);
	if (p != NULL) {
		policy_unref(p);
		fail_msg("loaded: %s", bindings);
	}
	if (strstr(e.msg, want) == NULL)
		fail_msg("error \"%s\" lacks \"%s\"", e.msg, want);
}

static void
t_schema(void **state)
{
	(void)state;
	load_fails("  - name: a\n    match: {hosts: [api.example.com]}\n"
	           "    auth: {type: awsSigV4, accessKeyId: id, "
	           "secretAccessKey: key}\n",
	    "needs region and service: host \"api.example.com\"");
	load_fails("  - name: a\n    match: {hosts: [api.example.com]}\n"
	           "    auth: {type: awsSigV4, accessKeyId: id, region: "
	           "us-east-1, service: s3}\n",
	    "needs accessKeyId and secretAccessKey");
	load_fails("  - name: a\n    match: {hosts: [api.example.com]}\n"
	           "    auth: {type: bearer, credential: id, region: "
	           "us-east-1}\n",
	    "only awsSigV4 auth takes");
	load_fails("  - name: a\n    match: {hosts: [api.example.com]}\n"
	           "    auth: {type: awsSigV4, accessKeyId: id, "
	           "secretAccessKey: key, region: US-EAST-1, service: s3}\n",
	    "invalid AWS region");
	load_fails("  - name: a\n    match: {hosts: [api.example.com]}\n"
	           "    auth: {type: awsSigV4, accessKeyId: id, "
	           "secretAccessKey: nope, region: us-east-1, service: s3}\n",
	    "nope");
	load_fails("  - name: a\n    match: {hosts: [api.example.com]}\n"
	           "    auth: {type: awsSigV4, accessKeyId: id, "
	           "secretAccessKey: key, region: us-east-1, service: s3,\n"
	           "      substitutions: [{credential: id, placeholder: X, "
	           "in: [header]}]}\n",
	    "takes no substitutions");
}

struct fx {
	struct vault *v;
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct policy *p = ts_policy_yaml(pol, "aws.yaml");
	struct err e;

	assert_non_null(f);
	err_clear(&e);
	if ((f->v = vault_new(p, NULL, &e)) == NULL)
		fail_msg("vault_new: %s", e.msg);
	policy_unref(p);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	vault_free(f->v);
	free(f);
	return 0;
}

static void
decide(struct fx *f, const char *host, const char *method, const char *path,
    const char *query, struct vault_inject *out)
{
	struct vault_req rq = {POLICY_SCHEME_HTTPS, host, 0, method,
	    strlen(method), path, strlen(path), query,
	    query != NULL ? strlen(query) : 0};
	struct err e;

	err_clear(&e);
	if (vault_decide(f->v, &rq, out, &e) != 0)
		fail_msg("vault_decide: %s", e.msg);
}

static bool
removes(const struct vault_inject *vi, const char *name)
{
	size_t i;

	for (i = 0; i < vi->nremove; i++)
		if (strcmp(vi->remove[i], name) == 0)
			return true;
	return false;
}

static void
t_decide(void **state)
{
	struct fx *f = *state;
	struct vault_inject vi;

	decide(f, "bucket.s3.us-east-1.amazonaws.com", "GET", "/k", NULL, &vi);
	assert_int_equal(vi.decision, VAULT_INJECTED);
	assert_true(vi.sign);
	assert_null(vi.lines);
	assert_true(removes(&vi, "authorization"));
	assert_true(removes(&vi, "x-amz-date"));
	assert_true(removes(&vi, "x-amz-security-token"));
	assert_true(removes(&vi, "x-amz-content-sha256"));
	assert_true(vault_aws_is_s3(&vi, "bucket.s3.us-east-1.amazonaws.com"));
	vault_inject_clear(f->v, &vi);
	decide(f, "bucket.s3.us-east-1.amazonaws.com", "GET", "/k",
	    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=FAKE%2F1&"
	    "X-Amz-Signature=00",
	    &vi);
	assert_int_equal(vi.decision, VAULT_REFUSED);
	assert_int_equal(vi.status, 403);
	assert_string_equal(vi.reason, "presigned AWS query refused");
	vault_inject_clear(f->v, &vi);
	decide(f, "bedrock-runtime.us-west-2.amazonaws.com", "POST",
	    "/model/m/invoke", NULL, &vi);
	assert_true(vi.sign);
	assert_false(
	    vault_aws_is_s3(&vi, "bedrock-runtime.us-west-2.amazonaws.com"));
	vault_inject_clear(f->v, &vi);
}

static void
sign(struct fx *f, struct vault_inject *vi, const char *host, const char *query,
    const struct vault_sigv4_hdr *h, size_t nh, const char *body, bool unsig)
{
	struct vault_aws_req rq;
	struct err e;

	memset(&rq, 0, sizeof(rq));
	rq.host = host;
	rq.name = host;
	rq.method = "PUT";
	rq.method_len = 3;
	rq.query = query;
	rq.query_len = query != NULL ? strlen(query) : 0;
	rq.h = h;
	rq.nh = nh;
	rq.body = body;
	rq.blen = body != NULL ? strlen(body) : 0;
	rq.payload = unsig ? VAULT_SIGV4_UNSIGNED : NULL;
	rq.now = 1440938160;
	err_clear(&e);
	if (vault_aws_sign(f->v, vi, &rq, &e) != 0)
		fail_msg("vault_aws_sign: %s", e.msg);
}

static void
t_sign_s3(void **state)
{
	static const struct vault_sigv4_hdr h[] = {
	    {"Content-Type", 12, "text/plain", 10},
	    {"x-amz-meta-a", 12, "b", 1},
	};
	struct fx *f = *state;
	struct vault_inject vi;
	const char *host = "bucket.s3.us-east-1.amazonaws.com";
	char hash[VAULT_SIGV4_HASH_LEN + 1];

	decide(f, host, "PUT", "/my%20key(1)", "b=2&a=%7e", &vi);
	sign(f, &vi, host, "b=2&a=%7e", h, 2, "hello", false);
	assert_int_equal(vi.decision, VAULT_INJECTED);
	assert_non_null(vi.lines);
	/* S3's path forwarded in the form it is signed in */
	assert_string_equal(vi.norm_path, "/my%20key%281%29");
	assert_string_equal(vi.query, "a=~&b=2");
	assert_non_null(strstr(vi.lines,
	    "Authorization: AWS4-HMAC-SHA256 Credential=" AKID
	    "/20150830/us-east-1/s3/aws4_request, SignedHeaders=content-type;"
	    "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a, Signature="));
	assert_non_null(
	    strstr(vi.lines, "\r\nX-Amz-Date: 20150830T123600Z\r\n"));
	vault_sigv4_hash("hello", 5, hash);
	assert_non_null(strstr(vi.lines, hash));
	assert_null(strstr(vi.lines, "X-Amz-Security-Token"));
	assert_null(strstr(vi.lines, SECRET));
	vault_inject_clear(f->v, &vi);
	/* UNSIGNED-PAYLOAD when the caller says so */
	decide(f, host, "PUT", "/k", NULL, &vi);
	sign(f, &vi, host, NULL, NULL, 0, NULL, true);
	assert_non_null(
	    strstr(vi.lines, "X-Amz-Content-Sha256: UNSIGNED-PAYLOAD\r\n"));
	assert_string_equal(vi.query, "");
	vault_inject_clear(f->v, &vi);
}

static void
t_sign_unsigned_trailer(void **state)
{
	struct fx *f = *state;
	struct vault_inject vi;
	struct vault_aws_req rq;
	struct err e;
	const char *host = "bucket.s3.us-east-1.amazonaws.com";

	decide(f, host, "PUT", "/k", NULL, &vi);
	memset(&rq, 0, sizeof(rq));
	rq.host = rq.name = host;
	rq.method = "PUT";
	rq.method_len = 3;
	rq.payload = VAULT_SIGV4_UNSIGNED_TRAILER;
	rq.now = 1440938160;
	assert_int_equal(vault_aws_sign(f->v, &vi, &rq, &e), 0);
	assert_int_equal(vi.decision, VAULT_INJECTED);
	assert_non_null(strstr(vi.lines,
	    "X-Amz-Content-Sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER\r\n"));
	vault_inject_clear(f->v, &vi);
}

static void
t_sign_token_and_stated_scope(void **state)
{
	struct fx *f = *state;
	struct vault_inject vi;

	decide(f, "bedrock-runtime.us-west-2.amazonaws.com", "POST",
	    "/model/a%3A0/invoke", NULL, &vi);
	sign(f, &vi, "bedrock-runtime.us-west-2.amazonaws.com", NULL, NULL, 0,
	    "{}", false);
	assert_non_null(strstr(vi.lines, "/us-west-2/bedrock/aws4_request"));
	assert_non_null(strstr(vi.lines,
	    "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
	    "x-amz-security-token"));
	assert_non_null(
	    strstr(vi.lines, "\r\nX-Amz-Security-Token: " TOKEN "\r\n"));
	/* not S3: the path is forwarded as it is */
	assert_string_equal(vi.norm_path, "/model/a%3A0/invoke");
	vault_inject_clear(f->v, &vi);
	decide(f, "minio.example.com", "GET", "/b/k", NULL, &vi);
	sign(f, &vi, "minio.example.com", NULL, NULL, 0, NULL, false);
	assert_non_null(strstr(vi.lines, "/eu-west-1/s3/aws4_request"));
	vault_inject_clear(f->v, &vi);
}

static void
t_redacts_keys(void **state)
{
	struct fx *f = *state;

	assert_true(vault_redact_any(f->v, SECRET, strlen(SECRET)));
	assert_true(vault_redact_any(f->v, TOKEN, strlen(TOKEN)));
	assert_true(vault_redact_any(f->v, AKID, strlen(AKID)));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_scope),
	    cmocka_unit_test(t_schema),
	    cmocka_unit_test_setup_teardown(t_decide, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_sign_s3, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        t_sign_token_and_stated_scope, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        t_sign_unsigned_trailer, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_redacts_keys, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
