/*
 * addr: the one parser of address text. Every accepted spelling with what
 * it yields, the rejected ones (hostnames, zones, junk, ports out of
 * range, leading zeros, IPv4 in brackets), CIDR lengths at and past the
 * width, masking, and the sockaddr round trip.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/addr.h"

static void
test_hostport(void **state)
{
	static const struct {
		const char *in;
		unsigned flags;
		const char *text; /* addr_format_port of the result */
	} good[] = {
	    {"198.51.100.7", 0, "198.51.100.7:53"},
	    {"198.51.100.7:5353", 0, "198.51.100.7:5353"},
	    {"2001:db8::1", 0, "[2001:db8::1]:53"},
	    {"[2001:db8::1]", 0, "[2001:db8::1]:53"},
	    {"[2001:db8::1]:853", 0, "[2001:db8::1]:853"},
	    {"[::ffff:198.51.100.1]:1", 0, "[::ffff:198.51.100.1]:1"},
	    {"127.0.0.1:0", ADDR_PORT_ZERO_OK, "127.0.0.1:0"},
	    {"127.0.0.1:65535", ADDR_PORT_REQUIRED, "127.0.0.1:65535"},
	};
	static const struct {
		const char *in;
		unsigned flags;
		const char *msg;
	} bad[] = {
	    {"", 0, "not an IP"},
	    {"dns.example", 0, "hostnames are not accepted"},
	    {"dns.example:53", 0, "hostnames"},
	    {"198.51.100.7:0", 0, "out of range"},
	    {"198.51.100.7:65536", 0, "out of range"},
	    {"198.51.100.7:053", 0, "out of range"},
	    {"198.51.100.7:", 0, "not a decimal"},
	    {"198.51.100.7:5x", 0, "not a decimal"},
	    {"198.51.100.7:-1", 0, "not a decimal"},
	    {"198.51.100.7: 53", 0, "not a decimal"},
	    {"198.51.100", 0, "not an IP"},
	    {"198.51.100.7.1", 0, "not an IP"},
	    {" 198.51.100.7", 0, "not an IP"},
	    {"[2001:db8::1", 0, "missing ']'"},
	    {"[2001:db8::1]x", 0, "junk after"},
	    {"[2001:db8::1]:", 0, "not a decimal"},
	    {"[198.51.100.7]:53", 0, "not an IPv6"},
	    {"[]:53", 0, "not an IPv6"},
	    {"fe80::1%eth0", 0, "not an IP"},
	    {"198.51.100.7", ADDR_PORT_REQUIRED, "missing port"},
	    {"2001:db8::1", ADDR_PORT_REQUIRED, "missing port"},
	    {"2001:db8::1", ADDR_V4_ONLY, "not an IPv4"},
	    {"198.51.100.7", ADDR_V6_ONLY, "not an IPv6"},
	};
	struct addr a;
	uint16_t port;
	struct err e;
	char text[ADDR_TEXT_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (addr_parse_hostport(
		        good[i].in, 53, good[i].flags, &a, &port, &e) != 0)
			fail_msg("refused %s: %s", good[i].in, e.msg);
		addr_format_port(&a, port, text, sizeof(text));
		assert_string_equal(text, good[i].text);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		if (addr_parse_hostport(
		        bad[i].in, 53, bad[i].flags, &a, &port, &e) != -1)
			fail_msg("accepted \"%s\"", bad[i].in);
		if (strstr(e.msg, bad[i].msg) == NULL)
			fail_msg("\"%s\": \"%s\" lacks \"%s\"", bad[i].in,
			    e.msg, bad[i].msg);
	}
}

static void
test_cidr(void **state)
{
	struct addr a;
	unsigned plen;
	struct err e;
	char text[ADDR_TEXT_MAX];

	(void)state;
	assert_int_equal(addr_parse_cidr("198.51.100.77/24", &a, &plen, &e), 0);
	assert_int_equal(plen, 24);
	addr_mask(&a, plen);
	addr_format(&a, text, sizeof(text));
	assert_string_equal(text, "198.51.100.0");
	assert_int_equal(
	    addr_parse_cidr("2001:db8:ffff::1/33", &a, &plen, &e), 0);
	addr_mask(&a, plen);
	addr_format(&a, text, sizeof(text));
	assert_string_equal(text, "2001:db8:8000::");
	assert_int_equal(addr_parse_cidr("203.0.113.9", &a, &plen, &e), 0);
	assert_int_equal(plen, 32);
	assert_int_equal(addr_parse_cidr("2001:db8::/0", &a, &plen, &e), 0);
	assert_int_equal(plen, 0);
	addr_mask(&a, 0);
	addr_format(&a, text, sizeof(text));
	assert_string_equal(text, "::");
	assert_int_equal(addr_parse_cidr("::/128", &a, &plen, &e), 0);
	assert_int_equal(plen, 128);
	assert_int_equal(addr_parse_cidr("198.51.100.0/33", &a, &plen, &e), -1);
	assert_int_equal(addr_parse_cidr("2001:db8::/129", &a, &plen, &e), -1);
	assert_int_equal(addr_parse_cidr("198.51.100.0/", &a, &plen, &e), -1);
	assert_int_equal(
	    addr_parse_cidr("198.51.100.0/024", &a, &plen, &e), -1);
	assert_int_equal(addr_parse_cidr("198.51.100.0/+8", &a, &plen, &e), -1);
	assert_int_equal(addr_parse_cidr("example.com/8", &a, &plen, &e), -1);
	assert_int_equal(addr_parse_cidr("/8", &a, &plen, &e), -1);
	/* every IPv4 length masks to the same as a shifted mask */
	for (plen = 0; plen <= 32; plen++) {
		uint32_t want = plen == 0 ? 0 : 0xffffffffu << (32 - plen), got;

		assert_true(addr_parse_ip("255.255.255.255", 15, &a));
		addr_mask(&a, plen);
		memcpy(&got, a.a, 4);
		assert_int_equal(ntohl(got), want);
	}
}

static void
test_sockaddr(void **state)
{
	struct sockaddr_storage ss;
	struct addr a, b;
	uint16_t port;

	(void)state;
	assert_true(addr_parse_ip("2001:db8::53", 12, &a));
	assert_int_equal(
	    addr_to_sockaddr(&a, 5353, &ss), sizeof(struct sockaddr_in6));
	assert_int_equal(
	    addr_from_sockaddr((struct sockaddr *)&ss, &b, &port), 0);
	assert_int_equal(port, 5353);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_true(addr_parse_ip("198.51.100.1", 12, &a));
	assert_int_equal(
	    addr_to_sockaddr(&a, 53, &ss), sizeof(struct sockaddr_in));
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 53);
	assert_int_equal(
	    addr_from_sockaddr((struct sockaddr *)&ss, &b, &port), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	ss.ss_family = AF_UNIX;
	assert_int_equal(
	    addr_from_sockaddr((struct sockaddr *)&ss, &b, &port), -1);
	/* a length that cuts the literal, or an embedded NUL, is no literal */
	assert_false(addr_parse_ip("198.51.100.1", 11, &a) &&
	    memcmp(a.a, "\xc6\x33\x64\x01", 4) == 0);
	assert_false(addr_parse_ip("1.2.3.4\0", 8, &a));
	assert_false(addr_parse_ip("", 0, &a));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hostport),
	    cmocka_unit_test(test_cidr),
	    cmocka_unit_test(test_sockaddr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
