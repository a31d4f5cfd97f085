/*
 * policy_walk: the primitives of the schema walk (keyword tables, type
 * checks, error reporting with the node's position). The walkers of the
 * rule lists and settings (policy_schema.c), of credentials
 * (policy_cred.c) and of bindings (policy_binding_walk.c) are built on
 * them; this file calls none of those.
 */
#ifndef EGRESSD_POLICY_WALK_H
#define EGRESSD_POLICY_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy_int.h"

/* Walk state: where errors go. Every error is counted and reported. */
struct pwalk {
	const char *name;
	struct policy_diag *d;
	size_t errs;
	size_t nrules; /* items of every rule list so far (the rule cap) */
	/* An API body of the credential vault, not the operator's file:
	 * a credential's source type defaults to inline, file is refused. */
	bool api_creds;
};

/*
 * One entry of a keyword table: the key and what to do with its value.
 * fn gets the walked object's bytes at off (0: the object itself), so a
 * function that fills one kind of field serves every table that has one.
 */
struct pkey {
	const char *key;
	int (*fn)(struct pwalk *w, const struct pnode *v, void *obj);
	size_t off;
};

#define PKEYS_MAX 64 /* keys of one table (a bitmask tracks them) */

void policy_walk_err(struct pwalk *w, const struct pnode *at, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));
/*
 * Walks a mapping against a keyword table: unknown and duplicate keys are
 * errors, every known key's function runs. Returns the bitmask of keys
 * seen (bit i = keys[i]); 0 with an error when n is not a mapping.
 */
uint64_t policy_walk_map(struct pwalk *w, const struct pnode *n,
    const struct pkey *keys, size_t nkeys, void *obj);
/* Type checks: true when n has the type (an error is reported if not). */
bool policy_walk_is(struct pwalk *w, const struct pnode *n, enum pnode_type t);
/* Integer in [lo, hi] from a number (or a digit string when strok). */
bool policy_walk_uint(struct pwalk *w, const struct pnode *n, unsigned long lo,
    unsigned long hi, bool strok, unsigned long *out);
/* Duplicates a string node into *out (freed by the caller). */
bool policy_walk_strdup(struct pwalk *w, const struct pnode *n, char **out);
/* Appends x to a growing pointer array; 0 or -1 (out of memory, x is
 * not taken). */
int policy_walk_push(void ***arr, size_t *n, void *x);
/* A list of 1 to POLICY_BINDING_LIST_MAX entries (what names it). */
bool policy_walk_list(struct pwalk *w, const struct pnode *v, const char *what);

/*
 * A list of named items (credentials, bindings): NULL is an empty list;
 * otherwise a sequence of at most max nodes, each walked by item (which
 * appends what it built to *arr), then every name unique, a duplicate
 * reported at its own line as "duplicate <what> "<name>"". name_at gives
 * an item's name and fills *at with its position.
 */
int policy_walk_named_list(struct pwalk *w, const struct pnode *v, size_t max,
    const char *what,
    void (*item)(struct pwalk *, const struct pnode *, struct policy_config *),
    struct policy_config *cfg, void *const *const *arr, const size_t *n,
    const char *(*name_at)(const void *obj, struct pnode *at));

#endif
