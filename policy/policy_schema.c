/*
 * policy_schema: the one schema walk shared by the JSON and YAML readers.
 * Keyword tables drive it; every error is reported with the position of
 * the offending node, and the walk goes on so that one load reports all
 * of them.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_cred.h"
#include "policy/policy_glob.h"
#include "policy/policy_int.h"
#include "policy/policy_walk.h"
#include "util/addr.h"

#define TIMEOUT_MS_MAX 120000u
#define TTL_MAX 604800u /* one week */
#define UPSTREAMS_MAX 8
#define UPSTREAM_TEXT_MAX 64

/* ---- rules ---- */

enum rlist {
	RL_USER,
	RL_DENY,
	RL_ALLOW,
	RL_INFRA,
	RL_LOG_SKIP,
	RL_COUNT,
};

static const char *const rlist_key[] = {
    [RL_USER] = "egress",
    [RL_DENY] = "alwaysDeny",
    [RL_ALLOW] = "alwaysAllow",
    [RL_INFRA] = "infra",
    [RL_LOG_SKIP] = "logSkip",
};

struct ritem {
	struct policy_rule r;
	const struct pnode *action_at;
	bool have_action, have_target;
	const struct pnode *ports_at, *target_at;
	const struct pnode *request_at; /* methods or paths, the first seen */
};

/*
 * An action as the reference reads it (strings.ToLower(strings.TrimSpace)):
 * "ALLOW", "Deny " and " deny" are allow and deny, so its users' JSON
 * loads unchanged; what is written back is always the lower-case form.
 * *blank is set (and nothing else) when only white space is left, which
 * callers treat as unset.
 */
static int
action_parse(struct pwalk *w, const struct pnode *v, const char *what,
    enum policy_action *out, bool *blank)
{
	const char *s;
	size_t n;

	*blank = false;
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	s = v->str;
	n = v->len;
	while (n > 0 && strchr(" \t\n\v\f\r", s[0]) != NULL) {
		s++;
		n--;
	}
	while (n > 0 && strchr(" \t\n\v\f\r", s[n - 1]) != NULL)
		n--;
	if (n == 0) {
		*blank = true;
		return 0;
	}
	if (n == 5 && strncasecmp(s, "allow", 5) == 0)
		*out = POLICY_ALLOW;
	else if (n == 4 && strncasecmp(s, "deny", 4) == 0)
		*out = POLICY_DENY;
	else {
		policy_walk_err(
		    w, v, "unknown %s \"%.64s\" (allow or deny)", what, v->str);
		return -1;
	}
	return 0;
}

static int
rk_action(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct ritem *it = obj;
	bool blank;

	it->action_at = v;
	/* "" (or blanks) is how clients with non-omitempty fields say
	 * "unset". */
	if (action_parse(w, v, "action", &it->r.action, &blank) == -1)
		return -1;
	if (blank)
		return 0;
	it->have_action = true;
	return 0;
}

static int
rk_target(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct ritem *it = obj;
	struct err e;

	it->target_at = v;
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (policy_target_parse(v->str, &it->r, &e) == -1) {
		policy_walk_err(w, v, "%s", e.msg);
		return -1;
	}
	it->have_target = true;
	return 0;
}

static int
port_item(struct pwalk *w, const struct pnode *v, struct policy_port_range *pr)
{
	unsigned long lo, hi;
	char buf[16];
	const char *dash;

	if (v->type == PNODE_STR && (dash = strchr(v->str, '-')) != NULL) {
		size_t l = (size_t)(dash - v->str);
		struct pnode a = *v, b = *v;
		if (l == 0 || l >= sizeof(buf) ||
		    strlen(dash + 1) >= sizeof(buf))
			goto bad;
		memcpy(buf, v->str, l);
		buf[l] = '\0';
		a.str = buf;
		b.str = (char *)(uintptr_t)(dash + 1);
		if (!policy_walk_uint(w, &a, 1, 65535, true, &lo) ||
		    !policy_walk_uint(w, &b, 1, 65535, true, &hi))
			return -1;
		if (lo > hi)
			goto bad;
	} else {
		if (!policy_walk_uint(w, v, 1, 65535, true, &lo))
			return -1;
		hi = lo;
	}
	pr->lo = (uint16_t)lo;
	pr->hi = (uint16_t)hi;
	return 0;
bad:
	policy_walk_err(
	    w, v, "invalid port range \"%.32s\" (N or \"LO-HI\")", v->str);
	return -1;
}

static int
rk_ports(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct ritem *it = obj;
	size_t i;

	it->ports_at = v;
	if (!policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids == 0 || v->nkids > POLICY_PORTS_MAX) {
		policy_walk_err(
		    w, v, "ports must list 1 to %d entries", POLICY_PORTS_MAX);
		return -1;
	}
	it->r.ports = calloc(v->nkids, sizeof(*it->r.ports));
	if (it->r.ports == NULL) {
		policy_walk_err(w, v, "out of memory");
		return -1;
	}
	for (i = 0; i < v->nkids; i++)
		if (port_item(w, v->kids[i], &it->r.ports[it->r.nports]) == 0)
			it->r.nports++;
	return 0;
}

static int
rk_protocols(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct ritem *it = obj;
	size_t i;

	if (!policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids == 0) {
		policy_walk_err(w, v, "protocols must not be empty");
		return -1;
	}
	it->r.protocols = 0;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *p = v->kids[i];
		if (!policy_walk_is(w, p, PNODE_STR))
			continue;
		if (strcmp(p->str, "tcp") == 0)
			it->r.protocols |= POLICY_PROTO_TCP;
		else if (strcmp(p->str, "udp") == 0)
			it->r.protocols |= POLICY_PROTO_UDP;
		else if (strcmp(p->str, "icmp") == 0)
			it->r.protocols |= POLICY_PROTO_ICMP;
		else
			policy_walk_err(w, p,
			    "unknown protocol \"%.32s\" (tcp, udp or "
			    "icmp)",
			    p->str);
	}
	if (it->r.protocols == 0)
		it->r.protocols = POLICY_PROTO_ALL;
	return 0;
}

/* A request method as HTTP spells the standard ones: an upper-case
 * letter, then upper-case letters, digits, '-' or '_'. Matching is exact,
 * so "get" could never match a GET: refused rather than dead. */
static bool
method_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > POLICY_METHOD_TOKEN_MAX || s[0] < 'A' || s[0] > 'Z')
		return false;
	for (i = 1; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') ||
		        (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		        s[i] == '_'))
			return false;
	return true;
}

/* Appends v's string to *arr unless an earlier entry equals it. */
static void
strlist_add(struct pwalk *w, const struct pnode *v, const char *what,
    char ***arr, size_t *n)
{
	char *s;
	size_t i;

	for (i = 0; i < *n; i++)
		if (strcmp((*arr)[i], v->str) == 0) {
			policy_walk_err(
			    w, v, "duplicate %s \"%.64s\"", what, v->str);
			return;
		}
	if ((s = strdup(v->str)) == NULL ||
	    policy_walk_push((void ***)arr, n, s) == -1) {
		free(s);
		policy_walk_err(w, v, "out of memory");
	}
}

/* The shape both request keys share: a list of 1 to max strings. */
static bool
request_list(struct pwalk *w, const struct pnode *v, struct ritem *it,
    const char *what, size_t max)
{
	if (it->request_at == NULL)
		it->request_at = v;
	if (!policy_walk_is(w, v, PNODE_SEQ))
		return false;
	if (v->nkids == 0 || v->nkids > max) {
		policy_walk_err(
		    w, v, "%s must list 1 to %zu entries", what, max);
		return false;
	}
	return true;
}

static int
rk_methods(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct ritem *it = obj;
	size_t i;

	if (!request_list(w, v, it, "methods", POLICY_RULE_METHODS_MAX))
		return -1;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *m = v->kids[i];
		if (!policy_walk_is(w, m, PNODE_STR))
			continue;
		if (!method_ok(m->str, m->len)) {
			policy_walk_err(w, m,
			    "invalid method \"%.40s\" (an upper-case token "
			    "of at most %d bytes: GET, POST, ...)",
			    m->str, POLICY_METHOD_TOKEN_MAX);
			continue;
		}
		strlist_add(w, m, "method", &it->r.methods, &it->r.nmethods);
	}
	return 0;
}

static int
rk_paths(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct ritem *it = obj;
	struct err e;
	size_t i;

	if (!request_list(w, v, it, "paths", POLICY_RULE_PATHS_MAX))
		return -1;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *p = v->kids[i];
		if (!policy_walk_is(w, p, PNODE_STR))
			continue;
		if (strlen(p->str) != p->len ||
		    policy_glob_check(p->str, &e) == -1) {
			policy_walk_err(w, p, "%s",
			    strlen(p->str) != p->len ? "NUL in path pattern"
			                             : e.msg);
			continue;
		}
		strlist_add(w, p, "path", &it->r.paths, &it->r.npaths);
	}
	return 0;
}

static const struct pkey rule_keys[] = {
    {"action", rk_action, 0},
    {"target", rk_target, 0},
    {"ports", rk_ports, 0},
    {"protocols", rk_protocols, 0},
    {"methods", rk_methods, 0},
    {"paths", rk_paths, 0},
};

static enum policy_action
rlist_action(enum rlist l)
{
	return l == RL_ALLOW || l == RL_INFRA ? POLICY_ALLOW : POLICY_DENY;
}

static void
ritem_finish(
    struct pwalk *w, const struct pnode *v, struct ritem *it, enum rlist l)
{
	if (it->target_at == NULL)
		policy_walk_err(w, v, "rule has no target");
	if (!it->have_action)
		it->r.action = rlist_action(l);
	else if (l != RL_USER && it->r.action != rlist_action(l))
		policy_walk_err(w, it->action_at, "%s rules can only %s",
		    rlist_key[l],
		    rlist_action(l) == POLICY_ALLOW ? "allow" : "deny");
	if (l == RL_LOG_SKIP && it->target_at != NULL &&
	    ((it->r.kind != POLICY_TARGET_DOMAIN &&
	         it->r.kind != POLICY_TARGET_WILDCARD) ||
	        policy_rule_restricted(&it->r)))
		policy_walk_err(
		    w, it->target_at, "logSkip entries are names only");
	if (it->r.nports > 0 &&
	    (it->r.protocols & (POLICY_PROTO_TCP | POLICY_PROTO_UDP)) == 0)
		policy_walk_err(
		    w, it->ports_at, "ports need protocol tcp or udp");
	/* Requests are judged where egressd reads them: on a name it
	 * terminates or proxies, never on a bare address. */
	if (it->request_at != NULL && l != RL_USER)
		policy_walk_err(w, it->request_at,
		    "methods and paths are allowed on egress rules only");
	else if (it->request_at != NULL && it->have_target &&
	    it->r.kind != POLICY_TARGET_DOMAIN &&
	    it->r.kind != POLICY_TARGET_WILDCARD)
		policy_walk_err(w, it->request_at,
		    "methods and paths need a name target (a domain or "
		    "\"*.\" wildcard), not an address");
	else if (it->request_at != NULL &&
	    (it->r.protocols & POLICY_PROTO_TCP) == 0)
		policy_walk_err(
		    w, it->request_at, "methods and paths need protocol tcp");
}

/* One list item: a rule mapping, or (outside egress) a bare target. */
static int
rule_item(struct pwalk *w, const struct pnode *v, enum rlist l,
    struct policy_rule *out)
{
	struct ritem it;
	size_t e0 = w->errs;

	memset(&it, 0, sizeof(it));
	it.r.protocols = POLICY_PROTO_ALL;
	it.r.origin = l == RL_USER ? POLICY_ORIGIN_USER
	    : l == RL_DENY         ? POLICY_ORIGIN_ALWAYS_DENY
	    : l == RL_ALLOW        ? POLICY_ORIGIN_ALWAYS_ALLOW
	    : l == RL_LOG_SKIP     ? POLICY_ORIGIN_LOG_SKIP
	                           : POLICY_ORIGIN_INFRA;
	it.r.loc.file = w->name;
	it.r.loc.line = v->line;
	it.r.loc.col = v->col;
	if (v->type == PNODE_STR && l != RL_USER)
		(void)rk_target(w, v, &it);
	else if (v->type == PNODE_MAP)
		(void)policy_walk_map(w, v, rule_keys,
		    sizeof(rule_keys) / sizeof(rule_keys[0]), &it);
	else {
		policy_walk_err(w, v, "expected a rule mapping, found %s",
		    policy_node_type_name(v->type));
		return -1;
	}
	ritem_finish(w, v, &it, l);
	if (w->errs != e0) {
		policy_rule_clear(&it.r);
		return -1;
	}
	*out = it.r;
	return 0;
}

static int
rule_list(struct pwalk *w, const struct pnode *v, enum rlist l,
    struct policy_rvec *rv)
{
	struct policy_rule r;
	size_t i;

	if (v->type == PNODE_NULL)
		return 0;
	if (!policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids > POLICY_FILE_RULES_MAX - w->nrules) {
		policy_walk_err(w, v, "more than %u rules in one policy",
		    POLICY_FILE_RULES_MAX);
		return -1;
	}
	w->nrules += v->nkids;
	for (i = 0; i < v->nkids; i++) {
		if (rule_item(w, v->kids[i], l, &r) == -1)
			continue;
		if (policy_rvec_push(rv, &r) == -1) {
			policy_rule_clear(&r);
			policy_walk_err(w, v, "out of memory");
			return -1;
		}
	}
	return 0;
}

int
policy_rules_from_tree(const struct pnode *seq, const char *name,
    struct policy_rule **rules, size_t *nrules, struct policy_diag *d)
{
	struct pwalk w = {.name = name, .d = d};
	struct policy_rvec rv = {0};

	if (!policy_walk_is(&w, seq, PNODE_SEQ))
		return -1;
	(void)rule_list(&w, seq, RL_USER, &rv);
	if (w.errs > 0) {
		policy_rules_free(rv.v, rv.n);
		return -1;
	}
	*rules = rv.v;
	*nrules = rv.n;
	return 0;
}

/* ---- the file ---- */

struct pbuild {
	enum policy_action def;
	struct policy_rvec lists[RL_COUNT];
	bool have_overlays;
	struct policy_config *cfg;
};

static int
tk_default(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct pbuild *b = obj;
	enum policy_action a;
	bool blank;

	/* "" (or blanks) means unset (deny), as a missing key does. */
	if (action_parse(w, v, "defaultAction", &a, &blank) == -1)
		return -1;
	if (!blank)
		b->def = a;
	return 0;
}

static int
tk_egress(struct pwalk *w, const struct pnode *v, void *obj)
{
	return rule_list(
	    w, v, RL_USER, &((struct pbuild *)obj)->lists[RL_USER]);
}

/* The lists that make the overlays (always-deny, always-allow, logSkip). */
static int
overlay_list(
    struct pwalk *w, const struct pnode *v, struct pbuild *b, enum rlist l)
{
	b->have_overlays = true;
	return rule_list(w, v, l, &b->lists[l]);
}

static int
tk_always_deny(struct pwalk *w, const struct pnode *v, void *obj)
{
	return overlay_list(w, v, obj, RL_DENY);
}

static int
tk_always_allow(struct pwalk *w, const struct pnode *v, void *obj)
{
	return overlay_list(w, v, obj, RL_ALLOW);
}

static int
tk_log_skip(struct pwalk *w, const struct pnode *v, void *obj)
{
	return overlay_list(w, v, obj, RL_LOG_SKIP);
}

static int
tk_infra(struct pwalk *w, const struct pnode *v, void *obj)
{
	return rule_list(
	    w, v, RL_INFRA, &((struct pbuild *)obj)->lists[RL_INFRA]);
}

/* "ip", "ip:port" (v4), "[v6]" or "[v6]:port"; hostnames are refused. */
static bool
upstream_ok(const char *s)
{
	struct addr a;
	uint16_t port;

	return strlen(s) < UPSTREAM_TEXT_MAX &&
	    addr_parse_hostport(s, 53, 0, &a, &port, NULL) == 0;
}

static int
dk_upstreams(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_dns *dns = obj;
	size_t i;

	if (!policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids > UPSTREAMS_MAX) {
		policy_walk_err(w, v, "at most %d upstreams", UPSTREAMS_MAX);
		return -1;
	}
	if ((dns->upstreams = calloc(v->nkids + 1, sizeof(char *))) == NULL)
		return -1;
	for (i = 0; i < v->nkids; i++) {
		const struct pnode *u = v->kids[i];
		if (!policy_walk_is(w, u, PNODE_STR))
			continue;
		if (!upstream_ok(u->str)) {
			policy_walk_err(w, u,
			    "upstream \"%.64s\" is not an IP literal "
			    "with an optional port",
			    u->str);
			continue;
		}
		if (policy_walk_strdup(w, u, &dns->upstreams[dns->nupstreams]))
			dns->nupstreams++;
	}
	return 0;
}

/* A number of seconds or milliseconds in [lo, hi]. */
static int
dns_number(struct pwalk *w, const struct pnode *v, unsigned long lo,
    unsigned long hi, uint32_t *out)
{
	unsigned long x;

	if (!policy_walk_uint(w, v, lo, hi, false, &x))
		return -1;
	*out = (uint32_t)x;
	return 0;
}

static int
dk_timeout(struct pwalk *w, const struct pnode *v, void *obj)
{
	return dns_number(
	    w, v, 1, TIMEOUT_MS_MAX, &((struct policy_dns *)obj)->timeout_ms);
}

static int
dk_ttl_min(struct pwalk *w, const struct pnode *v, void *obj)
{
	return dns_number(
	    w, v, 0, TTL_MAX, &((struct policy_dns *)obj)->ttl_min);
}

static int
dk_ttl_max(struct pwalk *w, const struct pnode *v, void *obj)
{
	return dns_number(
	    w, v, 1, TTL_MAX, &((struct policy_dns *)obj)->ttl_max);
}

static int
dk_negative(struct pwalk *w, const struct pnode *v, void *obj)
{
	return dns_number(
	    w, v, 0, TTL_MAX, &((struct policy_dns *)obj)->negative_ttl);
}

/* A setting of two words: 0 for the first, 1 for the second, -1 (an
 * error naming both) for anything else. */
static int
dns_choice(struct pwalk *w, const struct pnode *v, const char *what,
    const char *first, const char *second)
{
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (strcmp(v->str, first) == 0)
		return 0;
	if (strcmp(v->str, second) == 0)
		return 1;
	policy_walk_err(w, v, "unknown %s \"%.32s\" (%s or %s)", what, v->str,
	    first, second);
	return -1;
}

static int
dk_private(struct pwalk *w, const struct pnode *v, void *obj)
{
	int k = dns_choice(w, v, "privateAnswers", "drop", "allow");

	if (k < 0)
		return -1;
	((struct policy_dns *)obj)->private_answers =
	    k == 0 ? POLICY_PRIVATE_DROP : POLICY_PRIVATE_ALLOW;
	return 0;
}

static int
dk_cname(struct pwalk *w, const struct pnode *v, void *obj)
{
	int k = dns_choice(w, v, "cname", "strict", "allow-chains");

	if (k < 0)
		return -1;
	((struct policy_dns *)obj)->cname_mode =
	    k == 0 ? POLICY_CNAME_STRICT : POLICY_CNAME_ALLOW_CHAINS;
	return 0;
}

static const struct pkey dns_keys[] = {
    {"upstreams", dk_upstreams, 0},
    {"timeoutMs", dk_timeout, 0},
    {"ttlMin", dk_ttl_min, 0},
    {"ttlMax", dk_ttl_max, 0},
    {"negativeTtl", dk_negative, 0},
    {"privateAnswers", dk_private, 0},
    {"cname", dk_cname, 0},
};

/* The key node of a mapping entry, for positions. */
static const struct pnode *
map_key(const struct pnode *map, const char *key)
{
	size_t i;

	for (i = 0; map->type == PNODE_MAP && i + 1 < map->nkids; i += 2)
		if (map->kids[i]->type == PNODE_STR &&
		    strcmp(map->kids[i]->str, key) == 0)
			return map->kids[i];
	return NULL;
}

static int
tk_dns(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct pbuild *b = obj;
	struct policy_dns *dns = &b->cfg->dns;

	(void)policy_walk_map(
	    w, v, dns_keys, sizeof(dns_keys) / sizeof(dns_keys[0]), dns);
	if (dns->ttl_min > dns->ttl_max)
		policy_walk_err(w,
		    map_key(v, "ttlMin") ? map_key(v, "ttlMin") : v,
		    "dns.ttlMin %u exceeds dns.ttlMax %u", dns->ttl_min,
		    dns->ttl_max);
	return 0;
}

static int
xk_intercept(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_proxy *px = obj;
	unsigned long port;
	size_t i;

	if (!policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids > POLICY_PORTS_MAX) {
		policy_walk_err(
		    w, v, "at most %d interceptPorts", POLICY_PORTS_MAX);
		return -1;
	}
	px->intercept_ports = calloc(v->nkids + 1, sizeof(uint16_t));
	if (px->intercept_ports == NULL)
		return -1;
	for (i = 0; i < v->nkids; i++)
		if (policy_walk_uint(w, v->kids[i], 1, 65535, false, &port))
			px->intercept_ports[px->nintercept_ports++] =
			    (uint16_t)port;
	return 0;
}

static const struct pkey proxy_keys[] = {
    {"interceptPorts", xk_intercept, 0},
};

static int
tk_proxy(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct pbuild *b = obj;

	(void)policy_walk_map(w, v, proxy_keys, 1, &b->cfg->proxy);
	return 0;
}

/* The user keys come first: POLICY_SCHEMA_USER uses only those two. */
static const struct pkey top_keys[] = {
    {"defaultAction", tk_default, 0},
    {"egress", tk_egress, 0},
    {"alwaysDeny", tk_always_deny, 0},
    {"alwaysAllow", tk_always_allow, 0},
    {"infra", tk_infra, 0},
    {"logSkip", tk_log_skip, 0},
    {"dns", tk_dns, 0},
    {"proxy", tk_proxy, 0},
    {"credentials", policy_cred_walk, offsetof(struct pbuild, cfg)},
    {"bindings", policy_binding_walk, offsetof(struct pbuild, cfg)},
};

#define TOP_USER_KEYS 2

static bool
tree_is_empty(const struct pnode *root)
{
	return root->type == PNODE_NULL ||
	    (root->type == PNODE_STR && root->len == 0) ||
	    (root->type == PNODE_MAP && root->nkids == 0);
}

static void
build_free(struct pbuild *b)
{
	size_t i;

	for (i = 0; i < RL_COUNT; i++)
		policy_rules_free(b->lists[i].v, b->lists[i].n);
	policy_config_unref(b->cfg);
}

static struct policy_overlays *
build_overlays(struct pbuild *b)
{
	struct policy_overlays *o = policy_overlays_new();

	if (o == NULL)
		return NULL;
	o->deny = b->lists[RL_DENY].v;
	o->ndeny = b->lists[RL_DENY].n;
	o->allow = b->lists[RL_ALLOW].v;
	o->nallow = b->lists[RL_ALLOW].n;
	o->log_skip = b->lists[RL_LOG_SKIP].v;
	o->nlog_skip = b->lists[RL_LOG_SKIP].n;
	memset(&b->lists[RL_LOG_SKIP], 0, sizeof(b->lists[0]));
	o->ndeny_file = o->ndeny;
	o->nallow_file = o->nallow;
	o->nlog_skip_file = o->nlog_skip;
	memset(&b->lists[RL_DENY], 0, sizeof(b->lists[0]));
	memset(&b->lists[RL_ALLOW], 0, sizeof(b->lists[0]));
	if (policy_overlays_index(o) == -1) {
		policy_overlays_unref(o);
		return NULL;
	}
	return o;
}

static int
build_infra(struct pbuild *b)
{
	struct policy_config *c = b->cfg;
	size_t i;

	c->infra = b->lists[RL_INFRA].v;
	c->ninfra = b->lists[RL_INFRA].n;
	memset(&b->lists[RL_INFRA], 0, sizeof(b->lists[0]));
	for (i = 0; i < c->ninfra; i++)
		c->infra[i].loc.file = policy_files_intern(
		    c->files, &c->nfiles, c->infra[i].loc.file);
	policy_layer_free(c->linfra);
	c->linfra = policy_layer_build(c->infra, c->ninfra);
	return c->linfra == NULL ? -1 : 0;
}

static struct policy *
build_policy(struct pwalk *w, struct pbuild *b)
{
	struct policy_overlays *ov = NULL;
	struct policy *p;

	if ((b->have_overlays && (ov = build_overlays(b)) == NULL) ||
	    build_infra(b) == -1) {
		policy_walk_err(w, NULL, "out of memory");
		build_free(b);
		return NULL;
	}
	p = policy_assemble(b->def, false, b->lists[RL_USER].v,
	    b->lists[RL_USER].n, ov, b->cfg, NULL, w->name, 1);
	if (p == NULL)
		policy_walk_err(w, NULL, "out of memory");
	return p;
}

struct policy *
policy_from_tree(const struct pnode *root, const char *name,
    enum policy_schema schema, struct policy_diag *d)
{
	struct pwalk w = {.name = name, .d = d};
	struct pbuild b;
	struct policy *p;

	memset(&b, 0, sizeof(b));
	b.def = POLICY_DENY;
	if (tree_is_empty(root))
		return policy_assemble(
		    POLICY_DENY, true, NULL, 0, NULL, NULL, NULL, name, 1);
	if ((b.cfg = policy_config_new()) == NULL) {
		policy_walk_err(&w, NULL, "out of memory");
		return NULL;
	}
	(void)policy_walk_map(&w, root, top_keys,
	    schema == POLICY_SCHEMA_USER
	        ? TOP_USER_KEYS
	        : sizeof(top_keys) / sizeof(top_keys[0]),
	    &b);
	if (w.errs > 0) {
		build_free(&b);
		return NULL;
	}
	if ((p = build_policy(&w, &b)) == NULL)
		return NULL;
	policy_binding_check_walk(&w, p);
	if (w.errs > 0) {
		policy_unref(p);
		return NULL;
	}
	return p;
}

struct policy *
policy_parse_with(policy_reader read, const char *buf, size_t len,
    const char *name, struct policy_diag *d)
{
	struct pnode *root;
	struct policy *p;

	/* Readers bound what they pass (files, bodies); this is the last
	 * line, far above any of them. */
	if (len > POLICY_FILE_CEILING) {
		policy_diag_add(
		    d, name, 0, 0, "larger than %u bytes", POLICY_FILE_CEILING);
		return NULL;
	}
	if ((root = read(buf, len, name, d)) == NULL)
		return NULL;
	p = policy_from_tree(root, name, POLICY_SCHEMA_FILE, d);
	policy_node_free(root);
	return p;
}
