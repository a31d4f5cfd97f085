/*
 * policy_oauth2_int: the oauth2 settings' object as the binding's own
 * files see it (policy_oauth2.c).
 */
#ifndef EGRESSD_POLICY_OAUTH2_INT_H
#define EGRESSD_POLICY_OAUTH2_INT_H

#include "policy/policy.h"
#include "policy/policy_oauth2.h"

void policy_oauth2_free(struct policy_oauth2 *o);
/* A deep copy; NULL when out of memory. */
struct policy_oauth2 *policy_oauth2_dup(const struct policy_oauth2 *o);

/* The first credential o names that none of creds[0..n) is, or NULL. */
const char *policy_oauth2_unknown_cred(const struct policy_oauth2 *o,
    struct policy_credential *const *creds, size_t n);
#endif
