/*
 * HTTP/1 framing on a connection's buffers: message bodies, and the
 * head edits the relay makes.
 */
#include <event2/buffer.h>
#include <string.h>

#include "util/now.h"
#include "egressd/proxy/proxy_int.h"

/* Stops src's reads while dst has PROXY_HIGH_WM queued; dst's write
 * callback (low watermark half that) resumes them. After every write
 * toward dst of what src sent (moved, rewritten or redacted). */
void
proxy_http_hold_back(struct bufferevent *src, struct bufferevent *dst)
{
	if (evbuffer_get_length(bufferevent_get_output(dst)) >= PROXY_HIGH_WM)
		bufferevent_disable(src, EV_READ);
}

/*
 * The chunked framing of lim bytes of in from offset from, fed to ch in
 * place (no pullup): *used is what it consumed. DONE or BAD (e) at the
 * first such event, DATA once ch has decoded more than max body bytes,
 * AGAIN when the lim bytes went in without either.
 */
enum http_chunk_rc
proxy_http_chunk_scan(struct http_chunk *ch, struct evbuffer *in, size_t from,
    size_t lim, uint64_t max, size_t *used, struct err *e)
{
	struct evbuffer_ptr ptr;
	struct evbuffer_iovec v[16];
	const uint8_t *d;
	size_t u, nd, off, n;
	int nv, i;
	enum http_chunk_rc rc;

	*used = 0;
	while (*used < lim) {
		/* evbuffer_peek says how many extents it needed, which may
		 * be more than it filled: only v[0..16) are read */
		if (evbuffer_ptr_set(
		        in, &ptr, from + *used, EVBUFFER_PTR_SET) == -1 ||
		    (nv = evbuffer_peek(
		         in, (ev_ssize_t)(lim - *used), &ptr, v, 16)) <= 0)
			break;
		for (i = 0; i < nv && i < 16; i++) {
			n = v[i].iov_len < lim - *used ? v[i].iov_len
			                               : lim - *used;
			for (off = 0; off < n; off += u) {
				rc = http_chunk_feed(ch,
				    (const uint8_t *)v[i].iov_base + off,
				    n - off, &u, &d, &nd, e);
				*used += u;
				if (rc == HTTP_CHUNK_BAD ||
				    rc == HTTP_CHUNK_DONE)
					return rc;
				if (ch->total > max)
					return HTTP_CHUNK_DATA;
			}
		}
	}
	return HTTP_CHUNK_AGAIN;
}

/*
 * How many of the len bytes at the start of in belong to body b
 * (*take), and whether b ends there (*done). HTTP_BODY_CLOSE takes
 * everything and never ends (the origin's EOF ends it). Chunked framing
 * is checked by http_chunk; the bytes are forwarded as received, and
 * only those it consumed. -1: bad framing (e).
 */
int
proxy_http_body_take(struct proxy_body *b, struct evbuffer *in, size_t *take,
    bool *done, struct err *e)
{
	size_t len = evbuffer_get_length(in);

	*take = 0;
	*done = false;
	switch (b->kind) {
	case HTTP_BODY_NONE:
		*done = true;
		return 0;
	case HTTP_BODY_LENGTH:
		*take = len < b->left ? len : (size_t)b->left;
		b->left -= *take;
		*done = b->left == 0;
		return 0;
	case HTTP_BODY_CLOSE:
		*take = len;
		return 0;
	case HTTP_BODY_CHUNKED:
		switch (proxy_http_chunk_scan(
		    &b->ch, in, 0, len, UINT64_MAX, take, e)) {
		case HTTP_CHUNK_BAD:
			return -1;
		case HTTP_CHUNK_DONE:
			*done = true;
			break;
		case HTTP_CHUNK_AGAIN:
		case HTTP_CHUNK_DATA:
			break;
		}
		return 0;
	}
	return 0;
}

void
proxy_http_body_start(struct proxy_body *b, const struct http_head *h)
{
	b->kind = h->body;
	b->left = h->content_length;
	if (b->kind == HTTP_BODY_LENGTH && b->left == 0)
		b->kind = HTTP_BODY_NONE;
	if (b->kind == HTTP_BODY_CHUNKED)
		http_chunk_init(&b->ch);
}

/* An Upgrade the proxy relays: a GET asking for "websocket" alone
 * (h2c and anything else is refused). */
bool
proxy_http_upgrade_ok(const struct http_head *h)
{
	const struct http_span *u = http_header_get(h, "upgrade", NULL);

	return u != NULL && h->conn_upgrade &&
	    http_span_eq(&h->method, "GET") && http_span_ieq(u, "websocket");
}

/*
 * The index of h's Connection field when it is the only one and says
 * just "close" on an HTTP/1.1 request of a terminated connection, else
 * -1. Connection is hop-by-hop: egressd leaves it out upstream, so the
 * origin connection can go to the pool (proxy_pool.h) once the client,
 * which asked for close and so closes after the response (RFC 9112
 * §9.6), is gone. Anything else in Connection is forwarded as sent.
 */
int
proxy_http_close_field(const struct proxy_conn *c, const struct http_head *h)
{
	int at = -1;
	size_t i;

	if (!c->tls.term || h->minor != 1 || !h->conn_close || h->conn_upgrade)
		return -1;
	for (i = 0; i < h->nh; i++) {
		if (!http_span_ieq(&h->h[i].name, "connection"))
			continue;
		if (at != -1 || !http_span_ieq(&h->h[i].value, "close"))
			return -1;
		at = (int)i;
	}
	return at;
}

/*
 * Head buf[0..end) (parsed as h) into out without field skip's line (-1:
 * none) and the lines of every field named drop (NULL: none), with the
 * lines extra ("" for none) before the final CRLF. -1: no memory.
 */
static int
proxy_head_copy(struct evbuffer *out, const char *buf, size_t end,
    const struct http_head *h, int skip, const char *drop, const char *extra)
{
	size_t at = 0, i;

	for (i = 0; i < h->nh; i++) {
		const struct http_header *f = &h->h[i];
		size_t from = (size_t)(f->name.p - buf);
		size_t vend = (size_t)(f->value.p - buf) + f->value.n;
		const char *nl;

		if ((int)i != skip &&
		    !(drop != NULL && http_span_ieq(&f->name, drop)))
			continue;
		nl = memchr(buf + vend, '\n', end - vend);
		if (evbuffer_add(out, buf + at, from - at) == -1)
			return -1;
		at = nl != NULL ? (size_t)(nl - buf) + 1 : end;
	}
	/* the rest without the final CRLF, then extra and it */
	if (evbuffer_add(out, buf + at, end - 2 - at) == -1 ||
	    evbuffer_add(out, extra, strlen(extra)) == -1 ||
	    evbuffer_add(out, "\r\n", 2) == -1)
		return -1;
	return 0;
}

/*
 * Request head buf[0..end) (parsed as h) to up without field skip's line
 * (-1: none) and, with identity, with "Accept-Encoding: identity" in
 * place of the client's Accept-Encoding fields (a request on an origin
 * connection that carried a secret: its response is redacted, and a
 * compressed one would be refused). -1: no memory.
 */
int
proxy_http_move_head(struct proxy_conn *c, const char *buf, size_t end,
    const struct http_head *h, int skip, bool identity)
{
	struct evbuffer *out = bufferevent_get_output(c->up);

	if (proxy_head_copy(out, buf, end, h, skip,
	        identity ? "accept-encoding" : NULL,
	        identity ? "Accept-Encoding: identity\r\n" : "") == -1)
		return -1;
	evbuffer_drain(bufferevent_get_input(c->cli), end);
	c->up_bytes += end;
	c->last_ms = now_mono_ms();
	proxy_http_hold_back(c->cli, c->up);
	return 0;
}

/* Response head buf[0..end) to the client without its Connection
 * fields and with PROXY_CLOSE_LINE (the answer to a close request
 * whose close egressd kept from the origin). -1: no memory. */
int
proxy_http_head_close(struct proxy_conn *c, const char *buf, size_t end,
    const struct http_head *h)
{
	if (proxy_head_copy(bufferevent_get_output(c->cli), buf, end, h, -1,
	        "connection", PROXY_CLOSE_LINE) == -1)
		return -1;
	evbuffer_drain(bufferevent_get_input(c->up), end);
	c->down_bytes += end;
	c->last_ms = now_mono_ms();
	return 0;
}

/* ASCII lower case of c */
static unsigned char
proxy_http_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

bool
proxy_http_header_removed(
    const struct http_span *name, const struct vault_inject *vi)
{
	unsigned char c;
	size_t i;

	/* the first byte first (NUL for an empty name, like an empty
	 * string's): a request's few header names mostly differ from the
	 * (about six) names removed right there */
	c = name->n > 0 ? proxy_http_lower((unsigned char)name->p[0]) : 0;
	if (c == 'a' && http_span_ieq(name, "accept-encoding"))
		return true;
	for (i = 0; i < vi->nremove; i++)
		if (proxy_http_lower((unsigned char)vi->remove[i][0]) == c &&
		    http_span_ieq(name, vi->remove[i]))
			return true;
	return false;
}
