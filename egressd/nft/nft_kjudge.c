/*
 * nft_kjudge: the table that runs the in-kernel judge (nft.h,
 * nft_kjudge_install; the program is egressd/nfq's, nfq_bpf.h).
 *
 * A table of its own, not rows of egressd's: ownership is a table's
 * flag, and this one must not outlive the process whose verdicts it
 * applies (egressd's own table must, to stay closed). The kernel runs
 * every base chain of a hook, so this chain only marks; what passes is
 * decided in filter_out, by the mark, as for the queue's verdicts.
 */

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_conntrack_tuple_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/table.h>

#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_rule.h"
#include "egressd/nft/nft_sock.h"
#include "egressd/nft/nft_state.h"

/* The table, owned by the socket that sends it, and its chains. */
static int
kjudge_table(struct bctx *c)
{
	struct nftnl_table *t =
	    nft_msg_obj_new(c, NFT_MSG_NEWTABLE, NFT_KTABLE);

	if (t == NULL)
		return -1;
	nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, NFT_TABLE_F_OWNER);
	if (nft_msg_obj(c, NFT_MSG_NEWTABLE, t, NFT_KTABLE) < 0)
		return -1;
	return nft_msg_chain(c, NFT_KCHAIN, NF_INET_LOCAL_OUT, "filter",
	           NFT_KPRIO, NF_ACCEPT) < 0 ||
	        nft_msg_chain(c, NFT_KCHAIN_IN, NF_INET_LOCAL_IN, "filter",
	            NFT_KPRIO, NF_ACCEPT) < 0
	    ? -1
	    : 0;
}

/* Per queued port: on input the origin's SYN-ACK of a PENDING flow (the
 * program answers no, having noted where the client's stream starts;
 * no other flow's start is worth a run or a slot of its LRU map: not
 * egressd's own upstream connections, not a flow an IP rule passes), on
 * output a PENDING flow's packets (yes: the mark OK). */
static int
kjudge_rows(struct bctx *c, int prog_fd)
{
	size_t i;

	for (i = 0; i < c->o->nqueue_ports; i++) {
		uint16_t port = c->o->queue_ports[i];
		const struct rspec in = {.chain = NFT_KCHAIN_IN,
		    .ct_mark_eq = NFT_QMARK_PENDING,
		    .l4proto = IPPROTO_TCP,
		    .synack = true,
		    .sport_lo = port,
		    .sport_hi = port,
		    .bpf = true,
		    .bpf_fd = prog_fd};
		const struct rspec out = {.chain = NFT_KCHAIN,
		    .ct_mark_eq = NFT_QMARK_PENDING,
		    .ct_state = NF_CT_STATE_BIT(IP_CT_ESTABLISHED),
		    .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
		    .l4proto = IPPROTO_TCP,
		    .dport = port,
		    .bpf = true,
		    .bpf_fd = prog_fd,
		    .meta_mark_imm = NFT_QMARK_OK};

		if (nft_rule_msg(c, &in) < 0 || nft_rule_msg(c, &out) < 0)
			return -1;
	}
	return 0;
}

int
nft_kjudge_install(struct nft *n, int prog_fd, struct err *e)
{
	struct bctx c = {.o = &n->o, .e = e, .table = NFT_KTABLE};
	struct mnl_socket *nl;
	int rc = -1;

	if (n->o.queue_kind == NFT_QUEUE_NONE || n->o.nqueue_ports == 0) {
		err_set(e, "nft: the judge needs the queue");
		return -1;
	}
	if (n->knl != NULL) {
		err_set(e, "nft: the judge's table is in force already");
		return -1;
	}
	/* a socket of its own: the one that will own the table */
	if ((nl = nft_sock_open_(e)) == NULL)
		return -1;
	if ((c.b = nft_batch_new_()) == NULL) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	if (nft_batch_begin_(c.b, e) < 0 || kjudge_table(&c) < 0 ||
	    kjudge_rows(&c, prog_fd) < 0 || nft_batch_finish_(c.b, e) < 0 ||
	    nft_sock_send_on(n, nl, c.b, STATS_NFT_OP_STATIC_APPLY, e) < 0)
		goto out;
	n->knl = nl;
	nl = NULL;
	rc = 0;
out:
	nft_batch_free(c.b);
	if (nl != NULL)
		mnl_socket_close(nl);
	return rc;
}
