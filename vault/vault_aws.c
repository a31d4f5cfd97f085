/*
 * vault_aws: an awsSigV4 binding in the vault (vault.h, issue 38): its
 * three credentials found at build time, and per request the scope, the
 * canonical forms, the signature (vault_sigv4.c) and the header lines,
 * rendered into the arena: they name the key id and the session token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy_aws.h"
#include "util/text.h"
#include "vault/vault_int.h"
#include "vault/vault_sigv4.h"

/* What the signer writes, and so what the client's request loses. */
static const char *const aws_removed[VAULT_AWS_REMOVED] = {
    "authorization",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
};

#define AUTH_NAME "Authorization: "
/* The lines but the Authorization value and the token: names, date,
 * hash, separators. */
#define AWS_LINES_FIXED 200u

static const struct vault_cred *
find(const struct vault_cred *creds, size_t n, const char *name)
{
	size_t i;

	for (i = 0; name != NULL && i < n; i++)
		if (strcmp(creds[i].name, name) == 0)
			return &creds[i];
	return NULL;
}

int
vault_aws_bind(struct vault_bind *vb, const struct vault_cred *creds, size_t n,
    struct err *e)
{
	struct policy_binding_aws a;
	size_t i;

	if (!policy_binding_aws(vb->b, &a) ||
	    (vb->aws_id = find(creds, n, a.access_key_id)) == NULL ||
	    (vb->aws_secret = find(creds, n, a.secret_access_key)) == NULL ||
	    (a.session_token != NULL &&
	        (vb->aws_token = find(creds, n, a.session_token)) == NULL)) {
		err_set(e, "binding \"%s\": credential reference not found",
		    policy_binding_name(vb->b));
		return -1;
	}
	if (vb->aws_secret->len > VAULT_SIGV4_SECRET_MAX ||
	    vb->aws_id->len > VAULT_SIGV4_SECRET_MAX) {
		err_set(e,
		    "binding \"%s\": AWS key id and secret key must be at "
		    "most %u bytes",
		    policy_binding_name(vb->b), VAULT_SIGV4_SECRET_MAX);
		return -1;
	}
	vb->aws_region = a.region;
	vb->aws_service = a.service;
	for (i = 0; i < VAULT_AWS_REMOVED; i++) {
		if ((vb->lower[i] = strdup(aws_removed[i])) == NULL) {
			err_set(e, "out of memory");
			return -1;
		}
		vb->nlower++;
	}
	vb->render_len = VAULT_SIGV4_AUTH_MAX + AWS_LINES_FIXED +
	    (vb->aws_token != NULL ? vb->aws_token->len : 0);
	return 0;
}

bool
vault_aws_header_signed(const char *name, size_t n)
{
	size_t i;

	if ((n == 12 && strncasecmp(name, "content-type", n) == 0) ||
	    (n == 11 && strncasecmp(name, "content-md5", n) == 0))
		return true;
	if (n < 6 || strncasecmp(name, "x-amz-", 6) != 0)
		return false;
	for (i = 0; i < VAULT_AWS_REMOVED; i++)
		if (strlen(aws_removed[i]) == n &&
		    strncasecmp(aws_removed[i], name, n) == 0)
			return false;
	return true;
}

/* The scope of a request to name: the binding's, what it leaves out
 * from the name. False when neither says (the loader checked the
 * binding's hosts; a name below a wildcard host carries what its suffix
 * does). */
static bool
scope(
    const struct vault_bind *vb, const char *name, char *region, char *service)
{
	char r[POLICY_AWS_REGION_MAX + 1], s[POLICY_AWS_SERVICE_MAX + 1];
	bool derived = policy_aws_scope(name, r, s);

	if (vb->aws_region != NULL)
		memcpy(region, vb->aws_region, strlen(vb->aws_region) + 1);
	else if (derived)
		memcpy(region, r, strlen(r) + 1);
	else
		return false;
	if (vb->aws_service != NULL)
		memcpy(service, vb->aws_service, strlen(vb->aws_service) + 1);
	else if (derived)
		memcpy(service, s, strlen(s) + 1);
	else
		return false;
	return true;
}

bool
vault_aws_is_s3(const struct vault_inject *vi, const char *name)
{
	char region[POLICY_AWS_REGION_MAX + 1];
	char service[POLICY_AWS_SERVICE_MAX + 1];

	return vi->bind != NULL && vi->sign &&
	    scope(vi->bind, name, region, service) &&
	    strcmp(service, "s3") == 0;
}

static void
refuse(struct vault_inject *vi, int status, const char *reason)
{
	vi->decision = VAULT_REFUSED;
	vi->status = status;
	vi->reason = reason;
}

/* One "Name: value\r\n" at buf + *off. */
static void
line(char *buf, size_t *off, const char *name, const char *v, size_t n)
{
	size_t nl = strlen(name);

	memcpy(buf + *off, name, nl);
	memcpy(buf + *off + nl, ": ", 2);
	memcpy(buf + *off + nl + 2, v, n);
	memcpy(buf + *off + nl + 2 + n, "\r\n", 2);
	*off += nl + n + 4;
}

/* The lines after the Authorization value (at buf, off bytes written)
 * into vi. The buffer is render_len + 1 bytes of the arena. */
static void
render(struct vault_inject *vi, char *buf, size_t off, const char *date,
    const char *hash)
{
	const struct vault_cred *tok = vi->bind->aws_token;

	memcpy(buf + off, "\r\n", 2);
	off += 2;
	line(buf, &off, "X-Amz-Date", date, strlen(date));
	line(buf, &off, "X-Amz-Content-Sha256", hash, strlen(hash));
	if (tok != NULL)
		line(buf, &off, "X-Amz-Security-Token", tok->val, tok->len);
	buf[off] = '\0';
	vi->lines = buf;
	vi->lines_len = off;
}

/* The signer's input, but the headers, from vi and rq. */
struct aws_work {
	struct vault_sigv4_in in;
	struct vault_sigv4_hdr h[VAULT_SIGV4_HEADERS_MAX];
	char region[POLICY_AWS_REGION_MAX + 1];
	char service[POLICY_AWS_SERVICE_MAX + 1];
	char date[17],
	    hash[sizeof(VAULT_SIGV4_UNSIGNED_TRAILER) + VAULT_SIGV4_HASH_LEN];
	char *uri;
	size_t uri_len;
};

/* The canonical path and query; S3's path is forwarded in its canonical
 * form. 0; 1 refused; -1 out of memory. */
static int
canonical(struct aws_work *w, struct vault_inject *vi,
    const struct vault_aws_req *rq, struct err *e)
{
	bool s3 = strcmp(w->service, "s3") == 0;
	struct err ce;

	if (vi->norm_path == NULL || vi->norm_path_len == 0 ||
	    vi->norm_path[0] != '/' ||
	    (rq->query != NULL && rq->query_len > VAULT_SIGV4_QUERY_MAX))
		return 1;
	if (vault_sigv4_uri(vi->norm_path, vi->norm_path_len, s3, &w->uri,
	        &w->uri_len, &ce) == -1)
		return -1;
	if (vault_sigv4_query(rq->query, rq->query_len, &vi->query,
	        &vi->query_len, &ce) == -1)
		return strcmp(ce.msg, "out of memory") == 0 ? -1 : 1;
	if (s3) {
		free(vi->norm_path);
		if ((vi->norm_path = strdup(w->uri)) == NULL) {
			err_set(e, "out of memory");
			vi->norm_path_len = 0;
			return -1;
		}
		vi->norm_path_len = w->uri_len;
	}
	return 0;
}

/* The headers signed: the client's, then egressd's own. */
static void
headers(struct aws_work *w, const struct vault_inject *vi,
    const struct vault_aws_req *rq)
{
	const struct vault_cred *tok = vi->bind->aws_token;
	size_t n = rq->nh;

	if (n > 0)
		memcpy(w->h, rq->h, n * sizeof(*w->h));
	w->h[n++] =
	    (struct vault_sigv4_hdr){"host", 4, rq->host, strlen(rq->host)};
	w->h[n++] = (struct vault_sigv4_hdr){"x-amz-date", 10, w->date, 16};
	w->h[n++] = (struct vault_sigv4_hdr){
	    "x-amz-content-sha256", 20, w->hash, strlen(w->hash)};
	if (tok != NULL)
		w->h[n++] = (struct vault_sigv4_hdr){
		    "x-amz-security-token", 20, tok->val, tok->len};
	w->in.h = w->h;
	w->in.nh = n;
}

int
vault_aws_sign(struct vault *v, struct vault_inject *vi,
    const struct vault_aws_req *rq, struct err *e)
{
	struct aws_work *w;
	char *buf;
	size_t alen = 0;
	struct err se;
	int rc = 0;

	if (vi->decision != VAULT_INJECTED || !vi->sign || vi->bind == NULL)
		return 0;
	if (rq->nh > VAULT_SIGV4_HEADERS_MAX - VAULT_AWS_REMOVED) {
		refuse(vi, 400, "too many x-amz headers to sign");
		return 0;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	if (!scope(vi->bind, rq->name, w->region, w->service)) {
		refuse(vi, 403, "no AWS region and service for this host");
		goto out;
	}
	if ((rc = canonical(w, vi, rq, e)) != 0) {
		if (rc == 1)
			refuse(vi, 400, "request not signable");
		else
			err_set(e, "out of memory");
		rc = rc == 1 ? 0 : -1;
		goto out;
	}
	vault_sigv4_date(rq->now, w->date);
	if (rq->payload != NULL)
		(void)snprintf(w->hash, sizeof(w->hash), "%s", rq->payload);
	else
		vault_sigv4_hash(
		    rq->body != NULL ? rq->body : "", rq->blen, w->hash);
	w->in.method = rq->method;
	w->in.method_len = rq->method_len;
	w->in.uri = w->uri;
	w->in.uri_len = w->uri_len;
	w->in.query = vi->query;
	w->in.query_len = vi->query_len;
	w->in.payload_hash = w->hash;
	w->in.amz_date = w->date;
	w->in.region = w->region;
	w->in.service = w->service;
	w->in.key_id = (const uint8_t *)vi->bind->aws_id->val;
	w->in.key_id_len = vi->bind->aws_id->len;
	w->in.secret = (const uint8_t *)vi->bind->aws_secret->val;
	w->in.secret_len = vi->bind->aws_secret->len;
	headers(w, vi, rq);
	/* signed straight into the lines' buffer: one arena block per
	 * injection in flight, as the arena is sized for */
	if ((buf = secmem_alloc(v->arena, vi->bind->render_len + 1)) == NULL) {
		err_set(e, "secret arena full (too many injections in flight)");
		rc = -1;
		goto out;
	}
	memcpy(buf, AUTH_NAME, sizeof(AUTH_NAME) - 1);
	if (vault_sigv4_sign(&w->in, buf + sizeof(AUTH_NAME) - 1,
	        VAULT_SIGV4_AUTH_MAX, &alen, &se) == -1) {
		/* a header the HTTP parser let through but SigV4 cannot
		 * carry: refused, its text is ours (never a value) */
		secmem_free(v->arena, buf);
		refuse(vi, 400, "request not signable");
		goto out;
	}
	render(vi, buf, sizeof(AUTH_NAME) - 1 + alen, w->date, w->hash);
out:
	free(w->uri);
	free(w);
	return rc;
}
