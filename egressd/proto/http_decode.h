/*
 * http_decode: the gzip and deflate content codings (RFC 9110 8.4.1)
 * decoded as a stream with zlib, pure: compressed bytes in as they
 * arrive, decoded bytes out into the caller's buffer, at most its size
 * per call, no I/O. The vault's redacted responses (--vault-compressed
 * decode) use it so a compressed body is scanned instead of refused.
 *
 * Strict: gzip (one member after another, as RFC 1952 allows) or deflate
 * (zlib-wrapped, RFC 1950, or raw, RFC 1951, told apart by the zlib
 * header's check bits, as browsers and curl do); a corrupt stream, bytes
 * after a deflate stream's end, and a body that ends inside a stream
 * (http_decode_finish) are errors.
 *
 * Bounded: decoded bytes per compressed byte (a decompression bomb turns
 * kilobytes into gigabytes) once more than the free allowance came out,
 * and decoded bytes in all; the output of the call that crosses a limit
 * is withheld. zlib's state (some 45 KiB: the 32 KiB window holds the
 * last decoded bytes, which may echo a secret) is wiped when freed.
 */
#ifndef EGRESSD_HTTP_DECODE_H
#define EGRESSD_HTTP_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Defaults of struct http_decode_limits. */
#define HTTP_DECODE_OUT_MAX (UINT64_C(1) << 30) /* decoded bytes, in all */
#define HTTP_DECODE_RATIO_MAX 100 /* decoded bytes per compressed byte */
#define HTTP_DECODE_RATIO_FREE (64u << 10) /* decoded before it counts */

/* A Content-Encoding value's coding; http_coding_name() is the stable
 * log spelling. */
enum http_coding {
	HTTP_CODING_IDENTITY = 0,
	HTTP_CODING_GZIP, /* gzip, x-gzip */
	HTTP_CODING_DEFLATE,
	HTTP_CODING_BR,
	HTTP_CODING_ZSTD,
	HTTP_CODING_COMPRESS, /* compress, x-compress (LZW) */
	HTTP_CODING_LIST, /* more than one coding applied */
	HTTP_CODING_OTHER,
};

/* Why a decoder stopped (HTTP_DECODE_BAD); http_decode_why_name(). */
enum http_decode_why {
	HTTP_DECODE_OK = 0,
	HTTP_DECODE_CORRUPT, /* not a valid stream of its coding */
	HTTP_DECODE_TRAILING, /* bytes after a deflate stream's end */
	HTTP_DECODE_TRUNCATED, /* the body ended inside the stream */
	HTTP_DECODE_RATIO, /* more than ratio_max out per byte in */
	HTTP_DECODE_SIZE, /* more than out_max out */
	HTTP_DECODE_NOMEM,
};

struct http_decode_limits {
	uint64_t out_max;
	unsigned ratio_max;
	uint64_t ratio_free;
};

enum http_decode_rc {
	HTTP_DECODE_AGAIN = 0, /* all input consumed, no output pending */
	HTTP_DECODE_DATA, /* *nout > 0 bytes in out: call again */
	HTTP_DECODE_BAD, /* stopped for good; e and http_decode_why() say why */
};

struct http_decode;

/*
 * The coding of a Content-Encoding field value p[0..n) (one field; a
 * list of codings is HTTP_CODING_LIST, unless every other member is
 * identity). Case-insensitive, surrounding whitespace ignored.
 */
enum http_coding http_coding_parse(const char *p, size_t n);
const char *http_coding_name(enum http_coding c);
const char *http_decode_why_name(enum http_decode_why w);

/*
 * A decoder of c (GZIP or DEFLATE), limits l (NULL: the defaults above).
 * NULL: out of memory, or another coding.
 */
struct http_decode *http_decode_new(
    enum http_coding c, const struct http_decode_limits *l);
/* Wipes zlib's state; NULL is a no-op. */
void http_decode_free(struct http_decode *d);

/*
 * Consumes bytes of in[0..len) and writes decoded bytes to out[0..cap)
 * (cap > 0): DATA with *nout bytes (*used counts the input consumed;
 * call again with in + *used, also when that is nothing left: zlib may
 * hold more output), AGAIN when all len bytes were consumed and nothing
 * more is pending, BAD (and for good) with e.
 */
enum http_decode_rc http_decode_feed(struct http_decode *d, const uint8_t *in,
    size_t len, size_t *used, uint8_t *out, size_t cap, size_t *nout,
    struct err *e);
/*
 * The body ended: 0 when it ended at a stream's end (or held nothing
 * at all), -1 (TRUNCATED, or the earlier failure) with e.
 */
int http_decode_finish(struct http_decode *d, struct err *e);
enum http_decode_why http_decode_why(const struct http_decode *d);
uint64_t http_decode_in(const struct http_decode *d); /* bytes consumed */
uint64_t http_decode_out(const struct http_decode *d); /* bytes decoded */

#endif
