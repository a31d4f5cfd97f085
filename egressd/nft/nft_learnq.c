/*
 * nft_learnq: asynchronous learning on the event loop. Resolver answers
 * gathered into transactions, sent on a socket of their own, each waiter
 * told when the kernel acked its addresses.
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
#include "egressd/nft/nft_learnq.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_state.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_learn.h"
#include "egressd/nft/nft_want.h"
#include "egressd/nft/nft_bounds.h"

/* ---- asynchronous learning ---- */

static void
waiter_free(struct nft_waiter *w)
{
	free(w->name);
	free(w->addr);
	free(w->lim[0]);
	free(w->lim[1]);
	free(w);
}

static void
txn_free(struct nft_txn *t)
{
	struct nft_waiter *w;
	size_t i;

	while ((w = t->w) != NULL) {
		t->w = w->next;
		waiter_free(w);
	}
	for (i = 0; i < t->nu; i++)
		free(t->own[i]);
	free(t->own);
	free(t->u);
	free(t->slot);
	free(t);
}

static struct nft_txn *
txn_new(void)
{
	struct nft_txn *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->wtail = &t->w;
	return t;
}

/* u (limited) takes the limits of a it does not hold yet, into an array
 * the transaction owns: one element once per batch. */
static int
txn_merge_lim(struct nft_txn *t, size_t k, const struct nft_learn_addr *a)
{
	struct nft_learn_addr *u = &t->u[k];
	size_t i;

	if (t->own[k] == NULL) {
		t->own[k] = calloc(NFT_ADDR_LIMITS_MAX, sizeof(*t->own[k]));
		if (t->own[k] == NULL)
			return -1;
		memcpy(t->own[k], u->lim, u->nlim * sizeof(*u->lim));
		u->lim = t->own[k];
	}
	for (i = 0; i < a->nlim && u->nlim < NFT_ADDR_LIMITS_MAX; i++)
		if (!nft_mirror_lim_covered(u->lim, u->nlim, &a->lim[i], 1)) {
			t->own[k][u->nlim++] = a->lim[i];
			u->nlim = nft_mirror_lim_norm(t->own[k], u->nlim);
		}
	return 0;
}

/*
 * Adds a to the unique set of t, keyed by address and set (plain or
 * limited; limited ones merge their limits); the longest TTL wins.
 */
static int
txn_add(struct nft_txn *t, const struct nft_learn_addr *a)
{
	unsigned w = a->family == 4 ? 4 : 16;
	size_t i, h;

	if (2 * (t->nu + 1) > t->nslot) {
		size_t ns = t->nslot == 0 ? 64 : 2 * t->nslot;
		uint32_t *nsl = calloc(ns, sizeof(*nsl));

		if (nsl == NULL)
			return -1;
		for (i = 0; i < t->nu; i++) {
			h = nft_mirror_hash32(t->u[i].family, t->u[i].addr) &
			    (ns - 1);
			while (nsl[h] != 0)
				h = (h + 1) & (ns - 1);
			nsl[h] = (uint32_t)i + 1;
		}
		free(t->slot);
		t->slot = nsl;
		t->nslot = ns;
	}
	h = nft_mirror_hash32(a->family, a->addr) & (t->nslot - 1);
	for (; t->slot[h] != 0; h = (h + 1) & (t->nslot - 1)) {
		size_t k = t->slot[h] - 1;
		struct nft_learn_addr *u = &t->u[k];

		if (u->family == a->family &&
		    memcmp(u->addr, a->addr, w) == 0 &&
		    (u->nlim != 0) == (a->nlim != 0)) {
			if (a->ttl > u->ttl)
				u->ttl = a->ttl;
			return a->nlim != 0 ? txn_merge_lim(t, k, a) : 0;
		}
	}
	if (t->nu == t->capu) {
		size_t nc = t->capu == 0 ? 64 : 2 * t->capu;
		struct nft_learn_addr *nv = realloc(t->u, nc * sizeof(*nv));
		struct nft_limit **no;

		if (nv == NULL)
			return -1;
		t->u = nv;
		no = realloc(t->own, nc * sizeof(*no));
		if (no == NULL)
			return -1;
		t->own = no;
		t->capu = nc;
	}
	t->u[t->nu] = *a;
	t->own[t->nu] = NULL;
	t->slot[h] = (uint32_t)++t->nu;
	return 0;
}

/* Moves the waiters of t to the delivery list with rc (and why). */
static void
txn_settle(struct nft *n, struct nft_txn *t, int rc, const char *why)
{
	struct nft_waiter *w;
	uint64_t now = nft_mirror_now(n);
	size_t i;

	if (rc == 0) {
		/* each address taught (nft_on_learned) once the mirror holds
		 * it for the name: what it holds it can forget by name */
		for (w = t->w; w != NULL; w = w->next)
			for (i = 0; i < w->naddr; i++)
				if (nft_mirror_put(n, w->addr[i].family,
				        w->addr[i].addr,
				        now +
				            (uint64_t)nft_learn_clamp(
				                n, w->addr[i].ttl) *
				                1000,
				        w->name, w->addr[i].lim,
				        w->addr[i].nlim) == 0 &&
				    n->learned_fn != NULL)
					n->learned_fn(n->learned_arg, w->name,
					    w->addr[i].family, w->addr[i].addr);
		if (n->st != NULL)
			n->st->nft_learned += t->nu;
		nft_mirror_gauge(n);
	}
	for (w = t->w; w != NULL; w = w->next) {
		w->rc = rc;
		/* Cut to the waiter's buffer on purpose: a reason, not a log. */
		(void)snprintf(w->why, sizeof(w->why), "%.*s",
		    (int)sizeof(w->why) - 1, why ? why : "");
	}
	if (t->w != NULL) {
		*n->donetail = t->w;
		n->donetail = t->wtail;
		t->w = NULL;
		t->wtail = &t->w;
		event_active(n->ldeliver, EV_TIMEOUT, 0);
	}
	txn_free(t);
}

/* Unlinks t from the sent list (a few entries at most). */
static void
sent_unlink(struct nft *n, struct nft_txn *t)
{
	struct nft_txn **pp;

	for (pp = &n->sent; *pp != NULL; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	t->next = NULL;
	for (pp = &n->sent; *pp != NULL; pp = &(*pp)->next)
		;
	n->senttail = pp;
}

/* Every transaction in flight fails (lost acks, a dead socket). */
static void
sent_fail_all(struct nft *n, const char *why)
{
	struct nft_txn *t;

	while ((t = n->sent) != NULL) {
		sent_unlink(n, t);
		if (n->st != NULL) {
			n->st->nft_failures++;
			n->st->nft_update_failed[STATS_NFT_OP_DYNAMIC_ADD]++;
		}
		txn_settle(n, t, -1, why);
	}
}

/* Reads the acks queued on the learn socket; false on a socket error. */
static bool
learn_read_acks(struct nft *n)
{
	char why[320];

	while (n->sent != NULL) {
		const struct nlmsghdr *nlh;
		struct nft_txn *t;
		ssize_t r;
		int len;

		r = recv(mnl_socket_get_fd(n->lnl), n->rbuf, NFT_RECV_BUF,
		    MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (r <= 0) {
			(void)snprintf(why, sizeof(why), "nft: learn acks: %s",
			    r < 0 ? strerror(errno) : "socket closed");
			sent_fail_all(n, why);
			return false;
		}
		len = (int)r;
		for (nlh = (const struct nlmsghdr *)n->rbuf;
		     mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *me;
			uint32_t s = nlh->nlmsg_seq;
			char kmsg[128];
			int offs;

			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			me = mnl_nlmsg_get_payload(nlh);
			for (t = n->sent; t != NULL; t = t->next)
				if (s >= t->base && s <= t->base + t->nmsgs)
					break;
			if (t == NULL)
				continue; /* not ours (stale) */
			if (s == t->base || me->error != 0) {
				nft_err_ext_ack(nlh, kmsg, sizeof(kmsg), &offs);
				if (!t->failed)
					(void)snprintf(t->why, sizeof(t->why),
					    "nft: kernel refused a learn "
					    "transaction: %s%s%s",
					    strerror(-me->error),
					    kmsg[0] ? ": " : "", kmsg);
				t->failed = true;
			}
			if (s == t->base)
				t->acked = t->nmsgs; /* the batch as a whole */
			else
				t->acked++;
			if (t->acked < t->nmsgs)
				continue;
			sent_unlink(n, t);
			if (n->st != NULL) {
				if (t->failed) {
					n->st->nft_failures++;
					n->st->nft_update_failed
					    [STATS_NFT_OP_DYNAMIC_ADD]++;
				} else
					n->st->nft_batches++;
			}
			txn_settle(n, t, t->failed ? -1 : 0, t->why);
		}
	}
	return true;
}

static void
learn_bufs(struct nft *n, size_t sndlen)
{
	if (sndlen + 4096 > n->lsndbuf) {
		n->lsndbuf = sndlen + 4096;
		sock_set_buf(mnl_socket_get_fd(n->lnl), SO_SNDBUF, n->lsndbuf);
	}
}

/* Sends the open transaction (if any) and collects the acks queued. */
static void
learn_flush(struct nft *n)
{
	struct nft_txn *t = n->open;
	struct nft_batch *b = NULL;
	struct err e;
	ssize_t r;

	n->open = NULL;
	if (t == NULL)
		return;
	if (t->nu == 0) {
		txn_settle(n, t, 0, NULL);
		return;
	}
	err_clear(&e);
	if (nft_learn_build(n, t->u, t->nu, &b, &e) < 0) {
		txn_settle(n, t, -1, e.msg);
		return;
	}
	t->nmsgs = b->nmsgs;
	t->base = n->lseq;
	n->lseq += (uint32_t)b->nmsgs + 2;
	nft_batch_set_seq_(b, t->base);
	learn_bufs(n, b->len);
	r = mnl_socket_sendto(n->lnl, b->buf, b->len);
	if (r < 0 || (size_t)r != b->len) {
		err_set(&e, "nft: learn send (%zu bytes): %s", b->len,
		    r < 0 ? strerror(errno) : "short write");
		nft_batch_free(b);
		if (n->st != NULL) {
			n->st->nft_failures++;
			n->st->nft_update_failed[STATS_NFT_OP_DYNAMIC_ADD]++;
		}
		txn_settle(n, t, -1, e.msg);
		return;
	}
	nft_batch_free(b);
	if (n->st != NULL)
		n->st->nft_learn_txns++;
	*n->senttail = t;
	n->senttail = &t->next;
	/* The kernel handles a batch inside sendmsg: its acks are usually
	 * queued already. The read event takes whatever is not. */
	(void)learn_read_acks(n);
}

static void
learn_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nft *n = arg;

	(void)fd;
	(void)what;
	if (n == NULL || n->magic != NFT_MAGIC)
		abort();
	n->flush_armed = false;
	learn_flush(n);
}

static void
learn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nft *n = arg;

	(void)fd;
	(void)what;
	if (n == NULL || n->magic != NFT_MAGIC)
		abort();
	(void)learn_read_acks(n);
}

/* The elements a learned address of an answer needs are still held:
 * the plain one, or (a name with limits) its limited ones or the plain. */
static bool
learned_open(struct nft *n, const struct nft_learn_addr *a)
{
	struct lent *l = *nft_mirror_find(n, a->family, a->addr);
	uint64_t now = nft_mirror_now(n);
	size_t i;

	if (l == NULL)
		return false;
	if (l->plain_ms > now)
		return true;
	if (a->nlim == 0 || l->lim_ms <= now)
		return false;
	(void)i;
	return nft_mirror_lim_covered(l->lim, l->nlim, a->lim, a->nlim);
}

/* Hands settled waiters their result, re-checking each address: one that
 * a policy change or an eviction removed meanwhile is not open. */
static void
learn_deliver_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nft *n = arg;
	struct nft_waiter *list, *w;
	size_t i;

	(void)fd;
	(void)what;
	if (n == NULL || n->magic != NFT_MAGIC)
		abort();
	list = n->done;
	n->done = NULL;
	n->donetail = &n->done;
	while ((w = list) != NULL) {
		list = w->next;
		if (w->done != NULL && w->rc == 0)
			for (i = 0; i < w->naddr; i++)
				if (!learned_open(n, &w->addr[i])) {
					w->rc = -1;
					(void)snprintf(w->why, sizeof(w->why),
					    "nft: learned address removed "
					    "before the answer was released "
					    "(policy change or eviction)");
					break;
				}
		if (w->done != NULL)
			w->done(w->arg, w->rc, w->rc == 0 ? NULL : w->why);
		waiter_free(w);
	}
}

/*
 * Before a policy apply: every queued answer goes to the kernel and every
 * ack is read (bounded by NFT_ACK_TIMEOUT_MS), so the apply sees (and may
 * remove) all learned elements; the waiters are told after it, re-checked.
 */
void
nft_learnq_drain(struct nft *n)
{
	struct pollfd pfd;
	int rc;

	if (n->lnl == NULL)
		return;
	if (n->flush_armed) {
		event_del(n->lflush);
		n->flush_armed = false;
	}
	learn_flush(n);
	pfd.fd = mnl_socket_get_fd(n->lnl);
	pfd.events = POLLIN;
	while (n->sent != NULL) {
		rc = poll(&pfd, 1, NFT_ACK_TIMEOUT_MS);
		if (rc <= 0) {
			sent_fail_all(n, "nft: learn acks: timeout");
			return;
		}
		if (!learn_read_acks(n))
			return;
	}
}

void
nft_learnq_detach(struct nft *n)
{
	struct nft_txn *t;
	struct nft_waiter *w;

	if (n->lread != NULL)
		event_free(n->lread);
	if (n->lflush != NULL)
		event_free(n->lflush);
	if (n->ldeliver != NULL)
		event_free(n->ldeliver);
	n->lread = n->lflush = n->ldeliver = NULL;
	if (n->open != NULL)
		txn_free(n->open);
	n->open = NULL;
	while ((t = n->sent) != NULL) {
		n->sent = t->next;
		txn_free(t);
	}
	n->senttail = &n->sent;
	while ((w = n->done) != NULL) {
		n->done = w->next;
		waiter_free(w);
	}
	n->donetail = &n->done;
	if (n->lnl != NULL)
		mnl_socket_close(n->lnl);
	n->lnl = NULL;
	n->base = NULL;
}

int
nft_attach(struct nft *n, struct event_base *base, struct err *e)
{
	int one = 1, fd;

	if (n->lnl != NULL) {
		err_set(e, "nft: already attached");
		return -1;
	}
	n->lnl =
	    mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (n->lnl == NULL) {
		err_set(e, "nft: learn netlink socket: %s", strerror(errno));
		return -1;
	}
	if (mnl_socket_bind(n->lnl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err_set(e, "nft: learn netlink bind: %s", strerror(errno));
		goto out;
	}
	n->lportid = mnl_socket_get_portid(n->lnl);
	n->lseq = (uint32_t)time(NULL) ^ 0x5a5a0000u;
	mnl_socket_setsockopt(n->lnl, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(n->lnl, NETLINK_CAP_ACK, &one, sizeof(one));
	fd = mnl_socket_get_fd(n->lnl);
	/* Room for the acks of several transactions of NFT_LEARN_TXN_MAX. */
	sock_set_buf(fd, SO_RCVBUF, NFT_RCVBUF_MIN * 4);
	n->base = base;
	n->lread = event_new(base, fd, EV_READ | EV_PERSIST, learn_read_cb, n);
	n->lflush = evtimer_new(base, learn_flush_cb, n);
	n->ldeliver = event_new(base, -1, 0, learn_deliver_cb, n);
	if (n->lread == NULL || n->lflush == NULL || n->ldeliver == NULL ||
	    event_add(n->lread, NULL) < 0) {
		err_set(e, "nft: learn events: out of memory");
		goto out;
	}
	return 0;
out:
	nft_learnq_detach(n);
	return -1;
}

/*
 * w's addresses from a[0..n_addrs), each with the set the name may reach
 * under the policy in force, added to the open transaction. -1: out of
 * memory (the addresses added so far stay in it).
 */
static int
waiter_fill(struct nft *n, struct nft_waiter *w, const struct nft_learn_addr *a,
    size_t n_addrs)
{
	size_t i;

	for (i = 0; i < n_addrs; i++) {
		int f = a[i].family == 4 ? 0 : 1;

		w->addr[i] = a[i];
		w->addr[i].name = w->name[0] != '\0' ? w->name : NULL;
		/* which set: what the name may reach under the policy in
		 * force, once per family (a name it denies entirely is the
		 * resolver's business: the plain set, as before limits) */
		if (!w->decided[f]) {
			bool plain, denied;

			w->lim[f] = calloc(NFT_LIMITS_MAX, sizeof(*w->lim[f]));
			if (w->lim[f] == NULL)
				return -1;
			w->nlim[f] =
			    nft_want_name_limits(n->pol, w->addr[i].name,
			        a[i].family, &plain, &denied, w->lim[f]);
			if (plain || denied)
				w->nlim[f] = 0;
			w->decided[f] = true;
		}
		w->addr[i].lim = w->nlim[f] != 0 ? w->lim[f] : NULL;
		w->addr[i].nlim = w->nlim[f];
		if (txn_add(n->open, &w->addr[i]) < 0)
			return -1;
	}
	return 0;
}

uint64_t
nft_learn_submit(struct nft *n, const struct nft_learn_addr *a, size_t n_addrs,
    const char *name, nft_learn_done_fn done, void *arg, struct err *e)
{
	struct nft_waiter *w;

	if (n->lnl == NULL) {
		err_set(e, "nft: learn socket not attached");
		return 0;
	}
	if (!n->applied) {
		err_set(e, "nft: learn before the ruleset is applied");
		return 0;
	}
	if (nft_learn_check(a, n_addrs, e) < 0)
		return 0;
	/* A transaction never holds more than a set: the kernel's room
	 * (NFT_LEARNED_SLACK times the cap) then always fits it. */
	if (n->open != NULL && n->open->nu > 0 &&
	    (n->open->nu + n_addrs > NFT_LEARN_TXN_MAX ||
	        n->open->nu + n_addrs > n->cap))
		learn_flush(n);
	if (n->open == NULL && (n->open = txn_new()) == NULL)
		goto out_nomem;
	w = calloc(1, sizeof(*w));
	if (w == NULL)
		goto out_nomem;
	w->name = strdup(name != NULL ? name : "");
	w->addr = calloc(n_addrs + 1, sizeof(*w->addr));
	if (w->name == NULL || w->addr == NULL) {
		waiter_free(w);
		goto out_nomem;
	}
	if (waiter_fill(n, w, a, n_addrs) < 0) {
		/* addresses added so far stay: harmless extra work */
		waiter_free(w);
		goto out_nomem;
	}
	w->naddr = n_addrs;
	w->done = done;
	w->arg = arg;
	w->ticket = ++n->next_ticket;
	*n->open->wtail = w;
	n->open->wtail = &w->next;
	if (!n->flush_armed) {
		/* At the end of this loop turn: the answers handled in the
		 * same turn (a read of many datagrams, many upstream answers
		 * ready at once) share the transaction, and none waits for a
		 * timer. */
		event_active(n->lflush, EV_TIMEOUT, 0);
		n->flush_armed = true;
	}
	return w->ticket;
out_nomem:
	err_set(e, "nft: out of memory");
	return 0;
}

void
nft_learn_cancel(struct nft *n, uint64_t ticket)
{
	struct nft_txn *t;
	struct nft_waiter *w;

	if (ticket == 0)
		return;
	for (w = n->done; w != NULL; w = w->next)
		if (w->ticket == ticket) {
			w->done = NULL;
			return;
		}
	for (t = n->open; t != NULL; t = NULL)
		for (w = t->w; w != NULL; w = w->next)
			if (w->ticket == ticket) {
				w->done = NULL;
				return;
			}
	for (t = n->sent; t != NULL; t = t->next)
		for (w = t->w; w != NULL; w = w->next)
			if (w->ticket == ticket) {
				w->done = NULL;
				return;
			}
}
