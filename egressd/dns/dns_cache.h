/*
 * dns_cache: a bounded LRU cache of raw upstream DNS answers.
 *
 * What is stored is the upstream's answer exactly as received (after
 * c-ares matched it to our query), never the rewritten one: policy can
 * change between insert and hit, so the resolver re-runs the whole answer
 * policy (chain check, rebinding filter, learning) on every hit, with TTLs
 * aged by the time spent in the cache. The cache itself knows nothing of
 * DNS beyond its key; TTLs are computed by the caller.
 *
 * Bounds: an entry count cap and a byte cap (entry overhead + name +
 * message), both enforced on insert by evicting the least recently used
 * entries. Time comes from an injected monotonic clock in milliseconds, so
 * expiry is unit-testable. Single-threaded (the event loop).
 */
#ifndef EGRESSD_DNS_CACHE_H
#define EGRESSD_DNS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/now.h"

#define DNS_CACHE_ENTRIES_DEFAULT 8192 /* entries */
#define DNS_CACHE_BYTES_DEFAULT (8u << 20) /* bytes, overhead included */
#define DNS_CACHE_TTL_MAX 86400 /* longer TTLs are cut to this */
#define DNS_CACHE_MSG_MAX 65535 /* one stored message */
#define DNS_CACHE_KEY_NAME_MAX 255 /* wire name bytes */

/* Key flags: answers differ with DNSSEC bits, so they are in the key. */
#define DNS_CACHE_KEY_DO 0x1u
#define DNS_CACHE_KEY_CD 0x2u

struct dns_cache_key {
	uint8_t name[DNS_CACHE_KEY_NAME_MAX]; /* wire form, lowercased */
	uint16_t name_len;
	uint16_t qtype, qclass;
	uint8_t flags; /* DNS_CACHE_KEY_* */
};

/*
 * Caller-owned notes kept with an entry, zeroed on insert: the resolver
 * records there until when the addresses of this answer are known to be
 * learned, so a cache hit does not have to repeat the nft round trip.
 */
struct dns_cache_memo {
	uint64_t tag; /* what the note is valid for (0: nothing) */
	uint64_t until_ms; /* monotonic */
	uint64_t evicted; /* stats nft_learned_evicted when written */
	uint64_t entry; /* set by the cache: which stored answer (never 0) */
};

struct dns_cache;

/*
 * max_entries/max_bytes 0 pick the defaults. clock is required. NULL on
 * allocation failure.
 */
struct dns_cache *dns_cache_new(
    size_t max_entries, size_t max_bytes, now_clock_fn clock, void *clock_arg);
void dns_cache_free(struct dns_cache *c); /* NULL is a no-op */

/*
 * Builds a key from a wire name (case folded here). -1 if the name is
 * longer than DNS_CACHE_KEY_NAME_MAX.
 */
int dns_cache_key_make(struct dns_cache_key *k, const uint8_t *wire,
    size_t wire_len, uint16_t qtype, uint16_t qclass, unsigned flags);

/*
 * Stores a copy of msg for ttl_s seconds (cut to DNS_CACHE_TTL_MAX),
 * replacing an entry with the same key, and returns its (zeroed) memo,
 * valid until the next put/get/flush on c. ttl_s == 0, an empty or
 * oversized message, or one larger than the byte cap is not stored
 * (NULL). Evicts LRU entries until both caps hold.
 */
struct dns_cache_memo *dns_cache_put(struct dns_cache *c,
    const struct dns_cache_key *k, const uint8_t *msg, size_t len,
    uint32_t ttl_s);

/*
 * Looks k up. On a hit returns a pointer to the stored message (valid
 * until the next put/get/flush on c), its length, the whole seconds it
 * has spent in the cache (*age_s), its memo (when memo is not NULL; same
 * validity) and marks it most recently used. An expired entry is removed
 * and reported as a miss (NULL).
 */
const uint8_t *dns_cache_get(struct dns_cache *c, const struct dns_cache_key *k,
    size_t *len, uint32_t *age_s, struct dns_cache_memo **memo);

/*
 * The memo of k's entry when it is still the stored answer the memo
 * entry number names (an asynchronous learn finishing later: the entry
 * may have been replaced or evicted meanwhile), else NULL. Changes no
 * LRU order; same validity as dns_cache_get's.
 */
struct dns_cache_memo *dns_cache_memo_find(
    struct dns_cache *c, const struct dns_cache_key *k, uint64_t entry);
/* Removes the entry of k, if any. */
void dns_cache_drop(struct dns_cache *c, const struct dns_cache_key *k);
void dns_cache_flush(struct dns_cache *c);
size_t dns_cache_count(const struct dns_cache *c);
size_t dns_cache_bytes(const struct dns_cache *c);
/* Evictions by the caps (not expiry), for status. */
uint64_t dns_cache_evictions(const struct dns_cache *c);

#endif
