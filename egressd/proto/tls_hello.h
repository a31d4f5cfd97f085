/*
 * tls_hello: the TLS ClientHello, peeked at before any byte goes upstream.
 * Pure: bytes in, struct out; no I/O, no allocation, no policy.
 *
 * The transparent proxy reads the first bytes a sandbox client sends on a
 * redirected connection and calls tls_hello_parse() on everything received
 * so far. The hello may arrive split across TCP segments and across TLS
 * records (RFC 8446 5.1 lets a handshake message span records), so the
 * parser reassembles the handshake message from consecutive handshake
 * records and answers TLS_HELLO_MORE until it is whole. It is strict: a
 * record or a hello that a conforming client would not send is
 * TLS_HELLO_BAD with a reason, because a lenient peek here is a parser
 * differential with the origin (the SNI egressd judged would not be the
 * one the origin serves).
 *
 * What the proxy decides from it (issue 17): the SNI (lowercased, one
 * trailing dot removed, checked to be a host name; an IP literal is
 * flagged, not accepted as a name), the ALPN protocols, and whether the
 * client offers ECH or the legacy ESNI extension.
 */
#ifndef EGRESSD_TLS_HELLO_H
#define EGRESSD_TLS_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Bounds. */
#define TLS_RECORD_HEADER_LEN 5
#define TLS_RECORD_PLAINTEXT_MAX 16384 /* RFC 8446 5.1 */
/* The whole ClientHello message: post-quantum key shares make them ~2 KiB,
 * padding extensions up to 512 bytes more; 32 KiB leaves room and bounds
 * what one connection may make egressd buffer before it decides. */
#define TLS_HELLO_MSG_MAX 32768
#define TLS_HELLO_SNI_MAX 253 /* a DNS name in presentation form */
#define TLS_HELLO_ALPN_MAX 8 /* protocols kept; more are counted */
#define TLS_HELLO_ALPN_LEN_MAX 32 /* bytes of one kept protocol name */

/* Extension code points egressd looks at. */
#define TLS_EXT_SERVER_NAME 0
#define TLS_EXT_ALPN 16
#define TLS_EXT_SUPPORTED_VERSIONS 43
#define TLS_EXT_ECH 0xfe0d /* encrypted_client_hello (RFC 9849) */
#define TLS_EXT_ESNI 0xffce /* the withdrawn draft-ietf-tls-esni */

enum tls_hello_rc {
	TLS_HELLO_OK = 0, /* *out holds the hello */
	TLS_HELLO_MORE, /* a prefix of a valid hello: read more bytes */
	TLS_HELLO_NOT_TLS, /* the first byte is not a TLS handshake record */
	TLS_HELLO_BAD, /* TLS, but malformed or not a ClientHello; e says why */
};

struct tls_hello {
	bool has_sni;
	bool sni_is_ip; /* the SNI is an IPv4/IPv6 literal (RFC 6066 forbids) */
	char sni[TLS_HELLO_SNI_MAX + 1]; /* lowercased, no trailing dot */
	bool has_ech, has_esni;
	bool has_alpn;
	size_t nalpn; /* protocols offered (may exceed TLS_HELLO_ALPN_MAX) */
	char alpn[TLS_HELLO_ALPN_MAX][TLS_HELLO_ALPN_LEN_MAX + 1];
	uint16_t legacy_version; /* client_version field */
	uint16_t max_version; /* highest of supported_versions, else legacy */
	size_t nexts; /* extensions in the hello */
	/* Bytes of the input the records carrying the hello take; what
	 * follows (an early-data record, say) is not the hello's. */
	size_t consumed;
};

/*
 * Parses the ClientHello at the start of buf[0..len). Returns
 * TLS_HELLO_OK (out filled), TLS_HELLO_MORE (call again with more bytes;
 * out untouched beyond zeroing), TLS_HELLO_NOT_TLS or TLS_HELLO_BAD (e
 * says why, in words safe to log: no input bytes are copied into it but
 * the offending SNI's length, never its text).
 */
enum tls_hello_rc tls_hello_parse(
    const uint8_t *buf, size_t len, struct tls_hello *out, struct err *e);

/* True if ALPN was offered and lists proto (exact, case-sensitive). */
bool tls_hello_offers_alpn(const struct tls_hello *h, const char *proto);

#endif
