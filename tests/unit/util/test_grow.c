/*
 * grow: capacity doubles from the first size, an array that fits is left
 * alone, the contents survive a move, and an overflowing size is refused
 * with the array unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "util/grow.h"

static void
test_doubles(void **state)
{
	int *v = NULL;
	size_t cap = 0, i;

	(void)state;
	assert_int_equal(grow_array(&v, &cap, 1, sizeof(*v), 16), 0);
	assert_non_null(v);
	assert_int_equal(cap, 16);
	for (i = 0; i < 16; i++)
		v[i] = (int)i;
	assert_int_equal(grow_array(&v, &cap, 16, sizeof(*v), 16), 0);
	assert_int_equal(cap, 16);
	assert_int_equal(grow_array(&v, &cap, 17, sizeof(*v), 16), 0);
	assert_int_equal(cap, 32);
	assert_int_equal(grow_array(&v, &cap, 100, sizeof(*v), 16), 0);
	assert_int_equal(cap, 128);
	for (i = 0; i < 16; i++)
		assert_int_equal(v[i], (int)i);
	free(v);
}

static void
test_overflow(void **state)
{
	uint64_t *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(grow_array(&v, &cap, 4, sizeof(*v), 4), 0);
	v[3] = 7;
	assert_int_equal(grow_array(&v, &cap, SIZE_MAX / 4, sizeof(*v), 4), -1);
	assert_int_equal(cap, 4);
	assert_non_null(v);
	assert_int_equal(v[3], 7);
	assert_int_equal(grow_array(&v, &cap, SIZE_MAX, 1, 4), -1);
	assert_int_equal(cap, 4);
	free(v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_doubles),
	    cmocka_unit_test(test_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
