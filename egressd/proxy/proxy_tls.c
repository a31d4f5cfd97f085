#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "egressd/base/tls_ctx.h"
#include "egressd/proxy/proxy_tls.h"

static const unsigned char proxy_alpn_h1[] = "\x08http/1.1";

static int
proxy_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned inlen, void *arg)
{
	unsigned char *o;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen, proxy_alpn_h1,
	        sizeof(proxy_alpn_h1) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *
proxy_tls_server_ctx(struct err *e)
{
	SSL_CTX *ctx = tls_ctx_new(true, e);
	char why[256];

	/* With server preference, AES-128-GCM goes first: it is the cheapest
	 * AEAD on AES-NI hardware and every TLS 1.3 client offers it. The
	 * default list leads with AES-256, which costs each record more. */
	if (ctx == NULL)
		return NULL;
	if (SSL_CTX_set_ciphersuites(ctx,
	        "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
	        "TLS_CHACHA20_POLY1305_SHA256") != 1) {
		tls_ctx_error(why, sizeof(why));
		err_set(e, "TLS server context: %s", why);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	/* one read(2) per flight, not two per record:
	 * proxy_conn_kick_read (proxy_conn.c) reads what OpenSSL then holds */
	SSL_CTX_set_read_ahead(ctx, 1);
	/* one ticket per handshake, not OpenSSL's two: a client resumes one
	 * connection from each connection it had (curl, wrk, Python, Node,
	 * git), and each ticket costs an HKDF, a session encoding and an
	 * encryption on every new connection */
	(void)SSL_CTX_set_num_tickets(ctx, 1);
	SSL_CTX_set_alpn_select_cb(ctx, proxy_alpn_select, NULL);
	SSL_CTX_set_session_id_context(
	    ctx, (const unsigned char *)"egressd", 7);
	return ctx;
}

SSL_CTX *
proxy_tls_client_ctx(
    const char *trust_dir, bool insecure, size_t *ncerts, struct err *e)
{
	SSL_CTX *ctx = tls_ctx_new(false, e);
	char why[256];
	size_t n = 0;

	if (ctx == NULL)
		return NULL;
	if (SSL_CTX_set_alpn_protos(
	        ctx, proxy_alpn_h1, sizeof(proxy_alpn_h1) - 1) != 0) {
		tls_ctx_error(why, sizeof(why));
		err_set(e, "TLS client context: %s", why);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_read_ahead(ctx, 1); /* as the server side */
	/* tls_sess.c keeps the sessions worth resuming (SSL_get_session at
	 * close); with SSL_SESS_CACHE_CLIENT alone OpenSSL also adds every
	 * upstream connection's sessions to its own store (up to 20,480,
	 * peer chain and ticket each) for lookups a client never makes */
	SSL_CTX_set_session_cache_mode(
	    ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	if (insecure)
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	else if (tls_ctx_trust(ctx, trust_dir, &n, e) == -1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (ncerts != NULL)
		*ncerts = n;
	return ctx;
}
