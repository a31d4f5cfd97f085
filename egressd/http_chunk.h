/*
 * http_chunk: a streaming decoder of the chunked transfer coding (RFC 9112
 * 7.1), pure and incremental: bytes in as they arrive, data spans out, no
 * buffering of its own, bounded state.
 *
 * The proxy streams bodies both ways (a chunked upload or an SSE response
 * is never held whole): it feeds each read to http_chunk_feed(), which
 * tells how much of the input it consumed and which part of that is body
 * data. The proxy re-frames (or forwards) what it was told; it never trusts
 * the peer's framing bytes it did not validate. Strict: a chunk size is
 * hex digits only (at most 15, so it fits in 60 bits), then nothing but
 * extensions, each ';' (after optional whitespace) name[=token or
 * quoted-string], the line bounded; every line ends in CRLF, the
 * trailer section is bounded and made of valid header lines.
 */
#ifndef EGRESSD_HTTP_CHUNK_H
#define EGRESSD_HTTP_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define HTTP_CHUNK_LINE_MAX 4096 /* a chunk-size line with extensions */
#define HTTP_CHUNK_TRAILER_MAX 16384 /* the whole trailer section */

enum http_chunk_rc {
	HTTP_CHUNK_AGAIN = 0, /* all input consumed; feed more */
	HTTP_CHUNK_DATA, /* *data is body data (inside the input) */
	HTTP_CHUNK_DONE, /* the last chunk and trailers are complete */
	HTTP_CHUNK_BAD, /* malformed; e says why */
};

struct http_chunk {
	int state; /* private */
	uint64_t left; /* bytes of the current chunk still to come */
	size_t line; /* bytes of the current line (size or trailer) */
	size_t trailer; /* bytes of the trailer section so far */
	uint64_t total; /* body bytes decoded */
};

void http_chunk_init(struct http_chunk *c);

/*
 * Consumes bytes of in[0..len) and returns at the first event: DATA with
 * *data = a span of in (the caller forwards it; *used counts up to its
 * end), DONE with *used the bytes that ended the body (what follows is the
 * next message), AGAIN when all len bytes were consumed without one, BAD.
 * Call again with in + *used for the rest.
 */
enum http_chunk_rc http_chunk_feed(struct http_chunk *c, const uint8_t *in,
    size_t len, size_t *used, const uint8_t **data, size_t *ndata,
    struct err *e);

#endif
