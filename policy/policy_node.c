/*
 * The parse tree both readers (JSON, YAML) produce and the one schema walk
 * consumes. Every node remembers where it started.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"
#include "util/secmem.h"
#include "util/grow.h"

struct pnode *
policy_node_new(enum pnode_type type, unsigned line, unsigned col)
{
	struct pnode *n = calloc(1, sizeof(*n));

	if (n == NULL)
		return NULL;
	n->type = type;
	n->line = line;
	n->col = col;
	return n;
}

/* Recursive: readers bound the depth by POLICY_DEPTH_MAX. */
void
policy_node_free(struct pnode *n)
{
	size_t i;

	if (n == NULL)
		return;
	for (i = 0; i < n->nkids; i++)
		policy_node_free(n->kids[i]);
	free(n->kids);
	/* Scalars of an API body may be credential values. */
	if (n->str != NULL)
		secmem_wipe(n->str, n->len > 0 ? n->len : strlen(n->str));
	free(n->str);
	free(n);
}

int
policy_node_add(struct pnode *parent, struct pnode *kid)
{
	if (grow_array(&parent->kids, &parent->cap, parent->nkids + 1,
	        sizeof(*parent->kids), 4) == -1)
		return -1;
	parent->kids[parent->nkids++] = kid;
	return 0;
}

const char *
policy_node_type_name(enum pnode_type t)
{
	switch (t) {
	case PNODE_NULL:
		return "null";
	case PNODE_BOOL:
		return "a boolean";
	case PNODE_NUM:
		return "a number";
	case PNODE_STR:
		return "a string";
	case PNODE_SEQ:
		return "a list";
	case PNODE_MAP:
		return "a mapping";
	}
	return "?";
}
