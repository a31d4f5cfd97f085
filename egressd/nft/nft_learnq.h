/*
 * nft_learnq: asynchronous learning (nft_learnq.c).
 */
#ifndef EGRESSD_NFT_LEARNQ_H
#define EGRESSD_NFT_LEARNQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/nft/nft.h"

/* Runs the learn transactions under way to their end (before an apply);
 * frees the asynchronous learning state (nft_free, a failed attach). */
void nft_learnq_drain(struct nft *n);
void nft_learnq_detach(struct nft *n);

#endif
