/*
 * vault_sigv4: AWS Signature Version 4 as a pure function (vault_sigv4.h):
 * the canonical URI and query, the canonical request hashed as it is
 * produced (never held whole), the key derivation and the signature.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/text.h"
#include "vault/vault_sigv4.h"

#define SIGV4_ALGO "AWS4-HMAC-SHA256"
#define SIGV4_NAME_MAX 256 /* bytes of one signed header's name */

static const char hexdig[] = "0123456789ABCDEF";
static const char hexlow[] = "0123456789abcdef";

static bool
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/* c encoded at o (keep_slash: '/' as it is); the bytes written. */
static size_t
enc(unsigned char c, bool keep_slash, char *o)
{
	if (unreserved(c) || (keep_slash && c == '/')) {
		o[0] = (char)c;
		return 1;
	}
	o[0] = '%';
	o[1] = hexdig[c >> 4];
	o[2] = hexdig[c & 15];
	return 3;
}

/* The byte at s[*i], a "%XY" escape decoded (unless it spells one of
 * keep: S3 keeps an escaped '/'), *i moved past it. */
static unsigned char
dec(const char *s, size_t n, size_t *i, const char *keep)
{
	unsigned char c = (unsigned char)s[*i];
	int x;

	(*i)++;
	if (c != '%' || *i + 2 > n || (x = text_hexbyte(s + *i)) < 0)
		return c;
	if (keep != NULL && strchr(keep, x) != NULL && x != 0)
		return c; /* the '%' itself; "XY" follow as they are */
	*i += 2;
	return (unsigned char)x;
}

int
vault_sigv4_uri(const char *path, size_t n, bool s3, char **out, size_t *outlen,
    struct err *e)
{
	size_t i = 0, o = 0;
	char *b;

	if (n == 0 || path[0] != '/') {
		err_set(e, "SigV4: the path must start with '/'");
		return -1;
	}
	if (n > (SIZE_MAX - 1) / 3 || (b = malloc(3 * n + 1)) == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	while (i < n) {
		unsigned char c;

		if (s3 && path[i] == '%' && i + 3 <= n &&
		    text_hexbyte(path + i + 1) == '/') {
			/* an encoded '/' stays encoded, upper-case */
			o += enc('/', false, b + o);
			i += 3;
			continue;
		}
		c = s3 ? dec(path, n, &i, NULL) : (unsigned char)path[i++];
		o += enc(c, true, b + o);
	}
	b[o] = '\0';
	*out = b;
	*outlen = o;
	return 0;
}

/* ---- the query ---- */

/* A parameter, encoded (its bytes in the caller's buffer). */
struct qitem {
	const char *name, *value;
	size_t nlen, vlen;
};

static int
bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int r = memcmp(a, b, an < bn ? an : bn);

	if (r != 0)
		return r;
	return an < bn ? -1 : an > bn ? 1 : 0;
}

static int
qitem_cmp(const void *x, const void *y)
{
	const struct qitem *a = x, *b = y;
	int r = bytes_cmp(a->name, a->nlen, b->name, b->nlen);

	return r != 0 ? r : bytes_cmp(a->value, a->vlen, b->value, b->vlen);
}

/* s[0..n) decoded and encoded again at o; the bytes written. */
static size_t
reencode(const char *s, size_t n, char *o)
{
	size_t i = 0, w = 0;

	while (i < n)
		w += enc(dec(s, n, &i, NULL), false, o + w);
	return w;
}

/* The parameters of q into items (their encoded bytes in buf): their
 * count, or SIZE_MAX beyond VAULT_SIGV4_PARAMS_MAX. */
static size_t
query_items(const char *q, size_t n, char *buf, struct qitem *items)
{
	size_t i = 0, k = 0, w = 0, start, eq;

	while (i < n) {
		start = i;
		while (i < n && q[i] != '&')
			i++;
		if (i > start) {
			if (k == VAULT_SIGV4_PARAMS_MAX)
				return SIZE_MAX;
			for (eq = start; eq < i && q[eq] != '='; eq++)
				;
			items[k].name = buf + w;
			items[k].nlen =
			    reencode(q + start, eq - start, buf + w);
			w += items[k].nlen;
			items[k].value = buf + w;
			items[k].vlen = eq < i
			    ? reencode(q + eq + 1, i - eq - 1, buf + w)
			    : 0;
			w += items[k].vlen;
			k++;
		}
		i++;
	}
	return k;
}

int
vault_sigv4_query(
    const char *q, size_t n, char **out, size_t *outlen, struct err *e)
{
	struct qitem *items = NULL;
	char *buf = NULL, *res = NULL;
	size_t k, i, o = 0;

	if (q == NULL)
		n = 0;
	if (n > VAULT_SIGV4_QUERY_MAX) {
		err_set(e, "SigV4: query longer than %u bytes",
		    VAULT_SIGV4_QUERY_MAX);
		return -1;
	}
	items = calloc(VAULT_SIGV4_PARAMS_MAX, sizeof(*items));
	buf = malloc(3 * n + 1);
	/* each raw byte encodes into 3 at most, and a parameter without
	 * '=' gains one: 4 n, and the NUL */
	res = malloc(4 * n + 2);
	if (items == NULL || buf == NULL || res == NULL) {
		err_set(e, "out of memory");
		goto fail;
	}
	if ((k = query_items(q, n, buf, items)) == SIZE_MAX) {
		err_set(e, "SigV4: more than %u query parameters",
		    VAULT_SIGV4_PARAMS_MAX);
		goto fail;
	}
	qsort(items, k, sizeof(*items), qitem_cmp);
	for (i = 0; i < k; i++) {
		if (i > 0)
			res[o++] = '&';
		memcpy(res + o, items[i].name, items[i].nlen);
		o += items[i].nlen;
		res[o++] = '=';
		memcpy(res + o, items[i].value, items[i].vlen);
		o += items[i].vlen;
	}
	res[o] = '\0';
	free(items);
	free(buf);
	*out = res;
	*outlen = o;
	return 0;
fail:
	free(items);
	free(buf);
	free(res);
	return -1;
}

bool
vault_sigv4_presigned(const char *q, size_t n)
{
	static const char *const names[] = {"x-amz-signature",
	    "x-amz-credential", "x-amz-algorithm", "x-amz-security-token"};
	size_t i = 0, start, j, k, w;
	char name[32];

	while (q != NULL && i < n) {
		start = i;
		while (i < n && q[i] != '&')
			i++;
		/* the name, decoded and folded, up to 31 bytes */
		for (j = start, w = 0; j < i && q[j] != '=' && w < 31;)
			name[w++] = (char)text_lower(dec(q, i, &j, NULL));
		name[w] = '\0';
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (strcmp(name, names[k]) == 0)
				return true;
		i++;
	}
	return false;
}

/* ---- signing ---- */

void
vault_sigv4_hash(const void *p, size_t n, char *hex)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	size_t i;

	SHA256(p, n, md);
	for (i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		hex[2 * i] = hexlow[md[i] >> 4];
		hex[2 * i + 1] = hexlow[md[i] & 15];
	}
	hex[VAULT_SIGV4_HASH_LEN] = '\0';
}

void
vault_sigv4_date(int64_t t, char out[17])
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
		memcpy(out, "19700101T000000Z", 17);
}

static bool
token_byte(unsigned char c)
{
	return unreserved(c) || (c != 0 && strchr("!#$%&'*+^`|", c) != NULL);
}

static int
name_cmp(const struct vault_sigv4_hdr *a, const struct vault_sigv4_hdr *b)
{
	size_t i, n = a->name_len < b->name_len ? a->name_len : b->name_len;

	for (i = 0; i < n; i++) {
		int x = text_lower((unsigned char)a->name[i]);
		int y = text_lower((unsigned char)b->name[i]);
		if (x != y)
			return x - y;
	}
	return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

/* The headers' order: by lowercase name, stable (insertion sort: at
 * most VAULT_SIGV4_HEADERS_MAX). -1 when one is out of form. */
static int
headers_order(const struct vault_sigv4_in *in, size_t *ord, struct err *e)
{
	static const struct vault_sigv4_hdr host_hdr = {"host", 4, "", 0};
	size_t i, j, k;
	bool host = false;

	if (in->nh > VAULT_SIGV4_HEADERS_MAX) {
		err_set(e, "SigV4: more than %u headers to sign",
		    VAULT_SIGV4_HEADERS_MAX);
		return -1;
	}
	for (i = 0; i < in->nh; i++) {
		const struct vault_sigv4_hdr *h = &in->h[i];

		if (h->name_len == 0 || h->name_len > SIGV4_NAME_MAX) {
			err_set(e, "SigV4: a header name of a bad length");
			return -1;
		}
		for (k = 0; k < h->name_len; k++)
			if (!token_byte((unsigned char)h->name[k])) {
				err_set(e, "SigV4: a header name is no token");
				return -1;
			}
		for (k = 0; k < h->value_len; k++)
			if (h->value[k] == '\r' || h->value[k] == '\n' ||
			    h->value[k] == '\0') {
				err_set(e, "SigV4: CR, LF or NUL in a header");
				return -1;
			}
		host = host || name_cmp(h, &host_hdr) == 0;
		for (j = i; j > 0 && name_cmp(&in->h[ord[j - 1]], h) > 0; j--)
			ord[j] = ord[j - 1];
		ord[j] = i;
	}
	if (!host) {
		err_set(e, "SigV4: no host header to sign");
		return -1;
	}
	return 0;
}

static void
md_put(EVP_MD_CTX *md, const void *p, size_t n)
{
	if (n > 0)
		(void)EVP_DigestUpdate(md, p, n);
}

/* A header value trimmed, inner runs of spaces and tabs as one space. */
static void
md_value(EVP_MD_CTX *md, const char *v, size_t n)
{
	size_t i = 0, j;

	while (i < n && (v[i] == ' ' || v[i] == '\t'))
		i++;
	while (n > i && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	while (i < n) {
		for (j = i; j < n && v[j] != ' ' && v[j] != '\t'; j++)
			;
		md_put(md, v + i, j - i);
		if (j == n)
			break;
		md_put(md, " ", 1);
		for (i = j; i < n && (v[i] == ' ' || v[i] == '\t'); i++)
			;
	}
}

static void
md_lower(EVP_MD_CTX *md, const char *s, size_t n, char *sh, size_t *shn)
{
	size_t i;

	for (i = 0; i < n; i++)
		sh[(*shn)++] = (char)text_lower((unsigned char)s[i]);
	md_put(md, sh + *shn - n, n);
}

/*
 * The canonical headers into md, and the signed headers' list into sh
 * (SIGV4_NAME_MAX + 1 bytes per header at most), *shn its length.
 */
static void
md_headers(EVP_MD_CTX *md, const struct vault_sigv4_in *in, const size_t *ord,
    char *sh, size_t *shn)
{
	size_t i;

	*shn = 0;
	for (i = 0; i < in->nh; i++) {
		const struct vault_sigv4_hdr *h = &in->h[ord[i]];
		bool same = i > 0 && name_cmp(&in->h[ord[i - 1]], h) == 0;

		if (same) {
			md_put(md, ",", 1);
		} else {
			if (i > 0) {
				md_put(md, "\n", 1);
				sh[(*shn)++] = ';';
			}
			md_lower(md, h->name, h->name_len, sh, shn);
			md_put(md, ":", 1);
		}
		md_value(md, h->value, h->value_len);
	}
	md_put(md, "\n\n", 2);
	md_put(md, sh, *shn);
	md_put(md, "\n", 1);
}

static bool
payload_hash_ok(const char *p)
{
	size_t i;

	if (p == NULL)
		return false;
	if (strcmp(p, VAULT_SIGV4_UNSIGNED) == 0 ||
	    strcmp(p, VAULT_SIGV4_UNSIGNED_TRAILER) == 0)
		return true;
	for (i = 0; i < VAULT_SIGV4_HASH_LEN; i++)
		if (strchr(hexlow, p[i]) == NULL || p[i] == '\0')
			return false;
	return p[i] == '\0';
}

static bool
date_ok(const char *d)
{
	size_t i;

	if (d == NULL || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
		return false;
	for (i = 0; i < 15; i++)
		if (i != 8 && (d[i] < '0' || d[i] > '9'))
			return false;
	return true;
}

/* The hex SHA-256 of the canonical request into hex; the signed
 * headers' list into sh. -1 when the digest failed. */
static int
canonical_hash(const struct vault_sigv4_in *in, const size_t *ord, char *sh,
    size_t *shn, char *hex)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn = 0, i;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(md);
		return -1;
	}
	md_put(md, in->method, in->method_len);
	md_put(md, "\n", 1);
	md_put(md, in->uri, in->uri_len);
	md_put(md, "\n", 1);
	if (in->query != NULL)
		md_put(md, in->query, in->query_len);
	md_put(md, "\n", 1);
	md_headers(md, in, ord, sh, shn);
	md_put(md, in->payload_hash, strlen(in->payload_hash));
	if (EVP_DigestFinal_ex(md, d, &dn) != 1 || dn != 32) {
		EVP_MD_CTX_free(md);
		return -1;
	}
	EVP_MD_CTX_free(md);
	for (i = 0; i < dn; i++) {
		hex[2 * i] = hexlow[d[i] >> 4];
		hex[2 * i + 1] = hexlow[d[i] & 15];
	}
	hex[2 * dn] = '\0';
	return 0;
}

/* HMAC-SHA256 of msg under key into out (32 bytes). */
static bool
hmac(const void *key, size_t klen, const void *msg, size_t n, uint8_t *out)
{
	unsigned olen = 0;

	return HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &olen) != NULL &&
	    olen == 32;
}

/*
 * The signature of sts (hex into sig, 65 bytes): the signing key derived
 * from the secret, date, region and service. Every key on the stack is
 * wiped.
 */
static int
signature(
    const struct vault_sigv4_in *in, const char *sts, size_t stslen, char *sig)
{
	uint8_t k1[VAULT_SIGV4_SECRET_MAX + 4], ka[32], kb[32], mac[32];
	bool ok;
	size_t i;

	memcpy(k1, "AWS4", 4);
	memcpy(k1 + 4, in->secret, in->secret_len);
	ok = hmac(k1, in->secret_len + 4, in->amz_date, 8, ka) &&
	    hmac(ka, 32, in->region, strlen(in->region), kb) &&
	    hmac(kb, 32, in->service, strlen(in->service), ka) &&
	    hmac(ka, 32, "aws4_request", 12, kb) &&
	    hmac(kb, 32, sts, stslen, mac);
	OPENSSL_cleanse(k1, sizeof(k1));
	OPENSSL_cleanse(ka, sizeof(ka));
	OPENSSL_cleanse(kb, sizeof(kb));
	for (i = 0; i < 32; i++) {
		sig[2 * i] = hexlow[mac[i] >> 4];
		sig[2 * i + 1] = hexlow[mac[i] & 15];
	}
	sig[64] = '\0';
	return ok ? 0 : -1;
}

static int
sign_check(const struct vault_sigv4_in *in, struct err *e)
{
	if (in->secret == NULL || in->secret_len == 0 ||
	    in->secret_len > VAULT_SIGV4_SECRET_MAX) {
		err_set(e, "SigV4: the secret key must be 1 to %u bytes",
		    VAULT_SIGV4_SECRET_MAX);
		return -1;
	}
	if (in->key_id == NULL || in->key_id_len == 0 ||
	    in->key_id_len > VAULT_SIGV4_SECRET_MAX) {
		err_set(e, "SigV4: the key id must be 1 to %u bytes",
		    VAULT_SIGV4_SECRET_MAX);
		return -1;
	}
	if (!date_ok(in->amz_date) || !payload_hash_ok(in->payload_hash) ||
	    in->region == NULL || in->service == NULL ||
	    in->region[0] == '\0' || in->service[0] == '\0' ||
	    strlen(in->region) > 64 || strlen(in->service) > 64 ||
	    in->method_len == 0 || in->uri_len == 0) {
		err_set(e,
		    "SigV4: date, payload hash, region, service, "
		    "method or URI out of form");
		return -1;
	}
	return 0;
}

int
vault_sigv4_sign(const struct vault_sigv4_in *in, char *out, size_t cap,
    size_t *len, struct err *e)
{
	size_t ord[VAULT_SIGV4_HEADERS_MAX];
	char sh[VAULT_SIGV4_HEADERS_MAX * (SIGV4_NAME_MAX + 1)];
	char crhash[65], sts[256], sig[65];
	size_t shn = 0;
	int n;

	if (sign_check(in, e) == -1 || headers_order(in, ord, e) == -1)
		return -1;
	if (canonical_hash(in, ord, sh, &shn, crhash) == -1) {
		err_set(e, "SigV4: SHA-256 failed");
		return -1;
	}
	n = snprintf(sts, sizeof(sts),
	    SIGV4_ALGO "\n%s\n%.8s/%s/%s/aws4_request\n%s", in->amz_date,
	    in->amz_date, in->region, in->service, crhash);
	if (n < 0 || (size_t)n >= sizeof(sts) ||
	    signature(in, sts, (size_t)n, sig) == -1) {
		err_set(e, "SigV4: HMAC failed");
		return -1;
	}
	/* the key id is credential bytes: copied, never formatted */
	n = snprintf(NULL, 0,
	    "/%.8s/%s/%s/aws4_request, SignedHeaders=%.*s, Signature=%s",
	    in->amz_date, in->region, in->service, (int)shn, sh, sig);
	if (n < 0 ||
	    sizeof(SIGV4_ALGO " Credential=") - 1 + in->key_id_len + (size_t)n +
	            1 >
	        cap) {
		err_set(e, "SigV4: the Authorization value does not fit");
		return -1;
	}
	*len = sizeof(SIGV4_ALGO " Credential=") - 1;
	memcpy(out, SIGV4_ALGO " Credential=", *len);
	memcpy(out + *len, in->key_id, in->key_id_len);
	*len += in->key_id_len;
	(void)snprintf(out + *len, cap - *len,
	    "/%.8s/%s/%s/aws4_request, SignedHeaders=%.*s, Signature=%s",
	    in->amz_date, in->region, in->service, (int)shn, sh, sig);
	*len += (size_t)n;
	return 0;
}
