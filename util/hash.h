/*
 * hash: FNV-1a, 64 bit. For dedup tables and change detection, never for
 * anything an attacker could profit from colliding (no security use).
 */
#ifndef EGRESSD_HASH_H
#define EGRESSD_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t
hash_fnv1a(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ULL;
	}
	return h;
}

#endif
