/* Tests of egressd/base/sock.c: the options each kind of socket leaves with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egressd/base/sock.h"

static int
opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);

	assert_int_equal(getsockopt(fd, level, name, &v, &l), 0);
	return v;
}

/* Reusable at once, close-on-exec, IPv6 only on an IPv6 socket; the
 * type's flags (non-blocking) kept. */
static void
test_open_local(void **state)
{
	struct err e = {""};
	int fd4, fd6;

	(void)state;
	fd4 = sock_open_local(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, &e);
	assert_true(fd4 >= 0);
	assert_int_equal(opt(fd4, SOL_SOCKET, SO_REUSEADDR), 1);
	assert_int_equal(opt(fd4, SOL_SOCKET, SO_TYPE), SOCK_DGRAM);
	assert_true(fcntl(fd4, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(fd4, F_GETFL) & O_NONBLOCK);

	fd6 = sock_open_local(AF_INET6, SOCK_STREAM, &e);
	if (fd6 == -1)
		skip(); /* a kernel without IPv6 */
	assert_int_equal(opt(fd6, SOL_SOCKET, SO_REUSEADDR), 1);
	assert_int_equal(opt(fd6, IPPROTO_IPV6, IPV6_V6ONLY), 1);
	assert_int_equal(opt(fd6, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
	assert_true(fcntl(fd6, F_GETFD) & FD_CLOEXEC);
	assert_false(fcntl(fd6, F_GETFL) & O_NONBLOCK);
	close(fd4);
	close(fd6);
}

static void
test_open_local_error(void **state)
{
	struct err e = {""};

	(void)state;
	assert_int_equal(sock_open_local(-1, SOCK_DGRAM, &e), -1);
	assert_non_null(strstr(e.msg, "socket: "));
}

/* The size asked for, with or without the privilege to force it (the
 * kernel books twice what it is told); an absurd size is capped, not an
 * error. */
static void
test_set_buf(void **state)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	(void)state;
	assert_true(fd >= 0);
	sock_set_buf(fd, SO_RCVBUF, 4096);
	assert_int_equal(opt(fd, SOL_SOCKET, SO_RCVBUF), 2 * 4096);
	sock_set_buf(fd, SO_SNDBUF, 8192);
	assert_int_equal(opt(fd, SOL_SOCKET, SO_SNDBUF), 2 * 8192);
	sock_set_buf(fd, SO_RCVBUF, SIZE_MAX);
	assert_true(opt(fd, SOL_SOCKET, SO_RCVBUF) > 0);
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_open_local),
	    cmocka_unit_test(test_open_local_error),
	    cmocka_unit_test(test_set_buf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
