#include "util/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int
grow_array(void *pp, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t n = *cap != 0 ? *cap : (first != 0 ? first : 1);
	void *v, *nv;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -1;
		n *= 2;
	}
	if (elem != 0 && n > SIZE_MAX / elem)
		return -1;
	/* pp points at a T *: copied, not cast, so no T ** is read as a
	 * void ** */
	memcpy(&v, pp, sizeof(v));
	if ((nv = realloc(v, n * elem)) == NULL)
		return -1;
	memcpy(pp, &nv, sizeof(nv));
	*cap = n;
	return 0;
}
