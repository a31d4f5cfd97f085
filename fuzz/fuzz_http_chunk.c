/*
 * Fuzz target for egressd/proto/http_chunk.c. The input is a chunked body (and
 * whatever follows it). Invariants (abort on violation):
 *  - fed whole or one byte at a time or in pieces of 7, the decoder gives
 *    the same outcome, the same data bytes and stops at the same offset:
 *    segment boundaries never change what egressd forwards;
 *  - data spans lie inside the input and add up to what it counts;
 *  - it never decodes more data than it consumed;
 *  - the kept trailer section is the same too, fits its storage, and
 *    comes out as fields with a token name and a value holding no CR,
 *    LF or NUL and no surrounding whitespace, which account for every
 *    kept byte (no field is skipped);
 *  - http_chunk_collect agrees: the same body and end when the decoder
 *    is done and there is no trailer field, SKIP with one (or with a
 *    body over its bound, which it never exceeds), BAD and AGAIN alike.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/http_chunk.h"
#include "egressd/proto/http_head.h"
#include "fuzz/fuzz_check.h"

struct outcome {
	enum http_chunk_rc rc;
	size_t end; /* input offset where it stopped */
	size_t ndata;
	uint64_t total;
};

static struct http_chunk_trailers tw, tp;

static struct outcome
run(const uint8_t *in, size_t size, size_t piece, uint8_t *out,
    struct http_chunk_trailers *t)
{
	struct http_chunk c;
	struct outcome o = {HTTP_CHUNK_AGAIN, 0, 0, 0};
	struct err e;
	size_t off = 0;

	http_chunk_init(&c);
	http_chunk_keep_trailers(&c, t);
	while (off < size) {
		size_t lim = piece && size - off > piece ? piece : size - off;
		size_t used = 0, nd;
		const uint8_t *d;
		enum http_chunk_rc rc =
		    http_chunk_feed(&c, in + off, lim, &used, &d, &nd, &e);

		check(used <= lim);
		if (rc == HTTP_CHUNK_DATA) {
			check(nd > 0 && d >= in + off &&
			    d + nd <= in + off + used);
			memcpy(out + o.ndata, d, nd);
			o.ndata += nd;
		}
		off += used;
		if (rc == HTTP_CHUNK_DONE || rc == HTTP_CHUNK_BAD) {
			o.rc = rc;
			break;
		}
		check(rc == HTTP_CHUNK_DATA || used == lim);
	}
	o.end = off;
	o.total = c.total;
	check(o.total == o.ndata && o.ndata <= o.end);
	check(t->len <= sizeof(t->buf));
	return o;
}

static void
check_fields(const struct http_chunk_trailers *t)
{
	struct http_header f;
	size_t pos = 0, k, len = 0;

	while (http_chunk_trailer_next(t, &pos, &f)) {
		check(f.name.n > 0);
		for (k = 0; k < f.name.n; k++)
			check(http_is_tchar((unsigned char)f.name.p[k]));
		for (k = 0; k < f.value.n; k++)
			check(f.value.p[k] != '\r' && f.value.p[k] != '\n' &&
			    f.value.p[k] != '\0');
		check(f.value.n == 0 ||
		    (f.value.p[0] != ' ' && f.value.p[0] != '\t' &&
		        f.value.p[f.value.n - 1] != ' ' &&
		        f.value.p[f.value.n - 1] != '\t'));
		/* the value lies between the name's ':' and the line's CR */
		check(f.value.p > f.name.p + f.name.n &&
		    f.value.p + f.value.n <= t->buf + pos - 2);
		len = pos;
	}
	check(len == t->len);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *a = malloc(size + 1), *b = malloc(size + 1);
	struct outcome w, p;
	size_t pieces[] = {1, 7};
	size_t i;

	check(a != NULL && b != NULL);
	w = run(data, size, 0, a, &tw);
	if (w.rc == HTTP_CHUNK_DONE)
		check_fields(&tw);
	for (i = 0; i < 2; i++) {
		p = run(data, size, pieces[i], b, &tp);
		check(p.rc == w.rc && p.ndata == w.ndata && p.total == w.total);
		check(memcmp(a, b, w.ndata) == 0);
		check(p.end == w.end);
		check(tp.len == tw.len && memcmp(tp.buf, tw.buf, tw.len) == 0);
	}
	{
		uint8_t *out;
		size_t olen, wire, max = size / 2;
		struct err e;
		enum http_chunk_collect_rc rc =
		    http_chunk_collect(data, size, max, &out, &olen, &wire, &e);

		check(rc != HTTP_CHUNK_COLLECT_NOMEM);
		if (w.rc == HTTP_CHUNK_DONE && tw.len == 0 && w.ndata <= max) {
			check(rc == HTTP_CHUNK_COLLECT_DONE);
			check(olen == w.ndata && wire == w.end);
			check(olen == 0 || memcmp(out, a, olen) == 0);
			free(out);
		} else {
			check(out == NULL);
			if (rc == HTTP_CHUNK_COLLECT_SKIP)
				check(w.ndata > max ||
				    (w.rc == HTTP_CHUNK_DONE && tw.len > 0));
			else
				check((w.rc == HTTP_CHUNK_BAD &&
				          rc == HTTP_CHUNK_COLLECT_BAD) ||
				    (w.rc == HTTP_CHUNK_AGAIN &&
				        rc == HTTP_CHUNK_COLLECT_AGAIN));
		}
	}
	free(a);
	free(b);
	return 0;
}
