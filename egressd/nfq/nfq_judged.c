/*
 * nfq_judged: the flows passed in flight, remembered with their SNI so
 * that a policy change judges them again by name, as the proxy judges
 * its open connections (nfq.h, nfq_rejudge).
 *
 * A ring of the last NFQ_JUDGED_MAX: no lookup is ever needed (only the
 * walk at a policy change), and a flow that ended stays until it is
 * overwritten (cutting it then finds nothing: no harm). A flow older
 * than the last NFQ_JUDGED_MAX judged is judged again by address only
 * (the conntrack cut): the bound is said in docs/proxy.md. The flows
 * the kernel passed are in its own map (nfq_bpf.h), the last
 * NFQ_BPF_PASSED_MAX, and judged again the same way; a flow passed here
 * teaches the kernel its verdict (nfq_judged_teach).
 */

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "egressd/nfq/nfq_bpf.h"
#include "egressd/nfq/nfq_int.h"

void
nfq_judged_add(struct nfq *q, const struct nfq_flow *f, const char *sni)
{
	struct nfq_judged *j;

	if (q->judged == NULL || sni == NULL || sni[0] == '\0')
		return;
	j = &q->judged[q->judged_next];
	q->judged_next = (q->judged_next + 1) % NFQ_JUDGED_MAX;
	j->id.family = f->family;
	memcpy(j->id.src, f->src, sizeof(j->id.src));
	memcpy(j->id.dst, f->dst, sizeof(j->id.dst));
	j->id.sport = f->sport;
	j->id.dport = f->dport;
	(void)snprintf(j->sni, sizeof(j->sni), "%s", sni);
}

/* Would the hooks now refuse, or hold, sni at dst:port? */
static bool
nfq_judged_stale(
    struct nfq *q, const char *sni, const struct addr *dst, uint16_t port)
{
	return q->h.judge(q->h.arg, sni, dst, port) != NULL ||
	    (q->h.held != NULL && q->h.held(q->h.arg, sni, port));
}

/* The kernel may pass sni to dst:port until the hooks' until (a full
 * map: this name keeps the queue, no harm else). */
static void
nfq_judged_remember(
    struct nfq *q, const char *sni, const struct addr *dst, uint16_t port)
{
	struct err e = {""};
	uint64_t until = q->h.until(q->h.arg, sni, dst, port);

	if (until != 0)
		(void)nfq_bpf_remember(q->kb, sni,
		    dst->family == AF_INET ? 4 : 6, dst->a, port,
		    q->h.gen(q->h.arg), until, &e);
}

void
nfq_teach(
    struct nfq *q, const char *name, const struct addr *dst, uint16_t port)
{
	if (q->kb != NULL && name != NULL && name[0] != '\0' &&
	    !nfq_judged_stale(q, name, dst, port))
		nfq_judged_remember(q, name, dst, port);
}

void
nfq_forget(
    struct nfq *q, const char *name, const struct addr *dst, uint16_t port)
{
	if (q->kb != NULL && name != NULL)
		nfq_bpf_forget(
		    q->kb, name, dst->family == AF_INET ? 4 : 6, dst->a, port);
}

void
nfq_judged_teach(struct nfq *q, const struct nfq_flow *f, const char *sni)
{
	struct addr dst;

	if (q->kb == NULL || sni == NULL || sni[0] == '\0')
		return;
	nfq_dst_addr(f->family, f->dst, &dst);
	nfq_judged_remember(q, sni, &dst, f->dport);
}

/* A flow judged in flight: would the hooks now refuse or hold it? */
static bool
nfq_judged_flow_stale(
    struct nfq *q, const struct nfq_flow_id *id, const char *sni)
{
	struct addr dst;

	nfq_dst_addr(id->family, id->dst, &dst);
	return nfq_judged_stale(q, sni, &dst, id->dport);
}

/* The kernel's passed flows, through the same judge. */
struct nfq_kcut {
	struct nfq *q;
	void (*cut)(void *arg, const struct nfq_flow_id *f);
	void *arg;
};

static bool
nfq_judged_kernel_cb(void *arg, const struct nfq_bpf_tuple *t, const char *sni)
{
	struct nfq_kcut *k = arg;
	struct nfq_flow_id f;

	memset(&f, 0, sizeof(f));
	f.family = t->family;
	memcpy(f.src, t->src, 16);
	memcpy(f.dst, t->dst, 16);
	f.sport = t->sport;
	f.dport = t->dport;
	if (!nfq_judged_flow_stale(k->q, &f, sni))
		return false;
	k->cut(k->arg, &f);
	return true;
}

size_t
nfq_rejudge(struct nfq *q, void (*cut)(void *arg, const struct nfq_flow_id *f),
    void *arg)
{
	struct nfq_judged *j;
	size_t i, n = 0;

	for (i = 0; q->judged != NULL && i < NFQ_JUDGED_MAX; i++) {
		j = &q->judged[i];
		if (j->sni[0] == '\0' ||
		    !nfq_judged_flow_stale(q, &j->id, j->sni))
			continue;
		cut(arg, &j->id);
		j->sni[0] = '\0';
		n++;
	}
	if (q->kb != NULL) {
		struct nfq_kcut k = {q, cut, arg};

		n += nfq_bpf_passed_each(q->kb, nfq_judged_kernel_cb, &k);
	}
	return n;
}
