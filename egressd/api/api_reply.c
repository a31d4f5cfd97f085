/*
 * api_reply: the answers every route sends (text as Go's http.Error
 * writes it, JSON as Go's json.Encoder does, 405 with Allow) and the
 * api.request line each one logs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include "egressd/api/api.h"
#include "egressd/api/api_frame.h"
#include "egressd/api/api_int.h"
#include "egressd/proto/http_head.h"
#include "egressd/base/log.h"
#include "egressd/base/metrics.h"
#include "egressd/base/stats.h"
#include "util/addr.h"
#include "util/now.h"
#include "util/secmem.h"

static const char *
api_method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET:
		return "GET";
	case EVHTTP_REQ_POST:
		return "POST";
	case EVHTTP_REQ_HEAD:
		return "HEAD";
	case EVHTTP_REQ_PUT:
		return "PUT";
	case EVHTTP_REQ_DELETE:
		return "DELETE";
	case EVHTTP_REQ_OPTIONS:
		return "OPTIONS";
	case EVHTTP_REQ_TRACE:
		return "TRACE";
	case EVHTTP_REQ_CONNECT:
		return "CONNECT";
	case EVHTTP_REQ_PATCH:
		return "PATCH";
	default:
		return "OTHER";
	}
}

/* ---- answers ---- */

void
api_reply(struct api_req *r, int code, const char *ctype, const char *body,
    size_t len)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(r->req);
	struct evbuffer *b = evbuffer_new();

	r->status = code;
	evhttp_add_header(oh, "Content-Type", ctype);
	if (b != NULL && len > 0 && evbuffer_add(b, body, len) == -1) {
		evbuffer_free(b);
		b = NULL;
	}
	if (b == NULL && len > 0) {
		/* Out of memory: say so rather than send a cut body. */
		r->status = code = 500;
	}
	evhttp_send_reply(r->req, code, http_reason(code), b);
	if (b != NULL)
		evbuffer_free(b);
}

void
api_reply_text(struct api_req *r, int code, const char *fmt, ...)
{
	char msg[API_MSG_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(msg) - 2)
		n = (int)(sizeof(msg) - 2); /* cut, still newline-ended */
	msg[n++] = '\n';
	msg[n] = '\0';
	evhttp_add_header(evhttp_request_get_output_headers(r->req),
	    "X-Content-Type-Options", "nosniff");
	api_reply(r, code, "text/plain; charset=utf-8", msg, (size_t)n);
}

void
api_reply_json(struct api_req *r, int code, json_t *o)
{
	char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	size_t n;

	json_decref(o);
	if (s == NULL) {
		api_reply_text(r, 500, "internal error: out of memory");
		return;
	}
	n = strlen(s);
	/* json_dumps leaves room only for its NUL; grow by one for '\n'. */
	{
		char *t = realloc(s, n + 2);
		if (t == NULL) {
			free(s);
			api_reply_text(r, 500, "internal error: out of memory");
			return;
		}
		s = t;
	}
	s[n++] = '\n';
	s[n] = '\0';
	api_reply(r, code, "application/json", s, n);
	free(s);
}

void
api_reply_405(struct api_req *r, const char *allow)
{
	evhttp_add_header(
	    evhttp_request_get_output_headers(r->req), "Allow", allow);
	api_reply_text(r, 405, "method not allowed");
}

void
api_reply_log(const struct api_req *r)
{
	/* Probes and scrapes that succeed are routine: debug, not info. */
	log_emit(r->a->log, r->quiet && r->status < 400 ? LOG_DEBUG : LOG_INFO,
	    "api.request",
	    (const struct log_field[]){LOG_S("method", api_method_name(r->cmd)),
	        LOG_S("path", r->path != NULL ? r->path : ""),
	        LOG_I("status", r->status),
	        LOG_D("ms", (double)(now_mono_us() - r->t0) / 1000.0),
	        LOG_S("peer", r->peer), LOG_END_});
}
