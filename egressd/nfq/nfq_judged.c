/*
 * nfq_judged: the flows passed in flight, remembered with their SNI so
 * that a policy change judges them again by name, as the proxy judges
 * its open connections (nfq.h, nfq_rejudge).
 *
 * A ring of the last NFQ_JUDGED_MAX: no lookup is ever needed (only the
 * walk at a policy change), and a flow that ended stays until it is
 * overwritten (cutting it then finds nothing: no harm). A flow older
 * than the last NFQ_JUDGED_MAX judged is judged again by address only
 * (the conntrack cut): the bound is said in docs/proxy.md.
 */

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

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

size_t
nfq_rejudge(struct nfq *q, void (*cut)(void *arg, const struct nfq_flow_id *f),
    void *arg)
{
	struct nfq_judged *j;
	struct addr dst;
	size_t i, n = 0;

	for (i = 0; q->judged != NULL && i < NFQ_JUDGED_MAX; i++) {
		j = &q->judged[i];
		if (j->sni[0] == '\0')
			continue;
		memset(&dst, 0, sizeof(dst));
		dst.family = j->id.family == 4 ? AF_INET : AF_INET6;
		memcpy(dst.a, j->id.dst, 16);
		if (q->h.judge(q->h.arg, j->sni, &dst, j->id.dport) == NULL &&
		    (q->h.held == NULL ||
		        !q->h.held(q->h.arg, j->sni, j->id.dport)))
			continue;
		cut(arg, &j->id);
		j->sni[0] = '\0';
		n++;
	}
	return n;
}
