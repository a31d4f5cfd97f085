/*
 * vault_http: http credential sources in the vault (vault_http.h): the
 * value carried from revision to revision, a fetched one put in, its
 * freshness judged, and the request rendered. No value is ever
 * formatted: the request is assembled with memcpy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred_http.h"
#include "util/secmem.h"
#include "vault/vault_http.h"
#include "vault/vault_int.h"

/* The policy credential of v->creds[i] (i < v->ncreds: same order). */
static const struct policy_cred_http *
http_of(const struct vault *v, size_t i)
{
	return i < v->ncreds && i < v->p->ncredentials
	    ? policy_credential_http(v->p->credentials[i])
	    : NULL;
}

static struct vault_cred *
cred_named(const struct vault *v, const char *name, size_t *at)
{
	size_t i;

	for (i = 0; i < v->ncreds; i++)
		if (strcmp(v->creds[i].name, name) == 0) {
			*at = i;
			return &v->creds[i];
		}
	return NULL;
}

uint64_t
vault_http_now(const struct vault *v)
{
	return v->clock(v->clock_arg);
}

int
vault_http_carry(struct vault *v, struct vault_cred *c,
    const struct policy_credential *pc, const struct vault *prev, struct err *e)
{
	const struct vault_cred *pcred = NULL;
	size_t j;

	if (prev != NULL && (pcred = cred_named(prev, c->name, &j)) != NULL &&
	    (!policy_cred_http_same(
	         http_of(prev, j), policy_credential_http(pc)) ||
	        pcred->len == 0))
		pcred = NULL;
	c->val = secmem_strndup(
	    v->arena, pcred != NULL ? pcred->val : "", pcred ? pcred->len : 0);
	if (c->val == NULL) {
		err_set(e, "credential \"%s\": secret arena full", c->name);
		return -1;
	}
	c->len = pcred != NULL ? pcred->len : 0;
	if (pcred != NULL) {
		c->fetched_ms = pcred->fetched_ms;
		c->due_ms = pcred->due_ms;
		c->until_ms = pcred->until_ms;
	}
	return 0;
}

int
vault_http_apply(
    struct vault *v, const struct vault_http_fetched *hf, struct err *e)
{
	const struct policy_cred_http *h;
	struct vault_cred *c;
	uint32_t ttl = hf->ttl_s;
	size_t i;

	if ((c = cred_named(v, hf->cred, &i)) == NULL ||
	    (h = http_of(v, i)) == NULL) {
		err_set(e, "no http credential \"%s\"", hf->cred);
		return -1;
	}
	/* the store's ttl, capped by the operator's; else the operator's */
	if (ttl == 0 || (h->ttl_s != 0 && ttl > h->ttl_s))
		ttl = h->ttl_s != 0 ? h->ttl_s : POLICY_HTTP_TTL_DEFAULT;
	if (ttl > POLICY_HTTP_TTL_MAX)
		ttl = POLICY_HTTP_TTL_MAX;
	/* the old bytes stay in the arena (retired by the build) */
	if ((c->val = secmem_strndup(v->arena, hf->val, hf->len)) == NULL) {
		err_set(e, "credential \"%s\": secret arena full", hf->cred);
		return -1;
	}
	c->len = hf->len;
	c->fetched_ms = hf->now_ms;
	c->due_ms = hf->now_ms + ttl * 1000ull;
	c->until_ms = c->due_ms + policy_cred_http_max_stale(h) * 1000ull;
	return 0;
}

bool
vault_http_changed(
    const struct vault *nv, const struct vault *v, const char *cred)
{
	const struct vault_cred *a, *b;
	size_t i;

	a = cred_named(nv, cred, &i);
	b = cred_named(v, cred, &i);
	return a == NULL || b == NULL || a->len != b->len ||
	    memcmp(a->val, b->val, a->len) != 0;
}

int
vault_http_state(
    const struct vault *v, const char *cred, struct vault_http_state *st)
{
	const struct vault_cred *c;
	size_t i;

	memset(st, 0, sizeof(*st));
	if ((c = cred_named(v, cred, &i)) == NULL || http_of(v, i) == NULL)
		return -1;
	st->have = c->len > 0;
	st->fetched_ms = c->fetched_ms;
	st->due_ms = c->due_ms;
	st->until_ms = c->until_ms;
	return 0;
}

/* Is c an http source's value that may not be sent now? */
static const char *
cred_unusable(const struct vault *v, const struct vault_cred *c, uint64_t now)
{
	size_t i;

	if (c == NULL || c < v->creds || c >= v->creds + v->ncreds)
		return NULL;
	i = (size_t)(c - v->creds);
	if (http_of(v, i) == NULL)
		return NULL;
	if (c->len == 0)
		return "credential not fetched from its http source yet";
	if (now >= c->until_ms)
		return "credential from its http source past maxStale";
	return NULL;
}

const char *
vault_http_unusable(const struct vault *v, const struct vault_bind *vb)
{
	uint64_t now = v->clock(v->clock_arg);
	const struct vault_cred *more[] = {
	    vb->aws_id, vb->aws_secret, vb->aws_token, vb->secret, vb->refresh};
	const char *why;
	size_t i;

	for (i = 0; i < vb->ncreds; i++)
		if ((why = cred_unusable(v, vb->creds[i], now)) != NULL)
			return why;
	for (i = 0; i < vb->nsubs; i++)
		if ((why = cred_unusable(v, vb->subs[i].c, now)) != NULL)
			return why;
	for (i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		if ((why = cred_unusable(v, more[i], now)) != NULL)
			return why;
	return NULL;
}

/* ---- the request ---- */

struct obuf {
	uint8_t *p;
	size_t n, cap;
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

/* The whole head into o (o->p NULL: count only); -1: a header's
 * credential holds no value. */
static int
render(struct obuf *o, const struct vault *v, const struct policy_cred_http *h)
{
	const struct vault_cred *c;
	char num[16];
	size_t i, at;

	puts_(o, policy_http_method_name(h->method));
	puts_(o, " ");
	puts_(o, h->target);
	puts_(o, " HTTP/1.1\r\nHost: ");
	puts_(o, h->host);
	if (h->port != 443) {
		(void)snprintf(num, sizeof(num), ":%u", (unsigned)h->port);
		puts_(o, num);
	}
	puts_(o, "\r\nUser-Agent: egressd\r\nConnection: close\r\n");
	if (h->method == POLICY_HTTP_POST)
		puts_(o, "Content-Length: 0\r\n");
	for (i = 0; i < h->nheaders; i++) {
		const struct policy_http_header *x = &h->headers[i];

		puts_(o, x->name);
		puts_(o, ": ");
		if (x->credential == NULL)
			put(o, x->value, x->vlen);
		else if ((c = cred_named(v, x->credential, &at)) != NULL &&
		    c->len > 0)
			put(o, c->val, c->len);
		else
			return -1;
		puts_(o, "\r\n");
	}
	puts_(o, "\r\n");
	return 0;
}

int
vault_http_request(const struct vault *v, const char *cred,
    struct vault_http_req *out, struct err *e)
{
	const struct policy_cred_http *h;
	struct obuf o = {NULL, 0, 0};
	size_t i;

	memset(out, 0, sizeof(*out));
	if (cred_named(v, cred, &i) == NULL || (h = http_of(v, i)) == NULL) {
		err_set(e, "no http credential \"%s\"", cred);
		return -1;
	}
	if (render(&o, v, h) == -1) {
		err_set(e, "a header's credential holds no value");
		return -1;
	}
	if (o.n > VAULT_HTTP_REQ_MAX) {
		err_set(e, "request larger than %u bytes", VAULT_HTTP_REQ_MAX);
		return -1;
	}
	o.cap = o.n;
	o.n = 0;
	if ((o.p = malloc(o.cap)) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	(void)render(&o, v, h);
	out->credential = v->creds[i].name;
	out->h = h;
	out->bytes = o.p;
	out->len = o.n;
	return 0;
}

void
vault_http_request_clear(struct vault_http_req *out)
{
	if (out->bytes != NULL) {
		secmem_wipe(out->bytes, out->len);
		free(out->bytes);
	}
	memset(out, 0, sizeof(*out));
}
