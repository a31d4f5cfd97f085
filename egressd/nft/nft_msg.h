/*
 * nft_msg: the building blocks of a batch (nft_msg.c): a build context and
 * messages per libnftnl object, used by the rule, table and element builders.
 */
#ifndef EGRESSD_NFT_MSG_H
#define EGRESSD_NFT_MSG_H

#include <stdbool.h>
#include <stdint.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"

struct nftnl_set;
struct nftnl_set_elem;
struct policy_port_range;

/* nft's datatype ids, so `nft list ruleset` prints sets readably. */
#define NFT_TYPE_IPADDR 7
#define NFT_TYPE_IP6ADDR 8
#define NFT_TYPE_INET_PROTO 12
#define NFT_TYPE_INET_SERVICE 13
#define NFT_TYPE_BITS 6 /* nft's concatenated type: (a << 6 | b) << 6 | c */

#define LOOPBACK_IFINDEX 1 /* lo is ifindex 1 in every namespace */

struct bctx {
	struct nft_batch *b;
	const struct nft_opts *o;
	const char *table; /* NULL: NFT_TABLE */
	struct err *e;
	unsigned nsets; /* for generated set names */
	uint32_t set_id;
};

#define NROWS(rows) (sizeof(rows) / sizeof((rows)[0]))

struct rng {
	uint8_t lo[16], hi[16];
};

/*
 * Element names longer than NFT_COMMENT_NAME_MAX: packed into out (at
 * least NFT_PACKED_NAME_MAX bytes); returns the length, 0 when name is
 * not a DNS name of at most POLICY_NAME_MAX bytes. Unpack: 0, or -1 when
 * in is not a packed name; out gets at least POLICY_NAME_MAX + 1 bytes.
 */
size_t nft_name_pack_(const char *name, uint8_t *out, size_t outlen);
int nft_name_unpack_(const uint8_t *in, size_t len, char *out, size_t outlen);

/*
 * Every function below returns 0/-1 (a pointer or NULL) and sets c->e on
 * failure. nft_msg_obj_new(): a libnftnl object of the message type, in
 * our table, named name; nft_msg_obj() writes it as one labelled message
 * and frees it (takes ownership of o).
 */
void *nft_msg_obj_new(struct bctx *c, uint16_t type, const char *name);
int nft_msg_obj(struct bctx *c, uint16_t type, void *o, const char *what);
int nft_msg_named(struct bctx *c, uint16_t type, const char *name);
int nft_msg_table(struct bctx *c);
int nft_msg_chain(struct bctx *c, const char *name, int hooknum,
    const char *ctype, int prio, int policy);
int nft_msg_set(struct bctx *c, const char *name, uint32_t keytype,
    uint32_t keylen, uint32_t flags, uint32_t size);
/* Elements: added to s (NULL when out of memory), commented with the name
 * they were learned for, sent in messages of at most NFT_ELEMS_PER_MSG. */
struct nftnl_set_elem *nft_msg_elem_add(struct nftnl_set *s, const uint8_t *key,
    uint32_t klen, uint32_t flags, uint64_t timeout_ms);
int nft_msg_elem_comment(struct nftnl_set_elem *el, const char *name);
int nft_msg_elems(
    struct bctx *c, uint16_t type, struct nftnl_set **s, const char *set);
int nft_msg_interval_set(struct bctx *c, const char *name, uint32_t keytype,
    unsigned w, struct rng *r, size_t n);
uint32_t nft_msg_addr_keytype(int family);
int nft_msg_addr_set(struct bctx *c, const char *name, int family,
    const struct policy_prefix *const *pfx, size_t n);
int nft_msg_port_set(struct bctx *c, const char *name,
    const struct policy_port_range *p, size_t n);

#endif
