/*
 * dns_conn: a TCP client's connection: its state, backpressure (reading
 * paused while too many queries are in flight or too much output waits),
 * and its one close path, freed on the next loop turn. The transport that
 * reads its queries is dns_listen.c.
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "egressd/dns/dns_int.h"

void
dns_conn_set_state(struct dns_conn *c, enum dns_conn_state to)
{
	static const char *const names[] = {"open", "draining", "closed"};

	if (c->state == to)
		return;
	log_debug(c->d->lg, "dns.tcp.state", LOG_U("conn", c->id),
	    LOG_S("from", names[c->state]), LOG_S("to", names[to]));
	c->state = to;
}

void
dns_conn_reap(struct dns *d)
{
	while (!LIST_EMPTY(&d->graveyard)) {
		struct dns_conn *c = LIST_FIRST(&d->graveyard);

		LIST_REMOVE(c, entry);
		c->magic = DNS_DEAD_MAGIC;
		free(c);
	}
}

/*
 * The one close path. Idempotent; reason is a fixed string. Queries still
 * in flight stay in flight but lose their way back. The struct itself is
 * freed on the next loop turn, since callers up the stack may hold it.
 */
void
dns_conn_close(struct dns_conn *c, const char *reason)
{
	struct dns *d = c->d;
	struct dns_req *r;

	if (c->state == DNS_CONN_CLOSED)
		return;
	dns_conn_set_state(c, DNS_CONN_CLOSED);
	log_debug(d->lg, "dns.tcp.close", LOG_U("conn", c->id),
	    LOG_S("reason", reason), LOG_U("queries", c->nqueries));
	/* They are no longer on any connection's list (dns_req_unlink). */
	LIST_FOREACH(r, &c->reqs, centry)
	r->from.conn = NULL;
	LIST_INIT(&c->reqs);
	c->inflight = 0;
	if (c->bev != NULL)
		bufferevent_free(c->bev);
	c->bev = NULL;
	LIST_REMOVE(c, entry);
	d->nconns--;
	LIST_INSERT_HEAD(&d->graveyard, c, entry);
	event_active(d->reaper, EV_TIMEOUT, 0);
}

bool
dns_conn_output_full(const struct dns_conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev)) >
	    DNS_TCP_OUTBUF_MAX;
}

void
dns_conn_pause(struct dns_conn *c)
{
	if (c->read_paused)
		return;
	c->read_paused = true;
	bufferevent_disable(c->bev, EV_READ);
}

/* Called when an answer went out or a query finished. */
void
dns_conn_after_reply(struct dns_conn *c)
{
	if (c->state == DNS_CONN_CLOSED)
		return;
	if (c->state == DNS_CONN_DRAINING) {
		if (c->inflight == 0 &&
		    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
			dns_conn_close(c, "done");
		return;
	}
	if (c->read_paused && c->inflight < c->d->tcp_inflight_max &&
	    !dns_conn_output_full(c)) {
		c->read_paused = false;
		bufferevent_enable(c->bev, EV_READ);
		/* Frames may already be buffered: run the read cb again. */
		bufferevent_trigger(c->bev, EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
	}
}
