/*
 * OpenSandbox's newer settings (config_compat.c): each honoured or
 * refused with a message naming it and why, never taken silently.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "egressd/daemon/config.h"
#include "policy/policy.h"
#include "policy/policy_apicreds.h"

#define TLS_ENV "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_TLS"
#define CIDRS_ENV "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS"
#define SCOPED_ENV "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH"
#define PORTS_ENV "OPENSANDBOX_EGRESS_MITMPROXY_EXTRA_PORTS"
#define IGNORE_ENV "OPENSANDBOX_EGRESS_MITMPROXY_IGNORE_HOSTS"
#define BACKEND_ENV "OPENSANDBOX_EGRESS_REDIRECT_BACKEND"

/* config_from_env with one variable; 0/-1, the message in e. */
static int
env1(struct config *c, const char *kv, struct err *e)
{
	char *env[] = {(char *)(uintptr_t)kv, NULL};

	err_clear(e);
	return config_from_env(c, env, e);
}

/* -1, and the message holds want. */
static void
refused(const char *kv, const char *want)
{
	struct config c;
	struct err e;

	config_init(&c);
	assert_int_equal(env1(&c, kv, &e), -1);
	if (strstr(e.msg, want) == NULL)
		fail_msg("%s: \"%s\" lacks \"%s\"", kv, e.msg, want);
	config_clear(&c);
}

static void
test_require_tls(void **state)
{
	struct config c;
	struct err e;
	(void)state;

	config_init(&c);
	assert_int_equal(env1(&c, TLS_ENV "=true", &e), 0);
	assert_int_equal(env1(&c, TLS_ENV "=1", &e), 0);
	assert_int_equal(env1(&c, TLS_ENV "=", &e), 0);
	config_clear(&c);
	/* The reference's default (no transport check) is refused, and
	 * the message says what to do instead. */
	refused(TLS_ENV "=false", CIDRS_ENV);
	refused(TLS_ENV "=0", TLS_ENV);
	refused(TLS_ENV "=maybe", "not a boolean");
}

static void
test_trusted_proxies(void **state)
{
	struct config c;
	struct err e;
	uint8_t want[4];
	(void)state;

	config_init(&c);
	assert_int_equal(
	    env1(&c, CIDRS_ENV "=198.51.100.0/24, 2001:db8::/32,203.0.113.7",
	        &e),
	    0);
	assert_int_equal(c.api.ntrusted_proxies, 3);
	assert_int_equal(c.api.trusted_proxies[0].plen, 24);
	assert_int_equal(c.api.trusted_proxies[0].net.family, AF_INET);
	assert_int_equal(inet_pton(AF_INET, "198.51.100.0", want), 1);
	assert_memory_equal(c.api.trusted_proxies[0].net.a, want, 4);
	assert_int_equal(c.api.trusted_proxies[1].net.family, AF_INET6);
	assert_int_equal(c.api.trusted_proxies[1].plen, 32);
	assert_int_equal(c.api.trusted_proxies[2].plen, 32);
	assert_int_equal(env1(&c, CIDRS_ENV "=", &e), 0);
	assert_int_equal(c.api.ntrusted_proxies, 0);
	config_clear(&c);
	refused(CIDRS_ENV "=0.0.0.0/0", "trusts every peer");
	refused(CIDRS_ENV "=::/0", "trusts every peer");
	refused(CIDRS_ENV "=198.51.100.7/24", "198.51.100.0/24");
	refused(CIDRS_ENV "=proxy.example.com", "not an IP address or CIDR");
	refused(CIDRS_ENV "=198.51.100.0/33", CIDRS_ENV);
	refused(CIDRS_ENV "=1.2.3.4/8,", "host bits");
}

static void
test_extra_ports(void **state)
{
	struct config c;
	struct err e;
	char *argv[] = {"egressd", "--proxy", "--intercept-port", "9000", NULL};
	(void)state;

	config_init(&c);
	assert_int_equal(env1(&c, PORTS_ENV "=8080, 8443,9000", &e), 0);
	assert_int_equal(c.nextra_ports, 3);
	assert_int_equal(config_from_args(&c, 4, argv, &e), 0);
	assert_int_equal(config_finish(&c, &e), 0);
	/* Added to the operator's intercept ports, each once. */
	assert_int_equal(c.nintercept_ports, 3);
	assert_int_equal(c.intercept_ports[0], 9000);
	assert_int_equal(c.intercept_ports[1], 8080);
	assert_int_equal(c.intercept_ports[2], 8443);
	config_clear(&c);

	refused(PORTS_ENV "=443", "always intercepted");
	refused(PORTS_ENV "=80,8080", "always intercepted");
	refused(PORTS_ENV "=8080,8080", "twice");
	refused(PORTS_ENV "=http", "not a number");
	refused(PORTS_ENV "=0", "out of range");
	refused(PORTS_ENV "=65536", "out of range");

	/* Without the proxy nothing is intercepted: refused at finish. */
	config_init(&c);
	assert_int_equal(env1(&c, PORTS_ENV "=8080", &e), 0);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, PORTS_ENV));
	assert_non_null(strstr(e.msg, "transparent proxy"));
	config_clear(&c);
}

static void
test_ignore_hosts(void **state)
{
	struct config c;
	struct err e;
	(void)state;

	config_init(&c);
	assert_int_equal(
	    env1(&c, IGNORE_ENV "=Pinned.Example.COM., *.bank.example", &e), 0);
	assert_int_equal(c.ignore_hosts.n, 2);
	assert_string_equal(c.ignore_hosts.v[0], "pinned.example.com");
	assert_string_equal(c.ignore_hosts.v[1], "*.bank.example");
	c.proxy_transparent = true;
	assert_int_equal(config_finish(&c, &e), 0);
	config_clear(&c);

	refused(IGNORE_ENV "=^api\\.example\\.com$", "regular expressions");
	refused(IGNORE_ENV "=.*\\.internal", "regular expressions");
	refused(IGNORE_ENV "=api.*.com", "regular expressions");
	refused(IGNORE_ENV "=api.example.com:443", "without ports");
	refused(IGNORE_ENV "=203.0.113.9", "without ports or addresses");
	refused(IGNORE_ENV "=localhost", "fully qualified");

	config_init(&c);
	assert_int_equal(env1(&c, IGNORE_ENV "=a.example.com", &e), 0);
	assert_int_equal(config_finish(&c, &e), -1);
	assert_non_null(strstr(e.msg, IGNORE_ENV));
	config_clear(&c);
}

static void
test_redirect_backend(void **state)
{
	struct config c;
	struct err e;
	(void)state;

	config_init(&c);
	assert_int_equal(env1(&c, BACKEND_ENV "=auto", &e), 0);
	assert_int_equal(env1(&c, BACKEND_ENV "=nft", &e), 0);
	assert_int_equal(env1(&c, BACKEND_ENV "=", &e), 0);
	config_clear(&c);
	refused(BACKEND_ENV "=iptables", "no iptables backend");
	refused(BACKEND_ENV "=ebpf", "not a backend");
}

static struct policy *
load(const char *yaml)
{
	struct policy_diag d;
	struct policy *p;

	policy_diag_init(&d);
	p = policy_parse_yaml(yaml, strlen(yaml), "t.yaml", &d);
	if (p == NULL)
		fail_msg("%s", d.n > 0 ? d.msgs[0] : "?");
	policy_diag_clear(&d);
	return p;
}

#define POLICY_HEAD                                                            \
	"defaultAction: deny\n"                                                \
	"egress:\n"                                                            \
	"  - {action: allow, target: api.example.com}\n"                       \
	"  - {action: allow, target: '*.svc.example.com'}\n"                   \
	"credentials:\n"                                                       \
	"  - {name: k, source: {type: inline, value: v}}\n"                    \
	"bindings:\n"

static void
test_bindings_scoped(void **state)
{
	static const struct {
		const char *match;
		const char *want; /* NULL: accepted */
	} cases[] = {
	    {"{hosts: [api.example.com], methods: [GET], paths: ['/v1/*']}",
	        NULL},
	    {"{hosts: [api.example.com], methods: [GET, POST], "
	     "paths: ['/v1/x', '/v2*']}",
	        NULL},
	    {"{hosts: [api.example.com], paths: ['/v1/*']}",
	        "names no match.methods"},
	    {"{hosts: [api.example.com], methods: [GET]}", "match.paths"},
	    {"{hosts: [api.example.com], methods: [GET], paths: ['/a', '/*']}",
	        "match.paths"},
	};
	struct config c;
	struct err e;
	size_t i;
	char yaml[1024];
	(void)state;

	config_init(&c);
	c.vault_scoped = true;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct policy *p;

		(void)snprintf(yaml, sizeof(yaml),
		    POLICY_HEAD "  - {name: b, match: %s,\n"
		                "     auth: {type: bearer, credential: k}}\n",
		    cases[i].match);
		p = load(yaml);
		err_clear(&e);
		if (cases[i].want == NULL)
			assert_int_equal(
			    config_compat_bindings(&c, p, false, &e), 0);
		else {
			assert_int_equal(
			    config_compat_bindings(&c, p, false, &e), -1);
			assert_non_null(strstr(e.msg, cases[i].want));
			assert_non_null(strstr(e.msg, "binding \"b\""));
			assert_non_null(strstr(e.msg, SCOPED_ENV));
		}
		/* Off, everything passes (the reference's default). */
		c.vault_scoped = false;
		assert_int_equal(config_compat_bindings(&c, p, false, &e), 0);
		c.vault_scoped = true;
		policy_unref(p);
	}
	config_clear(&c);
}

static void
test_bindings_ignored(void **state)
{
	static const struct {
		const char *ignore, *host;
		bool refused;
	} cases[] = {
	    {"api.example.com", "api.example.com", true},
	    {"other.example.com", "api.example.com", false},
	    {"*.example.com", "api.example.com", true},
	    {"*.api.example.com", "api.example.com", false},
	    {"a.svc.example.com", "'*.svc.example.com'", true},
	    {"svc.example.com", "'*.svc.example.com'", false},
	    {"*.example.com", "'*.svc.example.com'", true},
	    {"*.x.svc.example.com", "'*.svc.example.com'", true},
	    {"*.vc.example.com", "'*.svc.example.com'", false},
	};
	struct config c;
	struct err e;
	size_t i;
	char yaml[1024], kv[256];
	(void)state;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct policy *p;

		config_init(&c);
		(void)snprintf(
		    kv, sizeof(kv), IGNORE_ENV "=%s", cases[i].ignore);
		assert_int_equal(env1(&c, kv, &e), 0);
		(void)snprintf(yaml, sizeof(yaml),
		    POLICY_HEAD "  - {name: b, match: {hosts: [%s]},\n"
		                "     auth: {type: bearer, credential: k}}\n",
		    cases[i].host);
		p = load(yaml);
		err_clear(&e);
		if (!cases[i].refused)
			assert_int_equal(
			    config_compat_bindings(&c, p, false, &e), 0);
		else {
			assert_int_equal(
			    config_compat_bindings(&c, p, false, &e), -1);
			assert_non_null(strstr(e.msg, "never intercepted"));
			assert_non_null(strstr(e.msg, IGNORE_ENV));
		}
		policy_unref(p);
		config_clear(&c);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_require_tls),
	    cmocka_unit_test(test_trusted_proxies),
	    cmocka_unit_test(test_extra_ports),
	    cmocka_unit_test(test_ignore_hosts),
	    cmocka_unit_test(test_redirect_backend),
	    cmocka_unit_test(test_bindings_scoped),
	    cmocka_unit_test(test_bindings_ignored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
