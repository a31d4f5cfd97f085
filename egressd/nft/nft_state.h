/*
 * nft_state: struct nft, shared by the files of the runtime side (nft.c,
 * nft_mirror.c, nft_sock.c, nft_apply.c, nft_learn.c, nft_learnq.c).
 */
#ifndef EGRESSD_NFT_STATE_H
#define EGRESSD_NFT_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"

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
	/* moves whenever a lookup's answer may lose a name: an entry
	 * removed (expired, evicted, cut, cleared) or a name dropped from
	 * one (nft_learned_gen) */
	uint64_t learned_gen;
	/* ... except when an entry expired (nft_verdict_gen) */
	uint64_t verdict_gen;
	/* told each time verdict_gen moves (nft_on_verdict_gen) */
	void (*gen_moved)(void *arg);
	void *gen_arg;
	/* told of each name an entry loses (nft_on_forget) */
	void (*forget_fn)(
	    void *arg, const char *name, int family, const uint8_t *addr);
	void *forget_arg;
	/* told of each address an answer taught (nft_on_learned) */
	void (*learned_fn)(
	    void *arg, const char *name, int family, const uint8_t *addr);
	void *learned_arg;
	uint64_t pin_gen;
	size_t sndbuf, rcvbuf; /* socket buffer sizes already requested */
	uint8_t *rbuf; /* NFT_RECV_BUF bytes for answers */
	/* The socket that owns the in-kernel judge's table (nft_kjudge.c):
	 * closed, by nft_free or by egressd's death, it takes the table
	 * with it. */
	struct mnl_socket *knl;

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

#endif
