/*
 * dns_cache: hash table with chaining for lookups plus one tail queue
 * (sys/queue.h) in recency order for eviction. Expired entries are dropped lazily
 * on lookup and, under pressure, by LRU eviction.
 */
#include "egressd/dns/dns_cache.h"
#include "util/hash.h"
#include "util/text.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#define DNS_CACHE_BUCKETS_MIN 64u

struct dns_cache_entry {
	struct dns_cache_entry *hnext; /* bucket chain */
	TAILQ_ENTRY(dns_cache_entry) lru; /* first = most recent */
	uint64_t hash;
	struct dns_cache_key key;
	uint64_t stored_ms, expires_ms;
	size_t cost; /* bytes charged to the byte cap */
	struct dns_cache_memo memo;
	size_t len;
	uint8_t msg[]; /* len bytes */
};

struct dns_cache {
	struct dns_cache_entry **buckets;
	size_t nbuckets; /* power of two */
	TAILQ_HEAD(dns_cache_lru, dns_cache_entry) lru;
	size_t count, bytes;
	size_t max_entries, max_bytes;
	uint64_t evictions;
	uint64_t next_entry; /* memo entry numbers */
	now_clock_fn clock;
	void *clock_arg;
};

static uint64_t
dns_cache_hash(const struct dns_cache_key *k)
{
	uint64_t h = hash_fnv1a(k->name, k->name_len);

	h ^= (uint64_t)k->qtype << 24 ^ (uint64_t)k->qclass << 8 ^ k->flags;
	return h * HASH_FNV1A_PRIME;
}

static bool
dns_cache_key_eq(const struct dns_cache_key *a, const struct dns_cache_key *b)
{
	return a->name_len == b->name_len && a->qtype == b->qtype &&
	    a->qclass == b->qclass && a->flags == b->flags &&
	    memcmp(a->name, b->name, a->name_len) == 0;
}

struct dns_cache *
dns_cache_new(
    size_t max_entries, size_t max_bytes, now_clock_fn clock, void *clock_arg)
{
	struct dns_cache *c;
	size_t nb = DNS_CACHE_BUCKETS_MIN;

	if (clock == NULL)
		return NULL;
	if (max_entries == 0)
		max_entries = DNS_CACHE_ENTRIES_DEFAULT;
	if (max_bytes == 0)
		max_bytes = DNS_CACHE_BYTES_DEFAULT;
	while (nb < max_entries && nb < (1u << 24))
		nb <<= 1;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->buckets = calloc(nb, sizeof(*c->buckets));
	if (c->buckets == NULL) {
		free(c);
		return NULL;
	}
	c->nbuckets = nb;
	TAILQ_INIT(&c->lru);
	c->max_entries = max_entries;
	c->max_bytes = max_bytes;
	c->clock = clock;
	c->clock_arg = clock_arg;
	return c;
}

static void
dns_cache_remove(struct dns_cache *c, struct dns_cache_entry *en)
{
	struct dns_cache_entry **pp = &c->buckets[en->hash & (c->nbuckets - 1)];

	while (*pp != NULL && *pp != en)
		pp = &(*pp)->hnext;
	if (*pp == en)
		*pp = en->hnext;
	TAILQ_REMOVE(&c->lru, en, lru);
	c->count--;
	c->bytes -= en->cost;
	free(en);
}

static struct dns_cache_entry *
dns_cache_find(
    struct dns_cache *c, const struct dns_cache_key *k, uint64_t hash)
{
	struct dns_cache_entry *en = c->buckets[hash & (c->nbuckets - 1)];

	for (; en != NULL; en = en->hnext)
		if (en->hash == hash && dns_cache_key_eq(&en->key, k))
			return en;
	return NULL;
}

void
dns_cache_free(struct dns_cache *c)
{
	if (c == NULL)
		return;
	dns_cache_flush(c);
	free(c->buckets);
	free(c);
}

int
dns_cache_key_make(struct dns_cache_key *k, const uint8_t *wire,
    size_t wire_len, uint16_t qtype, uint16_t qclass, unsigned flags)
{
	size_t i;

	if (wire_len == 0 || wire_len > DNS_CACHE_KEY_NAME_MAX)
		return -1;
	memset(k, 0, sizeof(*k));
	/*
	 * Folding every byte is safe for wire names: length octets are
	 * <= 63, below 'A', so they are never changed.
	 */
	for (i = 0; i < wire_len; i++) {
		uint8_t ch = wire[i];

		k->name[i] = (uint8_t)text_lower(ch);
	}
	k->name_len = (uint16_t)wire_len;
	k->qtype = qtype;
	k->qclass = qclass;
	k->flags = (uint8_t)flags;
	return 0;
}

struct dns_cache_memo *
dns_cache_put(struct dns_cache *c, const struct dns_cache_key *k,
    const uint8_t *msg, size_t len, uint32_t ttl_s)
{
	struct dns_cache_entry *en, *old;
	uint64_t hash, now;
	size_t cost;

	if (ttl_s == 0 || len == 0 || len > DNS_CACHE_MSG_MAX)
		return NULL;
	if (ttl_s > DNS_CACHE_TTL_MAX)
		ttl_s = DNS_CACHE_TTL_MAX;
	cost = sizeof(*en) + len;
	if (cost > c->max_bytes)
		return NULL;
	hash = dns_cache_hash(k);
	old = dns_cache_find(c, k, hash);
	if (old != NULL)
		dns_cache_remove(c, old);
	while (!TAILQ_EMPTY(&c->lru) &&
	    (c->count + 1 > c->max_entries || c->bytes + cost > c->max_bytes)) {
		dns_cache_remove(c, TAILQ_LAST(&c->lru, dns_cache_lru));
		c->evictions++;
	}
	en = malloc(sizeof(*en) + len);
	if (en == NULL)
		return NULL;
	memset(en, 0, sizeof(*en));
	en->hash = hash;
	en->key = *k;
	now = c->clock(c->clock_arg);
	en->stored_ms = now;
	en->expires_ms = now + (uint64_t)ttl_s * 1000u;
	en->cost = cost;
	en->len = len;
	en->memo.entry = ++c->next_entry;
	memcpy(en->msg, msg, len);
	en->hnext = c->buckets[hash & (c->nbuckets - 1)];
	c->buckets[hash & (c->nbuckets - 1)] = en;
	TAILQ_INSERT_HEAD(&c->lru, en, lru);
	c->count++;
	c->bytes += cost;
	return &en->memo;
}

const uint8_t *
dns_cache_get(struct dns_cache *c, const struct dns_cache_key *k, size_t *len,
    uint32_t *age_s, struct dns_cache_memo **memo)
{
	struct dns_cache_entry *en;
	uint64_t now;

	en = dns_cache_find(c, k, dns_cache_hash(k));
	if (en == NULL)
		return NULL;
	now = c->clock(c->clock_arg);
	if (now >= en->expires_ms) {
		dns_cache_remove(c, en);
		return NULL;
	}
	TAILQ_REMOVE(&c->lru, en, lru);
	TAILQ_INSERT_HEAD(&c->lru, en, lru);
	*len = en->len;
	*age_s =
	    now > en->stored_ms ? (uint32_t)((now - en->stored_ms) / 1000u) : 0;
	if (memo != NULL)
		*memo = &en->memo;
	return en->msg;
}

struct dns_cache_memo *
dns_cache_memo_find(
    struct dns_cache *c, const struct dns_cache_key *k, uint64_t entry)
{
	struct dns_cache_entry *en = dns_cache_find(c, k, dns_cache_hash(k));

	if (en == NULL || en->memo.entry != entry)
		return NULL;
	return &en->memo;
}

void
dns_cache_drop(struct dns_cache *c, const struct dns_cache_key *k)
{
	struct dns_cache_entry *en = dns_cache_find(c, k, dns_cache_hash(k));

	if (en != NULL)
		dns_cache_remove(c, en);
}

void
dns_cache_flush(struct dns_cache *c)
{
	while (!TAILQ_EMPTY(&c->lru))
		dns_cache_remove(c, TAILQ_FIRST(&c->lru));
}

size_t
dns_cache_count(const struct dns_cache *c)
{
	return c->count;
}

size_t
dns_cache_bytes(const struct dns_cache *c)
{
	return c->bytes;
}

uint64_t
dns_cache_evictions(const struct dns_cache *c)
{
	return c->evictions;
}
