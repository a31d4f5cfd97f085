/*
 * dns_send: the answer to a client, over the transport its query came in
 * by (UDP datagram, or a length-prefixed frame on its TCP connection).
 */
#include <event2/bufferevent.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/dns/dns_int.h"
#include "egressd/proto/dns_wire.h"

void
dns_send_batch_begin(struct dns *d, struct dns_udp *u)
{
	d->outq.u = u;
	d->outq.n = 0;
}

static void
dns_send_flush(struct dns *d)
{
	struct dns_udp_outq *q = &d->outq;
	unsigned i = 0;
	int r;

	/*
	 * sendmmsg stops at the first message that fails and reports it
	 * only when it is the first: skip that one and go on, so every
	 * answer is attempted exactly once, as one sendto each would.
	 */
	while (i < q->n) {
		r = sendmmsg(q->u->fd, q->msg + i, q->n - i, MSG_DONTWAIT);
		i += r > 0 ? (unsigned)r : 1;
	}
	q->n = 0;
}

void
dns_send_batch_end(struct dns *d)
{
	if (d->outq.u != NULL && d->outq.u->fd >= 0 && d->outq.n > 0)
		dns_send_flush(d);
	d->outq.u = NULL;
	d->outq.n = 0;
}

/* Into the batch's queue; false when it does not belong there. */
static bool
dns_send_queue(
    struct dns *d, const struct dns_origin *o, const uint8_t *buf, size_t len)
{
	struct dns_udp_outq *q = &d->outq;
	struct msghdr *mh;

	if (q->u != o->udp || len > sizeof(q->buf[0]) ||
	    o->peerlen > sizeof(q->peer[0]))
		return false;
	if (q->n == DNS_UDP_BATCH)
		dns_send_flush(d);
	memcpy(q->buf[q->n], buf, len);
	memcpy(&q->peer[q->n], &o->peer, o->peerlen);
	q->iov[q->n].iov_base = q->buf[q->n];
	q->iov[q->n].iov_len = len;
	mh = &q->msg[q->n].msg_hdr;
	memset(mh, 0, sizeof(*mh));
	mh->msg_name = &q->peer[q->n];
	mh->msg_namelen = o->peerlen;
	mh->msg_iov = &q->iov[q->n];
	mh->msg_iovlen = 1;
	q->n++;
	return true;
}

void
dns_send(
    struct dns *d, const struct dns_origin *o, const uint8_t *buf, size_t len)
{
	if (!o->tcp) {
		if (o->udp == NULL || o->udp->fd < 0)
			return;
		if (dns_send_queue(d, o, buf, len))
			return;
		/* UDP: a full socket buffer drops the answer; the client retries. */
		(void)sendto(o->udp->fd, buf, len, MSG_DONTWAIT,
		    (const struct sockaddr *)&o->peer, o->peerlen);
		return;
	}
	if (o->conn == NULL || o->conn->state == DNS_CONN_CLOSED) {
		(void)d;
		return;
	}
	{
		uint8_t pfx[DNS_TCP_PREFIX_LEN];

		if (dns_tcp_prefix(pfx, len) < 0)
			return;
		if (bufferevent_write(o->conn->bev, pfx, sizeof(pfx)) < 0 ||
		    bufferevent_write(o->conn->bev, buf, len) < 0)
			dns_conn_close(o->conn, "write_failed");
	}
}

void
dns_send_error_ede(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode, const struct dns_ede *ede)
{
	size_t len;

	if (rcode == DNS_RCODE_SERVFAIL)
		d->st->dns_servfail++;
	else if (rcode == DNS_RCODE_FORMERR)
		d->st->dns_formerr++;
	if (dns_build_error(q, rcode, ede, d->out, sizeof(d->out), &len, NULL) <
	    0)
		return;
	dns_send(d, o, d->out, len);
}

void
dns_send_error(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode)
{
	dns_send_error_ede(d, o, q, rcode, NULL);
}

static void
dns_send_negative_ede(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode, uint32_t ttl,
    const struct dns_ede *ede)
{
	size_t len;

	if (dns_build_negative(
	        q, rcode, ttl, ede, d->out, sizeof(d->out), &len, NULL) < 0) {
		dns_send_error(d, o, q, DNS_RCODE_SERVFAIL);
		return;
	}
	dns_send(d, o, d->out, len);
}

void
dns_send_negative(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, unsigned rcode, uint32_t ttl)
{
	dns_send_negative_ede(d, o, q, rcode, ttl, NULL);
}

/*
 * RFC 8914 §4.16 "Blocked": the resolver blocks the domain by its own
 * policy. Not 18 "Prohibited" (§4.19: the *client* is not authorized,
 * annotating REFUSED) nor 17 "Filtered" (a blocklist the client asked
 * for): the sandbox may ask, the name is what is refused, by an operator.
 */
static const struct dns_ede dns_deny_ede[] = {
    [DNS_DENY_POLICY] = {DNS_EDE_BLOCKED, "egressd: denied by policy"},
    [DNS_DENY_NO_POLICY] = {DNS_EDE_BLOCKED, "egressd: no policy in force"},
    [DNS_DENY_CNAME] = {DNS_EDE_BLOCKED,
        "egressd: CNAME target denied by policy"},
};

void
dns_send_denied(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, enum dns_deny_why why, uint32_t ttl)
{
	const struct dns_ede *ede = NULL;

	if ((size_t)why < sizeof(dns_deny_ede) / sizeof(dns_deny_ede[0]))
		ede = &dns_deny_ede[why];
	dns_send_negative_ede(d, o, q, DNS_RCODE_NXDOMAIN, ttl, ede);
}

/* UDP answers above the client's limit become TC=1 ("ask over TCP"). */
void
dns_send_answer(struct dns *d, const struct dns_origin *o,
    const struct dns_query *q, const uint8_t *buf, size_t len)
{
	size_t tlen;

	if (!o->tcp && len > dns_query_udp_limit(q)) {
		if (dns_build_truncated(
		        q, d->tmp, sizeof(d->tmp), &tlen, NULL) < 0)
			return;
		dns_send(d, o, d->tmp, tlen);
		return;
	}
	dns_send(d, o, buf, len);
}
