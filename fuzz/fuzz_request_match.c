/*
 * Fuzzes the request rule matcher (issue 37): the path patterns
 * (policy_glob_check, policy_glob_match) with the path normalizer, and
 * policy_match_request on a policy of one request rule. Input: pattern,
 * method and raw path, separated by NUL bytes. Invariants, from the
 * contract (policy_glob.h, policy.h), not from the matcher's code:
 *  - a refused pattern says why; an accepted one starts with '/', is its
 *    own normal form, has at most POLICY_GLOB_STARS_MAX stars and no "**";
 *  - a checked pattern without stars matches exactly itself; "P*" with
 *    no other star matches exactly the paths that start with P; nothing
 *    matches a path that does not start with the literal text before the
 *    first star; a pattern with no trailing star matches only paths of
 *    as many segments;
 *  - every answer equals a naive dynamic-programming matcher's (for
 *    inputs small enough to afford it);
 *  - the JSON loader takes {allow, a.test, methods: [M], paths: [P]}
 *    exactly when P is a checked pattern and M an upper-case token; then
 *    policy_match_request allows (method M, normal path) exactly when the
 *    pattern matches, says "path" otherwise, "method" for another method
 *    on a matching path, "invalid" for a path not in normal form, and the
 *    host-level verdict allows a.test.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fuzz/fuzz_check.h"
#include "policy/policy.h"
#include "policy/policy_glob.h"
#include "policy/policy_path.h"

#define FZ_PAT_MAX (POLICY_GLOB_MAX + 16)
#define FZ_METHOD_MAX 64
#define FZ_DP_MAX (1u << 18) /* pattern x path cells the model may use */

/* The next NUL-terminated field of data (the rest when no NUL). */
static size_t
field(const uint8_t **d, size_t *n, char *out, size_t cap)
{
	const uint8_t *z = memchr(*d, 0, *n);
	size_t l = z != NULL ? (size_t)(z - *d) : *n;

	if (l >= cap)
		l = cap - 1;
	memcpy(out, *d, l);
	out[l] = '\0';
	if (z != NULL) {
		*n -= (size_t)(z - *d) + 1;
		*d = z + 1;
	} else {
		*d += *n;
		*n = 0;
	}
	return l;
}

static bool
method_ok(const char *m)
{
	size_t i, n = strlen(m);

	if (n == 0 || n > POLICY_METHOD_TOKEN_MAX || m[0] < 'A' || m[0] > 'Z')
		return false;
	for (i = 1; i < n; i++)
		if (!((m[i] >= 'A' && m[i] <= 'Z') ||
		        (m[i] >= '0' && m[i] <= '9') || m[i] == '-' ||
		        m[i] == '_'))
			return false;
	return true;
}

/*
 * The model: dp over (pattern suffix, path suffix). A trailing '*'
 * matches any rest; another '*' any run of non-'/' bytes; anything else
 * itself. row[j]: pattern[i..] matches path[j..].
 */
static bool
model_match(const char *p, size_t pl, const char *s, size_t sl)
{
	static bool a[POLICY_REQ_PATH_MAX + 2], b[POLICY_REQ_PATH_MAX + 2];
	bool *next = a, *row = b, *t;
	size_t i, j;

	for (j = 0; j <= sl; j++)
		next[j] = j == sl;
	for (i = pl; i-- > 0;) {
		for (j = sl + 1; j-- > 0;) {
			if (p[i] == '*' && i == pl - 1)
				row[j] = true;
			else if (p[i] == '*')
				row[j] = next[j] ||
				    (j < sl && s[j] != '/' && row[j + 1]);
			else
				row[j] = j < sl && s[j] == p[i] && next[j + 1];
		}
		t = next;
		next = row;
		row = t;
	}
	return next[0];
}

static size_t
count(const char *s, char c)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == c;
	return n;
}

static void
check_pattern(const char *pat, size_t pl)
{
	static char norm[FZ_PAT_MAX + 1];
	struct err e = {""};

	check(pat[0] == '/');
	check(pl <= POLICY_GLOB_MAX);
	check(count(pat, '*') <= POLICY_GLOB_STARS_MAX);
	check(strstr(pat, "**") == NULL);
	check(
	    policy_path_normalize(pat, pl, norm, sizeof(norm), NULL, &e) == 0);
	check(strcmp(norm, pat) == 0);
}

static void
check_match(const char *pat, size_t pl, const char *path, size_t sl)
{
	bool m = policy_glob_match(pat, path);
	const char *star = strchr(pat, '*');
	size_t lit = star != NULL ? (size_t)(star - pat) : pl;

	if (star == NULL)
		check(m == (strcmp(pat, path) == 0));
	if (star == pat + pl - 1)
		check(m == (strncmp(pat, path, pl - 1) == 0));
	if (sl < lit || memcmp(pat, path, lit) != 0)
		check(!m);
	if (m && pat[pl - 1] != '*')
		check(count(pat, '/') == count(path, '/'));
	if ((pl + 1) * (sl + 1) <= FZ_DP_MAX) {
		if (m != model_match(pat, pl, path, sl))
			fprintf(stderr, "\"%s\" vs \"%s\": %d\n", pat, path, m);
		check(m == model_match(pat, pl, path, sl));
	}
}

/* The form compiled for the host answers as policy_match_request. */
static void
check_compiled(struct policy *p, const char *method, const char *norm)
{
	struct policy_req_verdict a, b;
	struct policy_host_rules *hr = policy_host_rules_new(p, "a.test", 443);

	check(hr != NULL);
	check(policy_host_rules_any(hr));
	check(policy_host_rules_for(hr, p, "a.test", 443));
	(void)policy_match_request(p, "a.test", 443, method, norm, &a);
	(void)policy_host_rules_match(hr, method, norm, &b);
	check(a.action == b.action && a.reason == b.reason &&
	    a.index == b.index && a.rule == b.rule);
	policy_host_rules_free(hr);
}

/* One rule {allow a.test, [method], [pat]}: loads exactly when both are
 * valid, then judges as the pattern matches. */
static void
check_policy(const char *pat, bool pat_ok, const char *method, const char *raw,
    const char *norm, bool norm_ok)
{
	static char json[FZ_PAT_MAX + FZ_METHOD_MAX + 256];
	struct policy_req_verdict v;
	struct policy_diag d;
	struct policy *p;
	int n;

	/* No quote or backslash: those could never be pattern or token, and
	 * would only make this JSON text something else. */
	if (strpbrk(pat, "\"\\") != NULL || strpbrk(method, "\"\\") != NULL)
		return;
	n = snprintf(json, sizeof(json),
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"a.test\","
	    "\"methods\":[\"%s\"],\"paths\":[\"%s\"]}]}",
	    method, pat);
	check(n > 0 && (size_t)n < sizeof(json));
	policy_diag_init(&d);
	p = policy_parse_json(json, (size_t)n, "fuzz", &d);
	check((p != NULL) == (pat_ok && method_ok(method)));
	check(p != NULL || d.n > 0);
	policy_diag_clear(&d);
	if (p == NULL)
		return;
	check(policy_match_domain(p, "a.test", NULL) == POLICY_ALLOW);
	check(policy_host_has_request_rules(p, "A.Test.", 443));
	if (norm_ok) {
		bool m = policy_glob_match(pat, norm);

		(void)policy_match_request(p, "a.test", 443, method, norm, &v);
		check(v.action == (m ? POLICY_ALLOW : POLICY_DENY));
		check(v.reason == (m ? POLICY_REQ_ALLOWED : POLICY_REQ_PATH));
		check(v.index == (m ? 0 : -1));
		(void)policy_match_request(
		    p, "a.test", 443, "X-OTHER", norm, &v);
		if (strcmp(method, "X-OTHER") != 0)
			check(v.reason ==
			    (m ? POLICY_REQ_METHOD : POLICY_REQ_PATH));
		check_compiled(p, method, norm);
		check_compiled(p, "X-OTHER", norm);
		check_compiled(p, "GET", norm);
	}
	(void)policy_match_request(p, "a.test", 443, method, raw, &v);
	if (!norm_ok || strcmp(raw, norm) != 0)
		check(v.reason == POLICY_REQ_INVALID);
	policy_unref(p);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char pat[FZ_PAT_MAX + 1], raw[POLICY_REQ_PATH_MAX + 1],
	    norm[POLICY_REQ_PATH_MAX + 1];
	char method[FZ_METHOD_MAX + 1];
	struct err e = {""};
	size_t pl, rl, nl = 0;
	bool pat_ok, norm_ok;

	pl = field(&data, &size, pat, sizeof(pat));
	(void)field(&data, &size, method, sizeof(method));
	if (size > POLICY_REQ_PATH_MAX)
		return 0;
	rl = field(&data, &size, raw, sizeof(raw));
	pat_ok = policy_glob_check(pat, &e) == 0;
	if (pat_ok)
		check_pattern(pat, pl);
	else
		check(e.msg[0] != '\0');
	norm_ok =
	    policy_path_normalize(raw, rl, norm, sizeof(norm), &nl, &e) == 0;
	/* the matcher takes any C strings without harm */
	(void)policy_glob_match(pat, raw);
	if (pat_ok && norm_ok)
		check_match(pat, pl, norm, nl);
	check_policy(pat, pat_ok, method, raw, norm, norm_ok);
	return 0;
}
