/*
 * policy_cred_http.c (and its walk, its YAML, its cross checks): the http
 * credential source's schema (issue 38 item 4): OpenSandbox's url,
 * method and headers, egressd's ttl, maxStale, allowPrivate and format;
 * refused from the API; its url host must be covered by an explicit
 * allow rule; header credentials must exist and not be http; no message
 * carries a header's value; the YAML loads back the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"
#include "policy/policy_apicreds.h"
#include "policy/policy_cred_http.h"

#define HEAD                                                                   \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.example.com}\n"                       \
	"  - {action: allow, target: store.example.net}\n"                     \
	"credentials:\n"                                                       \
	"  - {name: st, source: {type: inline, value: s3cr3t-store}}\n"

#define CRED(src) "  - name: k\n    source: " src "\n"

static struct policy *
parse(const char *y, struct policy_diag *d)
{
	policy_diag_init(d);
	return policy_parse_yaml(y, strlen(y), "h.yaml", d);
}

static void
bad(const char *y, const char *needle)
{
	struct policy_diag d;
	struct policy *p = parse(y, &d);
	size_t i;

	if (p != NULL)
		policy_unref(p);
	assert_null(p);
	for (i = 0; i < d.n; i++) {
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

static const struct policy_cred_http *
http_of(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->ncredentials; i++)
		if (strcmp(policy_credential_name(p->credentials[i]), name) ==
		    0)
			return policy_credential_http(p->credentials[i]);
	return NULL;
}

static void
test_schema(void **state)
{
	static const char y[] = HEAD CRED(
	    "{type: http, url: 'https://Store.example.net:8443/v1/k?x=1',\n"
	    "      method: POST, ttl: 60, maxStale: 0, allowPrivate: true,\n"
	    "      format: raw,\n"
	    "      headers: {Authorization: 'Bearer s3cr3t-lit',\n"
	    "                X-Store: {credential: st}}}");
	struct policy_diag d;
	struct policy *p = parse(y, &d);
	const struct policy_cred_http *h;

	(void)state;
	policy_diag_clear(&d);
	assert_non_null(p);
	assert_non_null(h = http_of(p, "k"));
	assert_int_equal(
	    policy_credential_source(p->credentials[1]), POLICY_CRED_HTTP);
	assert_string_equal(h->host, "store.example.net");
	assert_int_equal(h->port, 8443);
	assert_string_equal(h->target, "/v1/k?x=1");
	assert_int_equal(h->method, POLICY_HTTP_POST);
	assert_int_equal(h->format, POLICY_HTTP_RAW);
	assert_int_equal(h->ttl_s, 60);
	assert_int_equal(policy_cred_http_max_stale(h), 0);
	assert_true(h->allow_private);
	assert_int_equal(h->nheaders, 2);
	assert_string_equal(h->headers[0].name, "Authorization");
	assert_null(h->headers[0].credential);
	assert_int_equal(h->headers[0].vlen, 17);
	assert_memory_equal(h->headers[0].value, "Bearer s3cr3t-lit", 17);
	assert_string_equal(h->headers[1].credential, "st");
	assert_null(http_of(p, "st"));
	policy_unref(p);
}

static void
test_defaults(void **state)
{
	static const char y[] =
	    HEAD CRED("{type: http, url: 'https://store.example.net/k'}");
	struct policy_diag d;
	struct policy *p = parse(y, &d);
	const struct policy_cred_http *h;

	(void)state;
	policy_diag_clear(&d);
	assert_non_null(p);
	h = http_of(p, "k");
	assert_int_equal(h->port, 443);
	assert_int_equal(h->method, POLICY_HTTP_GET);
	assert_int_equal(h->format, POLICY_HTTP_JSON);
	assert_int_equal(h->ttl_s, 0);
	assert_int_equal(
	    policy_cred_http_max_stale(h), POLICY_HTTP_MAX_STALE_DEFAULT);
	assert_false(h->allow_private);
	policy_unref(p);
}

static void
test_errors(void **state)
{
	(void)state;
	bad(HEAD CRED("{type: http}"), "http source needs url");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " value: x}"),
	    "http source needs url");
	bad(HEAD CRED("{type: inline, value: x, url: "
	              "'https://store.example.net/'}"),
	    "only an http source takes url");
	bad(HEAD CRED("{type: http, url: 'http://store.example.net/'}"),
	    "url: must start with https://");
	bad(HEAD CRED("{type: http, url: 'https://10.0.0.1/'}"),
	    "url: the host must be a DNS name");
	bad(HEAD CRED("{type: http, url: 'https://u:p@store.example.net/'}"),
	    "url: a host name without user info");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " method: PUT}"),
	    "unknown method");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " ttl: 0}"),
	    "expected an integer from 1 to 86400");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " format: xml}"),
	    "unknown format");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " allowPrivate: yes-please}"),
	    "allowPrivate must be true or false");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " headers: {Host: s3cr3t-h}}"),
	    "header \"Host\" is egressd's to write");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " headers: {'a b': s3cr3t-h}}"),
	    "invalid header name");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " headers: {X-A: \"s3cr3t\\nx\"}}"),
	    "header value: control byte");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " headers: {X-A: s3cr3t-1, x-a: s3cr3t-2}}"),
	    "given twice");
	/* egressd's own fetch goes only where the policy allows by name */
	bad(HEAD CRED("{type: http, url: 'https://other.example.net/'}"),
	    "credential \"k\": http source url: binding host "
	    "\"other.example.net\" is not covered");
	bad(HEAD CRED("{type: http, url: 'https://store.example.net/',"
	              " headers: {X-A: {credential: nope}}}"),
	    "references unknown credential \"nope\"");
	bad(HEAD CRED(
	        "{type: http, url: 'https://store.example.net/'}") "  - name: "
	                                                           "k2\n    "
	                                                           "source: "
	                                                           "{type: "
	                                                           "http, url: "
	                                                           "'https://"
	                                                           "store."
	                                                           "example."
	                                                           "net/2', "
	                                                           "headers: "
	                                                           "{X-A: "
	                                                           "{credential"
	                                                           ": k}}}\n",
	    "names http credential \"k\"");
}

/* The API can never make egressd fetch from where its caller names. */
static void
test_api_refused(void **state)
{
	static const char body[] =
	    "{\"credentials\":[{\"name\":\"k\",\"source\":{\"type\":"
	    "\"http\",\"url\":\"https://store.example.net/\"}}]}";
	enum policy_apicreds_status st;
	struct policy_diag d;
	struct policy *b, *p;
	struct err e;

	(void)state;
	b = parse(HEAD, &d);
	policy_diag_clear(&d);
	assert_non_null(b);
	p = policy_apicreds_create_json(b, body, strlen(body), &st, &e);
	assert_null(p);
	assert_non_null(strstr(e.msg,
	    "source type \"http\" is accepted only "
	    "in the operator's policy file"));
	policy_unref(b);
}

static void
test_round_trip(void **state)
{
	static const char y[] = HEAD CRED(
	    "{type: http, url: 'https://store.example.net/v1/k',\n"
	    "      method: POST, ttl: 30, maxStale: 90, format: raw,\n"
	    "      headers: {Authorization: 'Bearer s3cr3t-lit',\n"
	    "                X-Store: {credential: st}}}");
	struct policy_diag d;
	struct policy *p, *q;
	char *out;

	(void)state;
	p = parse(y, &d);
	policy_diag_clear(&d);
	assert_non_null(p);
	assert_non_null(out = policy_to_yaml(p));
	q = parse(out, &d);
	policy_diag_clear(&d);
	assert_non_null(q);
	assert_true(policy_cred_http_same(http_of(p, "k"), http_of(q, "k")));
	policy_yaml_free(out);
	policy_unref(q);
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_schema),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_api_refused),
	    cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
