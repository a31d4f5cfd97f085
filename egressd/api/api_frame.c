/*
 * api_frame: HTTP/1.1 request framing for the API's limits and deadlines.
 * See api_frame.h.
 */
#include <string.h>
#include <strings.h>

#include "egressd/api/api_frame.h"
#include "util/text.h"

void
api_frame_init(struct api_frame *f, size_t head_max, uint64_t body_max)
{
	memset(f, 0, sizeof(*f));
	f->state = API_FRAME_IDLE;
	f->head_max = head_max;
	f->body_max = body_max;
}

static void
frame_to(struct api_frame *f, enum api_frame_state s)
{
	f->state = s;
	f->seq++;
}

static enum api_frame_error
frame_fail(struct api_frame *f, enum api_frame_error e)
{
	f->error = e;
	frame_to(f, API_FRAME_ERROR);
	return e;
}

static void
frame_request_done(struct api_frame *f)
{
	f->requests++;
	frame_to(f, API_FRAME_IDLE);
}

static bool
frame_name_is(const char *line, size_t n, const char *name)
{
	size_t k = strlen(name);

	return n >= k && strncasecmp(line, name, k) == 0;
}

/* One header line (without its line end) of the head being read. */
static enum api_frame_error
frame_header(struct api_frame *f)
{
	const char *l = f->line, *colon, *v;
	size_t n = f->linelen, vn;
	uint64_t x = 0;

	if (f->first_line) {
		size_t m = strcspn(l, " ");
		f->first_line = false;
		/* evhttp reads no body for these (the next bytes are the next
		 * request). */
		f->no_body = (m == 4 && memcmp(l, "HEAD", 4) == 0) ||
		    (m == 5 && memcmp(l, "TRACE", 5) == 0);
		return API_FRAME_OK;
	}
	if (!frame_name_is(l, n, "content-length") &&
	    !frame_name_is(l, n, "transfer-encoding"))
		return API_FRAME_OK;
	/* A framing header we could not keep whole: we cannot follow. */
	if (f->line_long || (colon = memchr(l, ':', n)) == NULL)
		return frame_fail(f, API_FRAME_BAD);
	v = colon + 1;
	vn = n - (size_t)(v - l);
	text_trim_ows(&v, &vn); /* as evhttp trims */
	if (frame_name_is(l, (size_t)(colon - l), "transfer-encoding")) {
		/* evhttp: the first Transfer-Encoding, exactly "chunked". */
		if ((size_t)(colon - l) == strlen("transfer-encoding") &&
		    !f->seen_te) {
			f->seen_te = true;
			f->chunked =
			    vn == 7 && strncasecmp(v, "chunked", 7) == 0;
		}
		return API_FRAME_OK;
	}
	if ((size_t)(colon - l) != strlen("content-length"))
		return API_FRAME_OK; /* "Content-Length-Foo:" */
	if (vn == 0 || vn > 19)
		return frame_fail(f, API_FRAME_BAD);
	for (; vn > 0; v++, vn--) {
		if (*v < '0' || *v > '9')
			return frame_fail(f, API_FRAME_BAD);
		x = x * 10 + (uint64_t)(*v - '0');
	}
	if (f->have_length && x != f->length)
		return frame_fail(f, API_FRAME_BAD);
	f->have_length = true;
	f->length = x;
	return API_FRAME_OK;
}

/* The empty line: what follows the head. */
static enum api_frame_error
frame_head_done(struct api_frame *f)
{
	f->body_bytes = 0;
	if (f->no_body) {
		frame_request_done(f);
		return API_FRAME_OK;
	}
	if (f->chunked) {
		f->chunk = API_CHUNK_SIZE;
		f->chunk_line = 0;
		f->chunk_digits = 0;
		f->left = 0;
		frame_to(f, API_FRAME_CHUNKED);
		return API_FRAME_OK;
	}
	if (f->have_length && f->length > f->body_max)
		return frame_fail(f, API_FRAME_BODY_TOO_LARGE);
	if (f->have_length && f->length > 0) {
		f->left = f->length;
		frame_to(f, API_FRAME_BODY);
		return API_FRAME_OK;
	}
	frame_request_done(f);
	return API_FRAME_OK;
}

static void
frame_head_start(struct api_frame *f)
{
	f->head_bytes = 0;
	f->linelen = 0;
	f->line_long = false;
	f->first_line = true;
	f->no_body = false;
	f->have_length = false;
	f->chunked = false;
	f->seen_te = false;
	f->length = 0;
	frame_to(f, API_FRAME_HEAD);
}

static enum api_frame_error
frame_head_byte(struct api_frame *f, uint8_t c)
{
	if (++f->head_bytes > f->head_max)
		return frame_fail(f, API_FRAME_HEAD_TOO_LARGE);
	if (c != '\n') {
		if (f->linelen + 1 < sizeof(f->line))
			f->line[f->linelen++] = (char)c;
		else
			f->line_long = true;
		return API_FRAME_OK;
	}
	if (f->linelen > 0 && f->line[f->linelen - 1] == '\r' && !f->line_long)
		f->linelen--;
	f->line[f->linelen] = '\0';
	if (f->linelen == 0 && !f->line_long && !f->first_line)
		return frame_head_done(f);
	if (frame_header(f) != API_FRAME_OK)
		return f->error;
	f->linelen = 0;
	f->line_long = false;
	return API_FRAME_OK;
}

/* One byte of a chunked body outside chunk data. */
static enum api_frame_error
frame_chunk_byte(struct api_frame *f, uint8_t c)
{
	int h;

	switch (f->chunk) {
	case API_CHUNK_SIZE:
	case API_CHUNK_EXT:
		if (++f->chunk_line > API_FRAME_CHUNK_LINE_MAX)
			return frame_fail(f, API_FRAME_BAD);
		if (c == '\n') {
			/* evhttp skips empty lines where a size belongs. */
			if (f->chunk_digits == 0 &&
			    f->chunk == API_CHUNK_SIZE) {
				f->chunk_line = 0;
				return API_FRAME_OK;
			}
			if (f->chunk_digits == 0)
				return frame_fail(f, API_FRAME_BAD);
			f->chunk_line = 0;
			f->chunk_digits = 0;
			if (f->left == 0) {
				f->chunk = API_CHUNK_TRAILER;
				return API_FRAME_OK;
			}
			f->chunk = API_CHUNK_DATA;
			return API_FRAME_OK;
		}
		if (f->chunk == API_CHUNK_EXT || c == '\r')
			return API_FRAME_OK;
		/* evhttp reads the size with strtoll(16) and takes only a
		 * space after it ("1a ext" is fine, "1a;ext" is refused):
		 * follow it, so it never sees what it would refuse itself. */
		if (c == ' ' && f->chunk_digits > 0) {
			f->chunk = API_CHUNK_EXT;
			return API_FRAME_OK;
		}
		if ((h = text_hexval(c)) < 0 || ++f->chunk_digits > 15)
			return frame_fail(f, API_FRAME_BAD);
		f->left = f->left * 16 + (uint64_t)h;
		if (f->body_bytes + f->left > f->body_max)
			return frame_fail(f, API_FRAME_BODY_TOO_LARGE);
		return API_FRAME_OK;
	case API_CHUNK_DATA_END:
		if (c == '\r')
			return API_FRAME_OK;
		if (c != '\n')
			return frame_fail(f, API_FRAME_BAD);
		f->chunk = API_CHUNK_SIZE;
		f->left = 0;
		return API_FRAME_OK;
	case API_CHUNK_TRAILER:
		/* Trailer lines count against the head bound. */
		if (++f->head_bytes > f->head_max)
			return frame_fail(f, API_FRAME_HEAD_TOO_LARGE);
		if (c == '\r')
			return API_FRAME_OK;
		if (c != '\n') {
			f->chunk_line++;
			return API_FRAME_OK;
		}
		if (f->chunk_line == 0)
			frame_request_done(f);
		f->chunk_line = 0;
		return API_FRAME_OK;
	case API_CHUNK_DATA:
		break;
	}
	return API_FRAME_OK;
}

/* Up to avail bytes of the body or of this chunk; returns how many. */
static size_t
frame_take(struct api_frame *f, size_t avail)
{
	uint64_t take = avail < f->left ? avail : f->left;

	f->left -= take;
	f->body_bytes += take;
	return (size_t)take;
}

enum api_frame_error
api_frame_feed(struct api_frame *f, const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = p[i];

		switch (f->state) {
		case API_FRAME_ERROR:
			return f->error;
		case API_FRAME_IDLE:
			/* Empty lines before a request line are skipped. */
			if (c == '\r' || c == '\n') {
				i++;
				break;
			}
			frame_head_start(f);
			break;
		case API_FRAME_HEAD:
			i++;
			if (frame_head_byte(f, c) != API_FRAME_OK)
				return f->error;
			break;
		case API_FRAME_BODY:
			i += frame_take(f, n - i);
			if (f->left == 0)
				frame_request_done(f);
			break;
		case API_FRAME_CHUNKED:
			if (f->chunk == API_CHUNK_DATA) {
				i += frame_take(f, n - i);
				if (f->left == 0)
					f->chunk = API_CHUNK_DATA_END;
				break;
			}
			i++;
			if (frame_chunk_byte(f, c) != API_FRAME_OK)
				return f->error;
			break;
		}
	}
	return f->state == API_FRAME_ERROR ? f->error : API_FRAME_OK;
}
