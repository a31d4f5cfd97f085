/* policy_yaml: slice 2. */
#include <stdlib.h>

#include "policy/policy_int.h"

struct pnode *
policy_yaml_read(
    const char *buf, size_t len, const char *name, struct policy_diag *d)
{
	(void)buf;
	(void)len;
	policy_diag_add(d, name, 0, 0, "YAML is not supported yet");
	return NULL;
}

struct policy *
policy_parse_yaml(
    const char *buf, size_t len, const char *name, struct policy_diag *d)
{
	struct pnode *root;
	struct policy *p;

	if ((root = policy_yaml_read(buf, len, name, d)) == NULL)
		return NULL;
	p = policy_from_tree(root, name, POLICY_SCHEMA_FILE, d);
	pnode_free(root);
	return p;
}

struct policy *
policy_load_file(const char *path, struct policy_diag *d)
{
	policy_diag_add(d, path, 0, 0, "not supported yet");
	return NULL;
}

struct policy *
policy_with_overlays_dir(
    const struct policy *base, const char *dir, struct policy_diag *d)
{
	(void)base;
	policy_diag_add(d, dir, 0, 0, "not supported yet");
	return NULL;
}
