/*
 * nft_sock: the netlink socket, sends and dumps (nft_sock.c).
 */
#ifndef EGRESSD_NFT_SOCK_H
#define EGRESSD_NFT_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/base/stats.h"
#include "egressd/nft/nft.h"

struct names {
	char **v;
	size_t n;
	bool overflow;
};

struct mnl_socket;

/* A netlink socket for batches: bound, the kernel's extended acks
 * without the echoed message, each receive bounded by
 * NFT_ACK_TIMEOUT_MS. NULL and e (with what it means) when it cannot. */
struct mnl_socket *nft_sock_open_(struct err *e);
/* A finished batch sent on the socket, every ack collected (0/-1 with e
 * naming the message the kernel refused); a dump or get request run
 * through cb. Dumps of the table's chain and set names; the learned
 * elements in the kernel adopted into the mirror. */
/* op: what the batch does, for the failure counters (stats.h). */
int nft_sock_send(
    struct nft *n, struct nft_batch *b, enum stats_nft_op op, struct err *e);
/* ... on another of n's sockets (nft_kjudge.c's). */
int nft_sock_send_on(struct nft *n, struct mnl_socket *nl, struct nft_batch *b,
    enum stats_nft_op op, struct err *e);
int nft_sock_request(struct nft *n, struct nlmsghdr *req, mnl_cb_t cb,
    void *arg, struct err *e, const char *what);
void nft_sock_names_clear(struct names *x);
void nft_sock_size_check(struct nft *n);
int nft_sock_table_exists(struct nft *n, struct err *e);
int nft_sock_dump_names(
    struct nft *n, uint16_t type, struct names *out, struct err *e);
int nft_sock_adopt(struct nft *n, const struct names *sets, struct err *e);

struct mnl_socket *nft_sock_(struct nft *n, uint32_t *seq, uint32_t *portid);

#endif
