/*
 * nft_msg: the building blocks of a batch. One message per libnftnl
 * object (table, chain, set, elements, counter, rule), made the same way
 * whatever it carries; set elements, interval sets, address and port sets.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>

#include "egressd/base/defaults.h"
#include "util/addr.h"
#include "util/coalesce.h"
#include "egressd/proto/special_ranges.h"
#include "egressd/nft/nft_msg.h"
#include "egressd/nft/nft_batch.h"
#include "egressd/nft/nft_bounds.h"

/*
 * One message, built the same way whatever it carries: a libnftnl object
 * made by nft_msg_obj_new() (our table, family inet, its name), then nft_msg_obj()
 * (the header with NLM_F_ACK, the object's payload, the object freed,
 * the message labelled and counted in the batch).
 */
enum nobj {
	NOBJ_TABLE,
	NOBJ_CHAIN,
	NOBJ_SET,
	NOBJ_ELEMS, /* a set's elements: the object is a set */
	NOBJ_COUNTER,
	NOBJ_RULE,
};

/*
 * The message types the builder sends: what each carries, its flags
 * besides NLM_F_ACK, and the verb its label starts with. NEW* create
 * without NLM_F_EXCL: an adopted table keeps its chains and learned sets,
 * a counter keeps its values across applies. A new rule goes at the end
 * of its chain; DELRULE without a handle flushes the chain.
 */
static const struct msgkind {
	enum nobj obj;
	uint16_t flags;
	const char *verb;
} msg_kinds[] = {
    [NFT_MSG_NEWTABLE] = {NOBJ_TABLE, NLM_F_CREATE, "NEWTABLE"},
    [NFT_MSG_DELTABLE] = {NOBJ_TABLE, 0, "DELTABLE"},
    [NFT_MSG_NEWCHAIN] = {NOBJ_CHAIN, NLM_F_CREATE, "NEWCHAIN"},
    [NFT_MSG_DELCHAIN] = {NOBJ_CHAIN, 0, "DELCHAIN"},
    [NFT_MSG_NEWSET] = {NOBJ_SET, NLM_F_CREATE, "NEWSET"},
    [NFT_MSG_DELSET] = {NOBJ_SET, 0, "DELSET"},
    [NFT_MSG_NEWSETELEM] = {NOBJ_ELEMS, NLM_F_CREATE, "NEWSETELEM"},
    [NFT_MSG_DELSETELEM] = {NOBJ_ELEMS, 0, "DELSETELEM"},
    [NFT_MSG_NEWOBJ] = {NOBJ_COUNTER, NLM_F_CREATE, "NEWOBJ counter"},
    [NFT_MSG_NEWRULE] = {NOBJ_RULE, NLM_F_CREATE | NLM_F_APPEND, "NEWRULE"},
    [NFT_MSG_DELRULE] = {NOBJ_RULE, 0, "FLUSH chain"},
};

static const struct msgkind *
msg_kind(uint16_t type)
{
	/* Callers pass constants: another type is a bug in this file. */
	if (type >= NROWS(msg_kinds) || msg_kinds[type].verb == NULL)
		abort();
	return &msg_kinds[type];
}

/*
 * A new object for a message of type, in c's table (inet egressd) and named
 * name (a rule: of chain name; the table: its own name). NULL and c->e
 * set when out of memory.
 */
static void obj_free(enum nobj k, void *o);

void *
nft_msg_obj_new(struct bctx *c, uint16_t type, const char *name)
{
	enum nobj k = msg_kind(type)->obj;
	void *o = NULL;
	const char *table = c->table != NULL ? c->table : NFT_TABLE;
	/* libnftnl copies each name (strdup): a failed copy leaves the
	 * object without it, and a message without it */
	int rc = 0;

	switch (k) {
	case NOBJ_TABLE:
		if ((o = nftnl_table_alloc()) == NULL)
			break;
		rc |= nftnl_table_set_str(o, NFTNL_TABLE_NAME, name);
		nftnl_table_set_u32(o, NFTNL_TABLE_FAMILY, NFPROTO_INET);
		break;
	case NOBJ_CHAIN:
		if ((o = nftnl_chain_alloc()) == NULL)
			break;
		rc |= nftnl_chain_set_str(o, NFTNL_CHAIN_TABLE, table);
		rc |= nftnl_chain_set_str(o, NFTNL_CHAIN_NAME, name);
		nftnl_chain_set_u32(o, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
		break;
	case NOBJ_SET:
	case NOBJ_ELEMS:
		if ((o = nftnl_set_alloc()) == NULL)
			break;
		rc |= nftnl_set_set_str(o, NFTNL_SET_TABLE, table);
		rc |= nftnl_set_set_str(o, NFTNL_SET_NAME, name);
		nftnl_set_set_u32(o, NFTNL_SET_FAMILY, NFPROTO_INET);
		break;
	case NOBJ_COUNTER:
		if ((o = nftnl_obj_alloc()) == NULL)
			break;
		/* void in libnftnl 1.2: a failed copy still marks the
		 * attribute set, with a NULL the payload would strlen() */
		nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, table);
		nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
		if (nftnl_obj_get_str(o, NFTNL_OBJ_TABLE) == NULL ||
		    nftnl_obj_get_str(o, NFTNL_OBJ_NAME) == NULL)
			rc = -1;
		nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
		nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
		break;
	case NOBJ_RULE:
		if ((o = nftnl_rule_alloc()) == NULL)
			break;
		rc |= nftnl_rule_set_str(o, NFTNL_RULE_TABLE, table);
		rc |= nftnl_rule_set_str(o, NFTNL_RULE_CHAIN, name);
		nftnl_rule_set_u32(o, NFTNL_RULE_FAMILY, NFPROTO_INET);
		break;
	}
	if (o != NULL && rc != 0) {
		obj_free(k, o);
		o = NULL;
	}
	if (o == NULL)
		err_set(c->e, "nft: out of memory");
	return o;
}

/* libnftnl has a payload and a free function per kind of object. */
static void
obj_payload(struct nlmsghdr *nlh, enum nobj k, void *o)
{
	switch (k) {
	case NOBJ_TABLE:
		nftnl_table_nlmsg_build_payload(nlh, o);
		break;
	case NOBJ_CHAIN:
		nftnl_chain_nlmsg_build_payload(nlh, o);
		break;
	case NOBJ_SET:
		nftnl_set_nlmsg_build_payload(nlh, o);
		break;
	case NOBJ_ELEMS:
		nftnl_set_elems_nlmsg_build_payload(nlh, o);
		break;
	case NOBJ_COUNTER:
		nftnl_obj_nlmsg_build_payload(nlh, o);
		break;
	case NOBJ_RULE:
		nftnl_rule_nlmsg_build_payload(nlh, o);
		break;
	}
}

static void
obj_free(enum nobj k, void *o)
{
	switch (k) {
	case NOBJ_TABLE:
		nftnl_table_free(o);
		break;
	case NOBJ_CHAIN:
		nftnl_chain_free(o);
		break;
	case NOBJ_SET:
	case NOBJ_ELEMS:
		nftnl_set_free(o);
		break;
	case NOBJ_COUNTER:
		nftnl_obj_free(o);
		break;
	case NOBJ_RULE:
		nftnl_rule_free(o);
		break;
	}
}

/*
 * Appends the message of type that carries o (from nft_msg_obj_new(), for the
 * same type), labelled "<verb> <what>". Takes ownership of o: it is
 * freed whatever happens.
 */
int
nft_msg_obj(struct bctx *c, uint16_t type, void *o, const char *what)
{
	const struct msgkind *k = msg_kind(type);
	void *p = nft_batch_room_(c->b, c->e);
	struct nlmsghdr *nlh;
	char label[NFT_LABEL_MAX];

	/* Before the free: what may be the object's own name. */
	snprintf(label, sizeof(label), "%s %s", k->verb, what);
	if (p == NULL) {
		obj_free(k->obj, o);
		return -1;
	}
	nlh = nftnl_nlmsg_build_hdr(
	    p, type, NFPROTO_INET, k->flags | NLM_F_ACK, 0);
	obj_payload(nlh, k->obj, o);
	obj_free(k->obj, o);
	return nft_batch_push_(c->b, label, c->e);
}

/*
 * A message whose object is its name and nothing else: a delete (table,
 * chain, set), a chain's flush, a counter.
 */
int
nft_msg_named(struct bctx *c, uint16_t type, const char *name)
{
	void *o = nft_msg_obj_new(c, type, name);

	if (o == NULL)
		return -1;
	return nft_msg_obj(c, type, o, name);
}

int
nft_msg_table(struct bctx *c)
{
	struct nftnl_table *t = nft_msg_obj_new(c, NFT_MSG_NEWTABLE, NFT_TABLE);

	if (t == NULL)
		return -1;
	/* Not dormant, not owned by our socket: survives us (fail closed). */
	nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, 0);
	return nft_msg_obj(c, NFT_MSG_NEWTABLE, t, NFT_TABLE);
}

/* NEWCHAIN; hooknum < 0: a regular chain. */
int
nft_msg_chain(struct bctx *c, const char *name, int hooknum, const char *ctype,
    int prio, int policy)
{
	struct nftnl_chain *ch = nft_msg_obj_new(c, NFT_MSG_NEWCHAIN, name);

	if (ch == NULL)
		return -1;
	if (hooknum >= 0) {
		nftnl_chain_set_u32(ch, NFTNL_CHAIN_HOOKNUM, (uint32_t)hooknum);
		nftnl_chain_set_s32(ch, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(ch, NFTNL_CHAIN_POLICY, (uint32_t)policy);
		if (nftnl_chain_set_str(ch, NFTNL_CHAIN_TYPE, ctype) < 0) {
			nftnl_chain_free(ch);
			err_set(c->e, "nft: out of memory");
			return -1;
		}
	}
	return nft_msg_obj(c, NFT_MSG_NEWCHAIN, ch, name);
}

/* NEWSET; size 0: the kernel's default. */
int
nft_msg_set(struct bctx *c, const char *name, uint32_t keytype, uint32_t keylen,
    uint32_t flags, uint32_t size)
{
	struct nftnl_set *s = nft_msg_obj_new(c, NFT_MSG_NEWSET, name);

	if (s == NULL)
		return -1;
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, keytype);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, keylen);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags);
	if (size != 0)
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, size);
	if (flags & NFT_SET_CONCAT) {
		/* addr . l4proto . port, each field in 32-bit words */
		uint8_t fl[3] = {(uint8_t)(keylen - 8), 1, 2};

		nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, fl, sizeof(fl));
	}
	/* The kernel requires a transaction-local id on NEWSET. */
	nftnl_set_set_u32(s, NFTNL_SET_ID, ++c->set_id);
	return nft_msg_obj(c, NFT_MSG_NEWSET, s, name);
}

/* One element key with optional flags/timeout, into set s. */
struct nftnl_set_elem *
nft_msg_elem_add(struct nftnl_set *s, const uint8_t *key, uint32_t klen,
    uint32_t flags, uint64_t timeout_ms)
{
	struct nftnl_set_elem *el = nftnl_set_elem_alloc();

	if (el == NULL)
		return NULL;
	if (nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, key, klen) < 0) {
		nftnl_set_elem_free(el);
		return NULL;
	}
	if (flags != 0)
		nftnl_set_elem_set_u32(el, NFTNL_SET_ELEM_FLAGS, flags);
	if (timeout_ms != 0)
		nftnl_set_elem_set_u64(el, NFTNL_SET_ELEM_TIMEOUT, timeout_ms);
	nftnl_set_elem_add(s, el);
	return el;
}

/*
 * Long names, packed: 40 symbols (end, a-z, 0-9, '-', '_', '.'), three
 * per 16-bit word (40^3 = 64000), so 253 bytes take 170. Pure; unit
 * tested against every symbol.
 */
static const char name_sym[41] = "\0abcdefghijklmnopqrstuvwxyz0123456789-_.";

static int
sym_of(char ch)
{
	const char *p;

	if (ch == '\0')
		return -1;
	p = memchr(name_sym + 1, ch, 39);
	return p == NULL ? -1 : (int)(p - name_sym);
}

size_t
nft_name_pack_(const char *name, uint8_t *out, size_t outlen)
{
	size_t len = strlen(name), i, k, o = 0;

	if (len == 0 || len > POLICY_NAME_MAX)
		return 0;
	for (i = 0; i < len; i += 3) {
		unsigned v = 0;

		for (k = 0; k < 3; k++) {
			int c = i + k < len ? sym_of(name[i + k]) : 0;

			if (c < 0)
				return 0;
			v = v * 40 + (unsigned)c;
		}
		if (o + 2 > outlen)
			return 0;
		out[o++] = (uint8_t)(v >> 8);
		out[o++] = (uint8_t)v;
	}
	return o;
}

int
nft_name_unpack_(const uint8_t *in, size_t len, char *out, size_t outlen)
{
	size_t i, o = 0;
	bool ended = false;

	if (len == 0 || len % 2 != 0)
		return -1;
	for (i = 0; i < len; i += 2) {
		unsigned v = (unsigned)in[i] << 8 | in[i + 1], c[3];
		int k;

		if (v >= 40 * 40 * 40)
			return -1;
		c[2] = v % 40;
		c[1] = v / 40 % 40;
		c[0] = v / 1600;
		for (k = 0; k < 3; k++) {
			if (c[k] == 0) {
				ended = true;
				continue;
			}
			if (ended || o + 1 >= outlen)
				return -1; /* a symbol after the end */
			out[o++] = name_sym[c[k]];
		}
	}
	if (o == 0)
		return -1;
	out[o] = '\0';
	return 0;
}

/*
 * The name an address was learned for rides along as the element's
 * comment (nft's own userdata format, so `nft list` shows it): a
 * restarted egressd recovers its name map from the kernel, and pruning
 * on a tightening judges the names. The kernel keeps at most 254 bytes
 * of userdata per element (the 128 of NFTNL_UDATA_COMMENT_MAXLEN is only
 * what the nft tool accepts as input; it prints longer ones): a comment
 * holds names up to NFT_COMMENT_NAME_MAX bytes, a longer name (at most
 * 253) goes packed into a record of egressd's own type, which nft skips.
 */
int
nft_msg_elem_comment(struct nftnl_set_elem *el, const char *name)
{
	struct nftnl_udata_buf *ub;
	uint8_t packed[NFT_PACKED_NAME_MAX];
	size_t len, plen;
	bool ok;

	if (name == NULL || (len = strlen(name)) == 0)
		return 0;
	ub = nftnl_udata_buf_alloc(NFT_USERDATA_MAX);
	if (ub == NULL)
		return -1;
	if (len <= NFT_COMMENT_NAME_MAX)
		ok = nftnl_udata_put_strz(
		    ub, NFTNL_UDATA_SET_ELEM_COMMENT, name);
	else if ((plen = nft_name_pack_(name, packed, sizeof(packed))) != 0)
		ok = nftnl_udata_put(ub, NFT_UDATA_PACKED_NAME, plen, packed);
	else {
		nftnl_udata_buf_free(ub);
		return 0; /* not a DNS name: mirror only */
	}
	if (!ok) {
		nftnl_udata_buf_free(ub);
		return -1;
	}
	/* libnftnl copies userdata with malloc: -1 is out of memory */
	ok = nftnl_set_elem_set(el, NFTNL_SET_ELEM_USERDATA,
	         nftnl_udata_buf_data(ub), nftnl_udata_buf_len(ub)) == 0;
	nftnl_udata_buf_free(ub);
	return ok ? 0 : -1;
}

/*
 * The elements gathered in *s (from nft_msg_obj_new() for type) as one message
 * of type; *s is freed and NULL after, so the next element starts the
 * next message.
 */
int
nft_msg_elems(
    struct bctx *c, uint16_t type, struct nftnl_set **s, const char *set)
{
	struct nftnl_set *full = *s;

	*s = NULL;
	return nft_msg_obj(c, type, full, set);
}

/* ---- intervals ---- */

static int
rng_cmp16(const void *a, const void *b)
{
	return memcmp(
	    ((const struct rng *)a)->lo, ((const struct rng *)b)->lo, 16);
}

/* x += 1 over w bytes; returns true on overflow (x was all ones). */
static bool
bytes_inc(uint8_t *x, unsigned w)
{
	unsigned i = w;

	while (i-- > 0) {
		if (++x[i] != 0)
			return false;
	}
	return true;
}

static void
prefix_range(const uint8_t *addr, unsigned len, unsigned w, struct rng *r)
{
	unsigned i;

	memset(r, 0, sizeof(*r));
	memcpy(r->lo, addr, w);
	memcpy(r->hi, addr, w);
	for (i = len; i < w * 8; i++) {
		r->lo[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
		r->hi[i / 8] |= (uint8_t)(0x80u >> (i % 8));
	}
}

/* Overlapping or adjacent ranges of w-byte keys merge (arg: &w); so does
 * any after one that reaches the top. */
static bool
rng_absorb(void *kept, const void *next, void *arg)
{
	struct rng *k = kept;
	const struct rng *x = next;
	unsigned w = *(const unsigned *)arg;
	uint8_t after[16];

	memcpy(after, k->hi, 16);
	if (!bytes_inc(after, w) && memcmp(x->lo, after, w) > 0)
		return false;
	if (memcmp(x->hi, k->hi, w) > 0)
		memcpy(k->hi, x->hi, 16);
	return true;
}

/* Sorts and merges overlapping/adjacent ranges in place; returns count.
 * Keys are compared over 16 bytes: unused tail bytes are zero. */
static size_t
rng_merge(struct rng *r, size_t n, unsigned w)
{
	return coalesce(r, n, sizeof(*r), rng_cmp16, rng_absorb, &w);
}

/*
 * Emits the elements of an interval set: start keys, and end keys (one
 * past the range, flagged INTERVAL_END) unless the range reaches the top.
 */
static int
msg_interval_elems(
    struct bctx *c, const char *set, struct rng *r, size_t n, unsigned w)
{
	struct nftnl_set *s = NULL;
	size_t i, inmsg = 0;
	uint8_t end[16];

	n = rng_merge(r, n, w);
	for (i = 0; i < n; i++) {
		if (s == NULL &&
		    (s = nft_msg_obj_new(c, NFT_MSG_NEWSETELEM, set)) == NULL)
			return -1;
		if (nft_msg_elem_add(s, r[i].lo, w, 0, 0) == NULL)
			goto out_nomem;
		memcpy(end, r[i].hi, 16);
		if (!bytes_inc(end, w) &&
		    nft_msg_elem_add(s, end, w, NFT_SET_ELEM_INTERVAL_END, 0) ==
		        NULL)
			goto out_nomem;
		if (++inmsg == NFT_ELEMS_PER_MSG / 2 || i + 1 == n) {
			inmsg = 0;
			if (nft_msg_elems(c, NFT_MSG_NEWSETELEM, &s, set) < 0)
				return -1;
		}
	}
	return 0;
out_nomem:
	err_set(c->e, "nft: out of memory");
	nftnl_set_free(s);
	return -1;
}

/* A named interval set of w-byte keys of keytype, with r as elements. */
int
nft_msg_interval_set(struct bctx *c, const char *name, uint32_t keytype,
    unsigned w, struct rng *r, size_t n)
{
	if (nft_msg_set(c, name, keytype, w, NFT_SET_INTERVAL, 0) < 0)
		return -1;
	return msg_interval_elems(c, name, r, n, w);
}

/* n zeroed ranges to fill (one when n is 0); NULL: c->e set. */
static struct rng *
rng_new(struct bctx *c, size_t n)
{
	struct rng *r = calloc(n == 0 ? 1 : n, sizeof(*r));

	if (r == NULL)
		err_set(c->e, "nft: out of memory");
	return r;
}

/* The key type of an address set of family 4/6. */
uint32_t
nft_msg_addr_keytype(int family)
{
	return family == 4 ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR;
}

/* A named interval set of addresses (family 4/6) with its elements. */
int
nft_msg_addr_set(struct bctx *c, const char *name, int family,
    const struct policy_prefix *const *pfx, size_t n)
{
	unsigned w = family == 4 ? 4 : 16;
	struct rng *r;
	size_t i;
	int rc;

	if ((r = rng_new(c, n)) == NULL)
		return -1;
	for (i = 0; i < n; i++)
		prefix_range(pfx[i]->addr, pfx[i]->len, w, &r[i]);
	rc = nft_msg_interval_set(
	    c, name, nft_msg_addr_keytype(family), w, r, n);
	free(r);
	return rc;
}

int
nft_msg_port_set(struct bctx *c, const char *name,
    const struct policy_port_range *p, size_t n)
{
	struct rng *r;
	size_t i;
	int rc;

	if ((r = rng_new(c, n)) == NULL)
		return -1;
	for (i = 0; i < n; i++) {
		r[i].lo[0] = (uint8_t)(p[i].lo >> 8);
		r[i].lo[1] = (uint8_t)p[i].lo;
		r[i].hi[0] = (uint8_t)(p[i].hi >> 8);
		r[i].hi[1] = (uint8_t)p[i].hi;
	}
	rc = nft_msg_interval_set(c, name, NFT_TYPE_INET_SERVICE, 2, r, n);
	free(r);
	return rc;
}
