/*
 * policy: the egress policy model.
 *
 * A struct policy is an immutable, reference-counted snapshot: built fresh
 * by a loader or a mutation, validated completely, compiled (domain index,
 * prefix tree), and only then handed out. Nobody writes to one after
 * policy_* returned it; readers may use the public fields directly. The
 * daemon swaps snapshots atomically (one pointer in struct egressd) and
 * in-flight work keeps its own reference.
 *
 * Layers, highest precedence first (contract §1):
 *   always-deny overlay > always-allow overlay > infra allows > user rules
 *   > default action.
 * "User policy" is {defaultAction, egress[]}: what GET /policy returns and
 * what the /policy API replaces, patches and deletes. Everything else
 * (overlays, infra allows, dns/proxy settings, credentials, bindings) is
 * operator configuration that API mutations carry over unchanged.
 *
 * No I/O but reading files; no logging; no event loop.
 */
#ifndef EGRESSD_POLICY_H
#define EGRESSD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Bounds (named so tests and docs can cite them). */
/*
 * Operator files (policy file, OPENSANDBOX_EGRESS_RULES) are owner-checked
 * and trusted: their bounds follow from the rule cap, not from hostile
 * input. A file holds at most POLICY_FILE_RULES_MAX rules (all lists; the
 * same ceiling as OPENSANDBOX_EGRESS_MAX_RULES), and by default
 * POLICY_FILE_RULE_BYTES per rule of them: POLICY_FILE_MAX, which
 * --policy-file-max can change (up to POLICY_FILE_CEILING). API bodies are
 * hostile input and keep their own small bound, POLICY_BODY_MAX.
 */
#define POLICY_FILE_RULES_MAX 1000000u /* rules of one policy file */
#define POLICY_FILE_RULE_BYTES 256u /* default byte budget per rule */
#define POLICY_FILE_MAX (POLICY_FILE_RULES_MAX * POLICY_FILE_RULE_BYTES)
#define POLICY_FILE_CEILING (1u << 30) /* largest --policy-file-max */
#define POLICY_BODY_MAX (1u << 20) /* bytes of one API body */
#define POLICY_DEPTH_MAX 16 /* nesting of YAML/JSON */
#define POLICY_NAME_MAX 253 /* DNS name, presentation form */
#define POLICY_DIAG_MAX 100 /* errors kept per load */

enum policy_action {
	POLICY_DENY = 0,
	POLICY_ALLOW = 1,
};

enum policy_target_kind {
	POLICY_TARGET_DOMAIN, /* "api.example.com" */
	POLICY_TARGET_WILDCARD, /* "*.example.com": strict subdomains */
	POLICY_TARGET_IP, /* single address, stored as /32 or /128 */
	POLICY_TARGET_CIDR, /* masked prefix */
};

enum policy_origin {
	POLICY_ORIGIN_USER,
	POLICY_ORIGIN_ALWAYS_DENY,
	POLICY_ORIGIN_ALWAYS_ALLOW,
	POLICY_ORIGIN_INFRA,
	POLICY_ORIGIN_LOG_SKIP, /* log_skip.always: never decides */
};

#define POLICY_PROTO_TCP 0x1u
#define POLICY_PROTO_UDP 0x2u
#define POLICY_PROTO_ICMP 0x4u /* ICMP and ICMPv6 */
#define POLICY_PROTO_ALL 0x7u

/* Where a value came from, for "FILE:LINE:COL: message". */
struct policy_loc {
	const char *file; /* borrowed from the snapshot's string pool */
	unsigned line, col;
};

struct policy_prefix {
	uint8_t family; /* 4 or 6 */
	uint8_t len; /* prefix length, 0..32 or 0..128 */
	uint8_t addr[16]; /* network byte order, host bits zero */
};

struct policy_port_range {
	uint16_t lo, hi; /* inclusive, 1..65535 */
};

struct policy_rule {
	enum policy_action action;
	enum policy_target_kind kind;
	enum policy_origin origin;
	char *target; /* normalized: lowercase, no trailing dot, CIDR masked */
	char *display; /* as the user wrote it (echoed by GET /policy) */
	struct policy_prefix prefix; /* IP and CIDR kinds only */
	struct policy_port_range *ports; /* NULL/0 = every port */
	size_t nports;
	unsigned protocols; /* POLICY_PROTO_*; POLICY_PROTO_ALL when absent */
	/*
	 * Request rules (issue 37): user egress name rules (domain and
	 * wildcard kinds) only. methods: exact, case-sensitive upper-case
	 * tokens; paths: normalized patterns (policy_glob.h). A rule with
	 * either is a request rule (policy_rule_is_request); a plain rule
	 * has both empty and matches every request.
	 */
	char **methods;
	size_t nmethods;
	char **paths;
	size_t npaths;
	struct policy_loc loc;
};

#define POLICY_RULE_METHODS_MAX 16 /* methods of one rule */
#define POLICY_RULE_PATHS_MAX 64 /* path patterns of one rule */
#define POLICY_METHOD_TOKEN_MAX 32 /* bytes of one method token */

enum policy_private_answers {
	POLICY_PRIVATE_DROP = 0, /* default: strip unless operator-allowed */
	POLICY_PRIVATE_ALLOW, /* operator opted out of rebinding defence */
};

enum policy_cname_mode {
	POLICY_CNAME_STRICT = 0, /* every name of the chain must be allowed */
	POLICY_CNAME_ALLOW_CHAINS, /* same; documented alias for future modes */
};

/*
 * Defaults of the policy's "dns" block (docs/policy.md): the learned-address
 * TTL clamp is also what the nft module falls back to without a policy.
 */
#define POLICY_DNS_TIMEOUT_MS_DEFAULT 5000
#define POLICY_DNS_TTL_MIN_DEFAULT 30 /* seconds */
#define POLICY_DNS_TTL_MAX_DEFAULT 3600 /* seconds */
#define POLICY_DNS_NEGATIVE_TTL_DEFAULT 30 /* seconds */

struct policy_dns {
	char **upstreams; /* "ip", "ip:port", "[v6]:port"; literals only */
	size_t nupstreams;
	unsigned timeout_ms; /* per upstream attempt */
	uint32_t ttl_min, ttl_max; /* clamp for learned addresses, seconds */
	uint32_t negative_ttl; /* SOA minimum of synthesized NXDOMAIN */
	enum policy_private_answers private_answers;
	enum policy_cname_mode cname_mode;
};

struct policy_proxy {
	uint16_t *intercept_ports; /* TCP ports redirected when a proxy runs */
	size_t nintercept_ports;
};

/* Opaque: the credential value never leaves the policy/vault libraries. */
struct policy_credential;
/* Opaque: binding match + auth, validated per contract §4. */
struct policy_binding;
/* Opaque compiled lookup structures. */
struct policy_index;

struct policy {
	unsigned refs; /* policy_ref/policy_unref only */
	uint64_t revision; /* bumped by every successful mutation */
	enum policy_action default_action;
	bool user_empty; /* user policy was ""/null/{} (reset to deny-all) */

	struct policy_rule *rules; /* user rules, list order */
	size_t nrules;
	struct policy_rule *always_deny, *always_allow, *infra;
	size_t nalways_deny, nalways_allow, ninfra;

	struct policy_dns dns;
	struct policy_proxy proxy;

	struct policy_credential **credentials;
	size_t ncredentials;
	struct policy_binding **bindings;
	size_t nbindings;

	struct policy_index *index;
	char *source; /* file path or "api" or "env", for status */

	/* log_skip.always: denied names not worth a log line (no effect on
	 * decisions). Domain and wildcard targets only. */
	struct policy_rule *log_skip;
	size_t nlog_skip;
};

/* All errors of one load, each "FILE:LINE:COL: message". */
struct policy_diag {
	char **msgs;
	size_t n;
	bool truncated; /* more than POLICY_DIAG_MAX errors */
};

void policy_diag_init(struct policy_diag *d);
void policy_diag_clear(struct policy_diag *d);
/* Adds "NAME:LINE:COL: message" (or "NAME: message" when line is 0),
 * honouring POLICY_DIAG_MAX. */
void policy_diag_add(struct policy_diag *d, const char *name, unsigned line,
    unsigned col, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Joins all messages with "; " into e (for one-line API answers). */
void policy_diag_to_err(const struct policy_diag *d, struct err *e);

/* Lifetimes. */
struct policy *policy_new_deny_all(void);
struct policy *policy_ref(struct policy *p);
void policy_unref(struct policy *p); /* NULL is a no-op */

/*
 * Loaders. Each returns a new snapshot (refs == 1, revision 1) or NULL with
 * every error in d. "name" is what error messages call the input.
 *
 * The full schema (docs/policy.md): defaultAction, egress, alwaysDeny,
 * alwaysAllow, infra, logSkip, dns, proxy, credentials, bindings. JSON and
 * YAML share it; unknown keys are errors. An empty input, "", null and {}
 * are the deny-all reset (user_empty). Bindings are checked (references,
 * coverage, ambiguity) as part of the load. policy_load_file reads the
 * JSON reader when the first non-blank byte is '{' or '[', else YAML.
 * policy_new_deny_all has revision 0.
 */
struct policy *policy_load_file(const char *path, struct policy_diag *d);
/* Same, refusing files larger than max_bytes (0: POLICY_FILE_MAX; at most
 * POLICY_FILE_CEILING). */
struct policy *policy_load_file_max(
    const char *path, size_t max_bytes, struct policy_diag *d);
struct policy *policy_parse_yaml(
    const char *buf, size_t len, const char *name, struct policy_diag *d);
struct policy *policy_parse_json(
    const char *buf, size_t len, const char *name, struct policy_diag *d);

/*
 * The always-rules directory (deny.always, allow.always, log_skip.always):
 * returns a new snapshot equal to base (same revision and source) whose
 * overlays are base's own file overlays followed by the directory's;
 * calling it again replaces only the directory's part. Missing files mean
 * empty lists. Refused (NULL) when a line is bad or the new denies would
 * uncover a binding. base is borrowed.
 */
struct policy *policy_with_overlays_dir(
    const struct policy *base, const char *dir, struct policy_diag *d);

/*
 * API mutations: pure, base borrowed, result new (revision = base + 1).
 * max_rules 0 = no cap; over the cap *over_cap is set (413) and the message
 * is "egress rule total count N exceeds limit M".
 * Body texts are the raw JSON of the request; error messages follow
 * contract §6 without their fixed prefixes ("invalid policy: " etc. are
 * added by the API).
 */
struct policy *policy_replace_json(const struct policy *base, const char *body,
    size_t len, size_t max_rules, bool *over_cap,
    struct err *e); /* empty body or ""/null/{}: deny-all reset */
struct policy *policy_patch_json(const struct policy *base, const char *body,
    size_t len, size_t max_rules, bool *over_cap, struct err *e);
/*
 * *matched = number of rules removed; 0 means nothing to apply: then NULL
 * is returned with e = "no matching targets found" (the API answers 200).
 * PATCH/DELETE with an empty body fail with e = "empty body", with an
 * empty array with "empty array". Names compare after normalization
 * (case-insensitive, trailing dot ignored, CIDRs masked).
 */
struct policy *policy_delete_json(const struct policy *base, const char *body,
    size_t len, size_t *matched, struct err *e);

/*
 * Matching. Overlays first, then infra, then user rules in list order, then
 * the default action. *rule (may be NULL) gets the deciding rule or NULL
 * when the default decided. Names are matched case-insensitively, a
 * trailing dot ignored; invalid names are denied. A name rule with ports
 * or protocols decides only those (see policy_match_domain_reach): a name
 * is allowed when any protocol or port of it is.
 */
enum policy_action policy_match_domain(
    const struct policy *p, const char *name, const struct policy_rule **rule);
/*
 * What a name may reach on the addresses it resolves to, when rules
 * restrict ports or protocols. Decided per (protocol, port) as for IP
 * rules: the first rule (overlays, infra, user rules in list order) that
 * matches the name AND the protocol and port decides; the default action
 * decides what no rule matches. Ports restrict TCP and UDP; ICMP ignores
 * them; protocols policy has no name for ("other") are matched only by a
 * rule with every protocol and no ports.
 */
#define POLICY_REACH_RANGES_MAX 128 /* port ranges per protocol */

struct policy_reach {
	bool all; /* every protocol and port: no limit */
	bool none; /* nothing: the name is denied */
	/* else: allowed port ranges (sorted, disjoint, 0..65535) */
	struct policy_port_range tcp[POLICY_REACH_RANGES_MAX];
	struct policy_port_range udp[POLICY_REACH_RANGES_MAX];
	size_t ntcp, nudp;
	bool icmp, other;
};

/*
 * policy_match_domain with what the name may reach: ALLOW when anything
 * is allowed (reach->none false). *rule (may be NULL) gets the first rule
 * that decided a part with the returned action, NULL when only the
 * default did. Ranges beyond POLICY_REACH_RANGES_MAX are left out (fail
 * closed). Costs one hash lookup per label when the deciding rule has no
 * limit (reach->all or ->none set at once).
 */
enum policy_action policy_match_domain_reach(const struct policy *p,
    const char *name, const struct policy_rule **rule,
    struct policy_reach *reach);
/* True when (proto: one POLICY_PROTO_* bit, or 0 for other protocols;
 * port: TCP/UDP) lies in reach. */
bool policy_reach_allows(
    const struct policy_reach *reach, unsigned proto, uint16_t port);
/*
 * True when rule r covers proto (one POLICY_PROTO_* bit) and port; 0 for
 * either means "any": the query does not care, so a restriction on that
 * dimension does not exclude the rule.
 */
bool policy_rule_port_ok(
    const struct policy_rule *r, unsigned proto, uint16_t port);
/* True when a and b allow exactly the same. */
bool policy_reach_equal(
    const struct policy_reach *a, const struct policy_reach *b);

/*
 * IP decision for family 4/6, addr in network byte order; proto is one
 * POLICY_PROTO_* bit and port 0 means "any port". Longest matching prefix
 * wins within a layer; at equal length deny beats allow.
 */
enum policy_action policy_match_addr(const struct policy *p, int family,
    const uint8_t *addr, unsigned proto, uint16_t port,
    const struct policy_rule **rule);
/*
 * True when an explicit IP/CIDR allow rule (not the default) of any layer,
 * the user's included, decides addr for proto (one POLICY_PROTO_* bit) and
 * port, as policy_match_addr does: a rule that allows the address for UDP
 * or for other ports does not count (issue 34: a rule for b.test's
 * address on port 53 is no reason to send a.test's requests there).
 */
bool policy_addr_explicitly_allowed(const struct policy *p, int family,
    const uint8_t *addr, unsigned proto, uint16_t port);
/*
 * True when an IP/CIDR allow rule of an OPERATOR layer (always-allow
 * overlay: alwaysAllow and allow.always; or infra) decides addr, for any
 * protocol and port: no always-deny rule covers addr (even one restricted
 * to ports or protocols), and user rules never count. The resolver keeps
 * internal addresses in answers only then (rebinding defence, THREATS §6).
 * Same family only: an IPv4 rule does not cover addr's IPv6 spellings.
 */
bool policy_addr_operator_allowed(
    const struct policy *p, int family, const uint8_t *addr);

/*
 * Request rules (issue 37). The host-level verdict (DNS, nft, SNI:
 * policy_match_domain and _reach) ignores deny request rules: they deny
 * requests, never a host; an allow request rule allows its host like a
 * plain one. A request to a host is judged by policy_match_request:
 * overlays and infra decide the host as they do for names (an operator
 * allow lets every request through); then the user rules whose target
 * matches host (and whose ports, when set, include port) in list order,
 * the first whose methods (when set) hold method exactly and whose paths
 * (when set) match path decides; a plain rule matches every request;
 * none: the default action.
 */
bool policy_rule_is_request(const struct policy_rule *r);

enum policy_req_reason {
	POLICY_REQ_ALLOWED = 0, /* the request may go */
	POLICY_REQ_METHOD, /* a deny rule names its method, or an allow
	                      rule of the host would take its path with
	                      another method */
	POLICY_REQ_PATH, /* a deny rule names its path, or no allow rule of
	                    the host takes its path */
	POLICY_REQ_HOST, /* the host itself is denied (no allow rule names
	                    it, or an overlay denies it) */
	POLICY_REQ_INVALID, /* host or path not in the required form */
};

struct policy_req_verdict {
	enum policy_action action;
	enum policy_req_reason reason; /* POLICY_REQ_ALLOWED iff allowed */
	const struct policy_rule *rule; /* the deciding rule; NULL: default */
	/* the deciding rule's index in p->rules (user rules), -1 when the
	 * default or an operator layer decided */
	long index;
};

/*
 * Judges one request: host as received (case folded and one trailing dot
 * dropped here; an invalid name is INVALID), port the connection's
 * destination port, method the request's token as received, path the
 * output of policy_path_normalize (policy_path.h; a path that is not in
 * normal form is INVALID). v gets the verdict; returns v->action. Pure,
 * no allocation; the rule pointer is borrowed from p.
 */
enum policy_action policy_match_request(const struct policy *p,
    const char *host, uint16_t port, const char *method, const char *path,
    struct policy_req_verdict *v);
/*
 * The same verdicts, compiled for one host and port: the proxy keeps one
 * per connection (a terminated connection has one SNI) and snapshot,
 * and each request then walks a compact array of the rules that apply
 * to the host, its method a bit test, instead of normalizing the host
 * and walking the name index again (a host with 100 rules: issue 37's
 * bench). Holds a reference to p. NULL only when out of memory: the
 * caller then uses policy_match_request.
 */
struct policy_host_rules;
struct policy_host_rules *policy_host_rules_new(
    struct policy *p, const char *host, uint16_t port);
void policy_host_rules_free(struct policy_host_rules *hr); /* NULL: no-op */
/* True when hr was built from p for host (as given to _new) and port. */
bool policy_host_rules_for(const struct policy_host_rules *hr,
    const struct policy *p, const char *host, uint16_t port);
/* policy_host_has_request_rules of the host, as of hr's snapshot. */
bool policy_host_rules_any(const struct policy_host_rules *hr);
/* policy_match_request on hr's host and port. path must be the output
 * of policy_path_normalize: it is not checked again. */
enum policy_action policy_host_rules_match(const struct policy_host_rules *hr,
    const char *method, const char *path, struct policy_req_verdict *v);
/* True when some user request rule (allow or deny) has a target matching
 * host and, when it names ports, port among them: requests to host are
 * judged one by one, so its TLS is terminated. */
bool policy_host_has_request_rules(
    const struct policy *p, const char *host, uint16_t port);
/* True when any user rule of p is a request rule. */
bool policy_has_request_rules(const struct policy *p);
/* "method", "path", "host", "invalid"; NULL for ALLOWED. */
const char *policy_req_reason_name(enum policy_req_reason r);

/* True when name matches a log_skip.always target. */
bool policy_log_skip(const struct policy *p, const char *name);

/*
 * Normalizes a DNS name into out (lowercase, no trailing dot): ASCII
 * letters, digits, '-', '_'; labels 1..63 not starting or ending with
 * '-'; at most POLICY_NAME_MAX bytes; a leading "*." is kept (targets).
 * Non-ASCII is refused with a hint to use punycode.
 */
int policy_name_normalize(
    const char *in, char *out, size_t outlen, struct err *e);

/*
 * Serialization. User policy as the API returns it:
 * {"defaultAction":..,"egress":[{"action":..,"target":display}, ...]}
 * ("ports"/"protocols" only when set; "egress" always present; newly
 * allocated, caller frees). Canonical YAML of the operator's snapshot
 * that loads back to the same snapshot, except that overlay rules read
 * from the always-rules directory are left out (they are re-read from
 * it) and so is the API's credential vault (never written to disk). The
 * operator's inline credential values ARE written: this is what egressd
 * writes back into the operator's own policy file, where they came from.
 * Free it with policy_yaml_free (it wipes), and never log or answer it.
 */
char *policy_user_to_json(const struct policy *p);
char *policy_to_yaml(const struct policy *p);
void policy_yaml_free(char *yaml);

/*
 * Credentials and bindings of the policy file (contract §4). The secret
 * value of a credential stays inside struct policy_credential (wiped when
 * freed); no function returns it. policy_credential_export hands the
 * bytes to a sink once, for the vault to take into its own storage.
 */
enum policy_cred_source {
	POLICY_CRED_INLINE,
	POLICY_CRED_FILE, /* path only; the vault reads the file */
	/* fetched by egressd (policy/policy_cred_http.h, issue 38) */
	POLICY_CRED_HTTP,
};

enum policy_auth_type {
	POLICY_AUTH_BEARER,
	POLICY_AUTH_BASIC,
	POLICY_AUTH_APIKEY,
	POLICY_AUTH_CUSTOM_HEADERS,
	POLICY_AUTH_PASSTHROUGH,
	POLICY_AUTH_AWS_SIGV4, /* issue 38: egressd signs (vault_sigv4.h) */
	POLICY_AUTH_OAUTH2, /* policy/policy_oauth2.h */
	POLICY_AUTH_GITHUB_APP, /* policy/policy_github.h */
};

#define POLICY_CRED_NAME_MAX 64 /* credential and binding names */
#define POLICY_SECRET_MAX 16384 /* bytes of one inline value */
#define POLICY_BINDINGS_MAX 256 /* bindings (and credentials) */
#define POLICY_BINDING_LIST_MAX 64 /* hosts, paths, ... of one binding */
#define POLICY_PATH_PATTERN_MAX 1024 /* one binding path pattern */

const char *policy_credential_name(const struct policy_credential *c);
enum policy_cred_source policy_credential_source(
    const struct policy_credential *c);
const char *policy_credential_path(const struct policy_credential *c);
int policy_credential_export(const struct policy_credential *c,
    int (*sink)(void *arg, const uint8_t *value, size_t len), void *arg);

/* Binding accessors and the request matcher: policy/policy_binding.h. */

/*
 * True when host (a binding host: FQDN or "*.suffix") is covered by an
 * explicit allow rule that the policy really allows: the default action
 * does not count, and for "*.suffix" the deciding rule must be an allow
 * wildcard covering the whole suffix with no deny rule below it.
 * Otherwise false with the reason in e.
 */
bool policy_host_covered(
    const struct policy *p, const char *host, struct err *e);
/*
 * Every binding of p covered, no two ambiguous: 0, or -1 with the first
 * problem in e (the API prefixes "credential vault policy validation: ").
 * Loaders run it; API callers run it on a mutation's result.
 */
int policy_check_bindings(const struct policy *p, struct err *e);

/* "allow_all" | "deny_all" | "enforcing" as in contract §3. */
const char *policy_mode_name(const struct policy *p);

#endif
