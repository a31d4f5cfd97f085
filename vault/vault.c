/*
 * vault: one revision's credentials and bindings (vault.h): building it
 * from a policy snapshot, the host pre-check of the proxy, and the
 * per-request decision and rendering. Redaction is vault_redact.c.
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

#include "policy/policy_path.h"
#include "util/fileread.h"
#include "util/text.h"
#include "vault/vault_int.h"

/* ---- values ---- */

/* A value the vault accepts: 1..POLICY_SECRET_MAX bytes, no CR LF NUL
 * (they would split or end a header line). */
static bool
value_ok(const uint8_t *s, size_t n)
{
	size_t i;

	if (n == 0 || n > POLICY_SECRET_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0')
			return false;
	return true;
}

struct sink_arg {
	struct vault *v;
	struct vault_cred *c;
};

static int
cred_sink(void *arg, const uint8_t *value, size_t len)
{
	struct sink_arg *a = arg;

	if (!value_ok(value, len))
		return -1;
	a->c->val = secmem_strndup(a->v->arena, (const char *)value, len);
	if (a->c->val == NULL)
		return -1;
	a->c->len = len;
	return 0;
}

static int
cred_read_file(
    struct vault *v, struct vault_cred *c, const char *path, struct err *e)
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
	if (!value_ok((const uint8_t *)buf, (size_t)n)) {
		err_set(e,
		    "credential \"%s\": %s: value must be 1 to %u bytes "
		    "without CR, LF or NUL",
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

/* The header name of line i of binding vb, as the binding spells it. */
static const char *
line_name(const struct vault_bind *vb, size_t i)
{
	switch (policy_binding_auth(vb->b)) {
	case POLICY_AUTH_BEARER:
	case POLICY_AUTH_BASIC:
		return "Authorization";
	case POLICY_AUTH_APIKEY:
		return policy_binding_header_name(vb->b);
	case POLICY_AUTH_CUSTOM_HEADERS:
		return policy_binding_header(vb->b, i, NULL);
	case POLICY_AUTH_PASSTHROUGH:
		break;
	}
	return NULL;
}

static const char *
line_prefix(const struct vault_bind *vb)
{
	switch (policy_binding_auth(vb->b)) {
	case POLICY_AUTH_BEARER:
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

	vb->creds[vb->ncreds++] = c;
	vb->render_len +=
	    strlen(name) + 2 + strlen(line_prefix(vb)) + c->len + 2;
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
		name = line_name(vb, 0);
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

/* The arena's size: values, the matcher, and the lines in flight. */
static size_t
arena_size(const struct policy *p)
{
	/* Every value at its largest, and one file read buffer. */
	return (p->ncredentials + 1) * (POLICY_SECRET_MAX + 64);
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
vault_load_values(struct vault *v, struct err *e)
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
			if (cred_read_file(
			        v, c, policy_credential_path(pc), e) == -1)
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

	for (i = 0; prev != NULL && i < prev->nall; i++) {
		const struct vault_cred *c = &prev->creds[i];

		if (v->nall - v->ncreds == VAULT_RETIRED_MAX)
			return;
		if (cred_held(v, c))
			continue;
		v->creds[v->nall].name = NULL;
		v->creds[v->nall].val = c->val;
		v->creds[v->nall].len = c->len;
		v->creds[v->nall].basic = c->basic;
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

struct vault *
vault_new(const struct policy *p, const struct vault *prev, struct err *e)
{
	struct vault *v;
	size_t i;

	if ((v = calloc(1, sizeof(*v))) == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	v->magic = VAULT_MAGIC;
	v->refs = 1;
	/* policy_ref only counts: the snapshot stays immutable. */
	v->p = policy_ref((struct policy *)(uintptr_t)p);
	v->creds =
	    calloc(p->ncredentials + VAULT_RETIRED_MAX + 1, sizeof(*v->creds));
	v->binds = calloc(p->nbindings + 1, sizeof(*v->binds));
	if (v->creds == NULL || v->binds == NULL) {
		err_set(e, "out of memory");
		goto out_free;
	}
	if ((v->arena = secmem_arena_new(arena_size(p), e)) == NULL)
		goto out_free;
	if (vault_load_values(v, e) == -1)
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
	v->nall = v->ncreds;
	if (vault_redact_arena_need(v->creds, v->ncreds) != SIZE_MAX)
		vault_retire(v, prev);
	if (vault_move_arena(v, e) == -1 || vault_redact_build(v, e) == -1)
		goto out_free;
	return v;
out_free:
	vault_destroy(v);
	return NULL;
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
	return v->nall - v->ncreds;
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

/* ---- matching ---- */

static bool
name_below(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s && name[n - s - 1] == '.' &&
	    strcmp(name + n - s, suffix) == 0;
}

static unsigned
port_scheme(uint16_t port)
{
	if (port == 443)
		return POLICY_SCHEME_HTTPS;
	if (port == 80)
		return POLICY_SCHEME_HTTP;
	return 0;
}

bool
vault_host_bound(const struct vault *v, const char *host, uint16_t port)
{
	char name[POLICY_NAME_MAX + 2];
	unsigned scheme = port_scheme(port);
	size_t i, j;
	struct err e;

	if (host == NULL || scheme == 0 ||
	    policy_name_normalize(host, name, sizeof(name), &e) == -1 ||
	    name[0] == '*')
		return false;
	for (i = 0; i < v->nbinds; i++) {
		const struct policy_binding *b = v->binds[i].b;

		if (!(policy_binding_schemes(b) & scheme))
			continue;
		for (j = 0; j < policy_binding_nhosts(b); j++) {
			const char *h = policy_binding_host(b, j);

			if (h[0] == '*' && h[1] == '.' ? name_below(name, h + 2)
			                               : strcmp(name, h) == 0)
				return true;
		}
	}
	return false;
}

/* TRACE and TRACK echo the request (and so an injected header) back:
 * refused to a bound host, in any case since servers differ there. */
static bool
method_echoes(const char *m, size_t n)
{
	return n == 5 &&
	    (strncasecmp(m, "TRACE", 5) == 0 ||
	        strncasecmp(m, "TRACK", 5) == 0);
}

static void
remove_add(struct vault_inject *out, const char *name)
{
	size_t i;

	for (i = 0; i < out->nremove; i++)
		if (strcmp(out->remove[i], name) == 0)
			return;
	if (out->nremove < VAULT_REMOVE_MAX)
		out->remove[out->nremove++] = name;
}

/* Headers that make frameworks run another method than the request
 * line's (vault.h, remove[]). */
static const char *const override_headers[VAULT_OVERRIDE_HEADERS] = {
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
};

/* The byte at q[*i] of a query parameter's name, percent-decoded ('+' a
 * space), *i moved past it; a malformed escape is taken literally. */
static unsigned char
query_name_byte(const char *q, size_t n, size_t *i)
{
	unsigned char c = (unsigned char)q[*i];
	int x;

	(*i)++;
	if (c == '+')
		return ' ';
	if (c != '%' || *i + 2 > n)
		return c;
	if ((x = text_hexbyte(q + *i)) < 0)
		return c;
	*i += 2;
	return (unsigned char)x;
}

/* Is the name q[0..n) (up to '=', raw) "_method" as PHP, Rack or
 * Express would read it (vault.h, vault_decide)? */
static bool
query_name_is_method(const char *q, size_t n)
{
	static const char want[] = "_method";
	size_t i = 0, k = 0;
	unsigned char c;

	do {
		if (i == n)
			return false;
		c = query_name_byte(q, n, &i);
	} while (c == ' ');
	for (;;) {
		if (c == ' ' || c == '.' || c == '[')
			c = '_';
		if (k == sizeof(want) - 1 || text_lower(c) != want[k])
			return false;
		k++;
		if (i == n)
			return k == sizeof(want) - 1;
		c = query_name_byte(q, n, &i);
	}
}

static bool
query_has_method(const char *q, size_t n)
{
	size_t i = 0, start, end;

	while (q != NULL && i < n) {
		start = i;
		while (i < n && q[i] != '&' && q[i] != ';')
			i++;
		end = start;
		while (end < i && q[end] != '=')
			end++;
		if (query_name_is_method(q + start, end - start))
			return true;
		i++;
	}
	return false;
}

static int
render(struct vault *v, const struct vault_bind *vb, struct vault_inject *out,
    struct err *e)
{
	const char *prefix = line_prefix(vb);
	size_t i, pl = strlen(prefix), off = 0;
	char *buf;

	for (i = 0; i < vb->nlower; i++)
		remove_add(out, vb->lower[i]);
	for (i = 0; i < VAULT_OVERRIDE_HEADERS; i++)
		remove_add(out, override_headers[i]);
	if (vb->ncreds == 0)
		return 0;
	if ((buf = secmem_alloc(v->arena, vb->render_len + 1)) == NULL) {
		err_set(e, "secret arena full (too many injections in flight)");
		return -1;
	}
	for (i = 0; i < vb->ncreds; i++) {
		const char *name = line_name(vb, i);
		size_t nl = strlen(name);

		memcpy(buf + off, name, nl);
		off += nl;
		memcpy(buf + off, ": ", 2);
		off += 2;
		memcpy(buf + off, prefix, pl);
		off += pl;
		memcpy(buf + off, vb->creds[i]->val, vb->creds[i]->len);
		off += vb->creds[i]->len;
		memcpy(buf + off, "\r\n", 2);
		off += 2;
	}
	buf[off] = '\0';
	out->lines = buf;
	out->lines_len = off;
	return 0;
}

static const struct vault_bind *
bind_of(const struct vault *v, const struct policy_binding *b)
{
	size_t i;

	for (i = 0; i < v->nbinds; i++)
		if (v->binds[i].b == b)
			return &v->binds[i];
	return NULL;
}

static void
decide_as(struct vault_inject *out, enum vault_decision d, int status,
    const char *reason)
{
	out->decision = d;
	out->status = status;
	out->reason = reason;
}

int
vault_decide(struct vault *v, const struct vault_req *rq,
    struct vault_inject *out, struct err *e)
{
	char method[VAULT_METHOD_MAX + 1];
	const struct policy_binding *b = NULL;
	const struct vault_bind *vb;
	struct policy_request prq;
	struct err pe;
	bool bound;

	memset(out, 0, sizeof(*out));
	decide_as(out, VAULT_NO_MATCH, 0, "no credential binding matches");
	/* Never forwarded, whatever the decision: it is for egressd. */
	remove_add(out, "proxy-authorization");
	if (rq->host == NULL || rq->path == NULL || rq->method == NULL ||
	    (rq->scheme != POLICY_SCHEME_HTTPS &&
	        rq->scheme != POLICY_SCHEME_HTTP))
		return 0;
	bound = vault_host_bound(v, rq->host,
	    rq->port != 0 ? rq->port : policy_scheme_port(rq->scheme));
	if (bound && method_echoes(rq->method, rq->method_len)) {
		decide_as(out, VAULT_REFUSED, 403,
		    "method refused to a credential-bound host");
		return 0;
	}
	if ((out->norm_path = malloc(rq->path_len + 1)) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	if (policy_path_normalize(rq->path, rq->path_len, out->norm_path,
	        rq->path_len + 1, &out->norm_path_len, &pe) == -1) {
		free(out->norm_path);
		out->norm_path = NULL;
		out->norm_path_len = 0;
		if (bound)
			decide_as(out, VAULT_REFUSED, 400,
			    "request path not acceptable");
		return 0;
	}
	if (!bound)
		return 0;
	/* A longer token or one with a NUL is no method a binding names. */
	method[0] = '\0';
	if (rq->method_len <= VAULT_METHOD_MAX &&
	    memchr(rq->method, '\0', rq->method_len) == NULL) {
		memcpy(method, rq->method, rq->method_len);
		method[rq->method_len] = '\0';
	}
	prq.scheme = rq->scheme;
	prq.host = rq->host;
	prq.port = rq->port;
	prq.method = method;
	prq.path = out->norm_path;
	switch (policy_binding_match(v->p, &prq, &b, &pe)) {
	case POLICY_BIND_NONE:
	case POLICY_BIND_INVALID:
		return 0;
	case POLICY_BIND_AMBIGUOUS:
		decide_as(
		    out, VAULT_AMBIGUOUS, 403, "credential binding ambiguous");
		return 0;
	case POLICY_BIND_ONE:
		break;
	}
	if ((vb = bind_of(v, b)) == NULL) {
		err_set(e, "binding not in the vault");
		return -1;
	}
	if (query_has_method(rq->query, rq->query_len)) {
		/* Like every 400 refusal: nothing to forward. */
		free(out->norm_path);
		out->norm_path = NULL;
		out->norm_path_len = 0;
		out->binding = policy_binding_name(b);
		decide_as(out, VAULT_REFUSED, 400,
		    "method override in the query of a credential request");
		return 0;
	}
	if (render(v, vb, out, e) == -1)
		return -1;
	out->binding = policy_binding_name(b);
	out->bind = vb;
	out->subst_in = vb->subst_in;
	decide_as(out, VAULT_INJECTED, 0, "credential injected");
	return 0;
}

void
vault_inject_clear(struct vault *v, struct vault_inject *out)
{
	if (out == NULL)
		return;
	if (out->lines != NULL)
		secmem_free(v->arena, out->lines);
	free(out->norm_path);
	memset(out, 0, sizeof(*out));
}
