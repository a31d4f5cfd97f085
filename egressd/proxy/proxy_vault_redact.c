/*
 * The Credential Vault on a response: redact, decode, trailers.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/now.h"
#include "util/secmem.h"
#include "egressd/proxy/proxy_int.h"
#include "egressd/proxy/proxy_vault.h"

/* What a redacted response holds besides its redactor: the kept
 * trailer section (it may hold an echo of a secret: wiped), the
 * decoder (it wipes its window) and the held head and bytes (redacted
 * already). */
static void
proxy_trailers_free(struct proxy_conn *c)
{
	if (c->vault.rtrail == NULL)
		return;
	secmem_wipe(c->vault.rtrail, sizeof(*c->vault.rtrail));
	free(c->vault.rtrail);
	c->vault.rtrail = NULL;
}

void
proxy_vault_clear(struct proxy_conn *c)
{
	vault_redactor_free(c->vault.red);
	c->vault.red = NULL;
	proxy_trailers_free(c);
	http_decode_free(c->vault.dec);
	c->vault.dec = NULL;
	if (c->vault.hold != NULL) {
		evbuffer_free(c->vault.hold);
		c->vault.hold = NULL;
	}
}

/* One vault.compressed line and its counter. */
void
proxy_vault_log_compressed(
    struct proxy_conn *c, enum proxy_compressed o, const char *reason)
{
	c->p->st.vault_compressed[o]++;
	log_at_(c->p->log, o == PROXY_COMPRESSED_DECODED ? LOG_INFO : LOG_WARN,
	    "vault.compressed", LOG_S("outcome", proxy_compressed_name(o)),
	    LOG_S("encoding", http_coding_name(c->vault.dec_coding)),
	    LOG_S("mode", c->p->o.vault_decode ? "decode" : "refuse"),
	    LOG_S("reason", reason), LOG_S("name", c->name),
	    LOG_U(
	        "in", c->vault.dec != NULL ? http_decode_in(c->vault.dec) : 0),
	    LOG_U("out",
	        c->vault.dec != NULL ? http_decode_out(c->vault.dec) : 0));
}

/* Where a redacted response goes: the client, or the hold while a
 * decoded one's start is held back. */
static struct evbuffer *
proxy_red_out(struct proxy_conn *c)
{
	return c->vault.hold != NULL ? c->vault.hold
	                             : bufferevent_get_output(c->cli);
}

/* The held head and bytes go to the client (from now on, everything). */
static int
proxy_hold_release(struct proxy_conn *c)
{
	int rc;

	if (c->vault.hold == NULL)
		return 0;
	rc = evbuffer_add_buffer(bufferevent_get_output(c->cli), c->vault.hold);
	evbuffer_free(c->vault.hold);
	c->vault.hold = NULL;
	return rc;
}

/* Redacted response bytes to the client; chunked bodies are re-chunked
 * (the redaction preserves length, the spans do not follow the
 * origin's chunks). */
static void
proxy_red_emit(void *arg, const uint8_t *p, size_t n)
{
	struct proxy_conn *c = arg;
	struct evbuffer *out = proxy_red_out(c);

	if (n == 0)
		return;
	if (c->vault.red_chunked)
		(void)evbuffer_add_printf(out, "%zx\r\n", n);
	(void)evbuffer_add(out, p, n);
	if (c->vault.red_chunked)
		(void)evbuffer_add(out, "\r\n", 2);
	c->down_bytes += n;
}

/*
 * The Content-Encoding of a response head h to an injected request
 * (c->vault.dec_coding): 0 none (or identity), 1 to be decoded, -1 refused
 * with *reason (fixed text). Refused: --vault-compressed refuse, a
 * coding other than gzip or deflate (or more than one), a 1xx or a 206
 * (a range of a compressed representation does not decode alone), a
 * body to an HTTP/1.0 client (decoded bodies are chunked).
 */
static int
proxy_vault_coding(
    struct proxy_conn *c, const struct http_head *h, const char **reason)
{
	size_t n;
	const struct http_span *ce = http_header_get(h, "content-encoding", &n);

	c->vault.dec_coding = HTTP_CODING_IDENTITY;
	*reason = "";
	if (ce == NULL)
		return 0;
	c->vault.dec_coding =
	    n > 1 ? HTTP_CODING_LIST : http_coding_parse(ce->p, ce->n);
	if (c->vault.dec_coding == HTTP_CODING_IDENTITY)
		return 0;
	if (!c->p->o.vault_decode)
		*reason = "mode_refuse";
	else if (c->vault.dec_coding != HTTP_CODING_GZIP &&
	    c->vault.dec_coding != HTTP_CODING_DEFLATE)
		*reason = "unsupported_encoding";
	else if (h->status < 200 || h->status == 206)
		*reason = "partial_content";
	else if (h->body != HTTP_BODY_NONE && proxy_rq_head(c)->http10)
		*reason = "http10_client";
	else
		return 1;
	return -1;
}

/* The field f (a header or a trailer) to out, its value redacted: every
 * run of a secret's rendered forms "[REDACTED]". -1: out of memory. */
static int
proxy_add_redacted(
    struct evbuffer *out, const struct vault *v, const struct http_header *f)
{
	size_t n;
	char *red;
	int rc;

	/* a name cannot be rewritten: the field is dropped */
	if (vault_redact_any(v, f->name.p, f->name.n))
		return 0;
	red = vault_redact_header(v, f->value.p, f->value.n, &n);
	if (red == NULL && n == SIZE_MAX)
		return 0; /* no memory to redact it: dropped */
	rc = evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)f->name.n,
	         f->name.p, (int)(red != NULL ? n : f->value.n),
	         red != NULL ? red : f->value.p) < 0
	    ? -1
	    : 0;
	free(red);
	return rc;
}

/*
 * The status line line[0..n) (its CRLF included) to out, redacted like a
 * header value (the reason phrase is the origin's text); http11: its
 * version ("HTTP/1.x", checked by the parser) written as HTTP/1.1, and
 * the line redacted as it goes out. -1: out of memory.
 */
static int
proxy_add_status_line(struct evbuffer *out, const struct vault *v,
    const char *line, size_t n, bool http11)
{
	char *copy = NULL, *red;
	size_t rn;
	int rc;

	if (http11 && n >= 8) {
		if ((copy = malloc(n)) == NULL)
			return -1;
		memcpy(copy, "HTTP/1.1", 8);
		memcpy(copy + 8, line + 8, n - 8);
		line = copy;
	}
	red = vault_redact_header(v, line, n, &rn);
	rc = red != NULL     ? evbuffer_add(out, red, rn)
	    : rn == SIZE_MAX ? -1
	                     : evbuffer_add(out, line, n);
	free(red);
	free(copy);
	return rc;
}

/* A field of a response to be decoded that goes: not its framing, not
 * the coding egressd removes. */
static bool
proxy_decoded_keeps(const struct http_span *name)
{
	return !http_span_ieq(name, "content-encoding") &&
	    !http_span_ieq(name, "content-length") &&
	    !http_span_ieq(name, "transfer-encoding");
}

/*
 * A span of a redacted Content-Length body (vault_redact_scan): its bytes
 * are still in the origin's input buffer, so clean ones move to the
 * client's without a copy; masked ones are dropped and written as '*';
 * kept ones the redactor copied (a possible secret's beginning).
 */
static void
proxy_red_span(void *arg, const uint8_t *p, size_t n, unsigned flags)
{
	struct proxy_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(c->up);
	struct evbuffer *out = bufferevent_get_output(c->cli);
	uint8_t stars[256];

	if (!(flags & VAULT_SPAN_HELD)) {
		if (flags == 0) {
			(void)evbuffer_remove_buffer(in, out, n);
			c->down_bytes += n;
			return;
		}
		(void)evbuffer_drain(in, n);
		if (flags & VAULT_SPAN_KEPT)
			return;
	} else if (!(flags & VAULT_SPAN_MASKED)) {
		(void)evbuffer_add(out, p, n);
		c->down_bytes += n;
		return;
	}
	c->down_bytes += n;
	memset(stars, '*', sizeof(stars));
	for (; n > sizeof(stars); n -= sizeof(stars))
		(void)evbuffer_add(out, stars, sizeof(stars));
	(void)evbuffer_add(out, stars, n);
}

/*
 * The Content-Length body bytes in in, redacted where they are: read in
 * place through evbuffer_peek, moved on by proxy_red_span (moving and
 * dropping from the front leaves the rest of in where the redactor reads
 * it). What in holds is all that is here now: a pause (FLUSH) unless
 * the body ends in it.
 */
static void
proxy_vault_length(struct proxy_conn *c, struct evbuffer *in)
{
	struct proxy_body *b = &c->relay.rbody;
	struct evbuffer_iovec vec[PROXY_RED_SEGS];
	struct vault_seg seg[PROXY_RED_SEGS];
	size_t n, len, i, k;
	enum vault_redact_mode mode;

	while (b->left > 0 && (len = evbuffer_get_length(in)) > 0) {
		n = len < b->left ? len : (size_t)b->left;
		k = (size_t)evbuffer_peek(
		    in, (ev_ssize_t)n, NULL, vec, PROXY_RED_SEGS);
		if (k > PROXY_RED_SEGS)
			k = PROXY_RED_SEGS;
		/* the last chain may go on past n */
		for (i = 0, len = 0; i < k && len < n; i++) {
			seg[i].p = vec[i].iov_base;
			seg[i].n =
			    vec[i].iov_len < n - len ? vec[i].iov_len : n - len;
			len += seg[i].n;
		}
		b->left -= len;
		mode = b->left == 0                 ? VAULT_REDACT_END
		    : len < evbuffer_get_length(in) ? VAULT_REDACT_MORE
		                                    : VAULT_REDACT_FLUSH;
		vault_redact_scan(
		    c->vault.red, seg, i, mode, proxy_red_span, c);
	}
}

/*
 * The response head of an injected request, to the client with every
 * header value redacted; with decode, as the identity response it
 * becomes: version HTTP/1.1 (egressd frames it), Content-Encoding,
 * Content-Length and Transfer-Encoding dropped, chunked when it has a
 * body. -1: the response cannot be redacted (a body until close, an
 * upgrade): the caller answers 502 instead. -2: out of memory.
 */
static int
proxy_vault_response_head(struct proxy_conn *c, const struct http_head *h,
    const char *buf, size_t end, bool decode, struct err *e)
{
	struct vault *v = proxy_rq_head(c)->vault;
	struct evbuffer *out = proxy_red_out(c);
	bool close = proxy_rq_head(c)->close && h->status >= 200;
	const char *eol;
	size_t i, rl;

	if (h->status == 101 ||
	    (h->status >= 200 && h->body == HTTP_BODY_CLOSE)) {
		(void)snprintf(e->msg, sizeof(e->msg), "%s",
		    h->status == 101
		        ? "an upgrade on an injected request"
		        : "a body until close on an injected request");
		return -1;
	}
	if (!close && !decode && !vault_redact_any(v, buf, end)) {
		/* nothing to redact anywhere in it, nothing to drop or add:
		 * as it came */
		if (evbuffer_add(out, buf, end) == -1)
			return -2;
		c->down_bytes += end;
		return 0;
	}
	eol = memchr(buf, '\n', end);
	rl = eol != NULL ? (size_t)(eol - buf) + 1 : end;
	/* the status line's reason phrase is the origin's text too; with
	 * decode, "HTTP/1.x" (checked by the parser) becomes HTTP/1.1 */
	if (proxy_add_status_line(out, v, buf, rl, decode) == -1)
		return -2;
	for (i = 0; i < h->nh; i++) {
		const struct http_header *f = &h->h[i];

		if (close && http_span_ieq(&f->name, "connection"))
			continue;
		if (decode && !proxy_decoded_keeps(&f->name))
			continue;
		if (proxy_add_redacted(out, v, f) == -1)
			return -2;
	}
	if (close && evbuffer_add(out, PROXY_CLOSE_LINE, 19) == -1)
		return -2;
	if (decode && h->body != HTTP_BODY_NONE &&
	    evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28) == -1)
		return -2;
	if (evbuffer_add(out, "\r\n", 2) == -1)
		return -2;
	c->down_bytes += end;
	return 0;
}

/*
 * The last chunk of a re-chunked redacted response, then its trailer
 * fields: those a trailer may carry (http_chunk_trailer_allowed), each
 * value redacted like a header's. -1: out of memory.
 */
static int
proxy_vault_trailers(struct proxy_conn *c)
{
	struct evbuffer *out = proxy_red_out(c);
	struct vault *v = proxy_rq_head(c)->vault;
	struct http_header f;
	size_t pos = 0;

	if (evbuffer_add(out, "0\r\n", 3) == -1)
		return -1;
	while (c->vault.rtrail != NULL &&
	    http_chunk_trailer_next(c->vault.rtrail, &pos, &f)) {
		if (http_chunk_trailer_allowed(&f.name) &&
		    proxy_add_redacted(out, v, &f) == -1)
			return -1;
	}
	proxy_trailers_free(c);
	return evbuffer_add(out, "\r\n", 2);
}

/*
 * Body data p[0..n) of a redacted response to the redactor, decoded
 * first when it is compressed. -1: the decoding failed (e).
 */
static int
proxy_vault_data(
    struct proxy_conn *c, const uint8_t *p, size_t n, struct err *e)
{
	uint8_t out[16384];
	size_t used, got;
	enum http_decode_rc rc;

	if (c->vault.dec == NULL) {
		vault_redact_feed(c->vault.red, p, n, proxy_red_emit, c);
		return 0;
	}
	do {
		rc = http_decode_feed(
		    c->vault.dec, p, n, &used, out, sizeof(out), &got, e);
		p += used;
		n -= used;
		if (got > 0)
			vault_redact_feed(
			    c->vault.red, out, got, proxy_red_emit, c);
		/* past the free allowance the ratio is checked: a bomb
		 * would have failed this call */
		if (rc != HTTP_DECODE_BAD && c->vault.hold != NULL &&
		    http_decode_out(c->vault.dec) > HTTP_DECODE_RATIO_FREE &&
		    proxy_hold_release(c) == -1)
			rc = HTTP_DECODE_BAD;
	} while (rc == HTTP_DECODE_DATA);
	secmem_wipe(out, sizeof(out)); /* decoded, not yet redacted */
	return rc == HTTP_DECODE_BAD ? -1 : 0;
}

/* Output queued toward the client, held or not: over the watermark, a
 * decoded response stops until it drains. */
static bool
proxy_decode_full(struct proxy_conn *c)
{
	return c->vault.dec != NULL &&
	    evbuffer_get_length(bufferevent_get_output(c->cli)) +
	        (c->vault.hold != NULL ? evbuffer_get_length(c->vault.hold)
	                               : 0) >=
	    PROXY_HIGH_WM;
}

/* A redacted response's body ended: the decoder and the redactor
 * flushed, its trailers re-sent, what was held let go, its state freed.
 * The codes of proxy_vault_body. */
static int
proxy_vault_finish(struct proxy_conn *c, struct err *e)
{
	if (c->vault.dec != NULL && http_decode_finish(c->vault.dec, e) == -1)
		return -3;
	vault_redact_finish(c->vault.red, proxy_red_emit, c);
	if (c->vault.red_chunked && proxy_vault_trailers(c) == -1)
		return -2;
	if (proxy_hold_release(c) == -1)
		return -2;
	if (c->vault.dec != NULL)
		proxy_vault_log_compressed(c, PROXY_COMPRESSED_DECODED, "");
	proxy_vault_clear(c);
	return 0;
}

/*
 * Body bytes of a redacted response: LENGTH forwarded redacted (same
 * length), CHUNKED decoded, redacted and re-chunked, its trailers kept
 * and re-sent redacted; a compressed body (c->vault.dec) decoded, redacted
 * and chunked, PROXY_DECODE_STEP compressed bytes at a time while the
 * client's queue is under the watermark. -1 bad framing (e), -2 out of
 * memory, -3 the decoding failed (e).
 */
int
proxy_vault_body(
    struct proxy_conn *c, struct evbuffer *in, bool *done, struct err *e)
{
	struct proxy_body *b = &c->relay.rbody;
	uint8_t tmp[16384];
	size_t n, used, nd, consumed = 0;
	size_t step = c->vault.dec != NULL ? PROXY_DECODE_STEP : sizeof(tmp);
	const uint8_t *d;
	enum http_chunk_rc rc;
	int rv;

	*done = false;
	if (b->kind == HTTP_BODY_LENGTH) {
		if (c->vault.dec == NULL)
			/* the bytes are in in: redacted where they are */
			proxy_vault_length(c, in);
		/* decoded bytes are not: decoded, then fed */
		while (c->vault.dec != NULL && b->left > 0 &&
		    evbuffer_get_length(in) > 0 && !proxy_decode_full(c)) {
			n = evbuffer_get_length(in);
			if (n > step)
				n = step;
			if (n > b->left)
				n = (size_t)b->left;
			n = (size_t)evbuffer_remove(in, tmp, n);
			b->left -= n;
			if (proxy_vault_data(c, tmp, n, e) == -1)
				return -3;
		}
		*done = b->left == 0;
	} else if (b->kind == HTTP_BODY_CHUNKED) {
		while (!*done && evbuffer_get_length(in) > 0 &&
		    !proxy_decode_full(c)) {
			n = evbuffer_copyout(in, tmp, sizeof(tmp));
			consumed = 0;
			while (consumed < n && !proxy_decode_full(c)) {
				rc = http_chunk_feed(&b->ch, tmp + consumed,
				    n - consumed < step ? n - consumed : step,
				    &used, &d, &nd, e);
				if (rc == HTTP_CHUNK_BAD)
					return -1;
				consumed += used;
				if (rc == HTTP_CHUNK_DATA &&
				    proxy_vault_data(c, d, nd, e) == -1)
					return -3;
				if (rc == HTTP_CHUNK_DONE) {
					*done = true;
					break;
				}
			}
			evbuffer_drain(in, consumed);
		}
	} else
		*done = true;
	if (!*done && evbuffer_get_length(in) == 0) {
		/* the origin paused (SSE, long poll): hand over all but a
		 * possible secret's beginning */
		vault_redact_flush(c->vault.red, proxy_red_emit, c);
		if (proxy_hold_release(c) == -1)
			return -2;
	}
	if (*done && (rv = proxy_vault_finish(c, e)) != 0)
		return rv;
	c->last_ms = now_mono_ms();
	if (evbuffer_get_length(bufferevent_get_output(c->cli)) >=
	        PROXY_HIGH_WM ||
	    proxy_decode_full(c))
		bufferevent_disable(c->up, EV_READ);
	return 0;
}

/* The redacted chunked response keeps its trailer section. -1: out of
 * memory. */
static int
proxy_vault_keep_trailers(struct proxy_conn *c)
{
	if (c->vault.rtrail == NULL &&
	    (c->vault.rtrail = malloc(sizeof(*c->vault.rtrail))) == NULL)
		return -1;
	http_chunk_keep_trailers(&c->relay.rbody.ch, c->vault.rtrail);
	return 0;
}

/*
 * A response head h (end bytes of buf) to an injected request, judged
 * and sent redacted (or held); its body set up: redacted, and decoded
 * first when it is compressed and --vault-compressed decode. The caller
 * drains the head (and refuses, or finishes the response, as the code
 * says).
 */
enum proxy_vault_rc
proxy_vault_response(struct proxy_conn *c, const struct http_head *h,
    const char *buf, size_t end, struct err *e)
{
	const char *reason;
	int cv = proxy_vault_coding(c, h, &reason), vr;
	bool has_body;

	if (cv == -1) {
		proxy_vault_log_compressed(c, PROXY_COMPRESSED_REFUSED, reason);
		return PROXY_VAULT_RC_COMPRESSED;
	}
	has_body = h->status >= 200 && h->body != HTTP_BODY_NONE;
	if (cv == 1 && has_body) {
		if ((c->vault.dec = http_decode_new(
		         c->vault.dec_coding, NULL)) == NULL ||
		    (c->vault.hold = evbuffer_new()) == NULL)
			return PROXY_VAULT_RC_NOMEM;
	}
	vr = proxy_vault_response_head(c, h, buf, end, cv == 1, e);
	if (vr == -1) {
		proxy_vault_clear(c);
		log_warn(c->p->log, "vault.unsafe_response",
		    LOG_S("name", c->name), LOG_S("error", e->msg));
		return PROXY_VAULT_RC_UNSAFE;
	}
	if (vr == -2)
		return PROXY_VAULT_RC_NOMEM;
	if (h->status < 200)
		return PROXY_VAULT_RC_INTERIM;
	proxy_http_body_start(&c->relay.rbody, h);
	if (c->relay.rbody.kind == HTTP_BODY_NONE) {
		if (cv == 1)
			proxy_vault_log_compressed(
			    c, PROXY_COMPRESSED_DECODED, "");
		return PROXY_VAULT_RC_DONE;
	}
	if ((c->vault.red = vault_redactor_new(proxy_rq_head(c)->vault)) ==
	    NULL)
		return PROXY_VAULT_RC_NOMEM;
	c->vault.red_chunked =
	    c->relay.rbody.kind == HTTP_BODY_CHUNKED || c->vault.dec != NULL;
	if (c->relay.rbody.kind == HTTP_BODY_CHUNKED &&
	    proxy_vault_keep_trailers(c) == -1)
		return PROXY_VAULT_RC_NOMEM;
	return PROXY_VAULT_RC_BODY;
}
