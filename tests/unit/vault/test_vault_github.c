/*
 * vault_ghtoken.c, vault_github.c and the githubApp path of
 * vault_oauth.c and vault_decide.c: the installation token's answer read
 * strictly (fields, ISO 8601 times, duplicates, bounds), the settings'
 * shape, the App's JWT (verified with the public half of a key made at
 * test time), the token request per settings (narrowed, GitHub
 * Enterprise's base), and a binding's life in revisions: MINT without a
 * token, Bearer for the REST API and git's Basic form for smart HTTP,
 * due five minutes before expiry, carried by vault_new, every form of
 * the token and the key redacted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "policy/policy_binding.h"
#include "policy/policy_github.h"
#include "ts_policy.h"
#include "vault/vault.h"
#include "vault/vault_ghtoken.h"
#include "vault/vault_github.h"
#include "vault/vault_oauth.h"
#include "vault/vault_token.h"

/* ---- the answer ---- */

static int
gparse(const char *json, struct vault_ghtoken *t, char *buf)
{
	struct err e;

	return vault_ghtoken_parse(
	    (const uint8_t *)json, strlen(json), buf, strlen(json) + 1, t, &e);
}

static void
test_ghtoken_ok(void **state)
{
	struct vault_ghtoken t;
	char buf[1024];
	int64_t s;

	(void)state;
	assert_int_equal(gparse("{\"token\":\"ghs_abc\",\"expires_at\":"
	                        "\"2016-07-11T22:14:10Z\"}",
	                     &t, buf),
	    0);
	assert_int_equal(t.token_len, 7);
	assert_memory_equal(t.token, "ghs_abc", 7);
	assert_int_equal(t.expires_at, 1468275250);
	/* GitHub's other members skipped, any order, escapes decoded */
	assert_int_equal(
	    gparse(" {\"permissions\":{\"contents\":\"read\"},"
	           "\"repository_selection\":\"selected\",\"repositories\":"
	           "[{\"id\":1,\"name\":\"r\",\"private\":true,\"x\":null}],"
	           "\"expires_at\":\"2024-02-29T23:59:59.123Z\","
	           "\"token\":\"gh\\u0073_\\/x\"}\n",
	        &t, buf),
	    0);
	assert_memory_equal(t.token, "ghs_/x", 6);
	assert_int_equal(t.expires_at, 1709251199);
	/* offsets */
	assert_int_equal(
	    vault_ghtoken_time("2016-07-12T00:14:10+02:00", 25, &s), 0);
	assert_int_equal(s, 1468275250);
	assert_int_equal(
	    vault_ghtoken_time("2016-07-11T21:14:10-01:00", 25, &s), 0);
	assert_int_equal(s, 1468275250);
}

static void
test_ghtoken_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"token\":\"t\"}", /* no expires_at */
	    "{\"expires_at\":\"2016-07-11T22:14:10Z\"}", /* no token */
	    "{\"token\":\"t\",\"token\":\"u\",\"expires_at\":\"2016-07-11T22:"
	    "14:10Z\"}",
	    "{\"token\":\"a b\",\"expires_at\":\"2016-07-11T22:14:10Z\"}",
	    "{\"token\":\"\",\"expires_at\":\"2016-07-11T22:14:10Z\"}",
	    "{\"token\":1,\"expires_at\":\"2016-07-11T22:14:10Z\"}",
	    "{\"token\":\"t\",\"expires_at\":1468275250}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11 22:14:10Z\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T22:14:10\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-02-30T22:14:10Z\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-13-11T22:14:10Z\"}",
	    "{\"token\":\"t\",\"expires_at\":\"1969-07-11T22:14:10Z\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T24:14:10Z\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T22:14:10.Z\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T22:14:10+2:00\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T22:14:10ZZ\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T22:14:10Z\"} x",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T22:14:10Z\",}",
	    "{\"token\":\"t\\ud800\",\"expires_at\":\"2016-07-11T22:14:10Z\"}",
	    "{\"token\":\"t\",\"expires_at\":\"2016-07-11T22:14:10Z\","
	    "\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]"
	    "]]]]]]]]]]]]]}",
	    "{\"message\":\"Bad credentials\",\"documentation_url\":\"x\"}",
	};
	struct vault_ghtoken t;
	struct err e;
	char buf[512];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(vault_ghtoken_parse((const uint8_t *)bad[i],
		                     strlen(bad[i]), buf, sizeof(buf), &t, &e),
		    -1);
		assert_null(t.token);
		assert_int_equal(
		    strncmp(e.msg, "installation token response: ", 29), 0);
		/* the body's words never reach the message */
		assert_null(strstr(e.msg, "Bad credentials"));
	}
}

/* ---- a key and a policy ---- */

struct keyfile {
	char dir[64], path[96];
	EVP_PKEY *k;
};

static void
key_make(struct keyfile *kf, unsigned bits)
{
	BIO *b;
	FILE *f;
	char *pem;
	long n;

	snprintf(kf->dir, sizeof(kf->dir), "/tmp/egressd-gh-XXXXXX");
	assert_non_null(mkdtemp(kf->dir));
	snprintf(kf->path, sizeof(kf->path), "%s/app.pem", kf->dir);
	assert_non_null(kf->k = EVP_RSA_gen(bits));
	assert_non_null(b = BIO_new(BIO_s_mem()));
	assert_int_equal(
	    PEM_write_bio_PrivateKey(b, kf->k, NULL, NULL, 0, NULL, NULL), 1);
	n = BIO_get_mem_data(b, &pem);
	assert_non_null(f = fopen(kf->path, "w"));
	assert_int_equal(fwrite(pem, 1, (size_t)n, f), (size_t)n);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(kf->path, 0600), 0);
	BIO_free(b);
}

static void
key_remove(struct keyfile *kf)
{
	unlink(kf->path);
	rmdir(kf->dir);
	EVP_PKEY_free(kf->k);
}

static char *
read_all(const char *path, size_t *n)
{
	FILE *f = fopen(path, "r");
	char *s = calloc(1, 8192);

	assert_non_null(f);
	*n = fread(s, 1, 8191, f);
	fclose(f);
	return s;
}

#define GH_ALLOW                                                               \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.github.com}\n"                        \
	"  - {action: allow, target: github.com}\n"

static struct policy *
gh_policy(const char *keypath, const char *extra)
{
	char y[2048];

	snprintf(y, sizeof(y),
	    GH_ALLOW "credentials:\n"
	             "  - {name: app, source: {type: file, path: '%s'}}\n"
	             "bindings:\n"
	             "  - name: gh\n"
	             "    match: {hosts: [api.github.com, github.com]}\n"
	             "    auth:\n"
	             "      type: githubApp\n"
	             "      appId: 12345\n"
	             "      installationId: 678\n"
	             "      privateKey: app\n%s",
	    keypath, extra);
	return ts_policy_yaml(y, "gh.yaml");
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

#define GH_BINDING(auth)                                                       \
	GH_ALLOW "credentials:\n"                                              \
	         "  - {name: app, source: {type: file, path: /k.pem}}\n"       \
	         "  - {name: inl, source: {type: inline, value: k}}\n"         \
	         "bindings:\n"                                                 \
	         "  - name: gh\n"                                              \
	         "    match: {hosts: [api.github.com]}\n"                      \
	         "    auth: {type: githubApp, " auth "}\n"

static void
test_policy_github(void **state)
{
	static const char *const bad[] = {
	    GH_BINDING("installationId: 1, privateKey: app"),
	    GH_BINDING("appId: 1, privateKey: app"),
	    GH_BINDING("appId: 1, installationId: 1"),
	    GH_BINDING("appId: 1, installationId: 0, privateKey: app"),
	    GH_BINDING("appId: 'a b', installationId: 1, privateKey: app"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: inl"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: nope"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "apiUrl: 'https://ghe.example.com/api/v3'"), /* host */
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "apiUrl: 'https://api.github.com/?x=1'"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "apiUrl: 'http://api.github.com'"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "permissions: {contents: all}"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "permissions: {'con tents': read}"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "repositories: ['o/r']"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "tokenForm: token"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "grant: client_credentials"),
	    GH_BINDING("appId: 1, installationId: 1, privateKey: app, "
	               "credential: inl"),
	    GH_ALLOW "bindings:\n"
	             "  - name: b\n"
	             "    match: {hosts: [api.github.com]}\n"
	             "    auth: {type: bearer, credential: x, appId: 1}\n",
	};
	const struct policy_github *g;
	const struct policy *pp;
	struct policy *p;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_true(refused(bad[i]));
	p = ts_policy_yaml(
	    GH_BINDING(
	        "appId: Iv23li.x-y_z, installationId: '9007199254740991',"
	        " privateKey: app, repositories: [r1, r.2], "
	        "permissions: {contents: read, pull_requests: write}, "
	        "tokenForm: bearer"),
	    "ok.yaml");
	assert_non_null(p);
	pp = p;
	assert_non_null(g = policy_binding_github(pp->bindings[0]));
	assert_string_equal(g->app_id, "Iv23li.x-y_z");
	assert_true(g->installation_id == 9007199254740991ull);
	assert_string_equal(g->host, "api.github.com");
	assert_string_equal(g->base, "");
	assert_int_equal(g->port, 443);
	assert_int_equal(g->nrepos, 2);
	assert_int_equal(g->nperms, 2);
	assert_string_equal(g->perm_levels[1], "write");
	assert_int_equal(g->form, POLICY_GITHUB_FORM_BEARER);
	/* written back as YAML and read again: the same settings */
	{
		char *y = policy_to_yaml(p);
		struct policy *p2;

		assert_non_null(y);
		assert_non_null(p2 = ts_policy_yaml(y, "again.yaml"));
		assert_true(policy_github_same(g,
		    policy_binding_github(
		        ((const struct policy *)p2)->bindings[0])));
		policy_unref(p2);
		free(y);
	}
	policy_unref(p);
}

/* ---- the JWT and the request ---- */

static size_t
b64url_dec(const char *s, size_t n, uint8_t *out)
{
	char tmp[2048];
	size_t i, m = n;
	int r;

	assert_true(n + 3 < sizeof(tmp));
	for (i = 0; i < n; i++)
		tmp[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (m % 4 != 0)
		tmp[m++] = '=';
	r = EVP_DecodeBlock(out, (const uint8_t *)tmp, (int)m);
	assert_true(r >= 0);
	return (size_t)r - (m - n);
}

static void
test_github_jwt(void **state)
{
	struct keyfile kf;
	struct err e;
	char *pem, *jwt;
	const char *d1, *d2;
	uint8_t dec[1024];
	size_t n, jl, dl;
	EVP_MD_CTX *ctx;

	(void)state;
	key_make(&kf, 2048);
	pem = read_all(kf.path, &n);
	assert_int_equal(vault_github_key_check(pem, n, &e), 0);
	assert_int_equal(
	    vault_github_jwt(pem, n, "12345", 1700000000, &jwt, &jl, &e), 0);
	assert_int_equal(strlen(jwt), jl);
	assert_non_null(d1 = strchr(jwt, '.'));
	assert_non_null(d2 = strchr(d1 + 1, '.'));
	assert_null(strchr(jwt, '='));
	dl = b64url_dec(jwt, (size_t)(d1 - jwt), dec);
	assert_memory_equal(dec, "{\"alg\":\"RS256\",\"typ\":\"JWT\"}", dl);
	dl = b64url_dec(d1 + 1, (size_t)(d2 - d1 - 1), dec);
	dec[dl] = '\0';
	assert_string_equal((char *)dec,
	    "{\"iat\":1699999940,\"exp\":1700000540,\"iss\":\"12345\"}");
	/* the signature verifies with the public half */
	dl = b64url_dec(d2 + 1, jl - (size_t)(d2 + 1 - jwt), dec);
	assert_int_equal(dl, 256);
	assert_non_null(ctx = EVP_MD_CTX_new());
	assert_int_equal(
	    EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, kf.k), 1);
	assert_int_equal(EVP_DigestVerify(ctx, dec, dl, (const uint8_t *)jwt,
	                     (size_t)(d2 - jwt)),
	    1);
	EVP_MD_CTX_free(ctx);
	free(jwt);
	/* not a key, a short one: refused, the message holds none of it */
	assert_int_equal(vault_github_key_check(pem, 40, &e), -1);
	assert_null(strstr(e.msg, "BEGIN"));
	free(pem);
	key_remove(&kf);
	key_make(&kf, 1024);
	pem = read_all(kf.path, &n);
	assert_int_equal(vault_github_key_check(pem, n, &e), -1);
	assert_non_null(strstr(e.msg, "2048"));
	free(pem);
	key_remove(&kf);
}

static char *
request_of(struct vault *v)
{
	struct vault_oauth_req rq;
	struct err e;
	char *s;

	assert_int_equal(vault_oauth_request(v, "gh", &rq, &e), 0);
	assert_int_equal(rq.kind, VAULT_MINT_GITHUB);
	assert_string_equal(rq.grant, "githubApp");
	s = strndup((const char *)rq.bytes, rq.len);
	vault_oauth_request_clear(&rq);
	return s;
}

static void
test_github_request(void **state)
{
	struct keyfile kf;
	struct policy *p;
	struct vault *v;
	struct err e;
	char *s, *body;

	(void)state;
	key_make(&kf, 2048);
	p = gh_policy(kf.path, "");
	assert_non_null(p);
	assert_non_null(v = vault_new(p, NULL, &e));
	s = request_of(v);
	assert_non_null(strstr(s,
	    "POST /app/installations/678/access_tokens HTTP/1.1\r\n"
	    "Host: api.github.com\r\n"));
	assert_non_null(strstr(s, "Accept: application/vnd.github+json\r\n"));
	assert_non_null(strstr(s, "Content-Length: 0\r\n"));
	assert_non_null(
	    strstr(s, "Authorization: Bearer eyJhbGciOiJSUzI1NiIs"));
	assert_non_null(body = strstr(s, "\r\n\r\n"));
	assert_string_equal(body, "\r\n\r\n");
	free(s);
	vault_free(v);
	policy_unref(p);

	/* GitHub Enterprise's base, narrowed to repositories and
	 * permissions */
	p = gh_policy(kf.path,
	    "      apiUrl: https://api.github.com:8443/api/v3/\n"
	    "      repositories: [r1, r2]\n"
	    "      permissions: {contents: read, issues: write}\n");
	assert_non_null(p);
	assert_non_null(v = vault_new(p, NULL, &e));
	s = request_of(v);
	assert_non_null(strstr(s,
	    "POST /api/v3/app/installations/678/access_tokens HTTP/1.1\r\n"
	    "Host: api.github.com:8443\r\n"));
	assert_non_null(strstr(s, "Content-Length: 79\r\n"));
	assert_non_null(body = strstr(s, "\r\n\r\n"));
	assert_string_equal(body + 4,
	    "{\"repositories\":[\"r1\",\"r2\"],\"permissions\":{\"contents\":"
	    "\"read\",\"issues\":\"write\"}}");
	free(s);
	vault_free(v);
	policy_unref(p);
	key_remove(&kf);
}

/* ---- a binding's life ---- */

static uint64_t fake_now;

static uint64_t
fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static enum vault_decision
decide_at(struct vault *v, const char *host, const char *path,
    struct vault_inject *out)
{
	struct vault_req rq = {POLICY_SCHEME_HTTPS, host, 443, "GET", 3, path,
	    strlen(path), NULL, 0};
	struct err e;

	assert_int_equal(vault_decide(v, &rq, out, &e), 0);
	return out->decision;
}

static struct vault *
minted(struct vault *v, const char *json, int64_t now_s)
{
	struct vault_token t;
	struct vault *nv;
	struct err e;
	char buf[512];

	assert_int_equal(
	    vault_oauth_answer(VAULT_MINT_GITHUB, 201, (const uint8_t *)json,
	        strlen(json), buf, sizeof(buf), now_s, &t, &e),
	    0);
	assert_non_null(nv = vault_mint(v, "gh", &t, fake_now, &e));
	return nv;
}

static void
test_github_mint(void **state)
{
	static const char body[] = "{\"token\":\"ghs_TOKEN123\",\"expires_at\":"
	                           "\"2023-11-14T23:13:20Z\"}"; /* 1700003600 */
	struct vault_inject out;
	struct vault_token t;
	struct keyfile kf;
	struct policy *p;
	struct vault *v, *v2, *v3;
	struct err e;
	char buf[256], *pem;
	size_t n;

	(void)state;
	key_make(&kf, 2048);
	p = gh_policy(kf.path, "");
	assert_non_null(p);
	assert_non_null(v = vault_new(p, NULL, &e));
	vault_set_clock(v, fake_clock, NULL);
	fake_now = 1000;
	assert_int_equal(
	    decide_at(v, "api.github.com", "/repos/o/r", &out), VAULT_MINT);
	assert_null(out.lines);
	vault_inject_clear(v, &out);
	/* the endpoint's errors and a past expiry are refused */
	assert_int_equal(
	    vault_oauth_answer(VAULT_MINT_GITHUB, 401, (const uint8_t *)body,
	        strlen(body), buf, sizeof(buf), 1700000000, &t, &e),
	    -1);
	assert_string_equal(e.msg, "token endpoint answered 401");
	assert_int_equal(
	    vault_oauth_answer(VAULT_MINT_GITHUB, 201, (const uint8_t *)body,
	        strlen(body), buf, sizeof(buf), 1700003600, &t, &e),
	    -1);
	assert_null(t.access);

	v2 = minted(v, body, 1700000000); /* an hour to live */
	assert_int_equal(vault_oauth_expiry(v2, "gh"), 1000 + 3600000);
	assert_int_equal(decide_at(v2, "api.github.com", "/repos/o/r", &out),
	    VAULT_INJECTED);
	assert_string_equal(
	    out.lines, "Authorization: Bearer ghs_TOKEN123\r\n");
	vault_inject_clear(v2, &out);
	assert_int_equal(
	    decide_at(v2, "github.com", "/o/r.git/info/refs", &out),
	    VAULT_INJECTED);
	assert_string_equal(out.lines,
	    "Authorization: Basic eC1hY2Nlc3MtdG9rZW46Z2hzX1RPS0VOMTIz\r\n");
	vault_inject_clear(v2, &out);
	assert_int_equal(
	    decide_at(v2, "github.com", "/o/r.git/git-upload-pack", &out),
	    VAULT_INJECTED);
	assert_non_null(strstr(out.lines, "Basic "));
	vault_inject_clear(v2, &out);
	/* every form redacted: the token, its Basic form, the decoded
	 * pair, and the private key */
	assert_true(vault_redact_any(v2, "x ghs_TOKEN123 y", 16));
	assert_true(
	    vault_redact_any(v2, "eC1hY2Nlc3MtdG9rZW46Z2hzX1RPS0VOMTIz", 36));
	assert_true(vault_redact_any(v2, "x-access-token:ghs_TOKEN123", 27));
	pem = read_all(kf.path, &n);
	assert_true(vault_redact_any(v2, pem, n));
	free(pem);

	/* carried by a new revision; due 5 minutes before it expires */
	assert_non_null(v3 = vault_new(p, v2, &e));
	fake_now = 1000 + 3300000 - 1;
	assert_int_equal(
	    decide_at(v3, "api.github.com", "/user", &out), VAULT_INJECTED);
	vault_inject_clear(v3, &out);
	assert_int_equal(
	    decide_at(v3, "github.com", "/o/r.git/info/refs", &out),
	    VAULT_INJECTED);
	assert_non_null(strstr(out.lines, "Basic "));
	vault_inject_clear(v3, &out);
	fake_now++;
	assert_int_equal(
	    decide_at(v3, "api.github.com", "/user", &out), VAULT_MINT);
	vault_inject_clear(v3, &out);
	vault_free(v3);
	vault_free(v2);
	vault_free(v);
	policy_unref(p);

	/* tokenForm: bearer on git paths too */
	p = gh_policy(kf.path, "      tokenForm: bearer\n");
	assert_non_null(v = vault_new(p, NULL, &e));
	vault_set_clock(v, fake_clock, NULL);
	v2 = minted(v, body, 1700000000);
	assert_int_equal(
	    decide_at(v2, "github.com", "/o/r.git/info/refs", &out),
	    VAULT_INJECTED);
	assert_string_equal(
	    out.lines, "Authorization: Bearer ghs_TOKEN123\r\n");
	vault_inject_clear(v2, &out);
	vault_free(v2);
	vault_free(v);
	policy_unref(p);
	key_remove(&kf);
}

/* A key file that holds no key fails the revision, saying so. */
static void
test_github_bad_key(void **state)
{
	struct keyfile kf;
	struct policy *p;
	struct err e;
	FILE *f;

	(void)state;
	key_make(&kf, 2048);
	assert_non_null(f = fopen(kf.path, "w"));
	fputs("-----BEGIN PRIVATE KEY-----\nnot-base64-SECRETBYTES\n"
	      "-----END PRIVATE KEY-----\n",
	    f);
	fclose(f);
	p = gh_policy(kf.path, "");
	assert_non_null(p);
	assert_null(vault_new(p, NULL, &e));
	assert_non_null(strstr(e.msg, "privateKey \"app\""));
	assert_null(strstr(e.msg, "SECRETBYTES"));
	policy_unref(p);
	key_remove(&kf);
}

static void
test_github_basic_for(void **state)
{
	static const struct {
		const char *path;
		bool basic;
	} cases[] = {
	    {"/o/r.git/info/refs", true},
	    {"/o/r/info/refs", true},
	    {"/o/r.git/git-upload-pack", true},
	    {"/o/r.git/git-receive-pack", true},
	    {"/o/r.git/info/lfs/objects/batch", true},
	    {"/repos/o/r", false},
	    {"/repos/o/r/info/refsx", false},
	    {"/", false},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(vault_github_basic_for(POLICY_GITHUB_FORM_AUTO,
		                     cases[i].path, strlen(cases[i].path)),
		    cases[i].basic);
	assert_true(vault_github_basic_for(POLICY_GITHUB_FORM_BASIC, "/x", 2));
	assert_false(vault_github_basic_for(
	    POLICY_GITHUB_FORM_BEARER, "/info/refs", 10));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ghtoken_ok),
	    cmocka_unit_test(test_ghtoken_bad),
	    cmocka_unit_test(test_policy_github),
	    cmocka_unit_test(test_github_jwt),
	    cmocka_unit_test(test_github_request),
	    cmocka_unit_test(test_github_mint),
	    cmocka_unit_test(test_github_bad_key),
	    cmocka_unit_test(test_github_basic_for),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
