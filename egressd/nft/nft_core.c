
/*
 * nft: the runtime side. One netlink socket; batches sent whole and every
 * ack collected (matched by sequence number to the message it answers);
 * kernel state read back with dumps; the learned-element mirror.
 */
#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "egressd/proto/nft_err.h"
#include "egressd/base/sock.h"
#include "egressd/base/stats.h"
#include "util/coalesce.h"
#include "util/hash.h"
#include "util/now.h"
#include "egressd/nft/nft_core.h"
#include "egressd/nft/nft_state.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_sock.h"
#include "egressd/nft/nft_learnq.h"
#include "egressd/nft/nft_bounds.h"

/* ---- socket, send, acks ---- */

struct nft *
nft_new(const struct nft_opts *o, struct stats *st, struct err *e)
{
	struct nft *n;

	n = calloc(1, sizeof(*n));
	if (n == NULL) {
		err_set(e, "nft: out of memory");
		return NULL;
	}
	n->magic = NFT_MAGIC;
	TAILQ_INIT(&n->lru[0].q);
	TAILQ_INIT(&n->lru[1].q);
	n->o = *o;
	if (n->o.clock == NULL)
		n->o.clock = now_mono_ms_clock;
	n->st = st;
	n->ttl_min = o->ttl_min;
	n->ttl_max = o->ttl_max;
	n->cap = o->learned_max;
	if (n->cap < NFT_LEARNED_MAX_MIN)
		n->cap = o->learned_max == 0 ? EGRESSD_DEFAULT_LEARNED_MAX
		                             : NFT_LEARNED_MAX_MIN;
	if (n->cap > NFT_LEARNED_MAX_LIMIT)
		n->cap = NFT_LEARNED_MAX_LIMIT;
	n->o.learned_max = (uint32_t)n->cap;
	n->nbuckets = NFT_MIRROR_BUCKETS;
	n->buckets = calloc(n->nbuckets, sizeof(*n->buckets));
	n->senttail = &n->sent;
	n->donetail = &n->done;
	if (n->buckets == NULL) {
		err_set(e, "nft: out of memory");
		free(n);
		return NULL;
	}
	if ((n->nl = nft_sock_open_(e)) == NULL)
		goto out_free;
	n->portid = mnl_socket_get_portid(n->nl);
	n->seq = (uint32_t)time(NULL);
	n->rbuf = malloc(NFT_RECV_BUF);
	if (n->rbuf == NULL) {
		err_set(e, "nft: out of memory");
		goto out_close;
	}
	return n;
out_close:
	mnl_socket_close(n->nl);
out_free:
	free(n->buckets);
	free(n);
	return NULL;
}

void
nft_free(struct nft *n)
{
	if (n == NULL)
		return;
	nft_learnq_detach(n);
	n->gen_moved = NULL; /* whoever asked may be gone already */
	n->learned_fn = NULL;
	nft_mirror_clear(n);
	policy_unref(n->pol);
	free(n->buckets);
	free(n->rbuf);
	if (n->nl != NULL)
		mnl_socket_close(n->nl);
	if (n->knl != NULL)
		mnl_socket_close(n->knl); /* the judge's table goes with it */
	n->magic = 0;
	free(n);
}

uint32_t
nft_mark_(const struct nft *n)
{
	return n->o.mark;
}

const struct nft_opts *
nft_opts_(const struct nft *n)
{
	return &n->o;
}

uint16_t
nft_dns_port_(const struct nft *n)
{
	return n->o.dns_port;
}

int
nft_teardown(struct nft *n, struct err *e)
{
	struct nft_batch *b;
	int ex, rc;

	ex = nft_sock_table_exists(n, e);
	if (ex <= 0)
		return ex;
	if (nft_build_teardown(&b, e) < 0)
		return -1;
	rc = nft_sock_send(n, b, STATS_NFT_OP_REMOVE, e);
	nft_batch_free(b);
	if (rc == 0) {
		nft_mirror_clear(n);
		n->applied = false;
		nft_mirror_gauge(n);
	}
	return rc;
}
