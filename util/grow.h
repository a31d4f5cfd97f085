/*
 * grow: the one step of a growable array (double the capacity, starting
 * from a first size), so that every list the loaders and the indexes
 * build checks its size arithmetic in one place.
 */
#ifndef EGRESSD_GROW_H
#define EGRESSD_GROW_H

#include <stddef.h>

/*
 * Makes room for at least need elements of elem bytes in the array whose
 * pointer is at pp (any T **; NULL for none yet) and whose capacity is
 * *cap: doubles *cap, from first when it is 0, until need fits. Returns 0,
 * or -1 on out of memory or size overflow with *pp and *cap unchanged.
 */
int grow_array(void *pp, size_t *cap, size_t need, size_t elem, size_t first);

#endif
