/*
 * secmem: equality over (input, expected) of every length pairing, and
 * that a wipe leaves zeros.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/secmem.h"

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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_equal),
	    cmocka_unit_test(test_wipe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
