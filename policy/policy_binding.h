/*
 * policy_binding: what the vault and the proxy may read of a binding
 * (contract §4), and the runtime matcher that picks the one binding of a
 * request.
 *
 * struct policy_binding stays opaque. Every pointer an accessor returns
 * (strings included) is borrowed from the snapshot: valid while the caller
 * holds a reference to the struct policy the binding came from, never to
 * be freed or written. Indexes run from 0 to the matching count - 1; an
 * index out of range returns NULL. No accessor returns a credential's
 * value: bindings name credentials, policy_credential_export (policy.h)
 * hands over the bytes.
 */
#ifndef EGRESSD_POLICY_BINDING_H
#define EGRESSD_POLICY_BINDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "util/err.h"

/* Schemes (one bit each; a binding holds a set). */
#define POLICY_SCHEME_HTTPS 0x1u
#define POLICY_SCHEME_HTTP 0x2u

/* Methods a binding can name (case-sensitive, RFC 9110 §9.1). */
#define POLICY_METHOD_GET 0x01u
#define POLICY_METHOD_HEAD 0x02u
#define POLICY_METHOD_POST 0x04u
#define POLICY_METHOD_PUT 0x08u
#define POLICY_METHOD_PATCH 0x10u
#define POLICY_METHOD_DELETE 0x20u
#define POLICY_METHOD_OPTIONS 0x40u
/* match.methods when absent: GET POST PUT PATCH DELETE (contract §4). */
#define POLICY_METHODS_DEFAULT 0x3du

/* Request surfaces of a substitution. */
#define POLICY_SUBST_PATH 0x1u
#define POLICY_SUBST_QUERY 0x2u
#define POLICY_SUBST_HEADER 0x4u
#define POLICY_SUBST_BODY 0x8u

const char *policy_binding_name(const struct policy_binding *b);
/* POLICY_SCHEME_* bits (at least one). */
unsigned policy_binding_schemes(const struct policy_binding *b);
/* The ports the binding matches: the default port of each of its schemes
 * (https 443, http 80; match.ports can only restate them), written into
 * ports[0..return-1]. */
size_t policy_binding_ports(const struct policy_binding *b, uint16_t ports[2]);
/* Hosts as written: lowercase FQDN or "*.suffix" (strict subdomains). */
size_t policy_binding_nhosts(const struct policy_binding *b);
const char *policy_binding_host(const struct policy_binding *b, size_t i);
/* Does a binding of p with a scheme in scheme name host (exactly, or
 * below a "*.suffix")? Every binding of the snapshot counts, whether or
 * not the vault could load its credential: what may be terminated. */
bool policy_binding_covers_host(
    const struct policy *p, const char *host, unsigned scheme);
/* POLICY_METHOD_* bits (at least one). */
unsigned policy_binding_methods(const struct policy_binding *b);
/* Did the binding name match.methods (false: the default set)? The
 * operator may require it (REQUIRE_SCOPED_MATCH, docs/compat.md). */
bool policy_binding_methods_named(const struct policy_binding *b);
/* Path patterns: "/exact" or "/prefix*" (the prefix "/" when the file
 * named none). */
size_t policy_binding_npaths(const struct policy_binding *b);
const char *policy_binding_path(const struct policy_binding *b, size_t i);

enum policy_auth_type policy_binding_auth(const struct policy_binding *b);
/* The credential of bearer, basic and apiKey auth; NULL for the others. */
const char *policy_binding_credential(const struct policy_binding *b);
/* oauth2 auth's settings (policy/policy_oauth2.h); NULL for the others. */
struct policy_oauth2;
const struct policy_oauth2 *policy_binding_oauth2(
    const struct policy_binding *b);
/* githubApp auth's settings (policy/policy_github.h); NULL for others. */
struct policy_github;
const struct policy_github *policy_binding_github(
    const struct policy_binding *b);
/* The header apiKey auth writes (auth.name); NULL for the others. */
const char *policy_binding_header_name(const struct policy_binding *b);
/* customHeaders auth: header i's name, its credential's name in *credential
 * (may be NULL). 0 headers for the other types. */
size_t policy_binding_nheaders(const struct policy_binding *b);
const char *policy_binding_header(
    const struct policy_binding *b, size_t i, const char **credential);
/* Substitution i: returns its credential's name; its placeholder in
 * *placeholder and its POLICY_SUBST_* surfaces in *in (both may be NULL). */
size_t policy_binding_nsubsts(const struct policy_binding *b);
const char *policy_binding_subst(const struct policy_binding *b, size_t i,
    const char **placeholder, unsigned *in);

/* awsSigV4 auth (issue 38): the credentials' names, and the region and
 * service the binding states (NULL: derived from the request's host,
 * policy_aws.h; the loader checked that every host of the binding
 * derives what is missing). */
struct policy_binding_aws {
	const char *access_key_id;
	const char *secret_access_key;
	const char *session_token; /* NULL: none */
	const char *region, *service;
};
/* False (*out zeroed) for the other auth types. */
bool policy_binding_aws(
    const struct policy_binding *b, struct policy_binding_aws *out);

/* Names of the enumerations as the policy file spells them; NULL for a
 * value (or a bit) outside them. */
const char *policy_auth_type_name(enum policy_auth_type t);
const char *policy_method_name(unsigned bit);
const char *policy_subst_in_name(unsigned bit);
/* The POLICY_METHOD_* bit of a method token (exact, case-sensitive), 0
 * for any other token. */
unsigned policy_method_bit(const char *s, size_t len);
/* https 443, http 80, 0 for anything else. */
uint16_t policy_scheme_port(unsigned scheme);

/*
 * The runtime matcher (policy_binding_match.c). A request matches a
 * binding when all of these hold:
 * - scheme is one of the binding's; port is that scheme's default port
 *   (0 in the request means the default; any other port matches nothing);
 * - method is one of the binding's, compared exactly ("get" is no method
 *   a binding names, so it matches none);
 * - host, normalized (case folded, one trailing dot dropped; an address
 *   literal or an invalid name matches nothing), equals an exact binding
 *   host, or lies strictly below a "*.suffix" one;
 * - path, the output of policy_path_normalize (policy_path.h), equals an
 *   exact path pattern or starts with a prefix pattern's text before '*'.
 * Precedence (contract §4): a binding that matches by an exact host beats
 * every binding that matches only by a wildcard. Among the bindings at the
 * best level, one is the answer; two or more tie: AMBIGUOUS, and the vault
 * injects nothing (403 "credential binding ambiguous"). The load-time
 * check (policy_bindings_overlap) is derived from the same pattern
 * primitives, so a snapshot that loaded never answers AMBIGUOUS.
 */
struct policy_request {
	unsigned scheme; /* one POLICY_SCHEME_* bit */
	const char *host; /* SNI / authority host, as received */
	uint16_t port; /* 0: the scheme's default */
	const char *method; /* request method token, as received */
	const char *path; /* policy_path_normalize output */
};

enum policy_bind_result {
	POLICY_BIND_NONE, /* no binding matches: inject nothing */
	POLICY_BIND_ONE, /* *out is the one binding */
	POLICY_BIND_AMBIGUOUS, /* a tie at the best precedence: inject nothing */
	POLICY_BIND_INVALID, /* request not judgeable (e in e): inject nothing */
};

/*
 * Matches rq against p's bindings. *out (may be NULL) is the binding for
 * POLICY_BIND_ONE, NULL otherwise; it is borrowed like the accessors'
 * results. INVALID when the host or path is not in the required form, with
 * the reason in e (e may be NULL). Pure: no allocation, no I/O.
 */
enum policy_bind_result policy_binding_match(const struct policy *p,
    const struct policy_request *rq, const struct policy_binding **out,
    struct err *e);
/* policy_binding_match for a path that is policy_path_normalize's output
 * as it stands (the vault's decide normalized it just before), so it is
 * not normalized again to check that; anything else is undefined. */
enum policy_bind_result policy_binding_match_normal(const struct policy *p,
    const struct policy_request *rq, const struct policy_binding **out,
    struct err *e);
/* The same over any array of bindings (tests compare bindings of several
 * snapshots with it). */
enum policy_bind_result policy_bindings_match(
    const struct policy_binding *const *bs, size_t n,
    const struct policy_request *rq, const struct policy_binding **out,
    struct err *e);
/*
 * True when some request matches both a and b at equal precedence (the
 * matcher would answer AMBIGUOUS for {a, b}): schemes and methods
 * intersect, a path matches a pattern of each, and a host matches a host
 * of each at the same level (exact and exact, or wildcard and wildcard).
 */
bool policy_bindings_overlap(
    const struct policy_binding *a, const struct policy_binding *b);

#endif
