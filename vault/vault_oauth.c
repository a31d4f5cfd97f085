/*
 * vault_oauth: an oauth2 binding's minted values across revisions
 * (vault_oauth_carry), its token request (vault_oauth_request) and when
 * a token is due (vault_oauth.h). Values are only ever copied with
 * memcpy into the arena or the request buffer, never formatted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/secmem.h"
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

uint64_t
vault_oauth_due(uint64_t t0_ms, uint32_t lifetime_s)
{
	uint64_t life = (uint64_t)lifetime_s * 1000, margin = life / 10;

	if (margin > VAULT_OAUTH_MARGIN_MAX_MS)
		margin = VAULT_OAUTH_MARGIN_MAX_MS;
	return t0_ms + life - margin;
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

/* A minted value into v->creds[nlive++], named after its binding. */
static const struct vault_cred *
mint_put(struct vault *v, const char *binding, const char *val, size_t len,
    struct err *e)
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
	v->nlive++;
	return c;
}

/* Could pb's (prev's) tokens serve vb's binding b of v? The same
 * settings and the same client secret and refresh token values: an
 * operator who replaced either wants the next token minted with it. */
static bool
carry_ok(const struct vault_bind *vb, const struct vault_bind *pb,
    const struct policy_binding *b)
{
	return pb != NULL &&
	    policy_oauth2_same(
	        policy_binding_oauth2(pb->b), policy_binding_oauth2(b)) &&
	    cred_same(vb->secret, pb->secret) &&
	    cred_same(vb->refresh, pb->refresh);
}

static int
carry_one(struct vault *v, struct vault_bind *vb,
    const struct policy_binding *b, const struct vault *prev,
    const struct vault_oauth_mint *mint, struct err *e)
{
	const struct policy_oauth2 *oa = policy_binding_oauth2(b);
	const char *name = policy_binding_name(b);
	const struct vault_bind *pb = vault_oauth_bind(prev, name);
	const struct vault_cred *rtok = NULL;

	vb->secret = cred_named(v, oa->client_secret);
	vb->refresh = cred_named(v, oa->refresh_token);
	if (!carry_ok(vb, pb, b))
		pb = NULL;
	if (mint != NULL && strcmp(mint->binding, name) == 0) {
		const struct vault_token *t = mint->t;

		if ((vb->tok = mint_put(
		         v, name, t->access, t->access_len, e)) == NULL)
			return -1;
		vb->tok_due_ms = vault_oauth_due(mint->now_ms, t->expires_in);
		vb->tok_expires_ms =
		    mint->now_ms + (uint64_t)t->expires_in * 1000;
		if (t->refresh != NULL)
			return (vb->rtok = mint_put(v, name, t->refresh,
			            t->refresh_len, e)) == NULL
			    ? -1
			    : 0;
	} else if (pb != NULL && pb->tok != NULL) {
		if ((vb->tok = mint_put(
		         v, name, pb->tok->val, pb->tok->len, e)) == NULL)
			return -1;
		vb->tok_due_ms = pb->tok_due_ms;
		vb->tok_expires_ms = pb->tok_expires_ms;
	}
	if (pb != NULL && (rtok = pb->rtok) != NULL &&
	    (vb->rtok = mint_put(v, name, rtok->val, rtok->len, e)) == NULL)
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
		if (policy_binding_oauth2(p->bindings[i]) != NULL &&
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

int
vault_oauth_request(const struct vault *v, const char *binding,
    struct vault_oauth_req *out, struct err *e)
{
	const struct vault_bind *vb = vault_oauth_bind(v, binding);
	const struct policy_oauth2 *oa;
	struct obuf body = {NULL, 0, 0, 0}, o = {NULL, 0, 0, 0};

	memset(out, 0, sizeof(*out));
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
