/*
 * policy_vault: the Credential Vault the control API manages (contract
 * §4): credentials and bindings that live beside the operator's policy
 * file, in memory only, with a revision.
 *
 * The vault is part of the snapshot: a struct policy carries the
 * operator's credentials and bindings (from its file) and, once
 * POST /credential-vault created one, the API's. p->credentials and
 * p->bindings list both (the operator's first), so the matcher, the
 * load-time checks and vault_new see one set; the YAML writer writes the
 * operator's alone. The two never mix: names are unique across both, and
 * an API binding may name only API credentials (an operator's secret is
 * never sent where the API, rather than the operator, pointed it).
 *
 * Every mutation is pure like the /policy ones: base borrowed, a new
 * snapshot returned (revision base + 1) that passed policy_check_bindings
 * (coverage by explicit allows, no ambiguity), or NULL with *st and e.
 * /policy mutations and always-rules reloads carry the vault over
 * unchanged; a reloaded policy file gets it with policy_vault_carry.
 * Messages in e name credentials and positions, never a value.
 */
#ifndef EGRESSD_POLICY_VAULT_H
#define EGRESSD_POLICY_VAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "policy/policy_binding.h"
#include "util/err.h"

/* Why a mutation returned NULL (the API's status in brackets). */
enum policy_vault_status {
	POLICY_VAULT_OK,
	POLICY_VAULT_BAD_BODY, /* [400] not JSON, unknown key, bad item */
	POLICY_VAULT_REJECTED, /* [400] coverage, overlap, references */
	POLICY_VAULT_NONE, /* [404] no vault (PATCH, DELETE) */
	POLICY_VAULT_MISSING, /* [404] replace/delete names no item */
	POLICY_VAULT_EXISTS, /* [409] POST while one exists */
	POLICY_VAULT_CONFLICT, /* [409] stale expectedRevision, add of a name
				* that exists */
	POLICY_VAULT_NOMEM, /* [500] */
};

/* Does p carry an API vault (created, not deleted)? */
bool policy_vault_exists(const struct policy *p);
/* Its revision: 1 on create, +1 per PATCH; 0 without a vault. */
uint64_t policy_vault_revision(const struct policy *p);
/* Its items, sorted by name; borrowed from p. The revision of an item is
 * the vault revision that last added or replaced it. */
size_t policy_vault_ncredentials(const struct policy *p);
const struct policy_credential *policy_vault_credential(
    const struct policy *p, size_t i, uint64_t *revision);
size_t policy_vault_nbindings(const struct policy *p);
const struct policy_binding *policy_vault_binding(
    const struct policy *p, size_t i, uint64_t *revision);

/*
 * POST: body {"credentials":[...],"bindings":[...]} (either may be
 * missing: empty). Credentials are {name, source:{type?, value}}: the
 * type defaults to "inline"; "file" is refused (file sources are the
 * operator's). Bindings as in the policy file.
 */
struct policy *policy_vault_create_json(const struct policy *base,
    const char *body, size_t len, enum policy_vault_status *st, struct err *e);
/*
 * PATCH: {"expectedRevision"?, "credentials"?:{add?, replace?, delete?},
 * "bindings"?:{...}}; add and replace are item lists, delete a list of
 * names. Applied delete, then replace, then add, all or nothing; the
 * revision goes up by one even when nothing changed.
 */
struct policy *policy_vault_patch_json(const struct policy *base,
    const char *body, size_t len, enum policy_vault_status *st, struct err *e);
/* DELETE: base without its vault. */
struct policy *policy_vault_delete(
    const struct policy *base, enum policy_vault_status *st, struct err *e);
/*
 * A policy loaded from the operator's file (no vault of its own) with
 * cur's vault: a new snapshot (loaded's revision), or a new reference to
 * loaded when cur has none; NULL and e when the file now clashes with
 * the vault (a name in both, an API binding no longer covered).
 */
struct policy *policy_vault_carry(
    struct policy *loaded, const struct policy *cur, struct err *e);

#endif
