/*
 * nft_build: a policy snapshot -> the table's batch (nft_build.c).
 */
#ifndef EGRESSD_NFT_NFT_BUILD_H
#define EGRESSD_NFT_NFT_BUILD_H

#include <stddef.h>

#include "egressd/nft/nft.h"

/*
 * The rule lists of a snapshot in the order the filter chain judges them
 * (the first layer with a matching rule decides): the builder emits them
 * so and the twins index mirrors them, so both take them from here.
 */
enum nft_layer {
	NFT_L_ALWAYS_DENY,
	NFT_L_ALWAYS_ALLOW,
	NFT_L_INFRA,
	NFT_L_USER,
	NFT_L_COUNT
};
struct nft_layers {
	const struct policy_rule *r[NFT_L_COUNT]; /* borrowed from p */
	size_t n[NFT_L_COUNT];
};
void nft_layers_(const struct policy *p, struct nft_layers *out);

#endif
