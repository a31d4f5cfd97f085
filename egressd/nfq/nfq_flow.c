/*
 * nfq_flow: the flows of the queue, each held until its ClientHello is
 * whole and judged (nfq.h).
 */

#include <linux/netfilter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/base/defaults.h"
#include "egressd/nfq/nfq_int.h"
#include "util/hash.h"

static size_t
nfq_flow_bucket(const struct ip_tcp *t)
{
	uint8_t key[36];

	memcpy(key, t->src, 16);
	memcpy(key + 16, t->dst, 16);
	memcpy(key + 32, &t->sport, 2);
	memcpy(key + 34, &t->dport, 2);
	return (size_t)(hash_fnv1a(key, sizeof(key)) % NFQ_BUCKETS);
}

static size_t
nfq_flow_bucket_of(const struct nfq_flow *f)
{
	struct ip_tcp t;

	memset(&t, 0, sizeof(t));
	memcpy(t.src, f->src, 16);
	memcpy(t.dst, f->dst, 16);
	t.sport = f->sport;
	t.dport = f->dport;
	return nfq_flow_bucket(&t);
}

static bool
nfq_flow_is(const struct nfq_flow *f, const struct ip_tcp *t)
{
	return f->family == t->family && f->sport == t->sport &&
	    f->dport == t->dport && memcmp(f->src, t->src, 16) == 0 &&
	    memcmp(f->dst, t->dst, 16) == 0;
}

static struct nfq_flow *
nfq_flow_find(struct nfq *q, const struct ip_tcp *t)
{
	struct nfq_flow *f;

	for (f = q->buckets[nfq_flow_bucket(t)]; f != NULL; f = f->next)
		if (nfq_flow_is(f, t))
			return f;
	return NULL;
}

/*
 * The table is full: forget the flows judged NFQ_JUDGED_GRACE_MS ago or
 * earlier. They are kept only for packets queued before their conntrack
 * mark changed, which come within the same read; without this, a
 * sandbox opening more than NFQ_FLOWS_MAX TLS connections per
 * NFQ_JUDGED_KEEP_MS would have its new ones refused.
 */
static void
nfq_flow_evict(struct nfq *q)
{
	uint64_t now = nfq_now(q);
	struct nfq_flow **pp, *f;
	size_t b;

	for (b = 0; b < NFQ_BUCKETS; b++) {
		pp = &q->buckets[b];
		while ((f = *pp) != NULL) {
			if (f->state == NFQ_FLOW_HOLD ||
			    f->deadline_ms - NFQ_JUDGED_KEEP_MS +
			            NFQ_JUDGED_GRACE_MS >
			        now) {
				pp = &f->next;
				continue;
			}
			*pp = f->next;
			free(f->buf);
			free(f);
			q->st.flows--;
		}
	}
}

static struct nfq_flow *
nfq_flow_new(struct nfq *q, const struct ip_tcp *t)
{
	size_t b = nfq_flow_bucket(t);
	struct nfq_flow *f;

	if (q->st.flows >= NFQ_FLOWS_MAX)
		nfq_flow_evict(q);
	if (q->st.flows >= NFQ_FLOWS_MAX || (f = calloc(1, sizeof(*f))) == NULL)
		return NULL;
	if ((f->buf = malloc(TLS_FLOW_BYTES_MAX)) == NULL) {
		free(f);
		return NULL;
	}
	tls_flow_init(&f->tf, f->buf, TLS_FLOW_BYTES_MAX);
	f->family = t->family;
	memcpy(f->src, t->src, 16);
	memcpy(f->dst, t->dst, 16);
	f->sport = t->sport;
	f->dport = t->dport;
	f->state = NFQ_FLOW_HOLD;
	f->deadline_ms = nfq_now(q) + q->o.hello_ms;
	f->next = q->buckets[b];
	q->buckets[b] = f;
	q->st.flows++;
	return f;
}

/*
 * One line per judged flow, like the proxy's proxy.closed: passes
 * always (it stands for the connection the proxy no longer sees),
 * refusals at most one per (dst, reason) per second, as the proxy's.
 */
static void
nfq_flow_log(struct nfq *q, const struct nfq_flow *f, const char *reason,
    const char *sni)
{
	struct addr a;
	char dst[ADDR_TEXT_MAX], key[ADDR_TEXT_MAX + 64];

	nfq_dst_addr(f->family, f->dst, &a);
	addr_format_port(&a, f->dport, dst, sizeof(dst));
	if (reason == NULL) {
		log_info(q->log, "nfq.judged", LOG_S("decision", "passthrough"),
		    LOG_S("by", "queue"), LOG_S("name", sni != NULL ? sni : ""),
		    LOG_S("dst", dst));
		return;
	}
	(void)snprintf(key, sizeof(key), "%s|%s", dst, reason);
	if (!log_limiter_allow(&q->lim, key, nfq_now(q)))
		return;
	log_info(q->log, "nfq.judged", LOG_S("decision", "refused"),
	    LOG_S("reason", reason), LOG_S("name", sni != NULL ? sni : ""),
	    LOG_S("dst", dst));
}

/* Every held packet of f gets the verdict of state; the buffer goes. */
static void
nfq_flow_decide(struct nfq *q, struct nfq_flow *f, enum nfq_flow_state s,
    const char *reason, const char *sni)
{
	uint32_t mark =
	    s == NFQ_FLOW_OK ? EGRESSD_QMARK_OK : EGRESSD_QMARK_REFUSED;
	size_t i;

	f->state = s;
	f->deadline_ms = nfq_now(q) + NFQ_JUDGED_KEEP_MS;
	for (i = 0; i < f->nheld; i++)
		nfq_verdict(q, f->held[i], NF_REPEAT, mark);
	f->nheld = 0;
	free(f->buf);
	f->buf = NULL;
	if (s == NFQ_FLOW_OK) {
		q->st.judged++;
		nfq_judged_add(q, f, sni);
		nfq_judged_teach(q, f, sni);
	} else
		q->st.refused++;
	nfq_flow_log(q, f, s == NFQ_FLOW_OK ? NULL : reason, sni);
}

/* The hello is whole: the proxy's decision (proxy_peek.c), then the
 * daemon's judge, then whether the proxy must see the name (held). NULL
 * when allowed. */
static const char *
nfq_flow_judge(
    struct nfq *q, const struct nfq_flow *f, const struct tls_hello *th)
{
	struct addr dst;
	const char *why;

	if (th->has_esni)
		return "esni";
	if (!th->has_sni)
		return "no_sni";
	if (th->sni_is_ip)
		return "sni_ip";
	nfq_dst_addr(f->family, f->dst, &dst);
	why = q->h.judge(q->h.arg, th->sni, &dst, f->dport);
	if (why != NULL || q->h.held == NULL ||
	    !q->h.held(q->h.arg, th->sni, f->dport))
		return why;
	/* the proxy must see it: this flow cannot, the next one will */
	if (q->h.hold != NULL)
		q->h.hold(q->h.arg, &dst);
	return "held";
}

/* A payload segment of a held flow. */
static void
nfq_flow_segment(
    struct nfq *q, struct nfq_flow *f, uint32_t id, const struct ip_tcp *t)
{
	struct tls_hello th;
	struct err e = {""};
	const char *why;

	if (f->nheld == NFQ_HOLD_MAX) {
		nfq_verdict(q, id, NF_REPEAT, EGRESSD_QMARK_REFUSED);
		nfq_flow_decide(q, f, NFQ_FLOW_REFUSED, "hold_full", NULL);
		return;
	}
	f->held[f->nheld++] = id;
	switch (tls_flow_add(&f->tf, t->seq, t->data, t->len, &th, &e)) {
	case TLS_FLOW_MORE:
		return;
	case TLS_FLOW_OK:
		why = nfq_flow_judge(q, f, &th);
		nfq_flow_decide(q, f,
		    why == NULL ? NFQ_FLOW_OK : NFQ_FLOW_REFUSED, why,
		    th.has_sni ? th.sni : NULL);
		return;
	case TLS_FLOW_NOT_TLS:
		nfq_flow_decide(q, f, NFQ_FLOW_REFUSED, "not_tls", NULL);
		return;
	case TLS_FLOW_BAD:
		break;
	}
	nfq_flow_decide(q, f, NFQ_FLOW_REFUSED, "bad_hello", NULL);
}

/* Forgets f (a judged flow whose tuple a new connection reuses). */
static void
nfq_flow_forget(struct nfq *q, struct nfq_flow *f)
{
	struct nfq_flow **pp = &q->buckets[nfq_flow_bucket_of(f)];

	while (*pp != NULL && *pp != f)
		pp = &(*pp)->next;
	if (*pp == NULL)
		return;
	*pp = f->next;
	free(f->buf);
	free(f);
	q->st.flows--;
}

/*
 * A packet on the tuple of a flow judged already. It may be one of that
 * flow's, queued before the verdict changed its ct mark, or the first
 * payload of a new connection from the same port (the old entry
 * reopened, PENDING again): only the kernel knows which. So the first
 * time it gets no verdict mark but RECHECK (NF_REPEAT): the ruleset
 * passes or resets it by its flow's ct mark, and a PENDING one queues
 * it again, now carrying RECHECK. Such a packet is a new connection's:
 * the old flow is forgotten and the packet judged afresh. Giving it the
 * old verdict would let a new connection's hello (any SNI) through
 * unjudged on a tuple judged OK a moment before (e2e
 * proxy_inflight_reuse). 0 when handled.
 */
static int
nfq_flow_stale(struct nfq *q, struct nfq_flow *f, uint32_t id, uint32_t mark)
{
	if (mark != EGRESSD_QMARK_RECHECK) {
		nfq_verdict(q, id, NF_REPEAT, EGRESSD_QMARK_RECHECK);
		return 0;
	}
	nfq_flow_forget(q, f);
	return -1;
}

void
nfq_flow_packet(
    struct nfq *q, uint32_t id, uint32_t mark, const uint8_t *pkt, size_t len)
{
	struct nfq_flow *f;
	struct ip_tcp t;
	struct err e = {""};

	if (ip_tcp_parse(pkt, len, &t, &e) < 0) {
		/* a packet of a pending flow that cannot be read: its
		 * payload cannot be judged (fail closed) */
		q->st.errors++;
		nfq_verdict(q, id, NF_REPEAT, EGRESSD_QMARK_REFUSED);
		return;
	}
	f = nfq_flow_find(q, &t);
	if (f != NULL && f->state != NFQ_FLOW_HOLD) {
		if (nfq_flow_stale(q, f, id, mark) == 0)
			return;
		f = NULL;
	}
	if (t.len == 0) {
		/* an ACK, FIN or RST carries nothing to judge; the flow
		 * stays pending */
		nfq_verdict(q, id, NF_ACCEPT, 0);
		return;
	}
	if (f == NULL && (f = nfq_flow_new(q, &t)) == NULL) {
		struct nfq_flow tmp;

		q->st.errors++;
		q->st.refused++;
		nfq_verdict(q, id, NF_REPEAT, EGRESSD_QMARK_REFUSED);
		/* said, like every refusal: a silent one looked, from the
		 * client, like a reset no log explained */
		memset(&tmp, 0, sizeof(tmp));
		tmp.family = t.family;
		memcpy(tmp.dst, t.dst, 16);
		tmp.dport = t.dport;
		nfq_flow_log(q, &tmp, "table_full", NULL);
		return;
	}
	nfq_flow_segment(q, f, id, &t);
}

void
nfq_flow_sweep(struct nfq *q)
{
	uint64_t now = nfq_now(q);
	struct nfq_flow **pp, *f;
	size_t b;

	for (b = 0; b < NFQ_BUCKETS; b++) {
		pp = &q->buckets[b];
		while ((f = *pp) != NULL) {
			if (f->deadline_ms > now) {
				pp = &f->next;
				continue;
			}
			if (f->state == NFQ_FLOW_HOLD) {
				q->st.timeouts++;
				nfq_flow_decide(q, f, NFQ_FLOW_REFUSED,
				    "hello_timeout", NULL);
				pp = &f->next;
				continue;
			}
			*pp = f->next;
			free(f->buf);
			free(f);
			q->st.flows--;
		}
	}
}

void
nfq_flow_free_all(struct nfq *q)
{
	struct nfq_flow *f, *n;
	size_t b;

	for (b = 0; b < NFQ_BUCKETS; b++) {
		for (f = q->buckets[b]; f != NULL; f = n) {
			n = f->next;
			free(f->buf);
			free(f);
		}
		q->buckets[b] = NULL;
	}
	q->st.flows = 0;
}
