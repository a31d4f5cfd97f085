#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/*
 * A block: a header then its payload, both multiples of SECMEM_ALIGN,
 * laid end to end over the arena. Free blocks are found by walking the
 * blocks (first fit) and merged with a free successor on free; arenas
 * hold a few hundred credentials, so a walk is cheap and there is no
 * separate list to corrupt.
 */
#define SECMEM_ALIGN 16u

struct secmem_block {
	size_t size; /* payload bytes */
	size_t used; /* 0 free, 1 in use */
};

struct secmem_arena {
	unsigned char *map; /* guard page, data, guard page */
	size_t maplen;
	unsigned char *data;
	size_t cap;
	size_t used;
	bool locked;
};

#define HDR                                                                    \
	((sizeof(struct secmem_block) + SECMEM_ALIGN - 1) &                    \
	    ~(size_t)(SECMEM_ALIGN - 1))

static struct secmem_block *
blk_at(const struct secmem_arena *a, size_t off)
{
	return (struct secmem_block *)(void *)(a->data + off);
}

struct secmem_arena *
secmem_arena_new(size_t cap, struct err *e)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct secmem_arena *a;

	if (cap == 0 || cap > ((size_t)1 << 30)) {
		err_set(e, "secret arena: bad size %zu", cap);
		return NULL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		err_set(e, "secret arena: out of memory");
		return NULL;
	}
	a->cap = (cap + page - 1) / page * page;
	a->maplen = a->cap + 2 * page;
	a->map = mmap(
	    NULL, a->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a->map == MAP_FAILED) {
		err_set(e, "secret arena: mmap: %s", strerror(errno));
		free(a);
		return NULL;
	}
	a->data = a->map + page;
	if (mprotect(a->data, a->cap, PROT_READ | PROT_WRITE) == -1 ||
	    madvise(a->data, a->cap, MADV_DONTDUMP) == -1) {
		err_set(e, "secret arena: %s", strerror(errno));
		munmap(a->map, a->maplen);
		free(a);
		return NULL;
	}
	/* Also keeps the pages out of a child's memory after a fork. */
	(void)madvise(a->data, a->cap, MADV_WIPEONFORK);
	a->locked = mlock(a->data, a->cap) == 0;
	blk_at(a, 0)->size = a->cap - HDR;
	blk_at(a, 0)->used = 0;
	return a;
}

void
secmem_arena_free(struct secmem_arena *a)
{
	if (a == NULL)
		return;
	secmem_wipe(a->data, a->cap);
	if (a->locked)
		(void)munlock(a->data, a->cap);
	(void)munmap(a->map, a->maplen);
	free(a);
}

bool
secmem_arena_locked(const struct secmem_arena *a)
{
	return a->locked;
}

size_t
secmem_arena_used(const struct secmem_arena *a)
{
	return a->used;
}

void *
secmem_alloc(struct secmem_arena *a, size_t n)
{
	size_t off = 0, need;

	if (a == NULL || n == 0 || n > a->cap)
		return NULL;
	need = (n + SECMEM_ALIGN - 1) & ~(size_t)(SECMEM_ALIGN - 1);
	while (off < a->cap) {
		struct secmem_block *b = blk_at(a, off);

		if (!b->used && b->size >= need) {
			/* Split when the rest can hold a header and a payload. */
			if (b->size >= need + HDR + SECMEM_ALIGN) {
				struct secmem_block *r =
				    blk_at(a, off + HDR + need);

				r->size = b->size - need - HDR;
				r->used = 0;
				b->size = need;
			}
			b->used = 1;
			a->used += HDR + b->size;
			return a->data + off + HDR;
		}
		off += HDR + b->size;
	}
	return NULL;
}

void
secmem_free(struct secmem_arena *a, void *p)
{
	size_t off = 0, prev = (size_t)-1;
	unsigned char *q = p;

	if (a == NULL || p == NULL)
		return;
	/* Walk to p: a pointer that is not a live block's is a bug. */
	while (off < a->cap && a->data + off + HDR != q) {
		prev = off;
		off += HDR + blk_at(a, off)->size;
	}
	if (off >= a->cap || !blk_at(a, off)->used)
		abort();
	struct secmem_block *b = blk_at(a, off);

	secmem_wipe(q, b->size);
	b->used = 0;
	a->used -= HDR + b->size;
	/* Merge with a free successor, then with a free predecessor. */
	if (off + HDR + b->size < a->cap) {
		struct secmem_block *n = blk_at(a, off + HDR + b->size);

		if (!n->used) {
			b->size += HDR + n->size;
			secmem_wipe(n, HDR);
		}
	}
	if (prev != (size_t)-1 && !blk_at(a, prev)->used) {
		blk_at(a, prev)->size += HDR + b->size;
		secmem_wipe(b, HDR);
	}
}

char *
secmem_strndup(struct secmem_arena *a, const char *s, size_t n)
{
	char *p = secmem_alloc(a, n + 1);

	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}
