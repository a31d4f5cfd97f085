/*
 * Fuzzes name normalization, target parsing and the domain matcher.
 * Input: "TARGET\nNAME". A policy allows TARGET and denies *.deny.test;
 * invariants:
 *  - normalization is idempotent, case-insensitive and ignores one
 *    trailing dot;
 *  - the decision for NAME is the same for NAME in upper case and for
 *    NAME with a trailing dot;
 *  - a name equal to a domain TARGET, or directly under a wildcard
 *    TARGET, is allowed; names under *.deny.test are denied unless the
 *    TARGET rule (first in list order) matches them;
 *  - a name that does not normalize is denied.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

#define FZ_NAME_MAX 600

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fz_fail(const char *what, const char *a, const char *b)
{
	fprintf(stderr, "invariant violated: %s [%s] [%s]\n", what, a ? a : "",
	    b ? b : "");
	abort();
}

/* JSON string body with every byte outside printable ASCII escaped. */
static void
json_escape(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	for (; *in != '\0' && o + 7 < outlen; in++) {
		unsigned char c = (unsigned char)*in;
		if (c == '"' || c == '\\')
			o += (size_t)snprintf(out + o, outlen - o, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			o +=
			    (size_t)snprintf(out + o, outlen - o, "\\u%04x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
}

static struct policy *
build(const char *target)
{
	char esc[FZ_NAME_MAX * 6 + 1], j[FZ_NAME_MAX * 6 + 200];
	struct policy_diag d;
	struct policy *p;

	json_escape(target, esc, sizeof(esc));
	(void)snprintf(j, sizeof(j),
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"%s\"},"
	    "{\"action\":\"deny\",\"target\":\"*.deny.test\"}]}",
	    esc);
	policy_diag_init(&d);
	p = policy_parse_json(j, strlen(j), "fuzz", &d);
	policy_diag_clear(&d);
	return p;
}

static void
check_normalize(const char *name)
{
	char a[FZ_NAME_MAX], b[FZ_NAME_MAX], up[FZ_NAME_MAX + 2];
	size_t i, n = strlen(name);
	struct err e;
	int ra, rb;

	ra = policy_name_normalize(name, a, sizeof(a), &e);
	for (i = 0; i <= n; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	rb = policy_name_normalize(up, b, sizeof(b), &e);
	if (ra != rb || (ra == 0 && strcmp(a, b) != 0))
		fz_fail("normalize not case-insensitive", name, up);
	if (ra != 0)
		return;
	if (policy_name_normalize(a, b, sizeof(b), &e) != 0 ||
	    strcmp(a, b) != 0)
		fz_fail("normalize not idempotent", a, b);
	if (name[n - 1] != '.') {
		memcpy(up, name, n);
		up[n] = '.';
		up[n + 1] = '\0';
		if (policy_name_normalize(up, b, sizeof(b), &e) != 0 ||
		    strcmp(a, b) != 0)
			fz_fail("trailing dot changes the name", a, up);
	}
}

static void
check_match(const struct policy *p, const char *name)
{
	char up[FZ_NAME_MAX + 2], norm[FZ_NAME_MAX];
	size_t i, n = strlen(name);
	struct err e;
	enum policy_action a = policy_match_domain(p, name, NULL);

	for (i = 0; i <= n; i++)
		up[i] = (char)toupper((unsigned char)name[i]);
	if (policy_match_domain(p, up, NULL) != a)
		fz_fail("case changes the decision", name, up);
	if (n > 0 && name[n - 1] != '.') {
		memcpy(up, name, n);
		up[n] = '.';
		up[n + 1] = '\0';
		if (policy_match_domain(p, up, NULL) != a)
			fz_fail("trailing dot changes the decision", name, up);
	}
	if (policy_name_normalize(name, norm, sizeof(norm), &e) != 0 ||
	    norm[0] == '*') {
		if (a != POLICY_DENY)
			fz_fail("invalid name allowed", name, NULL);
		return;
	}
	const char *t = p->rules[0].target;
	bool hit = p->rules[0].kind == POLICY_TARGET_WILDCARD
	    ? (strlen(norm) > strlen(t + 1) &&
	          strcmp(norm + strlen(norm) - strlen(t + 1), t + 1) == 0)
	    : strcmp(norm, t) == 0;
	if (p->rules[0].kind <= POLICY_TARGET_WILDCARD && hit &&
	    a != POLICY_ALLOW)
		fz_fail("name under the allow target denied", name, t);
	size_t nl = strlen(norm);
	if (!hit && nl > 10 && strcmp(norm + nl - 10, ".deny.test") == 0 &&
	    a != POLICY_DENY)
		fz_fail("name under *.deny.test allowed", name, t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char target[FZ_NAME_MAX], name[FZ_NAME_MAX];
	const uint8_t *nl;
	size_t tl, n;
	struct policy *p;

	if (size == 0 || size >= 2 * FZ_NAME_MAX ||
	    memchr(data, '\0', size) != NULL)
		return 0;
	nl = memchr(data, '\n', size);
	tl = nl ? (size_t)(nl - data) : size;
	n = nl ? size - tl - 1 : 0;
	if (tl >= FZ_NAME_MAX || n >= FZ_NAME_MAX)
		return 0;
	memcpy(target, data, tl);
	target[tl] = '\0';
	memcpy(name, nl ? nl + 1 : data, nl ? n : tl);
	name[nl ? n : tl] = '\0';
	if (name[0] != '\0')
		check_normalize(name);
	if ((p = build(target)) != NULL) {
		check_match(p, name);
		policy_unref(p);
	}
	return 0;
}
