/*
 * tls_ca: egressd's certificate authority for terminated connections.
 *
 * The proxy terminates TLS only for hosts a credential binding could
 * match, with a leaf certificate minted here for the client's SNI and
 * signed by a CA the sandbox trusts through the exported bundle. The CA is
 * the operator's (key + certificate files) or egressd's own, generated on
 * first start in the state directory: `ca.key` (mode 0600, created with
 * O_EXCL and renamed into place, never overwritten) and `ca.crt` (0644).
 * A key file readable by group or others is refused: whoever reads it can
 * impersonate every bound host to the sandbox.
 *
 * Leaves: ECDSA P-256, one key for all leaves (generated at open, never
 * written to disk; a leaf key only proves possession to a client that
 * already trusts this CA), CN and one dNSName SAN = the SNI, serverAuth,
 * valid from an hour ago (skewed clocks) for TLS_CA_LEAF_DAYS. Minting
 * costs one ECDSA signature (~50 us); leaves are kept in an LRU of
 * TLS_CA_CACHE_MAX names and re-minted before they expire.
 *
 * Ownership: the struct owns the CA key, certificate, leaf key and cache.
 * tls_ca_leaf() returns a borrowed pointer valid until the next
 * tls_ca_leaf() call or tls_ca_free(); take X509_up_ref() to keep it.
 * Single-threaded (one event loop owns it).
 */
#ifndef EGRESSD_TLS_CA_H
#define EGRESSD_TLS_CA_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "util/err.h"

#define TLS_CA_CACHE_MAX 1024 /* leaves kept (by SNI) */
#define TLS_CA_LEAF_DAYS 7 /* leaf validity */
#define TLS_CA_DAYS 3650 /* a generated CA's validity */
#define TLS_CA_KEY_FILE "ca.key"
#define TLS_CA_CERT_FILE "ca.crt"

struct tls_ca;

/*
 * Opens the CA: key_file and cert_file if both are given (the operator's;
 * the certificate must be a CA and match the key), else state_dir's
 * ca.key/ca.crt, generated there if neither exists (one without the other
 * is an error: a half-written state is never silently replaced).
 */
struct tls_ca *tls_ca_open(const char *state_dir, const char *key_file,
    const char *cert_file, struct err *e);
void tls_ca_free(struct tls_ca *ca);

/* The CA certificate (borrowed). */
X509 *tls_ca_cert(const struct tls_ca *ca);
/* The one leaf key (borrowed). */
EVP_PKEY *tls_ca_leaf_key(const struct tls_ca *ca);

/*
 * The leaf for sni (a lowercase host name as tls_hello gives it), minted
 * or from the cache; NULL and e on error (not a host name, OpenSSL
 * failure).
 */
X509 *tls_ca_leaf(struct tls_ca *ca, const char *sni, struct err *e);

/* Leaves minted since open (for metrics and tests). */
unsigned long tls_ca_minted(const struct tls_ca *ca);

/*
 * Writes path (atomically, mode 0644): the system roots of system_bundle
 * (NULL: OpenSSL's default file; at most TLS_BUNDLE_ROOTS_MAX bytes)
 * followed by the CA certificate, for the sandbox's SSL_CERT_FILE and
 * friends. A path that already holds exactly that (a regular file of
 * egressd's user, mode 0644: a restart) is left alone.
 */
#define TLS_BUNDLE_ROOTS_MAX (16u << 20)
int tls_ca_export_bundle(const struct tls_ca *ca, const char *system_bundle,
    const char *path, struct err *e);

#endif
