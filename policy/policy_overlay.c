/*
 * policy_overlay: the always-rules directory (deny.always, allow.always,
 * log_skip.always). One target per line; '#' starts a comment; blank
 * lines are ignored. Every bad line is reported as FILE:LINE:COL.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_binding_int.h"
#include "policy/policy_int.h"
#include "policy/policy_walk.h"
#include "util/refcnt.h"

struct ovfile {
	const char *fname;
	enum policy_action action;
	enum policy_origin origin;
};

static const struct ovfile ovfiles[] = {
    {"deny.always", POLICY_DENY, POLICY_ORIGIN_ALWAYS_DENY},
    {"allow.always", POLICY_ALLOW, POLICY_ORIGIN_ALWAYS_ALLOW},
    {"log_skip.always", POLICY_DENY, POLICY_ORIGIN_LOG_SKIP},
};

#define OV_NFILES (sizeof(ovfiles) / sizeof(ovfiles[0]))

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* One line: s[0..n). Returns -1 on a bad line (reported). */
static int
ov_line(const char *path, unsigned lineno, const char *s, size_t n,
    const struct ovfile *f, struct policy_rvec *out, struct policy_diag *d)
{
	char tok[POLICY_LINE_MAX + 1];
	size_t a = 0, b, i;
	struct policy_rule r;
	struct err e;

	if (n > POLICY_LINE_MAX) {
		policy_diag_add(d, path, lineno, 1, "line longer than %d bytes",
		    POLICY_LINE_MAX);
		return -1;
	}
	const char *hash = memchr(s, '#', n);
	if (hash != NULL)
		n = (size_t)(hash - s);
	while (a < n && is_space(s[a]))
		a++;
	b = n;
	while (b > a && is_space(s[b - 1]))
		b--;
	if (a == b)
		return 0;
	for (i = a; i < b; i++)
		if (is_space(s[i])) {
			policy_diag_add(d, path, lineno, (unsigned)i + 1,
			    "one target per line");
			return -1;
		}
	memcpy(tok, s + a, b - a);
	tok[b - a] = '\0';
	memset(&r, 0, sizeof(r));
	if (memchr(tok, '\0', b - a) != NULL ||
	    policy_target_parse(tok, &r, &e) == -1) {
		policy_diag_add(d, path, lineno, (unsigned)a + 1, "%s",
		    memchr(tok, '\0', b - a) ? "NUL byte in line" : e.msg);
		return -1;
	}
	if (f->origin == POLICY_ORIGIN_LOG_SKIP &&
	    r.kind != POLICY_TARGET_DOMAIN &&
	    r.kind != POLICY_TARGET_WILDCARD) {
		policy_diag_add(d, path, lineno, (unsigned)a + 1,
		    "log_skip targets are names, not addresses");
		policy_rule_clear(&r);
		return -1;
	}
	r.action = f->action;
	r.origin = f->origin;
	r.protocols = POLICY_PROTO_ALL;
	r.loc.file = path;
	r.loc.line = lineno;
	r.loc.col = (unsigned)a + 1;
	if (policy_rvec_push(out, &r) == -1) {
		policy_rule_clear(&r);
		policy_diag_add(d, path, lineno, 1, "out of memory");
		return -1;
	}
	return 0;
}

static int
ov_file(const char *dir, const struct ovfile *f, struct policy_rvec *out,
    char *path, size_t pathlen, struct policy_diag *d)
{
	size_t len, off = 0;
	unsigned lineno = 0;
	bool missing;
	char *buf;
	int rc = 0;

	if ((size_t)snprintf(path, pathlen, "%s/%s", dir, f->fname) >=
	    pathlen) {
		policy_diag_add(d, dir, 0, 0, "path too long");
		return -1;
	}
	if (policy_read_file(path, POLICY_FILE_MAX, &buf, &len, &missing, d) ==
	    -1)
		return missing ? 0 : -1;
	while (off < len) {
		const char *nl = memchr(buf + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (buf + off)) : len - off;
		if (ov_line(path, ++lineno, buf + off, n, f, out, d) == -1)
			rc = -1;
		off += n + 1;
	}
	free(buf);
	return rc;
}

/* base's own (policy file) rules first, then the directory's. */
static int
ov_join(const struct policy_rule *keep, size_t nkeep, struct policy_rvec *dir,
    struct policy_rule **out, size_t *nout)
{
	struct policy_rule *v = calloc(nkeep + dir->n + 1, sizeof(*v));
	size_t i, ndir = dir->n;

	if (v == NULL)
		return -1;
	for (i = 0; i < nkeep; i++)
		if (policy_rule_copy(&v[i], &keep[i]) == -1) {
			policy_rules_free(v, i);
			return -1;
		}
	if (dir->n > 0)
		memcpy(v + nkeep, dir->v, dir->n * sizeof(*v));
	free(dir->v);
	memset(dir, 0, sizeof(*dir));
	*out = v;
	*nout = nkeep + ndir;
	return 0;
}

static struct policy_overlays *
ov_build(const struct policy_overlays *old, struct policy_rvec lists[OV_NFILES])
{
	struct policy_overlays *o = policy_overlays_new();

	if (o == NULL)
		return NULL;
	if (ov_join(old->deny, old->ndeny_file, &lists[0], &o->deny,
	        &o->ndeny) == -1 ||
	    ov_join(old->allow, old->nallow_file, &lists[1], &o->allow,
	        &o->nallow) == -1)
		goto out_unref;
	o->ndeny_file = old->ndeny_file;
	o->nallow_file = old->nallow_file;
	if (ov_join(old->log_skip, old->nlog_skip_file, &lists[2], &o->log_skip,
	        &o->nlog_skip) == -1)
		goto out_unref;
	o->nlog_skip_file = old->nlog_skip_file;
	if (policy_overlays_index(o) == -1)
		goto out_unref;
	return o;
out_unref:
	policy_overlays_unref(o);
	return NULL;
}

struct policy *
policy_with_overlays_dir(
    const struct policy *base, const char *dir, struct policy_diag *d)
{
	struct policy_rvec lists[OV_NFILES];
	char paths[OV_NFILES][PATH_MAX];
	struct policy_overlays *o = NULL;
	struct policy_rule *rules;
	struct policy *p = NULL;
	size_t i, errs = 0;

	memset(lists, 0, sizeof(lists));
	for (i = 0; i < OV_NFILES; i++)
		if (ov_file(dir, &ovfiles[i], &lists[i], paths[i],
		        sizeof(paths[i]), d) == -1)
			errs++;
	if (errs == 0 && (o = ov_build(base->index->ov, lists)) == NULL)
		policy_diag_add(d, dir, 0, 0, "out of memory");
	for (i = 0; i < OV_NFILES; i++)
		policy_rules_free(lists[i].v, lists[i].n);
	if (o == NULL)
		return NULL;
	if ((rules = policy_rules_dup(base)) == NULL) {
		policy_overlays_unref(o);
		policy_diag_add(d, dir, 0, 0, "out of memory");
		return NULL;
	}
	refcnt_inc(&base->index->cfg->refs);
	if (base->index->vault != NULL)
		refcnt_inc(&base->index->vault->refs);
	p = policy_assemble(base->default_action, base->user_empty, rules,
	    base->nrules, o, base->index->cfg, base->index->vault, base->source,
	    base->revision);
	if (p == NULL) {
		policy_diag_add(d, dir, 0, 0, "out of memory");
		return NULL;
	}
	/* New overlay denies must not uncover a binding. */
	struct pwalk w = {.name = p->source, .d = d};
	policy_binding_check_walk(&w, p);
	if (w.errs > 0) {
		policy_unref(p);
		return NULL;
	}
	return p;
}
