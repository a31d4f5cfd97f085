/*
 * hash: FNV-1a, 64 bit. For dedup tables and change detection, never for
 * anything an attacker could profit from colliding (no security use).
 */
#ifndef EGRESSD_HASH_H
#define EGRESSD_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_BASIS 14695981039346656037ULL
#define HASH_FNV1A_PRIME 1099511628211ULL

/* Continues a hash h over n more bytes (h = HASH_FNV1A_BASIS to start). */
static inline uint64_t
hash_fnv1a_more(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= s[i];
		h *= HASH_FNV1A_PRIME;
	}
	return h;
}

static inline uint64_t
hash_fnv1a(const void *p, size_t n)
{
	return hash_fnv1a_more(HASH_FNV1A_BASIS, p, n);
}

/*
 * The 32-bit variant, for tables indexed by 32-bit hashes. One byte at a
 * time, so a caller can hash a name's suffixes while walking it backwards.
 */
#define HASH_FNV1A32_BASIS 2166136261u
#define HASH_FNV1A32_PRIME 16777619u

static inline uint32_t
hash_fnv1a32_byte(uint32_t h, unsigned char c)
{
	return (h ^ c) * HASH_FNV1A32_PRIME;
}

static inline uint32_t
hash_fnv1a32(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint32_t h = HASH_FNV1A32_BASIS;
	size_t i;

	for (i = 0; i < n; i++)
		h = hash_fnv1a32_byte(h, s[i]);
	return h;
}

#endif
