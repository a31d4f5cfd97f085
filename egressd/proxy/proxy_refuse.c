/*
 * Refusals: the answer queued (a TLS alert, an HTTP error), the REFUSE
 * state, the proxy.refused line.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/now.h"
#include "egressd/proxy/proxy_int.h"

static void
proxy_log_refused(struct proxy_conn *c)
{
	char dst[ADDR_TEXT_MAX], key[ADDR_TEXT_MAX + 32];

	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	(void)snprintf(
	    key, sizeof(key), "%s|%s", dst, proxy_reason_name(c->why));
	if (!log_limiter_allow(&c->p->lim, key, now_mono_ms()))
		return;
	log_info(c->p->log, "proxy.refused",
	    LOG_S("proto", c->proto == PROTO_TLS ? "tls" : "http"),
	    LOG_S("reason", proxy_reason_name(c->why)), LOG_S("name", c->name),
	    LOG_S("dst", dst));
}

/*
 * Our answer is queued: send it, then FIN, then read and drop what the
 * client still sends for PROXY_LINGER_MS (closing with unread input
 * would reset the connection and could destroy the answer in flight).
 */
static void
proxy_refuse_send(struct proxy_conn *c, const void *msg, size_t len)
{
	if (!c->refused)
		c->p->st.refused++;
	c->refused = true;
	if (c->why != PROXY_REQUEST_DENIED) /* said by proxy.denied */
		proxy_log_refused(c);
	if (c->up != NULL) {
		bufferevent_free(c->up);
		c->up = NULL;
	}
	if (proxy_conn_attach_cli(c, NULL) == -1) {
		proxy_conn_close(c, c->why);
		return;
	}
	proxy_conn_set_state(c, PROXY_ST_REFUSE);
	evbuffer_drain(bufferevent_get_input(c->cli),
	    evbuffer_get_length(bufferevent_get_input(c->cli)));
	bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
	bufferevent_setwatermark(c->cli, EV_READ, 0, 0);
	if (bufferevent_write(c->cli, msg, len) == -1) {
		proxy_conn_close(c, c->why);
		return;
	}
	bufferevent_enable(c->cli, EV_READ | EV_WRITE);
	proxy_conn_arm(c, PROXY_LINGER_MS);
}

void
proxy_refuse_tls(struct proxy_conn *c, enum proxy_reason why)
{
	uint8_t alert[7];

	c->why = why;
	proxy_tls_alert(why, alert);
	proxy_refuse_send(c, alert, sizeof(alert));
}

/* detail: our own fixed text (never the peer's), or NULL. */
void
proxy_refuse_http_detail(
    struct proxy_conn *c, int status, enum proxy_reason why, const char *detail)
{
	char msg[512];
	int body, n;
	char text[256];

	c->why = why;
	body = snprintf(text, sizeof(text), "egressd: %s%s%s\n",
	    proxy_reason_name(why), detail != NULL ? ": " : "",
	    detail != NULL ? detail : "");
	if (body >= (int)sizeof(text))
		body = snprintf(text, sizeof(text), "egressd: %s\n",
		    proxy_reason_name(why));
	n = snprintf(msg, sizeof(msg),
	    "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
	    "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
	    status, http_reason(status), body, text);
	proxy_refuse_send(c, msg, (size_t)n);
}

/* s as a JSON string's contents: the request's own bytes are echoed,
 * and a path the normalizer refused may hold any of them. */
static void
proxy_refuse_json_str(char *out, size_t cap, size_t *at, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char ch;

	for (; *s != '\0' && *at + 7 < cap; s++) {
		ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			out[(*at)++] = '\\';
			out[(*at)++] = (char)ch;
		} else if (ch < 0x20 || ch > 0x7e) {
			*at += (size_t)snprintf(out + *at, cap - *at,
			    "\\u00%c%c", hex[ch >> 4], hex[ch & 15]);
		} else
			out[(*at)++] = (char)ch;
	}
	out[*at] = '\0';
}

/* Appends "key":"value" (escaped) to the body being built. */
static void
proxy_refuse_json_kv(
    char *out, size_t cap, size_t *at, const char *key, const char *val)
{
	*at += (size_t)snprintf(out + *at, cap - *at, ",\"%s\":\"", key);
	if (*at >= cap)
		*at = cap - 1;
	proxy_refuse_json_str(out, cap, at, val);
	if (*at + 1 < cap)
		out[(*at)++] = '"';
	out[*at] = '\0';
}

/*
 * A request the rules denied (issue 37): 403 (400: not judgeable) with
 * X-Egress-Denied: <reason> and {"error":"egress_denied","reason",
 * "host","method","path"[,"rule"]} so an agent can tell a policy block
 * from a network failure and from the origin's own 403.
 */
static void
proxy_refuse_denied(struct proxy_conn *c, int status)
{
	const struct proxy_denial *dn = c->relay.denial;
	const char *reason = policy_req_reason_name(dn->reason);
	size_t cap = 2048 + 6 * strlen(dn->path), at = 0, hl;
	char head[256], *body;

	c->why = PROXY_REQUEST_DENIED;
	if ((body = malloc(sizeof(head) + cap)) == NULL) {
		proxy_refuse_http_detail(c, status, PROXY_REQUEST_DENIED, NULL);
		return;
	}
	/* the body first, at sizeof(head): the head needs its length */
	at = (size_t)snprintf(body + sizeof(head), cap,
	    "{\"error\":\"egress_denied\",\"reason\":\"%s\"", reason);
	proxy_refuse_json_kv(body + sizeof(head), cap, &at, "host", dn->host);
	proxy_refuse_json_kv(
	    body + sizeof(head), cap, &at, "method", dn->method);
	proxy_refuse_json_kv(body + sizeof(head), cap, &at, "path", dn->path);
	if (dn->rule >= 0)
		at += (size_t)snprintf(body + sizeof(head) + at, cap - at,
		    ",\"rule\":%ld", dn->rule);
	at += (size_t)snprintf(body + sizeof(head) + at, cap - at, "}\n");
	hl = (size_t)snprintf(head, sizeof(head),
	    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
	    "X-Egress-Denied: %s\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n",
	    status, http_reason(status), reason, at);
	memcpy(body + sizeof(head) - hl, head, hl);
	proxy_refuse_send(c, body + sizeof(head) - hl, hl + at);
	free(body);
}

void
proxy_refuse_http(struct proxy_conn *c, int status, enum proxy_reason why)
{
	if (why == PROXY_REQUEST_DENIED && c->relay.denial != NULL) {
		proxy_refuse_denied(c, status);
		return;
	}
	/* a token endpoint's failure says which (a fixed text) */
	proxy_refuse_http_detail(c, status, why,
	    why == PROXY_VAULT_TOKEN && c->vault.mint_why[0] != '\0'
	        ? c->vault.mint_why
	        : NULL);
}
