/*
 * vault_github: a GitHub App's JWT and installation-token request, and
 * the token's forms (vault_github.h). Secrets are only copied with
 * memcpy into buffers wiped before they are freed, never formatted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "util/secmem.h"
#include "vault/vault_github.h"

/* ---- the key ---- */

/* An encrypted key asks for a passphrase: there is none. */
static int
no_pass_cb(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* pem's key as an EVP_PKEY (the caller frees it at once), or NULL. */
static EVP_PKEY *
key_load(const char *pem, size_t n, struct err *e)
{
	BIO *bio;
	EVP_PKEY *k;

	if (n > INT32_MAX || (bio = BIO_new_mem_buf(pem, (int)n)) == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	k = PEM_read_bio_PrivateKey(bio, NULL, no_pass_cb, NULL);
	BIO_free(bio);
	if (k == NULL) {
		err_set(e, "not a PEM private key (or an encrypted one)");
		return NULL;
	}
	if (EVP_PKEY_get_base_id(k) != EVP_PKEY_RSA ||
	    EVP_PKEY_get_bits(k) < VAULT_GITHUB_KEY_BITS_MIN) {
		EVP_PKEY_free(k);
		err_set(e, "not an RSA key of at least %d bits",
		    VAULT_GITHUB_KEY_BITS_MIN);
		return NULL;
	}
	return k;
}

int
vault_github_key_check(const char *pem, size_t n, struct err *e)
{
	EVP_PKEY *k = key_load(pem, n, e);

	EVP_PKEY_free(k);
	return k == NULL ? -1 : 0;
}

/* ---- the JWT ---- */

/* base64url of in[0..n) without padding into out (room for
 * 4 * ceil(n / 3) + 1 bytes); its length. */
static size_t
b64url(const uint8_t *in, size_t n, char *out)
{
	int m = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	size_t i, len = (size_t)m;

	while (len > 0 && out[len - 1] == '=')
		len--;
	for (i = 0; i < len; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	out[len] = '\0';
	return len;
}

/* The signing input "b64(header).b64(claims)" into out (cap bytes). */
static size_t
jwt_input(const char *app_id, int64_t now_s, char *out, size_t cap)
{
	static const char hdr[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	char claims[160];
	int cl;
	size_t n;

	/* app_id is letters, digits, '.', '_', '-' (the policy's walk) */
	cl = snprintf(claims, sizeof(claims),
	    "{\"iat\":%" PRId64 ",\"exp\":%" PRId64 ",\"iss\":\"%s\"}",
	    now_s - VAULT_GITHUB_JWT_BACK_S, now_s + VAULT_GITHUB_JWT_LIFE_S,
	    app_id);
	if (cl < 0 || (size_t)cl >= sizeof(claims) || cap < 2 * 4 * 60 + 2)
		return 0;
	n = b64url((const uint8_t *)hdr, sizeof(hdr) - 1, out);
	out[n++] = '.';
	n += b64url((const uint8_t *)claims, (size_t)cl, out + n);
	return n;
}

int
vault_github_jwt(const char *pem, size_t n, const char *app_id, int64_t now_s,
    char **out, size_t *len, struct err *e)
{
	uint8_t sig[1024];
	size_t siglen = sizeof(sig), in_len, cap = 1024;
	EVP_MD_CTX *ctx = NULL;
	EVP_PKEY *k;
	char *buf;
	int rc = -1;

	*out = NULL;
	if ((k = key_load(pem, n, e)) == NULL)
		return -1;
	if ((buf = malloc(cap)) == NULL ||
	    (in_len = jwt_input(app_id, now_s, buf, cap)) == 0) {
		err_set(e, "out of memory");
		goto out;
	}
	if ((ctx = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k) != 1 ||
	    EVP_DigestSign(ctx, sig, &siglen, (const uint8_t *)buf, in_len) !=
	        1 ||
	    in_len + 2 + 4 * ((siglen + 2) / 3) > cap) {
		err_set(e, "the JWT could not be signed");
		goto out;
	}
	buf[in_len++] = '.';
	in_len += b64url(sig, siglen, buf + in_len);
	*out = buf;
	*len = in_len;
	buf = NULL;
	rc = 0;
out:
	secmem_wipe(sig, sizeof(sig)); /* the JWT's third part */
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
	free(buf);
	return rc;
}

/* ---- the token's forms ---- */

size_t
vault_github_basic_len(size_t n)
{
	return 4 * ((sizeof(VAULT_GITHUB_USER) + n + 2) / 3);
}

size_t
vault_github_basic(const char *tok, size_t n, char *out, size_t cap)
{
	size_t pl = sizeof(VAULT_GITHUB_USER) + n; /* "user:" and tok */
	uint8_t *pair;
	int m;

	if (cap < vault_github_basic_len(n) + 1 || (pair = malloc(pl)) == NULL)
		return 0;
	memcpy(pair, VAULT_GITHUB_USER ":", sizeof(VAULT_GITHUB_USER));
	memcpy(pair + sizeof(VAULT_GITHUB_USER), tok, n);
	m = EVP_EncodeBlock((unsigned char *)out, pair, (int)pl);
	secmem_wipe(pair, pl);
	free(pair);
	return (size_t)m;
}

static bool
ends_with(const char *p, size_t n, const char *s)
{
	size_t sl = strlen(s);

	return n >= sl && memcmp(p + n - sl, s, sl) == 0;
}

bool
vault_github_basic_for(enum policy_github_form form, const char *p, size_t n)
{
	static const char lfs[] = "/info/lfs/";
	size_t i;

	if (form != POLICY_GITHUB_FORM_AUTO)
		return form == POLICY_GITHUB_FORM_BASIC;
	if (ends_with(p, n, "/info/refs") ||
	    ends_with(p, n, "/git-upload-pack") ||
	    ends_with(p, n, "/git-receive-pack"))
		return true;
	for (i = 0; i + sizeof(lfs) - 1 <= n; i++)
		if (memcmp(p + i, lfs, sizeof(lfs) - 1) == 0)
			return true;
	return false;
}

/* ---- the request ---- */

/* The JSON body narrowing the token (o NULL: count only); 0 bytes when
 * the binding narrows nothing. Names and levels are the walk's safe
 * characters: nothing to escape. */
static size_t
body_json(const struct policy_github *g, char *o)
{
	size_t n = 0, i;

#define PUT(s)                                                                 \
	do {                                                                   \
		size_t l_ = strlen(s);                                         \
		if (o != NULL)                                                 \
			memcpy(o + n, s, l_);                                  \
		n += l_;                                                       \
	} while (0)
	if (g->nrepos == 0 && g->nperms == 0)
		return 0;
	PUT("{");
	for (i = 0; i < g->nrepos; i++) {
		PUT(i == 0 ? "\"repositories\":[\"" : ",\"");
		PUT(g->repos[i]);
		PUT("\"");
	}
	if (g->nrepos > 0)
		PUT("]");
	for (i = 0; i < g->nperms; i++) {
		PUT(i > 0               ? ",\""
		        : g->nrepos > 0 ? ",\"permissions\":{\""
		                        : "\"permissions\":{\"");
		PUT(g->perm_names[i]);
		PUT("\":\"");
		PUT(g->perm_levels[i]);
		PUT("\"");
	}
	if (g->nperms > 0)
		PUT("}");
	PUT("}");
#undef PUT
	return n;
}

/* The head up to the Authorization value, with the target and Host. */
static int
head_start(const struct policy_github *g, size_t blen, char *o, size_t cap)
{
	char port[8] = "";

	if (g->port != 443)
		(void)snprintf(port, sizeof(port), ":%u", (unsigned)g->port);
	return snprintf(o, cap,
	    "POST %s/app/installations/%" PRIu64 "/access_tokens HTTP/1.1\r\n"
	    "Host: %s%s\r\nUser-Agent: egressd\r\n"
	    "Accept: application/vnd.github+json\r\n"
	    "X-GitHub-Api-Version: 2022-11-28\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\nAuthorization: Bearer ",
	    g->base, g->installation_id, g->host, port, blen);
}

int
vault_github_request(const char *pem, size_t pemlen,
    const struct policy_github *g, int64_t now_s, uint8_t **out, size_t *len,
    struct err *e)
{
	size_t blen = body_json(g, NULL), jlen, cap, n;
	char *jwt, *o;
	int hl;

	if (vault_github_jwt(pem, pemlen, g->app_id, now_s, &jwt, &jlen, e) ==
	    -1)
		return -1;
	hl = head_start(g, blen, NULL, 0);
	cap = (size_t)hl + jlen + 4 + blen + 1;
	if (hl < 0 || cap > VAULT_GITHUB_REQ_MAX || (o = malloc(cap)) == NULL) {
		secmem_wipe(jwt, jlen);
		free(jwt);
		err_set(e, "installation token request too large");
		return -1;
	}
	n = (size_t)head_start(g, blen, o, cap);
	memcpy(o + n, jwt, jlen);
	n += jlen;
	memcpy(o + n, "\r\n\r\n", 4);
	n += 4;
	n += body_json(g, o + n);
	secmem_wipe(jwt, jlen);
	free(jwt);
	*out = (uint8_t *)o;
	*len = n;
	return 0;
}
