#include "egressd/proto/nft_err.h"

#include <errno.h>
#include <string.h>
#include <linux/netlink.h>
#include <stdio.h>

static bool
label_is(const char *label, const char *kind)
{
	size_t n = strlen(kind);

	return label != NULL && strncmp(label, kind, n) == 0 &&
	    (label[n] == ' ' || label[n] == '\0');
}

/*
 * The sentences name the kernel modules and versions because that is what
 * an operator facing a node or runtime can check; each says that nothing is
 * enforced, so nobody reads a refusal as a warning.
 */
const char *
nft_err_hint(enum nft_err_where where, const char *label, int err)
{
	if (err == EPERM || err == EACCES) {
		if (where == NFT_ERR_SOCKET)
			return "the netlink socket was refused: a seccomp "
			       "profile or LSM forbids it; egressd needs "
			       "NETLINK_NETFILTER and CAP_NET_ADMIN in the "
			       "pod's network namespace";
		return "not permitted: egressd lacks CAP_NET_ADMIN over "
		       "this network namespace (add the NET_ADMIN "
		       "capability to egressd's container only)";
	}
	if (where == NFT_ERR_SOCKET) {
		if (err == EPROTONOSUPPORT || err == EAFNOSUPPORT ||
		    err == EINVAL || err == ENOENT)
			return "this kernel or runtime has no netfilter "
			       "netlink (gVisor implements none; a kernel "
			       "without CONFIG_NETFILTER_NETLINK): nothing can "
			       "be enforced here, run under runc or Kata";
		return "";
	}
	if (err == ENOMEM || err == ENOBUFS)
		return "the kernel is out of memory for the ruleset (or the "
		       "netlink buffers are too small): nothing was changed";
	if (where == NFT_ERR_GET) {
		if (err == EOPNOTSUPP || err == EPROTONOSUPPORT)
			return "this kernel has no nf_tables (module nf_tables "
			       "not loaded or not built): nothing can be "
			       "enforced here";
		return "";
	}
	if (where == NFT_ERR_BATCH) {
		if (err == EOPNOTSUPP || err == ENOENT || err == EINVAL ||
		    err == EPROTONOSUPPORT)
			return "this kernel has no nf_tables (module nf_tables "
			       "not loaded or not built): nothing can be "
			       "enforced here";
		return "";
	}
	if (err != EOPNOTSUPP && err != ENOENT && err != EAFNOSUPPORT &&
	    err != EINVAL && err != E2BIG && err != ENOSPC)
		return "";
	if (err == E2BIG || err == ENOSPC)
		return "a set or the ruleset reached a kernel limit";
	if (label_is(label, "NEWTABLE"))
		return "this kernel has nf_tables without the inet family "
		       "(Linux 3.14 or newer with nf_tables_inet)";
	if (label_is(label, "NEWCHAIN"))
		return "a chain type or hook this kernel lacks: the nat "
		       "chains need nft_chain_nat and Linux 5.2 or newer for "
		       "the inet family";
	if (label_is(label, "NEWSET"))
		return "a set type this kernel lacks: egressd's sets use "
		       "timeouts, intervals and concatenated keys (Linux "
		       "5.6 or newer)";
	if (label_is(label, "NEWOBJ"))
		return "this kernel lacks named counters (nft_counter "
		       "objects)";
	if (label_is(label, "NEWRULE") && err != EINVAL)
		return "an expression of this rule is missing from the kernel "
		       "(nft_ct, nft_nat/nft_redir, nft_fib_inet, nft_limit, "
		       "nft_log, nft_reject_inet: see docs/nft.md)";
	return "";
}

/*
 * One extended-ack attribute of a kernel error: a NUL-terminated message,
 * or the offset of the attribute the kernel refused. The walk is by hand,
 * not libmnl's, so proto/ stays a pure codec on plain bytes.
 */
static void
ext_ack_attr(const uint8_t *a, size_t alen, char *msg, size_t msglen, int *offs)
{
	uint16_t type;
	const uint8_t *v = a + NLA_HDRLEN;
	size_t vlen = alen - NLA_HDRLEN;
	uint32_t u;

	memcpy(&type, a + offsetof(struct nlattr, nla_type), sizeof(type));
	type &= NLA_TYPE_MASK;
	if (type == NLMSGERR_ATTR_MSG && vlen > 0 && v[vlen - 1] == '\0')
		(void)snprintf(msg, msglen, "%s", (const char *)v);
	else if (type == NLMSGERR_ATTR_OFFS && vlen == sizeof(u)) {
		memcpy(&u, v, sizeof(u));
		*offs = (int)u;
	}
}

void
nft_err_ext_ack(const struct nlmsghdr *nlh, char *msg, size_t msglen, int *offs)
{
	const struct nlmsgerr *me =
	    (const void *)((const uint8_t *)nlh + NLMSG_HDRLEN);
	const uint8_t *p = (const uint8_t *)nlh;
	size_t off, end = nlh->nlmsg_len;
	uint16_t alen;

	msg[0] = '\0';
	*offs = -1;
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*me))
		return;
	off = NLMSG_HDRLEN + sizeof(*me);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) {
		if (me->msg.nlmsg_len < sizeof(me->msg))
			return;
		off += me->msg.nlmsg_len - sizeof(me->msg);
	}
	for (off = NLMSG_ALIGN(off); off < end && end - off >= NLA_HDRLEN;
	     off += NLA_ALIGN(alen)) {
		memcpy(&alen, p + off + offsetof(struct nlattr, nla_len),
		    sizeof(alen));
		if (alen < NLA_HDRLEN || alen > end - off)
			return;
		ext_ack_attr(p + off, alen, msg, msglen, offs);
	}
}

void
nft_acks_init(struct nft_acks *a, uint32_t base, size_t nmsgs)
{
	memset(a, 0, sizeof(*a));
	a->base = base;
	a->nmsgs = nmsgs;
	a->bad = (size_t)-1;
	a->bad_offs = -1;
}

/* The kernel sends -errno; anything else is not an errno we can name. */
static int
nlerr(int error)
{
	return error < 0 && error > -4096 ? -error : EIO;
}

static bool
acks_done(const struct nft_acks *a)
{
	return a->batch_errno != 0 || a->acked >= a->nmsgs;
}

/*
 * Walks the read by hand rather than with mnl_nlmsg_ok(): that one casts
 * nlmsg_len to int, so a length above 2 GiB passes its bound and the next
 * header lies outside the buffer.
 */
bool
nft_acks_feed(struct nft_acks *a, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t left = len;

	while (!acks_done(a) && left >= NLMSG_HDRLEN) {
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)p;
		const struct nlmsgerr *me;
		size_t ml = nlh->nlmsg_len, i;
		uint32_t s = nlh->nlmsg_seq;

		if (ml < NLMSG_HDRLEN || ml > left)
			break;
		ml = NLMSG_ALIGN(ml);
		p += ml < left ? ml : left;
		left -= ml < left ? ml : left;
		if (nlh->nlmsg_type != NLMSG_ERROR ||
		    nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*me))
			continue;
		me = (const void *)((const uint8_t *)nlh + NLMSG_HDRLEN);
		if (s == a->base) {
			/* the batch as a whole (no CAP_NET_ADMIN, no
			 * nf_tables, ENOMEM); 0 here is no answer at all */
			if (me->error == 0)
				continue;
			a->batch_errno = nlerr(me->error);
			nft_err_ext_ack(
			    nlh, a->kmsg, sizeof(a->kmsg), &a->bad_offs);
			break;
		}
		if (s - a->base > a->nmsgs)
			continue; /* not ours (stale; wraps safely) */
		i = (size_t)(s - a->base) - 1;
		a->acked++;
		if (me->error != 0 && i < a->bad) {
			a->bad = i;
			a->bad_errno = nlerr(me->error);
			nft_err_ext_ack(
			    nlh, a->kmsg, sizeof(a->kmsg), &a->bad_offs);
		}
	}
	return acks_done(a);
}

int
nft_acks_result(const struct nft_acks *a, const char *bad_label, struct err *e)
{
	char offs[64] = "";
	const char *label, *hint;

	if (a->batch_errno != 0) {
		hint = nft_err_hint(NFT_ERR_BATCH, NULL, a->batch_errno);
		err_set(e,
		    "nft: kernel refused the batch (%zu messages): %s%s%s%s%s",
		    a->nmsgs, strerror(a->batch_errno), a->kmsg[0] ? ": " : "",
		    a->kmsg, hint[0] ? "; " : "", hint);
		return -1;
	}
	if (a->bad == (size_t)-1)
		return 0;
	label = bad_label != NULL ? bad_label : "?";
	hint = nft_err_hint(NFT_ERR_MSG, label, a->bad_errno);
	if (a->bad_offs >= 0)
		(void)snprintf(offs, sizeof(offs),
		    " (bad attribute at byte %d)", a->bad_offs);
	err_set(e, "nft: kernel refused message %zu of %zu (%s): %s%s%s%s%s%s",
	    a->bad + 1, a->nmsgs, label, strerror(a->bad_errno),
	    a->kmsg[0] ? ": " : "", a->kmsg, offs, hint[0] ? "; " : "", hint);
	return -1;
}
