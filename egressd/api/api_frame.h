/*
 * api_frame: where the requests of one API connection begin and end.
 *
 * The control API runs on libevent's evhttp, which answers an oversized
 * head or body itself (an HTML page) and has only an idle timeout, reset
 * by every byte: a client that drips a byte every few seconds holds its
 * connection slot for ever. api.c therefore reads every byte that arrives
 * through this framer first, before evhttp parses it. The framer follows
 * HTTP/1.1 message framing as evhttp does (request line, header lines up
 * to an empty line, then no body, Content-Length bytes, or chunks and a
 * trailer) and says three things: whether a head or a body is being read
 * now (api.c runs a deadline for each), and when a head is larger than
 * head_max or a body larger than body_max (api.c answers 431 or 413 in
 * the API's own text format and closes), or framing it cannot follow
 * (400). It never decides anything else: evhttp parses the request.
 *
 * Pure: bytes in, state out; no I/O, no allocation. Fuzzed
 * (fuzz/fuzz_api_frame.c), unit-tested (tests/unit/egressd/api/test_api_frame.c).
 */
#ifndef EGRESSD_API_FRAME_H
#define EGRESSD_API_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define API_FRAME_LINE_KEEP 128 /* bytes of a header line kept (CL, TE) */
#define API_FRAME_CHUNK_LINE_MAX 1024 /* chunk-size line with extensions */

enum api_frame_state {
	API_FRAME_IDLE, /* between requests (leading empty lines skipped) */
	API_FRAME_HEAD, /* request line and header lines */
	API_FRAME_BODY, /* Content-Length body */
	API_FRAME_CHUNKED, /* chunked body, trailer included */
	API_FRAME_ERROR, /* sticky: see error */
};

enum api_frame_error {
	API_FRAME_OK = 0,
	API_FRAME_HEAD_TOO_LARGE, /* 431 */
	API_FRAME_BODY_TOO_LARGE, /* 413 */
	API_FRAME_BAD, /* 400: Content-Length or chunk framing unreadable */
};

enum api_frame_chunk {
	API_CHUNK_SIZE,
	API_CHUNK_EXT, /* after ';' up to the end of the size line */
	API_CHUNK_DATA,
	API_CHUNK_DATA_END, /* CRLF after the data */
	API_CHUNK_TRAILER,
};

struct api_frame {
	enum api_frame_state state;
	enum api_frame_error error;
	size_t head_max;
	uint64_t body_max;
	/* Bumped on every change of state: the caller re-arms its
	 * deadline when it moved during a feed. */
	uint64_t seq;
	uint64_t requests; /* complete requests framed */

	/* HEAD */
	size_t head_bytes; /* of this head, line ends included */
	char line[API_FRAME_LINE_KEEP];
	size_t linelen;
	bool line_long; /* the line had more than the kept bytes */
	bool first_line;
	bool no_body; /* HEAD and TRACE requests never have one */
	bool have_length, chunked, seen_te;
	uint64_t length;

	/* BODY and CHUNKED */
	uint64_t left; /* bytes of the body or of this chunk still to come */
	uint64_t body_bytes;
	enum api_frame_chunk chunk;
	size_t chunk_line; /* bytes of the size line or trailer line */
	unsigned chunk_digits;
};

void api_frame_init(struct api_frame *f, size_t head_max, uint64_t body_max);
/*
 * Feeds the next n bytes of the connection. Returns API_FRAME_OK, or the
 * first error (then state is API_FRAME_ERROR and every later feed returns
 * the same error).
 */
enum api_frame_error api_frame_feed(
    struct api_frame *f, const uint8_t *p, size_t n);

#endif
