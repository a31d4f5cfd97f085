/*
 * nft_core: the nft context's options, read by the files that work for it
 * (nft_core.c).
 */
#ifndef EGRESSD_NFT_NFT_CORE_H
#define EGRESSD_NFT_NFT_CORE_H

#include <stdint.h>

#include "egressd/nft/nft.h"

uint32_t nft_mark_(const struct nft *n);
const struct nft_opts *nft_opts_(const struct nft *n);
uint16_t nft_dns_port_(const struct nft *n);

#endif
