/*
 * vault.c: building a revision (inline and file values, the refusals),
 * the host pre-check, the per-request decision (match, precedence,
 * methods, schemes, ports, paths, refusals with their statuses) and the
 * rendering of each auth type with its remove list.
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

#include "ts_policy.h"
#include "vault/vault.h"

#define ALLOW                                                                  \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.example.com}\n"                       \
	"  - {action: allow, target: '*.example.com'}\n"                       \
	"  - {action: allow, target: plain.example.org}\n"                     \
	"  - {action: allow, target: basic.example.net}\n"

#define CREDS                                                                  \
	"credentials:\n"                                                       \
	"  - {name: k, source: {type: inline, value: s3cr3t-K}}\n"             \
	"  - {name: w, source: {type: inline, value: wild-W}}\n"               \
	"  - {name: b, source: {type: inline, value: dXNlcjpwYXNz}}\n"         \
	"  - {name: h1, source: {type: inline, value: hdr-one}}\n"             \
	"  - {name: h2, source: {type: inline, value: hdr-two}}\n"

/* Every auth type, exact and wildcard hosts, an http binding. */
static const char *const pol_all =
    ALLOW CREDS "bindings:\n"
                "  - name: chat\n"
                "    match: {hosts: [api.example.com], methods: [POST], "
                "paths: ['/v1/chat/*']}\n"
                "    auth: {type: bearer, credential: k}\n"
                "  - name: key\n"
                "    match: {hosts: [api.example.com], methods: [GET], "
                "paths: ['/v1/models']}\n"
                "    auth: {type: apiKey, name: X-Api-Key, credential: k}\n"
                "  - name: wild\n"
                "    match: {hosts: ['*.example.com'], methods: [GET]}\n"
                "    auth: {type: bearer, credential: w}\n"
                "  - name: basic\n"
                "    match: {hosts: [basic.example.net]}\n"
                "    auth: {type: basic, credential: b}\n"
                "  - name: custom\n"
                "    match: {schemes: [http], hosts: [plain.example.org], "
                "paths: ['/c/*']}\n"
                "    auth:\n"
                "      type: customHeaders\n"
                "      headers: [{name: X-One, credential: h1}, {name: "
                "X-Two, credential: h2}]\n"
                "  - name: pass\n"
                "    match: {schemes: [http], hosts: [plain.example.org], "
                "paths: ['/p/*']}\n"
                "    auth:\n"
                "      type: passthrough\n"
                "      substitutions:\n"
                "        - {credential: k, placeholder: PH_K, in: [header]}\n";

/* The revision of yaml built after prev (NULL: the first). */
static struct vault *
vault_after(const char *yaml, const struct vault *prev)
{
	struct policy *p = ts_policy_yaml(yaml, "v.yaml");
	struct err e;
	struct vault *v;

	err_clear(&e);
	v = vault_new(p, prev, &e);
	if (v == NULL)
		fail_msg("vault_new: %s", e.msg);
	/* The vault holds its own reference. */
	policy_unref(p);
	return v;
}

static struct vault *
vault_of(const char *yaml)
{
	return vault_after(yaml, NULL);
}

/* Decides; fails the test when vault_decide fails. vault_decide_bound
 * (the proxy's, once vault_host_bound said yes) decides the same for a
 * bound host, and injects nothing for another. */
static void
decide(struct vault *v, unsigned scheme, const char *host, uint16_t port,
    const char *method, const char *path, size_t plen, struct vault_inject *out)
{
	struct vault_req rq = {
	    scheme, host, port, method, strlen(method), path, plen, NULL, 0};
	struct vault_inject b;
	struct err e;

	err_clear(&e);
	if (vault_decide_bound(v, &rq, &b, &e) != 0)
		fail_msg("vault_decide_bound: %s", e.msg);
	if (vault_decide(v, &rq, out, &e) != 0)
		fail_msg("vault_decide: %s", e.msg);
	assert_non_null(out->reason);
	if (vault_host_bound(
	        v, host, port != 0 ? port : policy_scheme_port(scheme))) {
		assert_int_equal(b.decision, out->decision);
		assert_int_equal(b.status, out->status);
		assert_string_equal(b.reason, out->reason);
		assert_true(b.binding == out->binding);
		assert_int_equal(b.lines_len, out->lines_len);
		if (b.lines_len > 0)
			assert_memory_equal(b.lines, out->lines, b.lines_len);
	} else {
		assert_true(
		    b.decision != VAULT_INJECTED && b.decision != VAULT_MINT);
		assert_null(b.lines);
	}
	vault_inject_clear(v, &b);
}

/* The binding name, "none", "ambiguous", "400" or "403". */
static const char *
which(struct vault *v, unsigned scheme, const char *host, uint16_t port,
    const char *method, const char *path)
{
	static char buf[64];
	struct vault_inject out;

	decide(v, scheme, host, port, method, path, strlen(path), &out);
	switch (out.decision) {
	case VAULT_NO_MATCH:
		snprintf(buf, sizeof(buf), "none");
		assert_null(out.binding);
		assert_null(out.lines);
		break;
	case VAULT_INJECTED:
		snprintf(buf, sizeof(buf), "%s", out.binding);
		break;
	case VAULT_AMBIGUOUS:
		snprintf(buf, sizeof(buf), "ambiguous");
		break;
	case VAULT_REFUSED:
		snprintf(buf, sizeof(buf), "%d", out.status);
		assert_null(out.lines);
		break;
	case VAULT_MINT:
		snprintf(buf, sizeof(buf), "mint %s", out.binding);
		assert_null(out.lines);
		break;
	}
	vault_inject_clear(v, &out);
	return buf;
}

/* What every injection removes besides its own headers. */
#define OVERRIDES "x-http-method-override", "x-http-method", "x-method-override"

static bool
removes(const struct vault_inject *o, const char *name)
{
	size_t i;

	for (i = 0; i < o->nremove; i++)
		if (strcmp(o->remove[i], name) == 0)
			return true;
	return false;
}

static void
test_match(void **state)
{
	struct vault *v = vault_of(pol_all);
	const unsigned S = POLICY_SCHEME_HTTPS, H = POLICY_SCHEME_HTTP;

	(void)state;
	assert_int_equal(vault_nbindings(v), 6);
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "POST", "/v1/chat/x"), "chat");
	assert_string_equal(
	    which(v, S, "api.example.com", 0, "POST", "/v1/chat/x"), "chat");
	/* exact host beats the wildcard; elsewhere the wildcard's */
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "GET", "/v1/models"), "key");
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "GET", "/other"), "wild");
	assert_string_equal(
	    which(v, S, "cdn.example.com", 443, "GET", "/x"), "wild");
	/* the wildcard is strict: not the apex */
	assert_string_equal(
	    which(v, S, "example.com", 443, "GET", "/"), "none");
	assert_string_equal(
	    which(v, S, "evil-example.com", 443, "GET", "/"), "none");
	/* methods: exact tokens; the binding's list */
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "post", "/v1/chat/x"), "none");
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "PUT", "/v1/chat/x"), "none");
	assert_string_equal(
	    which(v, S, "cdn.example.com", 443, "DELETE", "/x"), "none");
	assert_string_equal(
	    which(v, S, "api.example.com", 443,
	        "POSTPOSTPOSTPOSTPOSTPOSTPOSTPOSTPOST", "/v1/chat/x"),
	    "none");
	/* paths: the prefix is "/v1/chat/" */
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "POST", "/v1/chatter"), "none");
	/* dot segments resolved before matching: no steering into /v1/chat/
	 * from outside, nor out of it */
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "POST", "/v1/chat/../../admin"),
	    "none");
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "POST", "/x/../v1/chat/y"),
	    "chat");
	/* scheme and port */
	assert_string_equal(
	    which(v, H, "api.example.com", 80, "POST", "/v1/chat/x"), "none");
	assert_string_equal(
	    which(v, S, "api.example.com", 8443, "POST", "/v1/chat/x"), "none");
	assert_string_equal(
	    which(v, H, "plain.example.org", 80, "GET", "/c/1"), "custom");
	assert_string_equal(
	    which(v, S, "plain.example.org", 443, "GET", "/c/1"), "none");
	assert_string_equal(
	    which(v, H, "plain.example.org", 8080, "GET", "/c/1"), "none");
	/* an address literal is never bound */
	assert_string_equal(
	    which(v, S, "203.0.113.7", 443, "GET", "/"), "none");
	vault_free(v);
}

static void
test_bad_paths(void **state)
{
	static const char *const bad[] = {
	    "/v1/chat/a%2fb",
	    "/v1/chat/a%2Fb",
	    "/v1/chat/a%5cb",
	    "/v1/chat/a\\b",
	    "/v1/chat/a%00b",
	    "/v1//chat/x",
	    "/v1/chat/..;/x",
	    "/v1/chat/..%3B/x",
	    "/v1/chat/.%3b/x",
	    "/v1/chat/%2e;/x",
	    "/v1/chat/%252e%252e/x",
	    "/v1/chat/a b",
	    "v1/chat/x",
	    "",
	};
	struct vault *v = vault_of(pol_all);
	struct vault_inject out;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		decide(v, POLICY_SCHEME_HTTPS, "api.example.com", 443, "POST",
		    bad[i], strlen(bad[i]), &out);
		if (out.decision != VAULT_REFUSED || out.status != 400)
			fail_msg("\"%s\": decision %d status %d", bad[i],
			    out.decision, out.status);
		assert_string_equal(out.reason, "request path not acceptable");
		assert_null(out.lines);
		assert_null(out.norm_path);
		vault_inject_clear(v, &out);
	}
	/* a NUL inside the length */
	decide(v, POLICY_SCHEME_HTTPS, "api.example.com", 443, "POST",
	    "/v1/chat/\0x", 11, &out);
	assert_int_equal(out.decision, VAULT_REFUSED);
	assert_int_equal(out.status, 400);
	vault_inject_clear(v, &out);
	/* not bound: forwarded as it came (nothing to protect) */
	decide(v, POLICY_SCHEME_HTTPS, "unbound.example.org", 443, "POST",
	    "/a%2fb", 6, &out);
	assert_int_equal(out.decision, VAULT_NO_MATCH);
	assert_null(out.norm_path);
	vault_inject_clear(v, &out);
	/* %2e%2e is resolved, not refused, and the result forwarded */
	decide(v, POLICY_SCHEME_HTTPS, "api.example.com", 443, "POST",
	    "/v1/chat/%2e%2e/%2E%2e/admin", 28, &out);
	assert_int_equal(out.decision, VAULT_NO_MATCH);
	assert_string_equal(out.norm_path, "/admin");
	assert_int_equal(out.norm_path_len, 6);
	vault_inject_clear(v, &out);
	decide(v, POLICY_SCHEME_HTTPS, "api.example.com", 443, "POST",
	    "/v1/%63hat/./x", 14, &out);
	assert_int_equal(out.decision, VAULT_INJECTED);
	assert_string_equal(out.norm_path, "/v1/chat/x");
	vault_inject_clear(v, &out);
	vault_free(v);
}

static void
test_trace(void **state)
{
	struct vault *v = vault_of(pol_all);
	struct vault_inject out;
	const unsigned S = POLICY_SCHEME_HTTPS;

	(void)state;
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "TRACE", "/v1/chat/x"), "403");
	assert_string_equal(
	    which(v, S, "api.example.com", 443, "TRACK", "/"), "403");
	assert_string_equal(
	    which(v, S, "cdn.example.com", 443, "trace", "/"), "403");
	assert_string_equal(which(v, POLICY_SCHEME_HTTP, "plain.example.org",
	                        80, "TRACE", "/anything"),
	    "403");
	/* to a host no binding names: not the vault's business */
	assert_string_equal(
	    which(v, S, "other.example.org", 443, "TRACE", "/"), "none");
	decide(v, S, "api.example.com", 443, "TRACE", "/", 1, &out);
	assert_int_equal(out.decision, VAULT_REFUSED);
	assert_null(out.lines);
	assert_true(removes(&out, "proxy-authorization"));
	vault_inject_clear(v, &out);
	vault_free(v);
}

static void
test_host_bound(void **state)
{
	struct vault *v = vault_of(pol_all);

	(void)state;
	assert_true(vault_host_bound(v, "api.example.com", 443));
	assert_true(vault_host_bound(v, "a.b.example.com", 443));
	assert_true(vault_host_bound(v, "API.Example.com.", 443));
	assert_false(vault_host_bound(v, "example.com", 443));
	assert_false(vault_host_bound(v, "api.example.com", 80));
	assert_false(vault_host_bound(v, "api.example.com", 8443));
	assert_true(vault_host_bound(v, "plain.example.org", 80));
	assert_false(vault_host_bound(v, "plain.example.org", 443));
	assert_true(vault_host_bound(v, "basic.example.net", 443));
	assert_false(vault_host_bound(v, "x.basic.example.net", 443));
	assert_false(vault_host_bound(v, "203.0.113.7", 443));
	assert_false(vault_host_bound(v, "*.example.com", 443));
	assert_false(vault_host_bound(v, "", 443));
	assert_false(vault_host_bound(v, NULL, 443));
	vault_free(v);
}

static void
expect_lines(struct vault *v, unsigned scheme, const char *host, uint16_t port,
    const char *method, const char *path, const char *binding,
    const char *lines, const char *const *rm, size_t nrm)
{
	struct vault_inject out;
	size_t i;

	decide(v, scheme, host, port, method, path, strlen(path), &out);
	assert_int_equal(out.decision, VAULT_INJECTED);
	assert_int_equal(out.status, 0);
	assert_string_equal(out.binding, binding);
	assert_string_equal(out.reason, "credential injected");
	if (lines == NULL) {
		assert_null(out.lines);
		assert_int_equal(out.lines_len, 0);
	} else {
		assert_non_null(out.lines);
		assert_int_equal(out.lines_len, strlen(lines));
		assert_memory_equal(out.lines, lines, strlen(lines));
	}
	if (out.nremove != nrm)
		fail_msg("%s: %zu names to remove, expected %zu", binding,
		    out.nremove, nrm);
	for (i = 0; i < nrm; i++)
		if (!removes(&out, rm[i]))
			fail_msg("%s: does not remove %s", binding, rm[i]);
	vault_inject_clear(v, &out);
	assert_null(out.lines);
	assert_null(out.norm_path);
}

static void
test_render(void **state)
{
	static const char *const auth[] = {
	    "proxy-authorization", "authorization", OVERRIDES};
	static const char *const key[] = {
	    "proxy-authorization", "x-api-key", OVERRIDES};
	static const char *const custom[] = {
	    "proxy-authorization", "x-one", "x-two", OVERRIDES};
	static const char *const pass[] = {"proxy-authorization", OVERRIDES};
	struct vault *v = vault_of(pol_all);
	const unsigned S = POLICY_SCHEME_HTTPS, H = POLICY_SCHEME_HTTP;

	(void)state;
	expect_lines(v, S, "api.example.com", 443, "POST", "/v1/chat/c", "chat",
	    "Authorization: Bearer s3cr3t-K\r\n", auth, 5);
	expect_lines(v, S, "api.example.com", 443, "GET", "/v1/models", "key",
	    "X-Api-Key: s3cr3t-K\r\n", key, 5);
	expect_lines(v, S, "x.example.com", 443, "GET", "/", "wild",
	    "Authorization: Bearer wild-W\r\n", auth, 5);
	expect_lines(v, S, "basic.example.net", 443, "PUT", "/u", "basic",
	    "Authorization: Basic dXNlcjpwYXNz\r\n", auth, 5);
	expect_lines(v, H, "plain.example.org", 80, "PATCH", "/c/", "custom",
	    "X-One: hdr-one\r\nX-Two: hdr-two\r\n", custom, 6);
	expect_lines(
	    v, H, "plain.example.org", 0, "GET", "/p/x", "pass", NULL, pass, 4);
	vault_free(v);
}

/* The decision for a GET of /v1/models (binding "key") with query q. */
static enum vault_decision
decide_query(
    struct vault *v, const char *path, const char *q, struct vault_inject *out)
{
	struct vault_req rq = {POLICY_SCHEME_HTTPS, "api.example.com", 443,
	    "GET", 3, path, strlen(path), q, q != NULL ? strlen(q) : 0};
	struct err e;

	err_clear(&e);
	if (vault_decide(v, &rq, out, &e) != 0)
		fail_msg("vault_decide: %s", e.msg);
	return out->decision;
}

/* "_method" in the query of a request that would be injected: refused,
 * in every spelling a framework reads as that name; other names pass. */
static void
test_query_method_override(void **state)
{
	static const char *const bad[] = {
	    "_method=POST",
	    "_method",
	    "_method=",
	    "a=1&_method=DELETE",
	    "a=1;_method=DELETE",
	    "_METHOD=put",
	    "_Method=put",
	    "%5Fmethod=post",
	    "%5fMETHOD=post",
	    "_%6Dethod=post",
	    "%5F%6D%65%74%68%6F%64=post",
	    "+_method=post",
	    "%20_method=post",
	    ".method=post",
	    "%2Emethod=post",
	    "[method=post",
	    "x=1&&_method=post",
	};
	static const char *const good[] = {
	    NULL, "", "method=post", "_methods=post", "_metho=post",
	    "a_method=post", "x=_method", "x=1&y=_method=post",
	    "%5Fmethod%=post", "%255Fmethod=post", "_method_=post",
	    "+method=post", /* PHP drops leading spaces: "method" */
	};
	struct vault *v = vault_of(pol_all);
	struct vault_inject out;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (decide_query(v, "/v1/models", bad[i], &out) !=
		        VAULT_REFUSED ||
		    out.status != 400)
			fail_msg("\"%s\": decision %d status %d", bad[i],
			    out.decision, out.status);
		assert_string_equal(out.reason,
		    "method override in the query of a credential request");
		assert_null(out.lines);
		assert_null(out.norm_path);
		assert_true(removes(&out, "proxy-authorization"));
		vault_inject_clear(v, &out);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (decide_query(v, "/v1/models", good[i], &out) !=
		    VAULT_INJECTED)
			fail_msg("\"%s\": decision %d status %d",
			    good[i] != NULL ? good[i] : "(none)", out.decision,
			    out.status);
		assert_true(removes(&out, "x-http-method-override"));
		assert_true(removes(&out, "x-http-method"));
		assert_true(removes(&out, "x-method-override"));
		vault_inject_clear(v, &out);
	}
	/* Not the vault's business where nothing is injected. */
	{
		struct vault_req rq = {POLICY_SCHEME_HTTPS, "api.example.com",
		    443, "POST", 4, "/other", 6, "_method=GET", 11};
		struct err e;

		assert_int_equal(vault_decide(v, &rq, &out, &e), 0);
		assert_int_equal(out.decision, VAULT_NO_MATCH);
		assert_false(removes(&out, "x-http-method-override"));
		vault_inject_clear(v, &out);
	}
	vault_free(v);
}

static void
test_no_match_removes_proxy_auth(void **state)
{
	struct vault *v = vault_of(pol_all);
	struct vault_inject out;

	(void)state;
	decide(v, POLICY_SCHEME_HTTPS, "nowhere.example.org", 443, "GET", "/",
	    1, &out);
	assert_int_equal(out.decision, VAULT_NO_MATCH);
	assert_int_equal(out.nremove, 1);
	assert_string_equal(out.remove[0], "proxy-authorization");
	assert_string_equal(out.norm_path, "/");
	vault_inject_clear(v, &out);
	vault_free(v);
}

/* Lines held without clearing exhaust the arena's room for them: the
 * decision fails (never a truncated line), and clearing gives it back. */
static void
test_inflight_bound(void **state)
{
	static struct vault_inject held[4096];
	struct vault *v = vault_of(pol_all);
	struct vault_req rq = {POLICY_SCHEME_HTTPS, "api.example.com", 443,
	    "POST", 4, "/v1/chat/x", 10, NULL, 0};
	struct err e;
	size_t n, i;

	(void)state;
	for (n = 0; n < 4096; n++) {
		err_clear(&e);
		if (vault_decide(v, &rq, &held[n], &e) == -1)
			break;
		assert_int_equal(held[n].decision, VAULT_INJECTED);
	}
	if (n < VAULT_LINES_INFLIGHT || n == 4096)
		fail_msg("%zu injections held", n);
	assert_non_null(strstr(e.msg, "arena full"));
	vault_inject_clear(v, &held[n]);
	for (i = 0; i < n; i++)
		vault_inject_clear(v, &held[i]);
	assert_int_equal(vault_decide(v, &rq, &held[0], &e), 0);
	assert_int_equal(held[0].decision, VAULT_INJECTED);
	vault_inject_clear(v, &held[0]);
	vault_free(v);
}

static void
test_refs(void **state)
{
	struct vault *v = vault_of(pol_all);

	(void)state;
	assert_ptr_equal(vault_ref(v), v);
	vault_free(v);
	/* still usable: one reference left */
	assert_true(vault_host_bound(v, "api.example.com", 443));
	assert_int_equal(vault_policy(v)->nbindings, 6);
	vault_free(v);
	vault_free(NULL);
}

static void
test_empty(void **state)
{
	struct vault *v = vault_of("defaultAction: allow\n");
	struct vault_inject out;

	(void)state;
	assert_int_equal(vault_nbindings(v), 0);
	assert_false(vault_host_bound(v, "api.example.com", 443));
	decide(v, POLICY_SCHEME_HTTPS, "api.example.com", 443, "TRACE", "/", 1,
	    &out);
	assert_int_equal(out.decision, VAULT_NO_MATCH);
	vault_inject_clear(v, &out);
	vault_free(v);
}

/* ---- file sources ---- */

struct tmp {
	char dir[256];
	char data[300], target[400], link[400];
};

static void
write_file(const char *path, const char *s, size_t n, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(s, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

/* dir/..data/tok (the value) and dir/tok -> ..data/tok, as a Kubernetes
 * Secret volume lays them out. */
static void
tmp_make(struct tmp *t, const char *value, size_t n, mode_t mode)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/egressd-vault-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->data, sizeof(t->data), "%s/..data", t->dir);
	assert_int_equal(mkdir(t->data, 0755), 0);
	snprintf(t->target, sizeof(t->target), "%s/tok", t->data);
	snprintf(t->link, sizeof(t->link), "%s/tok", t->dir);
	write_file(t->target, value, n, mode);
	assert_int_equal(symlink("..data/tok", t->link), 0);
}

static void
tmp_remove(struct tmp *t)
{
	unlink(t->link);
	unlink(t->target);
	rmdir(t->data);
	rmdir(t->dir);
}

static struct policy *
file_policy(const char *path)
{
	char y[2048];

	snprintf(y, sizeof(y),
	    ALLOW "credentials:\n"
	          "  - {name: f, source: {type: file, path: '%s'}}\n"
	          "bindings:\n"
	          "  - name: fb\n"
	          "    match: {hosts: [api.example.com]}\n"
	          "    auth: {type: bearer, credential: f}\n",
	    path);
	return ts_policy_yaml(y, "f.yaml");
}

/* A revision whose credential k has value val (bound to api.example.com),
 * built after prev (NULL: the first). */
static struct vault *
rotated(const char *val, const struct vault *prev)
{
	char yaml[1024];

	snprintf(yaml, sizeof(yaml),
	    ALLOW "credentials:\n"
	          "  - {name: k, source: {type: inline, value: %s}}\n"
	          "bindings:\n"
	          "  - name: b\n"
	          "    match: {hosts: [api.example.com]}\n"
	          "    auth: {type: bearer, credential: k}\n",
	    val);
	return vault_after(yaml, prev);
}

/* Does v mask val in a response header (its raw form)? */
static bool
masks(const struct vault *v, const char *val)
{
	char in[128];
	size_t n, hl;
	char *h;
	bool r;

	n = (size_t)snprintf(in, sizeof(in), "key %s was revoked", val);
	h = vault_redact_header(v, in, n, &hl);
	r = h != NULL && strstr(h, val) == NULL;
	free(h);
	return r;
}

/*
 * Rotation: the revision after keeps redacting the value it replaced
 * (carried on through later revisions), never injects it, holds a value
 * once however often it comes back, and keeps the VAULT_RETIRED_MAX most
 * recent.
 */
static void
test_retired(void **state)
{
	static const char *const auth[] = {
	    "proxy-authorization", "authorization", OVERRIDES};
	struct vault *v1, *v2, *v3, *v4, *v;
	char val[32];
	size_t i;

	(void)state;
	v1 = rotated("old-K3Y-one", NULL);
	assert_int_equal(vault_nretired(v1), 0);
	assert_false(masks(v1, "new-K3Y-two"));
	v2 = rotated("new-K3Y-two", v1);
	assert_int_equal(vault_nretired(v2), 1);
	assert_true(masks(v2, "old-K3Y-one"));
	assert_true(masks(v2, "new-K3Y-two"));
	expect_lines(v2, POLICY_SCHEME_HTTPS, "api.example.com", 443, "GET",
	    "/x", "b", "Authorization: Bearer new-K3Y-two\r\n", auth, 5);
	/* the base64 form of a retired value is masked too */
	assert_true(masks(v2, "b2xkLUszWS1vbmU"));
	/* an unrelated change (same value) carries the retired one on */
	vault_free(v1);
	v3 = rotated("new-K3Y-two", v2);
	assert_int_equal(vault_nretired(v3), 1);
	assert_true(masks(v3, "old-K3Y-one"));
	/* rotated back: the old value is live again, the other retired,
	 * each held once */
	v4 = rotated("old-K3Y-one", v3);
	assert_int_equal(vault_nretired(v4), 1);
	assert_true(masks(v4, "new-K3Y-two"));
	expect_lines(v4, POLICY_SCHEME_HTTPS, "api.example.com", 443, "GET",
	    "/x", "b", "Authorization: Bearer old-K3Y-one\r\n", auth, 5);
	vault_free(v2);
	vault_free(v3);
	/* many rotations: the VAULT_RETIRED_MAX most recent stay */
	v = v4;
	for (i = 0; i < VAULT_RETIRED_MAX + 4; i++) {
		struct vault *n;

		snprintf(val, sizeof(val), "rot-%02zu-value", i);
		n = rotated(val, v);
		vault_free(v);
		v = n;
	}
	assert_int_equal(vault_nretired(v), VAULT_RETIRED_MAX);
	for (i = 0; i < VAULT_RETIRED_MAX + 4; i++) {
		snprintf(val, sizeof(val), "rot-%02zu-value", i);
		if (masks(v, val) != (i >= 3))
			fail_msg("%s: masked %d", val, !masks(v, val));
	}
	assert_false(masks(v, "old-K3Y-one"));
	assert_false(masks(v, "new-K3Y-two"));
	vault_free(v);
}

static void
test_file_source(void **state)
{
	struct tmp t;
	struct policy *p;
	struct vault *v;
	struct err e;

	(void)state;
	tmp_make(&t, "file-T0KEN\n", 11, 0600);
	p = file_policy(t.link);
	err_clear(&e);
	v = vault_new(p, NULL, &e);
	if (v == NULL)
		fail_msg("vault_new: %s", e.msg);
	expect_lines(v, POLICY_SCHEME_HTTPS, "api.example.com", 443, "GET",
	    "/x", "fb", "Authorization: Bearer file-T0KEN\r\n",
	    (const char *const[]){
	        "proxy-authorization", "authorization", OVERRIDES},
	    5);
	vault_free(v);
	policy_unref(p);
	tmp_remove(&t);
}

/* A file vault_new must refuse; e names the credential, never the value. */
static void
file_refused(const char *value, size_t n, mode_t mode, const char *why)
{
	struct tmp t;
	struct policy *p;
	struct err e;

	tmp_make(&t, value, n, mode);
	p = file_policy(t.link);
	err_clear(&e);
	assert_null(vault_new(p, NULL, &e));
	if (strstr(e.msg, why) == NULL)
		fail_msg("expected \"%s\" in: %s", why, e.msg);
	assert_non_null(strstr(e.msg, "credential \"f\""));
	assert_null(strstr(e.msg, "SECRETBYTES"));
	policy_unref(p);
	tmp_remove(&t);
}

static void
test_file_refused(void **state)
{
	static char big[POLICY_SECRET_MAX + 10];

	(void)state;
	file_refused("SECRETBYTES\rx", 13, 0600, "without CR, LF or NUL");
	file_refused("SECRETBYTES\nx", 13, 0600, "without CR, LF or NUL");
	file_refused("SECRET\0BYTES", 12, 0600, "without CR, LF or NUL");
	file_refused("\n", 1, 0600, "1 to");
	file_refused("", 0, 0600, "1 to");
	file_refused("SECRETBYTES", 11, 0620, "writable by group");
	memset(big, 'A', sizeof(big));
	memcpy(big, "SECRETBYTES", 11);
	file_refused(big, sizeof(big), 0600, "longer than");
	/* a value of exactly POLICY_SECRET_MAX bytes plus "\r\n" loads */
	{
		struct tmp t;
		struct policy *p;
		struct vault *v;
		struct err e;

		memset(big, 'A', POLICY_SECRET_MAX);
		memcpy(big + POLICY_SECRET_MAX, "\r\n", 2);
		tmp_make(&t, big, POLICY_SECRET_MAX + 2, 0600);
		p = file_policy(t.link);
		v = vault_new(p, NULL, &e);
		if (v == NULL)
			fail_msg("vault_new: %s", e.msg);
		vault_free(v);
		policy_unref(p);
		tmp_remove(&t);
	}
}

/*
 * Values whose pieces exceed the redactor's bounds (VAULT_PATTERNS_MAX):
 * vault_new fails cleanly, and its message names no value. A value of
 * 16000 letters makes some 256 Ki patterns (16 per byte): one loads,
 * five do not.
 */
static void
test_pattern_bound(void **state)
{
	static char yaml[5 * 16000 + 1024];
	struct policy *p;
	struct vault *v;
	struct err e;
	size_t o, k, i;

	(void)state;
	for (k = 1; k <= 5; k += 4) {
		o = (size_t)snprintf(yaml, sizeof(yaml), "credentials:\n");
		for (i = 0; i < k; i++) {
			o += (size_t)snprintf(yaml + o, sizeof(yaml) - o,
			    "  - {name: c%zu, source: {type: inline, value: "
			    "SECRETBYTES%zu",
			    i, i);
			memset(yaml + o, 'a' + (char)i, 16000);
			o += 16000;
			o += (size_t)snprintf(
			    yaml + o, sizeof(yaml) - o, "}}\n");
		}
		p = ts_policy_yaml(yaml, "v.yaml");
		err_clear(&e);
		v = vault_new(p, NULL, &e);
		if (k == 1) {
			if (v == NULL)
				fail_msg("vault_new: %s", e.msg);
		} else {
			assert_null(v);
			assert_non_null(strstr(e.msg, "too large to redact"));
			assert_null(strstr(e.msg, "SECRETBYTES"));
			assert_null(strstr(e.msg, "aaaaaaaa"));
		}
		vault_free(v);
		policy_unref(p);
	}
}

static void
test_file_missing(void **state)
{
	struct policy *p = file_policy("/nonexistent/egressd-vault/tok");
	struct err e;

	(void)state;
	err_clear(&e);
	assert_null(vault_new(p, NULL, &e));
	assert_non_null(strstr(e.msg, "credential \"f\""));
	assert_non_null(strstr(e.msg, "/nonexistent/egressd-vault/tok"));
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_match),
	    cmocka_unit_test(test_bad_paths),
	    cmocka_unit_test(test_trace),
	    cmocka_unit_test(test_host_bound),
	    cmocka_unit_test(test_render),
	    cmocka_unit_test(test_query_method_override),
	    cmocka_unit_test(test_no_match_removes_proxy_auth),
	    cmocka_unit_test(test_inflight_bound),
	    cmocka_unit_test(test_refs),
	    cmocka_unit_test(test_empty),
	    cmocka_unit_test(test_retired),
	    cmocka_unit_test(test_file_source),
	    cmocka_unit_test(test_file_refused),
	    cmocka_unit_test(test_pattern_bound),
	    cmocka_unit_test(test_file_missing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
