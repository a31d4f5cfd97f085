/*
 * policy_github_int: the githubApp settings' object as the binding's own
 * files see them (policy_github.c).
 */
#ifndef EGRESSD_POLICY_GITHUB_INT_H
#define EGRESSD_POLICY_GITHUB_INT_H

#include "policy/policy.h"
#include "policy/policy_github.h"
#include "util/err.h"

struct policy_github *policy_github_new(void);
void policy_github_free(struct policy_github *g);
/* A deep copy; NULL when out of memory. */
struct policy_github *policy_github_dup(const struct policy_github *g);
/* The credential g names that none of creds[0..n) is, or NULL. */
const char *policy_github_unknown_cred(const struct policy_github *g,
    struct policy_credential *const *creds, size_t n);
/* url parsed into g's host, port and base (no query, fragment). */
int policy_github_set_url(
    struct policy_github *g, const char *url, struct err *e);

#endif
