/*
 * proxy_tls: the two OpenSSL contexts of terminated connections.
 *
 * Server side (toward the sandbox): TLS 1.2 and 1.3, ALPN "http/1.1" only
 * (a client offering only h2 gets no ALPN and speaks HTTP/1.1 or gives
 * up), no renegotiation, session tickets on; the certificate is set per
 * connection from tls_ca_leaf() for the client's SNI.
 *
 * Client side (toward the origin): the peer verified against the trust
 * directory (every certificate file in it, links followed: a Kubernetes
 * ConfigMap mount works without c_rehash) with the host name checked
 * (SSL_set1_host per connection), unless --ssl-insecure; ALPN
 * "http/1.1"; sessions to resume are kept by the proxy (tls_sess.h),
 * per SNI name and origin address.
 *
 * Both start from base/tls_ctx.c (egressd's floor, and the trust
 * directory read there). The caller owns the contexts (SSL_CTX_free).
 */
#ifndef EGRESSD_PROXY_TLS_H
#define EGRESSD_PROXY_TLS_H

#include <stdbool.h>

#include <openssl/ssl.h>

#include "util/err.h"

SSL_CTX *proxy_tls_server_ctx(struct err *e);
/* trust_dir NULL: OpenSSL's default paths. */
SSL_CTX *proxy_tls_client_ctx(
    const char *trust_dir, bool insecure, size_t *ncerts, struct err *e);

#endif
