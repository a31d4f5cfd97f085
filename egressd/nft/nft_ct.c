/*
 * nft_ct: cutting established flows that a policy update now denies.
 * Conntrack is read and edited over ctnetlink with libmnl (no
 * libnetfilter_conntrack): one dump, then IPCTNL_MSG_CT_DELETE for each
 * entry to cut, every ack checked; both on the event loop in slices
 * (nft_ctdump.c), never waited for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include "egressd/nft/nft_ct.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_sock.h"
#include "egressd/nft/nft_bounds.h"
#include "egressd/nft/nft_elems.h"
#include "egressd/nft/nft_core.h"
#include "egressd/nft/nft_twins.h"
#include "egressd/nft/nft_ctmsg.h"
#include "egressd/nft/nft_ctdump.h"
#include "egressd/nft/nft_bounds.h"

/* ---- the decision ---- */

/* What the filter chain does with a NEW packet of f (policy part). */
static bool
flow_denied(struct nft *n, const struct policy *p, struct nft_twins *tw,
    const struct nft_ct_flow *f)
{
	const struct nft_opts *o = nft_opts_(n);
	const struct policy_rule *r = NULL;
	enum policy_action act;
	unsigned pbit;
	uint16_t port = 0;
	size_t i;
	bool internal = nft_addr_internal_(f->family, f->dst);

	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP) {
		pbit = f->proto == IPPROTO_TCP ? POLICY_PROTO_TCP
		                               : POLICY_PROTO_UDP;
		port = f->dport;
		/* direct DNS to an exempt nameserver is accepted first */
		for (i = 0; port == 53 && i < o->nns_exempt; i++) {
			const struct policy_prefix *x = &o->ns_exempt[i];
			unsigned b;

			if (x->family != f->family)
				continue;
			for (b = 0; b < x->len; b++)
				if (((x->addr[b / 8] ^ f->dst[b / 8]) &
				        (0x80u >> (b % 8))) != 0)
					break;
			if (b == x->len)
				return false;
		}
	} else
		pbit = POLICY_PROTO_ICMP;
	/* without an index no IP rule can match (learned_denied() agrees);
	 * an IPv6 spelling of a denied IPv4 prefix is denied as in the
	 * chain (nft_twins_match_()) */
	act = p->index != NULL
	    ? nft_twins_match_(tw, p, f->family, f->dst, pbit, port, &r)
	    : p->default_action;
	if (r != NULL) {
		if (act == POLICY_DENY)
			return true;
		/* the internal ranges come after the overlays, before user
		 * rules */
		if (r->origin == POLICY_ORIGIN_ALWAYS_ALLOW ||
		    r->origin == POLICY_ORIGIN_INFRA)
			return false;
		return internal;
	}
	if (internal)
		return true;
	/* the learned rules: plain set, then the limited set, whose
	 * elements name protocol and port (a learned address on a port its
	 * names do not list is not open) */
	switch (nft_learned_verdict_(n, f->family, f->dst, f->proto, port)) {
	case 1:
		return false;
	case -1:
		return true;
	}
	return p->default_action == POLICY_DENY;
}

/* ---- the dump ---- */

struct ct_cut {
	struct nft *n;
	const struct policy *p;
	const struct nft_locals *lc;
	struct nft_twins *tw;
	uint32_t mark;
	struct nft_ct_flow *out;
	size_t nout;
	size_t seen; /* entries read */
	bool more; /* candidates beyond NFT_CT_DELETE_MAX */
};

/*
 * Every entry of the dump is judged: no count stops the reading, so
 * conntrack padded with other flows (loopback, inbound) cannot hide one
 * to cut. Only the candidates kept per pass are bounded.
 */
static int
ct_cut_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct ct_cut *d = arg;
	struct nft_ct_flow f;

	d->seen++;
	if (!nft_ctmsg_outbound(nlh, d->mark, d->lc, false, &f) ||
	    !flow_denied(d->n, d->p, d->tw, &f))
		return MNL_CB_OK;
	if (d->nout == NFT_CT_DELETE_MAX) {
		d->more = true;
		return MNL_CB_OK;
	}
	d->out[d->nout++] = f;
	return MNL_CB_OK;
}

_Static_assert(NFT_CT_DEL_PER_SEND *NFT_CT_DEL_MSG_MAX <= NFT_RECV_BUF,
    "delete messages fit the buffer");

/*
 * Sends the deletes of fl[0..nf) in one write and collects one ack each.
 * *cut counts the entries deleted; ENOENT (ended meanwhile) is no error.
 */
static int
ct_delete(struct nft *n, const struct nft_ct_flow *fl, size_t nf, uint8_t *buf,
    size_t *cut, int *bad_errno)
{
	struct mnl_socket *nl = NULL;
	uint32_t seq0 = 0, seq, portid = 0;
	size_t i, len = 0, k, acked = 0;
	bool got[NFT_CT_DEL_PER_SEND] = {0};
	ssize_t r;

	for (i = 0; i < nf; i++) {
		nl = nft_sock_(n, &seq, &portid);
		if (i == 0)
			seq0 = seq;
		k = nft_build_ct_delete(
		    &fl[i], seq, buf + len, NFT_RECV_BUF - len);
		if (k == 0) {
			*bad_errno = EINVAL;
			return -1;
		}
		len += k;
	}
	if (mnl_socket_sendto(nl, buf, len) < 0) {
		*bad_errno = errno;
		return -1;
	}
	while (acked < nf) {
		const struct nlmsghdr *nlh;
		int left;

		r = mnl_socket_recvfrom(nl, buf, NFT_RECV_BUF);
		if (r < 0) {
			*bad_errno = errno;
			return -1;
		}
		left = (int)r;
		for (nlh = (const struct nlmsghdr *)buf;
		     mnl_nlmsg_ok(nlh, left);
		     nlh = mnl_nlmsg_next(nlh, &left)) {
			const struct nlmsgerr *me;

			if (nlh->nlmsg_type != NLMSG_ERROR ||
			    nlh->nlmsg_seq - seq0 >= nf ||
			    got[nlh->nlmsg_seq - seq0])
				continue; /* not ours (stale) */
			got[nlh->nlmsg_seq - seq0] = true;
			acked++;
			me = mnl_nlmsg_get_payload(nlh);
			if (me->error == 0)
				(*cut)++;
			else if (me->error != -ENOENT && *bad_errno == 0)
				*bad_errno = -me->error;
		}
	}
	return 0;
}

int
nft_ct_forget(struct nft *n, const struct nft_ct_flow *f, struct err *e)
{
	uint8_t *buf = malloc(NFT_RECV_BUF);
	size_t cut = 0;
	int bad = 0, rc;

	if (buf == NULL) {
		err_set(e, "conntrack delete: out of memory");
		return -1;
	}
	rc = ct_delete(n, f, 1, buf, &cut, &bad);
	free(buf);
	if (rc < 0 || bad != 0) {
		err_set(e, "conntrack delete: %s", strerror(bad ? bad : EIO));
		return -1;
	}
	return 0;
}

int
nft_cut_flow(struct nft *n, const struct nft_ct_flow *f, struct err *e)
{
	return nft_ct_forget(n, f, e);
}

/* ---- the cut on the loop ---- */

struct nft_cut {
	struct nft *n;
	struct nft_ctd *ctd;
	struct ct_cut d;
	struct nft_locals *lc;
	struct policy *p; /* referenced while a pass runs */
	size_t cut;
	bool busy;
	nft_cut_done_fn done;
	void *arg;
};

static void
cut_release(struct nft_cut *c)
{
	nft_twins_free_(c->d.tw);
	c->d.tw = NULL;
	nft_ctmsg_locals_free(c->lc);
	c->lc = NULL;
	policy_unref(c->p);
	c->p = NULL;
	c->busy = false;
}

static void
cut_finish(struct nft_cut *c, int rc, const char *why)
{
	bool more = c->d.more;

	cut_release(c);
	if (c->done != NULL)
		c->done(c->arg, rc, c->cut, rc == 0 && more, why);
}

static void
cut_deleted(void *arg, int rc, const char *why)
{
	cut_finish(arg, rc, why);
}

static void
cut_dumped(void *arg, int rc, const char *why)
{
	struct nft_cut *c = arg;
	struct err e = {""};

	if (rc != 0 || c->d.nout == 0) {
		cut_finish(c, rc, why);
		return;
	}
	if (nft_ctdump_delete(
	        c->ctd, c->d.out, c->d.nout, &c->cut, cut_deleted, c, &e) < 0)
		cut_finish(c, -1, e.msg);
}

struct nft_cut *
nft_cut_new(struct nft *n, struct event_base *base, struct err *e)
{
	struct nft_cut *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		err_set(e, "nft: out of memory");
		return NULL;
	}
	c->n = n;
	c->ctd = nft_ctdump_new(base, NFT_CT_DELETE_MAX, sizeof(*c->d.out), e);
	if (c->ctd == NULL) {
		nft_cut_free(c);
		return NULL;
	}
	return c;
}

void
nft_cut_free(struct nft_cut *c)
{
	if (c == NULL)
		return;
	nft_ctdump_free(c->ctd);
	cut_release(c);
	free(c);
}

bool
nft_cut_busy(const struct nft_cut *c)
{
	return c->busy;
}

void
nft_cut_abort(struct nft_cut *c)
{
	if (!c->busy)
		return;
	nft_ctdump_abort(c->ctd);
	cut_release(c);
}

int
nft_cut_start(struct nft_cut *c, struct policy *p, nft_cut_done_fn done,
    void *arg, struct err *e)
{
	if (c->busy) {
		err_set(e, "nft: a cut pass is already under way");
		return -1;
	}
	memset(&c->d, 0, sizeof(c->d));
	c->d.n = c->n;
	c->d.p = p;
	c->d.mark = nft_mark_(c->n);
	c->d.out = nft_ctdump_results(c->ctd);
	c->cut = 0;
	if ((c->d.tw = nft_twins_new_()) == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if ((c->lc = nft_ctmsg_locals_load(e)) == NULL) {
		err_prefix(e, "flows not cut");
		cut_release(c);
		return -1;
	}
	c->d.lc = c->lc;
	c->p = policy_ref(p);
	if (nft_ctdump_dump(c->ctd, ct_cut_cb, &c->d, cut_dumped, c, e) < 0) {
		cut_release(c);
		return -1;
	}
	c->busy = true;
	c->done = done;
	c->arg = arg;
	return 0;
}

/* ---- the same, waited for (tools and tests) ---- */

struct cut_wait {
	bool over, more;
	int rc;
	size_t cut;
	char why[ERR_MSG_MAX];
};

static void
cut_wait_done(void *arg, int rc, size_t cut, bool more, const char *why)
{
	struct cut_wait *w = arg;

	w->over = true;
	w->rc = rc;
	w->cut = cut;
	w->more = more;
	(void)snprintf(w->why, sizeof(w->why), "%s", why ? why : "");
}

int
nft_cut_denied_flows(
    struct nft *n, struct policy *p, size_t *cut, struct err *e)
{
	struct event_base *base = event_base_new();
	struct nft_cut *c = NULL;
	size_t total = 0, pass;
	bool more = true;
	int rc = -1;

	if (base == NULL) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	if ((c = nft_cut_new(n, base, e)) == NULL)
		goto out;
	for (pass = 0; more && pass < NFT_CT_CUT_PASSES_MAX; pass++) {
		struct cut_wait w = {.over = false};

		if (nft_cut_start(c, p, cut_wait_done, &w, e) < 0)
			goto out;
		while (!w.over)
			if (event_base_loop(base, EVLOOP_ONCE) < 0) {
				err_set(e, "nft: event loop failed");
				goto out;
			}
		total += w.cut;
		if (w.rc != 0) {
			err_set(e, "%s", w.why);
			goto out;
		}
		more = w.more;
	}
	if (more) {
		err_set(e,
		    "nft: flows still to cut after %d passes of %d "
		    "deletions",
		    NFT_CT_CUT_PASSES_MAX, NFT_CT_DELETE_MAX);
		goto out;
	}
	rc = 0;
out:
	if (cut != NULL)
		*cut = total;
	nft_cut_free(c);
	if (base != NULL)
		event_base_free(base);
	return rc;
}
