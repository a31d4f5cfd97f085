/*
 * policy_cred_http_walk: an http credential source's keys walked from the
 * operator's file (policy_cred_http.h) and written back as YAML. A
 * literal header value is checked and copied into the settings' arena,
 * never echoed: messages name its position only.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy_cred.h"
#include "policy/policy_cred_http_int.h"
#include "policy/policy_cred_http_walk.h"
#include "policy/policy_oauth2.h"
#include "policy/policy_walk.h"
#include "policy/policy_ybuf.h"

static const char *const method_names[] = {"GET", "POST"};
static const char *const format_names[] = {"json", "raw"};

/* Headers egressd writes itself or that frame the request. */
static const char *const reserved[] = {"host", "content-length",
    "transfer-encoding", "connection", "upgrade", "te", "trailer",
    "proxy-authorization", "expect"};

/* ---- the walk (obj: the struct policy_credential *) ---- */

static struct policy_cred_http *
hs(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_credential *c = *(struct policy_credential **)obj;

	if (c->http == NULL && (c->http = calloc(1, sizeof(*c->http))) == NULL)
		policy_walk_err(w, v, "out of memory");
	return c->http;
}

int
policy_cred_http_walk_url(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_cred_http *h = hs(w, v, obj);
	struct err e;

	if (h == NULL || !policy_walk_is(w, v, PNODE_STR))
		return -1;
	/* The oauth2 tokenUrl's rules exactly (https, a DNS name, no user
	 * info, no fragment): the same parser, its messages renamed. */
	if (policy_oauth2_parse_url(
	        v->str, &h->host, &h->port, &h->target, &e) == -1) {
		const char *m = e.msg;

		if (strncmp(m, "tokenUrl", 8) == 0)
			m += 8;
		policy_walk_err(w, v, "url%s", m);
		return -1;
	}
	return policy_walk_strdup(w, v, &h->url) ? 0 : -1;
}

static int
pick(struct pwalk *w, const struct pnode *v, const char *const *names,
    const char *what)
{
	if (!policy_walk_is(w, v, PNODE_STR))
		return -1;
	if (strcmp(v->str, names[0]) == 0)
		return 0;
	if (strcmp(v->str, names[1]) == 0)
		return 1;
	policy_walk_err(w, v, "unknown %s \"%.32s\" (%s or %s)", what, v->str,
	    names[0], names[1]);
	return -1;
}

int
policy_cred_http_walk_method(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_cred_http *h = hs(w, v, obj);
	int m = pick(w, v, method_names, "method");

	if (h == NULL || m < 0)
		return -1;
	h->method = (enum policy_http_method)m;
	return 0;
}

int
policy_cred_http_walk_format(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_cred_http *h = hs(w, v, obj);
	int f = pick(w, v, format_names, "format");

	if (h == NULL || f < 0)
		return -1;
	h->format = (enum policy_http_format)f;
	return 0;
}

int
policy_cred_http_walk_ttl(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_cred_http *h = hs(w, v, obj);
	unsigned long n;

	if (h == NULL ||
	    !policy_walk_uint(
	        w, v, POLICY_HTTP_TTL_MIN, POLICY_HTTP_TTL_MAX, false, &n))
		return -1;
	h->ttl_s = (uint32_t)n;
	return 0;
}

int
policy_cred_http_walk_max_stale(
    struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_cred_http *h = hs(w, v, obj);
	unsigned long n;

	if (h == NULL ||
	    !policy_walk_uint(w, v, 0, POLICY_HTTP_MAX_STALE_MAX, false, &n))
		return -1;
	h->max_stale_s = (uint32_t)n;
	h->have_max_stale = true;
	return 0;
}

int
policy_cred_http_walk_private(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_cred_http *h = hs(w, v, obj);

	if (h == NULL || v->type != PNODE_BOOL) {
		policy_walk_err(w, v, "allowPrivate must be true or false");
		return -1;
	}
	h->allow_private = strcmp(v->str, "true") == 0;
	return 0;
}

/* RFC 9110 token, not one egressd writes or that frames the request. */
static bool
header_name_ok(struct pwalk *w, const struct pnode *k)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";
	size_t i;

	if (k->len == 0 || k->len > POLICY_CRED_NAME_MAX)
		goto bad;
	for (i = 0; i < k->len; i++) {
		char c = k->str[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || strchr(extra, c) != NULL))
			goto bad;
	}
	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strcasecmp(k->str, reserved[i]) == 0) {
			policy_walk_err(w, k,
			    "header \"%s\" is egressd's to write", k->str);
			return false;
		}
	return true;
bad:
	policy_walk_err(w, k, "invalid header name \"%.64s\"", k->str);
	return false;
}

/* A header's value: a literal string (1..POLICY_SECRET_MAX visible bytes
 * and spaces) or {credential: name}. */
static int
header_value(struct pwalk *w, const struct pnode *v, struct policy_cred_http *h,
    struct policy_http_header *x)
{
	size_t i;

	if (v->type == PNODE_MAP) {
		if (v->nkids != 2 ||
		    strcmp(v->kids[0]->str, "credential") != 0) {
			policy_walk_err(w, v,
			    "a header value is a string or {credential: name}");
			return -1;
		}
		/* the name is checked with the references (the credential
		 * must exist: policy_binding_check.c) */
		if (!policy_walk_is(w, v->kids[1], PNODE_STR) ||
		    v->kids[1]->len > POLICY_CRED_NAME_MAX)
			return -1;
		return policy_walk_strdup(w, v->kids[1], &x->credential) ? 0
		                                                         : -1;
	}
	if (v->type != PNODE_STR || v->len == 0 || v->len > POLICY_SECRET_MAX) {
		policy_walk_err(w, v,
		    "a header value is 1 to %d bytes, or {credential: name}",
		    POLICY_SECRET_MAX);
		return -1;
	}
	for (i = 0; i < v->len; i++)
		if ((unsigned char)v->str[i] < 0x20 ||
		    (unsigned char)v->str[i] == 0x7f) {
			policy_walk_err(w, v, "header value: control byte");
			return -1;
		}
	if (policy_cred_http_put_value(h, x, v->str, v->len) == -1) {
		policy_walk_err(w, v, "out of memory for a header value");
		return -1;
	}
	return 0;
}

int
policy_cred_http_walk_headers(struct pwalk *w, const struct pnode *v, void *obj)
{
	struct policy_cred_http *h = hs(w, v, obj);
	size_t i, j;

	if (h == NULL || !policy_walk_is(w, v, PNODE_MAP))
		return -1;
	if (v->nkids / 2 > POLICY_HTTP_HEADERS_MAX) {
		policy_walk_err(
		    w, v, "at most %d headers", POLICY_HTTP_HEADERS_MAX);
		return -1;
	}
	if ((h->headers = calloc(v->nkids / 2 + 1, sizeof(*h->headers))) ==
	    NULL) {
		policy_walk_err(w, v, "out of memory");
		return -1;
	}
	for (i = 0; i + 1 < v->nkids; i += 2) {
		const struct pnode *k = v->kids[i];
		struct policy_http_header *x = &h->headers[h->nheaders];

		if (k->type != PNODE_STR || !header_name_ok(w, k))
			return -1;
		for (j = 0; j < h->nheaders; j++)
			if (strcasecmp(h->headers[j].name, k->str) == 0) {
				policy_walk_err(
				    w, k, "header \"%s\" given twice", k->str);
				return -1;
			}
		if (!policy_walk_strdup(w, k, &x->name))
			return -1;
		h->nheaders++;
		if (header_value(w, v->kids[i + 1], h, x) == -1)
			return -1;
	}
	return 0;
}

/* ---- YAML ---- */

void
policy_cred_http_yaml(struct ybuf *b, const struct policy_cred_http *h)
{
	size_t i;

	policy_ybuf_printf(
	    b, "\n    source:\n      type: \"http\"\n      url: ");
	policy_ybuf_quoted(b, h->url);
	policy_ybuf_printf(b, "\n      method: \"%s\"\n      format: \"%s\"\n",
	    policy_http_method_name(h->method),
	    policy_http_format_name(h->format));
	if (h->ttl_s != 0)
		policy_ybuf_printf(b, "      ttl: %u\n", (unsigned)h->ttl_s);
	if (h->have_max_stale)
		policy_ybuf_printf(
		    b, "      maxStale: %u\n", (unsigned)h->max_stale_s);
	if (h->allow_private)
		policy_ybuf_printf(b, "      allowPrivate: true\n");
	if (h->nheaders > 0)
		policy_ybuf_printf(b, "      headers:\n");
	for (i = 0; i < h->nheaders; i++) {
		policy_ybuf_printf(b, "        ");
		policy_ybuf_quoted(b, h->headers[i].name);
		policy_ybuf_printf(b, ": ");
		if (h->headers[i].credential != NULL) {
			policy_ybuf_printf(b, "{credential: ");
			policy_ybuf_quoted(b, h->headers[i].credential);
			policy_ybuf_printf(b, "}");
		} else /* the operator's own file, byte by byte */
			policy_ybuf_quoted_secret(
			    b, h->headers[i].value, h->headers[i].vlen);
		policy_ybuf_printf(b, "\n");
	}
}
