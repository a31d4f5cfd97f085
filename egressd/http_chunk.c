/*
 * http_chunk: chunked transfer coding, streamed (see http_chunk.h).
 */
#include "egressd/http_chunk.h"
#include "egressd/http_head.h"
#include "util/text.h"

#include <string.h>

enum {
	ST_SIZE0, /* the first hex digit of a chunk size */
	ST_SIZE, /* more hex digits, or the end of them */
	ST_EXT, /* chunk extensions up to CR */
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

/* One byte of a chunk-ext: BWS ";" BWS name [BWS "=" BWS value]. */
static bool
ext_byte(struct http_chunk *c, uint8_t ch)
{
	if (c->in_quote) {
		if (c->quote_esc)
			c->quote_esc = false;
		else if (ch == '\\')
			c->quote_esc = true;
		else if (ch == '"')
			c->in_quote = false;
		return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
	}
	if (ch == '"') {
		c->in_quote = true;
		return true;
	}
	return http_is_tchar(ch) || ch == ';' || ch == '=' || ch == ' ' ||
	    ch == '\t';
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
		int h;

		switch (c->state) {
		case ST_SIZE0:
		case ST_SIZE:
			h = text_hexval(ch);
			if (h >= 0) {
				if (++c->line > CHUNK_DIGITS_MAX ||
				    (c->left << 4) >= CHUNK_SIZE_LIMIT)
					return fail(
					    c, e, "chunk size too large");
				c->left = c->left << 4 | (uint64_t)h;
				c->state = ST_SIZE;
				i++;
				break;
			}
			if (c->state == ST_SIZE0)
				return fail(c, e, "chunk size is not hex");
			c->state = ST_EXT;
			/* FALLTHROUGH */
		case ST_EXT:
			if (ch == '\r') {
				if (c->in_quote)
					return fail(c, e,
					    "unterminated quoted extension");
				c->state = ST_SIZE_LF;
			} else if (!ext_byte(c, ch)) {
				return fail(
				    c, e, "invalid byte in a chunk extension");
			}
			if (++c->line > HTTP_CHUNK_LINE_MAX)
				return fail(c, e, "chunk-size line too long");
			i++;
			break;
		case ST_SIZE_LF:
			if (ch != '\n')
				return fail(c, e, "bare CR after a chunk size");
			i++;
			c->line = 0;
			c->in_quote = c->quote_esc = false;
			c->state = c->left == 0 ? ST_TRAILER : ST_DATA;
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
		case ST_DATA_CR:
			if (ch != '\r')
				return fail(c, e,
				    "chunk data longer than its "
				    "size");
			c->state = ST_DATA_LF;
			i++;
			break;
		case ST_DATA_LF:
			if (ch != '\n')
				return fail(c, e, "bare CR after chunk data");
			c->state = ST_SIZE0;
			c->line = 0;
			i++;
			break;
		case ST_TRAILER:
			if (ch == '\r') {
				c->state = ST_END_LF;
			} else if (http_is_tchar(ch)) {
				c->state = ST_TRAILER_NAME;
			} else {
				return fail(c, e, "malformed trailer line");
			}
			goto count_trailer;
		case ST_TRAILER_NAME:
			if (ch == ':')
				c->state = ST_TRAILER_VALUE;
			else if (!http_is_tchar(ch))
				return fail(c, e, "malformed trailer name");
			goto count_trailer;
		case ST_TRAILER_VALUE:
			if (ch == '\r')
				c->state = ST_TRAILER_LF;
			else if (!(ch == '\t' || (ch >= 0x20 && ch != 0x7f)))
				return fail(
				    c, e, "control character in a trailer");
			goto count_trailer;
		case ST_TRAILER_LF:
			if (ch != '\n')
				return fail(c, e, "bare CR in a trailer");
			c->state = ST_TRAILER;
			goto count_trailer;
		case ST_END_LF:
			if (ch != '\n')
				return fail(c, e, "bare CR at the body's end");
			c->state = ST_DONE;
			*used = i + 1;
			return HTTP_CHUNK_DONE;
		default:
			return fail(c, e, "data after the body's end");
		count_trailer:
			if (++c->trailer > HTTP_CHUNK_TRAILER_MAX)
				return fail(c, e, "trailer section too large");
			i++;
			break;
		}
	}
	*used = i;
	return HTTP_CHUNK_AGAIN;
}
