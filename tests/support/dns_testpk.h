/*
 * dns_testpk: a tiny DNS packet builder for the unit tests of the DNS
 * code: hand-built bytes, so the tests do not trust the encoder they test.
 * Writes past PK_MAX are dropped (a test that needs more is wrong).
 */
#ifndef EGRESSD_TEST_DNS_TESTPK_H
#define EGRESSD_TEST_DNS_TESTPK_H

#include <stddef.h>
#include <stdint.h>

#define PK_MAX 8192

struct pk {
	uint8_t b[PK_MAX];
	size_t n;
};

void pk_u8(struct pk *p, uint8_t v);
void pk_u16(struct pk *p, uint16_t v);
void pk_u32(struct pk *p, uint32_t v);
void pk_bytes(struct pk *p, const void *v, size_t n);
/* Dotted name without escapes, uncompressed; "" is the root. Writes
 * strlen(pres) + 2 bytes (at most) to out; returns how many. */
size_t pk_wire_name(const char *pres, uint8_t *out);
/* pk_wire_name appended to p. */
void pk_name(struct pk *p, const char *s);
/* Labels then a compression pointer to off. */
void pk_name_ptr(struct pk *p, const char *labels, uint16_t off);
/* Resets p and writes a header. */
void pk_hdr(struct pk *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
    uint16_t ns, uint16_t ar);
void pk_question(struct pk *p, const char *name, uint16_t type);
/* Type, class IN, ttl, and a placeholder rdlength; returns its offset. */
size_t pk_rr_fixed(struct pk *p, uint16_t type, uint32_t ttl);
/* Fills in the rdlength at `at` (from pk_rr_fixed) up to the end. */
void pk_rdlen_end(struct pk *p, size_t at);
/* A record whose owner is a pointer to owner_off (12: the question). */
void pk_a(struct pk *p, uint16_t owner_off, uint32_t ttl, uint8_t a, uint8_t b,
    uint8_t c, uint8_t d);
void pk_aaaa(
    struct pk *p, uint16_t owner_off, uint32_t ttl, const uint8_t v6[16]);
/* OPT: udp size, ext rcode, version, flags, no options. */
void pk_opt(
    struct pk *p, uint16_t udp, uint8_t ext, uint8_t ver, uint16_t flags);
void pk_set_u16(struct pk *p, size_t at, uint16_t v);

#endif
