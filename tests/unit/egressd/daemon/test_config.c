#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egressd/daemon/config.h"

static void
test_defaults(void **state)
{
	struct config c;
	(void)state;

	config_init(&c);
	assert_int_equal(c.mode, CONFIG_MODE_DNS_NFT);
	assert_string_equal(c.api.listen_tcp, ":18080");
	assert_int_equal(c.dns_port, 15353);
	assert_int_equal(c.proxy_port, 18081);
	assert_int_equal(c.api.max_rules, 4096);
	assert_int_equal(c.mark, 1);
	assert_int_equal(c.dns_timeout_s, 5);
	assert_int_equal(c.dns_probe_interval_s, 30);
	assert_string_equal(c.rules_dir, "/var/egress/rules");
	assert_null(c.api.token);
	config_clear(&c);
}

static void
test_env_all(void **state)
{
	struct config c;
	struct err e = {""};
	/* writable: the token's value is wiped where the environment
	 * holds it (what /proc/PID/environ shows) */
	char token[] = "OPENSANDBOX_EGRESS_TOKEN=s3cr3t";
	char *env[] = {
	    "PATH=/bin",
	    "OPENSANDBOX_EGRESS_MODE=dns",
	    "OPENSANDBOX_EGRESS_POLICY_FILE=/etc/p.yaml",
	    "OPENSANDBOX_EGRESS_HTTP_ADDR=127.0.0.1:9000",
	    token,
	    "OPENSANDBOX_EGRESS_MAX_RULES=0",
	    "OPENSANDBOX_EGRESS_DNS_UPSTREAM=198.51.100.1, [2001:db8::1]:5353",
	    "OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=120",
	    "OPENSANDBOX_EGRESS_LOG_LEVEL=debug",
	    "OPENSANDBOX_EGRESS_SANDBOX_ID=sbx-1",
	    "OPENSANDBOX_EGRESS_BLOCK_DOH_443=true",
	    "OPENSANDBOX_EGRESS_DOH_BLOCKLIST=203.0.113.0/24,2001:db8::5",
	    "OPENSANDBOX_EGRESS_NAMESERVER_EXEMPT=198.51.100.53",
	    "OPENSANDBOX_EGRESS_SOMETHING_NEW=ignored",
	    NULL,
	};
	(void)state;

	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.mode, CONFIG_MODE_DNS);
	assert_string_equal(c.policy_file, "/etc/p.yaml");
	assert_string_equal(c.api.listen_tcp, "127.0.0.1:9000");
	assert_string_equal(c.api.token, "s3cr3t");
	assert_null(strstr(token, "s3cr3t"));
	assert_int_equal(strncmp(token, "OPENSANDBOX_EGRESS_TOKEN=", 25), 0);
	assert_int_equal(c.api.max_rules, 0);
	assert_int_equal(c.ndns_upstreams, 2);
	assert_string_equal(c.dns_upstreams[0].text, "198.51.100.1:53");
	assert_string_equal(c.dns_upstreams[1].text, "[2001:db8::1]:5353");
	assert_int_equal(c.dns_timeout_s, 120);
	assert_int_equal(c.log_level, LOG_DEBUG);
	assert_string_equal(c.sandbox_id, "sbx-1");
	assert_true(c.block_doh_443);
	assert_int_equal(c.doh_blocklist.n, 2);
	assert_int_equal(c.nameserver_exempt.n, 1);
	config_clear(&c);
}

/* Each bad value gives one line that names the variable. */
static void
test_env_bad_values(void **state)
{
	static const struct {
		const char *kv, *needle;
	} cases[] = {
	    {"OPENSANDBOX_EGRESS_MODE=nft", "OPENSANDBOX_EGRESS_MODE"},
	    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM=dns.google", "hostnames"},
	    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM=198.51.100.1:0", "out of range"},
	    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM=[2001:db8::1", "missing ']'"},
	    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=121", "out of range"},
	    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=0", "out of range"},
	    {"OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=5s", "not a number"},
	    {"OPENSANDBOX_EGRESS_MAX_RULES=-1", "not a number"},
	    {"OPENSANDBOX_EGRESS_BLOCK_DOH_443=maybe", "not a boolean"},
	    {"OPENSANDBOX_EGRESS_HTTP_ADDR=localhost:80", "HOST:PORT"},
	    {"OPENSANDBOX_EGRESS_HTTP_ADDR=:99999", "HOST:PORT"},
	    {"OPENSANDBOX_EGRESS_LOG_LEVEL=loud", "not a level"},
	    {"OPENSANDBOX_EGRESS_DOH_BLOCKLIST=1.2.3.4/33", "DOH_BLOCKLIST"},
	    {"OPENSANDBOX_EGRESS_NAMESERVER_EXEMPT=1.2.3.0/24", "not an IP"},
	    {"OPENSANDBOX_EGRESS_DENY_WEBHOOK=ftp://x", "URL"},
	};
	size_t i;
	(void)state;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config c;
		struct err e = {""};
		char kv[256];
		char *env[2] = {kv, NULL};

		snprintf(kv, sizeof(kv), "%s", cases[i].kv);
		config_init(&c);
		assert_int_equal(config_from_env(&c, env, &e), -1);
		if (strstr(e.msg, cases[i].needle) == NULL)
			fail_msg("%s: message \"%s\" lacks \"%s\"", cases[i].kv,
			    e.msg, cases[i].needle);
		assert_null(strchr(e.msg, '\n'));
		config_clear(&c);
	}
}

/* Unknown EGRESSD_* names are collected for a warning, not fatal. */
static void
test_env_unknown_own_names(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_BIN=/x", "EGRESSD_DNS_PROT=53",
	    "EGRESSD_DNS_PORT=5353", NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.unknown_env.n, 2);
	assert_string_equal(c.unknown_env.v[0], "EGRESSD_BIN");
	assert_string_equal(c.unknown_env.v[1], "EGRESSD_DNS_PROT");
	assert_int_equal(c.dns_port, 5353);
	config_clear(&c);
}

static void
test_args_override_env(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"OPENSANDBOX_EGRESS_DNS_UPSTREAM=198.51.100.1",
	    "OPENSANDBOX_EGRESS_LOG_LEVEL=debug", NULL};
	char a0[] = "egressd", a1[] = "--dns-upstream", a2[] = "203.0.113.1:54",
	     a3[] = "--dns-upstream", a4[] = "2001:db8::53",
	     a5[] = "--log-level", a6[] = "warn", a7[] = "--check",
	     a8[] = "--policy", a9[] = "x.yaml";
	char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(config_from_args(&c, 10, argv, &e), 0);
	assert_int_equal(c.ndns_upstreams, 2);
	assert_string_equal(c.dns_upstreams[0].text, "203.0.113.1:54");
	assert_string_equal(c.dns_upstreams[1].text, "[2001:db8::53]:53");
	assert_int_equal(c.log_level, LOG_WARN);
	assert_true(c.check);
	assert_string_equal(c.policy_file, "x.yaml");
	config_clear(&c);
}

static void
test_args_errors(void **state)
{
	struct config c;
	struct err e = {""};
	char a0[] = "egressd", a1[] = "--bogus";
	char *argv1[] = {a0, a1, NULL};
	char b1[] = "--dns-port";
	char *argv2[] = {a0, b1, NULL};
	char c1[] = "stray";
	char *argv3[] = {a0, c1, NULL};
	char d1[] = "--mode", d2[] = "nft-only";
	char *argv4[] = {a0, d1, d2, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(config_from_args(&c, 2, argv1, &e), -1);
	assert_non_null(strstr(e.msg, "--bogus: unknown option"));
	assert_int_equal(config_from_args(&c, 2, argv2, &e), -1);
	assert_non_null(strstr(e.msg, "--dns-port: missing value"));
	assert_int_equal(config_from_args(&c, 2, argv3, &e), -1);
	assert_non_null(strstr(e.msg, "stray: unexpected argument"));
	assert_int_equal(config_from_args(&c, 3, argv4, &e), -1);
	assert_non_null(strstr(e.msg, "--mode"));
	config_clear(&c);
}

/* A token given on the command line is wiped from argv. */
static void
test_token_arg_wiped(void **state)
{
	struct config c;
	struct err e = {""};
	char a0[] = "egressd", a1[] = "--api-token", a2[] = "hunter2-token";
	char *argv[] = {a0, a1, a2, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_string_equal(c.api.token, "hunter2-token");
	assert_null(strstr(a2, "hunter2"));
	config_clear(&c);
}

static void
test_token_file(void **state)
{
	struct config c;
	struct err e = {""};
	char path[] = "/tmp/egressd-test-token-XXXXXX";
	int fd = mkstemp(path);
	(void)state;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "filetoken\n", 10), 10);
	close(fd);
	config_init(&c);
	c.token_file = strdup(path);
	assert_int_equal(config_finish(&c, &e), 0);
	assert_string_equal(c.api.token, "filetoken");
	config_clear(&c);

	/* Two lines are refused, and the message never shows the token. */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "abc\ndef\n", 8), 8);
	close(fd);
	config_init(&c);
	c.token_file = strdup(path);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "one non-empty line"));
	assert_null(strstr(e.msg, "abc"));
	config_clear(&c);

	/* A token no client can send (blank, spaces at an end, a control
	 * byte) is refused: HTTP trims field values. */
	{
		static const char *const bad[] = {
		    " \n", " tok\n", "tok \n", "t\tok\n", "t\x7fok\n"};
		size_t i;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			fd = open(path, O_WRONLY | O_TRUNC);
			assert_int_equal(write(fd, bad[i], strlen(bad[i])),
			    (ssize_t)strlen(bad[i]));
			close(fd);
			config_init(&c);
			c.token_file = strdup(path);
			assert_int_equal(config_finish(&c, &e), -1);
			assert_non_null(strstr(e.msg, "printable ASCII"));
			config_clear(&c);
		}
	}

	/* A token file others may rewrite is refused. */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "tok\n", 4), 4);
	close(fd);
	assert_int_equal(chmod(path, 0666), 0);
	config_init(&c);
	c.token_file = strdup(path);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "writable by group or others"));
	config_clear(&c);
	assert_int_equal(chmod(path, 0600), 0);

	config_init(&c);
	c.token_file = strdup("/nonexistent/egressd/token");
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(
	    strstr(e.msg, "/nonexistent/egressd/token: token file: "));
	config_clear(&c);
	unlink(path);
}

static void
test_inbound_ports(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_INBOUND_PORTS=44772, 8080", NULL};
	char a0[] = "egressd", a1[] = "--inbound-port", a2[] = "7777",
	     a3[] = "--inbound-port", a4[] = "7778";
	char *argv[] = {a0, a1, a2, a3, a4, NULL};
	char *bad[] = {"EGRESSD_INBOUND_PORTS=0", NULL};
	char b0[] = "egressd", b1[] = "--inbound-port", b2[] = "65536";
	char *badargv[] = {b0, b1, b2, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(c.ninbound_ports, 0); /* default: not pinned */
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.ninbound_ports, 2);
	assert_int_equal(c.inbound_ports[0], 44772);
	assert_int_equal(c.inbound_ports[1], 8080);
	/* The command line replaces the environment's list. */
	assert_int_equal(config_from_args(&c, 5, argv, &e), 0);
	assert_int_equal(c.ninbound_ports, 2);
	assert_int_equal(c.inbound_ports[0], 7777);
	assert_int_equal(c.inbound_ports[1], 7778);
	assert_int_equal(config_from_env(&c, bad, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_INBOUND_PORTS"));
	config_clear(&c);
	config_init(&c);
	assert_int_equal(config_from_args(&c, 3, badargv, &e), -1);
	assert_non_null(strstr(e.msg, "--inbound-port"));
	config_clear(&c);
}

static void
test_protected_ports(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_PROTECTED_PORTS=15000, 9090", NULL};
	char a0[] = "egressd", a1[] = "--protect-port", a2[] = "7777";
	char *argv[] = {a0, a1, a2, NULL};
	char *bad[] = {"EGRESSD_PROTECTED_PORTS=80,http", NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.nprotected_ports, 2);
	assert_int_equal(c.protected_ports[0], 15000);
	assert_int_equal(c.protected_ports[1], 9090);
	/* The command line replaces the environment's list. */
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_int_equal(c.nprotected_ports, 1);
	assert_int_equal(c.protected_ports[0], 7777);
	assert_int_equal(config_from_env(&c, bad, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_PROTECTED_PORTS"));
	config_clear(&c);
}

static void
test_hostport(void **state)
{
	struct config_hostport hp;
	struct err e = {""};
	(void)state;

	assert_int_equal(config_parse_hostport("198.51.100.7", 53, &hp, &e), 0);
	assert_int_equal(hp.port, 53);
	assert_string_equal(hp.text, "198.51.100.7:53");
	assert_int_equal(config_parse_hostport("2001:db8::1", 53, &hp, &e), 0);
	assert_string_equal(hp.text, "[2001:db8::1]:53");
	assert_int_equal(config_parse_hostport("[::1]:5353", 53, &hp, &e), 0);
	assert_string_equal(hp.text, "[::1]:5353");
	assert_int_equal(config_parse_hostport("[::1]x", 53, &hp, &e), -1);
	assert_int_equal(config_parse_hostport("1.2.3.4:", 53, &hp, &e), -1);
	assert_int_equal(
	    config_parse_hostport("1.2.3.4:65536", 53, &hp, &e), -1);
	assert_int_equal(config_parse_hostport("", 53, &hp, &e), -1);
}

/* The learned-set size: default, env, flag over env, bounds. */
static void
test_learned_max(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_LEARNED_MAX=1000", NULL};
	char *bad_env[] = {"EGRESSD_LEARNED_MAX=15", NULL};
	char *big_env[] = {"EGRESSD_LEARNED_MAX=16777217", NULL};
	char a0[] = "egressd", a1[] = "--learned-max", a2[] = "2000000";
	char *argv[] = {a0, a1, a2, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(c.learned_max, 262144);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.learned_max, 1000);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_int_equal(c.learned_max, 2000000);
	assert_int_equal(config_from_env(&c, bad_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_LEARNED_MAX"));
	assert_int_equal(config_from_env(&c, big_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_LEARNED_MAX"));
	config_clear(&c);
}

/* --proxy-conns-max: 4096 by default, env, flag over env, 0 and past
 * the range refused with the name. */
static void
test_proxy_conns_max(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_PROXY_CONNS_MAX=12000", NULL};
	char *zero_env[] = {"EGRESSD_PROXY_CONNS_MAX=0", NULL};
	char *big_env[] = {"EGRESSD_PROXY_CONNS_MAX=65537", NULL};
	char a0[] = "egressd", a1[] = "--proxy-conns-max", a2[] = "65536",
	     a3[] = "-5";
	char *argv[] = {a0, a1, a2, NULL};
	char *bad_argv[] = {a0, a1, a3, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(c.proxy_conns_max, 4096);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.proxy_conns_max, 12000);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_int_equal(c.proxy_conns_max, 65536);
	assert_int_equal(config_from_env(&c, zero_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_PROXY_CONNS_MAX"));
	assert_int_equal(config_from_env(&c, big_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_PROXY_CONNS_MAX"));
	assert_int_equal(config_from_args(&c, 3, bad_argv, &e), -1);
	assert_non_null(strstr(e.msg, "proxy-conns-max"));
	assert_int_equal(c.proxy_conns_max, 65536);
	config_clear(&c);
}

/* --proxy-buffer-max: 192 MiB by default, env, flag over env, 0 and past
 * the range refused with the name. */
static void
test_proxy_buffer_max(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_PROXY_BUFFER_MAX=64", NULL};
	char *zero_env[] = {"EGRESSD_PROXY_BUFFER_MAX=0", NULL};
	char *big_env[] = {"EGRESSD_PROXY_BUFFER_MAX=65537", NULL};
	char a0[] = "egressd", a1[] = "--proxy-buffer-max", a2[] = "4";
	char *argv[] = {a0, a1, a2, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(c.proxy_buffer_mb, 192);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.proxy_buffer_mb, 64);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_int_equal(c.proxy_buffer_mb, 4);
	assert_int_equal(config_from_env(&c, zero_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_PROXY_BUFFER_MAX"));
	assert_int_equal(config_from_env(&c, big_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_PROXY_BUFFER_MAX"));
	assert_int_equal(c.proxy_buffer_mb, 4);
	config_clear(&c);
}

/* --proxy-head-timeout: 10 s by default, env, flag over env, 0 and past
 * the range refused with the name. */
static void
test_proxy_head_timeout(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_PROXY_HEAD_TIMEOUT=3", NULL};
	char *zero_env[] = {"EGRESSD_PROXY_HEAD_TIMEOUT=0", NULL};
	char *big_env[] = {"EGRESSD_PROXY_HEAD_TIMEOUT=301", NULL};
	char a0[] = "egressd", a1[] = "--proxy-head-timeout", a2[] = "300",
	     a3[] = "2s";
	char *argv[] = {a0, a1, a2, NULL};
	char *bad_argv[] = {a0, a1, a3, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(c.proxy_head_timeout_s, 10);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.proxy_head_timeout_s, 3);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_int_equal(c.proxy_head_timeout_s, 300);
	assert_int_equal(config_from_env(&c, zero_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_PROXY_HEAD_TIMEOUT"));
	assert_int_equal(config_from_env(&c, big_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_PROXY_HEAD_TIMEOUT"));
	assert_int_equal(config_from_args(&c, 3, bad_argv, &e), -1);
	assert_non_null(strstr(e.msg, "proxy-head-timeout"));
	assert_int_equal(c.proxy_head_timeout_s, 300);
	config_clear(&c);
}

/* --vault-compressed: refuse by default, env, flag over env, bad values
 * named. */
static void
test_vault_compressed(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_VAULT_COMPRESSED=decode", NULL};
	char *bad_env[] = {"EGRESSD_VAULT_COMPRESSED=gzip", NULL};
	char *empty_env[] = {"EGRESSD_VAULT_COMPRESSED=", NULL};
	char a0[] = "egressd", a1[] = "--vault-compressed", a2[] = "refuse",
	     a3[] = "passthrough";
	char *argv[] = {a0, a1, a2, NULL};
	char *bad_argv[] = {a0, a1, a3, NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(c.vault_compressed, CONFIG_VAULT_COMPRESSED_REFUSE);
	assert_string_equal(
	    config_vault_compressed_name(c.vault_compressed), "refuse");
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(c.vault_compressed, CONFIG_VAULT_COMPRESSED_DECODE);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_int_equal(c.vault_compressed, CONFIG_VAULT_COMPRESSED_REFUSE);
	assert_int_equal(config_from_env(&c, bad_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_VAULT_COMPRESSED"));
	assert_non_null(strstr(e.msg, "refuse, decode"));
	assert_int_equal(config_from_env(&c, empty_env, &e), -1);
	assert_int_equal(config_from_args(&c, 3, bad_argv, &e), -1);
	assert_non_null(strstr(e.msg, "--vault-compressed"));
	assert_int_equal(c.vault_compressed, CONFIG_VAULT_COMPRESSED_REFUSE);
	config_clear(&c);
}

/* --vault-require-mlock: off by default; the variable and the flag each
 * turn it on, a bad value is named. */
static void
test_vault_require_mlock(void **state)
{
	struct config c;
	struct err e = {""};
	char *env[] = {"EGRESSD_VAULT_REQUIRE_MLOCK=true", NULL};
	char *off_env[] = {"EGRESSD_VAULT_REQUIRE_MLOCK=0", NULL};
	char *bad_env[] = {"EGRESSD_VAULT_REQUIRE_MLOCK=maybe", NULL};
	char a0[] = "egressd", a1[] = "--vault-require-mlock";
	char *argv[] = {a0, a1, NULL};
	(void)state;

	config_init(&c);
	assert_false(c.vault_require_mlock);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_true(c.vault_require_mlock);
	assert_int_equal(config_from_env(&c, off_env, &e), 0);
	assert_false(c.vault_require_mlock);
	assert_int_equal(config_from_args(&c, 2, argv, &e), 0);
	assert_true(c.vault_require_mlock);
	assert_int_equal(config_from_env(&c, bad_env, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_VAULT_REQUIRE_MLOCK"));
	assert_int_equal(c.unknown_env.n, 0);
	config_clear(&c);
}

/*
 * --api-loopback-uid: off by default; decimal uids only (0 named
 * explicitly counts); "" turns it off; config_finish refuses it without a
 * token, with --api-insecure-no-token, without the TCP API or in mode dns.
 */
static void
test_api_loopback_uid(void **state)
{
	struct config c;
	struct err e = {""};
	char token[] = "OPENSANDBOX_EGRESS_TOKEN=t0k"; /* wiped */
	char *env[] = {"EGRESSD_API_LOOPBACK_UID=1001", token, NULL};
	char *off_env[] = {"EGRESSD_API_LOOPBACK_UID=", NULL};
	char *bad[] = {"EGRESSD_API_LOOPBACK_UID=execd", NULL};
	char *octal[] = {"EGRESSD_API_LOOPBACK_UID=0x10", NULL};
	char *neg[] = {"EGRESSD_API_LOOPBACK_UID=-1", NULL};
	char *big[] = {"EGRESSD_API_LOOPBACK_UID=4294967295", NULL};
	char *lead0[] = {
	    "EGRESSD_API_LOOPBACK_UID=000000000000000000001", NULL};
	char *huge[] = {
	    "EGRESSD_API_LOOPBACK_UID=99999999999999999999999", NULL};
	char *dns[] = {"OPENSANDBOX_EGRESS_MODE=dns", NULL};
	char a0[] = "egressd", a1[] = "--api-loopback-uid", a2[] = "0",
	     a3[] = "--api-insecure-no-token", a4[] = "--http-addr", a5[] = "";
	char *argv[] = {a0, a1, a2, NULL};
	char *insecure[] = {a0, a3, NULL};
	char *notcp[] = {a0, a4, a5, NULL};
	(void)state;

	config_init(&c);
	assert_false(c.api_loopback_uid_set);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_true(c.api_loopback_uid_set);
	assert_int_equal(c.api_loopback_uid, 1001);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_true(c.api_loopback_uid_set);
	assert_int_equal(c.api_loopback_uid, 0);
	assert_int_equal(config_finish(&c, &e), 0);
	assert_int_equal(config_from_env(&c, off_env, &e), 0);
	assert_false(c.api_loopback_uid_set);
	assert_int_equal(c.unknown_env.n, 0);
	assert_int_equal(config_from_env(&c, bad, &e), -1);
	assert_non_null(strstr(e.msg, "EGRESSD_API_LOOPBACK_UID"));
	assert_non_null(strstr(e.msg, "not a numeric uid"));
	assert_int_equal(config_from_env(&c, octal, &e), -1);
	assert_int_equal(config_from_env(&c, neg, &e), -1);
	assert_int_equal(config_from_env(&c, big, &e), -1);
	assert_non_null(strstr(e.msg, "out of range 0..4294967294"));
	assert_int_equal(config_from_env(&c, huge, &e), -1);
	assert_non_null(strstr(e.msg, "out of range"));
	assert_int_equal(config_from_env(&c, lead0, &e), 0);
	assert_int_equal(c.api_loopback_uid, 1);
	config_clear(&c);

	/* no token */
	config_init(&c);
	assert_int_equal(config_from_args(&c, 3, argv, &e), 0);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "needs an API token"));
	config_clear(&c);
	/* a token, but mutations without one allowed */
	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(config_from_args(&c, 2, insecure, &e), 0);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "--api-insecure-no-token"));
	config_clear(&c);
	/* no TCP API */
	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(config_from_args(&c, 3, notcp, &e), 0);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "needs the TCP API"));
	config_clear(&c);
	/* mode dns */
	config_init(&c);
	assert_int_equal(config_from_env(&c, env, &e), 0);
	assert_int_equal(config_from_env(&c, dns, &e), 0);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, "mode dns+nft"));
	config_clear(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_env_all),
	    cmocka_unit_test(test_env_bad_values),
	    cmocka_unit_test(test_env_unknown_own_names),
	    cmocka_unit_test(test_args_override_env),
	    cmocka_unit_test(test_args_errors),
	    cmocka_unit_test(test_token_arg_wiped),
	    cmocka_unit_test(test_token_file),
	    cmocka_unit_test(test_protected_ports),
	    cmocka_unit_test(test_inbound_ports),
	    cmocka_unit_test(test_hostport),
	    cmocka_unit_test(test_learned_max),
	    cmocka_unit_test(test_vault_compressed),
	    cmocka_unit_test(test_vault_require_mlock),
	    cmocka_unit_test(test_api_loopback_uid),
	    cmocka_unit_test(test_proxy_conns_max),
	    cmocka_unit_test(test_proxy_buffer_max),
	    cmocka_unit_test(test_proxy_head_timeout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
