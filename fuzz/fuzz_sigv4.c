/*
 * Fuzzes the SigV4 signer (vault/vault_sigv4.c): the canonical URI and
 * query of hostile paths and queries, the presigned-query detector, and
 * the signature over hostile headers. Input: a flags byte (bit 0: S3),
 * then the path, the query and the headers separated by NUL bytes; the
 * headers are "name:value" lines split at '\n'. Invariants:
 *  - a canonical URI or query holds only unreserved bytes, '/' (URI
 *    only), '=' and '&' (query only) and "%XY" escapes in upper-case hex
 *    of bytes that are not unreserved; canonicalizing it again gives the
 *    same bytes (S3 URI, query), and for every other service decoding the
 *    URI once gives the path back;
 *  - the query's parameters are sorted;
 *  - signing either fails with a message or writes
 *    "AWS4-HMAC-SHA256 Credential=..., Signature=" and 64 lowercase hex
 *    digits, the same twice, never holding the secret key.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz/fuzz_check.h"
#include "vault/vault_sigv4.h"

#define FZ_SECRET "fuzzSecretKey/0123456789+ABCDEFGHIJKLMNO"
#define FZ_INPUT_MAX (VAULT_SIGV4_QUERY_MAX + 8192)

static bool
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

static int
hexv(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* s[0..n) is canonical: the bytes of extra and escapes as stated. */
static void
check_canonical(const char *s, size_t n, const char *extra)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (s[i] == '%') {
			check(i + 2 < n);
			check(hexv(s[i + 1]) >= 0 && hexv(s[i + 2]) >= 0);
			check(!unreserved((unsigned char)(hexv(s[i + 1]) * 16 +
			    hexv(s[i + 2]))));
			i += 2;
			continue;
		}
		check(unreserved((unsigned char)s[i]) ||
		    strchr(extra, s[i]) != NULL);
	}
}

static void
fuzz_uri(const char *p, size_t n, bool s3)
{
	char *u = NULL, *again = NULL;
	size_t ul = 0, al = 0, i, k = 0;
	struct err e = {""};

	if (vault_sigv4_uri(p, n, s3, &u, &ul, &e) == -1) {
		check(e.msg[0] != '\0');
		check(n == 0 || p[0] != '/');
		return;
	}
	check(strlen(u) == ul);
	check_canonical(u, ul, "/");
	if (s3) {
		check(vault_sigv4_uri(u, ul, true, &again, &al, &e) == 0);
		check(al == ul && memcmp(again, u, ul) == 0);
		free(again);
	} else {
		/* decoding once gives the path back */
		for (i = 0; i < ul; i++, k++) {
			char c = u[i];
			if (c == '%') {
				c = (char)(hexv(u[i + 1]) * 16 +
				    hexv(u[i + 2]));
				i += 2;
			}
			check(k < n && p[k] == c);
		}
		check(k == n);
	}
	free(u);
}

static int
cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int r = memcmp(a, b, an < bn ? an : bn);

	return r != 0 ? r : an < bn ? -1 : an > bn ? 1 : 0;
}

static void
fuzz_query(const char *q, size_t n)
{
	char *c = NULL, *again = NULL;
	size_t cl = 0, al = 0;
	struct err e = {""};
	const char *s = c, *pn = NULL, *pv = NULL;
	size_t pnl = 0, pvl = 0;

	(void)vault_sigv4_presigned(q, n);
	if (vault_sigv4_query(q, n, &c, &cl, &e) == -1) {
		check(e.msg[0] != '\0');
		return;
	}
	check(strlen(c) == cl);
	check_canonical(c, cl, "=&");
	for (s = c; cl > 0;) {
		const char *end = memchr(s, '&', (size_t)(c + cl - s));
		size_t len =
		    end != NULL ? (size_t)(end - s) : (size_t)(c + cl - s);
		const char *eq = memchr(s, '=', len);
		size_t nl, vl;
		int r;

		check(eq != NULL);
		nl = (size_t)(eq - s);
		vl = len - nl - 1;
		check(memchr(eq + 1, '=', vl) == NULL);
		if (pn != NULL) {
			/* sorted by name, then value */
			r = cmp(pn, pnl, s, nl);
			check(
			    r < 0 || (r == 0 && cmp(pv, pvl, eq + 1, vl) <= 0));
		}
		pn = s;
		pnl = nl;
		pv = eq + 1;
		pvl = vl;
		if (end == NULL)
			break;
		s = end + 1;
	}
	check(vault_sigv4_query(c, cl, &again, &al, &e) == 0);
	check(al == cl && memcmp(again, c, cl) == 0);
	free(again);
	free(c);
}

static void
fuzz_sign(const char *hb, size_t n, const char *path, size_t pn)
{
	struct vault_sigv4_hdr h[VAULT_SIGV4_HEADERS_MAX];
	static char out[VAULT_SIGV4_AUTH_MAX], out2[VAULT_SIGV4_AUTH_MAX];
	struct vault_sigv4_in in;
	size_t nh = 0, i = 0, len = 0, len2 = 0;
	struct err e = {""};

	h[nh++] = (struct vault_sigv4_hdr){"host", 4, "s3.amazonaws.com", 16};
	while (i < n && nh < VAULT_SIGV4_HEADERS_MAX) {
		const char *l = hb + i, *nl = memchr(l, '\n', n - i);
		size_t ll = nl != NULL ? (size_t)(nl - l) : n - i;
		const char *colon = memchr(l, ':', ll);

		if (colon != NULL)
			h[nh++] =
			    (struct vault_sigv4_hdr){l, (size_t)(colon - l),
			        colon + 1, ll - (size_t)(colon - l) - 1};
		i += ll + 1;
	}
	memset(&in, 0, sizeof(in));
	in.method = "PUT";
	in.method_len = 3;
	in.uri = pn > 0 ? path : "/";
	in.uri_len = pn > 0 ? pn : 1;
	in.h = h;
	in.nh = nh;
	in.payload_hash = VAULT_SIGV4_UNSIGNED;
	in.amz_date = "20261207T081000Z";
	in.region = "us-east-1";
	in.service = "s3";
	in.key_id = (const uint8_t *)"AKIDFUZZ";
	in.key_id_len = 8;
	in.secret = (const uint8_t *)FZ_SECRET;
	in.secret_len = strlen(FZ_SECRET);
	if (vault_sigv4_sign(&in, out, sizeof(out), &len, &e) == -1) {
		check(e.msg[0] != '\0');
		check(strstr(e.msg, FZ_SECRET) == NULL);
		return;
	}
	check(strlen(out) == len && len > 64 + 10);
	check(strncmp(out, "AWS4-HMAC-SHA256 Credential=AKIDFUZZ/20261207/",
	          46) == 0);
	check(strncmp(out + len - 64 - 10, "Signature=", 10) == 0);
	for (i = len - 64; i < len; i++)
		check((out[i] >= '0' && out[i] <= '9') ||
		    (out[i] >= 'a' && out[i] <= 'f'));
	check(strstr(out, FZ_SECRET) == NULL);
	check(vault_sigv4_sign(&in, out2, sizeof(out2), &len2, &e) == 0);
	check(len2 == len && memcmp(out, out2, len) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p, *q, *hb, *z1, *z2;
	size_t pn, qn, hn;
	bool s3;

	if (size < 1 || size > FZ_INPUT_MAX)
		return 0;
	s3 = data[0] & 1;
	p = (const char *)data + 1;
	size--;
	z1 = memchr(p, '\0', size);
	pn = z1 != NULL ? (size_t)(z1 - p) : size;
	q = z1 != NULL ? z1 + 1 : p + size;
	z2 = z1 != NULL ? memchr(q, '\0', size - pn - 1) : NULL;
	qn = z1 == NULL ? 0 : z2 != NULL ? (size_t)(z2 - q) : size - pn - 1;
	hb = z2 != NULL ? z2 + 1 : q + qn;
	hn = size - (size_t)(hb - p);
	fuzz_uri(p, pn, s3);
	fuzz_query(q, qn);
	fuzz_sign(hb, hn, p, pn);
	return 0;
}
