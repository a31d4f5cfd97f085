/*
 * coalesce: the one sort-and-merge of a list of ranges (the policy's port
 * ranges, a learned address's protocol/port limits, the intervals of an
 * nft set), so the normalizers the kernel's interval sets and the
 * policy's reach walk rely on share one loop; and the three-way compare
 * of their sort keys.
 */
#ifndef EGRESSD_COALESCE_H
#define EGRESSD_COALESCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* -1, 0 or 1 as a is below, equal to or above b (qsort's convention). */
static inline int
coalesce_cmp(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

/*
 * The merge of two port ranges, for absorb functions: when [lo, hi]
 * starts at most one past *end (they overlap or touch), widens *end to
 * cover it and returns true.
 */
static inline bool
coalesce_u16(uint16_t *end, uint16_t lo, uint16_t hi)
{
	if ((unsigned)lo > (unsigned)*end + 1)
		return false;
	if (hi > *end)
		*end = hi;
	return true;
}

/*
 * Sorts the n elements of size bytes at v with cmp, then walks them in
 * order: absorb(kept, next, arg) either widens kept (the last element
 * kept) to cover next and returns true, or returns false and next is kept
 * after it. The kept elements end up at the front of v, in order; returns
 * how many there are. Pure; absorb must not fail.
 */
size_t coalesce(void *v, size_t n, size_t size,
    int (*cmp)(const void *, const void *),
    bool (*absorb)(void *kept, const void *next, void *arg), void *arg);

#endif
