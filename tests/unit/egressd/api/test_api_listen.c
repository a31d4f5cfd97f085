/*
 * api, listeners: the Unix socket (mode 0660, removed on free, never over
 * a file that is not a socket), the listen address parser, and ":PORT" as
 * dual stack. Over real sockets with fake daemon hooks (api_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "api_fixture.h"

static void
test_unix_socket(void **state)
{
	static const char req[] = "POST /policy HTTP/1.1\r\nHost: x\r\n"
	                          "Connection: close\r\n"
	                          "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	                          "Content-Length: 0\r\n\r\n";
	struct fx *f = fx_alloc();
	struct resp r;
	struct stat st;

	(void)state;
	snprintf(f->unix_path, sizeof(f->unix_path), "/tmp/egressd-api-%d.sock",
	    (int)getpid());
	f->opts.listen_tcp = NULL;
	f->opts.listen_unix = f->unix_path;
	fx_start(f);
	*state = f;
	assert_int_equal(api_tcp_port(f->api), 0);
	assert_int_equal(lstat(f->unix_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660);
	exchange(
	    f, client_connect_unix(f->unix_path), req, sizeof(req) - 1, &r);
	expect(&r, 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"reason\":\"policy "
	    "reset to default deny-all\"}\n");
	resp_free(&r);
	api_free(f->api);
	f->api = NULL;
	assert_int_equal(lstat(f->unix_path, &st), -1);
}

static void
test_unix_socket_not_clobbered(void **state)
{
	struct fx *f = fx_alloc();
	struct err e;
	int fd;

	(void)state;
	*state = f;
	snprintf(f->unix_path, sizeof(f->unix_path), "/tmp/egressd-api-%d.file",
	    (int)getpid());
	fd = open(f->unix_path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	f->opts.listen_tcp = NULL;
	f->opts.listen_unix = f->unix_path;
	err_clear(&e);
	assert_null(api_new(f->base, &f->opts, &f->hooks, &e));
	assert_non_null(strstr(e.msg, "not a socket"));
	assert_int_equal(access(f->unix_path, F_OK), 0);
	unlink(f->unix_path);
}

static void
test_parse_addr(void **state)
{
	static const char *const bad[] = {"", "18080", "::1:80", "[::1]80",
	    "[::1]", "host.example:80", "1.2.3.4:99999", "1.2.3.4:", "[zz]:1",
	    "1.2.3.4:8a", "1.2.3:80", ":"};
	struct sockaddr_storage ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	socklen_t len;
	struct err e;
	size_t i;

	(void)state;
	assert_int_equal(api_parse_addr(":18080", &ss, &len, &e), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_true(IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr));
	assert_int_equal(ntohs(s6->sin6_port), 18080);
	assert_int_equal(api_parse_addr("[::1]:0", &ss, &len, &e), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_true(IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr));
	assert_int_equal(api_parse_addr("127.0.0.1:80", &ss, &len, &e), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(ntohs(s4->sin_port), 80);
	assert_int_equal(len, sizeof(*s4));
	assert_int_equal(api_parse_addr("localhost:65535", &ss, &len, &e), 0);
	assert_int_equal(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (api_parse_addr(bad[i], &ss, &len, &e) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
}

static void
test_dual_stack(void **state)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n"
	                          "Connection: close\r\n\r\n";
	struct fx *f = fx_alloc();
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
	struct resp r;
	struct err e;
	int fd;

	(void)state;
	*state = f;
	f->opts.listen_tcp = ":0";
	err_clear(&e);
	f->api = api_new(f->base, &f->opts, &f->hooks, &e);
	assert_non_null(f->api);
	/* IPv4 reaches it through the default client. */
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	/* And IPv6 loopback, when the kernel has it. */
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd == -1)
		return;
	s6.sin6_port = htons(api_tcp_port(f->api));
	s6.sin6_addr = in6addr_loopback;
	if (connect(fd, (struct sockaddr *)&s6, sizeof(s6)) == -1 &&
	    errno != EINPROGRESS) {
		close(fd);
		return; /* no ::1 here */
	}
	exchange(f, fd, req, strlen(req), &r);
	expect(&r, 200, TEXT, "ok");
	resp_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_unix_socket, teardown),
	    cmocka_unit_test_teardown(test_unix_socket_not_clobbered, teardown),
	    cmocka_unit_test(test_parse_addr),
	    cmocka_unit_test_teardown(test_dual_stack, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
