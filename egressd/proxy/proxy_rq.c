/*
 * The queue of request records: every request forwarded and not yet
 * answered, oldest first. The one place per-request state lives; a
 * response is always the oldest record's.
 */
#include <string.h>

#include "util/now.h"
#include "egressd/proxy/proxy_int.h"

/* The oldest request awaiting its response (c->relay.rq_n > 0). */
struct proxy_rq *
proxy_rq_head(struct proxy_conn *c)
{
	return &c->relay.rq[c->relay.rq_first];
}

/* Records a forwarded request h (c->relay.rq_n < PROXY_PIPELINE_MAX); takes
 * the reference v (NULL: not a bound origin). */
struct proxy_rq *
proxy_rq_push(struct proxy_conn *c, const struct http_head *h, struct vault *v)
{
	struct proxy_rq *r =
	    &c->relay
	         .rq[(c->relay.rq_first + c->relay.rq_n) % PROXY_PIPELINE_MAX];

	memset(r, 0, sizeof(*r));
	memcpy(r->method, h->method.p, h->method.n);
	r->method[h->method.n] = '\0';
	r->upgrade = h->conn_upgrade;
	r->http10 = h->minor == 0;
	r->vault = v;
	c->relay.rq_n++;
	return r;
}

/* The oldest request's response is through: its record goes. */
void
proxy_rq_pop(struct proxy_conn *c)
{
	struct proxy_rq *r = proxy_rq_head(c);

	vault_free(r->vault);
	memset(r, 0, sizeof(*r));
	c->relay.rq_first = (c->relay.rq_first + 1) % PROXY_PIPELINE_MAX;
	c->relay.rq_n--;
}
