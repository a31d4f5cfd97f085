/*
 * Shared invariant checks of the policy fuzzers: a policy that loads
 * serializes to canonical YAML that loads again to the same model (same
 * YAML, same user JSON), and the user JSON is accepted by the API's
 * replace unchanged.
 */
#ifndef EGRESSD_FUZZ_POLICY_COMMON_H
#define EGRESSD_FUZZ_POLICY_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

static inline void
fz_fail(const char *what, const char *a, const char *b)
{
	fprintf(stderr,
	    "invariant violated: %s\n--- a ---\n%s\n--- b ---\n%s\n", what,
	    a ? a : "(null)", b ? b : "(null)");
	abort();
}

static inline void
fz_check_round_trip(const struct policy *p)
{
	struct policy_diag d;
	struct policy *q, *r;
	char *y, *y2, *j, *j2, *j3;
	bool oc;
	struct err e;

	if ((y = policy_to_yaml(p)) == NULL)
		fz_fail("to_yaml failed", NULL, NULL);
	policy_diag_init(&d);
	q = policy_parse_yaml(y, strlen(y), "canon", &d);
	if (q == NULL)
		fz_fail(
		    "canonical YAML does not load", y, d.n ? d.msgs[0] : NULL);
	policy_diag_clear(&d);
	y2 = policy_to_yaml(q);
	if (y2 == NULL || strcmp(y, y2) != 0)
		fz_fail("YAML not a fixpoint", y, y2);
	j = policy_user_to_json(p);
	j2 = policy_user_to_json(q);
	if (j == NULL || j2 == NULL || strcmp(j, j2) != 0)
		fz_fail("user JSON differs after YAML round trip", j, j2);
	r = policy_replace_json(p, j, strlen(j), 0, &oc, &e);
	if (r == NULL)
		fz_fail("API refuses its own GET output", j, e.msg);
	j3 = policy_user_to_json(r);
	if (j3 == NULL || strcmp(j, j3) != 0)
		fz_fail("replace(GET) changes the user policy", j, j3);
	if (r->revision != p->revision + 1)
		fz_fail("revision not bumped", j, j3);
	free(y);
	free(y2);
	free(j);
	free(j2);
	free(j3);
	policy_unref(q);
	policy_unref(r);
}

/* The API mutations on arbitrary bodies: no crash, sane results. */
static inline void
fz_check_mutations(const char *buf, size_t len)
{
	struct policy *b = policy_new_deny_all(), *p;
	size_t matched = 0;
	bool oc = false;
	struct err e;

	if (b == NULL)
		abort();
	if ((p = policy_patch_json(b, buf, len, 8, &oc, &e)) != NULL) {
		if (p->nrules == 0 || p->nrules > 8 || oc)
			fz_fail("patch result out of bounds", e.msg, NULL);
		policy_unref(p);
	}
	if ((p = policy_delete_json(b, buf, len, &matched, &e)) != NULL)
		fz_fail("delete matched on an empty policy", e.msg, NULL);
	if ((p = policy_replace_json(b, buf, len, 8, &oc, &e)) != NULL) {
		if (p->nrules > 8)
			fz_fail("replace ignored the cap", e.msg, NULL);
		policy_unref(p);
	}
	policy_unref(b);
}

/* Inputs above this are skipped: larger ones only slow the fuzzer down. */
#define FZ_POLICY_INPUT_MAX 65536

/*
 * One input through a loader: refused with a diagnostic, or loaded without
 * one and surviving the round trip. False (nothing checked) when the input
 * is over FZ_POLICY_INPUT_MAX.
 */
static inline bool
fz_check_load(const uint8_t *data, size_t size,
    struct policy *(*parse)(
        const char *, size_t, const char *, struct policy_diag *))
{
	struct policy_diag d;
	struct policy *p;

	if (size > FZ_POLICY_INPUT_MAX)
		return false;
	policy_diag_init(&d);
	p = parse((const char *)data, size, "fuzz", &d);
	if (p == NULL && d.n == 0)
		fz_fail("refused without a diagnostic", NULL, NULL);
	if (p != NULL) {
		if (d.n != 0)
			fz_fail("loaded with diagnostics", d.msgs[0], NULL);
		fz_check_round_trip(p);
		policy_unref(p);
	}
	policy_diag_clear(&d);
	return true;
}

#endif
