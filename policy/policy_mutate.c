/*
 * policy_mutate: the JSON entry points and the /policy API mutations
 * (contract §3, §6). All are pure: the base snapshot is borrowed, a new
 * one is returned, operator configuration is shared by reference.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"
#include "util/hash.h"
#include "util/refcnt.h"

#define API_NAME "body"

/* ---- a set of normalized targets (PATCH/DELETE) ---- */

struct tset {
	const char **keys;
	size_t cap;
};

static uint32_t
tset_hash(const char *s)
{
	return hash_fnv1a32(s, strlen(s));
}

static int
tset_init(struct tset *t, size_t n)
{
	t->cap = 16;
	while (t->cap < 2 * n + 2)
		t->cap *= 2;
	t->keys = calloc(t->cap, sizeof(*t->keys));
	return t->keys == NULL ? -1 : 0;
}

static const char **
tset_slot(const struct tset *t, const char *key)
{
	size_t i = tset_hash(key) & (t->cap - 1);

	while (t->keys[i] != NULL && strcmp(t->keys[i], key) != 0)
		i = (i + 1) & (t->cap - 1);
	return &t->keys[i];
}

/* true when key was not in the set yet; the set borrows key. */
static bool
tset_add(struct tset *t, const char *key)
{
	const char **s = tset_slot(t, key);

	if (*s != NULL)
		return false;
	*s = key;
	return true;
}

static bool
tset_has(const struct tset *t, const char *key)
{
	return *tset_slot(t, key) != NULL;
}

/* ---- helpers ---- */

static struct pnode *
read_body(const char *body, size_t len, struct err *e)
{
	struct policy_diag d;
	struct pnode *root;

	if (len > POLICY_BODY_MAX) {
		err_set(e, "body larger than %u bytes", POLICY_BODY_MAX);
		return NULL;
	}
	policy_diag_init(&d);
	if ((root = policy_json_read(
	         body ? body : "", body ? len : 0, API_NAME, &d)) == NULL)
		policy_diag_to_err(&d, e);
	policy_diag_clear(&d);
	return root;
}

static bool
over_cap_check(size_t n, size_t max_rules, bool *over_cap, struct err *e)
{
	if (max_rules == 0 || n <= max_rules)
		return false;
	if (over_cap != NULL)
		*over_cap = true;
	err_set(
	    e, "egress rule total count %zu exceeds limit %zu", n, max_rules);
	return true;
}

/* A new snapshot sharing base's operator configuration. */
static struct policy *
derive(const struct policy *base, enum policy_action def, bool user_empty,
    struct policy_rule *rules, size_t n, struct err *e)
{
	struct policy_index *ix = base->index;
	struct policy *p;

	refcnt_inc(&ix->ov->refs);
	refcnt_inc(&ix->cfg->refs);
	if (ix->vault != NULL)
		refcnt_inc(&ix->vault->refs);
	p = policy_assemble(def, user_empty, rules, n, ix->ov, ix->cfg,
	    ix->vault, "api", base->revision + 1);
	if (p == NULL)
		err_set(e, "out of memory");
	return p;
}

static void
set_flag(bool *b, bool v)
{
	if (b != NULL)
		*b = v;
}

/* ---- entry points ---- */

struct policy *
policy_parse_json(
    const char *buf, size_t len, const char *name, struct policy_diag *d)
{
	return policy_parse_with(policy_json_read, buf, len, name, d);
}

struct policy *
policy_replace_json(const struct policy *base, const char *body, size_t len,
    size_t max_rules, bool *over_cap, struct err *e)
{
	struct policy_diag d;
	struct pnode *root;
	struct policy *u, *p = NULL;
	struct policy_rule *rules;
	size_t n;

	set_flag(over_cap, false);
	if ((root = read_body(body, len, e)) == NULL)
		return NULL;
	policy_diag_init(&d);
	u = policy_from_tree(root, API_NAME, POLICY_SCHEMA_USER, &d);
	policy_node_free(root);
	if (u == NULL) {
		policy_diag_to_err(&d, e);
		policy_diag_clear(&d);
		return NULL;
	}
	policy_diag_clear(&d);
	if (over_cap_check(u->nrules, max_rules, over_cap, e))
		goto out_unref;
	/* Take the parsed rules over; u's index still points at them but
	 * is freed below without touching them. */
	rules = u->rules;
	n = u->nrules;
	u->rules = NULL;
	u->nrules = 0;
	p = derive(base, u->default_action, u->user_empty, rules, n, e);
out_unref:
	policy_unref(u);
	return p;
}

static struct pnode *
read_list(const char *body, size_t len, const char *what, struct err *e)
{
	struct pnode *root;
	size_t i;

	for (i = 0; body != NULL && i < len; i++)
		if (body[i] != ' ' && body[i] != '\t' && body[i] != '\n' &&
		    body[i] != '\r')
			break;
	if (body == NULL || i == len) {
		err_set(e, "empty body");
		return NULL;
	}
	if ((root = read_body(body, len, e)) == NULL)
		return NULL;
	if (root->type != PNODE_SEQ) {
		err_set(e, "expected a JSON array of %s", what);
		goto out_free;
	}
	if (root->nkids == 0) {
		err_set(e, "empty array");
		goto out_free;
	}
	return root;
out_free:
	policy_node_free(root);
	return NULL;
}

/*
 * PATCH: the patched rules first, then the old rules of the targets the
 * patch does not name. Among the patch's plain rules the first of a
 * target wins (the reference's map semantics); request rules are all
 * kept in order, since a target's request rules only mean something
 * together ("GET these paths, POST those").
 */
static int
merge(const struct policy *base, struct policy_rule *pr, size_t np,
    struct policy_rule **out, size_t *nout)
{
	struct policy_rule *m = calloc(np + base->nrules + 1, sizeof(*m));
	struct tset seen = {0}, plain = {0};
	size_t i, n = 0;

	if (m == NULL || tset_init(&seen, np) == -1 ||
	    tset_init(&plain, np) == -1) {
		free(seen.keys);
		free(m);
		return -1;
	}
	for (i = 0; i < np; i++) {
		(void)tset_add(&seen, pr[i].target);
		if (policy_rule_is_request(&pr[i]) ||
		    tset_add(&plain, pr[i].target))
			m[n++] = pr[i];
		else
			policy_rule_clear(&pr[i]);
	}
	free(plain.keys);
	for (i = 0; i < base->nrules; i++) {
		if (tset_has(&seen, base->rules[i].target))
			continue;
		if (policy_rule_copy(&m[n], &base->rules[i]) == -1)
			goto out_free;
		n++;
	}
	free(seen.keys);
	*out = m;
	*nout = n;
	return 0;
out_free:
	free(seen.keys);
	policy_rules_free(m, n);
	return -1;
}

struct policy *
policy_patch_json(const struct policy *base, const char *body, size_t len,
    size_t max_rules, bool *over_cap, struct err *e)
{
	struct policy_diag d;
	struct pnode *root;
	struct policy_rule *pr = NULL, *m;
	size_t np = 0, nm;
	int rc;

	set_flag(over_cap, false);
	if ((root = read_list(body, len, "rules", e)) == NULL)
		return NULL;
	policy_diag_init(&d);
	rc = policy_rules_from_tree(root, API_NAME, &pr, &np, &d);
	policy_node_free(root);
	if (rc == -1) {
		policy_diag_to_err(&d, e);
		policy_diag_clear(&d);
		return NULL;
	}
	policy_diag_clear(&d);
	/* merge() took or freed every patched rule. */
	if (merge(base, pr, np, &m, &nm) == -1) {
		policy_rules_free(pr, np);
		err_set(e, "out of memory");
		return NULL;
	}
	free(pr);
	if (over_cap_check(nm, max_rules, over_cap, e)) {
		policy_rules_free(m, nm);
		return NULL;
	}
	return derive(base, base->default_action, false, m, nm, e);
}

/* ASCII lower case, trailing dot dropped: the fallback key of DELETE. */
static char *
fold_key(const char *s)
{
	size_t n = strlen(s), i;
	char *k;

	if (n > 0 && s[n - 1] == '.')
		n--;
	if ((k = strndup(s, n)) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (k[i] >= 'A' && k[i] <= 'Z')
			k[i] = (char)(k[i] - 'A' + 'a');
	return k;
}

/* Delete keys: the normalized target when the string parses, else folded. */
static int
delete_keys(
    const struct pnode *seq, char **keys, struct tset *set, struct err *e)
{
	size_t i;

	for (i = 0; i < seq->nkids; i++) {
		const struct pnode *v = seq->kids[i];
		struct policy_rule r;
		struct err ignored;
		if (v->type != PNODE_STR) {
			err_set(e, "%s:%u:%u: expected a target string",
			    API_NAME, v->line, v->col);
			return -1;
		}
		memset(&r, 0, sizeof(r));
		if (policy_target_parse(v->str, &r, &ignored) == 0) {
			keys[i] = r.target;
			r.target = NULL;
			policy_rule_clear(&r);
		} else
			keys[i] = fold_key(v->str);
		if (keys[i] == NULL) {
			err_set(e, "out of memory");
			return -1;
		}
		(void)tset_add(set, keys[i]);
	}
	return 0;
}

static bool
delete_hit(const struct tset *set, const struct policy_rule *r)
{
	char *k;
	bool hit;

	if (tset_has(set, r->target))
		return true;
	if ((k = fold_key(r->display)) == NULL)
		return false;
	hit = tset_has(set, k);
	free(k);
	return hit;
}

static struct policy *
delete_apply(const struct policy *base, const struct tset *set, size_t *matched,
    struct err *e)
{
	struct policy_rule *m = calloc(base->nrules + 1, sizeof(*m));
	size_t i, n = 0;

	if (m == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	for (i = 0; i < base->nrules; i++) {
		if (delete_hit(set, &base->rules[i])) {
			(*matched)++;
			continue;
		}
		if (policy_rule_copy(&m[n], &base->rules[i]) == -1) {
			policy_rules_free(m, n);
			err_set(e, "out of memory");
			return NULL;
		}
		n++;
	}
	if (*matched == 0) {
		policy_rules_free(m, n);
		err_set(e, "no matching targets found");
		return NULL;
	}
	return derive(base, base->default_action, false, m, n, e);
}

struct policy *
policy_delete_json(const struct policy *base, const char *body, size_t len,
    size_t *matched, struct err *e)
{
	struct pnode *root;
	struct policy *p = NULL;
	struct tset set = {0};
	char **keys = NULL;
	size_t i, nk = 0;

	*matched = 0;
	if ((root = read_list(body, len, "target strings", e)) == NULL)
		return NULL;
	nk = root->nkids;
	if ((keys = calloc(nk, sizeof(*keys))) == NULL ||
	    tset_init(&set, nk) == -1) {
		err_set(e, "out of memory");
		goto out_free;
	}
	if (delete_keys(root, keys, &set, e) == 0)
		p = delete_apply(base, &set, matched, e);
out_free:
	for (i = 0; keys != NULL && i < nk; i++)
		free(keys[i]);
	free(keys);
	free(set.keys);
	policy_node_free(root);
	return p;
}
