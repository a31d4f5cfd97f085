/*
 * policy.c: lifetimes, mode names, the matchers and their precedence.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "policy/policy.h"
#include "ts_policy.h"

static enum policy_action
dom(const struct policy *p, const char *name, const char **target)
{
	const struct policy_rule *r = NULL;
	enum policy_action a = policy_match_domain(p, name, &r);

	if (target != NULL)
		*target = r ? r->target : NULL;
	return a;
}

static enum policy_action
ip(const struct policy *p, const char *text, unsigned proto, uint16_t port,
    const struct policy_rule **r)
{
	uint8_t a[16];
	int fam = strchr(text, ':') ? 6 : 4;

	assert_int_equal(inet_pton(fam == 4 ? AF_INET : AF_INET6, text, a), 1);
	return policy_match_addr(p, fam, a, proto, port, r);
}

static void
test_deny_all_default(void **state)
{
	struct policy *p = policy_new_deny_all();

	(void)state;
	assert_non_null(p);
	assert_int_equal(p->refs, 1);
	assert_true(p->user_empty);
	assert_int_equal(p->default_action, POLICY_DENY);
	assert_string_equal(policy_mode_name(p), "deny_all");
	assert_int_equal(dom(p, "example.com", NULL), POLICY_DENY);
	assert_int_equal(ip(p, "203.0.113.1", 0, 0, NULL), POLICY_DENY);
	assert_ptr_equal(policy_ref(p), p);
	assert_int_equal(p->refs, 2);
	policy_unref(p);
	policy_unref(p);
	policy_unref(NULL);
}

static void
test_mode_names(void **state)
{
	struct policy *p;

	(void)state;
	p = ts_policy_json("{\"defaultAction\":\"allow\"}");
	assert_string_equal(policy_mode_name(p), "allow_all");
	assert_false(p->user_empty);
	policy_unref(p);
	p = ts_policy_json("{\"defaultAction\":\"deny\",\"egress\":[]}");
	assert_string_equal(policy_mode_name(p), "deny_all");
	policy_unref(p);
	p = ts_policy_json(
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\"}]}");
	assert_string_equal(policy_mode_name(p), "enforcing");
	assert_int_equal(p->revision, 1);
	policy_unref(p);
	p = ts_policy_json(
	    "{\"defaultAction\":\"allow\",\"egress\":[{\"action\":"
	    "\"deny\",\"target\":\"a.com\"}]}");
	assert_string_equal(policy_mode_name(p), "enforcing");
	policy_unref(p);
}

static void
test_empty_forms_deny_all(void **state)
{
	static const char *const forms[] = {
	    "", "  \n", "\"\"", "null", "{}", " { } "};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		struct policy *p = ts_policy_json(forms[i]);
		assert_true(p->user_empty);
		assert_int_equal(p->default_action, POLICY_DENY);
		assert_int_equal(p->nrules, 0);
		assert_string_equal(policy_mode_name(p), "deny_all");
		policy_unref(p);
	}
}

static void
test_wildcard_strict_subdomains(void **state)
{
	struct policy *p = ts_policy_json("{\"egress\":[{\"action\":\"allow\","
	                                  "\"target\":\"*.a.com\"}]}");

	(void)state;
	assert_int_equal(dom(p, "x.a.com", NULL), POLICY_ALLOW);
	assert_int_equal(dom(p, "x.y.a.com", NULL), POLICY_ALLOW);
	assert_int_equal(dom(p, "a.com", NULL), POLICY_DENY);
	assert_int_equal(dom(p, "xa.com", NULL), POLICY_DENY);
	assert_int_equal(dom(p, "a.com.evil", NULL), POLICY_DENY);
	policy_unref(p);
}

static void
test_exact_does_not_cover_subdomains(void **state)
{
	struct policy *p = ts_policy_json("{\"egress\":[{\"action\":\"allow\","
	                                  "\"target\":\"a.com\"}]}");

	(void)state;
	assert_int_equal(dom(p, "a.com", NULL), POLICY_ALLOW);
	assert_int_equal(dom(p, "x.a.com", NULL), POLICY_DENY);
	policy_unref(p);
}

static void
test_first_match_in_list_order(void **state)
{
	const char *t;
	struct policy *p =
	    ts_policy_json("{\"defaultAction\":\"allow\",\"egress\":["
	                   "{\"action\":\"deny\",\"target\":\"*.a.com\"},"
	                   "{\"action\":\"allow\",\"target\":\"x.a.com\"},"
	                   "{\"action\":\"allow\",\"target\":\"*.b.a.com\"},"
	                   "{\"action\":\"allow\",\"target\":\"ok.com\"},"
	                   "{\"action\":\"deny\",\"target\":\"ok.com\"}]}");

	(void)state;
	/* The earlier wildcard wins over the later exact name. */
	assert_int_equal(dom(p, "x.a.com", &t), POLICY_DENY);
	assert_string_equal(t, "*.a.com");
	assert_int_equal(dom(p, "y.b.a.com", &t), POLICY_DENY);
	assert_string_equal(t, "*.a.com");
	assert_int_equal(dom(p, "ok.com", &t), POLICY_ALLOW);
	assert_string_equal(t, "ok.com");
	assert_int_equal(dom(p, "other.org", &t), POLICY_ALLOW);
	assert_null(t);
	policy_unref(p);

	p = ts_policy_json("{\"egress\":["
	                   "{\"action\":\"allow\",\"target\":\"x.a.com\"},"
	                   "{\"action\":\"deny\",\"target\":\"*.a.com\"}]}");
	assert_int_equal(dom(p, "x.a.com", &t), POLICY_ALLOW);
	assert_string_equal(t, "x.a.com");
	assert_int_equal(dom(p, "z.a.com", &t), POLICY_DENY);
	assert_string_equal(t, "*.a.com");
	policy_unref(p);
}

static void
test_case_and_trailing_dot(void **state)
{
	struct policy *p = ts_policy_json(
	    "{\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"API.Example.COM.\"},"
	    "{\"action\":\"allow\",\"target\":\"*.Foo.org\"}]}");

	(void)state;
	assert_string_equal(p->rules[0].target, "api.example.com");
	assert_string_equal(p->rules[0].display, "API.Example.COM.");
	assert_int_equal(dom(p, "api.example.com", NULL), POLICY_ALLOW);
	assert_int_equal(dom(p, "API.EXAMPLE.COM", NULL), POLICY_ALLOW);
	assert_int_equal(dom(p, "api.example.com.", NULL), POLICY_ALLOW);
	assert_int_equal(dom(p, "X.FOO.ORG.", NULL), POLICY_ALLOW);
	assert_int_equal(dom(p, "api.example.com..", NULL), POLICY_DENY);
	assert_int_equal(dom(p, "", NULL), POLICY_DENY);
	assert_int_equal(dom(p, ".", NULL), POLICY_DENY);
	policy_unref(p);
}

static void
test_invalid_names_denied_even_under_allow(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"allow\"}");
	const char *t = "x";

	(void)state;
	assert_int_equal(dom(p, "a..com", &t), POLICY_DENY);
	assert_null(t);
	assert_int_equal(dom(p, "*.a.com", NULL), POLICY_DENY);
	assert_int_equal(dom(p, "b\xc3\xa4r.com", NULL), POLICY_DENY);
	assert_int_equal(dom(p, "a com", NULL), POLICY_DENY);
	assert_int_equal(dom(p, NULL, NULL), POLICY_DENY);
	assert_int_equal(dom(p, "ok.com", NULL), POLICY_ALLOW);
	policy_unref(p);
}

static void
test_overlay_precedence(void **state)
{
	const char *t;
	struct policy *p = ts_policy_json(
	    "{\"defaultAction\":\"allow\","
	    "\"alwaysDeny\":[\"bad.com\",\"*.evil.org\",\"203.0.113.66\"],"
	    "\"alwaysAllow\":[\"bad.com\",\"good.com\",\"*.evil.org\","
	    "\"203.0.113.0/24\"],"
	    "\"infra\":[\"infra.local\",\"198.51.100.53\"],"
	    "\"egress\":[{\"action\":\"deny\",\"target\":\"good.com\"},"
	    "{\"action\":\"deny\",\"target\":\"infra.local\"},"
	    "{\"action\":\"deny\",\"target\":\"198.51.100.0/24\"},"
	    "{\"action\":\"deny\",\"target\":\"203.0.113.0/25\"}]}");

	(void)state;
	/* always-deny > always-allow */
	assert_int_equal(dom(p, "bad.com", &t), POLICY_DENY);
	assert_int_equal(dom(p, "a.evil.org", NULL), POLICY_DENY);
	/* always-allow > user */
	assert_int_equal(dom(p, "good.com", NULL), POLICY_ALLOW);
	/* infra > user */
	assert_int_equal(dom(p, "infra.local", NULL), POLICY_ALLOW);
	assert_int_equal(ip(p, "198.51.100.53", 0, 0, NULL), POLICY_ALLOW);
	assert_int_equal(ip(p, "198.51.100.54", 0, 0, NULL), POLICY_DENY);
	/* a longer user prefix does not beat an overlay */
	assert_int_equal(ip(p, "203.0.113.5", 0, 0, NULL), POLICY_ALLOW);
	assert_int_equal(ip(p, "203.0.113.66", 0, 0, NULL), POLICY_DENY);
	/* default */
	assert_int_equal(dom(p, "elsewhere.net", NULL), POLICY_ALLOW);
	assert_int_equal(p->nalways_deny, 3);
	assert_int_equal(p->nalways_allow, 4);
	assert_int_equal(p->ninfra, 2);
	assert_int_equal(p->always_deny[0].origin, POLICY_ORIGIN_ALWAYS_DENY);
	assert_int_equal(p->infra[0].origin, POLICY_ORIGIN_INFRA);
	assert_string_equal(policy_mode_name(p), "enforcing");
	policy_unref(p);
}

static void
test_addr_longest_prefix(void **state)
{
	const struct policy_rule *r;
	struct policy *p = ts_policy_json(
	    "{\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"203.0.113.0/24\"},"
	    "{\"action\":\"deny\",\"target\":\"203.0.113.128/25\"},"
	    "{\"action\":\"allow\",\"target\":\"203.0.113.200\"},"
	    "{\"action\":\"allow\",\"target\":\"2001:db8::/32\"},"
	    "{\"action\":\"deny\",\"target\":\"2001:db8:1::/48\"},"
	    "{\"action\":\"allow\",\"target\":\"198.51.100.0/24\"},"
	    "{\"action\":\"deny\",\"target\":\"198.51.100.0/24\"}]}");

	(void)state;
	assert_int_equal(ip(p, "203.0.113.1", 0, 0, &r), POLICY_ALLOW);
	assert_string_equal(r->target, "203.0.113.0/24");
	assert_int_equal(ip(p, "203.0.113.129", 0, 0, &r), POLICY_DENY);
	assert_string_equal(r->target, "203.0.113.128/25");
	assert_int_equal(ip(p, "203.0.113.200", 0, 0, &r), POLICY_ALLOW);
	assert_string_equal(r->target, "203.0.113.200");
	assert_int_equal(ip(p, "2001:db8:2::1", 0, 0, NULL), POLICY_ALLOW);
	assert_int_equal(ip(p, "2001:db8:1::1", 0, 0, NULL), POLICY_DENY);
	assert_int_equal(ip(p, "2001:db9::1", 0, 0, &r), POLICY_DENY);
	assert_null(r);
	/* equal length: deny beats allow */
	assert_int_equal(ip(p, "198.51.100.7", 0, 0, NULL), POLICY_DENY);
	assert_int_equal(
	    policy_match_addr(p, 5, (const uint8_t *)"xxxx", 0, 0, NULL),
	    POLICY_DENY);
	policy_unref(p);
}

static void
test_addr_ports_protocols(void **state)
{
	struct policy *p = ts_policy_json(
	    "{\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"203.0.113.0/24\","
	    "\"ports\":[443,\"8000-8080\"],\"protocols\":[\"tcp\"]},"
	    "{\"action\":\"allow\",\"target\":\"198.51.100.0/24\","
	    "\"protocols\":[\"icmp\"]}]}");

	(void)state;
	assert_int_equal(
	    ip(p, "203.0.113.9", POLICY_PROTO_TCP, 443, NULL), POLICY_ALLOW);
	assert_int_equal(
	    ip(p, "203.0.113.9", POLICY_PROTO_TCP, 8080, NULL), POLICY_ALLOW);
	assert_int_equal(
	    ip(p, "203.0.113.9", POLICY_PROTO_TCP, 8081, NULL), POLICY_DENY);
	assert_int_equal(
	    ip(p, "203.0.113.9", POLICY_PROTO_UDP, 443, NULL), POLICY_DENY);
	assert_int_equal(
	    ip(p, "198.51.100.1", POLICY_PROTO_ICMP, 0, NULL), POLICY_ALLOW);
	assert_int_equal(
	    ip(p, "198.51.100.1", POLICY_PROTO_TCP, 80, NULL), POLICY_DENY);
	assert_int_equal(p->rules[0].nports, 2);
	assert_int_equal(p->rules[0].ports[1].lo, 8000);
	assert_int_equal(p->rules[0].ports[1].hi, 8080);
	assert_int_equal(p->rules[0].protocols, POLICY_PROTO_TCP);
	assert_int_equal(p->rules[1].protocols, POLICY_PROTO_ICMP);
	policy_unref(p);
}

/*
 * Ports and protocols on name rules (issue 16 item 7): decided per
 * (protocol, port) as for IP rules, the first matching rule in order,
 * then the default.
 */
static void
test_name_reach(void **state)
{
	struct policy_reach rc;
	const struct policy_rule *r;
	struct policy *p;

	(void)state;
	/* "this name, only 443": allowed, limited; other names default */
	p = ts_policy_json(
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"api.example.com\","
	    "\"ports\":[443]},"
	    "{\"action\":\"allow\",\"target\":\"*.cdn.example.com\","
	    "\"ports\":[\"8000-8080\",443],\"protocols\":[\"tcp\"]}]}");
	assert_int_equal(
	    policy_match_domain_reach(p, "API.example.com.", &r, &rc),
	    POLICY_ALLOW);
	assert_string_equal(r->target, "api.example.com");
	assert_false(rc.all);
	assert_false(rc.none);
	assert_int_equal(rc.ntcp, 1);
	assert_int_equal(rc.tcp[0].lo, 443);
	assert_int_equal(rc.tcp[0].hi, 443);
	assert_int_equal(rc.nudp, 1); /* no protocols: tcp and udp 443 */
	assert_true(rc.icmp); /* ICMP ignores ports */
	assert_false(rc.other);
	assert_true(policy_reach_allows(&rc, POLICY_PROTO_TCP, 443));
	assert_false(policy_reach_allows(&rc, POLICY_PROTO_TCP, 80));
	assert_true(policy_reach_allows(&rc, POLICY_PROTO_UDP, 443));
	assert_false(policy_reach_allows(&rc, 0, 0));
	assert_int_equal(dom(p, "api.example.com", NULL), POLICY_ALLOW);
	assert_int_equal(
	    policy_match_domain_reach(p, "x.cdn.example.com", NULL, &rc),
	    POLICY_ALLOW);
	assert_int_equal(rc.ntcp, 2);
	assert_int_equal(rc.tcp[0].lo, 443);
	assert_int_equal(rc.tcp[1].lo, 8000);
	assert_int_equal(rc.tcp[1].hi, 8080);
	assert_int_equal(rc.nudp, 0);
	assert_false(rc.icmp);
	assert_int_equal(dom(p, "other.example.com", NULL), POLICY_DENY);
	assert_int_equal(
	    policy_match_domain_reach(p, "other.example.com", &r, &rc),
	    POLICY_DENY);
	assert_true(rc.none);
	assert_null(r);
	policy_unref(p);

	/* the same name with ports in one rule, without in a later one: the
	 * later rule decides the other ports (union, as for CIDRs) */
	p = ts_policy_json(
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.com\",\"ports\":[443]},"
	    "{\"action\":\"allow\",\"target\":\"*.com\"}]}");
	assert_int_equal(
	    policy_match_domain_reach(p, "a.com", NULL, &rc), POLICY_ALLOW);
	assert_true(rc.all);
	policy_unref(p);
	/* a deny with ports first: every port but 22 */
	p = ts_policy_json(
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"a.com\",\"ports\":[22],"
	    "\"protocols\":[\"tcp\"]},"
	    "{\"action\":\"allow\",\"target\":\"*.com\"}]}");
	assert_int_equal(
	    policy_match_domain_reach(p, "a.com", &r, &rc), POLICY_ALLOW);
	assert_string_equal(r->target, "*.com");
	assert_false(rc.all);
	assert_int_equal(rc.ntcp, 2);
	assert_int_equal(rc.tcp[0].hi, 21);
	assert_int_equal(rc.tcp[1].lo, 23);
	assert_int_equal(rc.tcp[1].hi, 65535);
	assert_int_equal(rc.nudp, 1);
	assert_true(rc.icmp && rc.other);
	assert_int_equal(dom(p, "b.com", NULL), POLICY_ALLOW);
	policy_unref(p);
	/* a plain deny first wins whatever follows */
	p = ts_policy_json(
	    "{\"defaultAction\":\"allow\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"*.a.com\"},"
	    "{\"action\":\"allow\",\"target\":\"x.a.com\",\"ports\":[443]}"
	    "]}");
	assert_int_equal(
	    policy_match_domain_reach(p, "x.a.com", &r, &rc), POLICY_DENY);
	assert_true(rc.none);
	assert_string_equal(r->target, "*.a.com");
	policy_unref(p);
	/* denied on every port by restricted denies: the name is denied */
	p = ts_policy_json(
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"a.com\",\"ports\":[443]},"
	    "{\"action\":\"allow\",\"target\":\"a.com\",\"ports\":[443],"
	    "\"protocols\":[\"tcp\"]}]}");
	assert_int_equal(
	    policy_match_domain_reach(p, "a.com", &r, &rc), POLICY_DENY);
	assert_true(rc.none);
	assert_string_equal(r->target, "a.com");
	assert_int_equal(r->action, POLICY_DENY);
	policy_unref(p);
	/* default allow with a deny on one port: everything else */
	p = ts_policy_json(
	    "{\"defaultAction\":\"allow\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"a.com\",\"ports\":[25]}]}");
	assert_int_equal(
	    policy_match_domain_reach(p, "a.com", &r, &rc), POLICY_ALLOW);
	assert_null(r); /* only the default allowed */
	assert_false(rc.all);
	assert_false(policy_reach_allows(&rc, POLICY_PROTO_TCP, 25));
	assert_false(policy_reach_allows(&rc, POLICY_PROTO_UDP, 25));
	assert_true(policy_reach_allows(&rc, POLICY_PROTO_TCP, 26));
	/* ICMP ignores ports: the deny (every protocol) covers it, as an IP
	 * rule's would; other protocols only meet port-less rules */
	assert_false(policy_reach_allows(&rc, POLICY_PROTO_ICMP, 0));
	assert_true(policy_reach_allows(&rc, 0, 0));
	policy_unref(p);
	/* an always-deny overlay restricted to a port beats a user allow */
	p = ts_policy_json(
	    "{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"a.com\"}],"
	    "\"alwaysDeny\":[{\"target\":\"a.com\",\"ports\":[80]}]}");
	assert_int_equal(
	    policy_match_domain_reach(p, "a.com", NULL, &rc), POLICY_ALLOW);
	assert_false(policy_reach_allows(&rc, POLICY_PROTO_TCP, 80));
	assert_true(policy_reach_allows(&rc, POLICY_PROTO_TCP, 81));
	policy_unref(p);
}

/* The walk against a brute-force model on random policies of names. */
static bool
model_name_match(const struct policy_rule *r, const char *name)
{
	size_t ln = strlen(name), lt;

	if (r->kind == POLICY_TARGET_DOMAIN)
		return strcmp(r->target, name) == 0;
	lt = strlen(r->target + 2);
	return ln > lt + 1 && strcmp(name + ln - lt, r->target + 2) == 0 &&
	    name[ln - lt - 1] == '.';
}

static bool
model_rule_hits(const struct policy_rule *r, unsigned proto, uint16_t port)
{
	size_t i;

	if (proto == 0)
		return (r->protocols & POLICY_PROTO_ALL) == POLICY_PROTO_ALL &&
		    r->nports == 0;
	if (!(r->protocols & proto))
		return false;
	if (proto == POLICY_PROTO_ICMP || r->nports == 0)
		return true;
	for (i = 0; i < r->nports; i++)
		if (port >= r->ports[i].lo && port <= r->ports[i].hi)
			return true;
	return false;
}

static void
test_name_reach_model(void **state)
{
	static const char *const names[] = {
	    "a.com", "x.a.com", "y.x.a.com", "b.com", "x.b.com"};
	static const char *const targets[] = {"a.com", "*.a.com", "x.a.com",
	    "*.x.a.com", "*.com", "b.com", "*.b.com"};
	static const char *const ports[] = {"22", "80", "443", "\"20-30\"",
	    "\"440-450\"", "1", "65535", "\"1-65535\""};
	static const char *const protos[] = {"", ",\"protocols\":[\"tcp\"]",
	    ",\"protocols\":[\"udp\"]", ",\"protocols\":[\"icmp\"]",
	    ",\"protocols\":[\"tcp\",\"icmp\"]"};
	static const uint16_t probe[] = {0, 1, 2, 19, 20, 21, 22, 23, 30, 31,
	    79, 80, 81, 439, 440, 443, 450, 451, 8080, 65534, 65535};
	static const unsigned pbits[] = {
	    POLICY_PROTO_TCP, POLICY_PROTO_UDP, POLICY_PROTO_ICMP, 0};
	char json[4096];
	unsigned seed = 12345, it;
	size_t i, k, b, o;

	(void)state;
	for (it = 0; it < 300; it++) {
		struct policy *p;
		size_t nr = 1 + rand_r(&seed) % 6;

		o = (size_t)snprintf(json, sizeof(json),
		    "{\"defaultAction\":\"%s\",\"egress\":[",
		    rand_r(&seed) % 2 ? "allow" : "deny");
		for (i = 0; i < nr; i++) {
			unsigned np = (unsigned)(rand_r(&seed) % 3), pr;
			const char *proto = protos[rand_r(&seed) % 5];

			o += (size_t)snprintf(json + o, sizeof(json) - o,
			    "%s{\"action\":\"%s\",\"target\":\"%s\"",
			    i ? "," : "", rand_r(&seed) % 2 ? "allow" : "deny",
			    targets[rand_r(&seed) % 7]);
			if (np != 0 && strstr(proto, "icmp\"]") != NULL &&
			    strstr(proto, "tcp") == NULL)
				np = 0; /* ports need tcp or udp */
			for (pr = 0; pr < np; pr++)
				o +=
				    (size_t)snprintf(json + o, sizeof(json) - o,
				        "%s%s", pr ? "," : ",\"ports\":[",
				        ports[rand_r(&seed) % 8]);
			o += (size_t)snprintf(json + o, sizeof(json) - o,
			    "%s%s}", np ? "]" : "", proto);
		}
		snprintf(json + o, sizeof(json) - o, "]}");
		p = ts_policy_json(json);
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			struct policy_reach rc;
			enum policy_action a;
			bool any = false;

			a = policy_match_domain_reach(p, names[k], NULL, &rc);
			for (b = 0; b < 4; b++)
				for (i = 0;
				     i < sizeof(probe) / sizeof(probe[0]);
				     i++) {
					enum policy_action want =
					    p->default_action;
					size_t j;

					for (j = 0; j < p->nrules; j++)
						if (model_name_match(
						        &p->rules[j],
						        names[k]) &&
						    model_rule_hits(
						        &p->rules[j], pbits[b],
						        probe[i])) {
							want =
							    p->rules[j].action;
							break;
						}
					any |= want == POLICY_ALLOW;
					if (policy_reach_allows(
					        &rc, pbits[b], probe[i]) !=
					    (want == POLICY_ALLOW))
						fail_msg(
						    "%s %s proto %u port %u",
						    json, names[k], pbits[b],
						    probe[i]);
				}
			/* allowed exactly when some probe is (the probes hit
			 * every range edge used) */
			assert_int_equal(a == POLICY_ALLOW, any);
			assert_int_equal(dom(p, names[k], NULL), a);
		}
		policy_unref(p);
	}
}

/*
 * The rebinding filter's exception (F6): only an operator layer's IP/CIDR
 * allow rule keeps an internal address; a user rule, even 0.0.0.0/0 or the
 * address itself, never does, and always-deny wins over the operator's
 * allow, even when it is restricted to one port.
 */
static void
test_operator_allowed(void **state)
{
	static const uint8_t meta[4] = {169, 254, 169, 254},
	                     a[4] = {10, 1, 2, 3}, hi[4] = {10, 1, 2, 200},
	                     p22[4] = {10, 1, 2, 99}, inf[4] = {172, 16, 5, 5},
	                     other[4] = {10, 1, 3, 1};
	static const uint8_t ula
	    [16] = {0xfd, 0x00, 0x00, 0x01, [15] = 5},
	 ula2[16] = {0xfd, 0x00, 0x00, 0x02, [15] = 5},
	 mapped[16] = {
	     [10] = 0xff, [11] = 0xff, [12] = 10, [13] = 1, [14] = 2, [15] = 3};
	struct policy *u = ts_policy_json(
	    "{\"defaultAction\":\"allow\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"0.0.0.0/0\"},"
	    "{\"action\":\"allow\",\"target\":\"::/0\"},"
	    "{\"action\":\"allow\",\"target\":\"169.254.169.254\"},"
	    "{\"action\":\"allow\",\"target\":\"10.1.2.3\"}]}");
	struct policy *o = ts_policy_json(
	    "{\"defaultAction\":\"allow\",\"egress\":["
	    "{\"action\":\"allow\",\"target\":\"0.0.0.0/0\"},"
	    "{\"action\":\"allow\",\"target\":\"10.1.3.0/24\"}],"
	    "\"alwaysAllow\":[\"10.1.2.0/24\",\"fd00:1::/32\"],"
	    "\"infra\":[{\"target\":\"172.16.0.0/12\",\"ports\":[443],"
	    "\"protocols\":[\"tcp\"]}],"
	    "\"alwaysDeny\":[\"10.1.2.128/25\",{\"target\":\"10.1.2.99\","
	    "\"ports\":[22],\"protocols\":[\"tcp\"]}]}");
	struct policy *d = policy_new_deny_all();

	(void)state;
	/* user rules: explicitly allowed, but not by the operator */
	assert_true(
	    policy_addr_explicitly_allowed(u, 4, a, POLICY_PROTO_TCP, 443));
	assert_true(
	    policy_addr_explicitly_allowed(u, 4, meta, POLICY_PROTO_TCP, 443));
	assert_true(
	    policy_addr_explicitly_allowed(u, 6, ula, POLICY_PROTO_TCP, 443));
	assert_false(policy_addr_operator_allowed(u, 4, a));
	assert_false(policy_addr_operator_allowed(u, 4, meta));
	assert_false(policy_addr_operator_allowed(u, 6, ula));
	/* operator layers: always-allow and infra (any port counts) */
	assert_true(policy_addr_operator_allowed(o, 4, a));
	assert_true(policy_addr_operator_allowed(o, 4, inf));
	assert_true(policy_addr_operator_allowed(o, 6, ula));
	/* always-deny wins, a port-restricted one too */
	assert_false(policy_addr_operator_allowed(o, 4, hi));
	assert_false(policy_addr_operator_allowed(o, 4, p22));
	/* outside the operator's prefixes: user allows do not count */
	assert_false(policy_addr_operator_allowed(o, 4, other));
	assert_true(
	    policy_addr_explicitly_allowed(o, 4, other, POLICY_PROTO_TCP, 443));
	assert_false(policy_addr_operator_allowed(o, 4, meta));
	assert_false(policy_addr_operator_allowed(o, 6, ula2));
	/* same family only: the mapped spelling is not covered */
	assert_false(policy_addr_operator_allowed(o, 6, mapped));
	/* no rules, bad input */
	assert_false(policy_addr_operator_allowed(d, 4, a));
	assert_false(policy_addr_operator_allowed(NULL, 4, a));
	assert_false(policy_addr_operator_allowed(o, 5, a));
	policy_unref(u);
	policy_unref(o);
	policy_unref(d);
}

static void
test_explicitly_allowed(void **state)
{
	uint8_t a[4] = {10, 1, 2, 3}, b[4] = {10, 2, 0, 1};
	uint8_t c[4] = {203, 0, 113, 1};
	struct policy *p =
	    ts_policy_json("{\"defaultAction\":\"allow\",\"egress\":["
	                   "{\"action\":\"allow\",\"target\":\"10.1.0.0/16\"},"
	                   "{\"action\":\"deny\",\"target\":\"10.1.2.0/24\"},"
	                   "{\"action\":\"allow\",\"target\":\"10.2.0.1\"}]}");

	(void)state;
	assert_false(
	    policy_addr_explicitly_allowed(p, 4, a, POLICY_PROTO_TCP, 443));
	assert_true(
	    policy_addr_explicitly_allowed(p, 4, b, POLICY_PROTO_TCP, 443));
	/* allowed by the default only */
	assert_int_equal(policy_match_addr(p, 4, c, 0, 0, NULL), POLICY_ALLOW);
	assert_false(
	    policy_addr_explicitly_allowed(p, 4, c, POLICY_PROTO_TCP, 443));
	policy_unref(p);
	/* protocol- and port-aware: a rule for UDP 53 or TCP 22 does not
	 * allow TCP 80 to the address */
	p = ts_policy_json("{\"defaultAction\":\"deny\",\"egress\":["
	                   "{\"action\":\"allow\",\"target\":\"10.2.0.1\","
	                   "\"ports\":[53],\"protocols\":[\"udp\"]},"
	                   "{\"action\":\"allow\",\"target\":\"10.2.0.1\","
	                   "\"ports\":[22]}]}");
	assert_true(
	    policy_addr_explicitly_allowed(p, 4, b, POLICY_PROTO_UDP, 53));
	assert_true(
	    policy_addr_explicitly_allowed(p, 4, b, POLICY_PROTO_TCP, 22));
	assert_false(
	    policy_addr_explicitly_allowed(p, 4, b, POLICY_PROTO_TCP, 80));
	assert_false(
	    policy_addr_explicitly_allowed(p, 4, b, POLICY_PROTO_TCP, 53));
	policy_unref(p);
}

static void
test_log_skip_default_empty(void **state)
{
	struct policy *p = ts_policy_json("{\"defaultAction\":\"deny\"}");

	(void)state;
	assert_false(policy_log_skip(p, "a.com"));
	assert_int_equal(p->nlog_skip, 0);
	policy_unref(p);
}

static void
test_dns_defaults(void **state)
{
	struct policy *p = ts_policy_json("{}");

	(void)state;
	assert_int_equal(p->dns.timeout_ms, 5000);
	assert_int_equal(p->dns.ttl_min, 30);
	assert_int_equal(p->dns.ttl_max, 3600);
	assert_int_equal(p->dns.negative_ttl, 30);
	assert_int_equal(p->dns.private_answers, POLICY_PRIVATE_DROP);
	assert_int_equal(p->dns.cname_mode, POLICY_CNAME_STRICT);
	assert_int_equal(p->dns.nupstreams, 0);
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_deny_all_default),
	    cmocka_unit_test(test_mode_names),
	    cmocka_unit_test(test_empty_forms_deny_all),
	    cmocka_unit_test(test_wildcard_strict_subdomains),
	    cmocka_unit_test(test_exact_does_not_cover_subdomains),
	    cmocka_unit_test(test_first_match_in_list_order),
	    cmocka_unit_test(test_case_and_trailing_dot),
	    cmocka_unit_test(test_invalid_names_denied_even_under_allow),
	    cmocka_unit_test(test_overlay_precedence),
	    cmocka_unit_test(test_addr_longest_prefix),
	    cmocka_unit_test(test_addr_ports_protocols),
	    cmocka_unit_test(test_name_reach),
	    cmocka_unit_test(test_name_reach_model),
	    cmocka_unit_test(test_explicitly_allowed),
	    cmocka_unit_test(test_operator_allowed),
	    cmocka_unit_test(test_log_skip_default_empty),
	    cmocka_unit_test(test_dns_defaults),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
