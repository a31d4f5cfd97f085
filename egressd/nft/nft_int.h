/*
 * nft_int: nft_addr_internal_() (nft_elems.c) for tests/unit/egressd/
 * test_special_ranges.c, which includes this header; the nft files include
 * the header of each provider instead (nft_batch.h, nft_ctdump.h, ...).
 */
#ifndef EGRESSD_NFT_INT_H
#define EGRESSD_NFT_INT_H

#include <stddef.h>
#include <linux/netlink.h>
#include <stdint.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_bounds.h"

/* True when addr lies in the built-in internal (always denied) ranges:
 * special_addr_flags() & SPECIAL_DROP, what internal4/6 hold. */
bool nft_addr_internal_(int family, const uint8_t *addr);

#endif
