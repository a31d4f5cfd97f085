/*
 * http_connect: the HTTP CONNECT exchange egressd has with an upstream
 * (corporate) proxy (RFC 9110 9.3.6), pure: the request built into the
 * caller's buffer, the response parsed from the caller's bytes. No I/O.
 *
 * The response comes from a proxy egressd does not control, and the
 * bytes after its head are the tunnel: the origin's. A parser that read
 * the head's end differently from the proxy would hand proxy bytes to
 * the TLS client or the relay as the origin's (or the origin's first
 * bytes to the parser), so it is strict and bounded:
 *  - the head is http_parse_response's (bare CR or LF, obs-fold, controls,
 *    malformed status line and field names refused), within
 *    HTTP_CONNECT_HEAD_MAX bytes (a proxy has nothing to say that needs
 *    more);
 *  - a 1xx is refused: CONNECT has no body to continue, and a proxy that
 *    sends an interim answer before its final one is not worth the
 *    ambiguity;
 *  - a 2xx (the tunnel) with Transfer-Encoding, or a Content-Length other
 *    than 0, is refused: RFC 9110 says a client ignores them, which means
 *    a proxy that sent a body would have it read as the origin's bytes.
 * Any other status is the proxy's refusal (407: its credentials); the
 * caller fails the connection with it and never reads further.
 */
#ifndef EGRESSD_HTTP_CONNECT_H
#define EGRESSD_HTTP_CONNECT_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define HTTP_CONNECT_HEAD_MAX 8192 /* a CONNECT response head, CRLFs in */
/* "host:port" or "[v6]:port" of a CONNECT target: a DNS name (253), or an
 * IPv6 literal in brackets, a colon and five digits */
#define HTTP_CONNECT_AUTHORITY_MAX 262
/* a Proxy-Authorization value (the operator's, e.g. "Basic <base64>") */
#define HTTP_CONNECT_AUTH_MAX 1024
/* the request egressd sends: request line, Host, Proxy-Authorization */
#define HTTP_CONNECT_REQUEST_MAX                                               \
	(2 * HTTP_CONNECT_AUTHORITY_MAX + HTTP_CONNECT_AUTH_MAX + 128)

enum http_connect_rc {
	HTTP_CONNECT_OK = 0, /* a whole head: the response says its status */
	HTTP_CONNECT_MORE, /* a valid prefix within the bound: read more */
	HTTP_CONNECT_BAD, /* not a response egressd accepts; e says why */
};

struct http_connect_resp {
	int status; /* 200..599 */
	size_t head_len; /* bytes of the head; the tunnel starts after */
};

/*
 * The authority of a CONNECT target: "host:port", an IPv6 literal in
 * brackets. host is a DNS name (letters, digits, '-', '.', '_') or an IP
 * literal; anything else (space, CR, LF, '@', '/', brackets, empty) is
 * refused, so no byte of a name can change the request. 0, or -1 and e.
 */
int http_connect_authority(
    const char *host, uint16_t port, char *out, size_t cap, struct err *e);

/*
 * "CONNECT <authority> HTTP/1.1", Host: the same, and when auth is not
 * NULL "Proxy-Authorization: <auth>" (auth_len bytes, visible ASCII and
 * inner spaces only: no CR, LF or control can end the field early). *len
 * gets the request's length in out. out then holds the credential: the
 * caller wipes it once sent. -1 and e (which never quotes auth).
 */
int http_connect_request(const char *authority, const char *auth,
    size_t auth_len, char *out, size_t cap, size_t *len, struct err *e);

/* Is a Proxy-Authorization value one http_connect_request sends? */
int http_connect_auth_check(const char *auth, size_t len, struct err *e);

/*
 * The proxy's response at the start of buf[0..len). OK: r says the
 * status and where the head ends (bytes after it are the tunnel's; the
 * caller must not have consumed them). MORE: no end yet and len below
 * HTTP_CONNECT_HEAD_MAX. BAD: e says why (never quoting the bytes).
 */
enum http_connect_rc http_connect_parse(
    const char *buf, size_t len, struct http_connect_resp *r, struct err *e);

#endif
