/*
 * Compiled lookup structures of one rule list ("layer").
 *
 * Names: two open-addressing hash tables, one for exact domains and one
 * for wildcard suffixes ("*.a.com" is stored under "a.com"), each keeping
 * the lowest rule index per key. A lookup hashes the name's suffixes
 * right to left in one pass (the hash is over reversed bytes, so every
 * suffix's hash is a prefix state) and probes once per label: O(labels)
 * probes, independent of the number of rules. The lowest index found is
 * the first match in list order.
 *
 * Addresses: one binary trie per family; a node lists the rules whose
 * prefix ends there. A lookup walks at most 32/128 bits and decides at
 * the deepest node with an applicable rule (longest prefix), deny before
 * allow at equal length.
 *
 * A key can name several rules (the same name with different ports or
 * protocols): the table keeps the first, and next[] chains the others in
 * list order, for policy_layer_each_name (the walk that computes what a
 * name may reach when rules restrict ports or protocols).
 *
 * The layer is the host-level view: deny request rules (issue 37) are
 * left out of it, as they decide requests, never a host. The request
 * matcher walks a layer built with every rule (policy_layer_build_all).
 */
#include <stdlib.h>
#include <string.h>

#include "policy/policy_int.h"
#include "util/hash.h"
#include "util/grow.h"

/* 16 bytes: four entries per cache line. */
struct dent {
	const char *key; /* NULL = empty slot */
	uint32_t hash;
	uint32_t idx;
};

/*
 * A Bloom filter (two bits per key out of 16 per key) sits in front of
 * each table: it stays in cache where the table does not, so probing
 * the suffixes no rule names (most of them) costs no cache miss.
 */
struct dtab {
	struct dent *ents;
	size_t cap; /* power of two, > 2 * used */
	size_t used;
	uint64_t *bloom;
	size_t bloom_mask; /* bits - 1, bits a power of two */
};

struct tnode {
	uint32_t child[2]; /* 0 = none (the root is never a child) */
	uint32_t head; /* link index + 1, 0 = no rule ends here */
};

struct tlink {
	uint32_t rule;
	uint32_t next; /* link index + 1 */
};

struct trie {
	struct tnode *nodes;
	size_t n, cap;
	struct tlink *links;
	size_t nl, cl;
};

#define CHAIN_END UINT32_MAX

struct policy_layer {
	const struct policy_rule *rules;
	size_t nrules;
	struct dtab exact, wild;
	struct trie t4, t6;
	uint32_t *next; /* next rule of the same name key, or CHAIN_END */
	uint32_t *tail; /* while building: last rule of a key's chain */
	size_t nrestricted; /* name rules restricted to ports/protocols */
};

static uint32_t
hash_rev(const char *s, size_t n)
{
	uint32_t h = HASH_FNV1A32_BASIS;

	while (n-- > 0)
		h = hash_fnv1a32_byte(h, (unsigned char)s[n]);
	return h;
}

static int
dtab_init(struct dtab *t, size_t n)
{
	size_t cap = 16, bits = 64;

	while (cap < 2 * n + 2)
		cap *= 2;
	while (bits < 16 * n)
		bits *= 2;
	t->ents = calloc(cap, sizeof(*t->ents));
	t->bloom = calloc(bits / 64, sizeof(uint64_t));
	t->cap = cap;
	t->used = 0;
	t->bloom_mask = bits - 1;
	return t->ents == NULL || t->bloom == NULL ? -1 : 0;
}

static size_t
bloom_bit2(uint32_t h)
{
	return (size_t)((h >> 16) ^ (h * 0x9e3779b1u));
}

static bool
bloom_maybe(const struct dtab *t, uint32_t h)
{
	size_t a = h & t->bloom_mask, b = bloom_bit2(h) & t->bloom_mask;

	return (t->bloom[a / 64] >> (a % 64) & 1) &&
	    (t->bloom[b / 64] >> (b % 64) & 1);
}

static void
bloom_add(struct dtab *t, uint32_t h)
{
	size_t a = h & t->bloom_mask, b = bloom_bit2(h) & t->bloom_mask;

	t->bloom[a / 64] |= 1ull << (a % 64);
	t->bloom[b / 64] |= 1ull << (b % 64);
}

static struct dent *
dtab_find(const struct dtab *t, const char *key, size_t klen, uint32_t h)
{
	size_t i = h & (t->cap - 1);

	for (;;) {
		struct dent *d = &t->ents[i];
		if (d->key == NULL ||
		    (d->hash == h && strncmp(d->key, key, klen) == 0 &&
		        d->key[klen] == '\0'))
			return d;
		i = (i + 1) & (t->cap - 1);
	}
}

/* Keeps the first (lowest) index of a key; later ones are chained. */
static void
dtab_put(struct policy_layer *l, struct dtab *t, const char *key, long idx)
{
	size_t klen = strlen(key);
	uint32_t h = hash_rev(key, klen);
	struct dent *d = dtab_find(t, key, klen, h);
	uint32_t i = (uint32_t)(idx >> 2), head;

	l->next[i] = CHAIN_END;
	if (d->key != NULL) {
		head = d->idx >> 2;
		l->next[l->tail[head]] = i;
		l->tail[head] = i;
		return;
	}
	l->tail[i] = i;
	d->key = key;
	d->hash = h;
	d->idx = (uint32_t)idx;
	t->used++;
	bloom_add(t, h);
}

static long
dtab_get(const struct dtab *t, const char *key, size_t klen, uint32_t h)
{
	const struct dent *d;

	if (t->used == 0 || !bloom_maybe(t, h))
		return -1;
	d = dtab_find(t, key, klen, h);
	return d->key == NULL ? -1 : (long)d->idx;
}

static int
trie_grow(struct trie *t)
{
	return grow_array(&t->nodes, &t->cap, t->n + 1, sizeof(*t->nodes), 64);
}

static int
trie_init(struct trie *t)
{
	memset(t, 0, sizeof(*t));
	if (trie_grow(t) == -1)
		return -1;
	memset(&t->nodes[0], 0, sizeof(t->nodes[0]));
	t->n = 1;
	return 0;
}

static int
bit_at(const uint8_t *a, unsigned i)
{
	return (a[i / 8] >> (7 - i % 8)) & 1;
}

static int
trie_insert(struct trie *t, const struct policy_prefix *p, uint32_t rule)
{
	uint32_t cur = 0;
	unsigned i;

	for (i = 0; i < p->len; i++) {
		int b = bit_at(p->addr, i);
		if (t->nodes[cur].child[b] == 0) {
			if (trie_grow(t) == -1)
				return -1;
			memset(&t->nodes[t->n], 0, sizeof(t->nodes[0]));
			t->nodes[cur].child[b] = (uint32_t)t->n++;
		}
		cur = t->nodes[cur].child[b];
	}
	if (grow_array(&t->links, &t->cl, t->nl + 1, sizeof(*t->links), 32) ==
	    -1)
		return -1;
	t->links[t->nl].rule = rule;
	t->links[t->nl].next = t->nodes[cur].head;
	t->nodes[cur].head = (uint32_t)++t->nl;
	return 0;
}

void
policy_layer_free(struct policy_layer *l)
{
	if (l == NULL)
		return;
	free(l->exact.ents);
	free(l->wild.ents);
	free(l->exact.bloom);
	free(l->wild.bloom);
	free(l->t4.nodes);
	free(l->t4.links);
	free(l->t6.nodes);
	free(l->t6.links);
	free(l->next);
	free(l->tail);
	free(l);
}

/* Table value: rule index, a "has limits" bit and the action bit
 * (indexes stay below 2^30), so a lookup never touches the rule. */
static long
entry_val(const struct policy_rule *r, size_t i)
{
	return (long)(i << 2) | (long)policy_rule_restricted(r) << 1 |
	    (r->action == POLICY_ALLOW);
}

static int
layer_add(struct policy_layer *l, size_t i, bool all)
{
	const struct policy_rule *r = &l->rules[i];

	/* A deny request rule denies some requests, never the host: the
	 * host-level view (DNS, nft, SNI) must not see it, or the first such
	 * rule would shadow the allow rules after it. */
	if (!all && r->action == POLICY_DENY && policy_rule_is_request(r))
		return 0;
	switch (r->kind) {
	case POLICY_TARGET_DOMAIN:
		l->nrestricted += policy_rule_restricted(r);
		dtab_put(l, &l->exact, r->target, entry_val(r, i));
		return 0;
	case POLICY_TARGET_WILDCARD:
		l->nrestricted += policy_rule_restricted(r);
		dtab_put(l, &l->wild, r->target + 2, entry_val(r, i));
		return 0;
	case POLICY_TARGET_IP:
	case POLICY_TARGET_CIDR:
		return trie_insert(r->prefix.family == 4 ? &l->t4 : &l->t6,
		    &r->prefix, (uint32_t)i);
	}
	return 0;
}

static struct policy_layer *
layer_build(const struct policy_rule *rules, size_t n, bool all)
{
	struct policy_layer *l = calloc(1, sizeof(*l));
	size_t i, nd = 0, nw = 0;

	if (l == NULL)
		return NULL;
	l->rules = rules;
	l->nrules = n;
	for (i = 0; i < n; i++) {
		nd += rules[i].kind == POLICY_TARGET_DOMAIN;
		nw += rules[i].kind == POLICY_TARGET_WILDCARD;
	}
	l->next = calloc(n + 1, sizeof(*l->next));
	l->tail = calloc(n + 1, sizeof(*l->tail));
	if (l->next == NULL || l->tail == NULL ||
	    dtab_init(&l->exact, nd) == -1 || dtab_init(&l->wild, nw) == -1 ||
	    trie_init(&l->t4) == -1 || trie_init(&l->t6) == -1)
		goto out_free;
	for (i = 0; i < n; i++)
		if (layer_add(l, i, all) == -1)
			goto out_free;
	free(l->tail);
	l->tail = NULL;
	return l;
out_free:
	policy_layer_free(l);
	return NULL;
}

struct policy_layer *
policy_layer_build(const struct policy_rule *rules, size_t n)
{
	return layer_build(rules, n, false);
}

struct policy_layer *
policy_layer_build_all(const struct policy_rule *rules, size_t n)
{
	return layer_build(rules, n, true);
}

/* At most one entry per label boundary of a name, plus the exact one. */
#define NAME_HITS_MAX (POLICY_NAME_MAX / 2 + 2)

/*
 * The entries name[0..len) meets: the exact one, then "*.suffix" for each
 * suffix after a dot, shortest first (one hash pass from the right end).
 * Returns how many went into hits (at most NAME_HITS_MAX).
 */
static size_t
name_hits(const struct policy_layer *l, const char *name, size_t len,
    long hits[NAME_HITS_MAX])
{
	uint32_t h = HASH_FNV1A32_BASIS;
	size_t i, n = 0;
	long v;

	if (l == NULL || len == 0 || (l->exact.used == 0 && l->wild.used == 0))
		return 0;
	for (i = len; i-- > 0;) {
		h = hash_fnv1a32_byte(h, (unsigned char)name[i]);
		if (i == 0)
			v = dtab_get(&l->exact, name, len, h);
		else if (name[i - 1] == '.')
			v = dtab_get(&l->wild, name + i, len - i, h);
		else
			continue;
		if (v >= 0 && n < NAME_HITS_MAX)
			hits[n++] = v;
	}
	return n;
}

long
policy_layer_match_name(const struct policy_layer *l, const char *name,
    size_t len, enum policy_action *act, bool *restricted)
{
	long hits[NAME_HITS_MAX], best = -1;
	size_t i, n = name_hits(l, name, len, hits);

	for (i = 0; i < n; i++)
		if (best < 0 || hits[i] >> 2 < best >> 2)
			best = hits[i];
	/* The action travels in the entry: no access to the rule itself. */
	if (best >= 0 && act != NULL)
		*act = (best & 1) ? POLICY_ALLOW : POLICY_DENY;
	if (best >= 0 && restricted != NULL)
		*restricted = (best & 2) != 0;
	return best < 0 ? -1 : best >> 2;
}

size_t
policy_layer_nrestricted(const struct policy_layer *l)
{
	return l == NULL ? 0 : l->nrestricted;
}

size_t
policy_layer_each_name(const struct policy_layer *l, const char *name,
    size_t len, bool (*fn)(void *arg, size_t i), void *arg)
{
	uint32_t cur[NAME_HITS_MAX];
	long hits[NAME_HITS_MAX];
	size_t k, ncur = name_hits(l, name, len, hits), calls = 0;

	for (k = 0; k < ncur; k++)
		cur[k] = (uint32_t)(hits[k] >> 2);
	/* merge the chains: lowest index first = list order */
	while (ncur > 0) {
		size_t m = 0;

		for (k = 1; k < ncur; k++)
			if (cur[k] < cur[m])
				m = k;
		calls++;
		if (!fn(arg, cur[m]))
			break;
		cur[m] = l->next[cur[m]];
		if (cur[m] == CHAIN_END)
			cur[m] = cur[--ncur];
	}
	return calls;
}

/* Deny before allow, then list order, among applicable rules of a node. */
static long
node_decide(const struct policy_layer *l, const struct trie *t,
    const struct tnode *nd, unsigned proto, uint16_t port)
{
	long deny = -1, allow = -1;
	uint32_t k;

	for (k = nd->head; k != 0; k = t->links[k - 1].next) {
		long i = (long)t->links[k - 1].rule;
		const struct policy_rule *r = &l->rules[i];
		if (!policy_rule_port_ok(r, proto, port))
			continue;
		if (r->action == POLICY_DENY) {
			if (deny < 0 || i < deny)
				deny = i;
		} else if (allow < 0 || i < allow)
			allow = i;
	}
	return deny >= 0 ? deny : allow;
}

long
policy_layer_match_addr(const struct policy_layer *l, int family,
    const uint8_t *addr, unsigned proto, uint16_t port)
{
	const struct trie *t;
	uint32_t path[129], cur = 0;
	unsigned bits, depth = 0, i;

	if (l == NULL || (family != 4 && family != 6))
		return -1;
	t = family == 4 ? &l->t4 : &l->t6;
	bits = family == 4 ? 32 : 128;
	path[depth++] = 0;
	for (i = 0; i < bits; i++) {
		cur = t->nodes[cur].child[bit_at(addr, i)];
		if (cur == 0)
			break;
		path[depth++] = cur;
	}
	while (depth-- > 0) {
		const struct tnode *nd = &t->nodes[path[depth]];
		if (nd->head == 0)
			continue;
		long v = node_decide(l, t, nd, proto, port);
		if (v >= 0)
			return v;
	}
	return -1;
}
