/*
 * Refusals: the answer queued (a TLS alert, an HTTP error), the REFUSE
 * state, the proxy.refused line.
 */
#include <event2/buffer.h>
#include <stdio.h>

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

void
proxy_refuse_http(struct proxy_conn *c, int status, enum proxy_reason why)
{
	/* a token endpoint's failure says which (a fixed text) */
	proxy_refuse_http_detail(c, status, why,
	    why == PROXY_VAULT_TOKEN && c->vault.mint_why[0] != '\0'
	        ? c->vault.mint_why
	        : NULL);
}
