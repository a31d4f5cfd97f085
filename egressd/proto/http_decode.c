/*
 * http_decode: gzip and deflate content codings, streamed (see
 * http_decode.h).
 */
#include "egressd/proto/http_decode.h"
#include "util/secmem.h"
#include "util/text.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ZLIB_CONST /* next_in is const: zlib never writes the input */
#include <zlib.h>

struct http_decode {
	z_stream z;
	enum http_coding coding;
	struct http_decode_limits lim;
	bool started; /* inflateInit2 done */
	bool at_end; /* the last stream (member) ended here */
	enum http_decode_why why; /* set once, for good */
	/* deflate: the first two bytes, until they tell zlib from raw */
	uint8_t head[2];
	size_t nhead, head_fed;
	uint64_t in, out;
};

static const struct {
	const char *name;
	enum http_coding c;
} coding_names[] = {
    {"identity", HTTP_CODING_IDENTITY},
    {"gzip", HTTP_CODING_GZIP},
    {"x-gzip", HTTP_CODING_GZIP},
    {"deflate", HTTP_CODING_DEFLATE},
    {"br", HTTP_CODING_BR},
    {"zstd", HTTP_CODING_ZSTD},
    {"compress", HTTP_CODING_COMPRESS},
    {"x-compress", HTTP_CODING_COMPRESS},
};

static enum http_coding
coding_one(const char *p, size_t n)
{
	size_t i;

	text_trim_ows(&p, &n);
	for (i = 0; i < sizeof(coding_names) / sizeof(coding_names[0]); i++)
		if (strlen(coding_names[i].name) == n &&
		    strncasecmp(p, coding_names[i].name, n) == 0)
			return coding_names[i].c;
	return HTTP_CODING_OTHER;
}

enum http_coding
http_coding_parse(const char *p, size_t n)
{
	enum http_coding got = HTTP_CODING_IDENTITY, c;
	const char *end = p + n, *comma;
	bool one = false;

	for (;;) {
		comma = memchr(p, ',', (size_t)(end - p));
		c = coding_one(p, (size_t)((comma != NULL ? comma : end) - p));
		if (c != HTTP_CODING_IDENTITY) {
			if (one)
				return HTTP_CODING_LIST;
			one = true;
			got = c;
		}
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return got;
}

const char *
http_coding_name(enum http_coding c)
{
	static const char *const names[] = {
	    [HTTP_CODING_IDENTITY] = "identity",
	    [HTTP_CODING_GZIP] = "gzip",
	    [HTTP_CODING_DEFLATE] = "deflate",
	    [HTTP_CODING_BR] = "br",
	    [HTTP_CODING_ZSTD] = "zstd",
	    [HTTP_CODING_COMPRESS] = "compress",
	    [HTTP_CODING_LIST] = "list",
	    [HTTP_CODING_OTHER] = "other",
	};

	return (unsigned)c < sizeof(names) / sizeof(names[0]) ? names[c] : "?";
}

const char *
http_decode_why_name(enum http_decode_why w)
{
	static const char *const names[] = {
	    [HTTP_DECODE_OK] = "",
	    [HTTP_DECODE_CORRUPT] = "corrupt",
	    [HTTP_DECODE_TRAILING] = "trailing_data",
	    [HTTP_DECODE_TRUNCATED] = "truncated",
	    [HTTP_DECODE_RATIO] = "ratio",
	    [HTTP_DECODE_SIZE] = "size",
	    [HTTP_DECODE_NOMEM] = "nomem",
	};

	return (unsigned)w < sizeof(names) / sizeof(names[0]) ? names[w] : "?";
}

/*
 * zlib's allocations carry their size in front, so the free can wipe
 * them: the window holds the last 32 KiB of decoded body.
 */
static voidpf
dec_zalloc(voidpf opaque, uInt items, uInt size)
{
	size_t *p;

	(void)opaque;
	if (size != 0 && items > (SIZE_MAX - sizeof(size_t)) / size)
		return Z_NULL;
	if ((p = malloc(sizeof(size_t) + (size_t)items * size)) == NULL)
		return Z_NULL;
	*p = (size_t)items * size;
	return p + 1;
}

static void
dec_zfree(voidpf opaque, voidpf addr)
{
	size_t *p = (size_t *)addr - 1;

	(void)opaque;
	secmem_wipe(p, sizeof(size_t) + *p);
	free(p);
}

struct http_decode *
http_decode_new(enum http_coding c, const struct http_decode_limits *l)
{
	struct http_decode *d;

	if (c != HTTP_CODING_GZIP && c != HTTP_CODING_DEFLATE)
		return NULL;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return NULL;
	d->coding = c;
	if (l != NULL) {
		d->lim = *l;
	} else {
		d->lim.out_max = HTTP_DECODE_OUT_MAX;
		d->lim.ratio_max = HTTP_DECODE_RATIO_MAX;
		d->lim.ratio_free = HTTP_DECODE_RATIO_FREE;
	}
	d->z.zalloc = dec_zalloc;
	d->z.zfree = dec_zfree;
	return d;
}

void
http_decode_free(struct http_decode *d)
{
	if (d == NULL)
		return;
	if (d->started)
		(void)inflateEnd(&d->z);
	secmem_wipe(d, sizeof(*d));
	free(d);
}

static enum http_decode_rc
dec_fail(struct http_decode *d, enum http_decode_why why, struct err *e)
{
	const char *c;

	if (d->why == HTTP_DECODE_OK)
		d->why = why;
	c = http_coding_name(d->coding);
	switch (d->why) {
	case HTTP_DECODE_TRAILING:
		err_set(e, "data after the end of the %s stream", c);
		break;
	case HTTP_DECODE_TRUNCATED:
		err_set(e, "the body ended inside the %s stream", c);
		break;
	case HTTP_DECODE_RATIO:
		err_set(e,
		    "decompression bomb: the %s stream expands more than "
		    "%u times",
		    c, d->lim.ratio_max);
		break;
	case HTTP_DECODE_SIZE:
		err_set(e,
		    "decompression bomb: the %s stream expands beyond %llu "
		    "bytes",
		    c, (unsigned long long)d->lim.out_max);
		break;
	case HTTP_DECODE_NOMEM:
		err_set(e, "out of memory decoding %s", c);
		break;
	default:
		err_set(e, "not a valid %s stream", c);
		break;
	}
	return HTTP_DECODE_BAD;
}

/* zlib's header check (RFC 1950 2.2): deflate method, a window of at
 * most 32 KiB, and the 16-bit header a multiple of 31. */
static bool
dec_is_zlib(const uint8_t h[2])
{
	return (h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 &&
	    ((unsigned)h[0] << 8 | h[1]) % 31 == 0;
}

static int
dec_start(struct http_decode *d)
{
	int bits = d->coding == HTTP_CODING_GZIP ? 16 + MAX_WBITS
	    : dec_is_zlib(d->head)               ? MAX_WBITS
	                                         : -MAX_WBITS;

	if (inflateInit2(&d->z, bits) != Z_OK)
		return -1;
	d->started = true;
	return 0;
}

/*
 * One inflate call over in[0..len) into out[0..cap): *used and *nout
 * what it took and gave. The limits are checked on the totals; the
 * output of a call that crosses one is withheld.
 */
static enum http_decode_rc
dec_inflate(struct http_decode *d, const uint8_t *in, size_t len, size_t *used,
    uint8_t *out, size_t cap, size_t *nout, struct err *e)
{
	uInt avail = cap > UINT_MAX ? UINT_MAX : (uInt)cap;
	uint64_t room = d->lim.out_max - d->out; /* out <= out_max here */
	int zr;

	*used = *nout = 0;
	if (d->at_end) {
		if (len == 0)
			return HTTP_DECODE_AGAIN;
		if (d->coding != HTTP_CODING_GZIP)
			return dec_fail(d, HTTP_DECODE_TRAILING, e);
		/* another gzip member (RFC 1952 2.2) */
		if (inflateReset(&d->z) != Z_OK)
			return dec_fail(d, HTTP_DECODE_CORRUPT, e);
		d->at_end = false;
	}
	if (room < avail)
		avail = (uInt)room + 1; /* one byte past the cap tells */
	d->z.next_in = in;
	d->z.avail_in = len > UINT_MAX ? UINT_MAX : (uInt)len;
	d->z.next_out = out;
	d->z.avail_out = avail;
	zr = inflate(&d->z, Z_NO_FLUSH);
	*used = (size_t)(d->z.next_in - in);
	*nout = (size_t)(d->z.next_out - out);
	d->in += *used;
	d->out += *nout;
	switch (zr) {
	case Z_STREAM_END:
		d->at_end = true;
		break;
	case Z_OK:
	case Z_BUF_ERROR: /* no progress possible: more input needed */
		break;
	case Z_MEM_ERROR:
		return dec_fail(d, HTTP_DECODE_NOMEM, e);
	default: /* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR */
		return dec_fail(d, HTTP_DECODE_CORRUPT, e);
	}
	if (d->out > d->lim.out_max)
		return dec_fail(d, HTTP_DECODE_SIZE, e);
	if (d->lim.ratio_max > 0 && d->out > d->lim.ratio_free &&
	    d->out / d->lim.ratio_max > d->in)
		return dec_fail(d, HTTP_DECODE_RATIO, e);
	return *nout > 0 ? HTTP_DECODE_DATA : HTTP_DECODE_AGAIN;
}

static enum http_decode_rc
dec_feed(struct http_decode *d, const uint8_t *in, size_t len, size_t *used,
    uint8_t *out, size_t cap, size_t *nout, struct err *e)
{
	enum http_decode_rc rc;
	size_t took = 0, u;

	*used = *nout = 0;
	if (d->why != HTTP_DECODE_OK)
		return dec_fail(d, d->why, e);
	if (!d->started) {
		/* deflate waits for two bytes to tell zlib from raw */
		if (d->coding == HTTP_CODING_DEFLATE) {
			while (d->nhead < 2 && took < len)
				d->head[d->nhead++] = in[took++];
			*used = took;
			if (d->nhead < 2)
				return HTTP_DECODE_AGAIN;
		}
		if (dec_start(d) == -1)
			return dec_fail(d, HTTP_DECODE_NOMEM, e);
	}
	if (d->head_fed < d->nhead) {
		rc = dec_inflate(d, d->head + d->head_fed,
		    d->nhead - d->head_fed, &u, out, cap, nout, e);
		d->head_fed += u;
		if (rc != HTTP_DECODE_AGAIN)
			return rc; /* *used: the head bytes taken from in */
		if (d->head_fed < d->nhead)
			return dec_fail(d, HTTP_DECODE_CORRUPT, e);
	}
	/* the input must be done with, or zlib may hold more output */
	do {
		rc = dec_inflate(
		    d, in + took, len - took, &u, out, cap, nout, e);
		took += u;
	} while (rc == HTTP_DECODE_AGAIN && took < len && u > 0);
	*used = took;
	if (rc == HTTP_DECODE_AGAIN && took < len)
		return dec_fail(d, HTTP_DECODE_CORRUPT, e); /* no progress */
	return rc;
}

enum http_decode_rc
http_decode_feed(struct http_decode *d, const uint8_t *in, size_t len,
    size_t *used, uint8_t *out, size_t cap, size_t *nout, struct err *e)
{
	enum http_decode_rc rc = dec_feed(d, in, len, used, out, cap, nout, e);

	if (rc == HTTP_DECODE_BAD)
		*nout = 0; /* what crossed a limit, or came before the error,
		              in this call is withheld */
	return rc;
}

int
http_decode_finish(struct http_decode *d, struct err *e)
{
	if (d->why != HTTP_DECODE_OK) {
		(void)dec_fail(d, d->why, e);
		return -1;
	}
	if (d->at_end || (d->in == 0 && d->nhead == 0))
		return 0;
	(void)dec_fail(d, HTTP_DECODE_TRUNCATED, e);
	return -1;
}

enum http_decode_why
http_decode_why(const struct http_decode *d)
{
	return d->why;
}

uint64_t
http_decode_in(const struct http_decode *d)
{
	return d->in + d->nhead - d->head_fed;
}

uint64_t
http_decode_out(const struct http_decode *d)
{
	return d->out;
}
