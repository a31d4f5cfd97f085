/*
 * A tiny DNS packet builder for the dns_wire and dns_rewrite unit tests:
 * hand-built bytes, so the tests do not trust the encoder they test.
 */
#ifndef EGRESSD_TEST_DNS_TESTPK_H
#define EGRESSD_TEST_DNS_TESTPK_H

#include <stdint.h>
#include <string.h>

#define PK_MAX 8192

struct pk {
	uint8_t b[PK_MAX];
	size_t n;
};

static inline void
pk_u8(struct pk *p, uint8_t v)
{
	if (p->n < PK_MAX)
		p->b[p->n++] = v;
}

static inline void
pk_u16(struct pk *p, uint16_t v)
{
	pk_u8(p, (uint8_t)(v >> 8));
	pk_u8(p, (uint8_t)v);
}

static inline void
pk_u32(struct pk *p, uint32_t v)
{
	pk_u16(p, (uint16_t)(v >> 16));
	pk_u16(p, (uint16_t)v);
}

static inline void
pk_bytes(struct pk *p, const void *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pk_u8(p, ((const uint8_t *)v)[i]);
}

/* Dotted name without escapes, uncompressed; "" is the root. */
static inline void
pk_name(struct pk *p, const char *s)
{
	while (*s != '\0') {
		const char *dot = strchr(s, '.');
		size_t l = dot ? (size_t)(dot - s) : strlen(s);
		pk_u8(p, (uint8_t)l);
		pk_bytes(p, s, l);
		s += l;
		if (*s == '.')
			s++;
	}
	pk_u8(p, 0);
}

/* Labels then a compression pointer to off. */
static inline void
pk_name_ptr(struct pk *p, const char *labels, uint16_t off)
{
	while (labels != NULL && *labels != '\0') {
		const char *dot = strchr(labels, '.');
		size_t l = dot ? (size_t)(dot - labels) : strlen(labels);
		pk_u8(p, (uint8_t)l);
		pk_bytes(p, labels, l);
		labels += l;
		if (*labels == '.')
			labels++;
	}
	pk_u16(p, (uint16_t)(0xc000u | off));
}

static inline void
pk_hdr(struct pk *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an,
    uint16_t ns, uint16_t ar)
{
	p->n = 0;
	pk_u16(p, id);
	pk_u16(p, flags);
	pk_u16(p, qd);
	pk_u16(p, an);
	pk_u16(p, ns);
	pk_u16(p, ar);
}

static inline void
pk_question(struct pk *p, const char *name, uint16_t type)
{
	pk_name(p, name);
	pk_u16(p, type);
	pk_u16(p, 1);
}

/* Type, class IN, ttl, and a placeholder rdlength; returns its offset. */
static inline size_t
pk_rr_fixed(struct pk *p, uint16_t type, uint32_t ttl)
{
	pk_u16(p, type);
	pk_u16(p, 1);
	pk_u32(p, ttl);
	pk_u16(p, 0);
	return p->n - 2;
}

static inline void
pk_rdlen_end(struct pk *p, size_t at)
{
	size_t l = p->n - at - 2;
	p->b[at] = (uint8_t)(l >> 8);
	p->b[at + 1] = (uint8_t)l;
}

/* Owner = pointer to the question name at offset 12. */
static inline void
pk_a(struct pk *p, uint16_t owner_off, uint32_t ttl, uint8_t a, uint8_t b,
    uint8_t c, uint8_t d)
{
	pk_u16(p, (uint16_t)(0xc000u | owner_off));
	size_t at = pk_rr_fixed(p, 1, ttl);
	pk_u8(p, a);
	pk_u8(p, b);
	pk_u8(p, c);
	pk_u8(p, d);
	pk_rdlen_end(p, at);
}

static inline void
pk_aaaa(struct pk *p, uint16_t owner_off, uint32_t ttl, const uint8_t v6[16])
{
	pk_u16(p, (uint16_t)(0xc000u | owner_off));
	size_t at = pk_rr_fixed(p, 28, ttl);
	pk_bytes(p, v6, 16);
	pk_rdlen_end(p, at);
}

/* OPT: udp size, ext rcode, version, flags, no options. */
static inline void
pk_opt(struct pk *p, uint16_t udp, uint8_t ext, uint8_t ver, uint16_t flags)
{
	pk_u8(p, 0);
	pk_u16(p, 41);
	pk_u16(p, udp);
	pk_u8(p, ext);
	pk_u8(p, ver);
	pk_u16(p, flags);
	pk_u16(p, 0);
}

static inline void
pk_set_u16(struct pk *p, size_t at, uint16_t v)
{
	p->b[at] = (uint8_t)(v >> 8);
	p->b[at + 1] = (uint8_t)v;
}

#endif
