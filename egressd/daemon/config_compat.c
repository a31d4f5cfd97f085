/*
 * config_compat: the settings OpenSandbox's egress sidecar grew after our
 * contract was written (issue 39; docs/compat.md, "Newer reference
 * settings"). Each is either honoured with the reference's meaning or
 * refused at start with a message naming it and why: a setting the
 * platform relies on must never pass as if it had been honoured.
 *
 *   ..._CREDENTIAL_VAULT_REQUIRE_TLS    true: vault writes need TLS, a
 *       loopback peer or a trusted proxy's X-Forwarded-Proto: https,
 *       which egressd always requires; false (the reference's default:
 *       no transport check) is refused.
 *   ..._CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS   peers whose
 *       X-Forwarded-Proto: https counts as TLS (api_auth_forwarded_tls).
 *   ..._CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH  bindings must name methods
 *       and paths, none the host-wide wildcard path (config_compat_bindings).
 *   ..._MITMPROXY_EXTRA_PORTS   TCP ports intercepted besides 80 and 443.
 *   ..._MITMPROXY_IGNORE_HOSTS  names never terminated: no binding may
 *       cover one (config_compat_bindings).
 *   ..._REDIRECT_BACKEND   auto and nft accepted (egressd programs
 *       nftables over netlink); iptables refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "egressd/daemon/config.h"
#include "policy/policy.h"
#include "policy/policy_apicreds.h"
#include "policy/policy_binding.h"
#include "util/addr.h"

#define ENV_REQUIRE_TLS "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_TLS"
#define ENV_TRUSTED "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS"
#define ENV_SCOPED "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH"
#define ENV_EXTRA_PORTS "OPENSANDBOX_EGRESS_MITMPROXY_EXTRA_PORTS"
#define ENV_IGNORE_HOSTS "OPENSANDBOX_EGRESS_MITMPROXY_IGNORE_HOSTS"
#define ENV_BACKEND "OPENSANDBOX_EGRESS_REDIRECT_BACKEND"

static int
compat_require_tls(struct config *c, const char *v, struct err *e)
{
	bool on;

	(void)c;
	/* Unset and empty mean the same to the reference. */
	if (*v == '\0')
		return 0;
	if (config_parse_bool(v, &on, ENV_REQUIRE_TLS, e) == -1)
		return -1;
	if (!on) {
		err_set(e,
		    "%s=%.16s: refused: egressd always requires TLS "
		    "(--api-tls-cert), a loopback peer or the Unix socket "
		    "for vault writes and cannot turn that off; behind a "
		    "TLS-terminating proxy set "
		    "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS",
		    ENV_REQUIRE_TLS, v);
		return -1;
	}
	return 0;
}

static int
compat_trusted_one(const char *s, struct api_cidr *out, struct err *e)
{
	struct addr a, m;
	unsigned plen;

	if (addr_parse_cidr(s, &a, &plen, e) == -1) {
		err_set(e, "%s: \"%.64s\" is not an IP address or CIDR",
		    ENV_TRUSTED, s);
		return -1;
	}
	if (plen == 0) {
		err_set(e,
		    "%s: \"%.64s\" trusts every peer, which would let any "
		    "client claim TLS; name the proxies' networks",
		    ENV_TRUSTED, s);
		return -1;
	}
	m = a;
	addr_mask(&m, plen);
	if (memcmp(m.a, a.a, addr_bits(&a) / 8) != 0) {
		char net[ADDR_TEXT_MAX];

		addr_format(&m, net, sizeof(net));
		err_set(e,
		    "%s: \"%.64s\" has host bits set (the network is "
		    "%s/%u)",
		    ENV_TRUSTED, s, net, plen);
		return -1;
	}
	out->net = m;
	out->plen = plen;
	return 0;
}

static int
compat_trusted(struct config *c, const char *v, struct err *e)
{
	struct config_strlist l = {NULL, 0};
	struct api_cidr cidrs[API_TRUSTED_PROXIES_MAX];
	size_t i;
	int rc = -1;

	if (config_split(v, &l, ENV_TRUSTED, e) == -1)
		return -1;
	if (l.n > API_TRUSTED_PROXIES_MAX) {
		err_set(e, "%s: more than %d networks", ENV_TRUSTED,
		    API_TRUSTED_PROXIES_MAX);
		goto out;
	}
	for (i = 0; i < l.n; i++)
		if (compat_trusted_one(l.v[i], &cidrs[i], e) == -1)
			goto out;
	memcpy(c->api.trusted_proxies, cidrs, l.n * sizeof(cidrs[0]));
	c->api.ntrusted_proxies = l.n;
	rc = 0;
out:
	config_strlist_clear(&l);
	return rc;
}

static int
compat_extra_ports(struct config *c, const char *v, struct err *e)
{
	struct config_strlist l = {NULL, 0};
	uint16_t ports[CONFIG_PORTS_MAX];
	size_t i, j;
	int rc = -1;

	if (config_split(v, &l, ENV_EXTRA_PORTS, e) == -1)
		return -1;
	if (l.n > CONFIG_PORTS_MAX) {
		err_set(e, "%s: more than %d ports", ENV_EXTRA_PORTS,
		    CONFIG_PORTS_MAX);
		goto out;
	}
	/* As strict as the reference: a list that says something odd is
	 * refused rather than intercepting a subset of it. */
	for (i = 0; i < l.n; i++) {
		if (config_set_port(&ports[i], l.v[i], ENV_EXTRA_PORTS, e) ==
		    -1)
			goto out;
		if (ports[i] == 80 || ports[i] == 443) {
			err_set(e, "%s: %u is always intercepted",
			    ENV_EXTRA_PORTS, ports[i]);
			goto out;
		}
		for (j = 0; j < i; j++)
			if (ports[j] == ports[i]) {
				err_set(e, "%s: %u twice", ENV_EXTRA_PORTS,
				    ports[i]);
				goto out;
			}
	}
	memcpy(c->extra_ports, ports, l.n * sizeof(ports[0]));
	c->nextra_ports = l.n;
	rc = 0;
out:
	config_strlist_clear(&l);
	return rc;
}

/* One entry of IGNORE_HOSTS, normalized into out (POLICY_NAME_MAX + 1). */
static int
compat_ignore_one(const char *s, char *out, size_t cap, struct err *e)
{
	struct addr a;

	/* The reference hands these to mitmproxy, which reads them as
	 * regular expressions; egressd decides by the TLS server name and
	 * takes names and "*.suffix" only, so a pattern is refused rather
	 * than read as something else than its author meant. */
	if (strpbrk(s, "^$\\()[]{}|+?") != NULL ||
	    (strchr(s, '*') != NULL && strncmp(s, "*.", 2) != 0)) {
		err_set(e,
		    "%s: \"%.64s\" is a pattern; egressd takes host names "
		    "and \"*.suffix\" wildcards, not regular expressions",
		    ENV_IGNORE_HOSTS, s);
		return -1;
	}
	if (strchr(s, ':') != NULL ||
	    (addr_parse_cidr(s, &a, &(unsigned){0}, NULL) == 0)) {
		err_set(e,
		    "%s: \"%.64s\": egressd matches the TLS server name; "
		    "give host names without ports or addresses",
		    ENV_IGNORE_HOSTS, s);
		return -1;
	}
	if (policy_name_normalize(s, out, cap, e) == -1) {
		err_prefix(e, "%s: \"%.64s\"", ENV_IGNORE_HOSTS, s);
		return -1;
	}
	if (strchr(out[0] == '*' ? out + 2 : out, '.') == NULL) {
		err_set(e, "%s: \"%.64s\" is not a fully qualified name",
		    ENV_IGNORE_HOSTS, s);
		return -1;
	}
	return 0;
}

static int
compat_ignore_hosts(struct config *c, const char *v, struct err *e)
{
	struct config_strlist l = {NULL, 0};
	char name[POLICY_NAME_MAX + 1];
	size_t i;

	if (config_split(v, &l, ENV_IGNORE_HOSTS, e) == -1)
		return -1;
	for (i = 0; i < l.n; i++) {
		char *n;

		if (compat_ignore_one(l.v[i], name, sizeof(name), e) == -1)
			goto fail;
		if ((n = strdup(name)) == NULL) {
			err_set(e, "%s: out of memory", ENV_IGNORE_HOSTS);
			goto fail;
		}
		free(l.v[i]);
		l.v[i] = n;
	}
	config_strlist_clear(&c->ignore_hosts);
	c->ignore_hosts = l;
	return 0;
fail:
	config_strlist_clear(&l);
	return -1;
}

static int
compat_backend(struct config *c, const char *v, struct err *e)
{
	(void)c;
	if (*v == '\0' || strcasecmp(v, "auto") == 0 ||
	    strcasecmp(v, "nft") == 0)
		return 0;
	if (strcasecmp(v, "iptables") == 0)
		err_set(e,
		    "%s=iptables: refused: egressd programs nftables over "
		    "netlink only and has no iptables backend; use auto or "
		    "nft",
		    ENV_BACKEND);
	else
		err_set(e, "%s: \"%.64s\" is not a backend (auto, nft)",
		    ENV_BACKEND, v);
	return -1;
}

static int
compat_scoped(struct config *c, const char *v, struct err *e)
{
	return config_parse_bool(v, &c->vault_scoped, ENV_SCOPED, e);
}

static const struct {
	const char *name;
	int (*set)(struct config *c, const char *v, struct err *e);
} compat_envs[] = {
    {ENV_REQUIRE_TLS, compat_require_tls},
    {ENV_TRUSTED, compat_trusted},
    {ENV_SCOPED, compat_scoped},
    {ENV_EXTRA_PORTS, compat_extra_ports},
    {ENV_IGNORE_HOSTS, compat_ignore_hosts},
    {ENV_BACKEND, compat_backend},
};

int
config_compat_env(
    struct config *c, const char *name, size_t nl, const char *v, struct err *e)
{
	size_t i;

	for (i = 0; i < sizeof(compat_envs) / sizeof(compat_envs[0]); i++) {
		if (strlen(compat_envs[i].name) != nl ||
		    strncmp(compat_envs[i].name, name, nl) != 0)
			continue;
		if (strnlen(v, CONFIG_VALUE_MAX + 1) > CONFIG_VALUE_MAX) {
			err_set(e, "%s: value longer than %d bytes",
			    compat_envs[i].name, CONFIG_VALUE_MAX);
			return -1;
		}
		return compat_envs[i].set(c, v, e) == -1 ? -1 : 1;
	}
	return 0;
}

int
config_compat_finish(struct config *c, struct err *e)
{
	size_t i, j;

	if (!c->proxy_transparent &&
	    (c->nextra_ports > 0 || c->ignore_hosts.n > 0)) {
		err_set(e,
		    "%s needs the transparent proxy "
		    "(OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT=true, --proxy): "
		    "without it nothing is intercepted",
		    c->nextra_ports > 0 ? ENV_EXTRA_PORTS : ENV_IGNORE_HOSTS);
		return -1;
	}
	/* Added to the operator's own intercept ports, not replacing them. */
	for (i = 0; i < c->nextra_ports; i++) {
		for (j = 0; j < c->nintercept_ports; j++)
			if (c->intercept_ports[j] == c->extra_ports[i])
				break;
		if (j < c->nintercept_ports)
			continue;
		if (c->nintercept_ports == CONFIG_PORTS_MAX) {
			err_set(e,
			    "%s with the intercept ports: more than %d ports",
			    ENV_EXTRA_PORTS, CONFIG_PORTS_MAX);
			return -1;
		}
		c->intercept_ports[c->nintercept_ports++] = c->extra_ports[i];
	}
	return 0;
}

void
config_compat_clear(struct config *c)
{
	config_strlist_clear(&c->ignore_hosts);
}

/* "a.b.c" strictly below "b.c". */
static bool
compat_below(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s + 1 && name[n - s - 1] == '.' &&
	    strcmp(name + n - s, suffix) == 0;
}

/*
 * Can a name match both patterns (exact names or "*.suffix", strict
 * subdomains)? A binding that could ever match an ignored name is
 * refused, not just one that names it.
 */
static bool
compat_overlap(const char *x, const char *y)
{
	bool wx = strncmp(x, "*.", 2) == 0, wy = strncmp(y, "*.", 2) == 0;

	if (!wx && !wy)
		return strcmp(x, y) == 0;
	if (wx && !wy)
		return compat_below(y, x + 2);
	if (!wx && wy)
		return compat_below(x, y + 2);
	return strcmp(x + 2, y + 2) == 0 || compat_below(x + 2, y + 2) ||
	    compat_below(y + 2, x + 2);
}

/* Why b is not scoped, or NULL when it is. */
static const char *
compat_unscoped(const struct policy_binding *b)
{
	size_t i;

	if (!policy_binding_methods_named(b))
		return "names no match.methods";
	for (i = 0; i < policy_binding_npaths(b); i++)
		if (strcmp(policy_binding_path(b, i), "/*") == 0)
			return "names no match.paths, or the path \"/*\"";
	return NULL;
}

static int
compat_binding(
    const struct config *c, const struct policy_binding *b, struct err *e)
{
	const char *why;
	size_t i, j;

	if (c->vault_scoped && (why = compat_unscoped(b)) != NULL) {
		err_set(e, "binding \"%s\" %s, and %s asks for both",
		    policy_binding_name(b), why, ENV_SCOPED);
		return -1;
	}
	for (i = 0; i < policy_binding_nhosts(b); i++)
		for (j = 0; j < c->ignore_hosts.n; j++)
			if (compat_overlap(policy_binding_host(b, i),
			        c->ignore_hosts.v[j])) {
				err_set(e,
				    "binding \"%s\" host \"%s\" is never "
				    "intercepted: it matches \"%s\" of %s",
				    policy_binding_name(b),
				    policy_binding_host(b, i),
				    c->ignore_hosts.v[j], ENV_IGNORE_HOSTS);
				return -1;
			}
	return 0;
}

const char *
config_compat_ignored(const struct config *c, const char *name)
{
	size_t j;

	for (j = 0; j < c->ignore_hosts.n; j++)
		if (compat_overlap(name, c->ignore_hosts.v[j]))
			return c->ignore_hosts.v[j];
	return NULL;
}

int
config_compat_bindings(
    const struct config *c, const struct policy *p, bool api, struct err *e)
{
	size_t i, n;

	if (p == NULL || (!c->vault_scoped && c->ignore_hosts.n == 0))
		return 0;
	n = api ? policy_apicreds_nbindings(p) : p->nbindings;
	for (i = 0; i < n; i++) {
		const struct policy_binding *b =
		    api ? policy_apicreds_binding(p, i, NULL) : p->bindings[i];

		if (compat_binding(c, b, e) == -1)
			return -1;
	}
	return 0;
}
