/* ts_policy: see ts_policy.h. */
#include "ts_policy.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* The loader's result; every message printed and the test failed when
 * there is none. */
static struct policy *
ts_policy_check(struct policy *p, struct policy_diag *d)
{
	size_t i;

	for (i = 0; p == NULL && i < d->n; i++)
		print_error("diag: %s\n", d->msgs[i]);
	policy_diag_clear(d);
	if (p == NULL)
		fail_msg("the test's policy does not load");
	return p;
}

struct policy *
ts_policy_json(const char *json)
{
	struct policy_diag d;

	policy_diag_init(&d);
	return ts_policy_check(
	    policy_parse_json(json, strlen(json), "test", &d), &d);
}

struct policy *
ts_policy_yaml(const char *yaml, const char *name)
{
	struct policy_diag d;

	policy_diag_init(&d);
	return ts_policy_check(
	    policy_parse_yaml(yaml, strlen(yaml), name, &d), &d);
}
