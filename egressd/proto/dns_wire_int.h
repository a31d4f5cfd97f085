/*
 * dns_wire_int: what the files of the DNS wire codec share (dns_name.c,
 * dns_msg.c, dns_build.c, dns_answer.c, dns_wire.c); not for other
 * modules, which use dns_wire.h.
 */
#ifndef EGRESSD_PROTO_DNS_WIRE_INT_H
#define EGRESSD_PROTO_DNS_WIRE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/proto/dns_wire.h"

/* SOA rdata after the two names: serial refresh retry expire minimum. */
#define DNS_SOA_FIXED_LEN 20

/* Big-endian loads and stores; bounds are the caller's. */
static inline uint16_t
rd16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t
rd32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	    ((uint32_t)p[2] << 8) | p[3];
}

static inline void
wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void
wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/*
 * Compression pointers may only land on a label (or the root) of a name
 * decoded earlier in place: the question, an owner, or a name inside
 * rdata whose layout is known. So a name is never assembled from bytes
 * that are something else (a TTL, an rdlength, the middle of a label), and
 * rewriting TTLs in place can never change a name.
 */
struct label_map {
	uint8_t bits[DNS_MSG_MAX / 8 + 1];
};

/* How a type's rdata carries names. */
enum rd_kind {
	RD_OPAQUE = 0,
	RD_NAME, /* one name */
	RD_2NAMES, /* MINFO, RP */
	RD_SOA, /* 2 names + 20 */
	RD_U16_NAME, /* MX, AFSDB, RT, KX */
	RD_U16_2NAMES, /* PX */
	RD_SRV, /* 6 bytes + name */
	RD_NAPTR, /* 4 bytes + 3 strings + name */
};

/* Where one RR sits in a raw message. */
struct rr_pos {
	size_t owner_off;
	size_t fixed_off; /* type */
	size_t rdata_off;
	uint16_t type, rclass, rdlen;
	uint32_t ttl;
	unsigned section;
	bool owner_root;
};

/* Iterates the RRs of a raw message, all sections in order. */
struct rr_iter {
	const uint8_t *msg;
	size_t len, off;
	unsigned sec, left[3];
	struct label_map lm;
};

/* ---- dns_name.c ---- */

/* dns_name_decode, plus the label map when lm is not NULL. */
int dns_name_decode_lm(const uint8_t *msg, size_t len, size_t *off,
    struct dns_name *n, struct label_map *lm);
/*
 * Marks the labels of an uncompressed name inside opaque rdata
 * (msg[start..end)) as pointer targets, if it is one entirely.
 */
void dns_name_mark_plain(
    const uint8_t *msg, size_t start, size_t end, struct label_map *lm);
/*
 * Validates an uncompressed wire name in buf[0..cap) and returns its
 * length, or 0 if it is not one.
 */
size_t dns_name_wire_len(const uint8_t *buf, size_t cap);
/* n := the len wire bytes at wire (valid, uncompressed), labels counted. */
void dns_name_set(struct dns_name *n, const uint8_t *wire, size_t len);
/* Offset in a of the suffix that has b's length, if on a label start. */
bool dns_name_suffix_at(const struct dns_name *a, size_t blen, size_t *at);

/* ---- dns_msg.c ---- */

enum rd_kind dns_msg_rd_kind(uint16_t type);
/* Names in these types may be compressed on output (RFC 3597 s4). */
bool dns_msg_rd_compressible(uint16_t type);
/* Checks the header and question (at most one; stored in q if given). */
int dns_msg_iter_init(struct rr_iter *it, const uint8_t *msg, size_t len,
    struct dns_question *q, bool *have_q);
/* 1: *rp is the next RR; 0: done (no trailing bytes); -1: malformed. */
int dns_msg_iter_next(struct rr_iter *it, struct rr_pos *rp);
/*
 * The next EDNS option of an OPT rdata rd[0..rdlen) at *off: 1 with its
 * code, value (into rd) and length, *off moved past it; 0 at the end; -1
 * when the option overruns the rdata.
 */
int dns_msg_opt_next(const uint8_t *rd, size_t rdlen, size_t *off,
    uint16_t *code, const uint8_t **val, size_t *vlen);

#endif
