/*
 * Fuzz target for egressd/proto/http_decode.c. The input: one byte choosing
 * the coding ('d': deflate, anything else: gzip), then the body. It is
 * decoded with no ratio limit as a reference, and with the limits
 * (1 MiB out, 100:1 after 4 KiB) in three segmentations: whole input into
 * 4 KiB buffers, single bytes into 7-byte buffers, 7-byte pieces into
 * 1-byte buffers. Invariants (abort on violation):
 *  - what any run gives out is a prefix of the reference's output (or
 *    the reference's of it): segmentation never changes a byte;
 *  - a run that ends cleanly gives exactly the reference's bytes;
 *  - runs stop for the same reason, except the ratio (its check sees how
 *    much input zlib took, which depends on the buffers);
 *  - never more than the size limit out; a run stopped by the ratio gave
 *    out no more than the free allowance or the ratio times its input;
 *  - every call keeps to its input and output bounds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/http_decode.h"
#include "fuzz/fuzz_check.h"

#define OUT_MAX (1u << 20)

struct run {
	enum http_decode_why why;
	size_t nout;
	uint64_t in;
};

static struct run
run(enum http_coding c, const struct http_decode_limits *l, const uint8_t *in,
    size_t size, size_t piece, size_t cap, uint8_t *out)
{
	struct http_decode *d = http_decode_new(c, l);
	struct run r = {HTTP_DECODE_OK, 0, 0};
	uint8_t buf[4096];
	struct err e;
	size_t off = 0;

	check(d != NULL && cap <= sizeof(buf));
	while (off < size) {
		size_t lim = piece && size - off > piece ? piece : size - off;
		size_t used, got;
		enum http_decode_rc rc;

		do {
			rc = http_decode_feed(
			    d, in + off, lim, &used, buf, cap, &got, &e);
			check(used <= lim && got <= cap);
			check((rc == HTTP_DECODE_DATA) == (got > 0));
			check(r.nout + got <= OUT_MAX);
			memcpy(out + r.nout, buf, got);
			r.nout += got;
			off += used;
			lim -= used;
		} while (rc == HTTP_DECODE_DATA);
		if (rc == HTTP_DECODE_BAD)
			goto out;
		check(lim == 0);
	}
	(void)http_decode_finish(d, &e);
out:
	r.why = http_decode_why(d);
	r.in = http_decode_in(d);
	check(r.in <= size);
	http_decode_free(d);
	return r;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct {
		size_t piece, cap;
	} segs[] = {{0, 4096}, {1, 7}, {7, 1}};
	struct http_decode_limits nolim = {OUT_MAX, 0, 0};
	struct http_decode_limits lim = {OUT_MAX, 100, 4096};
	uint8_t *ref = malloc(OUT_MAX), *out = malloc(OUT_MAX);
	enum http_coding c;
	struct run rr, r, r0 = {HTTP_DECODE_OK, 0, 0};
	size_t i, n;

	check(ref != NULL && out != NULL);
	if (size == 0)
		goto done;
	c = data[0] == 'd' ? HTTP_CODING_DEFLATE : HTTP_CODING_GZIP;
	rr = run(c, &nolim, data + 1, size - 1, 0, 4096, ref);
	check(rr.why != HTTP_DECODE_RATIO);
	for (i = 0; i < sizeof(segs) / sizeof(segs[0]); i++) {
		r = run(c, &lim, data + 1, size - 1, segs[i].piece, segs[i].cap,
		    out);
		n = r.nout < rr.nout ? r.nout : rr.nout;
		check(memcmp(out, ref, n) == 0);
		if (r.why == HTTP_DECODE_OK)
			check(rr.why == HTTP_DECODE_OK && r.nout == rr.nout);
		else if (r.why == HTTP_DECODE_RATIO)
			check(r.nout <= lim.ratio_free ||
			    r.nout <= lim.ratio_max * r.in);
		else
			check(r.why == rr.why);
		if (i == 0)
			r0 = r;
		else if (r.why != HTTP_DECODE_RATIO &&
		    r0.why != HTTP_DECODE_RATIO)
			check(r.why == r0.why);
	}
done:
	free(ref);
	free(out);
	return 0;
}
