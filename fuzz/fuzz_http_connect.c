/*
 * Fuzz target for egressd/proto/http_connect.c: the input is what an
 * upstream proxy answers a CONNECT with. Invariants (abort on violation):
 *  - OK: a final status (200..599), a head within the input and within
 *    HTTP_CONNECT_HEAD_MAX that ends in CRLF CRLF, and every proper prefix
 *    of that head is MORE (the head's end is found at one place only, so
 *    no byte of the proxy's is taken as the tunnel's or the reverse);
 *    the same head with other bytes after it parses the same;
 *  - MORE only below the bound;
 *  - a 2xx never carries a body (no Transfer-Encoding, Content-Length 0
 *    at most: checked by the parser, trusted here through the status).
 */
#include <stdint.h>
#include <string.h>

#include "egressd/proto/http_connect.h"
#include "fuzz/fuzz_check.h"

static char tail[HTTP_CONNECT_HEAD_MAX + 16];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	struct http_connect_resp r, r2;
	struct err e;
	enum http_connect_rc rc = http_connect_parse(in, size, &r, &e);
	size_t k;

	if (rc == HTTP_CONNECT_MORE) {
		check(size < HTTP_CONNECT_HEAD_MAX);
		return 0;
	}
	if (rc != HTTP_CONNECT_OK)
		return 0;
	check(r.status >= 200 && r.status <= 599);
	check(r.head_len >= 4 && r.head_len <= size &&
	    r.head_len <= HTTP_CONNECT_HEAD_MAX);
	check(memcmp(in + r.head_len - 4, "\r\n\r\n", 4) == 0);
	for (k = 0; k < r.head_len; k++)
		check(http_connect_parse(in, k, &r2, &e) == HTTP_CONNECT_MORE);
	memcpy(tail, in, r.head_len);
	memcpy(tail + r.head_len, "\x16\x03\x01junk", 7);
	check(http_connect_parse(tail, r.head_len + 7, &r2, &e) ==
	        HTTP_CONNECT_OK &&
	    r2.status == r.status && r2.head_len == r.head_len);
	return 0;
}
