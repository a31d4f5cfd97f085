/*
 * nft_sock: the netlink socket. Batches sent whole and every ack collected
 * (matched by sequence number to the message it answers); kernel state read
 * back with dumps; learned elements adopted from the kernel.
 */

#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
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
#include "egressd/nft/nft_sock.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_mirror.h"
#include "egressd/nft/nft_bounds.h"

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

struct mnl_socket *
nft_sock_open_(struct err *e)
{
	struct mnl_socket *nl =
	    mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	struct timeval tv = {.tv_sec = NFT_ACK_TIMEOUT_MS / 1000,
	    .tv_usec = (NFT_ACK_TIMEOUT_MS % 1000) * 1000};
	int one = 1;

	if (nl == NULL) {
		int en = errno;
		const char *hint = nft_err_hint(NFT_ERR_SOCKET, NULL, en);

		err_set(e, "nft: netlink socket: %s%s%s", strerror(en),
		    hint[0] ? "; " : "", hint);
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err_set(e, "nft: netlink bind: %s", strerror(errno));
		goto fail;
	}
	/* Kernel's own words on errors; acks without the echoed message. */
	mnl_socket_setsockopt(nl, NETLINK_EXT_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(nl, NETLINK_CAP_ACK, &one, sizeof(one));
	if (setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv,
	        sizeof(tv)) < 0) {
		err_set(e, "nft: SO_RCVTIMEO: %s", strerror(errno));
		goto fail;
	}
	return nl;
fail:
	mnl_socket_close(nl);
	return NULL;
}

/*
 * Sends one finished batch and waits for one ack per message. The first
 * failing message (lowest index) is reported with the kernel's errno and
 * extended-ack text.
 */
int
nft_sock_send(
    struct nft *n, struct nft_batch *b, enum stats_nft_op op, struct err *e)
{
	sock_bufs(n, b->len, b->nmsgs);
	return nft_sock_send_on(n, n->nl, b, op, e);
}

int
nft_sock_send_on(struct nft *n, struct mnl_socket *nl, struct nft_batch *b,
    enum stats_nft_op op, struct err *e)
{
	struct nft_acks acks;
	uint32_t base = n->seq;
	size_t nmsgs = b->nmsgs;
	int rc = -1;
	ssize_t r;

	n->seq += (uint32_t)nmsgs + 2;
	nft_batch_set_seq_(b, base);
	nft_acks_init(&acks, base, nmsgs);
	r = mnl_socket_sendto(nl, b->buf, b->len);
	if (r < 0 || (size_t)r != b->len) {
		err_set(e, "nft: netlink send (%zu bytes): %s", b->len,
		    r < 0 ? strerror(errno) : "short write");
		goto out;
	}
	do {
		r = mnl_socket_recvfrom(nl, n->rbuf, NFT_RECV_BUF);
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
		else {
			n->st->nft_failures++;
			n->st->nft_update_failed[op]++;
		}
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
	return nft_sock_send(n, b, STATS_NFT_OP_STATIC_APPLY, e);
}

/* ---- dumps ---- */

typedef int (*nft_dump_cb)(const struct nlmsghdr *nlh, void *arg);

/* One GET request (built by the caller in buf) and its answer(s). */
int
nft_sock_request(struct nft *n, struct nlmsghdr *req, mnl_cb_t cb, void *arg,
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

void
nft_sock_names_clear(struct names *x)
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
void
nft_sock_size_check(struct nft *n)
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
		if (nft_sock_request(
		        n, nlh, set_size_cb, &size, &e, "get set") < 0 ||
		    size == 0)
			continue;
		if (size / NFT_LEARNED_SLACK < n->cap)
			n->cap = size / NFT_LEARNED_SLACK > 0
			    ? size / NFT_LEARNED_SLACK
			    : 1;
	}
}

/* 1 = our table exists, 0 = not, -1 = error. */
int
nft_sock_table_exists(struct nft *n, struct err *e)
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
	rc = nft_sock_request(n, nlh, null_cb, NULL, e, "get table");
	if (rc == -ENOENT) {
		err_clear(e);
		return 0;
	}
	return rc < 0 ? -1 : 1;
}

int
nft_table_present(struct nft *n, struct err *e)
{
	return nft_sock_table_exists(n, e);
}

int
nft_sock_dump_names(
    struct nft *n, uint16_t type, struct names *out, struct err *e)
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
	rc =
	    nft_sock_request(n, nlh, type == NFT_MSG_GETSET ? set_cb : chain_cb,
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
		if (nft_mirror_put(d->n, d->family, key, d->now + left,
		        name[0] != '\0' ? name : NULL, &lim,
		        d->limited ? 1 : 0) < 0)
			d->err = -1;
	}
	nftnl_set_elems_iter_destroy(it);
	nftnl_set_free(s);
	return MNL_CB_OK;
}

/* Loads the learned elements of an adopted table into the mirror. */
int
nft_sock_adopt(struct nft *n, const struct names *sets, struct err *e)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct elem_dump d = {.n = n, .now = nft_mirror_now(n)};
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
		if (nft_sock_request(n, nlh, elem_cb, &d, e, "list learned") <
		    0)
			return -1;
	}
	nft_mirror_gauge(n);
	return 0;
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
	return nft_sock_request(n, nlh, obj_cb, out, e, "read counters") < 0
	    ? -1
	    : 0;
}

struct mnl_socket *
nft_sock_(struct nft *n, uint32_t *seq, uint32_t *portid)
{
	*seq = n->seq++;
	*portid = n->portid;
	return n->nl;
}
