/*
 * policy_apicreds: the API's Credential Vault as a layer of the snapshot
 * (policy_apicreds.h). A vault is a struct policy_config holding only
 * credentials and bindings, with the revisions in its vault_* fields;
 * policy_assemble joins it to the operator's lists.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_cred.h"
#include "policy/policy_apicreds.h"
#include "policy/policy_walk.h"
#include "util/refcnt.h"

#define BODY_NAME "body"

static const struct policy_config *
vault_of(const struct policy *p)
{
	return p != NULL && p->index != NULL ? p->index->vault : NULL;
}

bool
policy_apicreds_exists(const struct policy *p)
{
	return vault_of(p) != NULL;
}

uint64_t
policy_apicreds_revision(const struct policy *p)
{
	const struct policy_config *v = vault_of(p);

	return v != NULL ? v->vault_revision : 0;
}

size_t
policy_apicreds_ncredentials(const struct policy *p)
{
	const struct policy_config *v = vault_of(p);

	return v != NULL ? v->ncredentials : 0;
}

const struct policy_credential *
policy_apicreds_credential(const struct policy *p, size_t i, uint64_t *revision)
{
	const struct policy_config *v = vault_of(p);

	if (v == NULL || i >= v->ncredentials)
		return NULL;
	if (revision != NULL)
		*revision = v->cred_rev[i];
	return v->credentials[i];
}

size_t
policy_apicreds_nbindings(const struct policy *p)
{
	const struct policy_config *v = vault_of(p);

	return v != NULL ? v->nbindings : 0;
}

const struct policy_binding *
policy_apicreds_binding(const struct policy *p, size_t i, uint64_t *revision)
{
	const struct policy_config *v = vault_of(p);

	if (v == NULL || i >= v->nbindings)
		return NULL;
	if (revision != NULL)
		*revision = v->bind_rev[i];
	return v->bindings[i];
}

static void
set_st(enum policy_apicreds_status *st, enum policy_apicreds_status v)
{
	if (st != NULL)
		*st = v;
}

/* ---- the request body ---- */

/* One kind of item (credentials or bindings) of a mutation. */
struct vset {
	struct policy_config *add, *replace; /* walked items */
	char **del;
	size_t ndel;
	bool del_seen;
};

struct vbody {
	bool have_expected;
	unsigned long expected;
	struct vset creds, binds;
};

static void
vset_clear(struct vset *s)
{
	size_t i;

	policy_config_unref(s->add);
	policy_config_unref(s->replace);
	for (i = 0; i < s->ndel; i++)
		free(s->del[i]);
	free(s->del);
}

static int
vset_init(struct vset *s)
{
	memset(s, 0, sizeof(*s));
	s->add = policy_config_new();
	s->replace = policy_config_new();
	return s->add != NULL && s->replace != NULL ? 0 : -1;
}

static int
walk_names(struct pwalk *w, const struct pnode *v, struct vset *s)
{
	size_t i;
	char *name;

	if (!policy_walk_is(w, v, PNODE_SEQ))
		return -1;
	if (v->nkids > POLICY_BINDINGS_MAX) {
		policy_walk_err(w, v, "at most %d names", POLICY_BINDINGS_MAX);
		return -1;
	}
	for (i = 0; i < v->nkids; i++) {
		if (!policy_cred_walk_name(w, v->kids[i], &name))
			continue;
		if (policy_walk_push((void ***)&s->del, &s->ndel, name) == -1) {
			free(name);
			policy_walk_err(w, v, "out of memory");
			return -1;
		}
	}
	return 0;
}

static int
k_delete(struct pwalk *w, const struct pnode *v, void *obj)
{
	return walk_names(w, v, obj);
}

static const struct pkey cred_set_keys[] = {
    {"add", policy_cred_walk, offsetof(struct vset, add)},
    {"replace", policy_cred_walk, offsetof(struct vset, replace)},
    {"delete", k_delete, 0},
};

static const struct pkey bind_set_keys[] = {
    {"add", policy_binding_walk, offsetof(struct vset, add)},
    {"replace", policy_binding_walk, offsetof(struct vset, replace)},
    {"delete", k_delete, 0},
};

static int
pk_expected(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct vbody *b = obj;

	if (!policy_walk_uint(w, v, 0, 1ul << 52, false, &b->expected))
		return -1;
	b->have_expected = true;
	return 0;
}

/* A PATCH's credentials or bindings: add, replace and delete (obj: the
 * vset). */
static int
pk_creds(struct pwalk *w, const struct pnode *v, void *obj)
{
	(void)policy_walk_map(w, v, cred_set_keys, 3, obj);
	return 0;
}

static int
pk_binds(struct pwalk *w, const struct pnode *v, void *obj)
{
	(void)policy_walk_map(w, v, bind_set_keys, 3, obj);
	return 0;
}

static const struct pkey patch_keys[] = {
    {"expectedRevision", pk_expected, 0},
    {"credentials", pk_creds, offsetof(struct vbody, creds)},
    {"bindings", pk_binds, offsetof(struct vbody, binds)},
};

/* POST's lists are the add sets of a mutation on an empty vault. */
static const struct pkey create_keys[] = {
    {"credentials", policy_cred_walk, offsetof(struct vbody, creds.add)},
    {"bindings", policy_binding_walk, offsetof(struct vbody, binds.add)},
};

static void
body_clear(struct vbody *b)
{
	vset_clear(&b->creds);
	vset_clear(&b->binds);
}

/* Parses body against keys into b; 0, or -1 with e (and *st). */
static int
body_walk(const char *body, size_t len, const struct pkey *keys, size_t nkeys,
    struct vbody *b, enum policy_apicreds_status *st, struct err *e)
{
	struct policy_diag d;
	struct pnode *root = NULL;
	struct pwalk w;
	int rc = -1;

	memset(b, 0, sizeof(*b));
	policy_diag_init(&d);
	memset(&w, 0, sizeof(w));
	w.name = BODY_NAME;
	w.d = &d;
	w.api_creds = true;
	set_st(st, POLICY_APICREDS_BAD_BODY);
	if (vset_init(&b->creds) == -1 || vset_init(&b->binds) == -1) {
		set_st(st, POLICY_APICREDS_NOMEM);
		err_set(e, "out of memory");
		goto out;
	}
	if (len > POLICY_BODY_MAX) {
		err_set(e, "body larger than %u bytes", POLICY_BODY_MAX);
		goto out;
	}
	if ((root = policy_json_read(body != NULL ? body : "",
	         body != NULL ? len : 0, BODY_NAME, &d)) == NULL) {
		policy_diag_to_err(&d, e);
		goto out;
	}
	if (root->type == PNODE_NULL) {
		err_set(e, "empty body");
		goto out;
	}
	(void)policy_walk_map(&w, root, keys, nkeys, b);
	if (w.errs > 0) {
		policy_diag_to_err(&d, e);
		goto out;
	}
	rc = 0;
out:
	policy_node_free(root);
	policy_diag_clear(&d);
	return rc;
}

/* ---- applying a mutation ---- */

/* An item of a list being built: the object and its revision. */
struct vitem {
	void *obj;
	const char *name;
	uint64_t rev;
};

struct vlist {
	struct vitem *v;
	size_t n;
};

static bool
names_has(char *const *names, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

static long
list_find(const struct vlist *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return (long)i;
	return -1;
}

static int
vitem_cmp(const void *a, const void *b)
{
	return strcmp(
	    ((const struct vitem *)a)->name, ((const struct vitem *)b)->name);
}

/*
 * The operations on one kind of item. Objects are moved out of the
 * mutation's sets (their slots set to NULL) or copied from the old vault;
 * whatever the result holds, it owns.
 */
struct vkind {
	const char *what; /* "credential" or "binding" */
	void *(*dup)(const void *obj);
	void (*free)(void *obj);
	const char *(*name)(const void *obj);
};

static void *
cred_dup(const void *o)
{
	return policy_credential_dup(o);
}

static void
cred_free(void *o)
{
	policy_credential_free(o);
}

static const char *
cred_name(const void *o)
{
	return policy_credential_name(o);
}

static void *
bind_dup(const void *o)
{
	return policy_binding_dup(o);
}

static void
bind_free(void *o)
{
	policy_binding_free(o);
}

static const char *
bind_name(const void *o)
{
	return policy_binding_name(o);
}

static const struct vkind kind_cred = {
    "credential", cred_dup, cred_free, cred_name};
static const struct vkind kind_bind = {
    "binding", bind_dup, bind_free, bind_name};

static void
vlist_free(const struct vkind *k, struct vlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		k->free(l->v[i].obj);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int
vlist_push(struct vlist *l, void *obj, const struct vkind *k, uint64_t rev)
{
	struct vitem *v = realloc(l->v, (l->n + 1) * sizeof(*v));

	if (v == NULL)
		return -1;
	l->v = v;
	v[l->n].obj = obj;
	v[l->n].name = k->name(obj);
	v[l->n].rev = rev;
	l->n++;
	return 0;
}

/*
 * old's items (n of them, revisions in oldrev) with s applied in the
 * contract's order, delete, replace, add; the changed items get rev.
 * 0 with *out filled (sorted by name), or -1 with *st and e.
 */
static int
apply_set(const struct vkind *k, void *const *old, const uint64_t *oldrev,
    size_t n, void **add, size_t nadd, void **rep, size_t nrep,
    char *const *del, size_t ndel, uint64_t rev, struct vlist *out,
    enum policy_apicreds_status *st, struct err *e)
{
	size_t i;
	long j;
	void *o;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < ndel; i++) {
		for (j = 0; j < (long)n; j++)
			if (strcmp(k->name(old[j]), del[i]) == 0)
				break;
		if (j == (long)n) {
			set_st(st, POLICY_APICREDS_MISSING);
			err_set(e, "%s \"%s\" not found", k->what, del[i]);
			return -1;
		}
	}
	for (i = 0; i < n; i++) {
		if (names_has(del, ndel, k->name(old[i])))
			continue;
		if ((o = k->dup(old[i])) == NULL ||
		    vlist_push(out, o, k, oldrev[i]) == -1) {
			k->free(o);
			goto nomem;
		}
	}
	for (i = 0; i < nrep; i++) {
		if ((j = list_find(out, k->name(rep[i]))) == -1) {
			set_st(st, POLICY_APICREDS_MISSING);
			err_set(
			    e, "%s \"%s\" not found", k->what, k->name(rep[i]));
			goto fail;
		}
		k->free(out->v[j].obj);
		out->v[j].obj = rep[i];
		out->v[j].name = k->name(rep[i]);
		out->v[j].rev = rev;
		rep[i] = NULL;
	}
	for (i = 0; i < nadd; i++) {
		if (list_find(out, k->name(add[i])) != -1) {
			set_st(st, POLICY_APICREDS_CONFLICT);
			err_set(e, "%s \"%s\" already exists", k->what,
			    k->name(add[i]));
			goto fail;
		}
		if (vlist_push(out, add[i], k, rev) == -1)
			goto nomem;
		add[i] = NULL;
	}
	if (out->n > 0)
		qsort(out->v, out->n, sizeof(*out->v), vitem_cmp);
	return 0;
nomem:
	set_st(st, POLICY_APICREDS_NOMEM);
	err_set(e, "out of memory");
fail:
	vlist_free(k, out);
	return -1;
}

/* Moves l's items into arrays of v (objects and revisions). */
static int
vlist_take(struct vlist *l, void ***objs, uint64_t **revs, size_t *n)
{
	size_t i;

	*objs = calloc(l->n + 1, sizeof(void *));
	*revs = calloc(l->n + 1, sizeof(uint64_t));
	if (*objs == NULL || *revs == NULL)
		return -1;
	for (i = 0; i < l->n; i++) {
		(*objs)[i] = l->v[i].obj;
		(*revs)[i] = l->v[i].rev;
	}
	*n = l->n;
	free(l->v);
	l->v = NULL;
	l->n = 0;
	return 0;
}

/* The vault that old (NULL: an empty one) becomes under b at rev. */
static struct policy_config *
vault_build(const struct policy_config *old, struct vbody *b, uint64_t rev,
    enum policy_apicreds_status *st, struct err *e)
{
	static const uint64_t none = 0;
	struct policy_config *v;
	struct vlist lc = {0}, lb = {0};

	if (apply_set(&kind_cred, old ? (void *const *)old->credentials : NULL,
	        old ? old->cred_rev : &none, old ? old->ncredentials : 0,
	        (void **)b->creds.add->credentials, b->creds.add->ncredentials,
	        (void **)b->creds.replace->credentials,
	        b->creds.replace->ncredentials, b->creds.del, b->creds.ndel,
	        rev, &lc, st, e) == -1)
		return NULL;
	if (apply_set(&kind_bind, old ? (void *const *)old->bindings : NULL,
	        old ? old->bind_rev : &none, old ? old->nbindings : 0,
	        (void **)b->binds.add->bindings, b->binds.add->nbindings,
	        (void **)b->binds.replace->bindings,
	        b->binds.replace->nbindings, b->binds.del, b->binds.ndel, rev,
	        &lb, st, e) == -1) {
		vlist_free(&kind_cred, &lc);
		return NULL;
	}
	if ((v = policy_config_new()) == NULL ||
	    vlist_take(&lc, (void ***)&v->credentials, &v->cred_rev,
	        &v->ncredentials) == -1 ||
	    vlist_take(&lb, (void ***)&v->bindings, &v->bind_rev,
	        &v->nbindings) == -1) {
		vlist_free(&kind_cred, &lc);
		vlist_free(&kind_bind, &lb);
		policy_config_unref(v);
		set_st(st, POLICY_APICREDS_NOMEM);
		err_set(e, "out of memory");
		return NULL;
	}
	v->vault_revision = rev;
	return v;
}

/* ---- joining a vault to a snapshot ---- */

static bool
cfg_has_cred(const struct policy_config *c, const char *name)
{
	return policy_credential_listed(c->credentials, c->ncredentials, name);
}

static bool
cfg_has_binding(const struct policy_config *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nbindings; i++)
		if (strcmp(c->bindings[i]->name, name) == 0)
			return true;
	return false;
}

/* The two layers stay apart (policy_apicreds.h). */
static int
layers_apart(const struct policy_config *op, const struct policy_config *v,
    struct err *e)
{
	const char *ref;
	size_t i;

	for (i = 0; i < v->ncredentials; i++) {
		const char *n = policy_credential_name(v->credentials[i]);
		if (cfg_has_cred(op, n)) {
			err_set(e,
			    "credential \"%s\" is defined by the operator's "
			    "policy file",
			    n);
			return -1;
		}
	}
	for (i = 0; i < v->nbindings; i++) {
		const struct policy_binding *b = v->bindings[i];
		if (cfg_has_binding(op, b->name)) {
			err_set(e,
			    "binding \"%s\" is defined by the operator's "
			    "policy file",
			    b->name);
			return -1;
		}
		if ((ref = policy_binding_unknown_cred(
		         b, v->credentials, v->ncredentials)) != NULL) {
			err_set(e,
			    "binding \"%s\" references unknown credential "
			    "\"%s\"",
			    b->name, ref);
			return -1;
		}
	}
	return 0;
}

/*
 * base's rules and configuration with vault (a reference taken over;
 * NULL: none) at revision: checked like a load. NULL with *st and e.
 */
static struct policy *
attach(const struct policy *base, struct policy_config *vault,
    uint64_t revision, enum policy_apicreds_status *st, struct err *e)
{
	struct policy_index *ix = base->index;
	struct policy_rule *rules;
	struct policy *p;

	if (vault != NULL && layers_apart(ix->cfg, vault, e) == -1) {
		policy_config_unref(vault);
		set_st(st, POLICY_APICREDS_REJECTED);
		return NULL;
	}
	if ((rules = policy_rules_dup(base)) == NULL) {
		policy_config_unref(vault);
		goto nomem;
	}
	refcnt_inc(&ix->ov->refs);
	refcnt_inc(&ix->cfg->refs);
	p = policy_assemble(base->default_action, base->user_empty, rules,
	    base->nrules, ix->ov, ix->cfg, vault, base->source, revision);
	if (p == NULL)
		goto nomem;
	if (policy_check_bindings(p, e) == -1) {
		policy_unref(p);
		set_st(st, POLICY_APICREDS_REJECTED);
		return NULL;
	}
	set_st(st, POLICY_APICREDS_OK);
	return p;
nomem:
	set_st(st, POLICY_APICREDS_NOMEM);
	err_set(e, "out of memory");
	return NULL;
}

/* ---- the mutations ---- */

static struct policy *
mutate(const struct policy *base, const char *body, size_t len, bool create,
    enum policy_apicreds_status *st, struct err *e)
{
	const struct policy_config *old = vault_of(base);
	struct policy_config *v;
	struct vbody b;
	uint64_t rev;

	err_clear(e);
	if (create && old != NULL) {
		set_st(st, POLICY_APICREDS_EXISTS);
		err_set(e, "credential vault already exists");
		return NULL;
	}
	if (!create && old == NULL) {
		set_st(st, POLICY_APICREDS_NONE);
		err_set(e, "credential vault not found");
		return NULL;
	}
	if (body_walk(body, len, create ? create_keys : patch_keys,
	        create ? 2 : 3, &b, st, e) == -1) {
		body_clear(&b);
		return NULL;
	}
	rev = create ? 1 : old->vault_revision + 1;
	if (!create && b.have_expected && b.expected != old->vault_revision) {
		set_st(st, POLICY_APICREDS_CONFLICT);
		err_set(e,
		    "expectedRevision %lu does not match current revision "
		    "%llu",
		    b.expected, (unsigned long long)old->vault_revision);
		body_clear(&b);
		return NULL;
	}
	v = vault_build(old, &b, rev, st, e);
	body_clear(&b);
	if (v == NULL)
		return NULL;
	return attach(base, v, base->revision + 1, st, e);
}

struct policy *
policy_apicreds_create_json(const struct policy *base, const char *body,
    size_t len, enum policy_apicreds_status *st, struct err *e)
{
	return mutate(base, body, len, true, st, e);
}

struct policy *
policy_apicreds_patch_json(const struct policy *base, const char *body,
    size_t len, enum policy_apicreds_status *st, struct err *e)
{
	return mutate(base, body, len, false, st, e);
}

struct policy *
policy_apicreds_delete(
    const struct policy *base, enum policy_apicreds_status *st, struct err *e)
{
	err_clear(e);
	if (vault_of(base) == NULL) {
		set_st(st, POLICY_APICREDS_NONE);
		err_set(e, "credential vault not found");
		return NULL;
	}
	return attach(base, NULL, base->revision + 1, st, e);
}

struct policy *
policy_apicreds_carry(
    struct policy *loaded, const struct policy *cur, struct err *e)
{
	struct policy_config *v = cur != NULL ? cur->index->vault : NULL;

	err_clear(e);
	if (v == NULL)
		return policy_ref(loaded);
	refcnt_inc(&v->refs);
	return attach(loaded, v, loaded->revision, NULL, e);
}
