/*
 * nfq_verdict: the verdict on one queued packet, and the queue's clock.
 */

#include <linux/netfilter.h>

#include <libmnl/libmnl.h>

#include "egressd/nfq/nfq_int.h"
#include "egressd/nfq/nfq_msg.h"
#include "util/now.h"

uint64_t
nfq_now(const struct nfq *q)
{
	return q->o.clock != NULL ? q->o.clock(q->o.clock_arg) : now_mono_ms();
}

void
nfq_verdict(struct nfq *q, uint32_t id, uint32_t verdict, uint32_t mark)
{
	uint8_t buf[NFQ_MSG_SMALL];
	size_t n = nfq_msg_verdict(
	    buf, sizeof(buf), q->o.queue_num, id, verdict, mark);

	/* a verdict that cannot be sent leaves the packet queued: it is
	 * dropped when the queue goes (fail closed) */
	if (n == 0 || mnl_socket_sendto(q->nl, buf, n) < 0)
		q->st.errors++;
}
