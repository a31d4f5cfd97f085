/*
 * Judging a plain HTTP request's Host against the destination.
 */

#include <string.h>

#include "egressd/proxy/proxy_int.h"

/* A name (SNI or Host) for the hook: lowercase, one trailing dot off. */
static bool
proxy_norm_name(const char *s, size_t n, char *out, size_t cap)
{
	size_t i;

	if (n > 0 && s[n - 1] == '.')
		n--;
	if (n == 0 || n >= cap)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		out[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
	}
	out[n] = '\0';
	return true;
}

/*
 * Is a request to name (judged) on c one to a bound origin, whose every
 * response is redacted: the connection is terminated, its origin
 * connection went to a bound host before, or a binding names the host?
 */
bool
proxy_judge_bound(struct proxy_conn *c, const char *name)
{
	struct vault *v;

	if (c->tls.term || c->origin.vault != NULL)
		return true;
	return c->p->h.vault_get != NULL &&
	    (v = c->p->h.vault_get(c->p->h.arg)) != NULL &&
	    vault_host_bound(v, name, c->dport);
}

/* name: TLS_HELLO_SNI_MAX + 1 bytes, gets the request's host ("" when
 * it has none or a bad one). */
enum proxy_reason
proxy_judge_host(
    struct proxy_conn *c, const struct http_head *h, int *status, char *name)
{
	struct http_span host;
	unsigned port;
	enum proxy_reason r;

	name[0] = '\0';

	*status = 403;
	if (h->host.p == NULL || h->host.n == 0) {
		*status = 400;
		return PROXY_NO_HOST;
	}
	if (http_span_ieq(&h->method, "CONNECT") ||
	    ((h->conn_upgrade || http_header_get(h, "upgrade", NULL) != NULL) &&
	        !proxy_http_upgrade_ok(h))) {
		*status = 501;
		return PROXY_UNSUPPORTED;
	}
	if (http_authority_split(
	        &h->host, c->tls.term ? 443 : 80, &host, &port) == -1 ||
	    !proxy_norm_name(host.p, host.n, name, TLS_HELLO_SNI_MAX + 1)) {
		name[0] = '\0';
		*status = 400;
		return PROXY_BAD_REQUEST;
	}
	if (c->tls.term) {
		/* the SNI was judged and the origin verified for it: a
		 * request for another name is not this connection's */
		if (strcmp(name, c->name) != 0 || port != c->dport) {
			*status = 421;
			return PROXY_MISDIRECTED;
		}
	}
	if (port != c->dport)
		r = PROXY_PORT_MISMATCH;
	else
		r = c->p->h.judge(c->p->h.arg, name, &c->dst, c->dport);
	/* the log names the first request's host, or the one refused */
	if (!c->tls.term && (c->name[0] == '\0' || r != PROXY_OK))
		memcpy(c->name, name, strlen(name) + 1);
	return r;
}
