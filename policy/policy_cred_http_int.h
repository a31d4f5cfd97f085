/*
 * policy_cred_http_int: the http source settings' object as the
 * credential's own files see it (policy_cred_http.c).
 */
#ifndef EGRESSD_POLICY_CRED_HTTP_INT_H
#define EGRESSD_POLICY_CRED_HTTP_INT_H

#include "policy/policy_cred_http.h"

void policy_cred_http_free(struct policy_cred_http *h);
/* A deep copy (literal values in an arena of its own); NULL when out
 * of memory. */
struct policy_cred_http *policy_cred_http_dup(const struct policy_cred_http *h);
/* v[0..n) as x's literal value, in h's arena (made on the first): 0, or
 * -1 when out of memory. */
int policy_cred_http_put_value(struct policy_cred_http *h,
    struct policy_http_header *x, const void *v, size_t n);

#endif
