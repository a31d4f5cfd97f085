/*
 * http_head: HTTP/1.1 request and response heads (RFC 9110, RFC 9112),
 * pure: bytes in, struct out, no I/O, no allocation.
 *
 * The proxy parses every request head a sandbox client sends (on a
 * terminated TLS connection or plain HTTP on port 80) and every response
 * head an origin sends back, before forwarding a byte of either. The
 * parser is strict on purpose: each thing it refuses is something two
 * HTTP implementations have been seen to read differently (request
 * smuggling, Host confusion), and egressd sits between two of them. It
 * refuses, with the status a server would send:
 *  - 400: bare CR, bare LF as a line end, NUL or other controls, obs-fold,
 *    whitespace before a header's colon, a header name that is not a
 *    token, a request line without exactly two single spaces, more than
 *    one Host (or none in HTTP/1.1), more than one Content-Length, a
 *    Content-Length that is not a plain decimal number, Content-Length and
 *    Transfer-Encoding together, Transfer-Encoding in HTTP/1.0, an
 *    absolute-form target that is not http(s) or names a different host
 *    than Host;
 *  - 414 / 431: a request line or a head over the bounds below;
 *  - 417: an Expect other than "100-continue";
 *  - 501: a transfer coding other than a single "chunked";
 *  - 505: a version other than HTTP/1.0 or HTTP/1.1 (HTTP/2's preface
 *    "PRI * HTTP/2.0" included).
 * What it accepts it describes: method, target form and its parts, the
 * headers (spans into the caller's buffer, which must outlive the
 * struct), and the body framing the message uses.
 */
#ifndef EGRESSD_HTTP_HEAD_H
#define EGRESSD_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define HTTP_LINE_MAX 8192 /* request line or status line, CRLF included */
#define HTTP_HEAD_MAX 65536 /* the whole head, final CRLF included */
#define HTTP_HEADERS_MAX 128 /* header fields in one head */
#define HTTP_METHOD_MAX 32

/* Not HTTP_OK & co.: libevent's evhttp defines those as status codes. */
enum http_rc {
	HTTP_HEAD_OK = 0, /* a whole head: *out describes it */
	HTTP_HEAD_MORE, /* a valid prefix: read more (up to the bounds) */
	HTTP_HEAD_BAD, /* refuse: out->status says with what, e says why */
};

/* A span of the caller's buffer. */
struct http_span {
	const char *p;
	size_t n;
};

struct http_header {
	struct http_span name; /* as sent (compare case-insensitively) */
	struct http_span value; /* leading and trailing OWS removed */
};

enum http_target_form {
	HTTP_TARGET_ORIGIN, /* "/path?query" */
	HTTP_TARGET_ABSOLUTE, /* "http://host:port/path?query" */
	HTTP_TARGET_AUTHORITY, /* "host:port" (CONNECT) */
	HTTP_TARGET_ASTERISK, /* "*" (OPTIONS) */
};

enum http_body {
	HTTP_BODY_NONE, /* no body (or no Content-Length nor chunked in a
	                   request) */
	HTTP_BODY_LENGTH, /* content_length bytes */
	HTTP_BODY_CHUNKED, /* chunked (see http_chunk.h) */
	HTTP_BODY_CLOSE, /* a response read until the origin closes */
};

struct http_head {
	bool is_request;
	int minor; /* HTTP/1.<minor>: 0 or 1 */
	/* request */
	struct http_span method;
	struct http_span target; /* the whole request-target */
	enum http_target_form form;
	struct http_span scheme; /* absolute-form: "http" or "https" */
	struct http_span authority; /* absolute/authority form: host[:port] */
	struct http_span path; /* origin/absolute form: from '/' to '?' */
	struct http_span query; /* after '?', without it; n = 0 if none */
	bool has_query;
	struct http_span host; /* the Host field value */
	/* response */
	int status;
	struct http_span reason;
	/* both */
	struct http_header h[HTTP_HEADERS_MAX];
	size_t nh;
	enum http_body body;
	uint64_t content_length;
	bool conn_close; /* "Connection: close", or HTTP/1.0 without
	                    keep-alive */
	bool conn_upgrade; /* "upgrade" among the Connection tokens */
	bool expect_continue; /* "Expect: 100-continue" */
	size_t head_len; /* bytes of the head, final CRLF included */
	int reject_status; /* with HTTP_HEAD_BAD: 400, 414, 417, 431, 501, 505 */
};

/*
 * Parses a request head at the start of buf[0..len). HTTP_HEAD_OK: out
 * describes buf[0..out->head_len); the body, if any, follows. HTTP_HEAD_MORE:
 * every byte so far is valid, the head is not complete (and len is within
 * the bounds). HTTP_HEAD_BAD: out->reject_status and e say why.
 */
enum http_rc http_parse_request(
    const char *buf, size_t len, struct http_head *out, struct err *e);

/*
 * The same for a response head. The framing of its body depends on the
 * request (a response to HEAD has none; 1xx, 204 and 304 have none; a 2xx
 * to CONNECT is a tunnel): req_method is the request's method.
 */
enum http_rc http_parse_response(const char *buf, size_t len,
    const struct http_span *req_method, struct http_head *out, struct err *e);

/*
 * Where the head in buf[0..len) ends, scanning only what is new: *cursor
 * (0 at first, kept by the caller between calls) is where the previous
 * scan stopped. True and *end = the head's length once "\r\n\r\n" is
 * there. A client that drips bytes costs linear time, not quadratic.
 */
bool http_head_find_end(
    const char *buf, size_t len, size_t *cursor, size_t *end);

/*
 * Splits an authority ("host", "host:port", "[v6]:port") into the host
 * (brackets removed) and the port (default_port if none). -1 if it is not
 * a valid authority: empty host, userinfo, a bad or out-of-range port.
 */
int http_authority_split(const struct http_span *a, unsigned default_port,
    struct http_span *host, unsigned *port);

/* The value of the one field named name (case-insensitive), or NULL if it
 * is absent; *count gets how many there are (may be NULL). */
const struct http_span *http_header_get(
    const struct http_head *h, const char *name, size_t *count);

/* A token character (RFC 9110 5.6.2): methods, header and trailer names. */
bool http_is_tchar(unsigned char c);

/* Case-insensitive comparison of a span with a NUL-terminated string. */
bool http_span_ieq(const struct http_span *s, const char *lit);
/* Case-sensitive: methods (RFC 9110 9.1). */
bool http_span_eq(const struct http_span *s, const char *lit);

/* The reason phrase of a status egressd sends itself (the proxy and the
 * control API), "Unknown" for others. */
const char *http_reason(int status);

#endif
