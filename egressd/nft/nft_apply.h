/*
 * nft_apply: a policy put in force (nft_apply.c).
 */
#ifndef EGRESSD_NFT_APPLY_H
#define EGRESSD_NFT_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "egressd/nft/nft.h"

#endif
