/*
 * vault_subst.c: placeholder substitutions on each surface with its
 * encoding, only on the surfaces a substitution lists and only for the
 * binding that matched, several occurrences and placeholders, CR/LF/NUL
 * refusal in header values, the body bound and the growth bound, the
 * body types left alone, and the redactor masking every substituted form.
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

#include "ts_policy.h"
#include "vault/vault.h"

/*
 * Values: k holds every byte class an encoding treats specially (slash,
 * space, plus, tilde, quote, backslash, tab, ampersand, equals, non-ASCII);
 * p is plain. YAML double quotes: \t is a tab, \" a quote, \\ a backslash.
 */
#define VAL_K "a/b c+d~e\"f\\g\th&i=j\xc3\xa9"
static const char *const pol =
    "defaultAction: deny\n"
    "egress:\n"
    "  - {action: allow, target: api.example.com}\n"
    "  - {action: allow, target: other.example.com}\n"
    "  - {action: allow, target: pass.example.org}\n"
    "credentials:\n"
    "  - {name: k, source: {type: inline, value: \"a/b c+d~e\\\"f\\\\g\\th&"
    "i=j\xc3\xa9\"}}\n"
    "  - {name: p, source: {type: inline, value: plain-P}}\n"
    "  - {name: o, source: {type: inline, value: other-O}}\n"
    "bindings:\n"
    "  - name: api\n"
    "    match: {hosts: [api.example.com]}\n"
    "    auth:\n"
    "      type: bearer\n"
    "      credential: p\n"
    "      substitutions:\n"
    "        - {credential: k, placeholder: PH_K, in: [path, query, header, "
    "body]}\n"
    "        - {credential: p, placeholder: PH_K_LONG, in: [header, body]}\n"
    "        - {credential: p, placeholder: HDRONLY, in: [header]}\n"
    "        - {credential: p, placeholder: 'P K', in: [body]}\n"
    "  - name: other\n"
    "    match: {hosts: [other.example.com]}\n"
    "    auth: {type: apiKey, name: X-Key, credential: o}\n"
    "  - name: pass\n"
    "    match: {schemes: [http], hosts: [pass.example.org], paths: "
    "['/p/*']}\n"
    "    auth:\n"
    "      type: passthrough\n"
    "      substitutions:\n"
    "        - {credential: p, placeholder: '{{P}}', in: [header, query]}\n";

struct fx {
	struct vault *v;
	struct vault_inject api, other, pass, none;
};

static void
decide(struct vault *v, unsigned scheme, const char *host, const char *path,
    struct vault_inject *out)
{
	struct vault_req rq = {
	    scheme, host, 0, "POST", 4, path, strlen(path), NULL, 0};
	struct err e;

	err_clear(&e);
	if (vault_decide(v, &rq, out, &e) != 0)
		fail_msg("vault_decide: %s", e.msg);
}

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct policy *p = ts_policy_yaml(pol, "subst.yaml");
	struct err e;

	assert_non_null(f);
	err_clear(&e);
	if ((f->v = vault_new(p, NULL, &e)) == NULL)
		fail_msg("vault_new: %s", e.msg);
	policy_unref(p);
	decide(f->v, POLICY_SCHEME_HTTPS, "api.example.com", "/v1/x", &f->api);
	decide(f->v, POLICY_SCHEME_HTTPS, "other.example.com", "/", &f->other);
	decide(f->v, POLICY_SCHEME_HTTP, "pass.example.org", "/p/1", &f->pass);
	decide(f->v, POLICY_SCHEME_HTTPS, "nowhere.example.net", "/", &f->none);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	vault_inject_clear(f->v, &f->api);
	vault_inject_clear(f->v, &f->other);
	vault_inject_clear(f->v, &f->pass);
	vault_inject_clear(f->v, &f->none);
	vault_free(f->v);
	free(f);
	return 0;
}

/* Substitutes in on surface s (max: a generous bound); the rc, and the
 * result in *res (malloc'd NUL-terminated copy, or NULL). */
static enum vault_subst_rc
sub(struct fx *f, const struct vault_inject *vi, enum vault_surface s,
    const char *in, size_t n, size_t max, char **res, size_t *reslen)
{
	uint8_t *out = (uint8_t *)"sentinel";
	size_t outlen = 99;
	struct err e;
	enum vault_subst_rc rc;

	err_clear(&e);
	rc = vault_subst(f->v, vi, s, in, n, max, &out, &outlen, &e);
	*res = NULL;
	if (reslen != NULL)
		*reslen = outlen;
	if (rc == VAULT_SUBST_DONE) {
		assert_non_null(out);
		*res = malloc(outlen + 1);
		assert_non_null(*res);
		memcpy(*res, out, outlen);
		(*res)[outlen] = '\0';
		vault_subst_free(out, outlen);
	} else {
		assert_null(out);
		assert_int_equal(outlen, 0);
		if (rc != VAULT_SUBST_NONE) {
			assert_true(e.msg[0] != '\0');
			/* never a value in an error */
			assert_null(strstr(e.msg, "plain-P"));
			assert_null(strstr(e.msg, "a/b"));
		}
	}
	return rc;
}

static void
expect_sub(struct fx *f, const struct vault_inject *vi, enum vault_surface s,
    const char *in, const char *want)
{
	char *res;
	enum vault_subst_rc rc =
	    sub(f, vi, s, in, strlen(in), VAULT_SUBST_HEAD_MAX, &res, NULL);

	if (want == NULL) {
		if (rc != VAULT_SUBST_NONE)
			fail_msg(
			    "surface %d \"%s\": rc %d, want NONE", s, in, rc);
		return;
	}
	if (rc != VAULT_SUBST_DONE)
		fail_msg("surface %d \"%s\": rc %d, want DONE", s, in, rc);
	assert_string_equal(res, want);
	free(res);
}

static void
test_path_query(void **state)
{
	struct fx *f = *state;

	expect_sub(f, &f->api, VAULT_SURFACE_PATH, "/v1/PH_K/x",
	    "/v1/a%2Fb%20c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9/x");
	expect_sub(f, &f->api, VAULT_SURFACE_QUERY, "key=PH_K&b=1",
	    "key=a%2Fb%20c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9&b=1");
	/* HDRONLY lists header only; PH_K_LONG is not for the path */
	expect_sub(f, &f->api, VAULT_SURFACE_PATH, "/HDRONLY", NULL);
	expect_sub(f, &f->api, VAULT_SURFACE_QUERY, "x=HDRONLY", NULL);
}

/*
 * Path, query and form are percent-encoded surfaces: a client may send a
 * placeholder's bytes as %XX (either case), and a form's space as '+';
 * headers and JSON are matched as written. An escape of another byte,
 * or one cut short, is no match.
 */
static void
test_pct_placeholder(void **state)
{
	/* pass: the pass binding's {{P}}, else the api binding's */
	static const struct {
		bool pass;
		enum vault_surface s;
		const char *in, *want;
	} cases[] = {
	    /* Python's urlencode({"k": "{{P}}"}), lower-case hex, mixed */
	    {true, VAULT_SURFACE_QUERY, "k=%7B%7BP%7D%7D&x=1", "k=plain-P&x=1"},
	    {true, VAULT_SURFACE_QUERY, "k=%7b%7bP%7d%7d", "k=plain-P"},
	    {true, VAULT_SURFACE_QUERY, "k={%7BP}%7D&{{P}}",
	        "k=plain-P&plain-P"},
	    /* an over-eager encoder: every byte */
	    {false, VAULT_SURFACE_PATH, "/v1/%50%48%5F%4B/x",
	        "/v1/a%2Fb%20c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9/x"},
	    {false, VAULT_SURFACE_FORM, "a=%50H_K&b=P+K&c=P%20K",
	        "a=a%2Fb+c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9&b=plain-P&c=plain-"
	        "P"},
	    /* not the byte, cut short, or an escape of '%' itself */
	    {false, VAULT_SURFACE_QUERY, "a=%50H_J", NULL},
	    {false, VAULT_SURFACE_QUERY, "a=PH_%4", NULL},
	    {false, VAULT_SURFACE_QUERY, "a=PH_%", NULL},
	    {false, VAULT_SURFACE_QUERY, "a=%25H_K", NULL},
	    /* '+' is a space only in a form; headers and JSON as written */
	    {false, VAULT_SURFACE_JSON, "{\"a\":\"P+K\"}", NULL},
	    {true, VAULT_SURFACE_HEADER, "Bearer %7B%7BP%7D%7D", NULL},
	    {false, VAULT_SURFACE_JSON, "{\"a\":\"%50H_K\"}", NULL},
	    {false, VAULT_SURFACE_JSON, "{\"a\":\"P K\"}",
	        "{\"a\":\"plain-P\"}"},
	};
	struct fx *f = *state;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_sub(f, cases[i].pass ? &f->pass : &f->api, cases[i].s,
		    cases[i].in, cases[i].want);
}

static void
test_header(void **state)
{
	struct fx *f = *state;

	/* the raw value (tab and all); the longest placeholder first */
	expect_sub(
	    f, &f->api, VAULT_SURFACE_HEADER, "Bearer PH_K", "Bearer " VAL_K);
	expect_sub(f, &f->api, VAULT_SURFACE_HEADER, "PH_K_LONG", "plain-P");
	expect_sub(
	    f, &f->api, VAULT_SURFACE_HEADER, "x HDRONLY y", "x plain-P y");
}

static void
test_absent(void **state)
{
	struct fx *f = *state;

	expect_sub(f, &f->api, VAULT_SURFACE_PATH, "/v1/x", NULL);
	expect_sub(f, &f->api, VAULT_SURFACE_HEADER, "PH_", NULL);
	expect_sub(f, &f->api, VAULT_SURFACE_HEADER, "ph_k", NULL);
	expect_sub(f, &f->api, VAULT_SURFACE_HEADER, "", NULL);
	expect_sub(f, &f->api, VAULT_SURFACE_NONE, "PH_K", NULL);
}

static void
test_several(void **state)
{
	struct fx *f = *state;

	expect_sub(f, &f->api, VAULT_SURFACE_HEADER,
	    "PH_KPH_K_LONG,PH_K;HDRONLYPH_K",
	    VAL_K "plain-P," VAL_K ";plain-P" VAL_K);
	/* a replaced value is not scanned again, a partial one not taken */
	expect_sub(f, &f->api, VAULT_SURFACE_QUERY, "a=PH_KPH_K&b=PH_&c=PH_K",
	    "a=a%2Fb%20c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9"
	    "a%2Fb%20c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9"
	    "&b=PH_&c=a%2Fb%20c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9");
}

/* Only the binding that matched substitutes: another host's request (its
 * binding has no substitutions), no match, a passthrough binding's own. */
static void
test_binding_only(void **state)
{
	struct fx *f = *state;

	assert_int_equal(f->api.decision, VAULT_INJECTED);
	assert_int_equal(f->api.subst_in,
	    POLICY_SUBST_PATH | POLICY_SUBST_QUERY | POLICY_SUBST_HEADER |
	        POLICY_SUBST_BODY);
	assert_int_equal(f->other.decision, VAULT_INJECTED);
	assert_int_equal(f->other.subst_in, 0);
	assert_int_equal(f->none.decision, VAULT_NO_MATCH);
	expect_sub(f, &f->other, VAULT_SURFACE_HEADER, "PH_K", NULL);
	expect_sub(f, &f->none, VAULT_SURFACE_HEADER, "PH_K", NULL);
	expect_sub(f, &f->none, VAULT_SURFACE_JSON, "{\"a\":\"PH_K\"}", NULL);
	/* passthrough: no line, substitutions only */
	assert_int_equal(f->pass.decision, VAULT_INJECTED);
	assert_null(f->pass.lines);
	assert_int_equal(
	    f->pass.subst_in, POLICY_SUBST_HEADER | POLICY_SUBST_QUERY);
	expect_sub(f, &f->pass, VAULT_SURFACE_QUERY, "t={{P}}", "t=plain-P");
	expect_sub(f, &f->pass, VAULT_SURFACE_HEADER, "{{P}}", "plain-P");
	expect_sub(f, &f->pass, VAULT_SURFACE_PATH, "/p/{{P}}", NULL);
	expect_sub(f, &f->pass, VAULT_SURFACE_HEADER, "PH_K", NULL);
}

static void
test_body_json_form(void **state)
{
	struct fx *f = *state;

	expect_sub(f, &f->api, VAULT_SURFACE_JSON,
	    "{\"key\":\"PH_K\",\"l\":\"PH_K_LONG\",\"h\":\"HDRONLY\"}",
	    "{\"key\":\"a/b "
	    "c+d~e\\\"f\\\\g\\th&i=j\xc3\xa9\",\"l\":\"plain-P\","
	    "\"h\":\"HDRONLY\"}");
	expect_sub(f, &f->api, VAULT_SURFACE_FORM, "a=1&key=PH_K&l=PH_K_LONG",
	    "a=1&key=a%2Fb+c%2Bd~e%22f%5Cg%09h%26i%3Dj%C3%A9&l=plain-P");
	expect_sub(f, &f->api, VAULT_SURFACE_JSON, "{\"a\":1}", NULL);
}

/* A header value that would hold CR, LF or NUL after substitution is
 * refused; without a placeholder the piece is not the vault's business. */
static void
test_header_crlf(void **state)
{
	struct fx *f = *state;
	char *res;

	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_HEADER, "PH_K\r\nX: y",
	                     11, VAULT_SUBST_HEAD_MAX, &res, NULL),
	    VAULT_SUBST_REFUSED);
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_HEADER, "a\nPH_K", 6,
	                     VAULT_SUBST_HEAD_MAX, &res, NULL),
	    VAULT_SUBST_REFUSED);
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_HEADER, "PH_K\0", 5,
	                     VAULT_SUBST_HEAD_MAX, &res, NULL),
	    VAULT_SUBST_REFUSED);
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_HEADER, "a\r\nb", 4,
	                     VAULT_SUBST_HEAD_MAX, &res, NULL),
	    VAULT_SUBST_NONE);
	/* in the body a CR is just a byte (JSON escaping never yields one) */
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_JSON, "\"PH_K\"\r\n", 8,
	                     VAULT_SUBST_HEAD_MAX, &res, NULL),
	    VAULT_SUBST_DONE);
	free(res);
}

static void
test_bounds(void **state)
{
	struct fx *f = *state;
	size_t n = VAULT_SUBST_BODY_MAX + 1, len;
	char *body = malloc(n), *res;

	assert_non_null(body);
	memset(body, 'x', n);
	memcpy(body + n - 4, "PH_K", 4);
	/* one byte over the body bound: left alone */
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_JSON, body, n,
	                     VAULT_SUBST_BODY_OUT_MAX, &res, NULL),
	    VAULT_SUBST_NONE);
	/* at the bound: rewritten */
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_JSON, body + 1, n - 1,
	                     VAULT_SUBST_BODY_OUT_MAX, &res, &len),
	    VAULT_SUBST_DONE);
	/* a quote, a backslash and a tab: two bytes each escaped */
	assert_int_equal(len, n - 1 - 4 + strlen(VAL_K) + 3);
	free(res);
	/* the head surfaces have no such bound, only max */
	assert_int_equal(
	    sub(f, &f->api, VAULT_SURFACE_HEADER, body, n, 2 * n, &res, NULL),
	    VAULT_SUBST_DONE);
	free(res);
	/* a body full of placeholders: refused beyond max, cheaply */
	for (len = 0; len + 4 <= VAULT_SUBST_BODY_MAX; len += 4)
		memcpy(body + len, "PH_K", 4);
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_FORM, body, len,
	                     VAULT_SUBST_BODY_OUT_MAX, &res, NULL),
	    VAULT_SUBST_TOO_LARGE);
	/* the result exactly at max passes, one byte less does not */
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_HEADER, "xPH_K", 5,
	                     1 + strlen(VAL_K), &res, NULL),
	    VAULT_SUBST_DONE);
	free(res);
	assert_int_equal(sub(f, &f->api, VAULT_SURFACE_HEADER, "xPH_K", 5,
	                     strlen(VAL_K), &res, NULL),
	    VAULT_SUBST_TOO_LARGE);
	free(body);
}

static enum vault_surface
BS(const char *ct, const char *ce)
{
	return vault_subst_body_surface(
	    ct, ct != NULL ? strlen(ct) : 0, ce, ce != NULL ? strlen(ce) : 0);
}

static void
test_body_types(void **state)
{
	(void)state;
	assert_int_equal(BS("application/json", NULL), VAULT_SURFACE_JSON);
	assert_int_equal(
	    BS(" Application/JSON ; charset=utf-8", NULL), VAULT_SURFACE_JSON);
	assert_int_equal(
	    BS("application/vnd.api+json", NULL), VAULT_SURFACE_JSON);
	assert_int_equal(
	    BS("application/x-www-form-urlencoded", NULL), VAULT_SURFACE_FORM);
	assert_int_equal(
	    BS("application/json", "identity"), VAULT_SURFACE_JSON);
	/* left alone */
	assert_int_equal(BS("application/json", "gzip"), VAULT_SURFACE_NONE);
	assert_int_equal(
	    BS("application/x-www-form-urlencoded", "br"), VAULT_SURFACE_NONE);
	assert_int_equal(
	    BS("multipart/form-data; boundary=x", NULL), VAULT_SURFACE_NONE);
	assert_int_equal(BS("text/plain", NULL), VAULT_SURFACE_NONE);
	assert_int_equal(BS("application/jsonx", NULL), VAULT_SURFACE_NONE);
	assert_int_equal(BS("application/+json", NULL), VAULT_SURFACE_NONE);
	assert_int_equal(BS("text/x+json", NULL), VAULT_SURFACE_NONE);
	assert_int_equal(BS("", NULL), VAULT_SURFACE_NONE);
	assert_int_equal(BS(NULL, NULL), VAULT_SURFACE_NONE);
}

static void
test_header_names(void **state)
{
	(void)state;
	assert_false(vault_subst_header_ok("Host", 4));
	assert_false(vault_subst_header_ok("content-length", 14));
	assert_false(vault_subst_header_ok("Transfer-Encoding", 17));
	assert_false(vault_subst_header_ok("Proxy-Authorization", 19));
	assert_true(vault_subst_header_ok("Authorization", 13));
	assert_true(vault_subst_header_ok("X-Api-Key", 9));
	assert_true(vault_subst_header_ok("Hostx", 5));
}

struct sink {
	char buf[4096];
	size_t n;
};

static void
sink_emit(void *arg, const uint8_t *p, size_t n)
{
	struct sink *s = arg;

	assert_true(s->n + n < sizeof(s->buf));
	memcpy(s->buf + s->n, p, n);
	s->n += n;
}

/* An origin echoing a substituted piece back: the redactor masks every
 * byte of the value in the surface's encoding. */
static void
test_echo_redacted(void **state)
{
	static const struct {
		enum vault_surface s;
		const char *in;
	} cases[] = {
	    {VAULT_SURFACE_PATH, "/v1/PH_K/x"},
	    {VAULT_SURFACE_QUERY, "q=PH_K"},
	    {VAULT_SURFACE_HEADER, "PH_K"},
	    {VAULT_SURFACE_JSON, "{\"k\":\"PH_K\"}"},
	    {VAULT_SURFACE_FORM, "k=PH_K"},
	};
	struct fx *f = *state;
	size_t i, j, len, at, tail;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct vault_redactor *r = vault_redactor_new(f->v);
		struct sink s = {{0}, 0};
		char *res;

		assert_non_null(r);
		assert_int_equal(
		    sub(f, &f->api, cases[i].s, cases[i].in,
		        strlen(cases[i].in), VAULT_SUBST_HEAD_MAX, &res, &len),
		    VAULT_SUBST_DONE);
		vault_redact_feed(r, (const uint8_t *)res, len, sink_emit, &s);
		vault_redact_finish(r, sink_emit, &s);
		vault_redactor_free(r);
		assert_int_equal(s.n, len);
		/* exactly the piece around the placeholder is left */
		at = (size_t)(strstr(cases[i].in, "PH_K") - cases[i].in);
		tail = strlen(cases[i].in) - at - 4;
		assert_memory_equal(s.buf, cases[i].in, at);
		for (j = at; j < len - tail; j++)
			if (s.buf[j] != '*')
				fail_msg("case %zu: byte %zu unmasked", i, j);
		assert_memory_equal(
		    s.buf + len - tail, cases[i].in + at + 4, tail);
		free(res);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_path_query, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_pct_placeholder, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_absent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_several, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binding_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_body_json_form, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_header_crlf, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
	    cmocka_unit_test(test_body_types),
	    cmocka_unit_test(test_header_names),
	    cmocka_unit_test_setup_teardown(
	        test_echo_redacted, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
