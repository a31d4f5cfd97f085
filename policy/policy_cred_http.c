/*
 * policy_cred_http: an http credential source's settings
 * (policy_cred_http.h): the object (free, copy, compare, a literal
 * header value into its arena). The walk, the YAML and the cross checks
 * are policy_cred_http_walk.c's and policy_binding_check.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_cred_http_int.h"
#include "util/secmem.h"

static const char *const method_names[] = {
    [POLICY_HTTP_GET] = "GET", [POLICY_HTTP_POST] = "POST"};
static const char *const format_names[] = {
    [POLICY_HTTP_JSON] = "json", [POLICY_HTTP_RAW] = "raw"};

const char *
policy_http_method_name(enum policy_http_method m)
{
	return (unsigned)m < 2 ? method_names[m] : NULL;
}

const char *
policy_http_format_name(enum policy_http_format f)
{
	return (unsigned)f < 2 ? format_names[f] : NULL;
}

uint32_t
policy_cred_http_max_stale(const struct policy_cred_http *h)
{
	return h->have_max_stale ? h->max_stale_s
	                         : POLICY_HTTP_MAX_STALE_DEFAULT;
}

/* ---- life ---- */

void
policy_cred_http_free(struct policy_cred_http *h)
{
	size_t i;

	if (h == NULL)
		return;
	for (i = 0; i < h->nheaders; i++) {
		free(h->headers[i].name);
		free(h->headers[i].credential);
	}
	free(h->headers);
	secmem_arena_free(h->arena); /* wipes the values */
	free(h->url);
	free(h->host);
	free(h->target);
	free(h);
}

static int
sdup(char **d, const char *s)
{
	return s == NULL || (*d = strdup(s)) != NULL ? 0 : -1;
}

int
policy_cred_http_put_value(struct policy_cred_http *h,
    struct policy_http_header *x, const void *v, size_t n)
{
	struct err e;

	if (h->arena == NULL &&
	    (h->arena = secmem_arena_new(
	         POLICY_HTTP_HEADERS_MAX * (POLICY_SECRET_MAX + 64), &e)) ==
	        NULL)
		return -1;
	if ((x->value = secmem_alloc(h->arena, n)) == NULL)
		return -1;
	memcpy(x->value, v, n);
	x->vlen = n;
	return 0;
}

struct policy_cred_http *
policy_cred_http_dup(const struct policy_cred_http *h)
{
	struct policy_cred_http *d = calloc(1, sizeof(*d));
	size_t i;

	if (d == NULL)
		return NULL;
	*d = *h;
	d->url = d->host = d->target = NULL;
	d->headers = NULL;
	d->nheaders = 0;
	d->arena = NULL;
	if (sdup(&d->url, h->url) == -1 || sdup(&d->host, h->host) == -1 ||
	    sdup(&d->target, h->target) == -1 ||
	    (h->nheaders > 0 &&
	        (d->headers = calloc(h->nheaders, sizeof(*d->headers))) ==
	            NULL))
		goto fail;
	for (i = 0; i < h->nheaders; i++, d->nheaders++) {
		const struct policy_http_header *s = &h->headers[i];
		struct policy_http_header *x = &d->headers[i];

		if (sdup(&x->name, s->name) == -1 ||
		    sdup(&x->credential, s->credential) == -1 ||
		    (s->value != NULL &&
		        policy_cred_http_put_value(d, x, s->value, s->vlen) ==
		            -1)) {
			d->nheaders++;
			goto fail;
		}
	}
	return d;
fail:
	policy_cred_http_free(d);
	return NULL;
}

static bool
str_same(const char *a, const char *b)
{
	return (a == NULL && b == NULL) ||
	    (a != NULL && b != NULL && strcmp(a, b) == 0);
}

bool
policy_cred_http_same(
    const struct policy_cred_http *a, const struct policy_cred_http *b)
{
	size_t i;

	if (a == NULL || b == NULL)
		return a == b;
	if (!str_same(a->url, b->url) || a->method != b->method ||
	    a->format != b->format || a->ttl_s != b->ttl_s ||
	    policy_cred_http_max_stale(a) != policy_cred_http_max_stale(b) ||
	    a->allow_private != b->allow_private || a->nheaders != b->nheaders)
		return false;
	for (i = 0; i < a->nheaders; i++) {
		const struct policy_http_header *x = &a->headers[i],
		                                *y = &b->headers[i];
		if (!str_same(x->name, y->name) ||
		    !str_same(x->credential, y->credential) ||
		    x->vlen != y->vlen ||
		    (x->vlen > 0 && memcmp(x->value, y->value, x->vlen) != 0))
			return false;
	}
	return true;
}
