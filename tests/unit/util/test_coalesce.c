/*
 * coalesce: sorted and merged in place (overlapping and adjacent ranges
 * into one, disjoint ones kept in order), the merge decided by absorb
 * with its argument, the three-way compare and the port-range merge.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "util/coalesce.h"

struct r {
	unsigned lo, hi;
};

static int
r_cmp(const void *a, const void *b)
{
	const struct r *x = a, *y = b;
	int c = coalesce_cmp(x->lo, y->lo);

	return c != 0 ? c : coalesce_cmp(x->hi, y->hi);
}

/* arg: the largest gap still merged (0: adjacent ones merge) */
static bool
r_absorb(void *kept, const void *next, void *arg)
{
	struct r *k = kept;
	const struct r *x = next;
	unsigned gap = *(const unsigned *)arg;

	if (x->lo > k->hi + 1 + gap)
		return false;
	if (x->hi > k->hi)
		k->hi = x->hi;
	return true;
}

static void
test_merges(void **state)
{
	struct r v[] = {{50, 60}, {1, 3}, {4, 9}, {20, 30}, {25, 26}, {8, 12},
	    {61, 61}, {100, 100}};
	unsigned gap = 0;
	size_t n;

	(void)state;
	n = coalesce(v, 8, sizeof(v[0]), r_cmp, r_absorb, &gap);
	assert_int_equal(n, 4);
	assert_int_equal(v[0].lo, 1);
	assert_int_equal(v[0].hi, 12);
	assert_int_equal(v[1].lo, 20);
	assert_int_equal(v[1].hi, 30);
	assert_int_equal(v[2].lo, 50);
	assert_int_equal(v[2].hi, 61);
	assert_int_equal(v[3].lo, 100);
	assert_int_equal(v[3].hi, 100);
}

static void
test_absorb_decides(void **state)
{
	struct r v[] = {{10, 10}, {1, 2}, {5, 6}};
	unsigned gap = 2;

	(void)state;
	/* 1-2 and 5-6 are 2 apart, 5-6 and 10 3 apart */
	assert_int_equal(
	    coalesce(v, 3, sizeof(v[0]), r_cmp, r_absorb, &gap), 2);
	assert_int_equal(v[0].lo, 1);
	assert_int_equal(v[0].hi, 6);
	assert_int_equal(v[1].lo, 10);
}

static void
test_edges(void **state)
{
	struct r one = {7, 9}, none;
	unsigned gap = 0;

	(void)state;
	assert_int_equal(
	    coalesce(&none, 0, sizeof(none), r_cmp, r_absorb, &gap), 0);
	assert_int_equal(
	    coalesce(&one, 1, sizeof(one), r_cmp, r_absorb, &gap), 1);
	assert_int_equal(one.lo, 7);
	assert_int_equal(one.hi, 9);
	assert_int_equal(coalesce_cmp(1, 2), -1);
	assert_int_equal(coalesce_cmp(2, 2), 0);
	assert_int_equal(coalesce_cmp(UINT64_MAX, 0), 1);
}

static void
test_u16(void **state)
{
	uint16_t end = 10;

	(void)state;
	assert_true(coalesce_u16(&end, 11, 20)); /* adjacent */
	assert_int_equal(end, 20);
	assert_true(coalesce_u16(&end, 5, 8)); /* inside: end stays */
	assert_int_equal(end, 20);
	assert_false(coalesce_u16(&end, 22, 30)); /* a gap of one */
	assert_int_equal(end, 20);
	end = 65535;
	assert_true(coalesce_u16(&end, 65535, 65535)); /* no wrap at the top */
	assert_int_equal(end, 65535);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merges),
	    cmocka_unit_test(test_absorb_decides),
	    cmocka_unit_test(test_edges),
	    cmocka_unit_test(test_u16),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
