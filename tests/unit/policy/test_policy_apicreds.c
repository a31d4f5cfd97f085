/*
 * policy_apicreds.c: the API's Credential Vault as a snapshot layer
 * (contract §4): create, patch (delete → replace → add, all or nothing,
 * revisions), delete, the layers kept apart from the operator's file,
 * validation against the policy, carrying across /policy mutations,
 * overlays and reloads, and the YAML writer leaving the vault out.
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
#include "policy/policy_apicreds.h"

#define BASE_YAML                                                              \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.example.com}\n"                       \
	"  - {action: allow, target: '*.example.org'}\n"                       \
	"  - {action: allow, target: op.example.net}\n"                        \
	"credentials:\n"                                                       \
	"  - name: opcred\n"                                                   \
	"    source: {type: file, path: /run/secrets/op}\n"                    \
	"bindings:\n"                                                          \
	"  - name: opbind\n"                                                   \
	"    match: {hosts: [op.example.net]}\n"                               \
	"    auth: {type: bearer, credential: opcred}\n"

#define CREATE                                                                 \
	"{\"credentials\":[{\"name\":\"k1\",\"source\":{\"type\":\"inline\","  \
	"\"value\":\"SECRET-one\"}},{\"name\":\"a0\",\"source\":{\"value\":"   \
	"\"SECRET-two\"}}],"                                                   \
	"\"bindings\":[{\"name\":\"b1\",\"match\":{\"hosts\":["                \
	"\"api.example.com\"],\"paths\":[\"/v1/*\"]},\"auth\":{\"type\":"      \
	"\"bearer\",\"credential\":\"k1\"}}]}"

static struct policy *
base(void)
{
	struct policy_diag d;
	struct policy *p;

	policy_diag_init(&d);
	p = policy_parse_yaml(BASE_YAML, strlen(BASE_YAML), "b.yaml", &d);
	policy_diag_clear(&d);
	assert_non_null(p);
	return p;
}

static struct policy *
create(const struct policy *b, const char *body)
{
	enum policy_apicreds_status st = POLICY_APICREDS_NOMEM;
	struct err e;
	struct policy *p =
	    policy_apicreds_create_json(b, body, strlen(body), &st, &e);

	if (p == NULL)
		print_error("create: %s\n", e.msg);
	assert_non_null(p);
	assert_int_equal(st, POLICY_APICREDS_OK);
	return p;
}

/* A mutation that must fail with st; returns e's message (static). */
static const char *
patch_fails(
    const struct policy *p, const char *body, enum policy_apicreds_status want)
{
	static struct err e;
	enum policy_apicreds_status st = POLICY_APICREDS_OK;

	assert_null(policy_apicreds_patch_json(p, body, strlen(body), &st, &e));
	if (st != want)
		print_error("status %d, want %d: %s\n", st, want, e.msg);
	assert_int_equal(st, want);
	assert_null(strstr(e.msg, "SECRET"));
	return e.msg;
}

static struct policy *
patch(const struct policy *p, const char *body)
{
	enum policy_apicreds_status st = POLICY_APICREDS_NOMEM;
	struct err e;
	struct policy *n =
	    policy_apicreds_patch_json(p, body, strlen(body), &st, &e);

	if (n == NULL)
		print_error("patch: %s\n", e.msg);
	assert_non_null(n);
	return n;
}

static const char *
cred_at(const struct policy *p, size_t i, uint64_t *rev)
{
	return policy_credential_name(policy_apicreds_credential(p, i, rev));
}

static void
test_create_get(void **state)
{
	struct policy *b = base(), *p;
	const struct policy_binding *bd;
	uint64_t rev = 0;

	(void)state;
	assert_false(policy_apicreds_exists(b));
	assert_int_equal(policy_apicreds_revision(b), 0);
	p = create(b, CREATE);
	assert_true(policy_apicreds_exists(p));
	assert_int_equal(policy_apicreds_revision(p), 1);
	assert_int_equal(p->revision, b->revision + 1);
	/* sorted by name, revision 1 each */
	assert_int_equal(policy_apicreds_ncredentials(p), 2);
	assert_string_equal(cred_at(p, 0, &rev), "a0");
	assert_int_equal(rev, 1);
	assert_string_equal(cred_at(p, 1, &rev), "k1");
	assert_int_equal(
	    policy_credential_source(policy_apicreds_credential(p, 1, NULL)),
	    POLICY_CRED_INLINE);
	assert_int_equal(policy_apicreds_nbindings(p), 1);
	bd = policy_apicreds_binding(p, 0, &rev);
	assert_string_equal(policy_binding_name(bd), "b1");
	assert_int_equal(rev, 1);
	/* the snapshot lists both layers, the operator's first */
	assert_int_equal(p->ncredentials, 3);
	assert_int_equal(p->nbindings, 2);
	assert_string_equal(policy_binding_name(p->bindings[0]), "opbind");
	assert_string_equal(policy_binding_name(p->bindings[1]), "b1");
	assert_null(policy_apicreds_credential(p, 2, NULL));
	assert_null(policy_apicreds_binding(p, 1, NULL));
	/* a second create: 409 */
	{
		enum policy_apicreds_status st = POLICY_APICREDS_OK;
		struct err e;
		assert_null(policy_apicreds_create_json(
		    p, CREATE, strlen(CREATE), &st, &e));
		assert_int_equal(st, POLICY_APICREDS_EXISTS);
		assert_string_equal(e.msg, "credential vault already exists");
	}
	/* an empty create is a vault too */
	{
		struct policy *q = create(b, "{}");
		assert_true(policy_apicreds_exists(q));
		assert_int_equal(policy_apicreds_ncredentials(q), 0);
		policy_unref(q);
	}
	policy_unref(p);
	policy_unref(b);
}

static void
test_create_refused(void **state)
{
	struct policy *b = base();
	static const struct {
		const char *body, *needle;
		enum policy_apicreds_status st;
	} cases[] = {
	    {"", "empty body", POLICY_APICREDS_BAD_BODY},
	    {"{", "body:", POLICY_APICREDS_BAD_BODY},
	    {"[]", "", POLICY_APICREDS_BAD_BODY},
	    {"{\"credentials\":[],\"extra\":1}", "extra",
	        POLICY_APICREDS_BAD_BODY},
	    {"{\"credentials\":[{\"name\":\"x\",\"source\":{\"type\":\"file\","
	     "\"path\":\"/etc/shadow\"}}]}",
	        "operator's policy file", POLICY_APICREDS_BAD_BODY},
	    {"{\"credentials\":[{\"name\":\"x\",\"source\":{\"value\":"
	     "\"SECRET\\r\\nX\"}}]}",
	        "CR or LF", POLICY_APICREDS_BAD_BODY},
	    {"{\"credentials\":[{\"name\":\"x\",\"source\":{\"value\":\"S"
	     "ECRET\"},\"color\":1}]}",
	        "color", POLICY_APICREDS_BAD_BODY},
	    /* an operator's name, or its credential from an API binding */
	    {"{\"credentials\":[{\"name\":\"opcred\",\"source\":{\"value\":"
	     "\"SECRET\"}}]}",
	        "defined by the operator", POLICY_APICREDS_REJECTED},
	    {"{\"bindings\":[{\"name\":\"steal\",\"match\":{\"hosts\":["
	     "\"api.example.com\"]},\"auth\":{\"type\":\"bearer\","
	     "\"credential\":\"opcred\"}}]}",
	        "unknown credential \"opcred\"", POLICY_APICREDS_REJECTED},
	    /* not covered by an explicit allow */
	    {"{\"credentials\":[{\"name\":\"x\",\"source\":{\"value\":\"SECR"
	     "ET\"}}],\"bindings\":[{\"name\":\"c\",\"match\":{\"hosts\":["
	     "\"evil.example.net\"]},\"auth\":{\"type\":\"bearer\","
	     "\"credential\":\"x\"}}]}",
	        "not covered", POLICY_APICREDS_REJECTED},
	    /* the same request as the operator's binding */
	    {"{\"credentials\":[{\"name\":\"x\",\"source\":{\"value\":\"SECR"
	     "ET\"}}],\"bindings\":[{\"name\":\"c\",\"match\":{\"hosts\":["
	     "\"op.example.net\"]},\"auth\":{\"type\":\"bearer\","
	     "\"credential\":\"x\"}}]}",
	        "can match the same request", POLICY_APICREDS_REJECTED},
	    {"{\"credentials\":[{\"name\":\"x\",\"source\":{\"value\":\"S\"}},"
	     "{\"name\":\"x\",\"source\":{\"value\":\"T\"}}]}",
	        "duplicate credential", POLICY_APICREDS_BAD_BODY},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum policy_apicreds_status st = POLICY_APICREDS_OK;
		struct err e;
		struct policy *p = policy_apicreds_create_json(
		    b, cases[i].body, strlen(cases[i].body), &st, &e);
		if (p != NULL || st != cases[i].st ||
		    strstr(e.msg, cases[i].needle) == NULL)
			print_error("case %zu: st %d: %s\n", i, st, e.msg);
		assert_null(p);
		assert_int_equal(st, cases[i].st);
		assert_non_null(strstr(e.msg, cases[i].needle));
		assert_null(strstr(e.msg, "SECRET"));
	}
	policy_unref(b);
}

static void
test_patch(void **state)
{
	struct policy *b = base(), *p1, *p2, *p3, *p4;
	uint64_t rev;

	(void)state;
	p1 = create(b, CREATE);
	/* an empty PATCH still moves the revision */
	p2 = patch(p1, "{}");
	assert_int_equal(policy_apicreds_revision(p2), 2);
	assert_string_equal(cred_at(p2, 1, &rev), "k1");
	assert_int_equal(rev, 1);
	/* stale expectedRevision */
	assert_string_equal(patch_fails(p2, "{\"expectedRevision\":1}",
	                        POLICY_APICREDS_CONFLICT),
	    "expectedRevision 1 does not match current revision 2");
	/* delete → replace → add in one, with the right revision */
	p3 = patch(p2,
	    "{\"expectedRevision\":2,\"credentials\":{\"delete\":[\"a0\"],"
	    "\"replace\":[{\"name\":\"k1\",\"source\":{\"value\":\"SECRET-"
	    "new\"}}],\"add\":[{\"name\":\"a0\",\"source\":{\"value\":\"SE"
	    "CRET-a\"}},{\"name\":\"z\",\"source\":{\"value\":\"SECRET-z\"}}"
	    "]},\"bindings\":{\"add\":[{\"name\":\"b2\",\"match\":{\"hosts\":"
	    "[\"*.example.org\"]},\"auth\":{\"type\":\"apiKey\",\"name\":\"X"
	    "-Key\",\"credential\":\"z\"}}]}}");
	assert_int_equal(policy_apicreds_revision(p3), 3);
	assert_int_equal(policy_apicreds_ncredentials(p3), 3);
	assert_string_equal(cred_at(p3, 0, &rev), "a0");
	assert_int_equal(rev, 3);
	assert_string_equal(cred_at(p3, 1, &rev), "k1");
	assert_int_equal(rev, 3);
	assert_string_equal(cred_at(p3, 2, &rev), "z");
	assert_int_equal(policy_apicreds_nbindings(p3), 2);
	assert_string_equal(
	    policy_binding_name(policy_apicreds_binding(p3, 0, &rev)), "b1");
	assert_int_equal(rev, 1);
	/* all or nothing: each failure leaves p3 as it is */
	assert_string_equal(
	    patch_fails(p3, "{\"credentials\":{\"delete\":[\"nope\"]}}",
	        POLICY_APICREDS_MISSING),
	    "credential \"nope\" not found");
	assert_string_equal(
	    patch_fails(p3,
	        "{\"credentials\":{\"delete\":[\"k1\"],\"replace\":[{\"name\":"
	        "\"k1\",\"source\":{\"value\":\"SECRET\"}}]}}",
	        POLICY_APICREDS_MISSING),
	    "credential \"k1\" not found");
	assert_string_equal(
	    patch_fails(p3,
	        "{\"credentials\":{\"add\":[{\"name\":\"z\",\"source\":{"
	        "\"value\":\"SECRET\"}}]}}",
	        POLICY_APICREDS_CONFLICT),
	    "credential \"z\" already exists");
	/* deleting a credential a binding still uses */
	assert_non_null(
	    strstr(patch_fails(p3, "{\"credentials\":{\"delete\":[\"k1\"]}}",
	               POLICY_APICREDS_REJECTED),
	        "unknown credential \"k1\""));
	assert_non_null(strstr(patch_fails(p3, "{\"bindings\":{\"x\":[]}}",
	                           POLICY_APICREDS_BAD_BODY),
	    "\"x\""));
	assert_int_equal(policy_apicreds_revision(p3), 3);
	/* both gone in one step */
	p4 = patch(p3,
	    "{\"bindings\":{\"delete\":[\"b1\"]},\"credentials\":{\"delete\":"
	    "[\"k1\"]}}");
	assert_int_equal(policy_apicreds_ncredentials(p4), 2);
	assert_int_equal(policy_apicreds_nbindings(p4), 1);
	assert_int_equal(p4->nbindings, 2);
	policy_unref(p4);
	policy_unref(p3);
	policy_unref(p2);
	policy_unref(p1);
	policy_unref(b);
}

static void
test_delete_and_none(void **state)
{
	struct policy *b = base(), *p, *q;
	enum policy_apicreds_status st;
	struct err e;

	(void)state;
	assert_null(policy_apicreds_patch_json(b, "{}", 2, &st, &e));
	assert_int_equal(st, POLICY_APICREDS_NONE);
	assert_string_equal(e.msg, "credential vault not found");
	assert_null(policy_apicreds_delete(b, &st, &e));
	assert_int_equal(st, POLICY_APICREDS_NONE);
	p = create(b, CREATE);
	q = policy_apicreds_delete(p, &st, &e);
	assert_non_null(q);
	assert_false(policy_apicreds_exists(q));
	assert_int_equal(policy_apicreds_revision(q), 0);
	assert_int_equal(q->nbindings, 1); /* the operator's stays */
	assert_int_equal(q->ncredentials, 1);
	policy_unref(p);
	/* created again: revision 1 */
	p = create(q, CREATE);
	assert_int_equal(policy_apicreds_revision(p), 1);
	policy_unref(p);
	policy_unref(q);
	policy_unref(b);
}

static void
test_carried(void **state)
{
	struct policy *b = base(), *p, *m, *r, *c;
	struct policy_diag d;
	bool over = false;
	struct err e;
	char *yaml;
	const char *narrow = "{\"defaultAction\":\"deny\",\"egress\":[{"
	                     "\"action\":\"allow\",\"target\":\"op.example."
	                     "net\"}]}";

	(void)state;
	p = create(b, CREATE);
	/* a /policy mutation keeps the vault */
	{
		const char *more =
		    "[{\"action\":\"allow\",\"target\":\"x.example."
		    "com\"}]";

		m = policy_patch_json(p, more, strlen(more), 0, &over, &e);
	}
	assert_non_null(m);
	assert_int_equal(policy_apicreds_revision(m), 1);
	assert_int_equal(m->nbindings, 2);
	/* and a replace that uncovers b1 is refused by the check */
	r = policy_replace_json(p, narrow, strlen(narrow), 0, &over, &e);
	assert_non_null(r);
	assert_int_equal(policy_check_bindings(r, &e), -1);
	assert_non_null(strstr(e.msg, "api.example.com"));
	policy_unref(r);
	/* the YAML writer leaves the vault out */
	yaml = policy_to_yaml(m);
	assert_non_null(yaml);
	assert_non_null(strstr(yaml, "opbind"));
	assert_null(strstr(yaml, "b1"));
	assert_null(strstr(yaml, "k1"));
	assert_null(strstr(yaml, "SECRET"));
	free(yaml);
	/* a reloaded file gets the vault; a file that uncovers it does not
	 * load */
	policy_diag_init(&d);
	r = policy_parse_yaml(BASE_YAML, strlen(BASE_YAML), "b.yaml", &d);
	assert_non_null(r);
	c = policy_apicreds_carry(r, p, &e);
	assert_non_null(c);
	assert_int_equal(policy_apicreds_revision(c), 1);
	assert_int_equal(c->revision, r->revision);
	policy_unref(c);
	policy_unref(r);
	r = policy_parse_json(narrow, strlen(narrow), "n.json", &d);
	assert_non_null(r);
	assert_null(policy_apicreds_carry(r, p, &e));
	assert_non_null(strstr(e.msg, "not covered"));
	c = policy_apicreds_carry(r, b, &e); /* no vault: r itself */
	assert_ptr_equal(c, r);
	policy_unref(c);
	policy_unref(r);
	policy_diag_clear(&d);
	policy_unref(m);
	policy_unref(p);
	policy_unref(b);
}

/* awsSigV4 over the API: the same schema as the file (issue 38): three
 * credentials by name; a host that carries no scope needs it stated. */
static void
test_aws_sigv4(void **state)
{
	struct policy *b = base(), *p, *q;
	struct policy_binding_aws a;
	const char *msg;

	(void)state;
	p = create(b,
	    "{\"credentials\":[{\"name\":\"id\",\"source\":{\"value\":"
	    "\"SECRET-id\"}},{\"name\":\"key\",\"source\":{\"value\":"
	    "\"SECRET-key\"}}],\"bindings\":[{\"name\":\"s3\",\"match\":"
	    "{\"hosts\":[\"api.example.com\"]},\"auth\":{\"type\":"
	    "\"awsSigV4\",\"accessKeyId\":\"id\",\"secretAccessKey\":"
	    "\"key\",\"region\":\"eu-west-1\",\"service\":\"s3\"}}]}");
	assert_true(
	    policy_binding_aws(policy_apicreds_binding(p, 0, NULL), &a));
	assert_string_equal(a.access_key_id, "id");
	assert_string_equal(a.secret_access_key, "key");
	assert_null(a.session_token);
	assert_string_equal(a.region, "eu-west-1");
	assert_string_equal(a.service, "s3");
	msg = patch_fails(p,
	    "{\"bindings\":{\"add\":[{\"name\":\"x\",\"match\":{"
	    "\"hosts\":[\"api.example.com\"],\"paths\":[\"/x\"]},"
	    "\"auth\":{\"type\":\"awsSigV4\",\"accessKeyId\":\"id\","
	    "\"secretAccessKey\":\"key\"}}]}}",
	    POLICY_APICREDS_BAD_BODY);
	assert_non_null(strstr(msg, "needs region and service"));
	q = patch(p, "{\"bindings\":{\"delete\":[\"s3\"]}}");
	policy_unref(q);
	policy_unref(p);
	policy_unref(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_get),
	    cmocka_unit_test(test_create_refused),
	    cmocka_unit_test(test_patch),
	    cmocka_unit_test(test_delete_and_none),
	    cmocka_unit_test(test_carried),
	    cmocka_unit_test(test_aws_sigv4),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
