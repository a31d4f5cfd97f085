/*
 * hash: the published FNV-1a test vectors, and that continuing a hash
 * equals hashing the concatenation. now: the monotonic clocks agree with
 * each other and never go back; the wall clock agrees with time(2).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "util/hash.h"
#include "util/now.h"

static void
test_fnv_vectors(void **state)
{
	(void)state;
	assert_true(hash_fnv1a("", 0) == 0xcbf29ce484222325ULL);
	assert_true(hash_fnv1a("a", 1) == 0xaf63dc4c8601ec8cULL);
	assert_true(hash_fnv1a("foobar", 6) == 0x85944171f73967e8ULL);
	assert_true(hash_fnv1a32("", 0) == 0x811c9dc5u);
	assert_true(hash_fnv1a32("a", 1) == 0xe40c292cu);
	assert_true(hash_fnv1a32("foobar", 6) == 0xbf9cf968u);
	assert_true(hash_fnv1a_more(hash_fnv1a("foo", 3), "bar", 3) ==
	    hash_fnv1a("foobar", 6));
}

static void
test_clocks(void **state)
{
	uint64_t ms0 = now_mono_ms(), us = now_mono_us();
	double s = now_mono_s();
	uint64_t ms1 = now_mono_ms();
	uint64_t wall = now_wall_ms();
	time_t t = time(NULL);
	int i;

	(void)state;
	assert_true(ms0 > 0);
	assert_true(us / 1000 >= ms0 && us / 1000 <= ms1);
	assert_true(s * 1000 >= (double)ms0 && s * 1000 < (double)ms1 + 1);
	for (i = 0; i < 1000; i++) {
		uint64_t m = now_mono_ms();
		assert_true(m >= ms1);
		ms1 = m;
	}
	/* within a minute of time(2): a check of the unit, not of speed */
	assert_true(
	    wall / 1000 + 60 > (uint64_t)t && wall / 1000 < (uint64_t)t + 60);
}

/* The injected-clock form reads the same clock, whatever arg holds. */
static void
test_clock_fn(void **state)
{
	now_clock_fn fn = now_mono_ms_clock;
	uint64_t a, b, c;

	(void)state;
	a = now_mono_ms();
	b = fn(&a);
	c = now_mono_ms();
	assert_true(b >= a && b <= c);
	assert_true(fn(NULL) >= c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fnv_vectors),
	    cmocka_unit_test(test_clocks),
	    cmocka_unit_test(test_clock_fn),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
