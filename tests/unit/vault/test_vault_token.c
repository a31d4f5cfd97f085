/*
 * vault_token.c and vault_oauth.c: the token response read strictly
 * (fields, types, bounds, duplicates, escapes, error responses), the
 * token request rendered per grant and client authentication, and an
 * oauth2 binding's life in revisions: MINT without a token, injected
 * as Bearer once minted, due again after its lifetime (stepped clock),
 * carried by vault_new, the replaced token and a rotated refresh token
 * redacted.
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
#include "vault/vault_oauth.h"
#include "vault/vault_token.h"

static int
parse(const char *json, struct vault_token *t, char *buf)
{
	struct err e;

	return vault_token_parse(
	    (const uint8_t *)json, strlen(json), buf, strlen(json) + 1, t, &e);
}

static void
test_token_ok(void **state)
{
	struct vault_token t;
	char buf[512];

	(void)state;
	assert_int_equal(parse("{\"access_token\":\"at-1\",\"token_type\":"
	                       "\"Bearer\",\"expires_in\":3}",
	                     &t, buf),
	    0);
	assert_int_equal(t.access_len, 4);
	assert_memory_equal(t.access, "at-1", 4);
	assert_null(t.refresh);
	assert_int_equal(t.expires_in, 3);
	/* any case of bearer, a string expires_in, escapes, a rotated
	 * refresh token, unknown members of every JSON type skipped */
	assert_int_equal(
	    parse(" {\"scope\":\"a b\",\"token_type\":\"bearer\",\"x\":[1,{"
	          "\"y\":null},true,-2.5e3],\"access_token\":\"a\\/b\\u0041\","
	          "\"refresh_token\":\"rt-2\",\"expires_in\":\"3600\"} \n",
	        &t, buf),
	    0);
	assert_memory_equal(t.access, "a/bA", 4);
	assert_int_equal(t.refresh_len, 4);
	assert_memory_equal(t.refresh, "rt-2", 4);
	assert_int_equal(t.expires_in, 3600);
	/* absent: the default; long: clamped */
	assert_int_equal(parse("{\"access_token\":\"a\",\"token_type\":"
	                       "\"Bearer\"}",
	                     &t, buf),
	    0);
	assert_int_equal(t.expires_in, VAULT_TOKEN_TTL_DEFAULT);
	assert_int_equal(parse("{\"access_token\":\"a\",\"token_type\":"
	                       "\"Bearer\",\"expires_in\":99999999}",
	                     &t, buf),
	    0);
	assert_int_equal(t.expires_in, VAULT_TOKEN_TTL_MAX);
}

static void
test_token_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"access_token\":\"a\"}", /* no token_type */
	    "{\"access_token\":\"a\",\"token_type\":\"mac\"}",
	    "{\"token_type\":\"Bearer\"}", /* no access_token */
	    "{\"access_token\":\"\",\"token_type\":\"Bearer\"}",
	    "{\"access_token\":\"a b\",\"token_type\":\"Bearer\"}",
	    "{\"access_token\":\"a\\n\",\"token_type\":\"Bearer\"}",
	    "{\"access_token\":\"\\u00e9\",\"token_type\":\"Bearer\"}",
	    "{\"access_token\":\"a\",\"access_token\":\"b\",\"token_type\":"
	    "\"Bearer\"}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":"
	    "0}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":"
	    "1.5}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":"
	    "\"1x\"}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\"} x",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"x\":01}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"x\":"
	    "\"\\ud800\"}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"x\":\"\t\"}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"x\":"
	    "[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}",
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\"",
	    "\xef\xbb\xbf{\"access_token\":\"a\",\"token_type\":\"Bearer\"}",
	};
	struct vault_token t;
	char buf[512];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &t, buf) != -1)
			fail_msg("accepted: %s", bad[i]);
		assert_null(t.access);
	}
	/* an error response names its code */
	assert_int_equal(parse("{\"error\":\"invalid_grant\","
	                       "\"error_description\":\"x\"}",
	                     &t, buf),
	    -1);
	assert_string_equal(t.error, "invalid_grant");
	assert_int_equal(parse("{\"error\":\"weird\"}", &t, buf), -1);
	assert_string_equal(t.error, "other");
}

#define OA_POLICY(grant, extra)                                                \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.example.com}\n"                       \
	"  - {action: allow, target: idp.example.com}\n"                       \
	"credentials:\n"                                                       \
	"  - {name: cs, source: {type: inline, value: 'sec ret/+'}}\n"         \
	"  - {name: rt, source: {type: inline, value: refresh-one}}\n"         \
	"bindings:\n"                                                          \
	"  - name: api\n"                                                      \
	"    match: {hosts: [api.example.com]}\n"                              \
	"    auth:\n"                                                          \
	"      type: oauth2\n"                                                 \
	"      grant: " grant "\n"                                             \
	"      tokenUrl: https://idp.example.com:8443/oauth/token\n"           \
	"      clientId: 'my client'\n"                                        \
	"      clientSecret: cs\n"                                             \
	"      scopes: [read, write]\n" extra

static uint64_t fake_now;

static uint64_t
fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static enum vault_decision
decide(struct vault *v, struct vault_inject *out)
{
	struct vault_req rq = {POLICY_SCHEME_HTTPS, "api.example.com", 443,
	    "GET", 3, "/x", 2, NULL, 0};
	struct err e;

	assert_int_equal(vault_decide(v, &rq, out, &e), 0);
	return out->decision;
}

static bool
refused(const char *yaml)
{
	struct policy_diag d;
	struct policy *p;

	policy_diag_init(&d);
	p = policy_parse_yaml(yaml, strlen(yaml), "bad.yaml", &d);
	policy_diag_clear(&d);
	if (p == NULL)
		return true;
	policy_unref(p);
	return false;
}

static void
test_policy_oauth2(void **state)
{
	static const char *const bad[] = {
	    OA_POLICY("password", ""),
	    OA_POLICY("refresh_token", ""), /* needs refreshToken */
	    OA_POLICY("client_credentials", "      refreshToken: rt\n"),
	    OA_POLICY("client_credentials", "      credential: cs\n"),
	    OA_POLICY("client_credentials", "      clientAuth: post\n"),
	};
	struct policy *p;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_true(refused(bad[i]));
	/* the token URL: https, a DNS name, no user info or fragment */
	{
		char *h, *t;
		uint16_t port;
		struct err e;

		assert_int_equal(
		    policy_oauth2_parse_url(
		        "https://IdP.example.com?x=1", &h, &port, &t, &e),
		    0);
		assert_string_equal(h, "idp.example.com");
		assert_int_equal(port, 443);
		assert_string_equal(t, "/?x=1");
		free(h);
		free(t);
		assert_int_equal(
		    policy_oauth2_parse_url(
		        "http://idp.example.com/t", &h, &port, &t, &e),
		    -1);
		assert_int_equal(
		    policy_oauth2_parse_url(
		        "https://u@idp.example.com/t", &h, &port, &t, &e),
		    -1);
		assert_int_equal(
		    policy_oauth2_parse_url(
		        "https://203.0.113.1/t", &h, &port, &t, &e),
		    -1);
		assert_int_equal(
		    policy_oauth2_parse_url(
		        "https://idp.example.com/t#f", &h, &port, &t, &e),
		    -1);
	}
	/* the token host must be allowed by name */
	assert_true(refused(
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: api.example.com}\n"
	    "credentials:\n"
	    "  - {name: cs, source: {type: inline, value: s}}\n"
	    "bindings:\n"
	    "  - name: api\n"
	    "    match: {hosts: [api.example.com]}\n"
	    "    auth: {type: oauth2, grant: client_credentials, tokenUrl: "
	    "'https://idp.example.com/t', clientId: c, clientSecret: cs}\n"));
	p = ts_policy_yaml(OA_POLICY("client_credentials", ""), "ok.yaml");
	assert_non_null(p);
	policy_unref(p);
}

static void
test_oauth2_request(void **state)
{
	struct policy *p;
	struct vault *v;
	struct vault_oauth_req rq;
	struct err e;
	char *s;

	(void)state;
	p = ts_policy_yaml(OA_POLICY("client_credentials", ""), "ok.yaml");
	assert_non_null(p);
	assert_non_null(v = vault_new(p, NULL, &e));
	assert_int_equal(vault_oauth_request(v, "api", &rq, &e), 0);
	assert_false(rq.renew);
	s = strndup((const char *)rq.bytes, rq.len);
	/* Basic of form-encoded "my client" and "sec ret/+" */
	assert_non_null(strstr(s,
	    "POST /oauth/token HTTP/1.1\r\n"
	    "Host: idp.example.com:8443\r\n"));
	assert_non_null(strstr(s,
	    "Authorization: Basic bXkrY2xpZW50OnNlYytyZXQlMkYlMkI="
	    "\r\n"));
	assert_non_null(strstr(s,
	    "\r\n\r\ngrant_type=client_credentials&"
	    "scope=read+write"));
	assert_null(strstr(s, "client_secret"));
	free(s);
	vault_oauth_request_clear(&rq);
	vault_free(v);
	policy_unref(p);

	p = ts_policy_yaml(OA_POLICY("refresh_token",
	                       "      refreshToken: rt\n"
	                       "      clientAuth: body\n"
	                       "      audience: https://api.example.com\n"),
	    "rt.yaml");
	assert_non_null(p);
	assert_non_null(v = vault_new(p, NULL, &e));
	assert_int_equal(vault_oauth_request(v, "api", &rq, &e), 0);
	s = strndup((const char *)rq.bytes, rq.len);
	assert_null(strstr(s, "Authorization:"));
	assert_non_null(strstr(s,
	    "\r\n\r\ngrant_type=refresh_token&refresh_token=refresh-one&"
	    "scope=read+write&audience=https%3A%2F%2Fapi.example.com&"
	    "client_id=my+client&client_secret=sec+ret%2F%2B"));
	free(s);
	vault_oauth_request_clear(&rq);
	vault_free(v);
	policy_unref(p);
}

static void
test_oauth2_mint(void **state)
{
	static const char body[] =
	    "{\"access_token\":\"tok-AAAAAAAAAAAAAAAA\","
	    "\"token_type\":\"Bearer\",\"expires_in\":10,"
	    "\"refresh_token\":\"rot-BBBBBBBBBBBBBBBB\"}";
	struct policy *p;
	struct vault *v, *v2, *v3, *v4;
	struct vault_inject out;
	struct vault_oauth_req rq;
	struct vault_token t;
	char buf[sizeof(body)];
	struct err e;
	char *s;

	(void)state;
	p = ts_policy_yaml(
	    OA_POLICY("refresh_token", "      refreshToken: rt\n"), "rt.yaml");
	assert_non_null(p);
	assert_non_null(v = vault_new(p, NULL, &e));
	vault_set_clock(v, fake_clock, NULL);
	fake_now = 1000;
	assert_int_equal(decide(v, &out), VAULT_MINT);
	assert_string_equal(out.binding, "api");
	assert_null(out.lines);
	vault_inject_clear(v, &out);

	assert_int_equal(vault_token_parse((const uint8_t *)body, strlen(body),
	                     buf, sizeof(buf), &t, &e),
	    0);
	assert_non_null(v2 = vault_mint(v, "api", &t, fake_now, &e));
	assert_int_equal(vault_oauth_expiry(v2, "api"), 11000);
	assert_int_equal(decide(v2, &out), VAULT_INJECTED);
	assert_string_equal(
	    out.lines, "Authorization: Bearer tok-AAAAAAAAAAAAAAAA\r\n");
	assert_string_equal(out.remove[0], "proxy-authorization");
	vault_inject_clear(v2, &out);
	/* the token and the rotated refresh token are redacted */
	assert_true(vault_redact_any(v2, "x tok-AAAAAAAAAAAAAAAA", 22));
	assert_true(vault_redact_any(v2, "rot-BBBBBBBBBBBBBBBB", 20));
	assert_true(vault_redact_any(v2, "refresh-one", 11));
	/* the next request uses the rotated refresh token */
	assert_int_equal(vault_oauth_request(v2, "api", &rq, &e), 0);
	assert_true(rq.renew);
	s = strndup((const char *)rq.bytes, rq.len);
	assert_non_null(strstr(s, "refresh_token=rot-BBBBBBBBBBBBBBBB"));
	free(s);
	vault_oauth_request_clear(&rq);

	/* a new revision of the same settings carries them */
	assert_non_null(v3 = vault_new(p, v2, &e));
	assert_int_equal(decide(v3, &out), VAULT_INJECTED);
	vault_inject_clear(v3, &out);
	/* due 1 s before its expiry (a tenth of 10 s) */
	fake_now = 9999;
	assert_int_equal(decide(v3, &out), VAULT_INJECTED);
	vault_inject_clear(v3, &out);
	fake_now = 10000;
	assert_int_equal(decide(v3, &out), VAULT_MINT);
	vault_inject_clear(v3, &out);

	/* a replaced token is retired: still redacted */
	memcpy(buf + (t.access - buf) + 16, "ZZZZ", 4); /* t.access is in buf */
	assert_non_null(v4 = vault_mint(v3, "api", &t, fake_now, &e));
	assert_int_equal(decide(v4, &out), VAULT_INJECTED);
	assert_non_null(strstr(out.lines, "ZZZZ"));
	vault_inject_clear(v4, &out);
	assert_true(vault_redact_any(v4, "tok-AAAAAAAAAAAAAAAA", 20));
	vault_free(v4);
	vault_free(v3);
	vault_free(v2);
	vault_free(v);
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_token_ok),
	    cmocka_unit_test(test_token_bad),
	    cmocka_unit_test(test_policy_oauth2),
	    cmocka_unit_test(test_oauth2_request),
	    cmocka_unit_test(test_oauth2_mint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
