/*
 * http_chunk: chunked transfer coding, streamed (see http_chunk.h).
 */
#include "egressd/proto/http_chunk.h"
#include "egressd/proto/http_head.h"
#include "util/text.h"

#include <stdlib.h>
#include <string.h>

enum {
	ST_SIZE0, /* the first hex digit of a chunk size */
	ST_SIZE, /* more hex digits, or the end of them */
	/* chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ) */
	ST_EXT_WS, /* BWS: only more of it or ';' may follow */
	ST_EXT_NAME0, /* after ';': BWS, then the name's first byte */
	ST_EXT_NAME,
	ST_EXT_NAME_WS, /* BWS after a name: '=' or ';' next */
	ST_EXT_VAL0, /* after '=': BWS, then a token or a quoted string */
	ST_EXT_TOKEN,
	ST_EXT_QUOTED,
	ST_EXT_QESC, /* after a backslash inside the quotes */
	ST_EXT_ENDQ, /* after the closing quote */
	ST_SIZE_LF,
	ST_DATA,
	ST_DATA_CR,
	ST_DATA_LF,
	ST_TRAILER, /* at the start of a trailer line (or the final CRLF) */
	ST_TRAILER_NAME,
	ST_TRAILER_VALUE,
	ST_TRAILER_LF,
	ST_END_LF,
	ST_DONE,
};

#define CHUNK_DIGITS_MAX 16
#define CHUNK_SIZE_LIMIT (UINT64_C(1) << 60)

void
http_chunk_init(struct http_chunk *c)
{
	memset(c, 0, sizeof(*c));
	c->state = ST_SIZE0;
}

void
http_chunk_keep_trailers(struct http_chunk *c, struct http_chunk_trailers *t)
{
	c->keep = t;
	if (t != NULL)
		t->len = 0;
}

bool
http_chunk_trailer_next(
    const struct http_chunk_trailers *t, size_t *pos, struct http_header *f)
{
	const char *p = t->buf + *pos, *end = t->buf + t->len, *colon, *cr;

	/* the decoder validated the lines; still, never read past len */
	if (*pos >= t->len || *p == '\r')
		return false;
	if ((colon = memchr(p, ':', (size_t)(end - p))) == NULL ||
	    (cr = memchr(colon, '\r', (size_t)(end - colon))) == NULL ||
	    cr + 1 >= end)
		return false;
	f->name.p = p;
	f->name.n = (size_t)(colon - p);
	f->value.p = colon + 1;
	f->value.n = (size_t)(cr - colon - 1);
	text_trim_ows(&f->value.p, &f->value.n);
	*pos = (size_t)(cr + 2 - t->buf);
	return true;
}

/* Lowercase; see http_chunk.h for why each group. */
static const char *const trailer_denied[] = {
    "transfer-encoding",
    "content-length",
    "trailer",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "host",
    "expect",
    "max-forwards",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "authentication-info",
    "proxy-authentication-info",
    "cookie",
    "set-cookie",
    "cache-control",
    "pragma",
    "age",
    "expires",
    "date",
    "location",
    "retry-after",
    "vary",
    "content-type",
    "content-encoding",
    "content-range",
};

bool
http_chunk_trailer_allowed(const struct http_span *name)
{
	size_t i;

	for (i = 0; i < sizeof(trailer_denied) / sizeof(trailer_denied[0]); i++)
		if (http_span_ieq(name, trailer_denied[i]))
			return false;
	return true;
}

/* *used: the bytes before the offending one. */
#define fail(c, e, why) fail_at(c, e, why, used, i)

static enum http_chunk_rc
fail_at(struct http_chunk *c, struct err *e, const char *why, size_t *used,
    size_t at)
{
	*used = at;
	c->state = ST_DONE;
	err_set(e, "chunked body: %s", why);
	return HTTP_CHUNK_BAD;
}

static bool
is_ws(uint8_t ch)
{
	return ch == ' ' || ch == '\t';
}

/* qdtext and the byte of a quoted-pair (RFC 9110 5.6.4): HTAB, SP,
 * VCHAR, obs-text; qdtext excludes '"' and '\\' (the caller's cases). */
static bool
is_qbyte(uint8_t ch)
{
	return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

/*
 * One byte of the chunk-size line after the size, strictly by the
 * grammar: an extension starts with ';' after optional whitespace, and
 * anything else after the hex digits is an error (a lenient parser here
 * reads "5 x" or "5zz" as a size other parsers do not: smuggling). The
 * new state, ST_SIZE_LF at the line's CR, or -1 with *why.
 */
static int
ext_byte(int st, uint8_t ch, const char **why)
{
	switch (st) {
	case ST_EXT_QUOTED:
		if (ch == '\\')
			return ST_EXT_QESC;
		if (ch == '"')
			return ST_EXT_ENDQ;
		if (is_qbyte(ch))
			return ST_EXT_QUOTED;
		*why = ch == '\r' ? "unterminated quoted extension"
		                  : "invalid byte in a chunk extension";
		return -1;
	case ST_EXT_QESC:
		if (is_qbyte(ch))
			return ST_EXT_QUOTED;
		*why = "invalid byte in a chunk extension";
		return -1;
	case ST_EXT_NAME0:
		if (is_ws(ch))
			return st;
		if (http_is_tchar(ch))
			return ST_EXT_NAME;
		*why = "chunk extension without a name";
		return -1;
	case ST_EXT_VAL0:
		if (is_ws(ch))
			return st;
		if (ch == '"')
			return ST_EXT_QUOTED;
		if (http_is_tchar(ch))
			return ST_EXT_TOKEN;
		*why = "chunk extension without a value after '='";
		return -1;
	case ST_EXT_WS:
		if (is_ws(ch))
			return st;
		if (ch == ';')
			return ST_EXT_NAME0;
		*why = "chunk extension not starting with ';'";
		return -1;
	case ST_EXT_NAME_WS:
		if (is_ws(ch))
			return st;
		if (ch == '=')
			return ST_EXT_VAL0;
		if (ch == ';')
			return ST_EXT_NAME0;
		*why = "invalid byte after a chunk extension's name";
		return -1;
	default: /* ST_SIZE (after a digit), ST_EXT_NAME, _TOKEN, _ENDQ */
		if ((st == ST_EXT_NAME || st == ST_EXT_TOKEN) &&
		    http_is_tchar(ch))
			return st;
		if (ch == '\r')
			return ST_SIZE_LF;
		if (ch == ';')
			return ST_EXT_NAME0;
		if (is_ws(ch))
			return st == ST_EXT_NAME ? ST_EXT_NAME_WS : ST_EXT_WS;
		if (ch == '=' && st == ST_EXT_NAME)
			return ST_EXT_VAL0;
		*why = st == ST_SIZE ? "invalid byte after a chunk size (an "
		                       "extension starts with ';')"
		                     : "invalid byte in a chunk extension";
		return -1;
	}
}

/* A hex digit h of the chunk size; NULL, or why the size is refused. */
static const char *
size_digit(struct http_chunk *c, int h)
{
	if (++c->line > CHUNK_DIGITS_MAX || (c->left << 4) >= CHUNK_SIZE_LIMIT)
		return "chunk size too large";
	c->left = c->left << 4 | (uint64_t)h;
	c->state = ST_SIZE;
	return NULL;
}

/* A byte of the size line after the digits (ext_byte), counted. */
static const char *
ext_step(struct http_chunk *c, uint8_t ch)
{
	const char *why = NULL;
	int st = ext_byte(c->state, ch, &why);

	if (st == -1)
		return why;
	if (++c->line > HTTP_CHUNK_LINE_MAX)
		return "chunk-size line too long";
	c->state = st;
	return NULL;
}

/*
 * The line ends between the parts (ST_SIZE_LF, ST_DATA_CR, ST_DATA_LF):
 * the next state in c. NULL, or why the byte is wrong.
 */
static const char *
crlf_byte(struct http_chunk *c, uint8_t ch)
{
	switch (c->state) {
	case ST_SIZE_LF:
		if (ch != '\n')
			return "bare CR after a chunk size";
		c->line = 0;
		c->state = c->left == 0 ? ST_TRAILER : ST_DATA;
		return NULL;
	case ST_DATA_CR:
		if (ch != '\r')
			return "chunk data longer than its size";
		c->state = ST_DATA_LF;
		return NULL;
	default: /* ST_DATA_LF */
		if (ch != '\n')
			return "bare CR after chunk data";
		c->state = ST_SIZE0;
		c->line = 0;
		return NULL;
	}
}

/*
 * One byte of the trailer section (ST_TRAILER .. ST_TRAILER_LF): the next
 * state in c, the byte counted (and kept when asked). NULL, or why the
 * trailer is malformed.
 */
static const char *
trailer_byte(struct http_chunk *c, uint8_t ch)
{
	switch (c->state) {
	case ST_TRAILER:
		if (ch == '\r')
			c->state = ST_END_LF;
		else if (http_is_tchar(ch))
			c->state = ST_TRAILER_NAME;
		else
			return "malformed trailer line";
		break;
	case ST_TRAILER_NAME:
		if (ch == ':')
			c->state = ST_TRAILER_VALUE;
		else if (!http_is_tchar(ch))
			return "malformed trailer name";
		break;
	case ST_TRAILER_VALUE:
		if (ch == '\r')
			c->state = ST_TRAILER_LF;
		else if (!(ch == '\t' || (ch >= 0x20 && ch != 0x7f)))
			return "control character in a trailer";
		break;
	default: /* ST_TRAILER_LF */
		if (ch != '\n')
			return "bare CR in a trailer";
		c->state = ST_TRAILER;
		break;
	}
	if (++c->trailer > HTTP_CHUNK_TRAILER_MAX)
		return "trailer section too large";
	/* the final CR is not a field's: not kept */
	if (c->keep != NULL && c->state != ST_END_LF)
		c->keep->buf[c->keep->len++] = (char)ch;
	return NULL;
}

enum http_chunk_rc
http_chunk_feed(struct http_chunk *c, const uint8_t *in, size_t len,
    size_t *used, const uint8_t **data, size_t *ndata, struct err *e)
{
	size_t i = 0;

	*data = NULL;
	*ndata = 0;
	while (i < len) {
		uint8_t ch = in[i];
		const char *why;
		int h;

		switch (c->state) {
		case ST_SIZE0:
		case ST_SIZE:
			h = text_hexval(ch);
			if (h < 0 && c->state == ST_SIZE0)
				return fail(c, e, "chunk size is not hex");
			why = h >= 0 ? size_digit(c, h) : ext_step(c, ch);
			break;
		case ST_EXT_WS:
		case ST_EXT_NAME0:
		case ST_EXT_NAME:
		case ST_EXT_NAME_WS:
		case ST_EXT_VAL0:
		case ST_EXT_TOKEN:
		case ST_EXT_QUOTED:
		case ST_EXT_QESC:
		case ST_EXT_ENDQ:
			why = ext_step(c, ch);
			break;
		case ST_SIZE_LF:
		case ST_DATA_CR:
		case ST_DATA_LF:
			why = crlf_byte(c, ch);
			break;
		case ST_DATA: {
			size_t take = len - i;

			if ((uint64_t)take > c->left)
				take = (size_t)c->left;
			c->left -= take;
			c->total += take;
			if (c->left == 0)
				c->state = ST_DATA_CR;
			*data = in + i;
			*ndata = take;
			*used = i + take;
			return HTTP_CHUNK_DATA;
		}
		case ST_TRAILER:
		case ST_TRAILER_NAME:
		case ST_TRAILER_VALUE:
		case ST_TRAILER_LF:
			why = trailer_byte(c, ch);
			break;
		case ST_END_LF:
			if (ch != '\n')
				return fail(c, e, "bare CR at the body's end");
			c->state = ST_DONE;
			*used = i + 1;
			return HTTP_CHUNK_DONE;
		default:
			return fail(c, e, "data after the body's end");
		}
		if (why != NULL)
			return fail(c, e, why);
		i++;
	}
	*used = i;
	return HTTP_CHUNK_AGAIN;
}

enum http_chunk_collect_rc
http_chunk_collect(const uint8_t *in, size_t len, size_t max, uint8_t **out,
    size_t *olen, size_t *wire, struct err *e)
{
	struct http_chunk c;
	const uint8_t *data;
	size_t off = 0, used, nd, n = 0, cap;
	uint8_t *buf;

	*out = NULL;
	*olen = *wire = 0;
	/* the body is never longer than its framing */
	cap = len < max ? len : max;
	if ((buf = malloc(cap > 0 ? cap : 1)) == NULL) {
		err_set(e, "out of memory");
		return HTTP_CHUNK_COLLECT_NOMEM;
	}
	http_chunk_init(&c);
	for (;;) {
		switch (http_chunk_feed(
		    &c, in + off, len - off, &used, &data, &nd, e)) {
		case HTTP_CHUNK_DATA:
			off += used;
			if (nd > max - n) {
				free(buf);
				err_set(
				    e, "a chunked body over %zu bytes", max);
				return HTTP_CHUNK_COLLECT_SKIP;
			}
			memcpy(buf + n, data, nd);
			n += nd;
			continue;
		case HTTP_CHUNK_DONE:
			/* the final CR is counted: 1 is no trailer field */
			if (c.trailer > 1) {
				free(buf);
				err_set(e, "a chunked body with trailers");
				return HTTP_CHUNK_COLLECT_SKIP;
			}
			*out = buf;
			*olen = n;
			*wire = off + used;
			return HTTP_CHUNK_COLLECT_DONE;
		case HTTP_CHUNK_AGAIN:
			free(buf);
			return HTTP_CHUNK_COLLECT_AGAIN;
		case HTTP_CHUNK_BAD:
			break;
		}
		free(buf);
		return HTTP_CHUNK_COLLECT_BAD;
	}
}
