/*
 * special_ranges: the one table of special-purpose address ranges (IANA
 * IPv4 and IPv6 special-purpose address registries, multicast, cloud
 * metadata addresses) and the IPv6 spellings of IPv4 addresses. Both
 * consumers are derived from it at run time, so they cannot disagree:
 *   - the DNS rebinding filter strips an answer iff special_addr_flags()
 *     has SPECIAL_STRIP (dns_addr_is_internal());
 *   - the nft internal4/internal6 sets hold exactly the addresses whose
 *     flags have SPECIAL_DROP (special_drop_spans(); nft_addr_internal_()
 *     is special_addr_flags() & SPECIAL_DROP).
 * Every row says its source and why it is (not) stripped or dropped; see
 * special_ranges.c, docs/dns.md and docs/nft.md. Pure: no I/O.
 */
#ifndef EGRESSD_SPECIAL_RANGES_H
#define EGRESSD_SPECIAL_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPECIAL_STRIP 0x1u /* DNS answers pointing here are stripped */
#define SPECIAL_DROP 0x2u /* the nft internal sets deny it */
/*
 * Teredo: the resolver decodes the server and (obfuscated) client IPv4
 * addresses and strips the answer iff one has SPECIAL_STRIP; nft cannot
 * decode them in a set and drops the prefix as a whole.
 */
#define SPECIAL_TEREDO 0x4u

struct special_range {
	uint8_t family; /* 4 or 6 */
	uint8_t len;
	uint8_t addr[16]; /* network byte order, host bits zero */
	unsigned flags; /* SPECIAL_* */
	const char *text; /* "10.0.0.0/8", for tests and messages */
};

/* The table, in the order of the IANA registries. */
extern const struct special_range special_ranges[];
extern const size_t special_nranges;

/*
 * The IPv6 spellings of an IPv4 address, in this order: NAT64
 * 64:ff9b::/96, 6to4 2002::/16, IPv4-mapped ::ffff:0:0/96, IPv4-compatible
 * ::/96, SIIT ::ffff:0:0:0/96, local-use NAT64 64:ff9b:1::/96. The first
 * SPECIAL_FORMS_RULE are the ones a user or operator IPv4 deny rule is
 * also denied in (nft_build.c, nft_twins.c); the internal sets and the
 * resolver use all SPECIAL_FORMS. Each embeds the IPv4 address right
 * after its prefix (prefix length = 8 * offset).
 */
#define SPECIAL_FORMS 6
#define SPECIAL_FORMS_RULE 4
#define SPECIAL_FORM_COMPAT 3 /* ::/96, which also holds :: and ::1 */

/*
 * Which of the first nforms forms a6 is in (-1: none); *v4 gets the
 * IPv4 address it spells and *base the form's prefix length.
 */
int special_v4_of(
    const uint8_t a6[16], size_t nforms, uint8_t v4[4], unsigned *base);

/* Form number form of the IPv4 prefix v4/len: out (16 bytes), *outlen. */
void special_v6_form(const uint8_t v4[4], unsigned len, size_t form,
    uint8_t out[16], uint8_t *outlen);

/*
 * SPECIAL_* flags of an address (family 4 or 6; anything else gets
 * SPECIAL_STRIP | SPECIAL_DROP: fail closed). An IPv6 address in a form
 * above has the flags of the IPv4 address it spells (a row that contains
 * a form, 64:ff9b:1::/48, does not apply inside it); Teredo adds
 * SPECIAL_STRIP when its server or client IPv4 address has it.
 */
unsigned special_addr_flags(int family, const uint8_t *addr);

/* An inclusive address interval (4 or 16 bytes used). */
struct special_span {
	uint8_t lo[16], hi[16];
};

/* Upper bound of special_drop_spans() for either family. */
#define SPECIAL_SPANS_MAX 512

/*
 * The intervals of family (4 or 6) whose addresses have SPECIAL_DROP:
 * the SPECIAL_DROP rows (minus any form they contain) and, for IPv6,
 * every form of every SPECIAL_DROP IPv4 row. Unsorted, may overlap.
 * Returns how many were written (<= max), or -1 if max is too small.
 */
long special_drop_spans(int family, struct special_span *out, size_t max);

#endif
