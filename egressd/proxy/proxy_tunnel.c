/*
 * Through the upstream proxy: the CONNECT for one client connection
 * (uproxy.h does the exchange), its target, and the failure's log line
 * and words; proxy_connect.c acts on the outcome.
 *
 * The target is the name egressd judged (the SNI; a plain connection's
 * first Host) and the original port, or with UPROXY_BY_ADDRESS the
 * original destination's address (docs/proxy.md, "Upstream proxy": the
 * proxy then resolves nothing).
 */
#include <stdio.h>
#include <string.h>

#include "egressd/proxy/proxy_int.h"

/* Nine tenths of the connect deadline: the dial's own verdict (a 502
 * saying timeout) lands before the connection's (connect_timeout). */
static unsigned
proxy_tunnel_ms(const struct proxy *p)
{
	unsigned ms = p->o.connect_ms != 0 ? p->o.connect_ms : PROXY_CONNECT_MS;

	return ms - ms / 10;
}

static void
proxy_tunnel_fail(struct proxy_conn *c, enum uproxy_fail f, int status)
{
	char via[ADDR_TEXT_MAX], dst[ADDR_TEXT_MAX];

	uproxy_describe(c->p->o.upstream, via, sizeof(via));
	addr_format_port(&c->dst, c->dport, dst, sizeof(dst));
	log_warn(c->p->log, "proxy.upstream_proxy_failed",
	    LOG_S("name", c->name), LOG_S("dst", dst), LOG_S("via", via),
	    LOG_S("reason", uproxy_fail_name(f)), LOG_I("status", status));
	/* our own words and the proxy's status number, never its text */
	if (status != 0)
		(void)snprintf(c->tls.up_why, sizeof(c->tls.up_why),
		    "%s (status %d)", uproxy_fail_name(f), status);
	else
		(void)snprintf(c->tls.up_why, sizeof(c->tls.up_why), "%s",
		    uproxy_fail_name(f));
	c->origin.via_failed = true;
}

static void
proxy_tunnel_done_cb(void *arg, int fd, enum uproxy_fail f, int status)
{
	struct proxy_conn *c = proxy_conn_arg(arg);

	c->origin.dial = NULL; /* uproxy frees it when this returns */
	proxy_conn_touch(c);
	if (fd == -1)
		proxy_tunnel_fail(c, f, status);
	c->origin.dial_done(c, fd);
}

void
proxy_tunnel_dial(
    struct proxy_conn *c, void (*done)(struct proxy_conn *c, int fd))
{
	struct proxy *p = c->p;
	char host[ADDR_TEXT_MAX > sizeof(c->name) ? ADDR_TEXT_MAX
	                                          : sizeof(c->name)];
	struct err e = {""};

	proxy_conn_set_state(c, PROXY_ST_CONNECT);
	(void)evtimer_del(c->timer);
	proxy_conn_arm(c, p->o.connect_ms);
	c->origin.dial_done = done;
	if (uproxy_target_by(p->o.upstream) == UPROXY_BY_ADDRESS ||
	    c->name[0] == '\0')
		addr_format(&c->dst, host, sizeof(host));
	else
		(void)snprintf(host, sizeof(host), "%s", c->name);
	c->origin.dial = uproxy_dial(p->base, p->o.upstream, p->o.mark, host,
	    c->dport, proxy_tunnel_ms(p), proxy_tunnel_done_cb, c, &e);
	if (c->origin.dial == NULL) {
		log_warn(
		    p->log, "proxy.upstream_socket", LOG_S("error", e.msg));
		proxy_tunnel_fail(c, UPROXY_UNREACHABLE, 0);
		done(c, -1);
	}
}
