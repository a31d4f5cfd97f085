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
 *
 * Trailers: a caller that forwards them (the vault's redacted responses,
 * which re-frame the body) lends storage with http_chunk_keep_trailers();
 * the decoder copies the validated trailer section there (bounded by
 * HTTP_CHUNK_TRAILER_MAX, so it always fits), and at DONE
 * http_chunk_trailer_next() gives the fields one by one. Without it the
 * decoder keeps nothing and the caller forwards the bytes it consumed.
 */
#ifndef EGRESSD_HTTP_CHUNK_H
#define EGRESSD_HTTP_CHUNK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/proto/http_head.h"
#include "util/err.h"

#define HTTP_CHUNK_LINE_MAX 4096 /* a chunk-size line with extensions */
#define HTTP_CHUNK_TRAILER_MAX 16384 /* the whole trailer section */

enum http_chunk_rc {
	HTTP_CHUNK_AGAIN = 0, /* all input consumed; feed more */
	HTTP_CHUNK_DATA, /* *data is body data (inside the input) */
	HTTP_CHUNK_DONE, /* the last chunk and trailers are complete */
	HTTP_CHUNK_BAD, /* malformed; e says why */
};

/* A trailer section as received: field lines with their CRLF (the
 * final empty line not included). Owned by the caller. */
struct http_chunk_trailers {
	size_t len;
	char buf[HTTP_CHUNK_TRAILER_MAX];
};

struct http_chunk {
	int state; /* private */
	uint64_t left; /* bytes of the current chunk still to come */
	size_t line; /* bytes of the current line (size or trailer) */
	size_t trailer; /* bytes of the trailer section so far */
	uint64_t total; /* body bytes decoded */
	struct http_chunk_trailers *keep; /* borrowed; NULL: not kept */
};

void http_chunk_init(struct http_chunk *c);
/*
 * From now on the trailer section goes to t (emptied here), which c
 * borrows until DONE or BAD. Set it before the last chunk arrives.
 */
void http_chunk_keep_trailers(
    struct http_chunk *c, struct http_chunk_trailers *t);
/*
 * The trailer field at *pos of a section kept by a decoder that returned
 * DONE (start with *pos = 0): *f's spans point into t->buf (name as
 * sent, value without leading and trailing whitespace), *pos moves past
 * it. false when there is none left.
 */
bool http_chunk_trailer_next(
    const struct http_chunk_trailers *t, size_t *pos, struct http_header *f);
/*
 * May a field named name be forwarded from a trailer section? Not the
 * ones a recipient must know before the content (RFC 9110 6.5.1):
 * framing (Transfer-Encoding, Content-Length, Trailer), hop-by-hop
 * fields, routing (Host), request modifiers (Expect, Range, the
 * conditionals), authentication (Authorization, WWW-Authenticate,
 * Cookie, Set-Cookie, ...), response controls (Cache-Control, Age,
 * Expires, Date, Location, Retry-After, Vary) and the content's format
 * (Content-Type, Content-Encoding, Content-Range).
 */
bool http_chunk_trailer_allowed(const struct http_span *name);

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

/*
 * A chunked body held whole (the vault substitutes placeholders in a
 * request body only when it has all of it): in[0..len) starts at the
 * body's first byte. DONE: the body decoded into *out (malloc'd, *olen
 * bytes; the caller frees it), the chunked framing took *wire bytes of
 * in (what follows is the next message). AGAIN: in ends inside the body.
 * SKIP: not collected (e says why): more than max body bytes, or a
 * trailer section (it would have nowhere to go once the body is sent
 * with a Content-Length). BAD: malformed (e says why). NOMEM.
 */
enum http_chunk_collect_rc {
	HTTP_CHUNK_COLLECT_DONE,
	HTTP_CHUNK_COLLECT_AGAIN,
	HTTP_CHUNK_COLLECT_SKIP,
	HTTP_CHUNK_COLLECT_BAD,
	HTTP_CHUNK_COLLECT_NOMEM,
};

enum http_chunk_collect_rc http_chunk_collect(const uint8_t *in, size_t len,
    size_t max, uint8_t **out, size_t *olen, size_t *wire, struct err *e);

#endif
