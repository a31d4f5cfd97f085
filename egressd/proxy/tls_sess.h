/*
 * tls_sess: the upstream TLS sessions the proxy resumes. A bounded
 * cache of client sessions keyed by (SNI name, origin address and
 * port): a new connection to the same name at the same address resumes
 * the session the last one ended with (a TLS 1.3 ticket or a 1.2
 * session), so it skips the full handshake and the certificate chain.
 * Keyed by the name too, so a session verified for one name is never
 * offered under another.
 *
 * The cache holds one reference per entry (SSL_SESSION_up_ref on put,
 * SSL_SESSION_free on replace and on free). When full, the oldest entry
 * goes. Not thread-safe (one event loop).
 */
#ifndef EGRESSD_TLS_SESS_H
#define EGRESSD_TLS_SESS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "util/addr.h"

#define TLS_SESS_MAX 256 /* entries kept */
#define TLS_SESS_NAME_MAX 255

struct tls_sess_cache;

/* NULL when out of memory. */
struct tls_sess_cache *tls_sess_new(void);
void tls_sess_free(struct tls_sess_cache *t); /* NULL is a no-op */
/* Offers the cached session of (name, dst, port) to ssl (before its
 * handshake); 1 when one was set, 0 when none. */
int tls_sess_offer(struct tls_sess_cache *t, SSL *ssl, const char *name,
    const struct addr *dst, uint16_t port);
/* Keeps ssl's session for (name, dst, port) when its handshake
 * completed (ok) and it can be resumed (called as the connection ends,
 * once tickets have arrived); otherwise the entry goes: a failed
 * handshake is never followed by a resumption of what came before. */
void tls_sess_keep(struct tls_sess_cache *t, SSL *ssl, bool ok,
    const char *name, const struct addr *dst, uint16_t port);
/* Entries held (tests, status). */
size_t tls_sess_count(const struct tls_sess_cache *t);

#endif
