/*
 * http_head: strict HTTP/1.1 heads (see http_head.h). RFC 9112 2-6,
 * RFC 9110 5-7.
 */
#include "egressd/proto/http_head.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

/* c is one of set's characters; never NUL (strchr finds the terminator). */
static bool
in_set(unsigned char c, const char *set)
{
	return c != '\0' && strchr(set, c) != NULL;
}

/*
 * The token characters (RFC 9110 5.6.2), one lookup a byte (a compare
 * chain and a strchr for the punctuation cost the terminated request more
 * than its parse needed); no byte above 0x7f is one.
 * tests/unit/egressd/proto/test_http_head.c checks every byte value.
 */
static const unsigned char tchar[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, /* 0x20 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, /* 0x30 */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, /* 0x50 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, /* 0x70 */
};

/*
 * The length of the run at p (n bytes at most) of bytes that are neither
 * a control (below 0x20, HTAB included) nor DEL: most of a head, checked
 * 8 bytes at a time. A word's test is exact: with no byte below 0x20 no
 * subtraction borrows, and bytes with their top bit set are masked out;
 * the lowest flagged byte is the first offending one (a borrow only
 * moves up), so on a little-endian machine the run's end is read from
 * the mask.
 */
static size_t
plain_run(const char *p, size_t n)
{
	const uint64_t ones = 0x0101010101010101ULL;
	const uint64_t tops = 0x8080808080808080ULL;
	uint64_t x, d, m;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&x, p + i, sizeof(x));
		d = x ^ (ones * 0x7f);
		m = (((x - ones * 0x20) & ~x) | ((d - ones) & ~d)) & tops;
		if (m != 0) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return i + (size_t)__builtin_ctzll(m) / 8;
#else
			break;
#endif
		}
	}
	while (i < n && (unsigned char)p[i] >= 0x20 && p[i] != 0x7f)
		i++;
	return i;
}

bool
http_is_tchar(unsigned char c)
{
	return c < 0x80 && tchar[c] != 0;
}

static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

bool
http_span_ieq(const struct http_span *s, const char *lit)
{
	size_t n = strlen(lit);

	return s->n == n && strncasecmp(s->p, lit, n) == 0;
}

bool
http_span_eq(const struct http_span *s, const char *lit)
{
	size_t n = strlen(lit);

	return s->n == n && memcmp(s->p, lit, n) == 0;
}

static enum http_rc
bad(struct http_head *out, int status, struct err *e, const char *why)
{
	out->reject_status = status;
	err_set(e, "%s", why);
	return HTTP_HEAD_BAD;
}

bool
http_head_find_end(const char *buf, size_t len, size_t *cursor, size_t *end)
{
	size_t i = *cursor > 3 ? *cursor - 3 : 0;
	const char *p;

	while (i + 4 <= len) {
		p = memchr(buf + i, '\r', len - i - 3);
		if (p == NULL)
			break;
		i = (size_t)(p - buf);
		if (memcmp(p, "\r\n\r\n", 4) == 0) {
			*end = i + 4;
			*cursor = i + 4;
			return true;
		}
		i++;
	}
	*cursor = len;
	return false;
}

int
http_authority_split(const struct http_span *a, unsigned default_port,
    struct http_span *host, unsigned *port)
{
	const char *p = a->p, *end = a->p + a->n, *colon = NULL;
	size_t i;

	if (a->n == 0 || memchr(p, '@', a->n) != NULL)
		return -1;
	if (p[0] == '[') {
		const char *rb = memchr(p, ']', a->n);

		if (rb == NULL || rb == p + 1)
			return -1;
		for (i = 1; p + i < rb; i++)
			if (!(is_digit((unsigned char)p[i]) ||
			        in_set((unsigned char)p[i], "abcdefABCDEF:.")))
				return -1;
		host->p = p + 1;
		host->n = (size_t)(rb - p - 1);
		if (rb + 1 == end) {
			*port = default_port;
			return 0;
		}
		if (rb[1] != ':')
			return -1;
		colon = rb + 1;
	} else {
		for (i = 0; i < a->n; i++) {
			unsigned char c = (unsigned char)p[i];

			if (c == ':') {
				colon = p + i;
				break;
			}
			/* RFC 3986 reg-name */
			if (!((c >= 'a' && c <= 'z') ||
			        (c >= 'A' && c <= 'Z') || is_digit(c) ||
			        in_set(c, "-._~!$&'()*+,;=%")))
				return -1;
		}
		host->p = p;
		host->n = colon ? (size_t)(colon - p) : a->n;
		if (host->n == 0)
			return -1;
		if (colon == NULL) {
			*port = default_port;
			return 0;
		}
	}
	/* ":" then 1-5 digits, 1-65535 */
	{
		unsigned v = 0;
		const char *q = colon + 1;

		if (q == end || end - q > 5)
			return -1;
		for (; q < end; q++) {
			if (!is_digit((unsigned char)*q))
				return -1;
			v = v * 10 + (unsigned)(*q - '0');
		}
		if (v == 0 || v > 65535)
			return -1;
		*port = v;
	}
	return 0;
}

/* "HTTP/1.0" or "HTTP/1.1"; 505 for any other HTTP-version. */
static enum http_rc
version(const char *p, size_t n, struct http_head *out, struct err *e)
{
	if (n == 8 && memcmp(p, "HTTP/1.", 7) == 0 &&
	    (p[7] == '0' || p[7] == '1')) {
		out->minor = p[7] - '0';
		return HTTP_HEAD_OK;
	}
	if (n == 8 && memcmp(p, "HTTP/", 5) == 0 && is_digit(p[5]) &&
	    p[6] == '.' && is_digit(p[7]))
		return bad(out, 505, e, "HTTP version not supported");
	return bad(out, 400, e, "malformed HTTP version");
}

/* The request-target's form and parts. */
static enum http_rc
target(struct http_head *out, struct err *e)
{
	const char *p = out->target.p, *end = p + out->target.n, *q;
	const char *sep;

	if (http_span_eq(&out->method, "CONNECT")) {
		unsigned port;
		struct http_span host;

		out->form = HTTP_TARGET_AUTHORITY;
		out->authority = out->target;
		if (http_authority_split(&out->authority, 0, &host, &port) <
		        0 ||
		    port == 0)
			return bad(out, 400, e, "malformed CONNECT target");
		return HTTP_HEAD_OK;
	}
	if (out->target.n == 1 && p[0] == '*') {
		if (!http_span_eq(&out->method, "OPTIONS"))
			return bad(out, 400, e, "'*' target outside OPTIONS");
		out->form = HTTP_TARGET_ASTERISK;
		return HTTP_HEAD_OK;
	}
	if (p[0] == '/') {
		out->form = HTTP_TARGET_ORIGIN;
		q = p;
	} else {
		sep = memchr(p, ':', out->target.n);
		if (sep == NULL || end - sep < 3 || sep[1] != '/' ||
		    sep[2] != '/')
			return bad(out, 400, e, "malformed request target");
		out->scheme.p = p;
		out->scheme.n = (size_t)(sep - p);
		if (!http_span_ieq(&out->scheme, "http") &&
		    !http_span_ieq(&out->scheme, "https"))
			return bad(out, 400, e,
			    "absolute-form target with a scheme other than "
			    "http(s)");
		out->form = HTTP_TARGET_ABSOLUTE;
		out->authority.p = sep + 3;
		for (q = sep + 3; q < end && *q != '/' && *q != '?'; q++)
			;
		out->authority.n = (size_t)(q - out->authority.p);
		{
			struct http_span host;
			unsigned port;

			if (http_authority_split(
			        &out->authority, 80, &host, &port) < 0)
				return bad(out, 400, e,
				    "malformed authority in the request "
				    "target");
		}
	}
	out->path.p = q;
	sep = memchr(q, '?', (size_t)(end - q));
	out->path.n = (size_t)((sep ? sep : end) - q);
	if (sep != NULL) {
		out->has_query = true;
		out->query.p = sep + 1;
		out->query.n = (size_t)(end - sep - 1);
	}
	if (memchr(q, '#', (size_t)(end - q)) != NULL)
		return bad(out, 400, e, "fragment in the request target");
	return HTTP_HEAD_OK;
}

/* Comma-separated tokens of a Connection value. */
static void
connection_tokens(struct http_head *out, const struct http_span *v)
{
	const char *p = v->p, *end = v->p + v->n;

	while (p < end) {
		struct http_span t;
		const char *c = memchr(p, ',', (size_t)(end - p));
		const char *te = c ? c : end;

		while (p < te && (*p == ' ' || *p == '\t'))
			p++;
		t.p = p;
		while (te > p && (te[-1] == ' ' || te[-1] == '\t'))
			te--;
		t.n = (size_t)(te - p);
		if (http_span_ieq(&t, "close"))
			out->conn_close = true;
		else if (http_span_ieq(&t, "upgrade"))
			out->conn_upgrade = true;
		else if (http_span_ieq(&t, "keep-alive") && out->minor == 0)
			out->conn_close = false;
		p = c ? c + 1 : end;
	}
}

/*
 * The header lines from p to the head's end (just before the final CRLF).
 * Every line already ends in CRLF and holds no bare CR or LF, no NUL, no
 * DEL and no control but HTAB (lines()).
 */
static enum http_rc
headers(const char *p, const char *end, struct http_head *out, struct err *e)
{
	while (p < end) {
		const char *eol = memchr(p, '\r', (size_t)(end - p));
		const char *colon, *v, *ve;
		struct http_header *h;

		if (*p == ' ' || *p == '\t')
			return bad(out, 400, e, "obsolete line folding");
		/* the name's end is its first byte that is no token character:
		 * the colon, or what makes the line bad */
		for (v = p; v < eol && http_is_tchar((unsigned char)*v); v++)
			;
		if (v == eol)
			colon = NULL;
		else if (*v == ':')
			colon = v;
		else
			colon = memchr(v + 1, ':', (size_t)(eol - v - 1));
		if (colon == NULL || colon == p)
			return bad(out, 400, e, "header line without a name");
		if (v != colon)
			return bad(out, 400, e,
			    *v == ' ' || *v == '\t'
			        ? "whitespace before a header's colon"
			        : "header name is not a token");
		for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
			;
		for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t');
		     ve--)
			;
		/* the value is field content (VCHAR, obs-text, SP, HTAB):
		 * lines() refused every other byte in the whole head */
		if (out->nh == HTTP_HEADERS_MAX)
			return bad(out, 431, e, "too many header fields");
		h = &out->h[out->nh++];
		h->name.p = p;
		h->name.n = (size_t)(colon - p);
		h->value.p = v;
		h->value.n = (size_t)(ve - v);
		p = eol + 2;
	}
	return HTTP_HEAD_OK;
}

const struct http_span *
http_header_get(const struct http_head *h, const char *name, size_t *count)
{
	const struct http_span *first = NULL;
	size_t i, k = 0, n = strlen(name);

	for (i = 0; i < h->nh; i++)
		if (h->h[i].name.n == n &&
		    strncasecmp(h->h[i].name.p, name, n) == 0) {
			if (first == NULL)
				first = &h->h[i].value;
			k++;
		}
	if (count != NULL)
		*count = k;
	return first;
}

/* Content-Length, Transfer-Encoding, Connection, Expect: the framing. */
static enum http_rc
framing(struct http_head *out, struct err *e)
{
	const struct http_span *cl, *te, *v;
	size_t ncl, nte, n, i;

	cl = http_header_get(out, "Content-Length", &ncl);
	te = http_header_get(out, "Transfer-Encoding", &nte);
	if (ncl > 1)
		return bad(out, 400, e, "more than one Content-Length");
	if (cl != NULL && te != NULL)
		return bad(
		    out, 400, e, "both Content-Length and Transfer-Encoding");
	if (te != NULL) {
		if (out->minor == 0)
			return bad(
			    out, 400, e, "Transfer-Encoding in HTTP/1.0");
		if (nte > 1 || !http_span_ieq(te, "chunked"))
			return bad(
			    out, 501, e, "transfer coding other than chunked");
		out->body = HTTP_BODY_CHUNKED;
	} else if (cl != NULL) {
		uint64_t len = 0;

		if (cl->n == 0 || cl->n > 18)
			return bad(out, 400, e, "malformed Content-Length");
		for (i = 0; i < cl->n; i++) {
			if (!is_digit((unsigned char)cl->p[i]))
				return bad(
				    out, 400, e, "malformed Content-Length");
			len = len * 10 + (uint64_t)(cl->p[i] - '0');
		}
		out->content_length = len;
		out->body = HTTP_BODY_LENGTH;
	}
	out->conn_close = out->minor == 0;
	for (i = 0; i < out->nh; i++)
		if (http_span_ieq(&out->h[i].name, "Connection"))
			connection_tokens(out, &out->h[i].value);
	v = http_header_get(out, "Expect", &n);
	if (v != NULL) {
		if (!out->is_request)
			return HTTP_HEAD_OK;
		if (n > 1 || !http_span_ieq(v, "100-continue"))
			return bad(out, 417, e, "unsupported Expect");
		out->expect_continue = true;
	}
	return HTTP_HEAD_OK;
}

/*
 * The head's lines: every CR is followed by LF and every LF preceded by
 * CR, no NUL or other control but HTAB; *line_end gets the end of the
 * first line (its CR).
 */
static enum http_rc
lines(const char *buf, size_t head_len, struct http_head *out,
    const char **line_end, struct err *e)
{
	size_t i;

	*line_end = NULL;
	for (i = 0; i < head_len; i++) {
		unsigned char c;

		i += plain_run(buf + i, head_len - i);
		if (i == head_len)
			break;
		c = (unsigned char)buf[i];
		if (c == '\r') {
			if (i + 1 >= head_len || buf[i + 1] != '\n')
				return bad(out, 400, e, "bare CR in the head");
			if (*line_end == NULL)
				*line_end = buf + i;
			i++;
		} else if (c == '\n') {
			return bad(out, 400, e, "bare LF in the head");
		} else if ((c < 0x20 && c != '\t') || c == 0x7f) {
			return bad(
			    out, 400, e, "control character in the head");
		}
	}
	return HTTP_HEAD_OK;
}

/* The bounds and the end of the head: MORE, BAD or OK with head_len. */
static enum http_rc
find_head(const char *buf, size_t len, struct http_head *out, struct err *e,
    int line_status)
{
	size_t cursor = 0, end;
	const char *nl;

	if (!http_head_find_end(buf, len, &cursor, &end)) {
		nl = memchr(
		    buf, '\n', len < HTTP_LINE_MAX ? len : HTTP_LINE_MAX);
		if (nl == NULL && len >= HTTP_LINE_MAX)
			return bad(out, line_status, e, "first line too long");
		if (len >= HTTP_HEAD_MAX)
			return bad(out, 431, e, "head too large");
		/* reject junk early rather than wait for the bound */
		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)buf[i];

			if (c == '\0' ||
			    (c == '\n' && (i == 0 || buf[i - 1] != '\r')))
				return bad(out, 400, e,
				    c ? "bare LF in the head"
				      : "NUL in the head");
		}
		return HTTP_HEAD_MORE;
	}
	if (end > HTTP_HEAD_MAX)
		return bad(out, 431, e, "head too large");
	out->head_len = end;
	return HTTP_HEAD_OK;
}

/*
 * A request's Host: exactly one in HTTP/1.1 (at most one in 1.0), well
 * formed, and the same authority as an absolute-form target's.
 */
static enum http_rc
request_host(struct http_head *out, struct err *e)
{
	const struct http_span *host;
	struct http_span hh;
	unsigned port;
	size_t nhost;

	host = http_header_get(out, "Host", &nhost);
	if (nhost > 1)
		return bad(out, 400, e, "more than one Host");
	if (nhost == 0 && out->minor == 1)
		return bad(out, 400, e, "no Host in HTTP/1.1");
	if (host != NULL) {
		out->host = *host;
		if (http_authority_split(host, 80, &hh, &port) < 0)
			return bad(out, 400, e, "malformed Host");
	}
	if (out->form == HTTP_TARGET_ABSOLUTE && out->host.n != 0) {
		/* RFC 9112 3.2.2 says to ignore Host then; two readers that
		 * disagree on which one counts are a smuggling channel */
		struct http_span h1, h2;
		unsigned p1, p2, dp;

		dp = http_span_ieq(&out->scheme, "https") ? 443 : 80;
		(void)http_authority_split(&out->authority, dp, &h1, &p1);
		(void)http_authority_split(&out->host, dp, &h2, &p2);
		if (h1.n != h2.n || strncasecmp(h1.p, h2.p, h1.n) != 0 ||
		    p1 != p2)
			return bad(out, 400, e,
			    "absolute-form target and Host disagree");
	}
	return HTTP_HEAD_OK;
}

enum http_rc
http_parse_request(
    const char *buf, size_t len, struct http_head *out, struct err *e)
{
	const char *le, *sp1, *sp2, *p;
	enum http_rc rc;

	memset(out, 0, sizeof(*out));
	out->is_request = true;
	if ((rc = find_head(buf, len, out, e, 414)) != HTTP_HEAD_OK)
		return rc;
	if ((rc = lines(buf, out->head_len, out, &le, e)) != HTTP_HEAD_OK)
		return rc;
	if ((size_t)(le - buf) + 2 > HTTP_LINE_MAX)
		return bad(out, 414, e, "request line too long");
	/* method SP request-target SP HTTP-version, single spaces */
	sp1 = memchr(buf, ' ', (size_t)(le - buf));
	if (sp1 == NULL || sp1 == buf)
		return bad(out, 400, e, "malformed request line");
	sp2 = memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1));
	if (sp2 == NULL || sp2 == sp1 + 1 ||
	    memchr(sp2 + 1, ' ', (size_t)(le - sp2 - 1)) != NULL)
		return bad(out, 400, e, "malformed request line");
	out->method.p = buf;
	out->method.n = (size_t)(sp1 - buf);
	if (out->method.n > HTTP_METHOD_MAX)
		return bad(out, 400, e, "method too long");
	for (p = buf; p < sp1; p++)
		if (!http_is_tchar((unsigned char)*p))
			return bad(out, 400, e, "method is not a token");
	/* Methods are case-sensitive (RFC 9110 9.1), but some origins fold
	 * them: "head" is HEAD to one (no body in its response) and an
	 * unknown method to another (a body). The response's framing would
	 * be a guess, so a method that differs from one whose response
	 * framing is special only in case is refused. */
	if ((http_span_ieq(&out->method, "HEAD") &&
	        !http_span_eq(&out->method, "HEAD")) ||
	    (http_span_ieq(&out->method, "CONNECT") &&
	        !http_span_eq(&out->method, "CONNECT")))
		return bad(
		    out, 400, e, "method is HEAD or CONNECT in another case");
	out->target.p = sp1 + 1;
	out->target.n = (size_t)(sp2 - sp1 - 1);
	for (p = out->target.p; p < sp2; p++)
		if (!((unsigned char)*p >= 0x21 && (unsigned char)*p <= 0x7e))
			return bad(out, 400, e,
			    "request target holds a byte that is not "
			    "visible ASCII");
	if ((rc = version(sp2 + 1, (size_t)(le - sp2 - 1), out, e)) !=
	    HTTP_HEAD_OK)
		return rc;
	if ((rc = target(out, e)) != HTTP_HEAD_OK)
		return rc;
	if ((rc = headers(le + 2, buf + out->head_len - 2, out, e)) !=
	    HTTP_HEAD_OK)
		return rc;
	if ((rc = request_host(out, e)) != HTTP_HEAD_OK)
		return rc;
	return framing(out, e);
}

enum http_rc
http_parse_response(const char *buf, size_t len,
    const struct http_span *req_method, struct http_head *out, struct err *e)
{
	const char *le;
	enum http_rc rc;
	size_t n;

	memset(out, 0, sizeof(*out));
	if ((rc = find_head(buf, len, out, e, 400)) != HTTP_HEAD_OK)
		return rc;
	if ((rc = lines(buf, out->head_len, out, &le, e)) != HTTP_HEAD_OK)
		return rc;
	n = (size_t)(le - buf);
	/* HTTP-version SP 3DIGIT [SP reason-phrase] */
	if (n < 12 || buf[8] != ' ' || !is_digit(buf[9]) ||
	    !is_digit(buf[10]) || !is_digit(buf[11]) ||
	    (n > 12 && buf[12] != ' '))
		return bad(out, 400, e, "malformed status line");
	if ((rc = version(buf, 8, out, e)) != HTTP_HEAD_OK)
		return rc;
	out->status =
	    (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + buf[11] - '0';
	if (out->status < 100)
		return bad(out, 400, e, "malformed status code");
	out->reason.p = buf + (n > 12 ? 13 : 12);
	out->reason.n = n > 12 ? n - 13 : 0;
	/* the reason phrase is HTAB, SP, VCHAR and obs-text: lines() refused
	 * every other byte */
	if ((rc = headers(le + 2, buf + out->head_len - 2, out, e)) !=
	    HTTP_HEAD_OK)
		return rc;
	if ((rc = framing(out, e)) != HTTP_HEAD_OK)
		return rc;
	if ((req_method != NULL && http_span_eq(req_method, "HEAD")) ||
	    out->status < 200 || out->status == 204 || out->status == 304) {
		out->body = HTTP_BODY_NONE;
		out->content_length = 0;
	} else if (out->body == HTTP_BODY_NONE) {
		out->body = HTTP_BODY_CLOSE;
		out->conn_close = true;
	}
	return HTTP_HEAD_OK;
}

const char *
http_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 101:
		return "Switching Protocols";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 412:
		return "Precondition Failed";
	/* the reference's (Go's) phrase, which its clients have seen */
	case 413:
		return "Request Entity Too Large";
	case 414:
		return "URI Too Long";
	case 417:
		return "Expectation Failed";
	case 421:
		return "Misdirected Request";
	case 426:
		return "Upgrade Required";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}
