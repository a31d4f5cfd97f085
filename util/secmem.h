/*
 * secmem: handling memory that holds secrets. Comparisons whose timing
 * does not depend on the contents, wiping the compiler may not elide.
 * Used for API tokens today and vault credentials next.
 */
#ifndef EGRESSD_SECMEM_H
#define EGRESSD_SECMEM_H

#include <stdbool.h>
#include <stddef.h>

/*
 * True when a[0..alen) equals b[0..blen). Runs in time that depends only on
 * blen (the expected, secret-side length), never on where bytes differ.
 */
bool secmem_equal(const void *a, size_t alen, const void *b, size_t blen);

/* Overwrites n bytes at p in a way the compiler may not elide; p may be NULL. */
void secmem_wipe(void *p, size_t n);

#endif
