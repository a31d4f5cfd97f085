/*
 * policy_parts: the destructors of the parts a policy_config owns
 * (credentials and bindings), for policy.c, which frees a config without
 * needing the parts' definitions. Defined in policy_cred.c and
 * policy_binding.c; the types stay incomplete here, so the snapshot code
 * does not depend on the part modules, which depend on it (no include
 * cycle: tests/tools/include_cycles.py).
 */
#ifndef EGRESSD_POLICY_PARTS_H
#define EGRESSD_POLICY_PARTS_H

struct policy_binding;
struct policy_credential;

/* Frees c (its value wiped) or b; NULL is a no-op. */
void policy_credential_free(struct policy_credential *c);
void policy_binding_free(struct policy_binding *b);

#endif
