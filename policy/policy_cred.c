/*
 * Credentials and bindings of the policy file (contract §4).
 * (Slice 1: schema keys recognised, content not yet accepted.)
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"

struct policy_credential {
	char *name;
};

struct policy_binding {
	char *name;
};

void
policy_credential_free(struct policy_credential *c)
{
	if (c == NULL)
		return;
	free(c->name);
	free(c);
}

void
policy_binding_free(struct policy_binding *b)
{
	if (b == NULL)
		return;
	free(b->name);
	free(b);
}

int
policy_cred_walk(
    struct pwalk *w, const struct pnode *v, struct policy_config *cfg)
{
	(void)cfg;
	pw_err(w, v, "credentials are not supported yet");
	return -1;
}

int
policy_binding_walk(
    struct pwalk *w, const struct pnode *v, struct policy_config *cfg)
{
	(void)cfg;
	pw_err(w, v, "bindings are not supported yet");
	return -1;
}

void
policy_cred_check(
    struct pwalk *w, const struct pnode *root, const struct policy *p)
{
	(void)w;
	(void)root;
	(void)p;
}
