/*
 * dns_req: a query in flight (waiting for its upstream, or for the learn
 * of its answer), linked into the resolver's list and its TCP
 * connection's.
 */
#include <stdlib.h>
#include <sys/queue.h>

#include "egressd/dns/dns_int.h"

void
dns_req_unlink(struct dns_req *r)
{
	LIST_REMOVE(r, entry);
	r->d->nreqs--;
	if (r->from.conn != NULL) {
		LIST_REMOVE(r, centry);
		r->from.conn->inflight--;
	}
}

/* Into d->reqs and, for TCP, its connection's list (counted in flight). */
void
dns_req_link(struct dns *d, struct dns_req *r)
{
	LIST_INSERT_HEAD(&d->reqs, r, entry);
	d->nreqs++;
	if (r->from.conn != NULL) {
		LIST_INSERT_HEAD(&r->from.conn->reqs, r, centry);
		r->from.conn->inflight++;
	}
}

void
dns_req_free(struct dns_req *r)
{
	free(r->ans);
	policy_unref(r->pol);
	r->magic = DNS_DEAD_MAGIC;
	free(r);
}
