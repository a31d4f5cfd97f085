/*
 * nfq_msg: nfnetlink_queue messages over libmnl (nfq_msg.h).
 */

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>

#include "egressd/nfq/nfq_msg.h"

/* The header every queue message starts with. */
static struct nlmsghdr *
nfq_msg_hdr(void *buf, size_t cap, uint16_t type, uint16_t queue, uint32_t seq,
    uint16_t flags)
{
	struct nlmsghdr *nlh;
	struct nfgenmsg *g;

	if (cap < NFQ_MSG_SMALL)
		return NULL;
	memset(buf, 0, NFQ_MSG_SMALL);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (uint16_t)(NFNL_SUBSYS_QUEUE << 8 | type);
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_UNSPEC;
	g->version = NFNETLINK_V0;
	g->res_id = htons(queue);
	return nlh;
}

size_t
nfq_msg_bind(void *buf, size_t cap, uint16_t queue, uint32_t seq,
    uint32_t copy_range, uint32_t maxlen, uint32_t flags)
{
	struct nlmsghdr *nlh =
	    nfq_msg_hdr(buf, cap, NFQNL_MSG_CONFIG, queue, seq, NLM_F_ACK);
	struct nfqnl_msg_config_cmd cmd;
	struct nfqnl_msg_config_params par;

	if (nlh == NULL)
		return 0;
	memset(&cmd, 0, sizeof(cmd));
	cmd.command = NFQNL_CFG_CMD_BIND;
	mnl_attr_put(nlh, NFQA_CFG_CMD, sizeof(cmd), &cmd);
	memset(&par, 0, sizeof(par));
	par.copy_range = htonl(copy_range);
	par.copy_mode = NFQNL_COPY_PACKET;
	mnl_attr_put(nlh, NFQA_CFG_PARAMS, sizeof(par), &par);
	mnl_attr_put_u32(nlh, NFQA_CFG_QUEUE_MAXLEN, htonl(maxlen));
	/* the mask names the bits this message sets or clears: FAIL_OPEN
	 * is always in it and never set */
	mnl_attr_put_u32(
	    nlh, NFQA_CFG_MASK, htonl(flags | NFQA_CFG_F_FAIL_OPEN));
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS,
	    htonl(flags & ~(uint32_t)NFQA_CFG_F_FAIL_OPEN));
	return nlh->nlmsg_len;
}

size_t
nfq_msg_flags(void *buf, size_t cap, uint16_t queue, uint32_t seq,
    uint32_t flags, uint32_t mask)
{
	struct nlmsghdr *nlh =
	    nfq_msg_hdr(buf, cap, NFQNL_MSG_CONFIG, queue, seq, NLM_F_ACK);

	if (nlh == NULL)
		return 0;
	mnl_attr_put_u32(
	    nlh, NFQA_CFG_MASK, htonl(mask | NFQA_CFG_F_FAIL_OPEN));
	mnl_attr_put_u32(nlh, NFQA_CFG_FLAGS,
	    htonl(flags & ~(uint32_t)NFQA_CFG_F_FAIL_OPEN));
	return nlh->nlmsg_len;
}

size_t
nfq_msg_unbind(void *buf, size_t cap, uint16_t queue, uint32_t seq)
{
	struct nlmsghdr *nlh =
	    nfq_msg_hdr(buf, cap, NFQNL_MSG_CONFIG, queue, seq, NLM_F_ACK);
	struct nfqnl_msg_config_cmd cmd;

	if (nlh == NULL)
		return 0;
	memset(&cmd, 0, sizeof(cmd));
	cmd.command = NFQNL_CFG_CMD_UNBIND;
	mnl_attr_put(nlh, NFQA_CFG_CMD, sizeof(cmd), &cmd);
	return nlh->nlmsg_len;
}

size_t
nfq_msg_verdict(void *buf, size_t cap, uint16_t queue, uint32_t id,
    uint32_t verdict, uint32_t mark)
{
	/* no ack: a verdict the kernel refuses comes back as an error
	 * message anyway, and one ack per packet would double the reads */
	struct nlmsghdr *nlh =
	    nfq_msg_hdr(buf, cap, NFQNL_MSG_VERDICT, queue, 0, 0);
	struct nfqnl_msg_verdict_hdr vh;

	if (nlh == NULL)
		return 0;
	vh.verdict = htonl(verdict);
	vh.id = htonl(id);
	mnl_attr_put(nlh, NFQA_VERDICT_HDR, sizeof(vh), &vh);
	if (mark != 0)
		mnl_attr_put_u32(nlh, NFQA_MARK, htonl(mark));
	return nlh->nlmsg_len;
}

/* Keeps the attributes parse reads, by type; each of its expected
 * length or longer, others skipped. */
static int
nfq_msg_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	uint16_t t = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, NFQA_MAX) <= 0)
		return MNL_CB_OK;
	tb[t] = a;
	return MNL_CB_OK;
}

int
nfq_msg_parse(const struct nlmsghdr *nlh, struct nfq_pkt *out, struct err *e)
{
	const struct nlattr *tb[NFQA_MAX + 1];
	const struct nfqnl_msg_packet_hdr *ph;
	const struct nfgenmsg *g;

	memset(out, 0, sizeof(*out));
	memset(tb, 0, sizeof(tb));
	if (nlh->nlmsg_type != (NFNL_SUBSYS_QUEUE << 8 | NFQNL_MSG_PACKET) ||
	    nlh->nlmsg_len < NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(*g))) {
		err_set(e, "not a queued packet (type 0x%x)", nlh->nlmsg_type);
		return -1;
	}
	g = mnl_nlmsg_get_payload(nlh);
	if (mnl_attr_parse(nlh, sizeof(*g), nfq_msg_attr_cb, tb) < 0) {
		err_set(e, "malformed attributes");
		return -1;
	}
	if (tb[NFQA_PACKET_HDR] == NULL ||
	    mnl_attr_get_payload_len(tb[NFQA_PACKET_HDR]) < sizeof(*ph) ||
	    tb[NFQA_PAYLOAD] == NULL) {
		err_set(e, "queued packet without header or payload");
		return -1;
	}
	ph = mnl_attr_get_payload(tb[NFQA_PACKET_HDR]);
	out->queue = ntohs(g->res_id);
	out->id = ntohl(ph->packet_id);
	out->hw_proto = ntohs(ph->hw_protocol);
	out->hook = ph->hook;
	if (tb[NFQA_MARK] != NULL &&
	    mnl_attr_get_payload_len(tb[NFQA_MARK]) >= 4) {
		out->has_mark = true;
		out->mark = ntohl(mnl_attr_get_u32(tb[NFQA_MARK]));
	}
	out->payload = mnl_attr_get_payload(tb[NFQA_PAYLOAD]);
	out->len = mnl_attr_get_payload_len(tb[NFQA_PAYLOAD]);
	out->truncated = tb[NFQA_CAP_LEN] != NULL;
	return 0;
}
