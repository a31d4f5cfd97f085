/*
 * refcnt: the reference counts of objects that more than one thread may
 * share. Policy snapshots and their shared parts (overlays, config, the
 * vault layer) are built on the commit worker (egressd/base/workq.h) from the
 * snapshot in force while the event loop takes and drops references to
 * other snapshots sharing the same parts: a plain ++/-- there loses
 * updates. Increments need no ordering; the decrement that reaches zero
 * must see every write of the other holders before the object is freed.
 */
#ifndef UTIL_REFCNT_H
#define UTIL_REFCNT_H

#include <stdbool.h>

static inline void
refcnt_inc(unsigned *r)
{
	(void)__atomic_add_fetch(r, 1, __ATOMIC_RELAXED);
}

/* True when this was the last reference: the caller frees. */
static inline bool
refcnt_dec(unsigned *r)
{
	return __atomic_sub_fetch(r, 1, __ATOMIC_ACQ_REL) == 0;
}

#endif
