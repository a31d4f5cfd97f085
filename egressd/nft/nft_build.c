/*
 * nft_build: policy snapshot -> one netlink batch, with no I/O.
 *
 * Every message carries NLM_F_ACK so the sender can tell which one the
 * kernel refused; sequence numbers are rewritten at send time.
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
#include "egressd/nft/nft_int.h"
#include "util/addr.h"
#include "util/coalesce.h"
#include "egressd/proto/special_ranges.h"

/* nft's datatype ids, so `nft list ruleset` prints sets readably. */
#define NFT_TYPE_IPADDR 7
#define NFT_TYPE_IP6ADDR 8
#define NFT_TYPE_INET_PROTO 12
#define NFT_TYPE_INET_SERVICE 13
#define NFT_TYPE_BITS 6 /* nft's concatenated type: (a << 6 | b) << 6 | c */

#define LOOPBACK_IFINDEX 1 /* lo is ifindex 1 in every namespace */
#define NFT_PRIO_NAT_OUT -100
#define NFT_PRIO_FILTER_OUT 0

/* Counter names, in the order of nft_read_counters(). */
static const char *const counter_names[NFT_NCOUNTERS] = {
    "own",
    "nd",
    "ns_exempt",
    "api_block",
    "dns",
    "proxy",
    "loopback",
    "dot",
    "quic",
    "doh",
    "always_deny",
    "always_allow",
    "infra",
    "internal",
    "user_allow",
    "user_deny",
    "learned",
    "default_allow",
    "default_deny",
};

/*
 * The IPv6 spellings of an IPv4 prefix that a translator (or the kernel's
 * IPv4-compatible handling) can route to it (THREATS §4) and that an IPv4
 * deny rule is also denied in (special_ranges.h).
 */
#define NFT_V6_FORMS SPECIAL_FORMS_RULE

const char *
nft_counter_name(size_t i)
{
	return i < NFT_NCOUNTERS ? counter_names[i] : NULL;
}

void
nft_opts_init(struct nft_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mark = EGRESSD_DEFAULT_MARK;
	o->dns_port = EGRESSD_DEFAULT_DNS_PORT;
	o->protected_ports[0] = EGRESSD_DEFAULT_API_PORT;
	o->nprotected_ports = 1;
	o->intercept_ports[0] = 80;
	o->intercept_ports[1] = 443;
	o->nintercept_ports = 2;
	o->ttl_min = POLICY_DNS_TTL_MIN_DEFAULT;
	o->ttl_max = POLICY_DNS_TTL_MAX_DEFAULT;
	o->log_rate = NFT_DEFAULT_LOG_RATE;
	o->learned_max = EGRESSD_DEFAULT_LEARNED_MAX;
}

uint32_t
nft_learned_kernel_size(uint32_t learned_max)
{
	if (learned_max == 0)
		learned_max = EGRESSD_DEFAULT_LEARNED_MAX;
	if (learned_max > NFT_LEARNED_MAX_LIMIT)
		learned_max = NFT_LEARNED_MAX_LIMIT;
	return learned_max * NFT_LEARNED_SLACK;
}

int
nft_parse_prefix(const char *s, struct policy_prefix *p, struct err *e)
{
	struct addr a;
	unsigned plen;

	memset(p, 0, sizeof(*p));
	if (addr_parse_cidr(s, &a, &plen, e) == -1)
		return -1;
	addr_mask(&a, plen);
	p->family = a.family == AF_INET ? 4 : 6;
	memcpy(p->addr, a.a, p->family == 4 ? 4 : 16);
	p->len = (uint8_t)plen;
	return 0;
}

/* ---- the batch buffer ---- */

struct nft_batch *
nft_batch_new_(void)
{
	return calloc(1, sizeof(struct nft_batch));
}

void
nft_batch_free(struct nft_batch *b)
{
	if (b == NULL)
		return;
	free(b->buf);
	free(b->msgs);
	free(b);
}

void *
nft_batch_room_(struct nft_batch *b, struct err *e)
{
	size_t ncap;
	uint8_t *nb;

	if (b->len + NFT_MSG_ROOM > b->cap) {
		ncap = b->cap == 0 ? 4 * NFT_MSG_ROOM : b->cap * 2;
		if (ncap > NFT_BATCH_MAX + NFT_MSG_ROOM) {
			err_set(e, "nft batch exceeds %u bytes", NFT_BATCH_MAX);
			return NULL;
		}
		nb = realloc(b->buf, ncap);
		if (nb == NULL) {
			err_set(e, "nft batch: out of memory");
			return NULL;
		}
		/* Zeroed so that padding bytes are deterministic (goldens). */
		memset(nb + b->cap, 0, ncap - b->cap);
		b->buf = nb;
		b->cap = ncap;
	}
	return b->buf + b->len;
}

int
nft_batch_push_(struct nft_batch *b, const char *label, struct err *e)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)(b->buf + b->len);
	struct nft_msgdesc *nm;
	size_t ncap;

	if (b->nmsgs == b->capmsgs) {
		ncap = b->capmsgs == 0 ? 64 : b->capmsgs * 2;
		nm = realloc(b->msgs, ncap * sizeof(*nm));
		if (nm == NULL) {
			err_set(e, "nft batch: out of memory");
			return -1;
		}
		b->msgs = nm;
		b->capmsgs = ncap;
	}
	if (nlh->nlmsg_len > NFT_MSG_ROOM) {
		/* Cannot happen with the chunking below; never overrun. */
		err_set(e, "nft batch: message %s too large", label);
		return -1;
	}
	nm = &b->msgs[b->nmsgs++];
	nm->off = b->len;
	snprintf(nm->label, sizeof(nm->label), "%s", label);
	b->len += NLMSG_ALIGN(nlh->nlmsg_len);
	if (b->len > NFT_BATCH_MAX) {
		err_set(e, "nft batch exceeds %u bytes", NFT_BATCH_MAX);
		return -1;
	}
	return 0;
}

int
nft_batch_begin_(struct nft_batch *b, struct err *e)
{
	void *p = nft_batch_room_(b, e);

	if (p == NULL)
		return -1;
	nftnl_batch_begin(p, 0);
	b->len += NLMSG_ALIGN(((struct nlmsghdr *)p)->nlmsg_len);
	return 0;
}

int
nft_batch_finish_(struct nft_batch *b, struct err *e)
{
	void *p = nft_batch_room_(b, e);

	if (p == NULL)
		return -1;
	nftnl_batch_end(p, 0);
	b->len += NLMSG_ALIGN(((struct nlmsghdr *)p)->nlmsg_len);
	b->finished = true;
	nft_batch_set_seq_(b, 1);
	return 0;
}

void
nft_batch_set_seq_(struct nft_batch *b, uint32_t base)
{
	struct nlmsghdr *nlh;
	size_t off = 0, i = 0;

	while (off < b->len) {
		nlh = (struct nlmsghdr *)(b->buf + off);
		nlh->nlmsg_seq = base + (uint32_t)i;
		off += NLMSG_ALIGN(nlh->nlmsg_len);
		i++;
	}
}

const uint8_t *
nft_batch_data(const struct nft_batch *b, size_t *len)
{
	*len = b->len;
	return b->buf;
}

size_t
nft_batch_nmsgs(const struct nft_batch *b)
{
	return b->nmsgs;
}

const char *
nft_batch_msg_label(const struct nft_batch *b, size_t i)
{
	return i < b->nmsgs ? b->msgs[i].label : "?";
}

/* ---- building blocks ---- */

struct bctx {
	struct nft_batch *b;
	const struct nft_opts *o;
	struct err *e;
	unsigned nsets; /* for generated set names */
	uint32_t set_id;
};

#define NROWS(rows) (sizeof(rows) / sizeof((rows)[0]))

/*
 * One message, built the same way whatever it carries: a libnftnl object
 * made by obj_new() (our table, family inet, its name), then msg_obj()
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
 * A new object for a message of type, in table inet egressd and named
 * name (a rule: of chain name; the table: its own name). NULL and c->e
 * set when out of memory.
 */
static void obj_free(enum nobj k, void *o);

static void *
obj_new(struct bctx *c, uint16_t type, const char *name)
{
	enum nobj k = msg_kind(type)->obj;
	void *o = NULL;
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
		rc |= nftnl_chain_set_str(o, NFTNL_CHAIN_TABLE, NFT_TABLE);
		rc |= nftnl_chain_set_str(o, NFTNL_CHAIN_NAME, name);
		nftnl_chain_set_u32(o, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
		break;
	case NOBJ_SET:
	case NOBJ_ELEMS:
		if ((o = nftnl_set_alloc()) == NULL)
			break;
		rc |= nftnl_set_set_str(o, NFTNL_SET_TABLE, NFT_TABLE);
		rc |= nftnl_set_set_str(o, NFTNL_SET_NAME, name);
		nftnl_set_set_u32(o, NFTNL_SET_FAMILY, NFPROTO_INET);
		break;
	case NOBJ_COUNTER:
		if ((o = nftnl_obj_alloc()) == NULL)
			break;
		/* void in libnftnl 1.2: a failed copy still marks the
		 * attribute set, with a NULL the payload would strlen() */
		nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, NFT_TABLE);
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
		rc |= nftnl_rule_set_str(o, NFTNL_RULE_TABLE, NFT_TABLE);
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
 * Appends the message of type that carries o (from obj_new(), for the
 * same type), labelled "<verb> <what>". Takes ownership of o: it is
 * freed whatever happens.
 */
static int
msg_obj(struct bctx *c, uint16_t type, void *o, const char *what)
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
static int
msg_named(struct bctx *c, uint16_t type, const char *name)
{
	void *o = obj_new(c, type, name);

	if (o == NULL)
		return -1;
	return msg_obj(c, type, o, name);
}

static int
msg_table(struct bctx *c)
{
	struct nftnl_table *t = obj_new(c, NFT_MSG_NEWTABLE, NFT_TABLE);

	if (t == NULL)
		return -1;
	/* Not dormant, not owned by our socket: survives us (fail closed). */
	nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, 0);
	return msg_obj(c, NFT_MSG_NEWTABLE, t, NFT_TABLE);
}

/* NEWCHAIN; hooknum < 0: a regular chain. */
static int
msg_chain(struct bctx *c, const char *name, int hooknum, const char *ctype,
    int prio, int policy)
{
	struct nftnl_chain *ch = obj_new(c, NFT_MSG_NEWCHAIN, name);

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
	return msg_obj(c, NFT_MSG_NEWCHAIN, ch, name);
}

/* NEWSET; size 0: the kernel's default. */
static int
msg_set(struct bctx *c, const char *name, uint32_t keytype, uint32_t keylen,
    uint32_t flags, uint32_t size)
{
	struct nftnl_set *s = obj_new(c, NFT_MSG_NEWSET, name);

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
	return msg_obj(c, NFT_MSG_NEWSET, s, name);
}

/* One element key with optional flags/timeout, into set s. */
static struct nftnl_set_elem *
elem_add(struct nftnl_set *s, const uint8_t *key, uint32_t klen, uint32_t flags,
    uint64_t timeout_ms)
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
static int
elem_comment(struct nftnl_set_elem *el, const char *name)
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
 * The elements gathered in *s (from obj_new() for type) as one message
 * of type; *s is freed and NULL after, so the next element starts the
 * next message.
 */
static int
msg_elems(struct bctx *c, uint16_t type, struct nftnl_set **s, const char *set)
{
	struct nftnl_set *full = *s;

	*s = NULL;
	return msg_obj(c, type, full, set);
}

/* ---- intervals ---- */

struct rng {
	uint8_t lo[16], hi[16];
};

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
		    (s = obj_new(c, NFT_MSG_NEWSETELEM, set)) == NULL)
			return -1;
		if (elem_add(s, r[i].lo, w, 0, 0) == NULL)
			goto out_nomem;
		memcpy(end, r[i].hi, 16);
		if (!bytes_inc(end, w) &&
		    elem_add(s, end, w, NFT_SET_ELEM_INTERVAL_END, 0) == NULL)
			goto out_nomem;
		if (++inmsg == NFT_ELEMS_PER_MSG / 2 || i + 1 == n) {
			inmsg = 0;
			if (msg_elems(c, NFT_MSG_NEWSETELEM, &s, set) < 0)
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
static int
interval_set(struct bctx *c, const char *name, uint32_t keytype, unsigned w,
    struct rng *r, size_t n)
{
	if (msg_set(c, name, keytype, w, NFT_SET_INTERVAL, 0) < 0)
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
static uint32_t
addr_keytype(int family)
{
	return family == 4 ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR;
}

/* A named interval set of addresses (family 4/6) with its elements. */
static int
addr_set(struct bctx *c, const char *name, int family,
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
	rc = interval_set(c, name, addr_keytype(family), w, r, n);
	free(r);
	return rc;
}

static int
port_set(struct bctx *c, const char *name, const struct policy_port_range *p,
    size_t n)
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
	rc = interval_set(c, name, NFT_TYPE_INET_SERVICE, 2, r, n);
	free(r);
	return rc;
}

/* ---- rules ---- */

enum verdict {
	V_NONE,
	V_ACCEPT,
	V_DENY, /* jump deny: log, reset/icmpx */
	V_REDIRECT,
	V_TCP_RESET,
	V_ICMPX,
	V_LOG,
};

/* What a rule matches, in evaluation order; zero = don't care. */
struct rspec {
	const char *chain;
	bool ct_estrel; /* ct state established,related */
	uint32_t ct_state; /* other ct state bits (NF_CT_STATE_BIT), 0 = none */
	uint8_t ct_dir; /* 0 = any, else 1 + IP_CT_DIR_ORIGINAL/REPLY */
	uint8_t ip4_option; /* IPv4 option type present (needs nfproto) */
	bool ip6_rthdr; /* IPv6 routing header present (needs nfproto) */
	bool mark;
	uint8_t nfproto; /* NFPROTO_IPV4/6 */
	uint8_t l4proto; /* IPPROTO_* */
	uint8_t icmp6_lo, icmp6_hi; /* ICMP/ICMPv6 type range */
	bool icmp_type; /* compare the type even when icmp6_hi is 0 */
	const uint8_t *daddr; /* exact, needs nfproto */
	const char *daddr_set;
	uint16_t dport; /* needs l4proto tcp/udp */
	const char *dport_set;
	uint16_t sport_lo, sport_hi; /* range; needs l4proto tcp/udp */
	const char *sport_set; /* needs l4proto tcp/udp */
	bool oif_lo;
	bool fib_local;
	bool ct_mark_set; /* ct mark set meta mark (own flows, for cuts) */
	const char *counter;
	enum verdict v;
	uint16_t redir_port;
	uint32_t log_rate; /* V_LOG: lines per second */
};

static int
add_expr(struct nftnl_rule *r, struct nftnl_expr *x)
{
	if (x == NULL)
		return -1;
	nftnl_rule_add_expr(r, x);
	return 0;
}

/* add_expr after the one string attribute x has (copied by libnftnl:
 * a failed copy frees x and fails the rule) */
static int
add_expr_str(
    struct nftnl_rule *r, struct nftnl_expr *x, uint16_t type, const char *v)
{
	if (nftnl_expr_set_str(x, type, v) < 0) {
		nftnl_expr_free(x);
		return -1;
	}
	return add_expr(r, x);
}

/* Loads meta key into dreg (concatenations use several registers). */
static int
e_meta_reg(struct nftnl_rule *r, uint32_t dreg, uint32_t key)
{
	struct nftnl_expr *x = nftnl_expr_alloc("meta");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_DREG, dreg);
	return add_expr(r, x);
}

static int
e_meta(struct nftnl_rule *r, uint32_t key)
{
	return e_meta_reg(r, NFT_REG_1, key);
}

static int
e_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *x = nftnl_expr_alloc("cmp");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(x, NFTNL_EXPR_CMP_DATA, data, len);
	return add_expr(r, x);
}

static int
e_payload_reg(struct nftnl_rule *r, uint32_t dreg, uint32_t base, uint32_t off,
    uint32_t len)
{
	struct nftnl_expr *x = nftnl_expr_alloc("payload");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_LEN, len);
	return add_expr(r, x);
}

static int
e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
	return e_payload_reg(r, NFT_REG_1, base, off, len);
}

static int
e_lookup_reg(struct nftnl_rule *r, uint32_t sreg, const char *set)
{
	struct nftnl_expr *x = nftnl_expr_alloc("lookup");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_LOOKUP_SREG, sreg);
	return add_expr_str(r, x, NFTNL_EXPR_LOOKUP_SET, set);
}

static int
e_lookup(struct nftnl_rule *r, const char *set)
{
	return e_lookup_reg(r, NFT_REG_1, set);
}

static int
e_objref(struct nftnl_rule *r, const char *counter)
{
	struct nftnl_expr *x = nftnl_expr_alloc("objref");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_OBJREF_IMM_TYPE, NFT_OBJECT_COUNTER);
	return add_expr_str(r, x, NFTNL_EXPR_OBJREF_IMM_NAME, counter);
}

static int
e_verdict(struct nftnl_rule *r, int verdict, const char *chain)
{
	struct nftnl_expr *x = nftnl_expr_alloc("immediate");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	if (chain != NULL)
		return add_expr_str(r, x, NFTNL_EXPR_IMM_CHAIN, chain);
	return add_expr(r, x);
}

static int
e_reject(struct nftnl_rule *r, uint32_t type, uint8_t code)
{
	struct nftnl_expr *x = nftnl_expr_alloc("reject");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(x, NFTNL_EXPR_REJECT_CODE, code);
	return add_expr(r, x);
}

static int
e_redirect(struct nftnl_rule *r, uint16_t port)
{
	struct nftnl_expr *x = nftnl_expr_alloc("immediate");
	uint16_t be = htons(port);

	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(x, NFTNL_EXPR_IMM_DATA, &be, sizeof(be));
	if (add_expr(r, x) < 0)
		return -1;
	x = nftnl_expr_alloc("redir");
	if (x == NULL)
		return -1;
	nftnl_expr_set_u32(x, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	nftnl_expr_set_u32(
	    x, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
	return add_expr(r, x);
}

static int
e_log(struct nftnl_rule *r, uint32_t rate)
{
	struct nftnl_expr *x = nftnl_expr_alloc("limit");

	if (x == NULL)
		return -1;
	nftnl_expr_set_u64(x, NFTNL_EXPR_LIMIT_RATE, rate);
	nftnl_expr_set_u64(x, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(x, NFTNL_EXPR_LIMIT_BURST, NFT_LIMIT_BURST);
	nftnl_expr_set_u32(x, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(x, NFTNL_EXPR_LIMIT_FLAGS, 0);
	if (add_expr(r, x) < 0)
		return -1;
	x = nftnl_expr_alloc("log");
	if (x == NULL)
		return -1;
	return add_expr_str(r, x, NFTNL_EXPR_LOG_PREFIX, "egressd deny: ");
}

static int
rule_exprs(struct nftnl_rule *r, const struct rspec *s)
{
	uint32_t u32;
	uint8_t u8;
	uint16_t be16;

	if (s->ct_estrel || s->ct_state != 0) {
		struct nftnl_expr *x = nftnl_expr_alloc("ct");
		uint32_t mask = s->ct_state;
		uint32_t zero = 0;

		if (s->ct_estrel)
			mask |= NF_CT_STATE_BIT(IP_CT_ESTABLISHED) |
			    NF_CT_STATE_BIT(IP_CT_RELATED);
		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
		nftnl_expr_set_u32(x, NFTNL_EXPR_CT_DREG, NFT_REG_1);
		if (add_expr(r, x) < 0)
			return -1;
		x = nftnl_expr_alloc("bitwise");
		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
		nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
		nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_LEN, sizeof(u32));
		nftnl_expr_set(x, NFTNL_EXPR_BITWISE_MASK, &mask, sizeof(mask));
		nftnl_expr_set(x, NFTNL_EXPR_BITWISE_XOR, &zero, sizeof(zero));
		if (add_expr(r, x) < 0 ||
		    e_cmp(r, NFT_CMP_NEQ, &zero, sizeof(zero)) < 0)
			return -1;
	}
	if (s->ct_dir != 0) {
		struct nftnl_expr *x = nftnl_expr_alloc("ct");

		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_CT_KEY, NFT_CT_DIRECTION);
		nftnl_expr_set_u32(x, NFTNL_EXPR_CT_DREG, NFT_REG_1);
		if (add_expr(r, x) < 0)
			return -1;
		u8 = (uint8_t)(s->ct_dir - 1);
		if (e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	if (s->nfproto != 0) {
		u8 = s->nfproto;
		if (e_meta(r, NFT_META_NFPROTO) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	if (s->l4proto != 0) {
		u8 = s->l4proto;
		if (e_meta(r, NFT_META_L4PROTO) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	if (s->ip4_option != 0 || s->ip6_rthdr) {
		struct nftnl_expr *x = nftnl_expr_alloc("exthdr");

		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_DREG, NFT_REG_1);
		nftnl_expr_set_u8(x, NFTNL_EXPR_EXTHDR_TYPE,
		    s->ip6_rthdr ? IPPROTO_ROUTING : s->ip4_option);
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_OFFSET, 0);
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_LEN, 1);
		nftnl_expr_set_u32(
		    x, NFTNL_EXPR_EXTHDR_FLAGS, NFT_EXTHDR_F_PRESENT);
		nftnl_expr_set_u32(x, NFTNL_EXPR_EXTHDR_OP,
		    s->ip6_rthdr ? NFT_EXTHDR_OP_IPV6 : NFT_EXTHDR_OP_IPV4);
		if (add_expr(r, x) < 0)
			return -1;
		u8 = 1;
		if (e_cmp(r, NFT_CMP_EQ, &u8, 1) < 0)
			return -1;
	}
	if (s->icmp6_hi != 0 || s->icmp_type) {
		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1) < 0 ||
		    e_cmp(r, NFT_CMP_GTE, &s->icmp6_lo, 1) < 0 ||
		    e_cmp(r, NFT_CMP_LTE, &s->icmp6_hi, 1) < 0)
			return -1;
	}
	if (s->daddr != NULL || s->daddr_set != NULL) {
		bool v4 = s->nfproto == NFPROTO_IPV4;

		if (e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 16 : 24,
		        v4 ? 4 : 16) < 0)
			return -1;
		if (s->daddr != NULL &&
		    e_cmp(r, NFT_CMP_EQ, s->daddr, v4 ? 4 : 16) < 0)
			return -1;
		if (s->daddr_set != NULL && e_lookup(r, s->daddr_set) < 0)
			return -1;
	}
	if (s->sport_hi != 0) {
		/* Big-endian bytes compare like the numbers they hold. */
		uint16_t lo = htons(s->sport_lo), hi = htons(s->sport_hi);

		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2) < 0 ||
		    e_cmp(r, NFT_CMP_GTE, &lo, 2) < 0 ||
		    e_cmp(r, NFT_CMP_LTE, &hi, 2) < 0)
			return -1;
	}
	if (s->dport != 0 || s->dport_set != NULL) {
		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2) < 0)
			return -1;
		be16 = htons(s->dport);
		if (s->dport != 0 && e_cmp(r, NFT_CMP_EQ, &be16, 2) < 0)
			return -1;
		if (s->dport_set != NULL && e_lookup(r, s->dport_set) < 0)
			return -1;
	}
	if (s->sport_set != NULL) {
		if (e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2) < 0 ||
		    e_lookup(r, s->sport_set) < 0)
			return -1;
	}
	if (s->oif_lo) {
		u32 = LOOPBACK_IFINDEX;
		if (e_meta(r, NFT_META_OIF) < 0 ||
		    e_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32)) < 0)
			return -1;
	}
	if (s->fib_local) {
		struct nftnl_expr *x = nftnl_expr_alloc("fib");

		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
		nftnl_expr_set_u32(
		    x, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
		nftnl_expr_set_u32(x, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
		if (add_expr(r, x) < 0)
			return -1;
		u32 = RTN_LOCAL;
		if (e_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32)) < 0)
			return -1;
	}
	if (s->ct_mark_set) {
		struct nftnl_expr *x;

		if (e_meta(r, NFT_META_MARK) < 0)
			return -1;
		x = nftnl_expr_alloc("ct");
		if (x == NULL)
			return -1;
		nftnl_expr_set_u32(x, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
		nftnl_expr_set_u32(x, NFTNL_EXPR_CT_SREG, NFT_REG_1);
		if (add_expr(r, x) < 0)
			return -1;
	}
	if (s->counter != NULL && e_objref(r, s->counter) < 0)
		return -1;
	switch (s->v) {
	case V_NONE:
		return 0;
	case V_ACCEPT:
		return e_verdict(r, NF_ACCEPT, NULL);
	case V_DENY:
		return e_verdict(r, NFT_JUMP, NFT_CHAIN_DENY);
	case V_REDIRECT:
		return e_redirect(r, s->redir_port);
	case V_TCP_RESET:
		return e_reject(r, NFT_REJECT_TCP_RST, 0);
	case V_ICMPX:
		return e_reject(r, NFT_REJECT_ICMPX_UNREACH,
		    NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	case V_LOG:
		return e_log(r, s->log_rate);
	}
	return -1;
}

/* Frees r and reports the allocation that failed: -1. */
static int
rule_nomem(struct bctx *c, struct nftnl_rule *r)
{
	nftnl_rule_free(r);
	err_set(c->e, "nft: out of memory");
	return -1;
}

/* A NEWRULE appended to chain, labelled with its place and counter; r
 * (from obj_new()) is freed. */
static int
rule_append(struct bctx *c, struct nftnl_rule *r, const char *chain,
    const char *counter)
{
	char what[NFT_LABEL_MAX];

	snprintf(what, sizeof(what), "%s #%zu (%s)", chain, c->b->nmsgs,
	    counter != NULL ? counter : "-");
	return msg_obj(c, NFT_MSG_NEWRULE, r, what);
}

static int
msg_rule(struct bctx *c, const struct rspec *s)
{
	struct nftnl_rule *r = obj_new(c, NFT_MSG_NEWRULE, s->chain);
	uint32_t mark = c->o->mark;

	if (r == NULL)
		return -1;
	if ((s->mark &&
	        (e_meta(r, NFT_META_MARK) < 0 ||
	            e_cmp(r, NFT_CMP_EQ, &mark, sizeof(mark)) < 0)) ||
	    rule_exprs(r, s) < 0)
		return rule_nomem(c, r);
	return rule_append(c, r, s->chain, s->counter);
}

/*
 * One row of a chain's rules. A row with l4proto stands for one rule per
 * protocol in it, in that order; with per_family, for one rule per
 * address family that has a destination in it (daddr[0] or daddr_set[0]
 * for IPv4, [1] for IPv6; a family with neither is left out), the
 * families inside the protocols. skip leaves the row out (what an option
 * turned off).
 */
struct rrow {
	struct rspec s;
	uint8_t l4proto[2]; /* one rule per protocol given, in this order */
	bool per_family;
	const uint8_t *daddr[2];
	const char *daddr_set[2];
	bool skip;
};

/* s once, or once per family of the row (per_family). */
static int
msg_row_46(struct bctx *c, const struct rrow *row, struct rspec s)
{
	static const uint8_t nfproto[2] = {NFPROTO_IPV4, NFPROTO_IPV6};
	size_t f;

	if (!row->per_family)
		return msg_rule(c, &s);
	for (f = 0; f < 2; f++) {
		if (row->daddr[f] == NULL && row->daddr_set[f] == NULL)
			continue;
		s.nfproto = nfproto[f];
		s.daddr = row->daddr[f];
		s.daddr_set = row->daddr_set[f];
		if (msg_rule(c, &s) < 0)
			return -1;
	}
	return 0;
}

static int
msg_row(struct bctx *c, const char *chain, const struct rrow *row)
{
	struct rspec s = row->s;
	size_t p;

	if (row->skip)
		return 0;
	s.chain = chain;
	if (row->l4proto[0] == 0)
		return msg_row_46(c, row, s);
	for (p = 0; p < 2 && row->l4proto[p] != 0; p++) {
		s.l4proto = row->l4proto[p];
		if (msg_row_46(c, row, s) < 0)
			return -1;
	}
	return 0;
}

/* The rows of a chain, in order. */
static int
msg_rows(struct bctx *c, const char *chain, const struct rrow *rows, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (msg_row(c, chain, &rows[i]) < 0)
			return -1;
	return 0;
}

static uint32_t
limited_type(int family)
{
	uint32_t a = family == 4 ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR;

	return ((a << NFT_TYPE_BITS | NFT_TYPE_INET_PROTO) << NFT_TYPE_BITS) |
	    NFT_TYPE_INET_SERVICE;
}

/*
 * "ip daddr . meta l4proto . th dport @limited4" (or ip6): the address in
 * the first 32-bit registers, then l4proto, then the port, one lookup.
 * Under default allow the verdict is deny (counted as user_deny).
 */
static int
msg_rule_limited(struct bctx *c, int family, enum policy_action def)
{
	struct nftnl_rule *r = obj_new(c, NFT_MSG_NEWRULE, NFT_CHAIN_FILTER);
	uint8_t nfp = family == 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
	uint32_t w = family == 4 ? 1 : 4; /* address in 32-bit words */
	const char *counter = def == POLICY_DENY ? "learned" : "user_deny";

	if (r == NULL)
		return -1;
	if (e_meta(r, NFT_META_NFPROTO) < 0 ||
	    e_cmp(r, NFT_CMP_EQ, &nfp, 1) < 0 ||
	    e_payload_reg(r, NFT_REG32_00, NFT_PAYLOAD_NETWORK_HEADER,
	        family == 4 ? 16 : 24, w * 4) < 0 ||
	    e_meta_reg(r, NFT_REG32_00 + w, NFT_META_L4PROTO) < 0 ||
	    e_payload_reg(r, NFT_REG32_00 + w + 1, NFT_PAYLOAD_TRANSPORT_HEADER,
	        2, 2) < 0 ||
	    e_lookup_reg(r, NFT_REG32_00,
	        family == 4 ? NFT_SET_LIMITED4 : NFT_SET_LIMITED6) < 0 ||
	    e_objref(r, counter) < 0 ||
	    (def == POLICY_DENY ? e_verdict(r, NF_ACCEPT, NULL)
	                        : e_verdict(r, NFT_JUMP, NFT_CHAIN_DENY)) < 0)
		return rule_nomem(c, r);
	return rule_append(c, r, NFT_CHAIN_FILTER, counter);
}

/* ---- policy layers -> ordered groups ---- */

void
nft_layers_(const struct policy *p, struct nft_layers *out)
{
	out->r[NFT_L_ALWAYS_DENY] = p->always_deny;
	out->n[NFT_L_ALWAYS_DENY] = p->nalways_deny;
	out->r[NFT_L_ALWAYS_ALLOW] = p->always_allow;
	out->n[NFT_L_ALWAYS_ALLOW] = p->nalways_allow;
	out->r[NFT_L_INFRA] = p->infra;
	out->n[NFT_L_INFRA] = p->ninfra;
	out->r[NFT_L_USER] = p->rules;
	out->n[NFT_L_USER] = p->nrules;
}

struct gent {
	unsigned layer;
	const struct policy_rule *r;
};

static int
ports_cmp(const struct policy_rule *a, const struct policy_rule *b)
{
	size_t i;

	if (a->nports != b->nports)
		return a->nports < b->nports ? -1 : 1;
	for (i = 0; i < a->nports; i++) {
		if (a->ports[i].lo != b->ports[i].lo)
			return a->ports[i].lo < b->ports[i].lo ? -1 : 1;
		if (a->ports[i].hi != b->ports[i].hi)
			return a->ports[i].hi < b->ports[i].hi ? -1 : 1;
	}
	return 0;
}

/* The group key: equal keys share one nft rule. */
static int
gkey_cmp(const struct gent *x, const struct gent *y)
{
	const struct policy_rule *a = x->r, *b = y->r;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (a->prefix.len != b->prefix.len) /* longest prefix first */
		return a->prefix.len > b->prefix.len ? -1 : 1;
	if (a->action != b->action) /* deny first */
		return a->action == POLICY_DENY ? -1 : 1;
	if (a->prefix.family != b->prefix.family)
		return a->prefix.family < b->prefix.family ? -1 : 1;
	if (a->protocols != b->protocols)
		return a->protocols < b->protocols ? -1 : 1;
	return ports_cmp(a, b);
}

static int
gent_cmp(const void *pa, const void *pb)
{
	const struct gent *x = pa, *y = pb;
	int c = gkey_cmp(x, y);

	if (c != 0)
		return c;
	/* stable, deterministic output */
	return memcmp(x->r->prefix.addr, y->r->prefix.addr, 16);
}

static const char *const layer_allow_counter[NFT_L_COUNT] = {
    "always_deny",
    "always_allow",
    "infra",
    "user_allow",
};
static const char *const layer_deny_counter[NFT_L_COUNT] = {
    "always_deny",
    "always_allow",
    "infra",
    "user_deny",
};

static int
emit_group(struct bctx *c, const struct gent *g, size_t n)
{
	const struct policy_rule *r0 = g[0].r;
	const struct policy_prefix **pfx;
	char aset[NFT_SETNAME_MAX], pset[NFT_SETNAME_MAX];
	struct rspec s;
	unsigned id = c->nsets++;
	size_t i;
	int rc = -1;
	bool icmp;

	pfx = calloc(n, sizeof(*pfx));
	if (pfx == NULL) {
		err_set(c->e, "nft: out of memory");
		return -1;
	}
	for (i = 0; i < n; i++)
		pfx[i] = &g[i].r->prefix;
	snprintf(aset, sizeof(aset), "g%u_%s%u", id,
	    r0->action == POLICY_DENY ? "deny" : "allow", r0->prefix.family);
	if (addr_set(c, aset, r0->prefix.family, pfx, n) < 0)
		goto out;
	if (r0->nports != 0) {
		snprintf(pset, sizeof(pset), "g%u_ports", id);
		if (port_set(c, pset, r0->ports, r0->nports) < 0)
			goto out;
	}
	memset(&s, 0, sizeof(s));
	s.chain = NFT_CHAIN_FILTER;
	s.nfproto = r0->prefix.family == 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
	s.daddr_set = aset;
	s.counter = r0->action == POLICY_DENY ? layer_deny_counter[g[0].layer]
	                                      : layer_allow_counter[g[0].layer];
	s.v = r0->action == POLICY_DENY ? V_DENY : V_ACCEPT;
	if ((r0->protocols & POLICY_PROTO_ALL) == POLICY_PROTO_ALL &&
	    r0->nports == 0) {
		/* every protocol, including ones policy has no name for */
		rc = msg_rule(c, &s);
		goto out;
	}
	/* Ports restrict TCP and UDP; ICMP has none (as policy_rule_port_ok). */
	s.dport_set = r0->nports != 0 ? pset : NULL;
	if (r0->protocols & POLICY_PROTO_TCP) {
		s.l4proto = IPPROTO_TCP;
		if (msg_rule(c, &s) < 0)
			goto out;
	}
	if (r0->protocols & POLICY_PROTO_UDP) {
		s.l4proto = IPPROTO_UDP;
		if (msg_rule(c, &s) < 0)
			goto out;
	}
	icmp = (r0->protocols & POLICY_PROTO_ICMP) != 0;
	if (icmp) {
		s.dport_set = NULL;
		s.l4proto =
		    r0->prefix.family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6;
		if (msg_rule(c, &s) < 0)
			goto out;
	}
	rc = 0;
out:
	free(pfx);
	return rc;
}

/*
 * IPv6 spelling number form (0..NFT_V6_FORMS-1) of the IPv4 prefix in:
 * NAT64 64:ff9b::/96, 6to4 2002::/16, IPv4-mapped ::ffff:0:0/96,
 * IPv4-compatible ::/96 (special_v6_form()).
 */
static void
v6_twin(const struct policy_prefix *in, size_t form, struct policy_prefix *out)
{
	memset(out, 0, sizeof(*out));
	out->family = 6;
	special_v6_form(in->addr, in->len, form, out->addr, &out->len);
}

/*
 * One interval set of the addresses of family that the table of special
 * ranges drops (special_drop_spans()).
 */
static int
internal_set(struct bctx *c, const char *name, int family)
{
	unsigned w = family == 4 ? 4 : 16;
	struct special_span *sp;
	struct rng *r;
	long i, n;
	int rc = -1;

	sp = calloc(SPECIAL_SPANS_MAX, sizeof(*sp));
	r = calloc(SPECIAL_SPANS_MAX, sizeof(*r));
	if (sp == NULL || r == NULL) {
		err_set(c->e, "nft: out of memory");
		goto out;
	}
	n = special_drop_spans(family, sp, SPECIAL_SPANS_MAX);
	if (n < 0) {
		err_set(c->e, "nft: bad table of special ranges");
		goto out;
	}
	for (i = 0; i < n; i++) {
		memcpy(r[i].lo, sp[i].lo, sizeof(r[i].lo));
		memcpy(r[i].hi, sp[i].hi, sizeof(r[i].hi));
	}
	rc = interval_set(c, name, addr_keytype(family), w, r, (size_t)n);
out:
	free(sp);
	free(r);
	return rc;
}

/*
 * The built-in internal destinations (special_ranges.c: every row with
 * SPECIAL_DROP and the IPv6 spellings of its IPv4 rows), denied unless an
 * always-allow or infra rule of the operator allows them (THREATS §5):
 * after those layers, before user rules. The resolver strips the same
 * addresses from answers (dns_addr_is_internal()), Teredo when it embeds
 * one of them. Loopback is accepted by `oif lo` and ICMPv6 neighbour
 * discovery and MLD reports by the nd rule before these.
 */
static int
emit_internal(struct bctx *c)
{
	const struct rrow deny = {.s = {.counter = "internal", .v = V_DENY},
	    .per_family = true,
	    .daddr_set = {"internal4", "internal6"}};

	if (internal_set(c, "internal4", 4) < 0 ||
	    internal_set(c, "internal6", 6) < 0)
		return -1;
	return msg_row(c, NFT_CHAIN_FILTER, &deny);
}

/*
 * A denied IPv4 prefix (operator always-deny or a user deny rule) is also
 * denied in its IPv6 spellings (v6_twin()), as synthetic rules of the same
 * layer with the same ports and protocols: longest prefix first and deny
 * before allow then treat them like rules the operator or user wrote
 * (e.g. a user deny 203.0.113.11 also denies 64:ff9b::cb00:710b/128,
 * which beats a user allow ::/0 and a learned address, as the IPv4 rule
 * beats an allow 0.0.0.0/0). IPv4 allow rules get no twins.
 */
static bool
v6_twinned(const struct policy_rule *r)
{
	return r->action == POLICY_DENY && r->prefix.family == 4 &&
	    (r->kind == POLICY_TARGET_IP || r->kind == POLICY_TARGET_CIDR);
}

static void
v6_form(const struct policy_rule *r, size_t form, struct policy_rule *out)
{
	*out = *r;
	v6_twin(&r->prefix, form, &out->prefix);
}

static int
emit_layers(struct bctx *c, const struct policy *p)
{
	struct nft_layers ly;
	struct policy_rule *syn = NULL; /* IPv6 forms of IPv4 denies */
	struct gent *g;
	size_t n = 0, nsyn = 0, ntw = 0, i, j, k;
	unsigned l;
	int rc = -1;
	bool internal_done = false;

	nft_layers_(p, &ly);
	for (l = 0; l < NFT_L_COUNT; l++) {
		n += ly.n[l];
		for (i = 0; i < ly.n[l]; i++)
			ntw += v6_twinned(&ly.r[l][i]);
	}
	g = calloc(n + NFT_V6_FORMS * ntw + 1, sizeof(*g));
	syn = calloc(NFT_V6_FORMS * ntw + 1, sizeof(*syn));
	if (g == NULL || syn == NULL) {
		err_set(c->e, "nft: out of memory");
		goto out;
	}
	n = 0;
	for (l = 0; l < NFT_L_COUNT; l++)
		for (i = 0; i < ly.n[l]; i++) {
			const struct policy_rule *r = &ly.r[l][i];

			if (r->kind != POLICY_TARGET_IP &&
			    r->kind != POLICY_TARGET_CIDR)
				continue; /* names are the resolver's job */
			if ((r->prefix.family != 4 && r->prefix.family != 6) ||
			    r->prefix.len >
			        (r->prefix.family == 4 ? 32 : 128)) {
				err_set(c->e,
				    "nft: rule \"%.64s\" has a bad "
				    "prefix",
				    r->target ? r->target : "?");
				goto out;
			}
			if ((r->protocols & POLICY_PROTO_ALL) == 0)
				continue; /* matches nothing */
			g[n].layer = l;
			g[n].r = r;
			n++;
			if (v6_twinned(r))
				for (k = 0; k < NFT_V6_FORMS; k++) {
					v6_form(r, k, &syn[nsyn]);
					g[n].layer = l;
					g[n].r = &syn[nsyn++];
					n++;
				}
		}
	qsort(g, n, sizeof(*g), gent_cmp);
	for (i = 0; i < n; i = j) {
		if (!internal_done && g[i].layer == NFT_L_USER) {
			if (emit_internal(c) < 0)
				goto out;
			internal_done = true;
		}
		/* one group; skip exact duplicate prefixes */
		for (j = i + 1; j < n && gkey_cmp(&g[i], &g[j]) == 0; j++)
			;
		k = j - i;
		if (emit_group(c, &g[i], k) < 0)
			goto out;
	}
	if (!internal_done && emit_internal(c) < 0)
		goto out;
	rc = 0;
out:
	free(g);
	free(syn);
	return rc;
}

/* ---- the whole table ---- */

static bool
name_in(const char *name, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/*
 * The prefixes of pf as one address set per family that has any, named
 * name[0] (IPv4) and name[1] (IPv6); made[f] is then name[f], else NULL.
 */
static int
emit_prefix_list_set(struct bctx *c, const char *const name[2],
    const struct policy_prefix *pf, size_t n, const char *made[2])
{
	const struct policy_prefix **p;
	size_t i, k, f;
	int rc = -1;

	made[0] = made[1] = NULL;
	if ((p = calloc(n + 1, sizeof(*p))) == NULL) {
		err_set(c->e, "nft: out of memory");
		return -1;
	}
	for (f = 0; f < 2; f++) {
		int family = f == 0 ? 4 : 6;

		for (i = k = 0; i < n; i++)
			if (pf[i].family == family)
				p[k++] = &pf[i];
		if (k == 0)
			continue;
		if (addr_set(c, name[f], family, p, k) < 0)
			goto out;
		made[f] = name[f];
	}
	rc = 0;
out:
	free(p);
	return rc;
}

static int
check_opts(const struct nft_opts *o, struct err *e)
{
	if (o->dns_port == 0) {
		err_set(e, "nft: dns_port is 0");
		return -1;
	}
	if (o->nprotected_ports > NFT_PORTS_MAX ||
	    o->nintercept_ports > NFT_PORTS_MAX ||
	    o->ninbound_ports > NFT_PORTS_MAX ||
	    o->nns_exempt > NFT_ADDRS_MAX || o->ndoh_block > NFT_ADDRS_MAX) {
		err_set(e, "nft: option list over its bound");
		return -1;
	}
	return 0;
}

/* The optional static sets that exist, [0] IPv4, [1] IPv6 (NULL: none;
 * the rules that use them follow). */
struct static_sets {
	const char *ns[2], *doh[2];
};

/* The table; on adopt, the old contents go in the same transaction. */
static int
emit_table(struct bctx *c, const struct nft_kstate *ks)
{
	static const char *const our_chains[] = {
	    NFT_CHAIN_FILTER, NFT_CHAIN_NAT, NFT_CHAIN_DENY};
	size_t i;

	if (msg_table(c) < 0)
		return -1;
	/* Adopt: empty every chain, drop every static set (after the rules
	 * that referenced them), keep learned sets. All in this transaction:
	 * the kernel switches from the old ruleset to the new one at once. */
	if (ks != NULL && ks->table_exists) {
		/* DELRULE without a handle flushes the chain. */
		for (i = 0; i < ks->nchains; i++)
			if (msg_named(c, NFT_MSG_DELRULE, ks->chains[i]) < 0)
				return -1;
		for (i = 0; i < ks->nsets; i++) {
			if (strcmp(ks->sets[i], NFT_SET_LEARNED4) == 0 ||
			    strcmp(ks->sets[i], NFT_SET_LEARNED6) == 0 ||
			    strcmp(ks->sets[i], NFT_SET_LIMITED4) == 0 ||
			    strcmp(ks->sets[i], NFT_SET_LIMITED6) == 0)
				continue;
			if (msg_named(c, NFT_MSG_DELSET, ks->sets[i]) < 0)
				return -1;
		}
		for (i = 0; i < ks->nchains; i++)
			if (!name_in(ks->chains[i], our_chains, 3) &&
			    msg_named(c, NFT_MSG_DELCHAIN, ks->chains[i]) < 0)
				return -1;
	}
	return 0;
}

/* The named counters and the learned/limited sets with their changes. */
static int
emit_learned_sets(struct bctx *c, const struct nft_kstate *ks)
{
	const struct nft_opts *o = c->o;
	size_t i;

	for (i = 0; i < NFT_NCOUNTERS; i++)
		if (msg_named(c, NFT_MSG_NEWOBJ, counter_names[i]) < 0)
			return -1;
	/* An adopted set gets the size of this configuration too (kernels
	 * that cannot resize keep theirs: see nft_apply_policy). */
	if (msg_set(c, NFT_SET_LEARNED4, NFT_TYPE_IPADDR, 4, NFT_SET_TIMEOUT,
	        nft_learned_kernel_size(o->learned_max)) < 0 ||
	    msg_set(c, NFT_SET_LEARNED6, NFT_TYPE_IP6ADDR, 16, NFT_SET_TIMEOUT,
	        nft_learned_kernel_size(o->learned_max)) < 0 ||
	    msg_set(c, NFT_SET_LIMITED4, limited_type(4), 12,
	        NFT_SET_TIMEOUT | NFT_SET_INTERVAL | NFT_SET_CONCAT,
	        NFT_LIMITED_PER_ADDR *
	            nft_learned_kernel_size(o->learned_max)) < 0 ||
	    msg_set(c, NFT_SET_LIMITED6, limited_type(6), 24,
	        NFT_SET_TIMEOUT | NFT_SET_INTERVAL | NFT_SET_CONCAT,
	        NFT_LIMITED_PER_ADDR *
	            nft_learned_kernel_size(o->learned_max)) < 0)
		return -1;
	if (ks != NULL && ks->ndrop != 0 &&
	    nft_batch_del_learn_(c->b, ks->drop, ks->ndrop, c->e) < 0)
		return -1;
	/* what a policy update opens (names whose limits changed) */
	if (ks != NULL && ks->nadd != 0 &&
	    nft_batch_add_learn_(
	        c->b, ks->add, ks->nadd, 1, UINT32_MAX, false, c->e) < 0)
		return -1;

	return 0;
}

/* Port and address sets of the options. */
static int
emit_static_sets(struct bctx *c, struct static_sets *ss)
{
	const struct nft_opts *o = c->o;
	struct policy_port_range pr[NFT_PORTS_MAX];
	size_t i;

	/* Static sets. */
	if (o->nprotected_ports != 0) {
		for (i = 0; i < o->nprotected_ports; i++)
			pr[i].lo = pr[i].hi = o->protected_ports[i];
		if (port_set(c, "protected_ports", pr, o->nprotected_ports) < 0)
			return -1;
	}
	if (o->ninbound_ports != 0) {
		for (i = 0; i < o->ninbound_ports; i++)
			pr[i].lo = pr[i].hi = o->inbound_ports[i];
		if (port_set(c, "inbound_ports", pr, o->ninbound_ports) < 0)
			return -1;
	}
	if (o->proxy_port != 0 && o->nintercept_ports != 0) {
		for (i = 0; i < o->nintercept_ports; i++)
			pr[i].lo = pr[i].hi = o->intercept_ports[i];
		if (port_set(c, "intercept_ports", pr, o->nintercept_ports) < 0)
			return -1;
	}
	if (emit_prefix_list_set(c,
	        (const char *const[]){"ns_exempt4", "ns_exempt6"}, o->ns_exempt,
	        o->nns_exempt, ss->ns) < 0)
		return -1;
	if (o->block_doh_443 &&
	    emit_prefix_list_set(c, (const char *const[]){"doh4", "doh6"},
	        o->doh_block, o->ndoh_block, ss->doh) < 0)
		return -1;

	return 0;
}

/* The three chains. */
static int
emit_chains(struct bctx *c)
{
	/* Chains (no-ops when adopted; the filter policy is re-asserted). */
	if (msg_chain(c, NFT_CHAIN_DENY, -1, NULL, 0, 0) < 0 ||
	    msg_chain(c, NFT_CHAIN_NAT, NF_INET_LOCAL_OUT, "nat",
	        NFT_PRIO_NAT_OUT, NF_ACCEPT) < 0 ||
	    msg_chain(c, NFT_CHAIN_FILTER, NF_INET_LOCAL_OUT, "filter",
	        NFT_PRIO_FILTER_OUT, NF_DROP) < 0)
		return -1;

	return 0;
}

/* Chain deny: log (rate limited), then fail fast. */
static int
emit_deny_chain(struct bctx *c)
{
	const struct nft_opts *o = c->o;
	const struct rrow rows[] = {
	    {.s = {.v = V_LOG,
	         .log_rate = o->log_rate > 1000 ? 1000 : o->log_rate},
	        .skip = o->log_rate == 0},
	    {.s = {.l4proto = IPPROTO_TCP, .v = V_TCP_RESET}},
	    {.s = {.v = V_ICMPX}},
	};

	return msg_rows(c, NFT_CHAIN_DENY, rows, NROWS(rows));
}

/* Chain nat_out: own sockets exempt, then every port 53 to the resolver. */
static int
emit_nat_chain(struct bctx *c, const struct static_sets *ss)
{
	const struct nft_opts *o = c->o;
	const struct rrow rows[] = {
	    {.s = {.mark = true, .v = V_ACCEPT}},
	    {.s = {.dport = 53, .v = V_ACCEPT},
	        .per_family = true,
	        .daddr_set = {ss->ns[0], ss->ns[1]}},
	    /* th dport is only read after an l4proto match. */
	    {.s = {.dport = 53, .v = V_REDIRECT, .redir_port = o->dns_port},
	        .l4proto = {IPPROTO_TCP, IPPROTO_UDP}},
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport_set = "intercept_ports",
	         .v = V_REDIRECT,
	         .redir_port = o->proxy_port},
	        .per_family = true,
	        .daddr_set = {NFT_SET_LEARNED4, NFT_SET_LEARNED6},
	        .skip = o->proxy_port == 0 || o->nintercept_ports == 0},
	};

	return msg_rows(c, NFT_CHAIN_NAT, rows, NROWS(rows));
}

/* filter_out, 1: source-routed packets. */
static int
filter_source_route(struct bctx *c)
{
	/* Source routing (IPv4 LSRR/SSRR, any IPv6 routing header): the
	 * header's destination is a hop, the final one hides in the
	 * option, so the rules below would judge the wrong address. Any
	 * user may set IP_OPTIONS and IPV6_RTHDR. Before the ct rules: an
	 * established flow may not grow a route either. */
	static const struct rrow rows[] = {
	    {.s = {.nfproto = NFPROTO_IPV4,
	         .ip4_option = 131 /* IPOPT_LSRR */,
	         .v = V_DENY}},
	    {.s = {.nfproto = NFPROTO_IPV4,
	         .ip4_option = 137 /* IPOPT_SSRR */,
	         .v = V_DENY}},
	    {.s = {.nfproto = NFPROTO_IPV6, .ip6_rthdr = true, .v = V_DENY}},
	};

	return msg_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 2: established and related flows. */
static int
filter_conntrack(struct bctx *c)
{
	const uint32_t est = NF_CT_STATE_BIT(IP_CT_ESTABLISHED);
	const struct rrow rows[] = {
	    /* Flows the sandbox started: every packet, original direction. */
	    {.s = {.ct_estrel = true,
	         .ct_dir = 1 + IP_CT_DIR_ORIGINAL,
	         .v = V_ACCEPT}},
	    /* What is left of established/related goes in the reply
	     * direction of a flow a peer started. ICMP errors about inbound
	     * packets (the kernel's; no unprivileged socket sends them) and
	     * replies inside the pod (oif lo) pass; so do replies of inbound
	     * TCP connections, a listening socket's (the sandbox's services:
	     * execd, reached on the pod IP), only from the operator's
	     * inbound ports when pinned. Inbound-started UDP and ICMP
	     * "flows" (a peer's one datagram that the sandbox would answer
	     * for ever) fall through to the policy: an answer leaves only
	     * where the sandbox may send anyway. */
	    {.s = {.ct_state = NF_CT_STATE_BIT(IP_CT_RELATED), .v = V_ACCEPT}},
	    {.s = {.ct_state = est, .oif_lo = true, .v = V_ACCEPT}},
	    {.s = {.ct_state = est,
	         .l4proto = IPPROTO_TCP,
	         .sport_set =
	             c->o->ninbound_ports != 0 ? "inbound_ports" : NULL,
	         .v = V_ACCEPT}},
	    /* the kernel's echo replies to a peer's ping (they carry the
	     * peer's payload; no unprivileged socket sends a reply) */
	    {.s = {.ct_state = est,
	         .nfproto = NFPROTO_IPV4,
	         .l4proto = IPPROTO_ICMP,
	         .icmp6_lo = 0, /* echo-reply */
	         .icmp6_hi = 0,
	         .icmp_type = true,
	         .v = V_ACCEPT}},
	    {.s = {.ct_state = est,
	         .nfproto = NFPROTO_IPV6,
	         .l4proto = IPPROTO_ICMPV6,
	         .icmp6_lo = 129, /* echo-reply */
	         .icmp6_hi = 129,
	         .icmp_type = true,
	         .v = V_ACCEPT}},
	};

	return msg_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 3: egressd's own packets, its source ports, ICMPv6 ND. */
static int
filter_own(struct bctx *c)
{
	static const struct rrow rows[] = {
	    /* conntrack cannot see socket marks: nft_cut_denied_flows()
	     * knows egressd's own flows by this ct mark and leaves them
	     * alone */
	    {.s = {.mark = true,
	         .ct_mark_set = true,
	         .counter = "own",
	         .v = V_ACCEPT}},
	    /* egressd's own UDP source ports: the sandbox may never start a
	     * flow from one, or egressd's next socket there would inherit
	     * its NAT. */
	    {.s = {.l4proto = IPPROTO_UDP,
	         .sport_lo = EGRESSD_DNS_SPORT_LO,
	         .sport_hi = EGRESSD_DNS_SPORT_HI,
	         .v = V_DENY}},
	    /* ICMPv6 RS/RA/NS/NA and MLDv2 reports, or IPv6 dies. */
	    {.s = {.nfproto = NFPROTO_IPV6,
	         .l4proto = IPPROTO_ICMPV6,
	         .icmp6_lo = 133,
	         .icmp6_hi = 136,
	         .counter = "nd",
	         .v = V_ACCEPT}},
	    {.s = {.nfproto = NFPROTO_IPV6,
	         .l4proto = IPPROTO_ICMPV6,
	         .icmp6_lo = 143,
	         .icmp6_hi = 143,
	         .counter = "nd",
	         .v = V_ACCEPT}},
	};

	return msg_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 4: exempt nameservers, protected ports, resolver, proxy,
 * loopback. */
static int
filter_local(struct bctx *c, const struct static_sets *ss)
{
	static const uint8_t lo4[4] = {127, 0, 0, 1};
	static const uint8_t lo6[16] = {[15] = 1};
	const struct nft_opts *o = c->o;
	const struct rrow rows[] = {
	    /* Operator-exempt nameservers (not redirected above). */
	    {.s = {.dport = 53, .counter = "ns_exempt", .v = V_ACCEPT},
	        .l4proto = {IPPROTO_UDP, IPPROTO_TCP},
	        .per_family = true,
	        .daddr_set = {ss->ns[0], ss->ns[1]}},
	    /* Control API and operator ports: no unmarked socket reaches
	     * them on any local address (127/8, ::1, the namespace's own
	     * addresses). */
	    {.s = {.dport_set = "protected_ports",
	         .fib_local = true,
	         .counter = "api_block",
	         .v = V_DENY},
	        .l4proto = {IPPROTO_TCP, IPPROTO_UDP},
	        .skip = o->nprotected_ports == 0},
	    /* The resolver, by destination and port: after the NAT redirect
	     * the packet still carries its original oif (THREATS traps). */
	    {.s = {.dport = o->dns_port, .counter = "dns", .v = V_ACCEPT},
	        .l4proto = {IPPROTO_UDP, IPPROTO_TCP},
	        .per_family = true,
	        .daddr = {lo4, lo6}},
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport = o->proxy_port,
	         .counter = "proxy",
	         .v = V_ACCEPT},
	        .per_family = true,
	        .daddr = {lo4, lo6},
	        .skip = o->proxy_port == 0},
	    {.s = {.oif_lo = true, .counter = "loopback", .v = V_ACCEPT}},
	};

	return msg_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 5: channels that bypass the resolver. */
static int
filter_channels(struct bctx *c, const struct static_sets *ss)
{
	/* Alternate resolvers and channels egressd cannot see. */
	const struct rrow rows[] = {
	    /* DoT, and DoQ on udp */
	    {.s = {.dport = 853, .counter = "dot", .v = V_DENY},
	        .l4proto = {IPPROTO_TCP, IPPROTO_UDP}},
	    {.s = {.l4proto = IPPROTO_UDP,
	         .dport = 443,
	         .counter = "quic",
	         .v = V_DENY}},
	    {.s = {.l4proto = IPPROTO_TCP,
	         .dport = 443,
	         .counter = "doh",
	         .v = V_DENY},
	        .per_family = true,
	        .daddr_set = {ss->doh[0], ss->doh[1]}},
	};

	return msg_rows(c, NFT_CHAIN_FILTER, rows, NROWS(rows));
}

/* filter_out, 6: the policy layers, learned sets, the default. */
static int
filter_policy(struct bctx *c, const struct policy *p)
{
	static const struct rrow learned = {
	    .s = {.counter = "learned", .v = V_ACCEPT},
	    .per_family = true,
	    .daddr_set = {NFT_SET_LEARNED4, NFT_SET_LEARNED6}};
	struct rspec s;

	/* Policy IP/CIDR layers with the internal ranges before user rules. */
	if (emit_layers(c, p) < 0 || msg_row(c, NFT_CHAIN_FILTER, &learned) < 0)
		return -1;
	/* Names with port/protocol limits: their elements are the exceptions
	 * to the default, what they may reach under default deny, what they
	 * may not under default allow. */
	if (msg_rule_limited(c, 4, p->default_action) < 0 ||
	    msg_rule_limited(c, 6, p->default_action) < 0)
		return -1;
	memset(&s, 0, sizeof(s));
	s.chain = NFT_CHAIN_FILTER;
	if (p->default_action == POLICY_ALLOW) {
		s.counter = "default_allow";
		s.v = V_ACCEPT;
	} else {
		s.counter = "default_deny";
		s.v = V_DENY;
	}
	return msg_rule(c, &s);
}

/* Chain filter_out, in order. */
static int
emit_filter_chain(
    struct bctx *c, const struct policy *p, const struct static_sets *ss)
{
	if (filter_source_route(c) < 0 || filter_conntrack(c) < 0 ||
	    filter_own(c) < 0 || filter_local(c, ss) < 0 ||
	    filter_channels(c, ss) < 0)
		return -1;
	return filter_policy(c, p);
}

static int
build_ruleset(
    struct bctx *c, const struct policy *p, const struct nft_kstate *ks)
{
	struct static_sets ss = {{NULL, NULL}, {NULL, NULL}};

	if (emit_table(c, ks) < 0 || emit_learned_sets(c, ks) < 0 ||
	    emit_static_sets(c, &ss) < 0 || emit_chains(c) < 0 ||
	    emit_deny_chain(c) < 0 || emit_nat_chain(c, &ss) < 0)
		return -1;
	return emit_filter_chain(c, p, &ss);
}

int
nft_build_ruleset(const struct policy *p, const struct nft_opts *o,
    const struct nft_kstate *ks, struct nft_batch **out, struct err *e)
{
	struct bctx c = {.o = o, .e = e};

	*out = NULL;
	if (check_opts(o, e) < 0)
		return -1;
	c.b = nft_batch_new_();
	if (c.b == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if (nft_batch_begin_(c.b, e) < 0 || build_ruleset(&c, p, ks) < 0 ||
	    nft_batch_finish_(c.b, e) < 0) {
		nft_batch_free(c.b);
		return -1;
	}
	*out = c.b;
	return 0;
}

/* ---- learned elements ---- */

static uint32_t
clamp_ttl(uint32_t ttl, uint32_t lo, uint32_t hi)
{
	if (ttl < lo)
		ttl = lo;
	if (ttl > hi)
		ttl = hi;
	return ttl == 0 ? 1 : ttl;
}

/* A limited-set key: address, l4proto, port, each in 32-bit words. */
static uint32_t
limited_key(
    int family, const uint8_t *addr, uint8_t proto, uint16_t port, uint8_t *key)
{
	unsigned w = family == 4 ? 4 : 16;

	memset(key, 0, w + 8);
	memcpy(key, addr, w);
	key[w] = proto;
	key[w + 4] = (uint8_t)(port >> 8);
	key[w + 5] = (uint8_t)port;
	return w + 8;
}

/*
 * Elements of one family into set messages of at most NFT_ELEMS_PER_MSG:
 * the plain set (addresses without limits) or the limited set (one
 * element per limit of each address that has them).
 */
static int
learn_msgs(struct nft_batch *b, uint16_t type, int family, bool limited,
    const struct nft_learn_addr *a, size_t n, uint32_t lo, uint32_t hi,
    struct err *e)
{
	struct bctx c = {.b = b, .e = e};
	struct nftnl_set *s = NULL;
	size_t i, k, inmsg = 0, total = 0, done = 0;
	unsigned w = family == 4 ? 4 : 16;
	uint8_t key[24], kend[24];
	uint32_t klen;
	uint64_t tmo;
	struct nftnl_set_elem *el;
	const char *set = limited
	    ? (family == 4 ? NFT_SET_LIMITED4 : NFT_SET_LIMITED6)
	    : (family == 4 ? NFT_SET_LEARNED4 : NFT_SET_LEARNED6);

	for (i = 0; i < n; i++)
		if (a[i].family == family && (a[i].nlim != 0) == limited)
			total += limited ? a[i].nlim : 1;
	if (total == 0)
		return 0;
	for (i = 0; i < n; i++) {
		if (a[i].family != family || (a[i].nlim != 0) != limited)
			continue;
		tmo = type == NFT_MSG_NEWSETELEM
		    ? (uint64_t)clamp_ttl(a[i].ttl, lo, hi) * 1000
		    : 0;
		for (k = 0; k < (limited ? a[i].nlim : 1); k++) {
			if (s == NULL && (s = obj_new(&c, type, set)) == NULL)
				return -1;
			if (limited) {
				const struct nft_limit *l = &a[i].lim[k];

				klen = limited_key(
				    family, a[i].addr, l->plo, l->lo, key);
				(void)limited_key(
				    family, a[i].addr, l->phi, l->hi, kend);
				el = elem_add(s, key, klen, 0, tmo);
				if (el != NULL &&
				    nftnl_set_elem_set(el,
				        NFTNL_SET_ELEM_KEY_END, kend, klen) < 0)
					goto out_nomem;
			} else
				el = elem_add(s, a[i].addr, w, 0, tmo);
			if (el == NULL ||
			    (type == NFT_MSG_NEWSETELEM &&
			        elem_comment(el, a[i].name) < 0))
				goto out_nomem;
			done++;
			if (++inmsg == NFT_ELEMS_PER_MSG || done == total) {
				inmsg = 0;
				if (msg_elems(&c, type, &s, set) < 0)
					return -1;
			}
		}
	}
	return 0;
out_nomem:
	err_set(e, "nft: out of memory");
	nftnl_set_free(s);
	return -1;
}

static int
check_learn(const struct nft_learn_addr *a, size_t n, struct err *e)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		if (a[i].family != 4 && a[i].family != 6) {
			err_set(e, "nft: learned address %zu: bad family %u", i,
			    a[i].family);
			return -1;
		}
		if (a[i].nlim > NFT_ADDR_LIMITS_MAX) {
			err_set(e, "nft: learned address %zu: %zu limits", i,
			    a[i].nlim);
			return -1;
		}
		for (k = 0; k < a[i].nlim; k++)
			if (a[i].lim[k].plo > a[i].lim[k].phi ||
			    a[i].lim[k].lo > a[i].lim[k].hi) {
				err_set(e,
				    "nft: learned address %zu: bad limit", i);
				return -1;
			}
	}
	return 0;
}

int
nft_batch_add_learn_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, uint32_t ttl_min, uint32_t ttl_max, bool refresh, struct err *e)
{
	int f, lim;

	if (check_learn(a, n, e) < 0)
		return -1;
	for (f = 4; f <= 6; f += 2)
		for (lim = 0; lim <= 1; lim++) {
			if (learn_msgs(b, NFT_MSG_NEWSETELEM, f, lim, a, n,
			        ttl_min, ttl_max, e) < 0)
				return -1;
			if (!refresh)
				continue;
			if (learn_msgs(b, NFT_MSG_DELSETELEM, f, lim, a, n, 0,
			        0, e) < 0 ||
			    learn_msgs(b, NFT_MSG_NEWSETELEM, f, lim, a, n,
			        ttl_min, ttl_max, e) < 0)
				return -1;
		}
	return 0;
}

int
nft_batch_del_learn_(struct nft_batch *b, const struct nft_learn_addr *a,
    size_t n, struct err *e)
{
	int f, lim;

	if (check_learn(a, n, e) < 0)
		return -1;
	/* add-then-delete: never ENOENT for an element that just expired */
	for (f = 4; f <= 6; f += 2)
		for (lim = 0; lim <= 1; lim++)
			if (learn_msgs(b, NFT_MSG_NEWSETELEM, f, lim, a, n, 1,
			        1, e) < 0 ||
			    learn_msgs(b, NFT_MSG_DELSETELEM, f, lim, a, n, 0,
			        0, e) < 0)
				return -1;
	return 0;
}

/* ---- limits of a name ---- */

static bool
lim_push(struct nft_limit *out, size_t max, size_t *n, unsigned plo,
    unsigned phi, unsigned lo, unsigned hi)
{
	if (*n == max)
		return false;
	out[*n].plo = (uint8_t)plo;
	out[*n].phi = (uint8_t)phi;
	out[*n].lo = (uint16_t)lo;
	out[*n].hi = (uint16_t)hi;
	(*n)++;
	return true;
}

/* The port ranges of v (sorted, disjoint), or their complement. */
static bool
lim_ports(struct nft_limit *out, size_t max, size_t *n, uint8_t proto,
    const struct policy_port_range *v, size_t nv, bool complement)
{
	unsigned cur = 0;
	size_t i;

	for (i = 0; i < nv; i++) {
		if (!complement) {
			if (!lim_push(
			        out, max, n, proto, proto, v[i].lo, v[i].hi))
				return false;
			continue;
		}
		if (v[i].lo > cur &&
		    !lim_push(out, max, n, proto, proto, cur, v[i].lo - 1u))
			return false;
		cur = (unsigned)v[i].hi + 1;
	}
	if (complement && cur <= 65535 &&
	    !lim_push(out, max, n, proto, proto, cur, 65535))
		return false;
	return true;
}

size_t
nft_reach_limits(const struct policy_reach *r, enum policy_action def,
    int family, struct nft_limit *out, size_t max, bool *overflow)
{
	uint8_t icmp = family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	/* protocols policy has no name for, as ranges between the named */
	uint8_t named[3] = {icmp < IPPROTO_TCP ? icmp : IPPROTO_TCP,
	    icmp < IPPROTO_TCP ? IPPROTO_TCP : IPPROTO_UDP,
	    icmp < IPPROTO_TCP ? IPPROTO_UDP : icmp};
	bool cpl = def == POLICY_ALLOW, ok;
	unsigned cur = 0;
	size_t n = 0, i;

	*overflow = false;
	if (r->all || r->none)
		return 0;
	ok = lim_ports(out, max, &n, IPPROTO_TCP, r->tcp, r->ntcp, cpl) &&
	    lim_ports(out, max, &n, IPPROTO_UDP, r->udp, r->nudp, cpl);
	if (ok && r->icmp != cpl)
		ok = lim_push(out, max, &n, icmp, icmp, 0, 65535);
	if (ok && r->other != cpl) {
		for (i = 0; ok && i < 3; i++) {
			if (named[i] > cur)
				ok = lim_push(
				    out, max, &n, cur, named[i] - 1u, 0, 65535);
			cur = named[i] + 1u;
		}
		if (ok)
			ok = lim_push(out, max, &n, cur, 255, 0, 65535);
	}
	if (!ok) {
		*overflow = true;
		/* a denial left out would open it: deny the whole address */
		if (cpl) {
			n = 0;
			(void)lim_push(out, max, &n, 0, 255, 0, 65535);
		}
	}
	return n;
}

int
nft_build_learn(const struct nft_learn_addr *a, size_t n, uint32_t ttl_min,
    uint32_t ttl_max, struct nft_batch **out, struct err *e)
{
	struct nft_batch *b;

	*out = NULL;
	if (n > NFT_LEARN_BATCH_MAX) {
		err_set(e, "nft: %zu addresses in one answer (max %d)", n,
		    NFT_LEARN_BATCH_MAX);
		return -1;
	}
	b = nft_batch_new_();
	if (b == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if (nft_batch_begin_(b, e) < 0 ||
	    nft_batch_add_learn_(b, a, n, ttl_min, ttl_max, true, e) < 0 ||
	    nft_batch_finish_(b, e) < 0) {
		nft_batch_free(b);
		return -1;
	}
	*out = b;
	return 0;
}

int
nft_build_teardown(struct nft_batch **out, struct err *e)
{
	struct bctx c = {.e = e};

	*out = NULL;
	c.b = nft_batch_new_();
	if (c.b == NULL) {
		err_set(e, "nft: out of memory");
		return -1;
	}
	if (nft_batch_begin_(c.b, e) < 0 ||
	    msg_named(&c, NFT_MSG_DELTABLE, NFT_TABLE) < 0 ||
	    nft_batch_finish_(c.b, e) < 0) {
		nft_batch_free(c.b);
		return -1;
	}
	*out = c.b;
	return 0;
}

bool
nft_addr_internal_(int family, const uint8_t *addr)
{
	return (special_addr_flags(family, addr) & SPECIAL_DROP) != 0;
}
