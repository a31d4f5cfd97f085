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

#include "egressd/nft_int.h"
#include "egressd/stats.h"

#define NFT_MAGIC 0x6e667421u

/*
 * The learned mirror: one entry per learned element, in a hash table that
 * grows with it, and per family in a list from the most to the least
 * recently learned (the eviction order when a set is full).
 */
struct lent {
	struct lent *next; /* hash chain */
	struct lent *newer, *older; /* the family's learn order */
	uint8_t family;
	uint8_t addr[16];
	uint64_t expires_ms;
	uint64_t pin; /* == nft.pin_gen: part of the transaction being built */
	char *names[NFT_NAMES_PER_ADDR];
	unsigned nnames;
};

struct lru {
	struct lent *newest, *oldest;
	size_t n;
};

/* A resolver answer waiting for its learn transaction. */
struct nft_waiter {
	struct nft_waiter *next;
	uint64_t ticket;
	nft_learn_done_fn done; /* NULL: cancelled */
	void *arg;
	char *name;
	size_t naddr;
	struct nft_learn_addr *addr; /* names point at name */
	int rc;
	char why[320];
};

/* One learn transaction: open (gathering), then sent (acks awaited). */
struct nft_txn {
	struct nft_txn *next;
	struct nft_waiter *w, **wtail;
	struct nft_learn_addr *u; /* unique addresses */
	size_t nu, capu;
	uint32_t *slot; /* open addressing over u (index + 1) */
	size_t nslot;
	uint32_t base;
	size_t nmsgs, acked;
	bool failed;
	char why[320];
};

struct nft {
	uint32_t magic;
	struct mnl_socket *nl;
	uint32_t portid;
	uint32_t seq;
	struct nft_opts o;
	struct stats *st;
	bool applied; /* our table is in force (by us) */
	uint32_t ttl_min, ttl_max;
	struct lent **buckets;
	size_t nbuckets; /* a power of two */
	size_t nlearned;
	size_t cap; /* elements per learned set */
	struct lru lru[2]; /* [0] IPv4, [1] IPv6 */
	uint64_t pin_gen;
	size_t sndbuf, rcvbuf; /* socket buffer sizes already requested */
	uint8_t *rbuf; /* NFT_RECV_BUF bytes for answers */

	/* Asynchronous learning (nft_attach). */
	struct event_base *base;
	struct mnl_socket *lnl;
	uint32_t lportid, lseq;
	size_t lsndbuf, lrcvbuf;
	struct event *lread, *lflush, *ldeliver;
	struct nft_txn *open;
	struct nft_txn *sent, **senttail;
	struct nft_waiter *done, **donetail;
	uint64_t next_ticket;
	bool flush_armed;
};

static uint64_t
now_ms(const struct nft *n)
{
	struct timespec ts;

	if (n->o.clock != NULL)
		return n->o.clock(n->o.clock_arg);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint32_t
addr_hash32(int family, const uint8_t *a)
{
	uint32_t h = 2166136261u;
	unsigned i, w = family == 4 ? 4 : 16;

	for (i = 0; i < w; i++)
		h = (h ^ a[i]) * 16777619u;
	return h ^ (h >> 15);
}

static size_t
addr_hash(const struct nft *n, int family, const uint8_t *a)
{
	return addr_hash32(family, a) & (n->nbuckets - 1);
}

static struct lent **
mirror_find(struct nft *n, int family, const uint8_t *a)
{
	struct lent **pp = &n->buckets[addr_hash(n, family, a)];
	unsigned w = family == 4 ? 4 : 16;

	for (; *pp != NULL; pp = &(*pp)->next)
		if ((*pp)->family == family && memcmp((*pp)->addr, a, w) == 0)
			return pp;
	return pp; /* *pp == NULL: where to insert */
}

static struct lru *
lru_of(struct nft *n, int family)
{
	return &n->lru[family == 4 ? 0 : 1];
}

static void
lru_unlink(struct nft *n, struct lent *l)
{
	struct lru *q = lru_of(n, l->family);

	if (l->newer != NULL)
		l->newer->older = l->older;
	else
		q->newest = l->older;
	if (l->older != NULL)
		l->older->newer = l->newer;
	else
		q->oldest = l->newer;
	l->newer = l->older = NULL;
	q->n--;
}

static void
lru_push(struct nft *n, struct lent *l)
{
	struct lru *q = lru_of(n, l->family);

	l->newer = NULL;
	l->older = q->newest;
	if (q->newest != NULL)
		q->newest->newer = l;
	else
		q->oldest = l;
	q->newest = l;
	q->n++;
}

static void
lent_free(struct lent *l)
{
	unsigned i;

	for (i = 0; i < l->nnames; i++)
		free(l->names[i]);
	free(l);
}

static void
mirror_remove(struct nft *n, struct lent **pp)
{
	struct lent *l = *pp;

	*pp = l->next;
	lru_unlink(n, l);
	lent_free(l);
	n->nlearned--;
}

static void
mirror_clear(struct nft *n)
{
	size_t b;

	for (b = 0; b < n->nbuckets; b++)
		while (n->buckets[b] != NULL)
			mirror_remove(n, &n->buckets[b]);
}

/* Doubles the hash table when chains get long; failure keeps the old. */
static void
mirror_grow(struct nft *n)
{
	size_t nb = n->nbuckets * 2, b;
	struct lent **nt, *l, *next;

	if (n->nlearned < n->nbuckets || nb > ((size_t)1 << 26))
		return;
	nt = calloc(nb, sizeof(*nt));
	if (nt == NULL)
		return;
	for (b = 0; b < n->nbuckets; b++)
		for (l = n->buckets[b]; l != NULL; l = next) {
			size_t h = addr_hash32(l->family, l->addr) & (nb - 1);

			next = l->next;
			l->next = nt[h];
			nt[h] = l;
		}
	free(n->buckets);
	n->buckets = nt;
	n->nbuckets = nb;
}

static void
stats_gauge(struct nft *n)
{
	if (n->st != NULL) {
		n->st->nft_learned_current = n->nlearned;
		n->st->nft_learned_set[0] = n->lru[0].n;
		n->st->nft_learned_set[1] = n->lru[1].n;
		n->st->nft_learned_capacity = n->cap;
	}
}

/* Creates or refreshes an entry (now the most recently learned); name
 * may be NULL. */
static int
mirror_put(struct nft *n, int family, const uint8_t *a, uint64_t expires,
    const char *name)
{
	struct lent **pp = mirror_find(n, family, a), *l = *pp;
	unsigned i;

	if (l == NULL) {
		l = calloc(1, sizeof(*l));
		if (l == NULL)
			return -1;
		l->family = (uint8_t)family;
		memcpy(l->addr, a, family == 4 ? 4 : 16);
		*pp = l;
		n->nlearned++;
		lru_push(n, l);
		mirror_grow(n);
	} else {
		lru_unlink(n, l);
		lru_push(n, l);
	}
	if (expires > l->expires_ms)
		l->expires_ms = expires;
	if (name == NULL)
		return 0;
	for (i = 0; i < l->nnames; i++)
		if (strcmp(l->names[i], name) == 0)
			return 0;
	if (l->nnames == NFT_NAMES_PER_ADDR) {
		/* keep the newest names: they are what clients ask for now */
		free(l->names[0]);
		memmove(&l->names[0], &l->names[1],
		    (NFT_NAMES_PER_ADDR - 1) * sizeof(l->names[0]));
		l->nnames--;
	}
	l->names[l->nnames] = strdup(name);
	if (l->names[l->nnames] != NULL)
		l->nnames++;
	return 0;
}

static void learn_detach(struct nft *n);
static void learn_drain(struct nft *n);
static void ext_ack(
    const struct nlmsghdr *nlh, char *msg, size_t msglen, int *offs);

/* ---- socket, send, acks ---- */

struct nft *
nft_new(const struct nft_opts *o, struct stats *st, struct err *e)
{
	struct nft *n;
	int one = 1;
	struct timeval tv = {.tv_sec = NFT_ACK_TIMEOUT_MS / 1000,
	    .tv_usec = (NFT_ACK_TIMEOUT_MS % 1000) * 1000};

	n = calloc(1, sizeof(*n));
	if (n == NULL) {
		err_set(e, "nft: out of memory");
		return NULL;
	}
	n->magic = NFT_MAGIC;
	n->o = *o;
	n->st = st;
	n->ttl_min = o->ttl_min;
	n->ttl_max = o->ttl_max;
	n->cap = o->learned_max;
	if (n->cap < NFT_LEARNED_MAX_MIN)
		n->cap = o->learned_max == 0 ? NFT_LEARNED_MAX_DEFAULT
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
	n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (n->nl == NULL) {
		err_set(e, "nft: netlink socket: %s", strerror(errno));
		goto out_free;
	}
	if (mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err_set(e, "nft: netlink bind: %s", strerror(errno));
		goto out_close;
	}
	n->portid = mnl_socket_get_portid(n->nl);
	/* Kernel's own words on errors; acks without the echoed message. */
	mnl_socket_setsockopt(n->nl, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(n->nl, NETLINK_CAP_ACK, &one, sizeof(one));
	if (setsockopt(mnl_socket_get_fd(n->nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
	        sizeof(tv)) < 0) {
		err_set(e, "nft: SO_RCVTIMEO: %s", strerror(errno));
		goto out_close;
	}
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
	learn_detach(n);
	mirror_clear(n);
	free(n->buckets);
	free(n->rbuf);
	if (n->nl != NULL)
		mnl_socket_close(n->nl);
	n->magic = 0;
	free(n);
}

static void
sock_bufs(struct nft *n, size_t sndlen, size_t nmsgs)
{
	int fd = mnl_socket_get_fd(n->nl);
	size_t want;
	int v;

	/* Grow only: small learn batches then cost no syscall here. */
	want = sndlen + 4096;
	if (want > n->sndbuf) {
		v = want > (size_t)INT32_MAX / 2 ? INT32_MAX / 2 : (int)want;
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) <
		    0)
			(void)setsockopt(
			    fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
		n->sndbuf = want;
	}
	want = nmsgs * NFT_RCVBUF_PER_MSG;
	if (want < NFT_RCVBUF_MIN)
		want = NFT_RCVBUF_MIN;
	if (want > n->rcvbuf) {
		v = want > (size_t)INT32_MAX / 2 ? INT32_MAX / 2 : (int)want;
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) <
		    0)
			(void)setsockopt(
			    fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
		n->rcvbuf = want;
	}
}

/* The extended-ack text and offset, if the kernel sent them. */
static void
ext_ack(const struct nlmsghdr *nlh, char *msg, size_t msglen, int *offs)
{
	const struct nlmsgerr *me = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	size_t off;

	msg[0] = '\0';
	*offs = -1;
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	off = sizeof(*nlh) + sizeof(*me);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off += me->msg.nlmsg_len - sizeof(me->msg);
	off = NLMSG_ALIGN(off);
	if (nlh->nlmsg_len <= off)
		return;
	for (a = (const struct nlattr *)((const uint8_t *)nlh + off);
	     mnl_attr_ok(a,
	         (int)((const uint8_t *)nlh + nlh->nlmsg_len -
	             (const uint8_t *)a));
	     a = mnl_attr_next(a)) {
		if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG &&
		    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
			snprintf(msg, msglen, "%s", mnl_attr_get_str(a));
		else if (mnl_attr_get_type(a) == NLMSGERR_ATTR_OFFS &&
		    mnl_attr_validate(a, MNL_TYPE_U32) == 0)
			*offs = (int)mnl_attr_get_u32(a);
	}
}

/*
 * Sends one finished batch and waits for one ack per message. The first
 * failing message (lowest index) is reported with the kernel's errno and
 * extended-ack text.
 */
static int
nft_send(struct nft *n, struct nft_batch *b, struct err *e)
{
	uint8_t *buf;
	uint32_t base = n->seq;
	size_t nmsgs = b->nmsgs, acked = 0, bad = (size_t)-1;
	int bad_errno = 0, bad_offs = -1, rc = -1;
	char kmsg[256] = "", tmp[256];
	ssize_t r;

	n->seq += (uint32_t)nmsgs + 2;
	nft_batch_set_seq_(b, base);
	sock_bufs(n, b->len, nmsgs);
	buf = n->rbuf;
	r = mnl_socket_sendto(n->nl, b->buf, b->len);
	if (r < 0 || (size_t)r != b->len) {
		err_set(e, "nft: netlink send (%zu bytes): %s", b->len,
		    r < 0 ? strerror(errno) : "short write");
		goto out;
	}
	while (acked < nmsgs) {
		const struct nlmsghdr *nlh;
		int len;

		r = mnl_socket_recvfrom(n->nl, buf, NFT_RECV_BUF);
		if (r < 0) {
			err_set(e, "nft: waiting for acks (%zu of %zu): %s",
			    acked, nmsgs,
			    errno == EAGAIN ? "timeout" : strerror(errno));
			goto out;
		}
		len = (int)r;
		for (nlh = (const struct nlmsghdr *)buf; mnl_nlmsg_ok(nlh, len);
		     nlh = mnl_nlmsg_next(nlh, &len)) {
			const struct nlmsgerr *me;
			uint32_t s = nlh->nlmsg_seq;

			if (nlh->nlmsg_type != NLMSG_ERROR)
				continue;
			me = mnl_nlmsg_get_payload(nlh);
			if (s == base) {
				/* the batch as a whole (commit, ENOMEM) */
				ext_ack(nlh, tmp, sizeof(tmp), &bad_offs);
				err_set(e,
				    "nft: kernel refused the batch "
				    "(%zu messages): %s%s%s",
				    nmsgs, strerror(-me->error),
				    tmp[0] ? ": " : "", tmp);
				goto out;
			}
			if (s <= base || s > base + nmsgs)
				continue; /* not ours (stale) */
			acked++;
			if (me->error != 0 && s - base - 1 < bad) {
				bad = s - base - 1;
				bad_errno = -me->error;
				ext_ack(nlh, kmsg, sizeof(kmsg), &bad_offs);
			}
		}
	}
	if (bad != (size_t)-1) {
		if (bad_offs >= 0)
			snprintf(tmp, sizeof(tmp),
			    " (bad attribute at byte %d)", bad_offs);
		else if ((bad_errno == ENOENT || bad_errno == EOPNOTSUPP) &&
		    strncmp(nft_batch_msg_label(b, bad), "NEWRULE", 7) == 0)
			snprintf(tmp, sizeof(tmp),
			    " (an expression of this rule missing from the "
			    "kernel? see docs/nft.md)");
		else
			tmp[0] = '\0';
		err_set(e,
		    "nft: kernel refused message %zu of %zu (%s): %s%s%s%s",
		    bad + 1, nmsgs, nft_batch_msg_label(b, bad),
		    strerror(bad_errno), kmsg[0] ? ": " : "", kmsg, tmp);
		goto out;
	}
	rc = 0;
out:
	if (n->st != NULL) {
		if (rc == 0)
			n->st->nft_batches++;
		else
			n->st->nft_failures++;
	}
	return rc;
}

int
nft_send_batch(struct nft *n, struct nft_batch *b, struct err *e)
{
	if (!b->finished) {
		err_set(e, "nft: batch not finished");
		return -1;
	}
	return nft_send(n, b, e);
}

/* ---- dumps ---- */

typedef int (*nft_dump_cb)(const struct nlmsghdr *nlh, void *arg);

/* One GET request (built by the caller in buf) and its answer(s). */
static int
nft_request(struct nft *n, struct nlmsghdr *req, mnl_cb_t cb, void *arg,
    struct err *e, const char *what)
{
	uint8_t *buf;
	ssize_t r;
	int rc;
	uint32_t seq = n->seq++;

	req->nlmsg_seq = seq;
	buf = n->rbuf;
	if (mnl_socket_sendto(n->nl, req, req->nlmsg_len) < 0) {
		err_set(e, "nft: %s: send: %s", what, strerror(errno));
		return -1;
	}
	for (;;) {
		r = mnl_socket_recvfrom(n->nl, buf, NFT_RECV_BUF);
		if (r < 0) {
			err_set(e, "nft: %s: %s", what,
			    errno == EAGAIN ? "timeout" : strerror(errno));
			rc = -1;
			break;
		}
		rc = mnl_cb_run(buf, (size_t)r, seq, n->portid, cb, arg);
		if (rc == MNL_CB_ERROR) {
			err_set(e, "nft: %s: %s", what, strerror(errno));
			rc = -errno;
			break;
		}
		if (rc == MNL_CB_STOP) {
			rc = 0;
			break;
		}
	}
	return rc;
}

struct names {
	char **v;
	size_t n;
	bool overflow;
};

static void
names_clear(struct names *x)
{
	size_t i;

	for (i = 0; i < x->n; i++)
		free(x->v[i]);
	free(x->v);
	memset(x, 0, sizeof(*x));
}

static int
names_add(struct names *x, const char *s)
{
	char **nv;

	if (x->n == NFT_KOBJ_MAX) {
		x->overflow = true;
		return -1;
	}
	nv = realloc(x->v, (x->n + 1) * sizeof(*nv));
	if (nv == NULL)
		return -1;
	x->v = nv;
	if ((x->v[x->n] = strdup(s)) == NULL)
		return -1;
	x->n++;
	return 0;
}

static int
chain_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	int rc = MNL_CB_OK;

	if (c == NULL)
		return MNL_CB_ERROR;
	if (nftnl_chain_nlmsg_parse(nlh, c) == 0 &&
	    strcmp(nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE), NFT_TABLE) == 0 &&
	    nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY) == NFPROTO_INET &&
	    names_add(arg, nftnl_chain_get_str(c, NFTNL_CHAIN_NAME)) < 0)
		rc = MNL_CB_ERROR;
	nftnl_chain_free(c);
	return rc;
}

static int
set_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nftnl_set *s = nftnl_set_alloc();
	int rc = MNL_CB_OK;

	if (s == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_nlmsg_parse(nlh, s) == 0 &&
	    strcmp(nftnl_set_get_str(s, NFTNL_SET_TABLE), NFT_TABLE) == 0 &&
	    nftnl_set_get_u32(s, NFTNL_SET_FAMILY) == NFPROTO_INET &&
	    !(nftnl_set_get_u32(s, NFTNL_SET_FLAGS) & NFT_SET_ANONYMOUS) &&
	    names_add(arg, nftnl_set_get_str(s, NFTNL_SET_NAME)) < 0)
		rc = MNL_CB_ERROR;
	nftnl_set_free(s);
	return rc;
}

static int
null_cb(const struct nlmsghdr *nlh, void *arg)
{
	(void)nlh;
	(void)arg;
	return MNL_CB_OK;
}

/* 1 = our table exists, 0 = not, -1 = error. */
static int
table_exists(struct nft *n, struct err *e)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nftnl_table *t = nftnl_table_alloc();
	struct nlmsghdr *nlh;
	int rc;

	if (t == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, NFT_TABLE);
	nlh = nftnl_nlmsg_build_hdr(
	    buf, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_ACK, 0);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	rc = nft_request(n, nlh, null_cb, NULL, e, "get table");
	if (rc == -ENOENT) {
		err_clear(e);
		return 0;
	}
	return rc < 0 ? -1 : 1;
}

int
nft_table_present(struct nft *n, struct err *e)
{
	return table_exists(n, e);
}

static int
dump_names(struct nft *n, uint16_t type, struct names *out, struct err *e)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	int rc;

	nlh = nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, NLM_F_DUMP, 0);
	if (type == NFT_MSG_GETSET) {
		struct nftnl_set *s = nftnl_set_alloc();

		if (s == NULL)
			goto out_nomem;
		nftnl_set_set_str(s, NFTNL_SET_TABLE, NFT_TABLE);
		nftnl_set_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
	}
	rc = nft_request(n, nlh, type == NFT_MSG_GETSET ? set_cb : chain_cb,
	    out, e, type == NFT_MSG_GETSET ? "list sets" : "list chains");
	if (out->overflow) {
		err_set(e, "nft: more than %d objects in table %s",
		    NFT_KOBJ_MAX, NFT_TABLE);
		return -1;
	}
	return rc < 0 ? -1 : 0;
out_nomem:
	err_set(e, "nft: out of memory");
	return -1;
}

struct elem_dump {
	struct nft *n;
	int family;
	uint64_t now;
	int err;
};

static int
comment_cb(const struct nftnl_udata *attr, void *data)
{
	const struct nftnl_udata **tb = data;

	if (nftnl_udata_type(attr) == NFTNL_UDATA_SET_ELEM_COMMENT)
		tb[0] = attr;
	else if (nftnl_udata_type(attr) == NFT_UDATA_PACKED_NAME)
		tb[1] = attr;
	return 0;
}

/* The learned name stored with the element (its comment, or packed when
 * longer, see elem_comment in nft_build.c), if any; checked:
 * NUL-terminated, a plausible DNS name. */
static void
elem_name(struct nftnl_set_elem *el, char *out, size_t outlen)
{
	const struct nftnl_udata *tb[2] = {NULL, NULL};
	const void *ud;
	const char *s;
	uint32_t len;
	size_t i, n;

	out[0] = '\0';
	if (!nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_USERDATA))
		return;
	ud = nftnl_set_elem_get(el, NFTNL_SET_ELEM_USERDATA, &len);
	if (ud == NULL || nftnl_udata_parse(ud, len, comment_cb, tb) < 0)
		return;
	if (tb[0] == NULL && tb[1] != NULL) {
		if (nft_name_unpack_(nftnl_udata_get(tb[1]),
		        nftnl_udata_len(tb[1]), out, outlen) < 0)
			out[0] = '\0';
		return;
	}
	if (tb[0] == NULL)
		return;
	s = nftnl_udata_get(tb[0]);
	n = nftnl_udata_len(tb[0]);
	if (n == 0 || n > outlen || s[n - 1] != '\0')
		return;
	for (i = 0; i + 1 < n; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return;
	memcpy(out, s, n);
}

static int
elem_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct elem_dump *d = arg;
	struct nftnl_set *s = nftnl_set_alloc();
	struct nftnl_set_elems_iter *it;
	struct nftnl_set_elem *el;
	const void *key;
	uint32_t klen;
	uint64_t left;
	char name[POLICY_NAME_MAX + 2];

	if (s == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
		nftnl_set_free(s);
		return MNL_CB_OK;
	}
	it = nftnl_set_elems_iter_create(s);
	if (it == NULL) {
		nftnl_set_free(s);
		return MNL_CB_ERROR;
	}
	/* iter_next returns the current element, then advances */
	while ((el = nftnl_set_elems_iter_next(it)) != NULL) {
		key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &klen);
		if (key == NULL || klen != (d->family == 4 ? 4u : 16u))
			continue;
		left = nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_EXPIRATION)
		    ? nftnl_set_elem_get_u64(el, NFTNL_SET_ELEM_EXPIRATION)
		    : 0;
		elem_name(el, name, sizeof(name));
		if (mirror_put(d->n, d->family, key, d->now + left,
		        name[0] != '\0' ? name : NULL) < 0)
			d->err = -1;
	}
	nftnl_set_elems_iter_destroy(it);
	nftnl_set_free(s);
	return MNL_CB_OK;
}

/* Loads the learned elements of an adopted table into the mirror. */
static int
adopt_learned(struct nft *n, const struct names *sets, struct err *e)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct elem_dump d = {.n = n, .now = now_ms(n)};
	struct nlmsghdr *nlh;
	struct nftnl_set *s;
	size_t i;
	int f;

	for (f = 4; f <= 6; f += 2) {
		const char *name = f == 4 ? NFT_SET_LEARNED4 : NFT_SET_LEARNED6;
		bool present = false;

		for (i = 0; i < sets->n; i++)
			present |= strcmp(sets->v[i], name) == 0;
		if (!present)
			continue;
		s = nftnl_set_alloc();
		if (s == NULL) {
			err_set(e, "nft: out of memory");
			return -1;
		}
		nftnl_set_set_str(s, NFTNL_SET_TABLE, NFT_TABLE);
		nftnl_set_set_str(s, NFTNL_SET_NAME, name);
		nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
		nlh = nftnl_nlmsg_build_hdr(
		    buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP, 0);
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
		d.family = f;
		if (nft_request(n, nlh, elem_cb, &d, e, "list learned") < 0)
			return -1;
	}
	stats_gauge(n);
	return 0;
}

/* ---- policy ---- */

static bool
learned_denied(
    const struct lent *l, const struct policy *p, struct nft_twins *tw)
{
	const struct policy_rule *r = NULL;
	unsigned i, denied = 0;

	if (nft_addr_internal_(l->family, l->addr))
		return true;
	if (p->index != NULL &&
	    nft_twins_match_(tw, p, l->family, l->addr, 0, 0, &r) ==
	        POLICY_DENY &&
	    r != NULL && r->nports == 0 &&
	    (r->protocols & POLICY_PROTO_ALL) == POLICY_PROTO_ALL)
		return true;
	if (p->index == NULL)
		return false;
	for (i = 0; i < l->nnames; i++)
		if (policy_match_domain(p, l->names[i], NULL) == POLICY_DENY)
			denied++;
	return l->nnames != 0 && denied == l->nnames;
}

int
nft_apply_policy(struct nft *n, const struct policy *p, struct err *e)
{
	struct names chains = {0}, sets = {0};
	struct nft_kstate ks;
	struct nft_learn_addr *drop = NULL;
	struct nft_batch *b = NULL;
	struct nft_twins *tw = NULL;
	struct lent *l, **pp;
	size_t ndrop = 0, bkt;
	int ex, rc = -1;

	memset(&ks, 0, sizeof(ks));
	/* Answers judged under the old policy reach the kernel first, so
	 * this batch removes what the new one denies (their waiters are told
	 * after it, re-checked against the mirror). */
	learn_drain(n);
	ex = table_exists(n, e);
	if (ex < 0)
		goto out;
	if (ex == 1) {
		if (dump_names(n, NFT_MSG_GETCHAIN, &chains, e) < 0 ||
		    dump_names(n, NFT_MSG_GETSET, &sets, e) < 0)
			goto out;
		if (!n->applied && adopt_learned(n, &sets, e) < 0)
			goto out;
		ks.table_exists = true;
		ks.chains = chains.v;
		ks.nchains = chains.n;
		ks.sets = sets.v;
		ks.nsets = sets.n;
	} else if (n->applied) {
		/* someone deleted our table: start over, mirror is stale */
		mirror_clear(n);
	}
	/* Learned elements the new policy denies go in the same batch. */
	nft_expire_tick(n);
	drop = calloc(n->nlearned + 1, sizeof(*drop));
	tw = nft_twins_new_();
	if (drop == NULL || tw == NULL) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	for (bkt = 0; bkt < n->nbuckets; bkt++)
		for (l = n->buckets[bkt]; l != NULL; l = l->next)
			if (ex == 1 && learned_denied(l, p, tw)) {
				drop[ndrop].family = l->family;
				memcpy(drop[ndrop].addr, l->addr, 16);
				ndrop++;
			}
	ks.drop = drop;
	ks.ndrop = ndrop;
	if (nft_build_ruleset(p, &n->o, &ks, &b, e) < 0)
		goto out;
	if (nft_send(n, b, e) < 0)
		goto out;
	/* In force: now the mirror follows. */
	for (bkt = 0; bkt < n->nbuckets; bkt++)
		for (pp = &n->buckets[bkt]; *pp != NULL;)
			if (ex == 1 && learned_denied(*pp, p, tw))
				mirror_remove(n, pp);
			else
				pp = &(*pp)->next;
	n->ttl_min = p->dns.ttl_min != 0 ? p->dns.ttl_min : n->o.ttl_min;
	n->ttl_max = p->dns.ttl_max != 0 ? p->dns.ttl_max : n->o.ttl_max;
	if (n->ttl_max < n->ttl_min)
		n->ttl_max = n->ttl_min;
	n->applied = true;
	stats_gauge(n);
	rc = 0;
out:
	nft_twins_free_(tw);
	nft_batch_free(b);
	free(drop);
	names_clear(&chains);
	names_clear(&sets);
	return rc;
}

/* ---- learned ---- */

static uint32_t
clamp(const struct nft *n, uint32_t ttl)
{
	if (ttl < n->ttl_min)
		ttl = n->ttl_min;
	if (ttl > n->ttl_max)
		ttl = n->ttl_max;
	return ttl == 0 ? 1 : ttl;
}

/*
 * The batch for unique addresses u[0..nu) (one element once: a repeated
 * delete would fail): new elements are added, known ones refreshed
 * (add;delete;add restarts their timeout on every kernel), and when a
 * set would pass n->cap its least recently learned elements that are not
 * part of this batch are evicted (removed from the mirror now, deleted in
 * the same transaction). Shorter TTLs never cut a lease short: u[i].ttl
 * may be raised to what is left of it.
 */
static int
learn_build(struct nft *n, struct nft_learn_addr *u, size_t nu,
    struct nft_batch **out, struct err *e)
{
	struct nft_learn_addr *fresh = NULL, *old = NULL, *ev = NULL;
	size_t i, nf = 0, no = 0, nev = 0, nfam[2] = {0, 0}, over[2], f;
	uint64_t now = now_ms(n), left;
	struct nft_batch *b = NULL;
	struct lent *l, *next;
	int rc = -1;

	*out = NULL;
	n->pin_gen++;
	fresh = calloc(nu + 1, sizeof(*fresh));
	old = calloc(nu + 1, sizeof(*old));
	if (fresh == NULL || old == NULL)
		goto out_nomem;
	for (i = 0; i < nu; i++) {
		l = *mirror_find(n, u[i].family, u[i].addr);
		if (l == NULL) {
			fresh[nf++] = u[i];
			nfam[u[i].family == 4 ? 0 : 1]++;
			continue;
		}
		l->pin = n->pin_gen;
		if (l->expires_ms > now) {
			left = (l->expires_ms - now + 999) / 1000;
			if (left > u[i].ttl)
				u[i].ttl = left > UINT32_MAX ? UINT32_MAX
				                             : (uint32_t)left;
		}
		old[no++] = u[i];
	}
	for (f = 0; f < 2; f++) {
		over[f] = n->lru[f].n + nfam[f] > n->cap
		    ? n->lru[f].n + nfam[f] - n->cap
		    : 0;
		nev += over[f];
	}
	if (nev != 0) {
		ev = calloc(nev, sizeof(*ev));
		if (ev == NULL)
			goto out_nomem;
		nev = 0;
		for (f = 0; f < 2; f++)
			for (l = n->lru[f].oldest; l != NULL && over[f] > 0;
			     l = next) {
				next = l->newer;
				if (l->pin == n->pin_gen)
					continue;
				ev[nev].family = l->family;
				memcpy(ev[nev].addr, l->addr, 16);
				nev++;
				over[f]--;
				mirror_remove(
				    n, mirror_find(n, l->family, l->addr));
			}
		if (n->st != NULL)
			n->st->nft_learned_evicted += nev;
	}
	b = nft_batch_new_();
	if (b == NULL)
		goto out_nomem;
	if (nft_batch_begin_(b, e) < 0 ||
	    (nev != 0 && nft_batch_del_learn_(b, ev, nev, e) < 0) ||
	    (nf != 0 &&
	        nft_batch_add_learn_(
	            b, fresh, nf, n->ttl_min, n->ttl_max, false, e) < 0) ||
	    (no != 0 &&
	        nft_batch_add_learn_(
	            b, old, no, n->ttl_min, n->ttl_max, true, e) < 0) ||
	    nft_batch_finish_(b, e) < 0)
		goto out;
	*out = b;
	b = NULL;
	rc = 0;
	goto out;
out_nomem:
	err_set(e, "nft: out of memory");
out:
	nft_batch_free(b);
	free(fresh);
	free(old);
	free(ev);
	stats_gauge(n);
	return rc;
}

static int
check_addrs(const struct nft_learn_addr *a, size_t n_addrs, struct err *e)
{
	size_t i;

	if (n_addrs > NFT_LEARN_BATCH_MAX) {
		err_set(e, "nft: %zu addresses in one answer (max %d)", n_addrs,
		    NFT_LEARN_BATCH_MAX);
		return -1;
	}
	for (i = 0; i < n_addrs; i++)
		if (a[i].family != 4 && a[i].family != 6) {
			err_set(e, "nft: learned address %zu: bad family", i);
			return -1;
		}
	return 0;
}

int
nft_learn(struct nft *n, const struct nft_learn_addr *a, size_t n_addrs,
    struct err *e)
{
	struct nft_learn_addr u[NFT_LEARN_BATCH_MAX];
	struct nft_batch *b = NULL;
	size_t i, j, nu = 0;
	uint64_t now;
	int rc = -1;

	if (!n->applied) {
		err_set(e, "nft: learn before the ruleset is applied");
		return -1;
	}
	if (check_addrs(a, n_addrs, e) < 0)
		return -1;
	for (i = 0; i < n_addrs; i++) {
		for (j = 0; j < nu; j++)
			if (u[j].family == a[i].family &&
			    memcmp(u[j].addr, a[i].addr,
			        a[i].family == 4 ? 4 : 16) == 0)
				break;
		if (j < nu) {
			if (a[i].ttl > u[j].ttl)
				u[j].ttl = a[i].ttl;
			continue;
		}
		u[nu++] = a[i];
	}
	if (nu == 0)
		return 0;
	if (learn_build(n, u, nu, &b, e) < 0)
		goto out;
	if (nft_send(n, b, e) < 0)
		goto out;
	now = now_ms(n);
	for (i = 0; i < n_addrs; i++)
		(void)mirror_put(n, a[i].family, a[i].addr,
		    now + (uint64_t)clamp(n, a[i].ttl) * 1000, a[i].name);
	if (n->st != NULL)
		n->st->nft_learned += nu;
	stats_gauge(n);
	rc = 0;
out:
	nft_batch_free(b);
	return rc;
}

/* ---- asynchronous learning ---- */

static void
waiter_free(struct nft_waiter *w)
{
	free(w->name);
	free(w->addr);
	free(w);
}

static void
txn_free(struct nft_txn *t)
{
	struct nft_waiter *w;

	while ((w = t->w) != NULL) {
		t->w = w->next;
		waiter_free(w);
	}
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

/* Adds a to the unique set of t (the longest TTL wins). */
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
			h = addr_hash32(t->u[i].family, t->u[i].addr) &
			    (ns - 1);
			while (nsl[h] != 0)
				h = (h + 1) & (ns - 1);
			nsl[h] = (uint32_t)i + 1;
		}
		free(t->slot);
		t->slot = nsl;
		t->nslot = ns;
	}
	h = addr_hash32(a->family, a->addr) & (t->nslot - 1);
	for (; t->slot[h] != 0; h = (h + 1) & (t->nslot - 1)) {
		struct nft_learn_addr *u = &t->u[t->slot[h] - 1];

		if (u->family == a->family &&
		    memcmp(u->addr, a->addr, w) == 0) {
			if (a->ttl > u->ttl)
				u->ttl = a->ttl;
			return 0;
		}
	}
	if (t->nu == t->capu) {
		size_t nc = t->capu == 0 ? 64 : 2 * t->capu;
		struct nft_learn_addr *nv = realloc(t->u, nc * sizeof(*nv));

		if (nv == NULL)
			return -1;
		t->u = nv;
		t->capu = nc;
	}
	t->u[t->nu] = *a;
	t->slot[h] = (uint32_t)++t->nu;
	return 0;
}

/* Moves the waiters of t to the delivery list with rc (and why). */
static void
txn_settle(struct nft *n, struct nft_txn *t, int rc, const char *why)
{
	struct nft_waiter *w;
	uint64_t now = now_ms(n);
	size_t i;

	if (rc == 0) {
		for (w = t->w; w != NULL; w = w->next)
			for (i = 0; i < w->naddr; i++)
				(void)mirror_put(n, w->addr[i].family,
				    w->addr[i].addr,
				    now +
				        (uint64_t)clamp(n, w->addr[i].ttl) *
				            1000,
				    w->name);
		if (n->st != NULL)
			n->st->nft_learned += t->nu;
		stats_gauge(n);
	}
	for (w = t->w; w != NULL; w = w->next) {
		w->rc = rc;
		(void)snprintf(w->why, sizeof(w->why), "%s", why ? why : "");
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
		if (n->st != NULL)
			n->st->nft_failures++;
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
				ext_ack(nlh, kmsg, sizeof(kmsg), &offs);
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
				if (t->failed)
					n->st->nft_failures++;
				else
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
	int fd = mnl_socket_get_fd(n->lnl), v;

	if (sndlen + 4096 > n->lsndbuf) {
		n->lsndbuf = sndlen + 4096;
		v = n->lsndbuf > (size_t)INT32_MAX / 2 ? INT32_MAX / 2
		                                       : (int)n->lsndbuf;
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) <
		    0)
			(void)setsockopt(
			    fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
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
	if (learn_build(n, t->u, t->nu, &b, &e) < 0) {
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
		if (n->st != NULL)
			n->st->nft_failures++;
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
				if (!nft_is_learned_(n, w->addr[i].family,
				        w->addr[i].addr)) {
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
static void
learn_drain(struct nft *n)
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

static void
learn_detach(struct nft *n)
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
	int one = 1, v = (int)NFT_RCVBUF_MIN * 4, fd;

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
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
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
	learn_detach(n);
	return -1;
}

uint64_t
nft_learn_submit(struct nft *n, const struct nft_learn_addr *a, size_t n_addrs,
    const char *name, nft_learn_done_fn done, void *arg, struct err *e)
{
	struct nft_waiter *w;
	size_t i;
	if (n->lnl == NULL) {
		err_set(e, "nft: learn socket not attached");
		return 0;
	}
	if (!n->applied) {
		err_set(e, "nft: learn before the ruleset is applied");
		return 0;
	}
	if (check_addrs(a, n_addrs, e) < 0)
		return 0;
	if (n->open != NULL && n->open->nu + n_addrs > NFT_LEARN_TXN_MAX)
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
	for (i = 0; i < n_addrs; i++) {
		w->addr[i] = a[i];
		w->addr[i].name = w->name[0] != '\0' ? w->name : NULL;
		if (txn_add(n->open, &w->addr[i]) < 0) {
			/* addresses added so far stay: harmless extra work */
			waiter_free(w);
			goto out_nomem;
		}
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

size_t
nft_expire_tick(struct nft *n)
{
	uint64_t now = now_ms(n);
	struct lent **pp;
	size_t b, k = 0;

	for (b = 0; b < n->nbuckets; b++)
		for (pp = &n->buckets[b]; *pp != NULL;)
			if ((*pp)->expires_ms <= now) {
				mirror_remove(n, pp);
				k++;
			} else
				pp = &(*pp)->next;
	stats_gauge(n);
	return k;
}

size_t
nft_learned_lookup(const struct nft *n, int family, const uint8_t *addr,
    const char **names, size_t max)
{
	const struct lent *l;
	size_t i;

	if (family != 4 && family != 6)
		return 0;
	for (l = n->buckets[addr_hash(n, family, addr)]; l != NULL; l = l->next)
		if (l->family == family &&
		    memcmp(l->addr, addr, family == 4 ? 4 : 16) == 0)
			break;
	if (l == NULL)
		return 0;
	for (i = 0; i < l->nnames && i < max; i++)
		names[i] = l->names[i];
	return i;
}

size_t
nft_learned_count(const struct nft *n)
{
	return n->nlearned;
}

size_t
nft_learned_count_family(const struct nft *n, int family)
{
	return n->lru[family == 4 ? 0 : 1].n;
}

size_t
nft_learned_cap(const struct nft *n)
{
	return n->cap;
}

/* Used by nft_live.c: refresh entries to ttl seconds from now. */
int
nft_refresh_(
    struct nft *n, const struct nft_learn_addr *a, size_t na, struct err *e)
{
	size_t i, k;
	int rc;

	for (i = 0; i < na; i += k) {
		k = na - i > NFT_LEARN_BATCH_MAX ? NFT_LEARN_BATCH_MAX : na - i;
		rc = nft_learn(n, a + i, k, e);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Entries expiring before now + window_ms (for nft_live.c). */
bool
nft_expiring_(struct nft *n, int family, const uint8_t *addr,
    uint64_t window_ms, const char **name)
{
	struct lent *l = *mirror_find(n, family, addr);

	*name = NULL;
	if (l == NULL || l->expires_ms > now_ms(n) + window_ms)
		return false;
	/* the newest name, so the refreshed element keeps its comment */
	if (l->nnames != 0)
		*name = l->names[l->nnames - 1];
	return true;
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

bool
nft_is_learned_(struct nft *n, int family, const uint8_t *addr)
{
	struct lent *l = *mirror_find(n, family, addr);

	return l != NULL && l->expires_ms > now_ms(n);
}

uint16_t
nft_dns_port_(const struct nft *n)
{
	return n->o.dns_port;
}

uint32_t
nft_ttl_clamp_(const struct nft *n, uint32_t ttl)
{
	return clamp(n, ttl);
}

struct mnl_socket *
nft_sock_(struct nft *n, uint32_t *seq, uint32_t *portid)
{
	*seq = n->seq++;
	*portid = n->portid;
	return n->nl;
}

/* ---- counters, teardown ---- */

static int
obj_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nft_counter *out = arg;
	struct nftnl_obj *o = nftnl_obj_alloc();
	const char *name;
	size_t i;

	if (o == NULL)
		return MNL_CB_ERROR;
	if (nftnl_obj_nlmsg_parse(nlh, o) == 0 &&
	    strcmp(nftnl_obj_get_str(o, NFTNL_OBJ_TABLE), NFT_TABLE) == 0 &&
	    nftnl_obj_get_u32(o, NFTNL_OBJ_TYPE) == NFT_OBJECT_COUNTER) {
		name = nftnl_obj_get_str(o, NFTNL_OBJ_NAME);
		for (i = 0; i < NFT_NCOUNTERS; i++)
			if (strcmp(name, out[i].name) == 0) {
				out[i].packets =
				    nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
				out[i].bytes =
				    nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES);
			}
	}
	nftnl_obj_free(o);
	return MNL_CB_OK;
}

int
nft_read_counters(
    struct nft *n, struct nft_counter out[NFT_NCOUNTERS], struct err *e)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct nftnl_obj *o;
	size_t i;

	for (i = 0; i < NFT_NCOUNTERS; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		snprintf(out[i].name, sizeof(out[i].name), "%s",
		    nft_counter_name(i));
	}
	o = nftnl_obj_alloc();
	if (o == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, NFT_TABLE);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nlh = nftnl_nlmsg_build_hdr(
	    buf, NFT_MSG_GETOBJ, NFPROTO_INET, NLM_F_DUMP, 0);
	nftnl_obj_nlmsg_build_payload(nlh, o);
	nftnl_obj_free(o);
	return nft_request(n, nlh, obj_cb, out, e, "read counters") < 0 ? -1
	                                                                : 0;
}

int
nft_teardown(struct nft *n, struct err *e)
{
	struct nft_batch *b;
	int ex, rc;

	ex = table_exists(n, e);
	if (ex <= 0)
		return ex;
	if (nft_build_teardown(&b, e) < 0)
		return -1;
	rc = nft_send(n, b, e);
	nft_batch_free(b);
	if (rc == 0) {
		mirror_clear(n);
		n->applied = false;
		stats_gauge(n);
	}
	return rc;
}
