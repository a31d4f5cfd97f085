/*
 * The Credential Vault on a request: inject, substitute, rewrite.
 */
#include <event2/buffer.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/now.h"
#include "util/secmem.h"
#include "policy/policy_apicreds.h"
#include "vault/vault_sigv4.h"
#include "egressd/proxy/proxy_int.h"
#include "egressd/proxy/proxy_vault.h"

static int proxy_subst_gather(struct proxy_conn *c, struct http_head *h,
    struct evbuffer *in, size_t end, const char **body, size_t *blen,
    uint64_t *wire, uint8_t **dec, size_t *wait, struct err *e);

/* --- the Credential Vault on HTTP ------------------------------------------ */

static void
proxy_wipe_cleanup(const void *data, size_t len, void *arg)
{
	/* arg is data, without the const libevent gives it */
	(void)data;
	secmem_wipe(arg, len);
	free(arg);
}

static void
proxy_log_inject(struct proxy_conn *c, const struct vault_inject *vi,
    const struct http_head *h, const char *name, const struct vault *v)
{
	static const char *const names[] = {
	    "no_match", "injected", "ambiguous", "refused", "mint"};
	char m[HTTP_METHOD_MAX + 1];
	size_t ml =
	    h->method.n < HTTP_METHOD_MAX ? h->method.n : HTTP_METHOD_MAX;

	memcpy(m, h->method.p, ml);
	m[ml] = '\0';
	if ((unsigned)vi->decision < 4) {
		c->p->st.vault_decisions[vi->decision]++;
		if (vi->binding != NULL)
			proxy_mint_row(&c->p->st, vi->binding)
			    ->decisions[vi->decision]++;
	}
	/* revision: the policy snapshot's; vault_revision: the API vault's
	 * (0 when the decision came from the operator's file alone). */
	log_info(c->p->log, "vault.inject",
	    LOG_S("decision",
	        (unsigned)vi->decision < 5 ? names[vi->decision] : "?"),
	    LOG_S("reason", vi->reason),
	    LOG_S("binding", vi->binding != NULL ? vi->binding : ""),
	    LOG_U("revision", vault_policy(v)->revision),
	    LOG_U("vault_revision", policy_apicreds_revision(vault_policy(v))),
	    LOG_S("host", name), LOG_U("port", c->dport), LOG_S("method", m),
	    LOG_S("path", vi->norm_path != NULL ? vi->norm_path : ""));
}

/* Adds the secret piece p[0..n) (malloc'd; taken) to out: wiped and
 * freed once sent, or when out is freed unsent. -1: out of memory. */
static int
proxy_add_secret(struct evbuffer *out, uint8_t *p, size_t n)
{
	if (evbuffer_add_reference(out, p, n, proxy_wipe_cleanup, p) == -1) {
		proxy_wipe_cleanup(p, n, p);
		return -1;
	}
	return 0;
}

/*
 * A request being rewritten, flat: plain pieces and secret ones (the
 * credential lines, substituted values, a body) in one allocation, which
 * goes to the origin as one wiped piece (proxy_wbuf_send): one TLS record
 * and one write for a head. Growing copies to a new allocation and wipes
 * the old one (realloc could leave a copy behind); wiped when freed.
 */
struct proxy_wbuf {
	uint8_t *p;
	size_t len, cap;
};

static void
proxy_wbuf_free(struct proxy_wbuf *w)
{
	if (w->p != NULL) {
		secmem_wipe(w->p, w->len);
		free(w->p);
	}
	w->p = NULL;
	w->len = w->cap = 0;
}

/* Room for n more bytes. 0; -1 out of memory (w as it was). */
static int
proxy_wbuf_room(struct proxy_wbuf *w, size_t n)
{
	size_t cap = w->cap > 0 ? w->cap : 512;
	uint8_t *np;

	if (w->cap - w->len >= n)
		return 0;
	if (n > SIZE_MAX / 4 - w->len)
		return -1;
	while (cap - w->len < n)
		cap *= 2;
	if ((np = malloc(cap)) == NULL)
		return -1;
	if (w->len > 0)
		memcpy(np, w->p, w->len);
	if (w->p != NULL) {
		secmem_wipe(w->p, w->len);
		free(w->p);
	}
	w->p = np;
	w->cap = cap;
	return 0;
}

/* Appends d[0..n). 0; -1 out of memory. */
static int
proxy_wbuf_add(struct proxy_wbuf *w, const void *d, size_t n)
{
	if (n == 0)
		return 0;
	if (w->cap - w->len < n && proxy_wbuf_room(w, n) == -1)
		return -1;
	memcpy(w->p + w->len, d, n);
	w->len += n;
	return 0;
}

/* w to out (taken: wiped once sent). -1: out of memory (w freed). */
static int
proxy_wbuf_send(struct evbuffer *out, struct proxy_wbuf *w)
{
	uint8_t *p = w->p;
	size_t n = w->len;

	if (n == 0) {
		proxy_wbuf_free(w);
		return 0;
	}
	w->p = NULL;
	w->len = w->cap = 0;
	return proxy_add_secret(out, p, n);
}

/* Why a rewrite was refused: fixed text for the log and the decision. */
struct proxy_subst_refusal {
	int status;
	const char *reason;
};

/*
 * in[0..n), a piece of surface s, to out with its placeholders
 * substituted (vault_subst); *budget is what substitutions may still
 * produce and shrinks by what they did. 0; -1 refused (*r); -2 out of
 * memory.
 */
static int
proxy_add_subst(struct proxy_wbuf *out, struct vault *v,
    const struct vault_inject *vi, enum vault_surface s, const char *in,
    size_t n, size_t *budget, struct proxy_subst_refusal *r)
{
	uint8_t *res;
	size_t len;
	struct err e;
	int rc;

	switch (vault_subst(v, vi, s, in, n, *budget, &res, &len, &e)) {
	case VAULT_SUBST_NONE:
		return proxy_wbuf_add(out, in, n) == 0 ? 0 : -2;
	case VAULT_SUBST_DONE:
		*budget -= len;
		rc = proxy_wbuf_add(out, res, len) == 0 ? 0 : -2;
		vault_subst_free(res, len);
		return rc;
	case VAULT_SUBST_REFUSED:
		r->status = 400;
		r->reason = "a substituted header value holds CR, LF or NUL";
		return -1;
	case VAULT_SUBST_TOO_LARGE:
		r->status = s == VAULT_SURFACE_JSON || s == VAULT_SURFACE_FORM
		    ? 413
		    : 431;
		r->reason = "placeholder substitution too large";
		return -1;
	case VAULT_SUBST_NOMEM:
		break;
	}
	return -2;
}

/*
 * The body surface of an injected request h: a Content-Length body of 1
 * to VAULT_SUBST_BODY_MAX bytes, or a chunked one (its size is known
 * once it is all here: proxy_subst_gather), with one Content-Type, at
 * most one Content-Encoding (vault_subst_body_surface decides on them),
 * when the binding substitutes in bodies. NONE: the body is forwarded as
 * it comes.
 */
static enum vault_surface
proxy_subst_body(const struct http_head *h, const struct vault_inject *vi)
{
	const struct http_span *ct, *ce;
	size_t nct, nce;

	if (!(vi->subst_in & POLICY_SUBST_BODY))
		return VAULT_SURFACE_NONE;
	if (h->body != HTTP_BODY_CHUNKED &&
	    (h->body != HTTP_BODY_LENGTH || h->content_length == 0 ||
	        h->content_length > VAULT_SUBST_BODY_MAX))
		return VAULT_SURFACE_NONE;
	ct = http_header_get(h, "content-type", &nct);
	ce = http_header_get(h, "content-encoding", &nce);
	if (nct != 1 || nce > 1)
		return VAULT_SURFACE_NONE;
	return vault_subst_body_surface(
	    ct->p, ct->n, ce != NULL ? ce->p : NULL, ce != NULL ? ce->n : 0);
}

/* The request line of a rewrite: method, path and query (their
 * placeholders substituted), version. The codes of proxy_vault_rewrite. */
static int
proxy_rewrite_line(struct proxy_wbuf *tmp, struct vault *v,
    const struct vault_inject *vi, const struct http_head *h, size_t *budget,
    struct proxy_subst_refusal *r)
{
	int rc;

	if (proxy_wbuf_add(tmp, h->method.p, h->method.n) == -1 ||
	    proxy_wbuf_add(tmp, " ", 1) == -1)
		return -2;
	if ((rc = proxy_add_subst(tmp, v, vi, VAULT_SURFACE_PATH, vi->norm_path,
	         vi->norm_path_len, budget, r)) != 0)
		return rc;
	if (vi->query != NULL) {
		/* signed (awsSigV4): the canonical query, what was signed */
		if (vi->query_len > 0 &&
		    (proxy_wbuf_add(tmp, "?", 1) == -1 ||
		        proxy_wbuf_add(tmp, vi->query, vi->query_len) == -1))
			return -2;
	} else if (h->has_query) {
		if (proxy_wbuf_add(tmp, "?", 1) == -1)
			return -2;
		if ((rc = proxy_add_subst(tmp, v, vi, VAULT_SURFACE_QUERY,
		         h->query.p, h->query.n, budget, r)) != 0)
			return rc;
	}
	if (proxy_wbuf_add(tmp,
	        h->minor == 0 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n", 11) == -1)
		return -2;
	return 0;
}

/* Whether header field i of h stays out of a rewrite (rebody: the body
 * is rewritten, with a Content-Length of its own). */
static bool
proxy_rewrite_drops(struct proxy_conn *c, const struct http_head *h, size_t i,
    const struct vault_inject *vi, bool rebody)
{
	const struct http_header *f = &h->h[i];

	return proxy_http_header_removed(&f->name, vi) ||
	    (int)i == proxy_http_close_field(c, h) ||
	    (c->vault.cont_sent && http_span_ieq(&f->name, "expect")) ||
	    (rebody &&
	        (http_span_ieq(&f->name, "content-length") ||
	            http_span_ieq(&f->name, "transfer-encoding") ||
	            http_span_ieq(&f->name, "trailer")));
}

/* One header field f of a rewrite, its placeholders substituted where
 * the binding allows it. The codes of proxy_vault_rewrite. */
static int
proxy_rewrite_field(struct proxy_conn *c, struct proxy_wbuf *tmp,
    struct vault *v, const struct vault_inject *vi, const struct http_header *f,
    const char *name, size_t *budget, struct proxy_subst_refusal *r)
{
	char port[8];
	int rc;

	if (proxy_wbuf_add(tmp, f->name.p, f->name.n) == -1 ||
	    proxy_wbuf_add(tmp, ": ", 2) == -1)
		return -2;
	if (http_span_ieq(&f->name, "host")) {
		/* the name the binding matched (and the origin was verified
		 * for), not the client's spelling of it: "A.TEST." may be
		 * another host to the origin */
		rc = proxy_wbuf_add(tmp, name, strlen(name)) == 0 ? 0 : -2;
		if (rc == 0 && c->dport != (c->tls.term ? 443 : 80) &&
		    proxy_wbuf_add(tmp, port,
		        (size_t)snprintf(port, sizeof(port), ":%u",
		            (unsigned)c->dport)) == -1)
			rc = -2;
	} else if ((vi->subst_in & POLICY_SUBST_HEADER) &&
	    vault_subst_header_ok(f->name.p, f->name.n))
		rc = proxy_add_subst(tmp, v, vi, VAULT_SURFACE_HEADER,
		    f->value.p, f->value.n, budget, r);
	else
		rc = proxy_wbuf_add(tmp, f->value.p, f->value.n) == 0 ? 0 : -2;
	if (rc != 0)
		return rc;
	return proxy_wbuf_add(tmp, "\r\n", 2) == -1 ? -2 : 0;
}

/* The end of a rewritten head: the Content-Length of a rewritten body
 * (rebody, nblen bytes), Accept-Encoding, the credential lines. 0; -2
 * out of memory. */
static int
proxy_rewrite_tail(struct proxy_wbuf *tmp, const struct vault_inject *vi,
    bool rebody, size_t nblen)
{
	char cl[48];

	if (rebody &&
	    proxy_wbuf_add(tmp, cl,
	        (size_t)snprintf(
	            cl, sizeof(cl), "Content-Length: %zu\r\n", nblen)) == -1)
		return -2;
	if (proxy_wbuf_add(tmp, "Accept-Encoding: identity\r\n", 27) == -1)
		return -2;
	/* the credential: into the piece that is wiped once sent */
	if (proxy_wbuf_add(tmp, vi->lines, vi->lines_len) == -1)
		return -2;
	return proxy_wbuf_add(tmp, "\r\n", 2) == -1 ? -2 : 0;
}

/*
 * The request of an injected decision, rewritten into tmp (one flat
 * piece, wiped once sent or freed): the request
 * line with the normalized path and the query, the client's headers (Host
 * as name, the normalized host the binding matched) but
 * those vi removes and Accept-Encoding (and Expect when egressd answered
 * it, Content-Length, Transfer-Encoding and Trailer when the body is
 * rewritten: it goes with a Content-Length), "Accept-Encoding:
 * identity", the credential lines, then the body body[0..blen) of
 * surface bs when a placeholder occurs in it (*body_done). Path, query,
 * header values and body have their placeholders substituted. 0; -1
 * refused (*r); -2 out of memory.
 */
static int
proxy_vault_rewrite(struct proxy_conn *c, struct proxy_wbuf *tmp,
    struct vault *v, const struct vault_inject *vi, const struct http_head *h,
    const char *name, enum vault_surface bs, const char *body, size_t blen,
    bool *body_done, struct proxy_subst_refusal *r)
{
	size_t budget = VAULT_SUBST_HEAD_MAX, nblen = 0, i;
	uint8_t *nb = NULL;
	struct err e;
	int rc = 0;

	*body_done = false;
	if (vi->sign && body != NULL) {
		/* the body that was hashed goes whole, with a Content-Length
		 * of its own (a chunked one decoded) */
		if ((nb = malloc(blen > 0 ? blen : 1)) == NULL)
			return -2;
		memcpy(nb, body, blen);
		nblen = blen;
	} else if (bs != VAULT_SURFACE_NONE) {
		switch (vault_subst(v, vi, bs, body, blen,
		    VAULT_SUBST_BODY_OUT_MAX, &nb, &nblen, &e)) {
		case VAULT_SUBST_NONE:
		case VAULT_SUBST_DONE:
			break;
		case VAULT_SUBST_REFUSED:
		case VAULT_SUBST_TOO_LARGE:
			r->status = 413;
			r->reason = "placeholder substitution too large";
			return -1;
		case VAULT_SUBST_NOMEM:
			return -2;
		}
	}
	if ((rc = proxy_rewrite_line(tmp, v, vi, h, &budget, r)) != 0)
		goto out;
	for (i = 0; i < h->nh; i++) {
		if (proxy_rewrite_drops(c, h, i, vi, nb != NULL))
			continue;
		if ((rc = proxy_rewrite_field(
		         c, tmp, v, vi, &h->h[i], name, &budget, r)) != 0)
			goto out;
	}
	if ((rc = proxy_rewrite_tail(tmp, vi, nb != NULL, nblen)) != 0)
		goto out;
	if (nb != NULL) {
		rc = proxy_wbuf_add(tmp, nb, nblen) == 0 ? 0 : -2;
		*body_done = rc == 0;
	}
out:
	vault_subst_free(nb, nblen);
	return rc;
}

/*
 * A chunked body held for substitution: the framing of the first lim
 * bytes of in after the head (end bytes), scanned from where the last
 * call stopped, in place. DONE: its end is in (sub_scan bytes after the
 * head); AGAIN: not yet; DATA: more than VAULT_SUBST_BODY_MAX body bytes;
 * BAD: malformed (e). An answer once given stays. The state lives in c
 * until the request is decided (proxy_req_pump resets it).
 */
static enum http_chunk_rc
proxy_subst_scan(struct proxy_conn *c, struct evbuffer *in, size_t end,
    size_t lim, struct err *e)
{
	size_t used;

	if (!c->vault.sub_scanning) {
		http_chunk_init(&c->vault.sub_ch);
		c->vault.sub_scan = 0;
		c->vault.sub_rc = HTTP_CHUNK_AGAIN;
		c->vault.sub_scanning = true;
	}
	if (c->vault.sub_rc == HTTP_CHUNK_AGAIN && c->vault.sub_scan < lim) {
		c->vault.sub_rc = proxy_http_chunk_scan(&c->vault.sub_ch, in,
		    end + (size_t)c->vault.sub_scan,
		    lim - (size_t)c->vault.sub_scan, VAULT_SUBST_BODY_MAX,
		    &used, e);
		c->vault.sub_scan += used;
	}
	return c->vault.sub_rc;
}

/*
 * Is the body held for substitution (proxy_req_pump, c->vault.hold_end) all
 * here, or past what is held for it, so the request can be judged again?
 * len: what in holds.
 */
bool
proxy_vault_hold_ready(struct proxy_conn *c, struct evbuffer *in, size_t len)
{
	struct err e;
	size_t lim;

	if (!c->vault.sub_scanning)
		return len >= c->vault.hold_wait;
	lim = len - c->vault.hold_end;
	if (lim > PROXY_SUBST_WIRE_MAX)
		lim = PROXY_SUBST_WIRE_MAX;
	return proxy_subst_scan(c, in, c->vault.hold_end, lim, &e) !=
	    HTTP_CHUNK_AGAIN ||
	    lim == PROXY_SUBST_WIRE_MAX;
}

/*
 * The body of an injected request h (end bytes of head at the start of
 * in) that is to be substituted, when all of it is here: *body, *blen
 * (a chunked one decoded into *dec, which the caller frees) and *wire,
 * the bytes of in after the head it takes. 0: here; 1: not substituted
 * after all, forwarded as it comes (a chunked body over
 * VAULT_SUBST_BODY_MAX, framed in more than PROXY_SUBST_WIRE_MAX bytes,
 * or with a trailer section); 2: not all here, call again once in holds
 * *wait bytes (a client's "Expect: 100-continue" answered); -1:
 * malformed chunked framing (e); -2: out of memory. When in is pulled up,
 * h is parsed again (its spans point into in's new first chain).
 */
static int
proxy_subst_gather(struct proxy_conn *c, struct http_head *h,
    struct evbuffer *in, size_t end, const char **body, size_t *blen,
    uint64_t *wire, uint8_t **dec, size_t *wait, struct err *e)
{
	size_t len = evbuffer_get_length(in), need, w;
	bool chunked = h->body == HTTP_BODY_CHUNKED;
	const char *buf;

	*dec = NULL;
	if (chunked) {
		size_t lim = len - end < PROXY_SUBST_WIRE_MAX
		    ? len - end
		    : PROXY_SUBST_WIRE_MAX;

		switch (proxy_subst_scan(c, in, end, lim, e)) {
		case HTTP_CHUNK_DONE:
			break;
		case HTTP_CHUNK_AGAIN:
			if (lim < PROXY_SUBST_WIRE_MAX)
				goto wait; /* more to come */
			return 1; /* framed in too many bytes */
		case HTTP_CHUNK_DATA: /* over VAULT_SUBST_BODY_MAX */
			return 1;
		case HTTP_CHUNK_BAD:
			return -1;
		}
		need =
		    end + (size_t)c->vault.sub_scan; /* up to the body's end */
	} else
		need = end + (size_t)h->content_length;
	if (len >= need) {
		if ((buf = (const char *)evbuffer_pullup(
		         in, (ev_ssize_t)need)) == NULL)
			return -2;
		if (http_parse_request(buf, end, h, e) != HTTP_HEAD_OK)
			return -2; /* parsed before: cannot happen */
		if (!chunked) {
			*body = buf + end;
			*blen = *wire = (size_t)h->content_length;
			return 0;
		}
		/* all here: decoded in one more pass */
		switch (http_chunk_collect((const uint8_t *)buf + end,
		    need - end, VAULT_SUBST_BODY_MAX, dec, blen, &w, e)) {
		case HTTP_CHUNK_COLLECT_DONE:
			*body = (const char *)*dec;
			*wire = w;
			return 0;
		case HTTP_CHUNK_COLLECT_AGAIN: /* the scan said done */
		case HTTP_CHUNK_COLLECT_SKIP:
			return 1;
		case HTTP_CHUNK_COLLECT_BAD:
			return -1;
		case HTTP_CHUNK_COLLECT_NOMEM:
			return -2;
		}
		return -2;
	}
wait:
	if (chunked)
		need = end + PROXY_SUBST_WIRE_MAX;
	/* decided again when the body is here */
	if (h->expect_continue && c->relay.rq_n == 0 && !c->vault.cont_sent) {
		c->vault.cont_sent = true;
		if (evbuffer_add(bufferevent_get_output(c->cli),
		        "HTTP/1.1 100 Continue\r\n\r\n", 25) == -1)
			return -2;
	}
	*wait = need;
	return 2;
}

/* What the vault decides on: the request h to name, as the binding
 * matcher sees it. */
static void
proxy_vault_req_fill(struct proxy_conn *c, const struct http_head *h,
    const char *name, struct vault_req *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->scheme = c->tls.term ? POLICY_SCHEME_HTTPS : POLICY_SCHEME_HTTP;
	rq->host = name;
	rq->port = c->dport;
	rq->method = h->method.p;
	rq->method_len = h->method.n;
	rq->query = h->query.p;
	rq->query_len = h->query.n;
	if (h->form == HTTP_TARGET_ORIGIN || h->form == HTTP_TARGET_ABSOLUTE) {
		rq->path = h->path.p != NULL ? h->path.p : "/";
		rq->path_len = h->path.p != NULL ? h->path.n : 1;
	} else {
		rq->path = "*";
		rq->path_len = 1;
	}
}

/* Why a signed request is refused: fixed text. */
static int
proxy_sigv4_refuse(struct proxy_subst_refusal *r, int status, const char *why)
{
	r->status = status;
	r->reason = why;
	return -1;
}

/* How a signed request's body is framed for AWS. */
enum proxy_aws_body {
	PROXY_AWS_PLAIN, /* a body: hashed, or UNSIGNED-PAYLOAD */
	PROXY_AWS_UNSIGNED_TRAILER, /* aws-chunked, chunks unsigned (S3) */
	PROXY_AWS_SIGNED_CHUNKS, /* aws-chunked with chunk signatures */
};

/* STREAMING-UNSIGNED-PAYLOAD-TRAILER (newer SDKs' S3 uploads with a
 * trailing checksum) carries no signature in its chunks: it passes to S3
 * over TLS with the literal as the payload hash. Every other streaming
 * form signs each chunk from the seed signature egressd replaces, and
 * re-framing the body is beyond this signer: refused. */
static enum proxy_aws_body
proxy_sigv4_body_kind(const struct http_head *h)
{
	static const char ut[] = VAULT_SIGV4_UNSIGNED_TRAILER;
	const struct http_span *sha, *ce;
	bool chunked_enc = false;
	size_t i, nsha = 0;

	sha = http_header_get(h, "x-amz-content-sha256", &nsha);
	for (i = 0; i < h->nh; i++) {
		ce = &h->h[i].value;
		if (http_span_ieq(&h->h[i].name, "content-encoding") &&
		    ce->n >= 11 &&
		    memmem(ce->p, ce->n, "aws-chunked", 11) != NULL)
			chunked_enc = true;
	}
	if (nsha > 1)
		return PROXY_AWS_SIGNED_CHUNKS;
	if (sha != NULL && sha->n == sizeof(ut) - 1 &&
	    memcmp(sha->p, ut, sizeof(ut) - 1) == 0)
		return PROXY_AWS_UNSIGNED_TRAILER;
	if ((sha != NULL && sha->n >= 10 &&
	        memcmp(sha->p, "STREAMING-", 10) == 0) ||
	    chunked_enc)
		return PROXY_AWS_SIGNED_CHUNKS;
	return PROXY_AWS_PLAIN;
}

/*
 * The payload of a signed request h: *body and *blen when it is hashed
 * (held whole, as proxy_subst_gather does for substitutions; NULL for
 * none), or *payload, the literal signed instead, only for S3 over TLS:
 * UNSIGNED-PAYLOAD for a body over VAULT_AWS_BODY_MAX, S3's unsigned
 * aws-chunked form as it came (the body then flows as it comes). The
 * codes of proxy_sigv4.
 */
static int
proxy_sigv4_payload(struct proxy_conn *c, struct http_head *h, bool s3,
    struct evbuffer *in, size_t end, const char **body, size_t *blen,
    uint64_t *wire, uint8_t **dec, size_t *wait, const char **payload,
    struct proxy_subst_refusal *r)
{
	struct err e = {""};
	bool may_skip = s3 && c->tls.term;
	int rc;

	*payload = NULL;
	switch (proxy_sigv4_body_kind(h)) {
	case PROXY_AWS_PLAIN:
		break;
	case PROXY_AWS_UNSIGNED_TRAILER:
		if (!may_skip)
			return proxy_sigv4_refuse(
			    r, 400, "aws-chunked payload only to S3 over TLS");
		*payload = VAULT_SIGV4_UNSIGNED_TRAILER;
		return 0;
	case PROXY_AWS_SIGNED_CHUNKS:
		return proxy_sigv4_refuse(r, 400,
		    "aws-chunked signed payload not supported: egressd signs "
		    "whole payloads");
	}
	if (h->body == HTTP_BODY_NONE ||
	    (h->body == HTTP_BODY_LENGTH && h->content_length == 0))
		return 0;
	if (h->body == HTTP_BODY_LENGTH &&
	    h->content_length > VAULT_AWS_BODY_MAX) {
		if (!may_skip)
			return proxy_sigv4_refuse(
			    r, 413, "request body too large to sign");
		*payload = VAULT_SIGV4_UNSIGNED;
		return 0;
	}
	if (h->body != HTTP_BODY_LENGTH && h->body != HTTP_BODY_CHUNKED)
		return proxy_sigv4_refuse(r, 400, "request not signable");
	rc = proxy_subst_gather(c, h, in, end, body, blen, wire, dec, wait, &e);
	if (rc == 1) {
		/* chunked beyond the bound, or with a trailer section */
		*body = NULL;
		if (!may_skip)
			return proxy_sigv4_refuse(
			    r, 413, "request body too large to sign");
		*payload = VAULT_SIGV4_UNSIGNED;
		return 0;
	}
	return rc == -1 ? -3 : rc;
}

/*
 * VAULT_INJECTED with vi->sign (awsSigV4): the payload held and hashed
 * (or UNSIGNED-PAYLOAD), the request signed as it will be forwarded
 * (vault_aws_sign: vi gets its lines, its canonical query, and for S3 its
 * canonical path). 0: signed, *body (NULL: none held) goes as a rebody;
 * 2: the body is not all here (*wait); -1 refused (*r); -2 out of memory;
 * -3 the body's framing is bad.
 */
static int
proxy_sigv4(struct proxy_conn *c, struct vault *v, struct vault_inject *vi,
    struct http_head *h, const char *name, struct evbuffer *in, size_t end,
    const char **body, size_t *blen, uint64_t *wire, uint8_t **dec,
    size_t *wait, struct proxy_subst_refusal *r)
{
	struct vault_sigv4_hdr sh[VAULT_SIGV4_HEADERS_MAX];
	char host[POLICY_NAME_MAX + 8];
	struct vault_aws_req rq;
	struct err e = {""};
	size_t i;
	int rc;

	memset(&rq, 0, sizeof(rq));
	rc = proxy_sigv4_payload(c, h, vault_aws_is_s3(vi, name), in, end, body,
	    blen, wire, dec, wait, &rq.payload, r);
	if (rc != 0)
		return rc;
	/* the Host the rewrite writes (proxy_rewrite_field) */
	if (c->dport == (c->tls.term ? 443 : 80))
		(void)snprintf(host, sizeof(host), "%s", name);
	else
		(void)snprintf(
		    host, sizeof(host), "%s:%u", name, (unsigned)c->dport);
	for (i = 0; i < h->nh; i++) {
		const struct http_header *f = &h->h[i];

		if (proxy_http_header_removed(&f->name, vi) ||
		    !vault_aws_header_signed(f->name.p, f->name.n))
			continue;
		if (rq.nh == VAULT_SIGV4_HEADERS_MAX)
			return proxy_sigv4_refuse(
			    r, 400, "too many x-amz headers to sign");
		sh[rq.nh++] = (struct vault_sigv4_hdr){
		    f->name.p, f->name.n, f->value.p, f->value.n};
	}
	rq.h = sh;
	rq.host = host;
	rq.name = name;
	rq.method = h->method.p;
	rq.method_len = h->method.n;
	rq.query = h->has_query ? h->query.p : NULL;
	rq.query_len = h->has_query ? h->query.n : 0;
	rq.body = *body != NULL ? (const void *)*body : "";
	rq.blen = *body != NULL ? *blen : 0;
	rq.now = (int64_t)(now_wall_ms() / 1000);
	if (vault_aws_sign(v, vi, &rq, &e) == -1)
		return -2;
	if (vi->decision != VAULT_INJECTED)
		return proxy_sigv4_refuse(r, vi->status, vi->reason);
	return 0;
}

/*
 * VAULT_INJECTED: the request (h, end bytes of in) rewritten with vi's
 * credential, its body's placeholders substituted, goes to the origin.
 * 1: sent, *body_taken bytes of body with it; 2: its body is not all
 * here (*wait); -1: refused (*r); -3: its body's framing is bad; -2:
 * out of memory.
 */
static int
proxy_vault_send(struct proxy_conn *c, struct vault *v, struct vault_inject *vi,
    struct http_head *h, const char *name, struct evbuffer *in, size_t end,
    uint64_t *body_taken, size_t *wait, struct proxy_subst_refusal *r)
{
	struct err e = {""};
	enum vault_surface bs = VAULT_SURFACE_NONE;
	struct proxy_wbuf tmp = {NULL, 0, 0};
	const char *body = NULL;
	size_t blen = 0;
	uint64_t wire = 0;
	uint8_t *dec = NULL;
	bool body_done;
	int rc = 0;

	if (vi->sign) {
		rc = proxy_sigv4(c, v, vi, h, name, in, end, &body, &blen,
		    &wire, &dec, wait, r);
		if (rc != 0)
			goto out;
	} else if ((bs = proxy_subst_body(h, vi)) != VAULT_SURFACE_NONE) {
		rc = proxy_subst_gather(
		    c, h, in, end, &body, &blen, &wire, &dec, wait, &e);
		if (rc == -1)
			rc = -3;
		if (rc == 2 || rc == -2 || rc == -3)
			goto out;
		if (rc == 1)
			bs = VAULT_SURFACE_NONE;
	}
	/* the head rewritten is about the size it came, and one more
	 * allocation is rare */
	if (proxy_wbuf_room(&tmp, end + vi->lines_len + blen + 256) == -1) {
		rc = -2;
		goto out;
	}
	rc = proxy_vault_rewrite(
	    c, &tmp, v, vi, h, name, bs, body, blen, &body_done, r);
	if (rc == 0 &&
	    proxy_wbuf_send(bufferevent_get_output(c->up), &tmp) == -1)
		rc = -2;
	proxy_wbuf_free(&tmp); /* wipes what did not go */
	if (rc == 0) {
		*body_taken = body_done ? wire : 0;
		c->up_bytes += end + *body_taken;
		c->last_ms = now_mono_ms();
		c->p->st.injected++;
		rc = 1;
	}
out:
	free(dec);
	return rc;
}

/* VAULT_INJECTED, the codes of proxy_vault_request: the secret goes
 * only to an address its host resolved to, then with the request. */
static int
proxy_vault_injected(struct proxy_conn *c, struct vault *v,
    struct vault_inject *vi, struct http_head *h, const char *name,
    struct evbuffer *in, size_t end, struct vault **used, uint64_t *body_taken,
    size_t *wait, int *status, enum proxy_reason *why)
{
	struct proxy_subst_refusal r = {0, NULL};
	int rc;

	if (c->p->h.learned == NULL ||
	    !c->p->h.learned(c->p->h.arg, name, &c->dst)) {
		/* the connection may be allowed (an IP rule), but the secret
		 * goes only where its host resolved */
		vi->decision = VAULT_REFUSED;
		vi->status = 421;
		vi->reason = "address not resolved from the host";
		proxy_log_inject(c, vi, h, name, v);
		*status = 421;
		*why = PROXY_VAULT_MISROUTED;
		return -1;
	}
	rc = proxy_vault_send(c, v, vi, h, name, in, end, body_taken, wait, &r);
	if (rc == -3) {
		*status = 400;
		*why = PROXY_BAD_REQUEST;
		return -1;
	}
	if (rc == -1) {
		vi->decision = VAULT_REFUSED;
		vi->status = r.status;
		vi->reason = r.reason;
		proxy_log_inject(c, vi, h, name, v);
		*status = r.status;
		*why = PROXY_VAULT_REFUSED;
	} else if (rc == 1) {
		*used = vault_ref(v);
		proxy_log_inject(c, vi, h, name, v);
	}
	return rc;
}

/* vault_host_bound(v, name, c's port), kept for the connection's own
 * name (every request of a terminated one) until the revision changes. */
static bool
proxy_vault_bound(struct proxy_conn *c, struct vault *v, const char *name)
{
	if (strcmp(name, c->name) != 0)
		return vault_host_bound(v, name, c->dport);
	if (c->vault.bound_v != v) {
		vault_free(c->vault.bound_v);
		c->vault.bound_v = vault_ref(v);
		c->vault.bound = vault_host_bound(v, name, c->dport);
	}
	return c->vault.bound;
}

/*
 * A judged request head h (end bytes at the start of in) to a host a
 * binding could match: the vault decides. 0: forward the head as it
 * came (*used: a vault reference when the origin is a bound one, so
 * its response is redacted; NULL otherwise); 1: the rewritten request
 * (proxy_vault_rewrite) went to the origin, *body_taken bytes of body
 * with it (drain end + *body_taken), and *used holds a vault reference
 * for the response's redaction; 2: its body is to be substituted and
 * not all here: call again once in holds *wait bytes; -1: refused
 * (*status, *why); -2: out of memory. When the body is pulled up, h is
 * parsed again (its spans point into in's new first chain).
 */
int
proxy_vault_request(struct proxy_conn *c, struct http_head *h, const char *name,
    struct evbuffer *in, size_t end, struct vault **used, uint64_t *body_taken,
    size_t *wait, int *status, enum proxy_reason *why)
{
	struct vault *v;
	struct vault_req rq;
	struct vault_inject vi;
	struct err e = {""};
	int rc = 0;

	*used = NULL;
	*body_taken = 0;
	*wait = 0;
	if (c->p->h.vault_get == NULL ||
	    (v = c->p->h.vault_get(c->p->h.arg)) == NULL)
		return 0;
	if (!proxy_vault_bound(c, v, name)) {
		/* terminated all the same (a binding named the host when
		 * the connection began): its responses stay redacted */
		if (c->tls.term)
			*used = vault_ref(v);
		return 0;
	}
	proxy_vault_req_fill(c, h, name, &rq);
	/* bound: vault_host_bound said so just above */
	if (vault_decide_bound(v, &rq, &vi, &e) == -1) {
		log_error(c->p->log, "vault.decide_failed", LOG_S("host", name),
		    LOG_S("error", e.msg));
		*status = 503;
		*why = PROXY_VAULT_REFUSED;
		return -1;
	}
	switch (vi.decision) {
	case VAULT_NO_MATCH:
		/* nothing injected, but the origin is a bound one: it may
		 * give back what it stored of earlier requests (issue 34) */
		proxy_log_inject(c, &vi, h, name, v);
		*used = vault_ref(v);
		break;
	case VAULT_AMBIGUOUS:
	case VAULT_REFUSED:
		proxy_log_inject(c, &vi, h, name, v);
		*status = vi.status != 0 ? vi.status : 403;
		*why = vi.decision == VAULT_AMBIGUOUS ? PROXY_VAULT_AMBIGUOUS
		                                      : PROXY_VAULT_REFUSED;
		if (vi.status == 502) {
			/* a credential egressd fetches is missing or too old
			 * (vault_http.h): said like a token endpoint's failure */
			(void)snprintf(c->vault.mint_why,
			    sizeof(c->vault.mint_why), "%s", vi.reason);
			*why = PROXY_VAULT_TOKEN;
		}
		rc = -1;
		break;
	case VAULT_INJECTED:
		rc = proxy_vault_injected(c, v, &vi, h, name, in, end, used,
		    body_taken, wait, status, why);
		break;
	case VAULT_MINT: {
		/* no token: never forwarded unauthenticated; it waits for
		 * one, or is refused 502 if none can be asked for */
		const char *mwhy = NULL;

		proxy_log_inject(c, &vi, h, name, v);
		rc = proxy_mint_wait(c, v, vi.binding, &mwhy) == 0 ? 3 : -1;
		if (rc == -1) {
			(void)snprintf(c->vault.mint_why,
			    sizeof(c->vault.mint_why), "%s", mwhy);
			*status = 502;
			*why = PROXY_VAULT_TOKEN;
		}
		break;
	}
	}
	vault_inject_clear(v, &vi);
	return rc;
}
