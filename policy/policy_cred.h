/*
 * policy_cred: internal interface of the credentials of the policy file
 * (contract §4): the object and its life time (policy_cred.c), the schema
 * walk and the name rule shared with bindings (policy_cred_walk.c). The
 * public accessors are in policy.h.
 */
#ifndef EGRESSD_POLICY_CRED_H
#define EGRESSD_POLICY_CRED_H

#include <stdbool.h>

#include "policy/policy_int.h"
#include "policy/policy_parts.h"

struct pwalk;

struct secmem_arena;
struct policy_cred_http;

/*
 * Owned by the policy_config of a snapshot. An inline value lives in an
 * arena of its own (mlock where allowed, MADV_DONTDUMP, guard pages),
 * wiped and unmapped when the credential is freed.
 */
struct policy_credential {
	char *name;
	enum policy_cred_source source;
	char *path;
	struct policy_cred_http *http; /* POLICY_CRED_HTTP's settings */
	uint8_t *value; /* in arena */
	size_t vlen;
	struct secmem_arena *arena;
	struct policy_loc loc;
};

/* Copies v[0..n) into a new arena of c's; 0, or -1 (out of memory). */
int policy_credential_set_value(
    struct policy_credential *c, const uint8_t *v, size_t n);

/* A deep copy (the value too, wiped when the copy is freed); NULL when
 * out of memory. */
struct policy_credential *policy_credential_dup(
    const struct policy_credential *c);
/* Whether one of v[0..n) is named name (credential lists of a snapshot
 * or of a configuration layer). */
bool policy_credential_listed(
    struct policy_credential *const *v, size_t n, const char *name);
/* The credentials list, walked into the configuration (names unique); a
 * keyword function (struct pkey): cfgp points at the struct policy_config *
 * to walk into. */
int policy_cred_walk(struct pwalk *w, const struct pnode *v, void *cfgp);
/* A credential or binding name: 1 to POLICY_CRED_NAME_MAX of
 * [A-Za-z0-9._-], duplicated into *out; false with an error if not. */
bool policy_cred_walk_name(struct pwalk *w, const struct pnode *v, char **out);

#endif
