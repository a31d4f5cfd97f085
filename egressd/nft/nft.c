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
#include "egressd/nft/nft_int.h"
#include "egressd/base/sock.h"
#include "egressd/base/stats.h"
#include "util/coalesce.h"
#include "util/hash.h"
#include "util/now.h"

#define NFT_MAGIC 0x6e667421u

/*
 * The learned mirror: one entry per learned element, in a hash table that
 * grows with it, and per family in a list from the most to the least
 * recently learned (the eviction order when a set is full).
 */
struct lent {
	struct lent *next; /* hash chain */
	TAILQ_ENTRY(lent) order; /* the family's learn order */
	uint8_t family;
	uint8_t addr[16];
	uint64_t expires_ms; /* the later of plain_ms and lim_ms */
	uint64_t plain_ms; /* expiry of the plain-set element, 0 = none */
	uint64_t lim_ms; /* latest expiry of its limited-set elements */
	uint64_t pin; /* == nft.pin_gen: part of the transaction being built */
	char *names[NFT_NAMES_PER_ADDR];
	unsigned nnames;
	struct nft_limit *lim; /* limited-set elements held */
	size_t nlim, limcap;
	bool gone; /* swept after an apply */
};

struct lru {
	TAILQ_HEAD(lents, lent) q; /* newest first */
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
	struct nft_limit *lim[2]; /* [v4, v6]: the name's limited elements */
	size_t nlim[2];
	bool decided[2];
	int rc;
	char why[320];
};

/* One learn transaction: open (gathering), then sent (acks awaited). */
struct nft_txn {
	struct nft_txn *next;
	struct nft_waiter *w, **wtail;
	struct nft_learn_addr *u; /* unique (address, set) */
	struct nft_limit **own; /* per u: merged limits owned, or NULL */
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
	struct policy *pol; /* in force (ours); names are judged by it */
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

/* The injected clock, or the real one (nft_new). */
static uint64_t
now_ms(const struct nft *n)
{
	return n->o.clock(n->o.clock_arg);
}

static uint32_t
addr_hash32(int family, const uint8_t *a)
{
	uint32_t h = hash_fnv1a32(a, family == 4 ? 4 : 16);

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

	TAILQ_REMOVE(&q->q, l, order);
	q->n--;
}

static void
lru_push(struct nft *n, struct lent *l)
{
	struct lru *q = lru_of(n, l->family);

	TAILQ_INSERT_HEAD(&q->q, l, order);
	q->n++;
}

static void
lent_free(struct lent *l)
{
	unsigned i;

	for (i = 0; i < l->nnames; i++)
		free(l->names[i]);
	free(l->lim);
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

static bool
lim_eq(const struct nft_limit *a, const struct nft_limit *b)
{
	return a->plo == b->plo && a->phi == b->phi && a->lo == b->lo &&
	    a->hi == b->hi;
}

static bool
lim_has(const struct nft_limit *v, size_t n, const struct nft_limit *x)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (lim_eq(&v[i], x))
			return true;
	return false;
}

/* The sort key: the protocol range, then the port range. */
static uint64_t
lim_key(const struct nft_limit *l)
{
	return (uint64_t)l->plo << 48 | (uint64_t)l->phi << 32 |
	    (uint64_t)l->lo << 16 | l->hi;
}

static int
lim_cmp(const void *a, const void *b)
{
	return coalesce_cmp(lim_key(a), lim_key(b));
}

/* Port ranges of the same protocol range that overlap or touch merge. */
static bool
lim_absorb(void *kept, const void *next, void *arg)
{
	struct nft_limit *k = kept;
	const struct nft_limit *x = next;

	(void)arg;
	return lim_key(x) >> 32 == lim_key(k) >> 32 &&
	    coalesce_u16(&k->hi, x->lo, x->hi);
}

/*
 * Sorts and merges v in place: the kernel refuses an interval element
 * whose start or end lies inside another (EEXIST), so the limited
 * elements of one address are kept disjoint. Protocol ranges come from
 * one fixed partition (tcp, udp, icmp, the ranges between), so only port
 * ranges of the same protocol range need merging.
 */
static size_t
lim_norm(struct nft_limit *v, size_t n)
{
	return coalesce(v, n, sizeof(*v), lim_cmp, lim_absorb, NULL);
}

/* Every limit of a lies inside an element of v (v normalized). */
static bool
lim_covered(
    const struct nft_limit *v, size_t n, const struct nft_limit *a, size_t na)
{
	size_t i, j;

	for (i = 0; i < na; i++) {
		for (j = 0; j < n; j++)
			if (v[j].plo <= a[i].plo && v[j].phi >= a[i].phi &&
			    v[j].lo <= a[i].lo && v[j].hi >= a[i].hi)
				break;
		if (j == n)
			return false;
	}
	return true;
}

/* Adds the limits not held yet (at most NFT_ADDR_LIMITS_MAX), merged. */
static int
lent_add_lim(struct lent *l, const struct nft_limit *lim, size_t nlim)
{
	struct nft_limit *nv;
	size_t i, cap;

	for (i = 0; i < nlim; i++) {
		if (lim_covered(l->lim, l->nlim, &lim[i], 1) ||
		    l->nlim == NFT_ADDR_LIMITS_MAX)
			continue;
		if (l->nlim == l->limcap) {
			/* most names have a few: grow in small steps */
			cap = l->limcap ? 2 * l->limcap : 4;
			if (cap > NFT_ADDR_LIMITS_MAX)
				cap = NFT_ADDR_LIMITS_MAX;
			nv = realloc(l->lim, cap * sizeof(*nv));
			if (nv == NULL)
				return -1;
			l->lim = nv;
			l->limcap = cap;
		}
		l->lim[l->nlim++] = lim[i];
		l->nlim = lim_norm(l->lim, l->nlim);
	}
	return 0;
}

/*
 * Creates or refreshes an entry (now the most recently learned); name
 * may be NULL. nlim == 0: the plain element, else limited elements (all
 * expiring at expires).
 */
static int
mirror_put(struct nft *n, int family, const uint8_t *a, uint64_t expires,
    const char *name, const struct nft_limit *lim, size_t nlim)
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
	if (nlim == 0 && expires > l->plain_ms)
		l->plain_ms = expires;
	if (nlim != 0) {
		if (l->lim_ms <= now_ms(n))
			l->nlim = 0; /* those expired in the kernel */
		if (expires > l->lim_ms)
			l->lim_ms = expires;
		if (lent_add_lim(l, lim, nlim) < 0)
			return -1;
	}
	if (name == NULL)
		return 0;
	for (i = 0; i < l->nnames; i++)
		if (strcmp(l->names[i], name) == 0) {
			/* the newest name is what the kernel's comments now
			 * carry (lplan_build keeps that true) */
			char *nm = l->names[i];

			memmove(&l->names[i], &l->names[i + 1],
			    (l->nnames - i - 1) * sizeof(l->names[0]));
			l->names[l->nnames - 1] = nm;
			return 0;
		}
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
	n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (n->nl == NULL) {
		int en = errno;
		const char *hint = nft_err_hint(NFT_ERR_SOCKET, NULL, en);

		err_set(e, "nft: netlink socket: %s%s%s", strerror(en),
		    hint[0] ? "; " : "", hint);
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
	policy_unref(n->pol);
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

	/* Grow only: small learn batches then cost no syscall here. */
	want = sndlen + 4096;
	if (want > n->sndbuf) {
		sock_set_buf(fd, SO_SNDBUF, want);
		n->sndbuf = want;
	}
	want = nmsgs * NFT_RCVBUF_PER_MSG;
	if (want < NFT_RCVBUF_MIN)
		want = NFT_RCVBUF_MIN;
	if (want > n->rcvbuf) {
		sock_set_buf(fd, SO_RCVBUF, want);
		n->rcvbuf = want;
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
	struct nft_acks acks;
	uint32_t base = n->seq;
	size_t nmsgs = b->nmsgs;
	int rc = -1;
	ssize_t r;

	n->seq += (uint32_t)nmsgs + 2;
	nft_batch_set_seq_(b, base);
	sock_bufs(n, b->len, nmsgs);
	nft_acks_init(&acks, base, nmsgs);
	r = mnl_socket_sendto(n->nl, b->buf, b->len);
	if (r < 0 || (size_t)r != b->len) {
		err_set(e, "nft: netlink send (%zu bytes): %s", b->len,
		    r < 0 ? strerror(errno) : "short write");
		goto out;
	}
	do {
		r = mnl_socket_recvfrom(n->nl, n->rbuf, NFT_RECV_BUF);
		if (r < 0) {
			err_set(e, "nft: waiting for acks (%zu of %zu): %s",
			    acks.acked, nmsgs,
			    errno == EAGAIN ? "timeout" : strerror(errno));
			goto out;
		}
	} while (!nft_acks_feed(&acks, n->rbuf, (size_t)r));
	rc = nft_acks_result(&acks, nft_batch_msg_label(b, acks.bad), e);
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
			int en = errno;
			const char *hint = nft_err_hint(NFT_ERR_GET, NULL, en);

			err_set(e, "nft: %s: %s%s%s", what, strerror(en),
			    hint[0] ? "; " : "", hint);
			rc = -en;
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

static int
set_size_cb(const struct nlmsghdr *nlh, void *arg)
{
	struct nftnl_set *s = nftnl_set_alloc();
	uint32_t *size = arg;

	if (s == NULL)
		return MNL_CB_ERROR;
	if (nftnl_set_nlmsg_parse(nlh, s) == 0 &&
	    nftnl_set_is_set(s, NFTNL_SET_DESC_SIZE))
		*size = nftnl_set_get_u32(s, NFTNL_SET_DESC_SIZE);
	nftnl_set_free(s);
	return MNL_CB_OK;
}

/*
 * The size the kernel gives a learned set (0: unknown). A kernel that
 * cannot resize an adopted set keeps its old size: the cap follows it,
 * so eviction still keeps every add within the kernel's limit.
 */
static void
learned_size_check(struct nft *n)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nftnl_set *s;
	struct nlmsghdr *nlh;
	struct err e;
	uint32_t size = 0;
	int f;

	for (f = 4; f <= 6; f += 2) {
		s = nftnl_set_alloc();
		if (s == NULL)
			return;
		nftnl_set_set_str(s, NFTNL_SET_TABLE, NFT_TABLE);
		nftnl_set_set_str(s, NFTNL_SET_NAME,
		    f == 4 ? NFT_SET_LEARNED4 : NFT_SET_LEARNED6);
		nlh = nftnl_nlmsg_build_hdr(
		    buf, NFT_MSG_GETSET, NFPROTO_INET, NLM_F_ACK, 0);
		nftnl_set_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
		size = 0;
		if (nft_request(n, nlh, set_size_cb, &size, &e, "get set") <
		        0 ||
		    size == 0)
			continue;
		if (size / NFT_LEARNED_SLACK < n->cap)
			n->cap = size / NFT_LEARNED_SLACK > 0
			    ? size / NFT_LEARNED_SLACK
			    : 1;
	}
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
	bool limited; /* a limited set: addr . l4proto . port intervals */
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
		unsigned w = d->family == 4 ? 4u : 16u;
		struct nft_limit lim = {0, 0, 0, 0};
		const uint8_t *kend;
		uint32_t elen;

		key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &klen);
		if (key == NULL || klen != (d->limited ? w + 8 : w))
			continue;
		left = nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_EXPIRATION)
		    ? nftnl_set_elem_get_u64(el, NFTNL_SET_ELEM_EXPIRATION)
		    : 0;
		elem_name(el, name, sizeof(name));
		if (d->limited) {
			const uint8_t *k = key;

			kend = nftnl_set_elem_get(
			    el, NFTNL_SET_ELEM_KEY_END, &elen);
			if (kend == NULL || elen != klen)
				continue;
			lim.plo = k[w];
			lim.phi = kend[w];
			lim.lo = (uint16_t)(k[w + 4] << 8 | k[w + 5]);
			lim.hi = (uint16_t)(kend[w + 4] << 8 | kend[w + 5]);
		}
		if (mirror_put(d->n, d->family, key, d->now + left,
		        name[0] != '\0' ? name : NULL, &lim,
		        d->limited ? 1 : 0) < 0)
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

	for (f = 0; f < 4; f++) {
		static const char *const set_names[4] = {NFT_SET_LEARNED4,
		    NFT_SET_LEARNED6, NFT_SET_LIMITED4, NFT_SET_LIMITED6};
		const char *name = set_names[f];
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
		d.family = f % 2 == 0 ? 4 : 6;
		d.limited = f >= 2;
		if (nft_request(n, nlh, elem_cb, &d, e, "list learned") < 0)
			return -1;
	}
	stats_gauge(n);
	return 0;
}

/* ---- policy ---- */

/* A growable pool of limits that learn records point into. */
struct limpool {
	struct nft_limit *v;
	size_t n, cap;
};

static long
limpool_add(struct limpool *lp, const struct nft_limit *lim, size_t n)
{
	size_t at = lp->n;

	if (lp->n + n > lp->cap) {
		size_t cap = lp->cap ? lp->cap : 256;
		struct nft_limit *nv;

		while (cap < lp->n + n)
			cap *= 2;
		nv = realloc(lp->v, cap * sizeof(*nv));
		if (nv == NULL)
			return -1;
		lp->v = nv;
		lp->cap = cap;
	}
	memcpy(lp->v + lp->n, lim, n * sizeof(*lim));
	lp->n += n;
	return (long)at;
}

/* The address itself is denied: internal, or an IP/CIDR deny rule of
 * every port and protocol covers it (restricted denies stay enforced by
 * the ordered rules above the learned sets). */
static bool
addr_denied(const struct lent *l, const struct policy *p, struct nft_twins *tw)
{
	const struct policy_rule *r = NULL;

	if (nft_addr_internal_(l->family, l->addr))
		return true;
	return p->index != NULL &&
	    nft_twins_match_(tw, p, l->family, l->addr, 0, 0, &r) ==
	    POLICY_DENY &&
	    r != NULL && r->nports == 0 &&
	    (r->protocols & POLICY_PROTO_ALL) == POLICY_PROTO_ALL;
}

/*
 * Which set(s) a name's addresses go to under p: *plain (no limit), or
 * the limited elements (into lim, NFT_LIMITS_MAX), or neither (denied).
 */
static size_t
name_limits(const struct policy *p, const char *name, int family, bool *plain,
    bool *denied, struct nft_limit *lim)
{
	struct policy_reach *rc;
	bool over;
	size_t k;

	*plain = true;
	*denied = false;
	if (p == NULL || p->index == NULL || name == NULL)
		return 0;
	rc = malloc(sizeof(*rc));
	if (rc == NULL) {
		*plain = false;
		*denied = true; /* fail closed */
		return 0;
	}
	(void)policy_match_domain_reach(p, name, NULL, rc);
	*plain = rc->all;
	*denied = rc->none;
	k = nft_reach_limits(
	    rc, p->default_action, family, lim, NFT_LIMITS_MAX, &over);
	free(rc);
	return k;
}

/*
 * What l should hold under p: the plain element, limited elements (into
 * lim, NFT_ADDR_LIMITS_MAX), or nothing; *alive (may be NULL) gets one bit
 * per name p still lets reach something. An entry without names (an
 * element without comment) keeps what it holds unless the address
 * itself is denied.
 */
static void
lent_want(const struct lent *l, const struct policy *p, struct nft_twins *tw,
    uint64_t now, bool *plain, struct nft_limit *lim, size_t *nlim,
    struct nft_limit *tmp, unsigned *alive)
{
	unsigned i, dummy;
	size_t k, j;
	bool pl, den;

	if (alive == NULL)
		alive = &dummy;
	*alive = 0;
	*plain = false;
	*nlim = 0;
	if (addr_denied(l, p, tw))
		return;
	if (l->nnames == 0) {
		*plain = l->plain_ms > now;
		if (l->lim_ms > now) {
			memcpy(lim, l->lim, l->nlim * sizeof(*lim));
			*nlim = l->nlim;
		}
		return;
	}
	for (i = 0; i < l->nnames; i++) {
		k = name_limits(p, l->names[i], l->family, &pl, &den, tmp);
		if (!den)
			*alive |= 1u << i;
		*plain |= pl;
		for (j = 0; j < k; j++)
			if (!lim_has(lim, *nlim, &tmp[j]) &&
			    *nlim < NFT_ADDR_LIMITS_MAX)
				lim[(*nlim)++] = tmp[j];
	}
	*nlim = lim_norm(lim, *nlim);
}

static uint32_t
left_s(uint64_t until, uint64_t now)
{
	uint64_t s = until > now ? (until - now + 999) / 1000 : 1;

	return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

/* One change to the learned elements of an entry, kept for the mirror. */
struct lchange {
	struct lent *l;
	bool plain;
	long lim_at; /* in the pool */
	size_t nlim;
	unsigned alive; /* the names kept (bit i: names[i]) */
	bool names_only; /* the kernel's elements stay as they are */
};

struct lplan {
	struct nft_learn_addr *drop, *add;
	size_t ndrop, nadd;
	struct lchange *ch;
	size_t nch;
	struct limpool pool;
	long *drop_at, *add_at; /* pool offsets until the pool stops moving */
};

static void
lplan_clear(struct lplan *pl)
{
	free(pl->drop);
	free(pl->add);
	free(pl->ch);
	free(pl->pool.v);
	free(pl->drop_at);
	free(pl->add_at);
	memset(pl, 0, sizeof(*pl));
}

static void
lrec(struct nft_learn_addr *r, const struct lent *l, uint32_t ttl,
    const char *name)
{
	memset(r, 0, sizeof(*r));
	r->family = l->family;
	memcpy(r->addr, l->addr, 16);
	r->ttl = ttl;
	r->name = name;
}

/*
 * Re-judges every learned entry under p: what leaves the kernel (drop),
 * what enters it (add, with the entry's remaining lease), and what the
 * mirror holds afterwards (ch).
 */
static int
lplan_build(struct nft *n, const struct policy *p, struct nft_twins *tw,
    struct lplan *pl)
{
	struct nft_limit *want = NULL, *tmp = NULL, *gone = NULL, *fresh;
	uint64_t now = now_ms(n);
	size_t bkt, nw, i, ng, nf;
	struct lent *l;
	bool wplain, cplain;
	int rc = -1;

	memset(pl, 0, sizeof(*pl));
	pl->drop = calloc(2 * n->nlearned + 1, sizeof(*pl->drop));
	pl->add = calloc(2 * n->nlearned + 1, sizeof(*pl->add));
	pl->drop_at = calloc(2 * n->nlearned + 1, sizeof(*pl->drop_at));
	pl->add_at = calloc(2 * n->nlearned + 1, sizeof(*pl->add_at));
	pl->ch = calloc(n->nlearned + 1, sizeof(*pl->ch));
	want = calloc(NFT_ADDR_LIMITS_MAX, sizeof(*want));
	tmp = calloc(NFT_LIMITS_MAX, sizeof(*tmp));
	gone = calloc(2 * NFT_ADDR_LIMITS_MAX, sizeof(*gone));
	if (pl->drop == NULL || pl->add == NULL || pl->ch == NULL ||
	    pl->drop_at == NULL || pl->add_at == NULL || want == NULL ||
	    tmp == NULL || gone == NULL)
		goto out;
	fresh = gone + NFT_ADDR_LIMITS_MAX;
	for (bkt = 0; bkt < n->nbuckets; bkt++)
		for (l = n->buckets[bkt]; l != NULL; l = l->next) {
			const char *nm = NULL;
			uint32_t ttl = left_s(l->expires_ms, now);
			size_t ncur = l->lim_ms > now ? l->nlim : 0;
			unsigned alive, all;
			bool recomment;
			int top;

			lent_want(
			    l, p, tw, now, &wplain, want, &nw, tmp, &alive);
			all = l->nnames ? (1u << l->nnames) - 1 : 0;
			for (top = (int)l->nnames - 1;
			     top >= 0 && !(alive & (1u << top)); top--)
				;
			if (top >= 0)
				nm = l->names[top];
			/* The kernel's comments name the newest name (what a
			 * restart adopts the elements under): when p denies it
			 * but keeps the address for an older one, the elements
			 * kept are re-added under that one, else a restart
			 * would prune what p allows. */
			recomment = top >= 0 && top != (int)l->nnames - 1;
			cplain = l->plain_ms > now;
			for (i = ng = 0; i < ncur; i++)
				if (recomment || !lim_has(want, nw, &l->lim[i]))
					gone[ng++] = l->lim[i];
			for (i = nf = 0; i < nw; i++)
				if (recomment ||
				    !lim_has(l->lim, ncur, &want[i]))
					fresh[nf++] = want[i];
			if (cplain == wplain && ng == 0 && nf == 0 &&
			    !recomment) {
				if (alive == all || top < 0)
					continue;
				/* only names leave: the mirror forgets them */
				pl->ch[pl->nch].l = l;
				pl->ch[pl->nch].alive = alive;
				pl->ch[pl->nch++].names_only = true;
				continue;
			}
			if (cplain && (!wplain || recomment))
				lrec(&pl->drop[pl->ndrop++], l, 0, NULL);
			if (wplain && (!cplain || recomment))
				lrec(&pl->add[pl->nadd++], l, ttl, nm);
			if (ng != 0) {
				pl->drop_at[pl->ndrop] =
				    limpool_add(&pl->pool, gone, ng);
				if (pl->drop_at[pl->ndrop] < 0)
					goto out;
				lrec(&pl->drop[pl->ndrop], l, 0, NULL);
				pl->drop[pl->ndrop++].nlim = ng;
			}
			if (nf != 0) {
				pl->add_at[pl->nadd] =
				    limpool_add(&pl->pool, fresh, nf);
				if (pl->add_at[pl->nadd] < 0)
					goto out;
				lrec(&pl->add[pl->nadd], l, ttl, nm);
				pl->add[pl->nadd++].nlim = nf;
			}
			pl->ch[pl->nch].l = l;
			pl->ch[pl->nch].alive = top >= 0 ? alive : all;
			pl->ch[pl->nch].plain = wplain;
			pl->ch[pl->nch].nlim = nw;
			pl->ch[pl->nch].lim_at =
			    nw ? limpool_add(&pl->pool, want, nw) : 0;
			if (pl->ch[pl->nch].lim_at < 0)
				goto out;
			pl->nch++;
		}
	/* the pool no longer moves: point the records into it */
	for (i = 0; i < pl->ndrop; i++)
		if (pl->drop[i].nlim != 0)
			pl->drop[i].lim = pl->pool.v + pl->drop_at[i];
	for (i = 0; i < pl->nadd; i++)
		if (pl->add[i].nlim != 0)
			pl->add[i].lim = pl->pool.v + pl->add_at[i];
	rc = 0;
out:
	free(want);
	free(tmp);
	free(gone);
	return rc;
}

/* The batch is in force: the mirror follows the plan. */
static void
lplan_commit(struct nft *n, const struct lplan *pl)
{
	uint64_t now = now_ms(n);
	struct lent **pp;
	size_t i, b;

	for (i = 0; i < pl->nch; i++) {
		struct lent *l = pl->ch[i].l;
		unsigned j, k;

		for (j = k = 0; j < l->nnames; j++)
			if (pl->ch[i].alive & (1u << j))
				l->names[k++] = l->names[j];
			else
				free(l->names[j]);
		l->nnames = k;
		if (pl->ch[i].names_only)
			continue;
		if (!pl->ch[i].plain)
			l->plain_ms = 0;
		else if (l->plain_ms <= now)
			l->plain_ms = l->expires_ms;
		if (pl->ch[i].nlim == 0) {
			l->lim_ms = 0;
			l->nlim = l->limcap = 0;
			free(l->lim);
			l->lim = NULL;
		} else {
			l->nlim = 0;
			if (lent_add_lim(l, pl->pool.v + pl->ch[i].lim_at,
			        pl->ch[i].nlim) < 0)
				l->nlim = 0;
			l->lim_ms = l->expires_ms;
		}
		l->gone = !pl->ch[i].plain && pl->ch[i].nlim == 0;
	}
	for (b = 0; b < n->nbuckets; b++)
		for (pp = &n->buckets[b]; *pp != NULL;)
			if ((*pp)->gone)
				mirror_remove(n, pp);
			else
				pp = &(*pp)->next;
}

int
nft_apply_policy(struct nft *n, struct policy *p, struct err *e)
{
	struct names chains = {0}, sets = {0};
	struct nft_kstate ks;
	struct nft_batch *b = NULL;
	struct lplan plan;
	struct nft_twins *tw = NULL;
	int ex, rc = -1;

	memset(&ks, 0, sizeof(ks));
	memset(&plan, 0, sizeof(plan));
	/* Answers judged under the old policy reach the kernel first, so
	 * this batch re-judges them too (their waiters are told after it,
	 * re-checked against the mirror). */
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
	/* Learned elements the new policy changes go in the same batch. */
	nft_expire_tick(n);
	tw = nft_twins_new_();
	if (tw == NULL || (ex == 1 && lplan_build(n, p, tw, &plan) < 0)) {
		err_set(e, "nft: out of memory");
		goto out;
	}
	ks.drop = plan.drop;
	ks.ndrop = plan.ndrop;
	ks.add = plan.add;
	ks.nadd = plan.nadd;
	if (nft_build_ruleset(p, &n->o, &ks, &b, e) < 0)
		goto out;
	if (nft_send(n, b, e) < 0)
		goto out;
	/* In force: now the mirror follows. */
	lplan_commit(n, &plan);
	policy_unref(n->pol);
	n->pol = policy_ref(p);
	n->ttl_min = p->dns.ttl_min != 0 ? p->dns.ttl_min : n->o.ttl_min;
	n->ttl_max = p->dns.ttl_max != 0 ? p->dns.ttl_max : n->o.ttl_max;
	if (n->ttl_max < n->ttl_min)
		n->ttl_max = n->ttl_min;
	n->applied = true;
	n->cap = n->o.learned_max;
	learned_size_check(n);
	stats_gauge(n);
	rc = 0;
out:
	nft_twins_free_(tw);
	nft_batch_free(b);
	lplan_clear(&plan);
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
	struct nft_learn_addr *mg = NULL;
	struct limpool evlim = {0}, mpool = {0};
	long *evat = NULL, *mgat = NULL, *oldat = NULL;
	struct nft_limit *want = NULL;
	size_t i, j, nf = 0, no = 0, nev = 0, nmg = 0, nfam[2] = {0, 0},
	             over[2], f, nw;
	uint64_t now = now_ms(n), left, until;
	struct nft_batch *b = NULL;
	struct lent *l, *next;
	int rc = -1;

	*out = NULL;
	n->pin_gen++;
	fresh = calloc(nu + 1, sizeof(*fresh));
	old = calloc(nu + 1, sizeof(*old));
	mg = calloc(nu + 1, sizeof(*mg));
	mgat = calloc(nu + 1, sizeof(*mgat));
	oldat = calloc(nu + 1, sizeof(*oldat));
	want = calloc(2 * NFT_ADDR_LIMITS_MAX, sizeof(*want));
	if (fresh == NULL || old == NULL || mg == NULL || mgat == NULL ||
	    oldat == NULL || want == NULL)
		goto out_nomem;
	for (i = 0; i < nu; i++) {
		l = *mirror_find(n, u[i].family, u[i].addr);
		if (l == NULL) {
			fresh[nf++] = u[i];
			nfam[u[i].family == 4 ? 0 : 1]++;
			continue;
		}
		l->pin = n->pin_gen;
		until = u[i].nlim != 0 ? l->lim_ms : l->plain_ms;
		if (until > now) {
			left = (until - now + 999) / 1000;
			if (left > u[i].ttl)
				u[i].ttl = left > UINT32_MAX ? UINT32_MAX
				                             : (uint32_t)left;
		}
		old[no] = u[i];
		oldat[no] = -1;
		if (u[i].nlim != 0 && l->lim_ms > now && l->nlim != 0) {
			/* the address keeps disjoint limited elements: the new
			 * ones merge with those it holds, and the ones merged
			 * away leave first */
			memcpy(want, l->lim, l->nlim * sizeof(*want));
			memcpy(want + l->nlim, u[i].lim,
			    u[i].nlim * sizeof(*want));
			nw = lim_norm(want, l->nlim + u[i].nlim);
			if (nw > NFT_ADDR_LIMITS_MAX)
				nw = NFT_ADDR_LIMITS_MAX;
			if ((oldat[no] = limpool_add(&mpool, want, nw)) < 0)
				goto out_nomem;
			old[no].nlim = nw;
			for (j = 0; j < l->nlim; j++)
				if (!lim_has(want, nw, &l->lim[j]))
					break;
			if (j < l->nlim) {
				size_t ng = 0;
				struct nft_limit *g =
				    want + NFT_ADDR_LIMITS_MAX;

				for (j = 0; j < l->nlim; j++)
					if (!lim_has(want, nw, &l->lim[j]))
						g[ng++] = l->lim[j];
				mg[nmg] = u[i];
				mg[nmg].nlim = ng;
				if ((mgat[nmg++] = limpool_add(&mpool, g, ng)) <
				    0)
					goto out_nomem;
			}
		}
		no++;
	}
	/* the pool no longer moves */
	for (i = 0; i < no; i++)
		if (oldat[i] >= 0)
			old[i].lim = mpool.v + oldat[i];
	for (i = 0; i < nmg; i++)
		mg[i].lim = mpool.v + mgat[i];
	for (f = 0; f < 2; f++) {
		over[f] = n->lru[f].n + nfam[f] > n->cap
		    ? n->lru[f].n + nfam[f] - n->cap
		    : 0;
		nev += over[f];
	}
	if (nev != 0) {
		size_t nent = 0;

		/* an evicted address leaves both sets */
		ev = calloc(2 * nev, sizeof(*ev));
		evat = calloc(2 * nev, sizeof(*evat));
		if (ev == NULL || evat == NULL)
			goto out_nomem;
		nev = 0;
		for (f = 0; f < 2; f++)
			for (l = TAILQ_LAST(&n->lru[f].q, lents);
			     l != NULL && over[f] > 0; l = next) {
				next = TAILQ_PREV(l, lents, order);
				if (l->pin == n->pin_gen)
					continue;
				ev[nev].family = l->family;
				memcpy(ev[nev].addr, l->addr, 16);
				evat[nev++] = -1;
				if (l->nlim != 0) {
					ev[nev] = ev[nev - 1];
					ev[nev].nlim = l->nlim;
					evat[nev] = limpool_add(
					    &evlim, l->lim, l->nlim);
					if (evat[nev++] < 0)
						goto out_nomem;
				}
				nent++;
				over[f]--;
				mirror_remove(
				    n, mirror_find(n, l->family, l->addr));
			}
		for (i = 0; i < nev; i++)
			if (evat[i] >= 0)
				ev[i].lim = evlim.v + evat[i];
		if (n->st != NULL)
			n->st->nft_learned_evicted += nent;
	}
	b = nft_batch_new_();
	if (b == NULL)
		goto out_nomem;
	if (nft_batch_begin_(b, e) < 0 ||
	    (nev != 0 && nft_batch_del_learn_(b, ev, nev, e) < 0) ||
	    (nmg != 0 && nft_batch_del_learn_(b, mg, nmg, e) < 0) ||
	    (nf != 0 &&
	        nft_batch_add_learn_(
	            b, fresh, nf, n->ttl_min, n->ttl_max, false, e) < 0) ||
	    (no != 0 &&
	        nft_batch_add_learn_(
	            b, old, no, n->ttl_min, n->ttl_max, true, e) < 0) ||
	    nft_batch_finish_(b, e) < 0)
		goto out;
	/* The mirror holds what the kernel will: merged limited elements
	 * now (a transaction built before this one's acks must not add an
	 * overlapping element); expiries and names when the acks came. */
	for (i = 0; i < no; i++)
		if (oldat[i] >= 0) {
			l = *mirror_find(n, old[i].family, old[i].addr);
			if (l != NULL) {
				l->nlim = 0;
				(void)lent_add_lim(l, old[i].lim, old[i].nlim);
			}
		}
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
	free(evat);
	free(evlim.v);
	free(mg);
	free(mgat);
	free(oldat);
	free(want);
	free(mpool.v);
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

/* Limits of one (name, family) in a learn call, computed once. */
struct lcache {
	const char *name;
	int family;
	bool plain, denied;
	struct nft_limit *lim;
	size_t nlim;
};

#define LCACHE_MAX 8 /* distinct (name, family) per learn call */

static const struct lcache *
lcache_get(
    struct nft *n, struct lcache *c, size_t *nc, const char *name, int family)
{
	size_t i;

	for (i = 0; i < *nc; i++)
		if (c[i].family == family &&
		    (c[i].name == name ||
		        (c[i].name != NULL && name != NULL &&
		            strcmp(c[i].name, name) == 0)))
			return &c[i];
	if (*nc == LCACHE_MAX)
		return NULL;
	c[*nc].name = name;
	c[*nc].family = family;
	c[*nc].lim = calloc(NFT_LIMITS_MAX, sizeof(*c[*nc].lim));
	if (c[*nc].lim == NULL)
		return NULL;
	c[*nc].nlim = name_limits(
	    n->pol, name, family, &c[*nc].plain, &c[*nc].denied, c[*nc].lim);
	return &c[(*nc)++];
}

int
nft_learn(struct nft *n, const struct nft_learn_addr *a, size_t n_addrs,
    struct err *e)
{
	struct nft_learn_addr u[NFT_LEARN_BATCH_MAX];
	struct lcache cache[LCACHE_MAX];
	const struct lcache *lc;
	struct nft_batch *b = NULL;
	size_t i, j, nu = 0, nc = 0;
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
		/* which set: what the name may reach under the policy (a
		 * name it denies entirely is the resolver's business, as
		 * before limits existed: the plain set) */
		lc = lcache_get(n, cache, &nc, a[i].name, a[i].family);
		if (lc == NULL) {
			err_set(e, "nft: out of memory");
			goto out;
		}
		u[nu] = a[i];
		u[nu].lim = lc->plain || lc->denied ? NULL : lc->lim;
		u[nu].nlim = lc->plain || lc->denied ? 0 : lc->nlim;
		nu++;
	}
	rc = 0;
	if (nu == 0)
		goto out;
	rc = -1;
	if (learn_build(n, u, nu, &b, e) < 0)
		goto out;
	if (nft_send(n, b, e) < 0)
		goto out;
	now = now_ms(n);
	for (i = 0; i < nu; i++)
		(void)mirror_put(n, u[i].family, u[i].addr,
		    now + (uint64_t)clamp(n, u[i].ttl) * 1000, u[i].name,
		    u[i].lim, u[i].nlim);
	if (n->st != NULL)
		n->st->nft_learned += nu;
	stats_gauge(n);
	rc = 0;
out:
	nft_batch_free(b);
	for (i = 0; i < nc; i++)
		free(cache[i].lim);
	return rc;
}

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
		if (!lim_covered(u->lim, u->nlim, &a->lim[i], 1)) {
			t->own[k][u->nlim++] = a->lim[i];
			u->nlim = lim_norm(t->own[k], u->nlim);
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
				    w->name, w->addr[i].lim, w->addr[i].nlim);
		if (n->st != NULL)
			n->st->nft_learned += t->nu;
		stats_gauge(n);
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

/* The elements a learned address of an answer needs are still held:
 * the plain one, or (a name with limits) its limited ones or the plain. */
static bool
learned_open(struct nft *n, const struct nft_learn_addr *a)
{
	struct lent *l = *mirror_find(n, a->family, a->addr);
	uint64_t now = now_ms(n);
	size_t i;

	if (l == NULL)
		return false;
	if (l->plain_ms > now)
		return true;
	if (a->nlim == 0 || l->lim_ms <= now)
		return false;
	(void)i;
	return lim_covered(l->lim, l->nlim, a->lim, a->nlim);
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
			if (w->lim[f] == NULL) {
				waiter_free(w);
				goto out_nomem;
			}
			w->nlim[f] = name_limits(n->pol, w->addr[i].name,
			    a[i].family, &plain, &denied, w->lim[f]);
			if (plain || denied)
				w->nlim[f] = 0;
			w->decided[f] = true;
		}
		w->addr[i].lim = w->nlim[f] != 0 ? w->lim[f] : NULL;
		w->addr[i].nlim = w->nlim[f];
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

/*
 * Used by nft_live.c: refresh entries to ttl seconds from now, each with
 * what all its names may reach under the policy in force (plain element,
 * limited elements or both), as one learn batch per NFT_LEARN_BATCH_MAX
 * records.
 */
int
nft_refresh_(
    struct nft *n, const struct nft_learn_addr *a, size_t na, struct err *e)
{
	struct nft_learn_addr *r = NULL;
	struct nft_limit *tmp = NULL, *want = NULL;
	struct limpool pool = {0};
	long *at = NULL;
	struct nft_batch *b = NULL;
	struct nft_twins *tw = NULL;
	uint64_t now = now_ms(n);
	size_t i, k, nr = 0, nw;
	bool plain;
	int rc = -1;

	tw = nft_twins_new_();
	r = calloc(2 * na + 1, sizeof(*r));
	at = calloc(2 * na + 1, sizeof(*at));
	tmp = calloc(NFT_LIMITS_MAX, sizeof(*tmp));
	want = calloc(NFT_ADDR_LIMITS_MAX, sizeof(*want));
	if (tw == NULL || r == NULL || at == NULL || tmp == NULL ||
	    want == NULL)
		goto out_nomem;
	for (i = 0; i < na; i++) {
		struct lent *l = *mirror_find(n, a[i].family, a[i].addr);
		const char *nm;

		if (l == NULL || n->pol == NULL)
			continue;
		nm = l->nnames ? l->names[l->nnames - 1] : NULL;
		lent_want(l, n->pol, tw, now, &plain, want, &nw, tmp, NULL);
		if (plain) {
			lrec(&r[nr], l, a[i].ttl, nm);
			at[nr++] = -1;
		}
		if (nw != 0) {
			lrec(&r[nr], l, a[i].ttl, nm);
			r[nr].nlim = nw;
			if ((at[nr++] = limpool_add(&pool, want, nw)) < 0)
				goto out_nomem;
		}
	}
	for (i = 0; i < nr; i++)
		if (at[i] >= 0)
			r[i].lim = pool.v + at[i];
	for (i = 0; i < nr; i += k) {
		size_t j;

		k = nr - i > NFT_LEARN_BATCH_MAX ? NFT_LEARN_BATCH_MAX : nr - i;
		/* both records of an address in one batch */
		if (i + k < nr && k > 1 &&
		    memcmp(r[i + k - 1].addr, r[i + k].addr, 16) == 0 &&
		    r[i + k - 1].family == r[i + k].family)
			k--;
		if (nft_build_learn(r + i, k, n->ttl_min, n->ttl_max, &b, e) <
		        0 ||
		    nft_send(n, b, e) < 0)
			goto out;
		nft_batch_free(b);
		b = NULL;
		now = now_ms(n);
		for (j = i; j < i + k; j++)
			(void)mirror_put(n, r[j].family, r[j].addr,
			    now + (uint64_t)clamp(n, r[j].ttl) * 1000, NULL,
			    r[j].lim, r[j].nlim);
	}
	rc = 0;
	goto out;
out_nomem:
	err_set(e, "nft: out of memory");
out:
	nft_twins_free_(tw);
	nft_batch_free(b);
	free(r);
	free(at);
	free(tmp);
	free(want);
	free(pool.v);
	return rc;
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

int
nft_learned_verdict_(struct nft *n, int family, const uint8_t *addr,
    uint8_t l4proto, uint16_t port)
{
	struct lent *l = *mirror_find(n, family, addr);
	uint64_t now = now_ms(n);
	size_t i;

	if (l == NULL)
		return 0;
	if (l->plain_ms > now)
		return 1;
	if (l->lim_ms <= now || n->pol == NULL)
		return 0;
	for (i = 0; i < l->nlim; i++)
		if (l4proto >= l->lim[i].plo && l4proto <= l->lim[i].phi &&
		    port >= l->lim[i].lo && port <= l->lim[i].hi)
			return n->pol->default_action == POLICY_DENY ? 1 : -1;
	return 0;
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
