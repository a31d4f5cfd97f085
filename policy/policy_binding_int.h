/*
 * policy_binding_int: the binding as the policy library's own files see
 * it. policy_binding.c owns the struct (life time, accessors, name
 * tables); policy_binding_walk.c fills it from the file, policy_cred_yaml.c
 * writes it back, policy_binding_match.c matches requests against it and
 * policy_binding_check.c checks a whole snapshot's bindings.
 */
#ifndef EGRESSD_POLICY_BINDING_INT_H
#define EGRESSD_POLICY_BINDING_INT_H

#include "policy/policy_binding.h"
#include "policy/policy_int.h"
#include "policy/policy_parts.h"

#define POLICY_PLACEHOLDER_MAX 256 /* bytes of one substitution placeholder */

struct pwalk;
struct ybuf;

struct bstrs {
	char **v;
	size_t n;
};

struct bheader {
	char *name;
	char *credential;
};

struct bsubst {
	char *credential;
	char *placeholder;
	unsigned in; /* POLICY_SUBST_* */
};

/* awsSigV4 auth: three credentials by name, the scope when stated. */
struct baws {
	char *akid, *secret, *token; /* token NULL: none */
	char *region, *service; /* NULL: from the host (policy_aws.h) */
};

struct policy_binding {
	char *name;
	unsigned line, col;
	unsigned schemes; /* POLICY_SCHEME_* */
	unsigned methods; /* POLICY_METHOD_* */
	bool methods_named; /* match.methods written, not the default */
	struct bstrs hosts, paths;
	enum policy_auth_type auth;
	char *credential;
	char *header;
	struct bheader *headers;
	size_t nheaders;
	struct bsubst *subst;
	size_t nsubst;
	struct baws aws;
	struct policy_oauth2 *oauth2; /* oauth2 auth (policy_oauth2.c) */
	struct policy_github *github; /* githubApp auth (policy_github.c) */
};

void policy_bstrs_free(struct bstrs *s);
/* True when name lies strictly below suffix ("a.b.c" below "b.c"). */
bool policy_name_below(const char *name, const char *suffix);
/* A deep copy; NULL when out of memory. */
struct policy_binding *policy_binding_dup(const struct policy_binding *b);
/* The first credential b names (its credential, then its headers', then
 * its substitutions') that none of creds[0..n) is, or NULL; borrowed from
 * b. */
const char *policy_binding_unknown_cred(const struct policy_binding *b,
    struct policy_credential *const *creds, size_t n);

/* The bindings list, walked into the configuration (policy_binding_walk.c);
 * a keyword function (struct pkey): cfgp points at the
 * struct policy_config * to walk into. */
int policy_binding_walk(struct pwalk *w, const struct pnode *v, void *cfgp);
/* Every cross check of p's bindings (references, coverage, overlap),
 * each problem reported at its binding's position (policy_binding_check.c). */
void policy_binding_check_walk(struct pwalk *w, const struct policy *p);
/* Writes the credentials and bindings sections, values never
 * (policy_cred_yaml.c). */
void policy_cred_yaml(struct ybuf *b, const struct policy *p);

#endif
