/*
 * Fuzzes api_frame_feed(): the API's request framing over hostile bytes.
 * Input: byte 0 picks how the rest is cut into feeds (1..16 bytes, or all
 * at once when 0), the rest is what a client sends.
 * Invariants (abort on violation):
 *   - the answer never depends on how the bytes were cut: cut feeds end in
 *     the same state, error and request count as one feed of everything;
 *   - an error is sticky and is the state's, and OK means no error;
 *   - no head is longer than head_max, no body longer than body_max;
 *   - requests only grow.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/api/api_frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_HEAD_MAX 256
#define FZ_BODY_MAX 512

static void
fz_fail(const char *what)
{
	fprintf(stderr, "fuzz_api_frame: %s\n", what);
	abort();
}

static void
fz_check(const struct api_frame *f, enum api_frame_error e)
{
	if ((e == API_FRAME_OK) != (f->state != API_FRAME_ERROR))
		fz_fail("error and state disagree");
	if (e != API_FRAME_OK && f->error != e)
		fz_fail("returned error is not the recorded one");
	if (f->state == API_FRAME_HEAD && f->head_bytes > FZ_HEAD_MAX)
		fz_fail("head longer than head_max");
	if ((f->state == API_FRAME_BODY || f->state == API_FRAME_CHUNKED) &&
	    f->body_bytes > FZ_BODY_MAX)
		fz_fail("body longer than body_max");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_frame whole, cut;
	enum api_frame_error ew, ec = API_FRAME_OK;
	size_t step, off;
	uint64_t last = 0;

	if (size < 1)
		return 0;
	step = data[0] % 17;
	data++;
	size--;
	api_frame_init(&whole, FZ_HEAD_MAX, FZ_BODY_MAX);
	api_frame_init(&cut, FZ_HEAD_MAX, FZ_BODY_MAX);
	ew = api_frame_feed(&whole, data, size);
	fz_check(&whole, ew);
	for (off = 0; off < size;) {
		size_t n = step == 0 ? size - off : step;
		if (n > size - off)
			n = size - off;
		ec = api_frame_feed(&cut, data + off, n);
		fz_check(&cut, ec);
		if (cut.requests < last)
			fz_fail("request count went back");
		last = cut.requests;
		off += n;
	}
	if (ec != ew || cut.state != whole.state ||
	    cut.requests != whole.requests)
		fz_fail("cut feeds disagree with one feed");
	if (ew != API_FRAME_OK &&
	    api_frame_feed(&whole, (const uint8_t *)"\r\n\r\n", 4) != ew)
		fz_fail("error not sticky");
	return 0;
}
