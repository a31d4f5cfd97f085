/*
 * policy_apicreds: the API's credentials, the layer of the policy snapshot
 * that the control API's Credential Vault routes manage (contract §4):
 * credentials and bindings that live beside the operator's policy file, in
 * memory only, with a revision. (Not to be confused with vault/, one
 * revision of every credential made ready for the proxy, nor with
 * api/api_credvault.c, the routes.)
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
 * unchanged; a reloaded policy file gets it with policy_apicreds_carry.
 * Messages in e name credentials and positions, never a value.
 */
#ifndef EGRESSD_POLICY_APICREDS_H
#define EGRESSD_POLICY_APICREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "policy/policy_binding.h"
#include "util/err.h"

/* Why a mutation returned NULL (the API's status in brackets). */
enum policy_apicreds_status {
	POLICY_APICREDS_OK,
	POLICY_APICREDS_BAD_BODY, /* [400] not JSON, unknown key, bad item */
	POLICY_APICREDS_REJECTED, /* [400] coverage, overlap, references */
	POLICY_APICREDS_NONE, /* [404] no vault (PATCH, DELETE) */
	POLICY_APICREDS_MISSING, /* [404] replace/delete names no item */
	POLICY_APICREDS_EXISTS, /* [409] POST while one exists */
	POLICY_APICREDS_CONFLICT, /* [409] stale expectedRevision, add of a name
				* that exists */
	POLICY_APICREDS_NOMEM, /* [500] */
};

/* Does p carry an API vault (created, not deleted)? */
bool policy_apicreds_exists(const struct policy *p);
/* Its revision: 1 on create, +1 per PATCH; 0 without a vault. */
uint64_t policy_apicreds_revision(const struct policy *p);
/* Its items, sorted by name; borrowed from p. The revision of an item is
 * the vault revision that last added or replaced it. */
size_t policy_apicreds_ncredentials(const struct policy *p);
const struct policy_credential *policy_apicreds_credential(
    const struct policy *p, size_t i, uint64_t *revision);
size_t policy_apicreds_nbindings(const struct policy *p);
const struct policy_binding *policy_apicreds_binding(
    const struct policy *p, size_t i, uint64_t *revision);

/*
 * POST: body {"credentials":[...],"bindings":[...]} (either may be
 * missing: empty). Credentials are {name, source:{type?, value}}: the
 * type defaults to "inline"; "file" is refused (file sources are the
 * operator's). Bindings as in the policy file.
 */
struct policy *policy_apicreds_create_json(const struct policy *base,
    const char *body, size_t len, enum policy_apicreds_status *st,
    struct err *e);
/*
 * PATCH: {"expectedRevision"?, "credentials"?:{add?, replace?, delete?},
 * "bindings"?:{...}}; add and replace are item lists, delete a list of
 * names. Applied delete, then replace, then add, all or nothing; the
 * revision goes up by one even when nothing changed.
 */
struct policy *policy_apicreds_patch_json(const struct policy *base,
    const char *body, size_t len, enum policy_apicreds_status *st,
    struct err *e);
/* DELETE: base without its vault. */
struct policy *policy_apicreds_delete(
    const struct policy *base, enum policy_apicreds_status *st, struct err *e);
/*
 * A policy loaded from the operator's file (no vault of its own) with
 * cur's vault: a new snapshot (loaded's revision), or a new reference to
 * loaded when cur has none; NULL and e when the file now clashes with
 * the vault (a name in both, an API binding no longer covered).
 */
struct policy *policy_apicreds_carry(
    struct policy *loaded, const struct policy *cur, struct err *e);

#endif
