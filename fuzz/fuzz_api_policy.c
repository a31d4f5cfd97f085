/*
 * Fuzzes api_policy_decide(): the /policy mutation answers (status,
 * message prefix, snapshot) for hostile bodies against a fixed policy.
 * Input: byte 0 picks the operation, byte 1 the rule cap (0..7, 0 = none),
 * the rest is the body.
 * Invariants (abort on violation):
 *   - status is 200, 400 or 413, and the message fits and is terminated;
 *   - 200: no message; a snapshot unless DELETE matched nothing; revision
 *     is the current one + 1; REPLACE and PATCH results respect the cap;
 *     PATCH and DELETE keep the
 *     default action; DELETE removes at least one rule; the reset is an
 *     empty-body REPLACE and yields deny-all;
 *   - 400: the message carries one of contract §6's prefixes for the
 *     operation; 413: only with a cap, "egress rule total count ...";
 *   - deciding twice gives the same answer (no hidden state).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/api/api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_BASE                                                                \
	"{\"defaultAction\":\"deny\",\"egress\":["                             \
	"{\"action\":\"allow\",\"target\":\"A.example.com\"},"                 \
	"{\"action\":\"deny\",\"target\":\"*.b.example.com\"},"                \
	"{\"action\":\"allow\",\"target\":\"203.0.113.0/24\"},"                \
	"{\"action\":\"allow\",\"target\":\"2001:db8::1\"}]}"

static void
fz_fail(const char *what, const struct api_verdict *v)
{
	fprintf(stderr, "fuzz_api_policy: %s (status %d, msg \"%s\")\n", what,
	    v->status, v->msg);
	abort();
}

static bool
fz_prefixed(const char *msg, const char *const *prefixes)
{
	for (; *prefixes != NULL; prefixes++)
		if (strncmp(msg, *prefixes, strlen(*prefixes)) == 0)
			return true;
	return false;
}

static void
fz_check(const struct policy *cur, enum api_op op, size_t cap,
    const struct api_verdict *v)
{
	static const char *const p_replace[] = {"invalid policy: ", NULL};
	static const char *const p_patch[] = {"empty body",
	    "invalid patch rules: ", "invalid merged policy: ", NULL};
	static const char *const p_delete[] = {
	    "empty body", "invalid delete targets: ", NULL};
	const char *const *prefixes = op == API_OP_REPLACE ? p_replace
	    : op == API_OP_PATCH                           ? p_patch
	                                                   : p_delete;

	if (memchr(v->msg, '\0', sizeof(v->msg)) == NULL)
		fz_fail("message not terminated", v);
	switch (v->status) {
	case 200:
		if (v->msg[0] != '\0' || v->reason != NULL)
			fz_fail("200 with an error", v);
		if (v->nomatch) {
			if (op != API_OP_DELETE || v->next != NULL)
				fz_fail("nomatch outside DELETE", v);
			return;
		}
		if (v->next == NULL)
			fz_fail("200 without a snapshot", v);
		if (v->next->revision != cur->revision + 1)
			fz_fail("revision not current + 1", v);
		/* The cap binds what REPLACE and PATCH produce; DELETE only
		 * shrinks (a base over a lowered cap may stay over it). */
		if (cap != 0 && op != API_OP_DELETE && v->next->nrules > cap)
			fz_fail("rule cap exceeded", v);
		if (op != API_OP_REPLACE &&
		    v->next->default_action != cur->default_action)
			fz_fail("PATCH/DELETE changed the default", v);
		if (op == API_OP_DELETE && v->next->nrules >= cur->nrules)
			fz_fail("DELETE removed nothing", v);
		if (v->reset &&
		    (op != API_OP_REPLACE || v->next->nrules != 0 ||
		        v->next->default_action != POLICY_DENY))
			fz_fail("reset is not deny-all", v);
		return;
	case 400:
		if (v->next != NULL || v->reason == NULL)
			fz_fail("400 with a snapshot or no reason", v);
		if (!fz_prefixed(v->msg, prefixes))
			fz_fail("400 without its contract prefix", v);
		return;
	case 413:
		if (v->next != NULL || cap == 0 || op == API_OP_DELETE)
			fz_fail("413 where no cap applies", v);
		if (strncmp(v->msg, "egress rule total count ", 24) != 0)
			fz_fail("413 message", v);
		return;
	default:
		fz_fail("unexpected status", v);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_verdict v1, v2;
	struct policy_diag d;
	struct policy *cur;
	enum api_op op;
	size_t cap;

	if (size < 2 || size > 65536)
		return 0;
	op = (enum api_op)(data[0] % 3);
	cap = data[1] % 8;
	policy_diag_init(&d);
	cur = policy_parse_json(FZ_BASE, strlen(FZ_BASE), "base", &d);
	policy_diag_clear(&d);
	if (cur == NULL)
		abort();
	api_policy_decide(cur, op, (const char *)data + 2, size - 2, cap, &v1);
	fz_check(cur, op, cap, &v1);
	api_policy_decide(cur, op, (const char *)data + 2, size - 2, cap, &v2);
	if (v1.status != v2.status || strcmp(v1.msg, v2.msg) != 0 ||
	    v1.nomatch != v2.nomatch || v1.reset != v2.reset ||
	    (v1.next == NULL) != (v2.next == NULL) ||
	    (v1.next != NULL && v1.next->nrules != v2.next->nrules))
		fz_fail("two decisions differ", &v2);
	policy_unref(v1.next);
	policy_unref(v2.next);
	policy_unref(cur);
	return 0;
}
