/*
 * secmem: handling memory that holds secrets. Comparisons whose timing
 * does not depend on the contents, wiping the compiler may not elide.
 * Used for API tokens today and vault credentials next.
 */
#ifndef EGRESSD_SECMEM_H
#define EGRESSD_SECMEM_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/*
 * True when a[0..alen) equals b[0..blen). Runs in time that depends only on
 * blen (the expected, secret-side length), never on where bytes differ.
 */
bool secmem_equal(const void *a, size_t alen, const void *b, size_t blen);

/* Overwrites n bytes at p in a way the compiler may not elide; p may be NULL. */
void secmem_wipe(void *p, size_t n);

/*
 * An arena for secrets (vault credentials): one mapping, never swapped
 * where the system allows (mlock), never in a core dump (MADV_DONTDUMP),
 * with an inaccessible page on each side so a linear overrun from
 * neighbouring memory faults instead of reading it. Allocations are
 * zeroed; a free wipes; destroying the arena wipes all of it. Owned by
 * whoever made it; not thread-safe.
 */
struct secmem_arena;

/* cap is rounded up to whole pages; NULL and e if the mapping fails. */
struct secmem_arena *secmem_arena_new(size_t cap, struct err *e);
/* Wipes, unlocks and unmaps; NULL is fine. */
void secmem_arena_free(struct secmem_arena *a);
/* False when mlock was refused (RLIMIT_MEMLOCK): the caller says so. */
bool secmem_arena_locked(const struct secmem_arena *a);
/* Bytes in use, headers included (for metrics and tests). */
size_t secmem_arena_used(const struct secmem_arena *a);

/* n zeroed bytes, 16-byte aligned; NULL when the arena is full or n 0. */
void *secmem_alloc(struct secmem_arena *a, size_t n);
/* Wipes and returns p (from secmem_alloc of a) to a; NULL is fine. */
void secmem_free(struct secmem_arena *a, void *p);
/* A copy of s[0..n) plus a NUL, in a; NULL when full. */
char *secmem_strndup(struct secmem_arena *a, const char *s, size_t n);

#endif
