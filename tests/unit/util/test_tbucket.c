/*
 * tbucket: starts full, a zero burst holds one token, refills at the
 * rate and never beyond the burst, and time going back adds nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/tbucket.h"

static size_t
drain(struct tbucket *b)
{
	size_t n = 0;

	while (tbucket_take(b))
		n++;
	return n;
}

static void
test_bucket(void **state)
{
	struct tbucket b;

	(void)state;
	tbucket_init(&b, 10, 5);
	tbucket_refill(&b, 1000);
	assert_int_equal(drain(&b), 5);
	tbucket_refill(&b, 1300); /* 3 tokens */
	assert_int_equal(drain(&b), 3);
	tbucket_refill(&b, 100000); /* capped at the burst */
	assert_int_equal(drain(&b), 5);
	tbucket_refill(&b, 50000); /* back in time: nothing */
	assert_int_equal(drain(&b), 0);
	tbucket_init(&b, 0, 0);
	assert_int_equal(drain(&b), 1);
	tbucket_refill(&b, 1000000);
	assert_int_equal(drain(&b), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bucket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
