/*
 * secmem: equality over (input, expected) of every length pairing, that
 * a wipe leaves zeros, and the secret arena: a seeded random sequence of
 * allocations and frees checked against a model (no overlap, zeroed on
 * alloc, wiped on free, merged so the whole arena is usable again), the
 * guard pages (a child touching them dies of SIGSEGV), and the kernel's
 * view of the mapping (/proc/self/smaps: "dd" always, "lo" iff locked).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/secmem.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static void
test_equal(void **state)
{
	(void)state;
	assert_true(secmem_equal("token", 5, "token", 5));
	assert_false(secmem_equal("tokex", 5, "token", 5));
	assert_false(secmem_equal("Token", 5, "token", 5));
	/* a prefix, a longer input, an empty input: all unequal */
	assert_false(secmem_equal("tok", 3, "token", 5));
	assert_false(secmem_equal("tokens", 6, "token", 5));
	assert_false(secmem_equal("", 0, "token", 5));
	/* a short input repeated to the expected length is still a mismatch */
	assert_false(secmem_equal("to", 2, "totot", 5));
	assert_true(secmem_equal("", 0, "", 0));
	assert_false(secmem_equal("x", 1, "", 0));
}

static void
test_wipe(void **state)
{
	unsigned char buf[64];
	size_t i;

	(void)state;
	memset(buf, 0xA5, sizeof(buf));
	secmem_wipe(buf + 8, 32);
	for (i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], i >= 8 && i < 40 ? 0 : 0xA5);
	secmem_wipe(NULL, 10); /* no crash */
	secmem_wipe(buf, 0);
}

#define ARENA 8192
#define SLOTS 64

static void
test_arena_model(void **state)
{
	struct err e;
	struct secmem_arena *a = secmem_arena_new(ARENA, &e);
	unsigned char *p[SLOTS] = {0};
	size_t len[SLOTS] = {0}, i, j, k, round;
	unsigned seed = 12345;

	(void)state;
	assert_non_null(a);
	for (round = 0; round < 20000; round++) {
		seed = seed * 1103515245u + 12345u;
		i = (seed >> 8) % SLOTS;
		if (p[i] != NULL) {
			unsigned char *q = p[i];

			/* still ours: nobody wrote over it */
			for (k = 0; k < len[i]; k++)
				assert_int_equal(q[k], (unsigned char)(i + 1));
			secmem_free(a, q);
			for (k = 0; k < len[i]; k++)
				assert_int_equal(q[k], 0);
			p[i] = NULL;
			continue;
		}
		len[i] = 1 + (seed >> 16) % 300;
		if ((p[i] = secmem_alloc(a, len[i])) == NULL)
			continue; /* full: fine, the model says nothing */
		assert_int_equal((uintptr_t)p[i] % 16, 0);
		for (k = 0; k < len[i]; k++)
			assert_int_equal(p[i][k], 0);
		memset(p[i], (int)(i + 1), len[i]);
		for (j = 0; j < SLOTS; j++)
			if (j != i && p[j] != NULL)
				assert_true(p[i] + len[i] <= p[j] ||
				    p[j] + len[j] <= p[i]);
	}
	for (i = 0; i < SLOTS; i++)
		secmem_free(a, p[i]);
	assert_int_equal(secmem_arena_used(a), 0);
	/* everything merged back: one allocation of nearly all of it */
	assert_non_null(p[0] = secmem_alloc(a, ARENA - 64));
	assert_null(secmem_alloc(a, 64));
	secmem_free(a, p[0]);
	assert_null(secmem_alloc(a, 0));
	assert_null(secmem_alloc(a, ARENA + 1));
	secmem_arena_free(a);
	secmem_arena_free(NULL);
}

static void
test_arena_strndup(void **state)
{
	struct err e;
	struct secmem_arena *a = secmem_arena_new(4096, &e);
	char *s;

	(void)state;
	assert_non_null(a);
	assert_non_null(s = secmem_strndup(a, "sk-live-0123456789", 7));
	assert_string_equal(s, "sk-live");
	secmem_free(a, s);
	secmem_arena_free(a);
}

/* The VmFlags line of the smaps entry starting at addr, or "". */
static void
vmflags(const void *addr, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool in = false;

	out[0] = '\0';
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && strncmp(line, "VmFlags:", 8) == 0) {
			(void)snprintf(out, cap, "%s", line);
			break;
		}
	}
	fclose(f);
}

static void
test_arena_kernel_view(void **state)
{
	struct err e;
	struct secmem_arena *a = secmem_arena_new(4096, &e);
	unsigned char *p;
	char flags[512];
	pid_t pid;
	int st, side;

	(void)state;
	assert_non_null(a);
	assert_non_null(p = secmem_alloc(a, 32));
	vmflags(p, flags, sizeof(flags));
	assert_non_null(strstr(flags, " dd"));
	/* The sanitizers intercept mlock() and do nothing (their shadow
	 * memory cannot be locked), so only a plain build can check "lo". */
	if (!SANITIZED && secmem_arena_locked(a))
		assert_non_null(strstr(flags, " lo"));
	else if (!SANITIZED)
		assert_null(strstr(flags, " lo"));
	/* the page before the arena and the one after it fault */
	for (side = 0; side < 2; side++) {
		volatile unsigned char *t =
		    side == 0 ? p - 16 - 1 : p - 16 + 4096;

		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			signal(SIGSEGV, SIG_DFL);
			*t = 1;
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
	}
	secmem_free(a, p);
	secmem_arena_free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_equal),
	    cmocka_unit_test(test_wipe),
	    cmocka_unit_test(test_arena_model),
	    cmocka_unit_test(test_arena_strndup),
	    cmocka_unit_test(test_arena_kernel_view),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
