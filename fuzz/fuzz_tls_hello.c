/*
 * Fuzz target for egressd/proto/tls_hello.c. The input is the first bytes a
 * client sends. Invariants (abort on violation):
 *  - the result is one of the four codes; OK consumes no more than given;
 *  - what was parsed from a prefix is all there is: the consumed bytes
 *    alone parse to the same struct, and every shorter prefix of them is
 *    MORE (the proxy waits, never decides early on a partial hello);
 *  - the hello re-framed into records of other sizes parses the same
 *    (segment and record boundaries never change what egressd sees);
 *  - an SNI is lowercase, without a trailing dot, of host name characters.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proto/tls_hello.h"
#include "fuzz/fuzz_check.h"

static bool
same(const struct tls_hello *a, const struct tls_hello *b)
{
	size_t i,
	    n = a->nalpn < TLS_HELLO_ALPN_MAX ? a->nalpn : TLS_HELLO_ALPN_MAX;

	if (a->has_sni != b->has_sni || a->sni_is_ip != b->sni_is_ip ||
	    strcmp(a->sni, b->sni) != 0 || a->has_ech != b->has_ech ||
	    a->has_esni != b->has_esni || a->has_alpn != b->has_alpn ||
	    a->nalpn != b->nalpn || a->legacy_version != b->legacy_version ||
	    a->max_version != b->max_version || a->nexts != b->nexts)
		return false;
	for (i = 0; i < n; i++)
		if (strcmp(a->alpn[i], b->alpn[i]) != 0)
			return false;
	return true;
}

/* The handshake bytes of the records in buf[0..n) (all type 22). */
static size_t
unframe(const uint8_t *buf, size_t n, uint8_t *out)
{
	size_t off = 0, k = 0, rl;

	while (off + 5 <= n) {
		rl = (size_t)buf[off + 3] << 8 | buf[off + 4];
		memcpy(out + k, buf + off + 5, rl);
		k += rl;
		off += 5 + rl;
	}
	return k;
}

static size_t
reframe(const uint8_t *msg, size_t n, size_t rsize, uint8_t *out)
{
	size_t off = 0, k = 0, take;

	while (off < n) {
		take = n - off < rsize ? n - off : rsize;
		out[k++] = 22;
		out[k++] = 3;
		out[k++] = 1;
		out[k++] = (uint8_t)(take >> 8);
		out[k++] = (uint8_t)take;
		memcpy(out + k, msg + off, take);
		k += take;
		off += take;
	}
	return k;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = {
	    1, 3, 64, 1000, TLS_RECORD_PLAINTEXT_MAX};
	struct tls_hello h, g;
	struct err e;
	enum tls_hello_rc rc, rc2;
	uint8_t *msg, *re;
	size_t i, n, m;

	rc = tls_hello_parse(data, size, &h, &e);
	check(rc == TLS_HELLO_OK || rc == TLS_HELLO_MORE ||
	    rc == TLS_HELLO_NOT_TLS || rc == TLS_HELLO_BAD);
	if (rc == TLS_HELLO_MORE && size > 0) {
		rc2 = tls_hello_parse(data, size / 2, &g, &e);
		check(rc2 == TLS_HELLO_MORE);
	}
	if (rc != TLS_HELLO_OK)
		return 0;
	check(h.consumed > 0 && h.consumed <= size);
	if (h.has_sni) {
		n = strlen(h.sni);
		check(n > 0 && n <= TLS_HELLO_SNI_MAX && h.sni[n - 1] != '.');
		for (i = 0; i < n; i++)
			check((h.sni[i] >= 'a' && h.sni[i] <= 'z') ||
			    (h.sni[i] >= '0' && h.sni[i] <= '9') ||
			    h.sni[i] == '-' || h.sni[i] == '_' ||
			    h.sni[i] == '.' ||
			    (h.sni_is_ip && h.sni[i] == ':'));
	}
	check(tls_hello_parse(data, h.consumed, &g, &e) == TLS_HELLO_OK);
	check(same(&h, &g) && g.consumed == h.consumed);
	/* every shorter prefix waits (all of them for small inputs, a
	 * sample for large ones) */
	for (i = 0; i<h.consumed; i += h.consumed> 600 ? 97 : 1)
		check(tls_hello_parse(data, i, &g, &e) == TLS_HELLO_MORE);
	msg = malloc(h.consumed);
	re = malloc(h.consumed * 6 + 16);
	check(msg != NULL && re != NULL);
	n = unframe(data, h.consumed, msg);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		m = reframe(msg, n, sizes[i], re);
		check(tls_hello_parse(re, m, &g, &e) == TLS_HELLO_OK);
		check(same(&h, &g) && g.consumed == m);
	}
	free(msg);
	free(re);
	return 0;
}
