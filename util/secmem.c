#include <stdint.h>
#include <string.h>

#include "util/secmem.h"

bool
secmem_equal(const void *a, size_t alen, const void *b, size_t blen)
{
	const volatile uint8_t *pa = a, *pb = b;
	volatile uint8_t diff = 0;
	size_t i;

	/*
	 * Walk the expected length whatever the input length is, reading the
	 * input modulo its length so a short guess costs the same time.
	 */
	diff |= (uint8_t)(alen != blen);
	for (i = 0; i < blen; i++) {
		uint8_t x = alen ? pa[i % alen] : 0;
		diff |= (uint8_t)(x ^ pb[i]);
	}
	return diff == 0;
}

void
secmem_wipe(void *p, size_t n)
{
	/* glibc's explicit_bzero: a memset the optimizer must keep. */
	if (p != NULL && n > 0)
		explicit_bzero(p, n);
}
