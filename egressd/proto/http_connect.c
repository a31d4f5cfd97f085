/*
 * http_connect: the CONNECT request to an upstream proxy and its
 * response (http_connect.h).
 */
#include "egressd/proto/http_connect.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "egressd/proto/http_head.h"
#include "util/addr.h"

/* A DNS name as a CONNECT target carries it: LDH, dots, underscores. */
static bool
name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-')
		return false;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		        (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
		        ch == '_'))
			return false;
	}
	return true;
}

int
http_connect_authority(
    const char *host, uint16_t port, char *out, size_t cap, struct err *e)
{
	size_t n = strlen(host);
	struct addr a;
	int w;

	if (port == 0) {
		err_set(e, "CONNECT target: port 0");
		return -1;
	}
	if (addr_parse_ip(host, n, &a))
		w = snprintf(out, cap,
		    a.family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
		    (unsigned)port);
	else if (name_ok(host, n))
		w = snprintf(out, cap, "%s:%u", host, (unsigned)port);
	else {
		err_set(e, "CONNECT target: not a host name or IP literal");
		return -1;
	}
	if (w < 0 || (size_t)w >= cap) {
		err_set(e, "CONNECT target: too long");
		return -1;
	}
	return 0;
}

int
http_connect_auth_check(const char *auth, size_t len, struct err *e)
{
	size_t i;

	if (len == 0 || len > HTTP_CONNECT_AUTH_MAX) {
		err_set(e, "Proxy-Authorization value: empty or over %d bytes",
		    HTTP_CONNECT_AUTH_MAX);
		return -1;
	}
	/* field-value (RFC 9110 5.5) without obs-text: visible ASCII,
	 * spaces inside, none at either end */
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)auth[i];

		if (ch < 0x20 || ch > 0x7e ||
		    (ch == ' ' && (i == 0 || i == len - 1))) {
			err_set(e,
			    "Proxy-Authorization value: byte %zu is not "
			    "visible ASCII or an inner space",
			    i);
			return -1;
		}
	}
	return 0;
}

int
http_connect_request(const char *authority, const char *auth, size_t auth_len,
    char *out, size_t cap, size_t *len, struct err *e)
{
	size_t an = strlen(authority), need;
	static const char l1[] = "CONNECT ", l2[] = " HTTP/1.1\r\nHost: ",
	                  l3[] = "\r\nProxy-Authorization: ",
	                  end[] = "\r\n\r\n";
	char *p = out;

	if (an == 0 || an > HTTP_CONNECT_AUTHORITY_MAX ||
	    strcspn(authority, " \t\r\n@/") != an) {
		err_set(e, "CONNECT target: malformed authority");
		return -1;
	}
	if (auth != NULL && http_connect_auth_check(auth, auth_len, e) == -1)
		return -1;
	need = sizeof(l1) - 1 + an + sizeof(l2) - 1 + an + sizeof(end) - 1 +
	    (auth != NULL ? sizeof(l3) - 1 + auth_len : 0);
	if (need > cap) {
		err_set(
		    e, "CONNECT request: %zu bytes, room for %zu", need, cap);
		return -1;
	}
#define PUT(s, n)                                                              \
	do {                                                                   \
		memcpy(p, (s), (n));                                           \
		p += (n);                                                      \
	} while (0)
	PUT(l1, sizeof(l1) - 1);
	PUT(authority, an);
	PUT(l2, sizeof(l2) - 1);
	PUT(authority, an);
	if (auth != NULL) {
		PUT(l3, sizeof(l3) - 1);
		PUT(auth, auth_len);
	}
	PUT(end, sizeof(end) - 1);
#undef PUT
	*len = (size_t)(p - out);
	return 0;
}

enum http_connect_rc
http_connect_parse(
    const char *buf, size_t len, struct http_connect_resp *r, struct err *e)
{
	static const struct http_span connect = {"CONNECT", 7};
	struct http_head h;
	size_t lim = len < HTTP_CONNECT_HEAD_MAX ? len : HTTP_CONNECT_HEAD_MAX;
	const struct http_span *v;
	size_t n;

	memset(r, 0, sizeof(*r));
	switch (http_parse_response(buf, lim, &connect, &h, e)) {
	case HTTP_HEAD_OK:
		break;
	case HTTP_HEAD_MORE:
		if (len < HTTP_CONNECT_HEAD_MAX)
			return HTTP_CONNECT_MORE;
		err_set(
		    e, "response head over %d bytes", HTTP_CONNECT_HEAD_MAX);
		return HTTP_CONNECT_BAD;
	default:
		return HTTP_CONNECT_BAD;
	}
	if (h.status < 200 || h.status > 599) {
		err_set(
		    e, "status %d: not a final answer to CONNECT", h.status);
		return HTTP_CONNECT_BAD;
	}
	if (h.status < 300) {
		if (http_header_get(&h, "Transfer-Encoding", &n) != NULL) {
			err_set(e, "a %d to CONNECT with Transfer-Encoding",
			    h.status);
			return HTTP_CONNECT_BAD;
		}
		v = http_header_get(&h, "Content-Length", &n);
		if (v != NULL && (v->n != 1 || v->p[0] != '0')) {
			err_set(e, "a %d to CONNECT with a body", h.status);
			return HTTP_CONNECT_BAD;
		}
	}
	r->status = h.status;
	r->head_len = h.head_len;
	return HTTP_CONNECT_OK;
}
