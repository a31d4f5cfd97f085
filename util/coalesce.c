/*
 * coalesce: sort, then merge in place (coalesce.h).
 */
#include <stdlib.h>
#include <string.h>

#include "util/coalesce.h"

size_t
coalesce(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *),
    bool (*absorb)(void *kept, const void *next, void *arg), void *arg)
{
	char *p = v;
	size_t i, out = 0;

	if (n == 0)
		return 0;
	qsort(v, n, size, cmp);
	for (i = 1; i < n; i++) {
		if (absorb(p + out * size, p + i * size, arg))
			continue;
		if (++out != i)
			memcpy(p + out * size, p + i * size, size);
	}
	return out + 1;
}
