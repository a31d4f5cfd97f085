/*
 * dns_wire: the DNS wire format, pure.
 *
 * Everything here takes bytes and a bound and returns a struct or an error:
 * no I/O, no logging, no event loop, no policy lookups (policy decisions
 * come in as callbacks from the caller, see dns_rewrite.h). The resolver
 * runtime (dns.c) is built on top of this contract.
 *
 * Conventions
 *  - Names are kept in struct dns_name as uncompressed wire bytes with the
 *    case exactly as received (so 0x20 case randomisation survives).
 *  - Presentation form ("pres") is what policy sees: labels joined by '.',
 *    no trailing dot, the root name is "". Bytes outside [A-Za-z0-9-_] are
 *    written as \DDD (decimal), so a '.' or '\' inside a label can never
 *    look like a label separator or an escape to the matcher. With
 *    DNS_PRES_LOWER, A-Z is folded to a-z (policy targets are lowercase).
 *  - Commands return 0/-1 and fill a caller-supplied struct err (may be
 *    NULL); predicates return bool. Output buffers are caller-owned with an
 *    explicit capacity; nothing is written past it.
 *  - struct dns_msg is large (it holds a whole decoded message): allocate
 *    it with dns_msg_new() and reuse it; dns_msg_parse() resets it.
 */
#ifndef EGRESSD_DNS_WIRE_H
#define EGRESSD_DNS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Bounds. */
#define DNS_MSG_MAX 65535 /* any DNS message (TCP length prefix) */
#define DNS_HEADER_LEN 12 /* fixed header */
#define DNS_UDP_CLASSIC_MAX 512 /* UDP payload without EDNS */
#define DNS_EDNS_UDP_SIZE 1232 /* what egressd advertises and serves */
#define DNS_EDNS_UDP_MIN 512 /* smaller EDNS sizes are raised to this */
#define DNS_LABEL_MAX 63 /* bytes of one label */
#define DNS_NAME_WIRE_MAX 255 /* bytes of a name in wire form */
#define DNS_NAME_LABELS_MAX 127 /* labels of a name, root excluded */
#define DNS_NAME_PRES_MAX 1024 /* presentation buffer incl. NUL */
#define DNS_PTR_CHASE_MAX 64 /* compression pointers followed per name */
#define DNS_MSG_RR_MAX 2048 /* RRs decoded per message (all sections) */
#define DNS_MSG_ARENA_MAX (256u << 10) /* decoded names+rdata per message */
#define DNS_CHAIN_MAX 16 /* CNAME/DNAME links followed */
#define DNS_ANSWER_ADDR_MAX 256 /* A/AAAA reported per answer */
#define DNS_SVCB_MAX 32 /* HTTPS/SVCB RRs reported per answer */
#define DNS_SVCB_HINT_MAX 16 /* ipv4hint/ipv6hint addresses kept per RR */
#define DNS_TCP_PREFIX_LEN 2 /* TCP length prefix */
#define DNS_EMBEDDED_V4_MAX 2 /* IPv4 addresses one IPv6 address embeds */

/* RR types and classes used by egressd. */
#define DNS_TYPE_A 1
#define DNS_TYPE_NS 2
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_SOA 6
#define DNS_TYPE_PTR 12
#define DNS_TYPE_MX 15
#define DNS_TYPE_TXT 16
#define DNS_TYPE_AAAA 28
#define DNS_TYPE_SRV 33
#define DNS_TYPE_DNAME 39
#define DNS_TYPE_OPT 41
#define DNS_TYPE_SVCB 64
#define DNS_TYPE_HTTPS 65
#define DNS_TYPE_ANY 255
#define DNS_CLASS_IN 1

/* Header opcodes and rcodes (values > 15 need an OPT record). */
#define DNS_OPCODE_QUERY 0
#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_RCODE_REFUSED 5
#define DNS_RCODE_BADVERS 16

/* Header flag bits (host order of the 16-bit flags word). */
#define DNS_FLAG_QR 0x8000u
#define DNS_FLAG_AA 0x0400u
#define DNS_FLAG_TC 0x0200u
#define DNS_FLAG_RD 0x0100u
#define DNS_FLAG_RA 0x0080u
#define DNS_FLAG_AD 0x0020u
#define DNS_FLAG_CD 0x0010u
#define DNS_EDNS_FLAG_DO 0x8000u

/* SVCB SvcParamKeys (RFC 9460). */
#define DNS_SVC_MANDATORY 0
#define DNS_SVC_ALPN 1
#define DNS_SVC_NO_DEFAULT_ALPN 2
#define DNS_SVC_PORT 3
#define DNS_SVC_IPV4HINT 4
#define DNS_SVC_ECH 5
#define DNS_SVC_IPV6HINT 6

/* Synthesized SOA for negative answers (RFC 2308). */
#define DNS_SOA_MNAME "egressd.invalid"
#define DNS_SOA_RNAME "hostmaster.egressd.invalid"
#define DNS_SOA_SERIAL 1
#define DNS_SOA_REFRESH 3600
#define DNS_SOA_RETRY 600
#define DNS_SOA_EXPIRE 86400

/*
 * Extended DNS Errors (RFC 8914): one EDNS option (code 15) in the OPT
 * record of an answer egressd makes itself, saying why. INFO-CODEs used:
 */
#define DNS_EDNS_OPT_EDE 15 /* the option code */
#define DNS_EDE_BLOCKED 15 /* §4.16: the name is blocked by local policy */
#define DNS_EDE_NOT_SUPPORTED 21 /* §4.22: the query is not supported */
#define DNS_EDE_TEXT_MAX 64 /* EXTRA-TEXT bytes written or read, at most */

/* Presentation flags. */
#define DNS_PRES_LOWER 0x1u /* fold A-Z to a-z */

/* A domain name: uncompressed wire form, case as received. */
struct dns_name {
	uint8_t wire[DNS_NAME_WIRE_MAX]; /* ends with the 0 root label */
	uint16_t len; /* bytes used in wire, >= 1 */
	uint8_t labels; /* labels, root excluded */
};

struct dns_question {
	struct dns_name name;
	uint16_t qtype, qclass;
};

/* The OPT pseudo-RR (RFC 6891); options are not kept. */
struct dns_edns {
	bool present;
	uint16_t udp_size; /* as sent (class field) */
	uint8_t ext_rcode; /* upper 8 bits of the 12-bit rcode */
	uint8_t version;
	uint16_t flags; /* DNS_EDNS_FLAG_DO, ... */
};

/*
 * Parsing a client query. The outcome tells the caller what to do:
 *   DROP     not worth an answer (shorter than a header, or QR=1: a
 *            response sent to us; answering responses makes loops)
 *   FORMERR  answer FORMERR (QDCOUNT != 1, bad name, truncated question,
 *            malformed or duplicate OPT, trailing garbage in sections)
 *   NOTIMP   answer NOTIMP (opcode != QUERY)
 *   BADVERS  answer BADVERS (EDNS version > 0), with an OPT record
 *   OK       a well-formed query in *q
 * For every outcome but DROP, q->id, q->flags and q->opcode are valid, and
 * q->have_question says whether q->question can be echoed (it is set only
 * when exactly one question was decoded). q->edns is valid when present.
 */
enum dns_query_status {
	DNS_QUERY_OK = 0,
	DNS_QUERY_DROP,
	DNS_QUERY_FORMERR,
	DNS_QUERY_NOTIMP,
	DNS_QUERY_BADVERS,
};

struct dns_query {
	uint16_t id;
	uint16_t flags; /* raw header flags word */
	uint8_t opcode;
	bool have_question;
	struct dns_question question;
	struct dns_edns edns;
};

enum dns_query_status dns_query_parse(
    const uint8_t *msg, size_t len, struct dns_query *q);
/* Fixed strings for logs ("ok", "drop", "formerr", ...). */
const char *dns_query_status_str(enum dns_query_status st);

/*
 * Largest response the client can take over UDP: 512 without EDNS,
 * otherwise its advertised size clamped to [DNS_EDNS_UDP_MIN,
 * DNS_EDNS_UDP_SIZE].
 */
size_t dns_query_udp_limit(const struct dns_query *q);

/*
 * An Extended DNS Error to put in an answer: code is the INFO-CODE,
 * text the EXTRA-TEXT (UTF-8, NUL-terminated, borrowed; NULL for none).
 * Never policy internals or a secret: the client reads it (dig prints it).
 */
struct dns_ede {
	uint16_t code;
	const char *text;
};

/*
 * Response builders. Each writes a complete response into out (capacity
 * cap) and sets *outlen, echoing the client's ID, RD and CD bits, the
 * question exactly as sent (name case included) when q->have_question,
 * and an OPT record (udp size DNS_EDNS_UDP_SIZE, version 0, DO copied)
 * when the client sent one. RA is set. Return 0, or -1 if cap is too
 * small (needs at most DNS_HEADER_LEN + 4 + DNS_NAME_WIRE_MAX + 11 for
 * errors). q may be the result of any non-DROP dns_query_parse outcome.
 *
 * ede (NULL for none) goes into that OPT record as one EDE option, and
 * only there: a client that sent no OPT gets none (RFC 6891), so its
 * answer is byte for byte what it would be without ede. The option never
 * makes the answer longer than dns_query_udp_limit(q) or cap: its text is
 * cut (at a UTF-8 character boundary, and to DNS_EDE_TEXT_MAX bytes) to
 * fit, and the option is left out when not even its code fits.
 */
/* rcode: FORMERR, SERVFAIL, NOTIMP, REFUSED, BADVERS, ... (no records). */
int dns_build_error(const struct dns_query *q, unsigned rcode,
    const struct dns_ede *ede, uint8_t *out, size_t cap, size_t *outlen,
    struct err *e);
/* Header + question + OPT with TC=1: "retry over TCP". */
int dns_build_truncated(const struct dns_query *q, uint8_t *out, size_t cap,
    size_t *outlen, struct err *e);
/*
 * Negative answer: rcode NXDOMAIN, or NOERROR for NODATA, with one SOA in
 * the authority section. The SOA owner is the queried name itself (as the
 * client spelled it; a compression pointer to the question), so it is
 * always an ancestor-or-self of the qname as RFC 2308 caches expect; mname
 * DNS_SOA_MNAME, rname DNS_SOA_RNAME, TTL and MINIMUM = neg_ttl.
 * Requires q->have_question.
 */
int dns_build_negative(const struct dns_query *q, unsigned rcode,
    uint32_t neg_ttl, const struct dns_ede *ede, uint8_t *out, size_t cap,
    size_t *outlen, struct err *e);

/* One locally synthesized answer RR, owned by the queried name. */
struct dns_local_rr {
	uint16_t type; /* DNS_TYPE_A, _AAAA, _PTR (any type is encoded) */
	uint32_t ttl;
	uint8_t rdata[DNS_NAME_WIRE_MAX]; /* A: 4, AAAA: 16, PTR: name wire */
	uint16_t rdlen;
};

/*
 * NOERROR answer with n RRs (n may be 0: NODATA without SOA; prefer
 * dns_build_negative for that). Owners are pointers to the question.
 * Requires q->have_question.
 */
int dns_build_answer(const struct dns_query *q, const struct dns_local_rr *rrs,
    size_t n, uint8_t *out, size_t cap, size_t *outlen, struct err *e);

/* "localhost" or any name under ".localhost" (RFC 6761), case-insensitive. */
bool dns_name_is_localhost(const struct dns_name *n);

/*
 * Local answer for localhost names: A 127.0.0.1 / AAAA ::1 for those
 * qtypes (ANY gets both), NODATA (SOA, ttl) for other types. -1 if the name
 * is not a localhost name.
 */
int dns_build_localhost(const struct dns_query *q, uint32_t ttl, uint8_t *out,
    size_t cap, size_t *outlen, struct err *e);

/*
 * Reverse names. dns_ptr_name_parse recognises a complete
 * d.c.b.a.in-addr.arpa (family 4) or 32-nibble ip6.arpa name (family 6),
 * case-insensitively, and writes the address (network order) to addr;
 * false for anything else (partial names, bad digits, leading zeros).
 * dns_ptr_name_make builds the reverse name of an address.
 */
bool dns_ptr_name_parse(
    const struct dns_name *n, int *family, uint8_t addr[16]);
void dns_ptr_name_make(int family, const uint8_t *addr, struct dns_name *n);

/* Names. */
/*
 * Presentation text -> wire name. Accepts an optional trailing dot, "" or
 * "." for the root, \DDD and \X escapes. -1 on empty labels, labels over
 * DNS_LABEL_MAX, names over DNS_NAME_WIRE_MAX, bad escapes.
 */
int dns_name_from_pres(const char *s, struct dns_name *n, struct err *e);
/*
 * Wire name -> presentation (see Conventions). Returns the length written
 * (excluding NUL) or -1 if buf is too small; DNS_NAME_PRES_MAX always
 * suffices.
 */
int dns_name_to_pres(
    const struct dns_name *n, unsigned flags, char *buf, size_t cap);
/* Equality ignoring ASCII case (DNS rules). */
bool dns_name_equal(const struct dns_name *a, const struct dns_name *b);
/* a equals b or is below it ("www.example.com" under "example.com"). */
bool dns_name_is_subdomain(const struct dns_name *a, const struct dns_name *b);
/*
 * Decodes the (possibly compressed) name at msg[*off], bounded by len:
 * pointers must point backwards (strictly before the current segment) and
 * past the header, at most DNS_PTR_CHASE_MAX of them, labels <= 63, total
 * <= 255, label types 0x40/0x80 rejected. On success *off is past the name
 * in place. dns_msg_parse, dns_query_parse and the dns_wire_* walkers add
 * one rule: a pointer must land on a label of a name decoded earlier in
 * place (question, owner, rdata name of a known layout, RRSIG signer, NSEC
 * next name, SVCB target), never on other bytes.
 */
int dns_name_decode(
    const uint8_t *msg, size_t len, size_t *off, struct dns_name *n);

/*
 * A decoded message (any section). Names and rdata live in the arena,
 * uncompressed: rdata of types that carry names (NS, CNAME, SOA, PTR, MX,
 * SRV, DNAME, ...) holds them expanded, so records can be copied and
 * re-encoded freely. The OPT record is kept in m->edns, not in rrs.
 */
enum dns_section {
	DNS_SEC_ANSWER = 0,
	DNS_SEC_AUTHORITY = 1,
	DNS_SEC_ADDITIONAL = 2,
};

struct dns_rr {
	uint8_t section; /* enum dns_section */
	uint16_t type, rclass;
	uint32_t ttl;
	uint32_t owner_off; /* arena offset of the owner's wire form */
	uint16_t owner_len;
	uint32_t rdata_off; /* arena offset of the decoded rdata */
	uint16_t rdlen;
};

struct dns_msg {
	uint16_t id;
	uint16_t flags; /* header flags; rcode in low 4 bits */
	unsigned rcode; /* full rcode including EDNS extension */
	bool have_question;
	struct dns_question question;
	struct dns_edns edns;
	size_t nrr;
	size_t count[3]; /* RRs per section (OPT excluded) */
	struct dns_rr rr[DNS_MSG_RR_MAX];
	size_t arena_used;
	uint8_t arena[DNS_MSG_ARENA_MAX];
};

struct dns_msg *dns_msg_new(void);
void dns_msg_free(struct dns_msg *m);
/*
 * Parses any message of len bytes (<= DNS_MSG_MAX): QDCOUNT must be 0 or
 * 1, every RR must be complete and its rdata well-formed for the types
 * whose names are expanded (A must be 4 bytes, AAAA 16), at most one OPT
 * (in additional, owner root), no trailing bytes. -1 with a reason.
 */
int dns_msg_parse(
    struct dns_msg *m, const uint8_t *msg, size_t len, struct err *e);
/* The owner name / rdata of rr i (pointers into the arena). */
void dns_msg_rr_owner(const struct dns_msg *m, size_t i, struct dns_name *n);
const uint8_t *dns_msg_rr_rdata(const struct dns_msg *m, size_t i);
/*
 * Encodes m (header counts recomputed, names compressed where RFC 1035
 * allows it, OPT written last when m->edns.present). -1 if the result
 * exceeds cap.
 */
int dns_msg_encode(const struct dns_msg *m, uint8_t *out, size_t cap,
    size_t *outlen, struct err *e);
/* Structural equality of two decoded messages (names compared exactly). */
bool dns_msg_equal(const struct dns_msg *a, const struct dns_msg *b);

/* Question name, type and class equal (name ignoring case). */
bool dns_msg_question_matches(
    const struct dns_msg *m, const struct dns_question *q);

/*
 * The alias chain of an answer: starting at the question name, follow
 * CNAME records (and DNAME records, synthesizing the target) in the
 * answer section. chain[i].from -> chain[i].to; the final name is
 * chain[n-1].to or the qname when n == 0. -1 on a loop or more than
 * DNS_CHAIN_MAX links (the caller answers SERVFAIL).
 */
struct dns_chain_link {
	uint16_t type; /* DNS_TYPE_CNAME or DNS_TYPE_DNAME */
	struct dns_name from, to;
};
struct dns_chain {
	size_t n;
	struct dns_chain_link link[DNS_CHAIN_MAX];
};
int dns_msg_chain(const struct dns_msg *m, struct dns_chain *c, struct err *e);
/* name is the qname or a target in the chain (ignoring case). */
bool dns_chain_contains(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *name);
/* 0 for the qname, i for c->link[i - 1].to, -1 if not on the chain. */
int dns_chain_index(const struct dns_msg *m, const struct dns_chain *c,
    const struct dns_name *name);

/* An address record from an answer, owner in the chain. */
struct dns_addr {
	int family; /* 4 or 6 */
	uint8_t addr[16]; /* network order; 4 bytes used for family 4 */
	uint32_t ttl;
	uint16_t source; /* DNS_TYPE_A/AAAA, or HTTPS/SVCB for hints */
	uint8_t owner; /* dns_chain_index() of the owner name */
};

/* One HTTPS/SVCB record with the parameters egressd cares about. */
struct dns_svcb {
	uint16_t type; /* DNS_TYPE_HTTPS or DNS_TYPE_SVCB */
	uint16_t priority; /* 0 = AliasMode */
	uint32_t ttl;
	struct dns_name target; /* "." (root) means the owner */
	bool has_ech;
	size_t nv4, nv6;
	uint8_t v4[DNS_SVCB_HINT_MAX][4];
	uint8_t v6[DNS_SVCB_HINT_MAX][16];
	bool hints_truncated; /* more hints than DNS_SVCB_HINT_MAX */
};

/*
 * Parses the rdata of an HTTPS/SVCB RR (uncompressed target, keys in
 * strictly increasing order, hint lengths multiples of 4/16 and non-empty).
 */
int dns_svcb_parse(const uint8_t *rdata, size_t rdlen, uint16_t type,
    struct dns_svcb *s, struct err *e);

/*
 * Summary of an upstream answer for the resolver: rcode, TC, the chain,
 * A/AAAA owned by a chain name (answer section), HTTPS/SVCB owned by a
 * chain name, and the TTL to cache for: the minimum TTL of the answer
 * section, lowered for a negative answer (NXDOMAIN, or NOERROR without a
 * record of the qtype) to min(SOA TTL, SOA MINIMUM) of the authority SOA;
 * have_ttl false when there is nothing to derive it from (the caller then
 * uses its own negative TTL). The same rule is dns_msg_min_ttl and
 * dns_wire_min_ttl.
 */
struct dns_answer_info {
	unsigned rcode;
	bool tc;
	struct dns_chain chain;
	size_t naddr;
	struct dns_addr addr[DNS_ANSWER_ADDR_MAX];
	bool addr_truncated;
	size_t nsvcb;
	struct dns_svcb svcb[DNS_SVCB_MAX];
	bool svcb_truncated;
	bool have_ttl;
	uint32_t ttl;
};
int dns_answer_info(
    const struct dns_msg *m, struct dns_answer_info *ai, struct err *e);

/* Minimum TTL as in dns_answer_info, without building the rest. */
bool dns_msg_min_ttl(const struct dns_msg *m, uint32_t *ttl);

/*
 * In-place helpers for cache hits. They walk the message with the same
 * rules as dns_msg_parse and return -1 if it is malformed (ageing then
 * leaves it untouched). Because compression pointers must land on labels
 * of earlier names, rewriting TTLs or the question's case in place never
 * changes any other name.
 */
void dns_wire_set_id(uint8_t *msg, size_t len, uint16_t id);
/*
 * Overwrites the question name bytes with the client's spelling when the
 * message's question is an uncompressed name equal to q->question.name
 * ignoring case (always true for answers egressd parsed and matched).
 */
int dns_wire_copy_qname_case(
    uint8_t *msg, size_t len, const struct dns_question *q);
/* Subtracts elapsed seconds from every RR TTL except OPT, floor 0. */
int dns_wire_age_ttls(uint8_t *msg, size_t len, uint32_t elapsed);
/* Minimum TTL as in dns_msg_min_ttl, straight from the wire. */
int dns_wire_min_ttl(const uint8_t *msg, size_t len, bool *have, uint32_t *ttl);

/*
 * The first EDE option of the message's OPT record, for tests and the
 * fuzzer: 1 and *out filled (text cut to DNS_EDE_TEXT_MAX bytes,
 * NUL-terminated), 0 when there is no OPT or no EDE in it, -1 when the
 * message up to its OPT record, or an option in it, is malformed (an EDE
 * shorter than its INFO-CODE).
 */
struct dns_ede_seen {
	uint16_t code;
	size_t text_len; /* bytes in text, NUL excluded */
	char text[DNS_EDE_TEXT_MAX + 1];
};
int dns_wire_ede(const uint8_t *msg, size_t len, struct dns_ede_seen *out);

/*
 * TCP framing (RFC 1035 4.2.2, RFC 7766). Given the bytes buffered so far,
 * says whether a complete message is there: DNS_TCP_MSG sets *msglen (the
 * message is buf[DNS_TCP_PREFIX_LEN .. +*msglen]); DNS_TCP_BAD for a
 * length below DNS_HEADER_LEN (close the connection).
 */
enum dns_tcp_frame {
	DNS_TCP_NEED_MORE = 0,
	DNS_TCP_MSG,
	DNS_TCP_BAD,
};
enum dns_tcp_frame dns_tcp_frame(
    const uint8_t *buf, size_t avail, size_t *msglen);
/* Writes the 2-byte length prefix; -1 if len > DNS_MSG_MAX. */
int dns_tcp_prefix(uint8_t out[DNS_TCP_PREFIX_LEN], size_t len);

/*
 * Address classification for the rebinding defence: true iff the one
 * table of special-purpose ranges (egressd/proto/special_ranges.c, the same
 * table the nft internal sets come from) strips answers pointing at addr
 * (SPECIAL_STRIP): private, loopback, link-local, CGNAT, benchmarking,
 * multicast, reserved, cloud metadata, and the IPv6 spellings of those
 * IPv4 ranges (mapped, compatible, SIIT, NAT64 /96, local-use NAT64 /96,
 * 6to4; the rest of 64:ff9b:1::/48 has an unknown prefix length and is
 * stripped; Teredo when the server or the de-obfuscated client IPv4 is).
 * Documentation ranges (192.0.2/24, 198.51.100/24, 203.0.113/24,
 * 2001:db8::/32, 3fff::/20) are NOT internal. The operator opens a range
 * with an always-allow or infra IP/CIDR rule (dns.c).
 * family is 4 or 6 (AF_INET/AF_INET6 are accepted too); others: true.
 */
bool dns_addr_is_internal(int family, const uint8_t *addr);
/*
 * The IPv4 addresses an IPv6 address embeds by the forms above (0, 1, or
 * 2 for Teredo: server then client); returns how many were written.
 */
size_t dns_addr_embedded_v4(
    const uint8_t v6[16], uint8_t v4[DNS_EMBEDDED_V4_MAX][4]);

#endif
