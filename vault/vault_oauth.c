/*
 * vault_oauth: an oauth2 or githubApp binding's minted values across
 * revisions (vault_oauth_carry), its token request (vault_oauth_request),
 * the endpoint's answer (vault_oauth_answer) and when a token is due
 * (vault_oauth.h). Values are only ever copied with memcpy into the arena
 * or the request buffer, never formatted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/now.h"
#include "util/secmem.h"
#include "vault/vault_ghtoken.h"
#include "vault/vault_github.h"
#include "vault/vault_int.h"
#include "vault/vault_oauth.h"
#include "vault/vault_token.h"

const struct vault_bind *
vault_oauth_bind(const struct vault *v, const char *name)
{
	size_t i;

	for (i = 0; v != NULL && name != NULL && i < v->nbinds; i++)
		if (strcmp(policy_binding_name(v->binds[i].b), name) == 0)
			return &v->binds[i];
	return NULL;
}

/* A tenth of the lifetime before the end, at most max_ms before. */
static uint64_t
due_within(uint64_t t0_ms, uint32_t lifetime_s, uint64_t max_ms)
{
	uint64_t life = (uint64_t)lifetime_s * 1000, margin = life / 10;

	if (margin > max_ms)
		margin = max_ms;
	return t0_ms + life - margin;
}

uint64_t
vault_oauth_due(uint64_t t0_ms, uint32_t lifetime_s)
{
	return due_within(t0_ms, lifetime_s, VAULT_OAUTH_MARGIN_MAX_MS);
}

uint64_t
vault_oauth_expiry(const struct vault *v, const char *binding)
{
	const struct vault_bind *vb = vault_oauth_bind(v, binding);

	return vb != NULL && vb->tok != NULL ? vb->tok_expires_ms : 0;
}

/* ---- carried across revisions ---- */

static const struct vault_cred *
cred_named(const struct vault *v, const char *name)
{
	size_t i;

	for (i = 0; name != NULL && i < v->ncreds; i++)
		if (strcmp(v->creds[i].name, name) == 0)
			return &v->creds[i];
	return NULL;
}

static bool
cred_same(const struct vault_cred *a, const struct vault_cred *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return a->len == b->len && memcmp(a->val, b->val, a->len) == 0;
}

/* A minted value into v->creds[nlive++], named after its binding
 * (basic: git's Basic form of a token, redacted decoded too). */
static const struct vault_cred *
mint_put(struct vault *v, const char *binding, const char *val, size_t len,
    bool basic, struct err *e)
{
	struct vault_cred *c = &v->creds[v->nlive];

	memset(c, 0, sizeof(*c));
	if ((c->val = secmem_strndup(v->arena, val, len)) == NULL) {
		err_set(e, "secret arena full");
		return NULL;
	}
	c->name = binding;
	c->len = len;
	c->minted = true;
	c->basic = basic;
	v->nlive++;
	return c;
}

/* A githubApp binding's token tok[0..n) in git's Basic form, beside it. */
static const struct vault_cred *
mint_put_basic(struct vault *v, const char *binding, const char *tok, size_t n,
    struct err *e)
{
	size_t cap = vault_github_basic_len(n) + 1, len;
	const struct vault_cred *c;
	char *b = secmem_alloc(v->arena, cap);

	if (b == NULL || (len = vault_github_basic(tok, n, b, cap)) == 0) {
		if (b != NULL)
			secmem_free(v->arena, b);
		err_set(e, "secret arena full");
		return NULL;
	}
	c = mint_put(v, binding, b, len, true, e);
	secmem_free(v->arena, b);
	return c;
}

/* Could pb's (prev's) tokens serve vb's binding b of v? The same
 * settings and the same client secret and refresh token values: an
 * operator who replaced either wants the next token minted with it. */
static bool
carry_ok(const struct vault_bind *vb, const struct vault_bind *pb,
    const struct policy_binding *b)
{
	if (pb != NULL && policy_binding_github(b) != NULL)
		return policy_github_same(policy_binding_github(pb->b),
		           policy_binding_github(b)) &&
		    cred_same(vb->key, pb->key);
	return pb != NULL &&
	    policy_oauth2_same(
	        policy_binding_oauth2(pb->b), policy_binding_oauth2(b)) &&
	    cred_same(vb->secret, pb->secret) &&
	    cred_same(vb->refresh, pb->refresh);
}

/* mint's token in force in vb (its binding named name). */
static int
carry_mint(struct vault *v, struct vault_bind *vb, const char *name,
    bool github, const struct vault_oauth_mint *mint, struct err *e)
{
	const struct vault_token *t = mint->t;

	if ((vb->tok = mint_put(v, name, t->access, t->access_len, false, e)) ==
	    NULL)
		return -1;
	if (github &&
	    (vb->tok_basic = mint_put_basic(
	         v, name, t->access, t->access_len, e)) == NULL)
		return -1;
	vb->tok_due_ms = due_within(mint->now_ms, t->expires_in,
	    github ? VAULT_GITHUB_MARGIN_MAX_MS : VAULT_OAUTH_MARGIN_MAX_MS);
	vb->tok_expires_ms = mint->now_ms + (uint64_t)t->expires_in * 1000;
	if (t->refresh != NULL)
		return (vb->rtok = mint_put(v, name, t->refresh, t->refresh_len,
		            false, e)) == NULL
		    ? -1
		    : 0;
	return 0;
}

static int
carry_one(struct vault *v, struct vault_bind *vb,
    const struct policy_binding *b, const struct vault *prev,
    const struct vault_oauth_mint *mint, struct err *e)
{
	const struct policy_oauth2 *oa = policy_binding_oauth2(b);
	const struct policy_github *g = policy_binding_github(b);
	const char *name = policy_binding_name(b);
	const struct vault_bind *pb = vault_oauth_bind(prev, name);
	const struct vault_cred *rtok = NULL;

	if (oa != NULL) {
		vb->secret = cred_named(v, oa->client_secret);
		vb->refresh = cred_named(v, oa->refresh_token);
	} else
		vb->key = cred_named(v, g->private_key);
	if (!carry_ok(vb, pb, b))
		pb = NULL;
	if (mint != NULL && strcmp(mint->binding, name) == 0) {
		if (carry_mint(v, vb, name, g != NULL, mint, e) == -1)
			return -1;
	} else if (pb != NULL && pb->tok != NULL) {
		if ((vb->tok = mint_put(v, name, pb->tok->val, pb->tok->len,
		         false, e)) == NULL)
			return -1;
		if (pb->tok_basic != NULL &&
		    (vb->tok_basic = mint_put(v, name, pb->tok_basic->val,
		         pb->tok_basic->len, true, e)) == NULL)
			return -1;
		vb->tok_due_ms = pb->tok_due_ms;
		vb->tok_expires_ms = pb->tok_expires_ms;
	}
	if (pb != NULL && (rtok = pb->rtok) != NULL &&
	    (vb->rtok = mint_put(v, name, rtok->val, rtok->len, false, e)) ==
	        NULL)
		return -1;
	return 0;
}

int
vault_oauth_carry(struct vault *v, const struct vault *prev,
    const struct vault_oauth_mint *mint, struct err *e)
{
	const struct policy *p = v->p;
	size_t i;

	for (i = 0; i < p->nbindings; i++)
		if ((policy_binding_oauth2(p->bindings[i]) != NULL ||
		        policy_binding_github(p->bindings[i]) != NULL) &&
		    carry_one(v, &v->binds[i], p->bindings[i], prev, mint, e) ==
		        -1)
			return -1;
	return 0;
}

/* ---- the token request ---- */

struct obuf {
	uint8_t *p;
	size_t n, cap;
	size_t body0; /* where the form body starts */
};

static void
put(struct obuf *o, const void *s, size_t n)
{
	if (o->p != NULL && o->cap - o->n >= n)
		memcpy(o->p + o->n, s, n);
	o->n += n;
}

static void
puts_(struct obuf *o, const char *s)
{
	put(o, s, strlen(s));
}

/* application/x-www-form-urlencoded (unreserved kept, space '+'). */
static void
put_form(struct obuf *o, const void *s, size_t n)
{
	const uint8_t *b = s;
	uint8_t enc[6];
	size_t i;

	for (i = 0; i < n; i++)
		put(o, enc, vault_enc_pct(b[i], VAULT_PCT_PLUS, "", enc));
}

static void
put_param(struct obuf *o, const char *name, const void *s, size_t n)
{
	if (o->n > o->body0)
		puts_(o, "&");
	puts_(o, name);
	puts_(o, "=");
	put_form(o, s, n);
}

/* The form body (o->p NULL: count only). */
static void
form_body(
    struct obuf *o, const struct vault_bind *vb, const struct policy_oauth2 *oa)
{
	const struct vault_cred *rt = vb->rtok != NULL ? vb->rtok : vb->refresh;
	size_t i;

	o->body0 = o->n;
	if (oa->grant == POLICY_OAUTH2_REFRESH_TOKEN) {
		put_param(o, "grant_type", "refresh_token", 13);
		put_param(o, "refresh_token", rt->val, rt->len);
	} else
		put_param(o, "grant_type", "client_credentials", 18);
	for (i = 0; i < oa->nscopes; i++) {
		if (i == 0)
			put_param(o, "scope", "", 0);
		else
			puts_(o, "+");
		put_form(o, oa->scopes[i], strlen(oa->scopes[i]));
	}
	if (oa->audience != NULL)
		put_param(o, "audience", oa->audience, strlen(oa->audience));
	if (oa->client_auth == POLICY_OAUTH2_AUTH_BODY || vb->secret == NULL)
		put_param(o, "client_id", oa->client_id, strlen(oa->client_id));
	if (oa->client_auth == POLICY_OAUTH2_AUTH_BODY && vb->secret != NULL)
		put_param(o, "client_secret", vb->secret->val, vb->secret->len);
}

/* "Authorization: Basic base64(form(id):form(secret))\r\n" (RFC 6749
 * §2.3.1); o->p NULL: count only. tmp: scratch of the pair's size. */
static int
basic_line(
    struct obuf *o, const struct vault_bind *vb, const struct policy_oauth2 *oa)
{
	struct obuf pair = {NULL, 0, 0, 0};
	uint8_t *b64;
	int n;

	put_form(&pair, oa->client_id, strlen(oa->client_id));
	put(&pair, ":", 1);
	put_form(&pair, vb->secret->val, vb->secret->len);
	if (o->p == NULL) {
		o->n += 23 + 4 * ((pair.n + 2) / 3);
		return 0;
	}
	if ((pair.p = malloc(pair.n)) == NULL ||
	    (b64 = malloc(4 * ((pair.n + 2) / 3) + 1)) == NULL) {
		free(pair.p);
		return -1;
	}
	pair.cap = pair.n;
	pair.n = 0;
	put_form(&pair, oa->client_id, strlen(oa->client_id));
	put(&pair, ":", 1);
	put_form(&pair, vb->secret->val, vb->secret->len);
	n = EVP_EncodeBlock(b64, pair.p, (int)pair.n);
	puts_(o, "Authorization: Basic ");
	put(o, b64, (size_t)n);
	puts_(o, "\r\n");
	secmem_wipe(pair.p, pair.cap);
	secmem_wipe(b64, (size_t)n);
	free(pair.p);
	free(b64);
	return 0;
}

/* The whole request into o (o->p NULL: count only). */
static int
render(struct obuf *o, const struct vault_bind *vb,
    const struct policy_oauth2 *oa, size_t body_len)
{
	char num[32];

	puts_(o, "POST ");
	puts_(o, oa->target);
	puts_(o, " HTTP/1.1\r\nHost: ");
	puts_(o, oa->host);
	if (oa->port != 443) {
		(void)snprintf(num, sizeof(num), ":%u", (unsigned)oa->port);
		puts_(o, num);
	}
	puts_(o,
	    "\r\nUser-Agent: egressd\r\nAccept: application/json\r\n"
	    "Content-Type: application/x-www-form-urlencoded\r\n"
	    "Connection: close\r\n");
	if (oa->client_auth == POLICY_OAUTH2_AUTH_BASIC && vb->secret != NULL &&
	    basic_line(o, vb, oa) == -1)
		return -1;
	(void)snprintf(
	    num, sizeof(num), "Content-Length: %zu\r\n\r\n", body_len);
	puts_(o, num);
	form_body(o, vb, oa);
	return 0;
}

static int
github_request(
    const struct vault_bind *vb, struct vault_oauth_req *out, struct err *e)
{
	const struct policy_github *g = policy_binding_github(vb->b);
	int64_t now_s = (int64_t)(now_wall_ms() / 1000);

	if (vb->key == NULL) {
		err_set(e, "no private key");
		return -1;
	}
	if (vault_github_request(vb->key->val, vb->key->len, g, now_s,
	        &out->bytes, &out->len, e) == -1)
		return -1;
	out->host = g->host;
	out->port = g->port;
	out->binding = policy_binding_name(vb->b);
	out->kind = VAULT_MINT_GITHUB;
	out->grant = "githubApp";
	out->body_max = VAULT_GHTOKEN_BODY_MAX;
	out->renew = vb->tok != NULL;
	return 0;
}

int
vault_oauth_request(const struct vault *v, const char *binding,
    struct vault_oauth_req *out, struct err *e)
{
	const struct vault_bind *vb = vault_oauth_bind(v, binding);
	const struct policy_oauth2 *oa;
	struct obuf body = {NULL, 0, 0, 0}, o = {NULL, 0, 0, 0};

	memset(out, 0, sizeof(*out));
	if (vb != NULL && policy_binding_github(vb->b) != NULL)
		return github_request(vb, out, e);
	if (vb == NULL || (oa = policy_binding_oauth2(vb->b)) == NULL ||
	    (oa->grant == POLICY_OAUTH2_REFRESH_TOKEN && vb->refresh == NULL)) {
		err_set(e, "no oauth2 binding \"%s\"", binding);
		return -1;
	}
	form_body(&body, vb, oa);
	(void)render(&o, vb, oa, body.n);
	if (o.n > VAULT_OAUTH_REQ_MAX) {
		err_set(e, "token request larger than %u bytes",
		    VAULT_OAUTH_REQ_MAX);
		return -1;
	}
	o.cap = o.n;
	o.n = 0;
	if ((o.p = malloc(o.cap)) == NULL || render(&o, vb, oa, body.n) == -1 ||
	    o.n != o.cap) {
		if (o.p != NULL)
			secmem_wipe(o.p, o.cap);
		free(o.p);
		err_set(e, "out of memory");
		return -1;
	}
	out->binding = policy_binding_name(vb->b);
	out->oa = oa;
	out->kind = VAULT_MINT_OAUTH2;
	out->grant = policy_oauth2_grant_name(oa->grant);
	out->host = oa->host;
	out->port = oa->port;
	out->body_max = VAULT_TOKEN_BODY_MAX;
	out->renew = vb->tok != NULL;
	out->bytes = o.p;
	out->len = o.n;
	return 0;
}

void
vault_oauth_request_clear(struct vault_oauth_req *out)
{
	if (out->bytes != NULL) {
		secmem_wipe(out->bytes, out->len);
		free(out->bytes);
	}
	memset(out, 0, sizeof(*out));
}

/* ---- the answer ---- */

/* An installation token's answer as a token living until expires_at. */
static int
github_answer(const uint8_t *body, size_t n, char *buf, size_t cap,
    int64_t now_s, struct vault_token *t, struct err *e)
{
	struct vault_ghtoken g;
	int64_t life;

	if (vault_ghtoken_parse(body, n, buf, cap, &g, e) == -1)
		return -1;
	life = g.expires_at - now_s;
	if (life < 1) {
		/* past already: our clock or the server's is wrong */
		secmem_wipe(buf, cap);
		err_set(e,
		    "installation token response: expires_at is not in "
		    "the future (clock skew?)");
		return -1;
	}
	t->access = g.token;
	t->access_len = g.token_len;
	t->expires_in =
	    life > VAULT_TOKEN_TTL_MAX ? VAULT_TOKEN_TTL_MAX : (uint32_t)life;
	return 0;
}

int
vault_oauth_answer(enum vault_mint_kind kind, int status, const uint8_t *body,
    size_t n, char *buf, size_t cap, int64_t now_s, struct vault_token *t,
    struct err *e)
{
	int rc;

	memset(t, 0, sizeof(*t));
	err_clear(e);
	rc = kind == VAULT_MINT_GITHUB
	    ? github_answer(body, n, buf, cap, now_s, t, e)
	    : vault_token_parse(body, n, buf, cap, t, e);
	if (status >= 200 && status <= 299)
		return rc;
	if (rc == 0)
		secmem_wipe(buf, cap);
	err_set(e, "token endpoint answered %d%s%s", status,
	    t->error != NULL ? " " : "", t->error != NULL ? t->error : "");
	t->access = t->refresh = NULL;
	return -1;
}
