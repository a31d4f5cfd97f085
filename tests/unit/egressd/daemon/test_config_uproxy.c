/*
 * config_uproxy: the upstream proxy's settings as config.c hands them
 * over: the URL's refusals, the credential from the environment (wiped
 * there) or a file, the checks of config_finish.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "egressd/daemon/config.h"

static void
test_url(void **state)
{
	static const struct {
		const char *url, *err;
	} bad[] = {
	    {"https://198.51.100.9:3128", "https:// (TLS to the proxy)"},
	    {"socks5://198.51.100.9:1080", "http://IP[:port]"},
	    {"http://proxy.corp:3128", "IP literal"},
	    {"http://u:p@198.51.100.9:3128", "no credentials in the URL"},
	    {"http://198.51.100.9:3128/x", "no path"},
	    {"http://198.51.100.9:0", "port"},
	    {"http://", "no path"},
	};
	struct config c;
	struct err e = {""};
	size_t i;
	(void)state;

	config_init(&c);
	assert_int_equal(config_uproxy_set_url(
	                     &c.uproxy, "http://198.51.100.9:3128/", "X", &e),
	    0);
	assert_true(c.uproxy.on);
	assert_int_equal(c.uproxy.port, 3128);
	assert_int_equal(c.uproxy.addr.family, AF_INET);
	assert_int_equal(
	    config_uproxy_set_url(&c.uproxy, "http://[2001:db8::7]", "X", &e),
	    0);
	assert_int_equal(c.uproxy.port, 80);
	assert_int_equal(c.uproxy.addr.family, AF_INET6);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (config_uproxy_set_url(&c.uproxy, bad[i].url, "X", &e) != -1)
			fail_msg("%s accepted", bad[i].url);
		if (strstr(e.msg, bad[i].err) == NULL)
			fail_msg("%s: \"%s\"", bad[i].url, e.msg);
	}
	assert_int_equal(config_uproxy_set_url(&c.uproxy, "", "X", &e), 0);
	assert_false(c.uproxy.on);
	config_clear(&c);
}

/* The variable's value is wiped where the environment holds it; a
 * credential without a proxy, and a proxy without --proxy, are refused. */
static void
test_env(void **state)
{
	char v1[] =
	    "OPENSANDBOX_EGRESS_UPSTREAM_PROXY=http://198.51.100.9:3128";
	char v2[] =
	    "OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH=Basic czNjcjN0LXZhbA==";
	char v3[] = "EGRESSD_UPSTREAM_PROXY_CONNECT=address";
	char *env[] = {v1, v2, v3, NULL};
	char b1[] = "OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH=Basic a\tb";
	char *bad[] = {b1, NULL};
	struct config c;
	struct err e = {""};
	(void)state;

	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_null(strstr(v2, "czNjcjN0"));
	assert_int_equal(c.uproxy.auth_len, strlen("Basic czNjcjN0LXZhbA=="));
	assert_memory_equal(
	    c.uproxy.auth, "Basic czNjcjN0LXZhbA==", c.uproxy.auth_len);
	assert_true(c.uproxy.by_address);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "needs the transparent proxy"));
	c.proxy_transparent = true;
	assert_int_equal(config_finish(&c, &e), 0);
	c.uproxy.on = false;
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "credential without"));
	assert_int_equal(config_from_env(&c, bad, &e), -1);
	assert_null(strstr(e.msg, "Basic a"));
	config_clear(&c);
}

static void
test_auth_file(void **state)
{
	char path[] = "/tmp/egressd-test-uproxy-XXXXXX";
	char a0[] = "egressd", a1[] = "--upstream-proxy-auth-file",
	     a3[] = "--upstream-proxy", a4[] = "http://198.51.100.9:3128",
	     a5[] = "--proxy";
	char *argv[] = {a0, a1, path, a3, a4, a5, NULL};
	struct config c;
	struct err e = {""};
	int fd = mkstemp(path);
	(void)state;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "Basic ZmlsZTpjcmVk\n", 19), 19);
	close(fd);
	config_init(&c);
	assert_int_equal(config_from_args(&c, 6, argv, &e), 0);
	assert_int_equal(config_finish(&c, &e), 0);
	assert_memory_equal(c.uproxy.auth, "Basic ZmlsZTpjcmVk", 18);
	config_uproxy_clear(&c.uproxy); /* what main does once started */
	assert_null(c.uproxy.auth);
	assert_true(c.uproxy.on); /* nft still needs the address */
	config_clear(&c);

	/* others may rewrite it: refused, the value never quoted */
	assert_int_equal(chmod(path, 0666), 0);
	config_init(&c);
	assert_int_equal(config_from_args(&c, 6, argv, &e), 0);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_null(strstr(e.msg, "ZmlsZ"));
	config_clear(&c);
	unlink(path);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_url),
	    cmocka_unit_test(test_env),
	    cmocka_unit_test(test_auth_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
