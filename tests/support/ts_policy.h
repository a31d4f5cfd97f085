/*
 * ts_policy: policies the unit tests write inline. Each parses the text
 * with the real loader and fails the test (cmocka) with the loader's
 * messages when it does not load, so a fixture can never silently be a
 * different policy than the one written.
 */
#ifndef EGRESSD_TEST_TS_POLICY_H
#define EGRESSD_TEST_TS_POLICY_H

#include "policy/policy.h"

/* JSON text, named "test" in messages. Caller unrefs. */
struct policy *ts_policy_json(const char *json);
/* YAML text, named name in messages. Caller unrefs. */
struct policy *ts_policy_yaml(const char *yaml, const char *name);

#endif
