/*
 * tls_ctx: the one setup of egressd's OpenSSL contexts. The API's TLS
 * listener, the deny webhook's client and the proxy's two contexts all
 * start from tls_ctx_new (TLS 1.2 and up, no renegotiation, no
 * compression), and every client context that verifies its peer loads its
 * trust through tls_ctx_trust, so a floor or a trust-store rule is decided
 * once. What is one user's own (the proxy's ALPN, tickets and cipher
 * order; the API's certificate) stays with that user.
 *
 * The caller owns the context (SSL_CTX_free).
 */
#ifndef EGRESSD_TLS_CTX_H
#define EGRESSD_TLS_CTX_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "util/err.h"

#define TLS_CTX_TRUST_FILES_MAX 4096 /* files read from a trust directory */

/* A server or client context at egressd's floor; NULL and e. */
SSL_CTX *tls_ctx_new(bool server, struct err *e);

/*
 * Peer verification on for a client context, against trust_dir (every
 * certificate of every file in it, links followed, so a Kubernetes
 * ConfigMap mount works without c_rehash; dot files skipped, ..data
 * included) or, trust_dir NULL, OpenSSL's default paths. 0, with the
 * certificates read in *ncerts (0 for the default paths); -1 and e when the
 * directory cannot be read or holds no certificate, or the default paths
 * do not load.
 */
int tls_ctx_trust(
    SSL_CTX *ctx, const char *trust_dir, size_t *ncerts, struct err *e);

/* The first OpenSSL error queued, as text (the queue is cleared). */
void tls_ctx_error(char *buf, size_t cap);

#endif
