/*
 * policy_walk: the schema walk's primitives (policy_walk.h). Pure: nodes
 * in, diagnostics out.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_walk.h"

void
policy_walk_err(struct pwalk *w, const struct pnode *at, const char *fmt, ...)
{
	va_list ap;

	w->errs++;
	va_start(ap, fmt);
	policy_diag_vadd(
	    w->d, w->name, at ? at->line : 0, at ? at->col : 0, fmt, ap);
	va_end(ap);
}

bool
policy_walk_is(struct pwalk *w, const struct pnode *n, enum pnode_type t)
{
	if (n->type == t)
		return true;
	policy_walk_err(w, n, "expected %s, found %s", policy_node_type_name(t),
	    policy_node_type_name(n->type));
	return false;
}

uint64_t
policy_walk_map(struct pwalk *w, const struct pnode *n, const struct pkey *keys,
    size_t nkeys, void *obj)
{
	uint64_t seen = 0;
	size_t i, k;

	if (!policy_walk_is(w, n, PNODE_MAP))
		return 0;
	for (i = 0; i + 1 < n->nkids; i += 2) {
		const struct pnode *key = n->kids[i], *val = n->kids[i + 1];
		if (key->type != PNODE_STR) {
			policy_walk_err(w, key, "keys must be strings");
			continue;
		}
		for (k = 0; k < nkeys && k < PKEYS_MAX; k++)
			if (strcmp(keys[k].key, key->str) == 0)
				break;
		if (k == nkeys || k == PKEYS_MAX) {
			policy_walk_err(
			    w, key, "unknown key \"%.64s\"", key->str);
			continue;
		}
		if (seen & (1ull << k)) {
			policy_walk_err(
			    w, key, "duplicate key \"%s\"", keys[k].key);
			continue;
		}
		seen |= 1ull << k;
		(void)keys[k].fn(w, val, (char *)obj + keys[k].off);
	}
	return seen;
}

bool
policy_walk_uint(struct pwalk *w, const struct pnode *n, unsigned long lo,
    unsigned long hi, bool strok, unsigned long *out)
{
	unsigned long v = 0;
	const char *s;

	if (n->type != PNODE_NUM && !(strok && n->type == PNODE_STR)) {
		policy_walk_err(w, n, "expected a number, found %s",
		    policy_node_type_name(n->type));
		return false;
	}
	s = n->str;
	if (*s == '\0' || (s[0] == '0' && s[1] != '\0'))
		goto bad;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			goto bad;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > hi)
			goto bad;
	}
	if (v < lo)
		goto bad;
	*out = v;
	return true;
bad:
	policy_walk_err(w, n,
	    "expected an integer from %lu to %lu, found \"%.32s\"", lo, hi,
	    n->str);
	return false;
}

bool
policy_walk_strdup(struct pwalk *w, const struct pnode *n, char **out)
{
	if (!policy_walk_is(w, n, PNODE_STR))
		return false;
	if ((*out = strdup(n->str)) == NULL) {
		policy_walk_err(w, n, "out of memory");
		return false;
	}
	return true;
}

int
policy_walk_push(void ***arr, size_t *n, void *x)
{
	void **na = realloc(*arr, (*n + 1) * sizeof(*na));

	if (na == NULL)
		return -1;
	na[(*n)++] = x;
	*arr = na;
	return 0;
}

bool
policy_walk_list(struct pwalk *w, const struct pnode *v, const char *what)
{
	if (!policy_walk_is(w, v, PNODE_SEQ))
		return false;
	if (v->nkids == 0 || v->nkids > POLICY_BINDING_LIST_MAX) {
		policy_walk_err(w, v, "%s must list 1 to %d entries", what,
		    POLICY_BINDING_LIST_MAX);
		return false;
	}
	return true;
}

int
policy_walk_named_list(struct pwalk *w, const struct pnode *v, size_t max,
    const char *what,
    void (*item)(struct pwalk *, const struct pnode *, struct policy_config *),
    struct policy_config *cfg, void *const *const *arr, const size_t *n,
    const char *(*name_at)(const void *obj, struct pnode *at))
{
	struct pnode at = {0}, other = {0};
	size_t i, j;

	if (v->type == PNODE_NULL)
		return 0;
	if (!policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids > max) {
		policy_walk_err(w, v, "at most %zu %ss", max, what);
		return -1;
	}
	for (i = 0; i < v->nkids; i++)
		item(w, v->kids[i], cfg);
	for (i = 0; i < *n; i++)
		for (j = 0; j < i; j++) {
			const char *a = name_at((*arr)[i], &at);

			if (strcmp(a, name_at((*arr)[j], &other)) == 0)
				policy_walk_err(
				    w, &at, "duplicate %s \"%s\"", what, a);
		}
	return 0;
}
