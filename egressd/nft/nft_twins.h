/*
 * nft_twins: the filter chain's decision for an address, IPv4 deny rules
 * twinned into their IPv6 spellings (nft_twins.c).
 */
#ifndef EGRESSD_NFT_NFT_TWINS_H
#define EGRESSD_NFT_NFT_TWINS_H

#include <stdint.h>

#include "egressd/nft/nft.h"

/*
 * policy_match_addr() as the filter chain decides: for an IPv6 address
 * that spells an IPv4 one (NAT64, 6to4, mapped, compatible) the IPv4 deny
 * prefixes of each layer take part as IPv6 rules of that layer (the
 * builder's twins). tw caches the index over calls with the same p; NULL
 * tw = plain policy_match_addr(). *rule gets the deciding rule (for a
 * twin: the IPv4 deny rule).
 */
struct nft_twins;
struct nft_twins *nft_twins_new_(void);
void nft_twins_free_(struct nft_twins *tw);
enum policy_action nft_twins_match_(struct nft_twins *tw,
    const struct policy *p, int family, const uint8_t *addr, unsigned proto,
    uint16_t port, const struct policy_rule **rule);

#endif
