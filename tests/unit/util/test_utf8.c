/*
 * utf8: every code point round-trips through encode and decode; every
 * malformed form of RFC 3629 §3 (overlong, surrogate, above U+10FFFF,
 * stray continuation, cut short) decodes to 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/utf8.h"

static void
test_roundtrip_all(void **state)
{
	uint32_t cp, back;
	char o[4];
	size_t n;

	(void)state;
	for (cp = 0; cp <= 0x10ffff; cp++) {
		n = utf8_encode(o, cp);
		if (cp >= 0xd800 && cp <= 0xdfff) {
			assert_int_equal(n, 0);
			continue;
		}
		assert_int_equal(n,
		    cp < 0x80          ? 1
		        : cp < 0x800   ? 2
		        : cp < 0x10000 ? 3
		                       : 4);
		back = 0xffffffffu;
		assert_int_equal(utf8_decode((unsigned char *)o, n, &back), n);
		assert_int_equal(back, cp);
		/* one byte short is never a valid sequence of that length */
		if (n > 1)
			assert_int_equal(
			    utf8_decode((unsigned char *)o, n - 1, NULL), 0);
	}
	assert_int_equal(utf8_encode(o, 0x110000), 0);
}

static void
test_malformed(void **state)
{
	static const struct {
		const char *b;
		size_t n;
	} bad[] = {
	    {"\x80", 1}, /* stray continuation */
	    {"\xbf", 1},
	    {"\xc0\x80", 2}, /* overlong NUL */
	    {"\xc1\xbf", 2}, /* overlong */
	    {"\xe0\x80\x80", 3}, /* overlong 3 */
	    {"\xe0\x9f\xbf", 3}, /* overlong U+07FF */
	    {"\xed\xa0\x80", 3}, /* U+D800 */
	    {"\xed\xbf\xbf", 3}, /* U+DFFF */
	    {"\xf0\x8f\xbf\xbf", 4}, /* overlong U+FFFF */
	    {"\xf4\x90\x80\x80", 4}, /* U+110000 */
	    {"\xf5\x80\x80\x80", 4}, /* lead above F4 */
	    {"\xff", 1},
	    {"\xc3", 1}, /* cut */
	    {"\xe2\x82", 2},
	    {"\xf0\x9f\x98", 3},
	    {"\xc3\x28", 2}, /* bad continuation */
	    {"\xe2\x28\xa1", 3},
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(utf8_decode((const unsigned char *)bad[i].b,
		                     bad[i].n, NULL),
		    0);
	assert_int_equal(utf8_decode((const unsigned char *)"a", 0, NULL), 0);
	/* a valid sequence followed by more: only its own length */
	assert_int_equal(
	    utf8_decode((const unsigned char *)"\xc3\xa9z", 3, NULL), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_all),
	    cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
