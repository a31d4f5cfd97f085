/*
 * vault_ct: comparisons whose timing does not depend on secret contents.
 * Used for API tokens today and credential checks later.
 */
#ifndef EGRESSD_VAULT_CT_H
#define EGRESSD_VAULT_CT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * True when a[0..alen) equals b[0..blen). Runs in time that depends only on
 * blen (the expected, secret-side length), never on where bytes differ.
 */
bool vault_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

/* Overwrites n bytes at p in a way the compiler may not elide. */
void vault_wipe(void *p, size_t n);

#endif
