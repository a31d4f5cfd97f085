/*
 * vault: one revision's credentials and bindings (vault.h): building it
 * from a policy snapshot (its values in a locked arena), its lifetime; the
 * per-request decision is vault_decide.c, redaction vault_redact.c.
 *
 * Secret values are copied only into the arena: policy_credential_export
 * hands the inline bytes to a sink that copies them there, file sources
 * are read straight into an arena buffer. No value is ever formatted:
 * lines are assembled with memcpy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy_github.h"
#include "policy/policy_oauth2.h"
#include "policy/policy_path.h"
#include "util/fileread.h"
#include "util/now.h"
#include "util/text.h"
#include "vault/vault_github.h"
#include "vault/vault_int.h"
#include "vault/vault_token.h"

/* ---- values ---- */

/* A value the vault accepts: 1..POLICY_SECRET_MAX bytes, no CR LF NUL
 * (they would split or end a header line); a PEM key (never written
 * into a header) keeps its lines. */
static bool
value_ok(const uint8_t *s, size_t n, bool pem)
{
	size_t i;

	if (n == 0 || n > POLICY_SECRET_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (((s[i] == '\r' || s[i] == '\n') && !pem) || s[i] == '\0')
			return false;
	return true;
}

/* Is the credential named name a githubApp binding's private key? */
static bool
cred_is_pem(const struct policy *p, const char *name)
{
	const struct policy_github *g;
	size_t i;

	for (i = 0; i < p->nbindings; i++)
		if ((g = policy_binding_github(p->bindings[i])) != NULL &&
		    strcmp(g->private_key, name) == 0)
			return true;
	return false;
}

struct sink_arg {
	struct vault *v;
	struct vault_cred *c;
};

static int
cred_sink(void *arg, const uint8_t *value, size_t len)
{
	struct sink_arg *a = arg;

	if (!value_ok(value, len, false))
		return -1;
	a->c->val = secmem_strndup(a->v->arena, (const char *)value, len);
	if (a->c->val == NULL)
		return -1;
	a->c->len = len;
	return 0;
}

static int
cred_read_file(struct vault *v, struct vault_cred *c, const char *path,
    bool pem, struct err *e)
{
	/* Room for POLICY_SECRET_MAX bytes, a "\r\n" and fileread_buf's NUL
	 * plus the byte that tells "too long". */
	size_t cap = POLICY_SECRET_MAX + 4;
	char *buf = secmem_alloc(v->arena, cap);
	ssize_t n;

	if (buf == NULL) {
		err_set(e, "credential \"%s\": secret arena full", c->name);
		return -1;
	}
	n = fileread_buf(path, buf, cap, FILEREAD_OWNED | FILEREAD_DIRS, e);
	if (n == -1) {
		if (errno == EFBIG)
			err_set(e, "longer than %u bytes", POLICY_SECRET_MAX);
		err_prefix(e, "credential \"%s\": %s", c->name, path);
		secmem_free(v->arena, buf);
		return -1;
	}
	/* "echo token > file" and editors end the file with a newline. */
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (!value_ok((const uint8_t *)buf, (size_t)n, pem)) {
		err_set(e,
		    pem ? "credential \"%s\": %s: a private key must be 1 to "
		          "%u bytes without NUL"
		        : "credential \"%s\": %s: value must be 1 to %u "
		          "bytes without CR, LF or NUL",
		    c->name, path, POLICY_SECRET_MAX);
		secmem_free(v->arena, buf);
		return -1;
	}
	c->val = secmem_strndup(v->arena, buf, (size_t)n);
	secmem_free(v->arena, buf);
	if (c->val == NULL) {
		err_set(e, "credential \"%s\": secret arena full", c->name);
		return -1;
	}
	c->len = (size_t)n;
	return 0;
}

static const struct vault_cred *
cred_find(const struct vault *v, const char *name)
{
	size_t i;

	if (name == NULL)
		return NULL;
	for (i = 0; i < v->ncreds; i++)
		if (strcmp(v->creds[i].name, name) == 0)
			return &v->creds[i];
	return NULL;
}

/* ---- bindings ---- */

static char *
lower_dup(const char *s)
{
	size_t n = strlen(s), i;
	char *d = malloc(n + 1);

	if (d == NULL)
		return NULL;
	for (i = 0; i <= n; i++)
		d[i] = (char)text_lower((unsigned char)s[i]);
	return d;
}

const char *
vault_line_name(const struct vault_bind *vb, size_t i)
{
	switch (policy_binding_auth(vb->b)) {
	case POLICY_AUTH_BEARER:
	case POLICY_AUTH_BASIC:
	case POLICY_AUTH_OAUTH2:
	case POLICY_AUTH_GITHUB_APP:
		return "Authorization";
	case POLICY_AUTH_APIKEY:
		return policy_binding_header_name(vb->b);
	case POLICY_AUTH_CUSTOM_HEADERS:
		return policy_binding_header(vb->b, i, NULL);
	case POLICY_AUTH_PASSTHROUGH:
	case POLICY_AUTH_AWS_SIGV4: /* vault_aws.c writes its lines */
		break;
	}
	return NULL;
}

const char *
vault_line_prefix(const struct vault_bind *vb)
{
	switch (policy_binding_auth(vb->b)) {
	case POLICY_AUTH_BEARER:
	case POLICY_AUTH_OAUTH2:
	case POLICY_AUTH_GITHUB_APP: /* or git's Basic (vault_decide.c) */
		return "Bearer ";
	case POLICY_AUTH_BASIC:
		return "Basic ";
	default:
		return "";
	}
}

static int
bind_add_line(struct vault_bind *vb, const char *name,
    const struct vault_cred *c, struct err *e)
{
	size_t i;

	if (c != NULL) { /* NULL: an oauth2 binding without a token yet */
		vb->creds[vb->ncreds++] = c;
		vb->render_len += strlen(name) + 2 +
		    strlen(vault_line_prefix(vb)) + c->len + 2;
	}
	for (i = 0; i < vb->nlower; i++)
		if (strcasecmp(vb->lower[i], name) == 0)
			return 0;
	if ((vb->lower[vb->nlower] = lower_dup(name)) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	vb->nlower++;
	return 0;
}

static int
bind_init(struct vault *v, struct vault_bind *vb,
    const struct policy_binding *b, struct err *e)
{
	const struct vault_cred *c;
	const char *name, *cname;
	size_t n, i;

	vb->b = b;
	n = policy_binding_auth(b) == POLICY_AUTH_CUSTOM_HEADERS
	    ? policy_binding_nheaders(b)
	    : policy_binding_auth(b) == POLICY_AUTH_AWS_SIGV4
	    ? VAULT_AWS_REMOVED
	    : 1;
	if (n > POLICY_BINDING_LIST_MAX) {
		err_set(e, "binding \"%s\": too many headers",
		    policy_binding_name(b));
		return -1;
	}
	vb->lower = calloc(n, sizeof(*vb->lower));
	vb->creds = calloc(n, sizeof(*vb->creds));
	if (vb->lower == NULL || vb->creds == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	switch (policy_binding_auth(b)) {
	case POLICY_AUTH_BEARER:
	case POLICY_AUTH_BASIC:
	case POLICY_AUTH_APIKEY:
		name = vault_line_name(vb, 0);
		cname = policy_binding_credential(b);
		if (name == NULL || (c = cred_find(v, cname)) == NULL)
			goto bad_ref;
		if (policy_binding_auth(b) == POLICY_AUTH_BASIC)
			/* the redactor also masks the value decoded */
			v->creds[c - v->creds].basic = true;
		return bind_add_line(vb, name, c, e);
	case POLICY_AUTH_CUSTOM_HEADERS:
		for (i = 0; i < n; i++) {
			name = policy_binding_header(b, i, &cname);
			if (name == NULL || (c = cred_find(v, cname)) == NULL)
				goto bad_ref;
			if (bind_add_line(vb, name, c, e) == -1)
				return -1;
		}
		return 0;
	case POLICY_AUTH_PASSTHROUGH:
		return 0;
	case POLICY_AUTH_AWS_SIGV4:
		return vault_aws_bind(vb, v->creds, v->ncreds, e);
	case POLICY_AUTH_OAUTH2:
		/* the sandbox's Authorization goes, token or not */
		return bind_add_line(vb, "Authorization", vb->tok, e);
	case POLICY_AUTH_GITHUB_APP:
		/* a key that cannot sign is said at load, not at first use */
		if (vb->key == NULL ||
		    vault_github_key_check(vb->key->val, vb->key->len, e) ==
		        -1) {
			err_prefix(e, "binding \"%s\": privateKey \"%s\"",
			    policy_binding_name(b),
			    policy_binding_github(b)->private_key);
			return -1;
		}
		/* the Basic form, the longer line, sizes the render */
		return bind_add_line(vb, "Authorization", vb->tok_basic, e);
	}
bad_ref:
	/* The loader checked references; a snapshot that did not is a bug
	 * of its builder, and the vault refuses it. */
	err_set(e, "binding \"%s\": credential reference not found",
	    policy_binding_name(b));
	return -1;
}

static int
sub_cmp(const void *a, const void *b)
{
	const struct vault_sub *x = a, *y = b;

	return x->phlen < y->phlen ? 1 : x->phlen > y->phlen ? -1 : 0;
}

/* The binding's substitutions, longest placeholder first (vault_subst
 * prefers the longest where several start at one byte). */
static int
bind_subs_init(struct vault *v, struct vault_bind *vb, struct err *e)
{
	const struct policy_binding *b = vb->b;
	size_t n = policy_binding_nsubsts(b), i;

	if (n == 0)
		return 0;
	if ((vb->subs = calloc(n, sizeof(*vb->subs))) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct vault_sub *s = &vb->subs[i];
		const char *cname = policy_binding_subst(b, i, &s->ph, &s->in);

		if ((s->c = cred_find(v, cname)) == NULL || s->ph == NULL ||
		    s->ph[0] == '\0') {
			err_set(e,
			    "binding \"%s\": substitution %zu: credential "
			    "reference not found",
			    policy_binding_name(b), i);
			return -1;
		}
		s->phlen = strlen(s->ph);
		vb->subst_in |= s->in;
		vb->nsubs++;
	}
	qsort(vb->subs, vb->nsubs, sizeof(*vb->subs), sub_cmp);
	return 0;
}

static void
bind_clear(struct vault_bind *vb)
{
	size_t i;

	for (i = 0; vb->lower != NULL && i < vb->nlower; i++)
		free(vb->lower[i]);
	free(vb->lower);
	free((void *)vb->creds);
	free(vb->subs);
}

/* ---- lifetimes ---- */

/* oauth2 and githubApp bindings of p: each may hold two minted values
 * (a token and a rotated refresh token, or a token and its Basic form). */
static size_t
oauth2_count(const struct policy *p)
{
	size_t i, n = 0;

	for (i = 0; i < p->nbindings; i++)
		n += policy_binding_oauth2(p->bindings[i]) != NULL ||
		    policy_binding_github(p->bindings[i]) != NULL;
	return n;
}

/* The arena's size: values, the matcher, and the lines in flight. */
static size_t
arena_size(const struct policy *p)
{
	/* Every value at its largest, and one file read buffer; a minted
	 * binding's two values and a scratch Basic form (4/3 of a token)
	 * within four. */
	return (p->ncredentials + 4 * oauth2_count(p) + 1) *
	    (POLICY_SECRET_MAX + 64);
}

static void
vault_destroy(struct vault *v)
{
	size_t i;

	for (i = 0; v->binds != NULL && i < v->nbinds; i++)
		bind_clear(&v->binds[i]);
	free(v->binds);
	free(v->creds);
	secmem_arena_free(v->arena);
	policy_unref(v->p);
	v->magic = 0;
	free(v);
}

/*
 * Two passes over the arena: the values are read into a first arena sized
 * for the worst case of every value, then everything (values, matcher,
 * lines in flight) is moved into the final one, sized exactly.
 */
static int
vault_load_values(struct vault *v, const struct vault *prev, struct err *e)
{
	const struct policy *p = v->p;
	size_t i;

	for (i = 0; i < p->ncredentials; i++) {
		const struct policy_credential *pc = p->credentials[i];
		struct vault_cred *c = &v->creds[i];
		struct sink_arg a = {v, c};

		c->name = policy_credential_name(pc);
		switch (policy_credential_source(pc)) {
		case POLICY_CRED_INLINE:
			if (policy_credential_export(pc, cred_sink, &a) == -1) {
				err_set(e,
				    "credential \"%s\": value must be 1 to "
				    "%u bytes without CR, LF or NUL",
				    c->name, POLICY_SECRET_MAX);
				return -1;
			}
			break;
		case POLICY_CRED_FILE:
			if (cred_read_file(v, c, policy_credential_path(pc),
			        cred_is_pem(p, c->name), e) == -1)
				return -1;
			break;
		case POLICY_CRED_HTTP:
			if (vault_http_carry(v, c, pc, prev, e) == -1)
				return -1;
			break;
		}
		v->ncreds++;
	}
	return 0;
}

/* Is the value c already among v's credentials, live or retired? */
static bool
cred_held(const struct vault *v, const struct vault_cred *c)
{
	size_t i;

	for (i = 0; i < v->nall; i++)
		if (v->creds[i].len == c->len &&
		    memcmp(v->creds[i].val, c->val, c->len) == 0)
			return true;
	return false;
}

/*
 * prev's values v does not hold, most recent first, appended to v->creds
 * as retired (their bytes still in prev's arena: vault_move_arena copies
 * them), while they fit VAULT_RETIRED_MAX and the redactor's bound.
 */
static void
vault_retire(struct vault *v, const struct vault *prev)
{
	size_t i;

	size_t minted = 0;

	for (i = 0; prev != NULL && i < prev->nall; i++) {
		const struct vault_cred *c = &prev->creds[i];

		if (v->nall - v->nlive == VAULT_RETIRED_MAX)
			return;
		if (c->len == 0 /* an http source not fetched yet */ ||
		    cred_held(v, c) ||
		    (c->minted && minted == VAULT_RETIRED_MINTED))
			continue;
		minted += c->minted;
		v->creds[v->nall].name = NULL;
		v->creds[v->nall].val = c->val;
		v->creds[v->nall].len = c->len;
		v->creds[v->nall].basic = c->basic;
		v->creds[v->nall].minted = c->minted;
		if (vault_redact_arena_need(v->creds, v->nall + 1) == SIZE_MAX)
			return;
		v->nall++;
	}
}

static int
vault_move_arena(struct vault *v, struct err *e)
{
	struct secmem_arena *old = v->arena, *a;
	size_t need = 4096, lines = 0, i;

	for (i = 0; i < v->nall; i++)
		need += v->creds[i].len + 64;
	if ((i = vault_redact_arena_need(v->creds, v->nall)) == SIZE_MAX) {
		err_set(e,
		    "credential values too large to redact (the rendered "
		    "forms of all values exceed %u bytes or %u patterns)",
		    VAULT_PATTERN_BYTES_MAX, VAULT_PATTERNS_MAX);
		return -1;
	}
	need += i;
	for (i = 0; i < v->nbinds; i++)
		if (v->binds[i].render_len + 64 > lines)
			lines = v->binds[i].render_len + 64;
	lines *= VAULT_LINES_INFLIGHT;
	if (lines > VAULT_LINES_ARENA_MAX)
		lines = VAULT_LINES_ARENA_MAX;
	/* At least one injection of the largest binding fits. */
	for (i = 0; i < v->nbinds; i++)
		if (v->binds[i].render_len + 64 > lines)
			lines = v->binds[i].render_len + 64;
	need += lines;
	if ((a = secmem_arena_new(need, e)) == NULL)
		return -1;
	for (i = 0; i < v->nall; i++) {
		struct vault_cred *c = &v->creds[i];
		char *val = secmem_strndup(a, c->val, c->len);

		if (val == NULL) {
			secmem_arena_free(a);
			err_set(e, "secret arena full");
			return -1;
		}
		c->val = val;
	}
	v->arena = a;
	secmem_arena_free(old);
	return 0;
}

/* v's values copied from src, a revision of the same policy (a mint
 * reads no file again). */
static int
vault_copy_values(struct vault *v, const struct vault *src, struct err *e)
{
	size_t i;

	for (i = 0; i < src->ncreds; i++) {
		struct vault_cred *c = &v->creds[i];

		*c = src->creds[i];
		c->val = secmem_strndup(v->arena, src->creds[i].val, c->len);
		if (c->val == NULL) {
			err_set(e, "secret arena full");
			return -1;
		}
		v->ncreds++;
	}
	return 0;
}

/*
 * One revision of p: values read (or copied from prev when copy: a mint
 * or a fetch of the same policy; hf's value put in), prev's minted
 * tokens carried (with mint's in its binding), bindings, retired values,
 * the matcher.
 */
static struct vault *
vault_build(const struct policy *p, const struct vault *prev, bool copy,
    const struct vault_oauth_mint *mint, const struct vault_http_fetched *hf,
    struct err *e)
{
	struct vault *v;
	size_t i;

	if ((v = calloc(1, sizeof(*v))) == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	v->magic = VAULT_MAGIC;
	v->refs = 1;
	v->clock = prev != NULL ? prev->clock : now_mono_ms_clock;
	v->clock_arg = prev != NULL ? prev->clock_arg : NULL;
	/* policy_ref only counts: the snapshot stays immutable. */
	v->p = policy_ref((struct policy *)(uintptr_t)p);
	v->creds = calloc(
	    p->ncredentials + 2 * oauth2_count(p) + VAULT_RETIRED_MAX + 1,
	    sizeof(*v->creds));
	v->binds = calloc(p->nbindings + 1, sizeof(*v->binds));
	if (v->creds == NULL || v->binds == NULL) {
		err_set(e, "out of memory");
		goto out_free;
	}
	if ((v->arena = secmem_arena_new(arena_size(p), e)) == NULL)
		goto out_free;
	if ((copy ? vault_copy_values(v, prev, e)
	          : vault_load_values(v, prev, e)) == -1 ||
	    (hf != NULL && vault_http_apply(v, hf, e) == -1))
		goto out_free;
	v->nlive = v->ncreds;
	if (vault_oauth_carry(v, prev, mint, e) == -1)
		goto out_free;
	for (i = 0; i < p->nbindings; i++) {
		v->nbinds++;
		if (bind_init(v, &v->binds[i], p->bindings[i], e) == -1 ||
		    bind_subs_init(v, &v->binds[i], e) == -1)
			goto out_free;
	}
	/* The live values are checked against the bound first (a policy
	 * whose own values do not fit fails); retired ones only fill what
	 * is left. */
	v->nall = v->nlive;
	if (vault_redact_arena_need(v->creds, v->nlive) != SIZE_MAX)
		vault_retire(v, prev);
	if (vault_move_arena(v, e) == -1 || vault_redact_build(v, e) == -1)
		goto out_free;
	return v;
out_free:
	vault_destroy(v);
	return NULL;
}

struct vault *
vault_new(const struct policy *p, const struct vault *prev, struct err *e)
{
	return vault_build(p, prev, false, NULL, NULL, e);
}

struct vault *
vault_mint(const struct vault *v, const char *binding,
    const struct vault_token *t, uint64_t now_ms, struct err *e)
{
	struct vault_oauth_mint m = {binding, t, now_ms};

	if (vault_oauth_bind(v, binding) == NULL ||
	    (policy_binding_oauth2(vault_oauth_bind(v, binding)->b) == NULL &&
	        policy_binding_github(vault_oauth_bind(v, binding)->b) ==
	            NULL)) {
		err_set(e, "no oauth2 binding \"%s\"", binding);
		return NULL;
	}
	return vault_build(v->p, v, true, &m, NULL, e);
}

struct vault *
vault_http_set(const struct vault *v, const char *cred, const char *val,
    size_t len, uint32_t ttl_s, uint64_t now_ms, struct err *e)
{
	struct vault_http_fetched hf = {cred, val, len, ttl_s, now_ms};

	if (!value_ok((const uint8_t *)val, len, false)) {
		err_set(e,
		    "credential \"%s\": value must be 1 to %u bytes without "
		    "CR, LF or NUL",
		    cred, POLICY_SECRET_MAX);
		return NULL;
	}
	return vault_build(v->p, v, true, NULL, &hf, e);
}

void
vault_set_clock(struct vault *v, uint64_t (*clock)(void *), void *arg)
{
	v->clock = clock;
	v->clock_arg = arg;
}

struct vault *
vault_ref(struct vault *v)
{
	if (v != NULL)
		v->refs++;
	return v;
}

void
vault_free(struct vault *v)
{
	if (v == NULL)
		return;
	if (v->magic != VAULT_MAGIC)
		abort();
	if (--v->refs == 0)
		vault_destroy(v);
}

size_t
vault_nbindings(const struct vault *v)
{
	return v->nbinds;
}

size_t
vault_nretired(const struct vault *v)
{
	return v->nall - v->nlive;
}

const struct policy *
vault_policy(const struct vault *v)
{
	return v->p;
}

bool
vault_locked(const struct vault *v)
{
	return secmem_arena_locked(v->arena);
}
