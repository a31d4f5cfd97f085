/*
 * dns_rewrite: the answer policy applied to an upstream response before it
 * is released to the client, as one pure function.
 *
 * The upstream message is decoded completely (dns_msg_parse), edited, and
 * re-encoded; nothing of the original bytes is forwarded as-is. Decisions
 * that need policy come from the caller through callbacks; this module
 * never looks at a policy itself.
 *
 * What it does, in order:
 *  1. Parse; the question must match the client's (name ignoring case,
 *     type, class), else error (the caller answers SERVFAIL).
 *  2. Build the CNAME/DNAME chain from the qname (dns_msg_chain) and ask
 *     name_allowed() for every target in it. One denied name makes the
 *     result DNS_REWRITE_DENIED and rep->denied_name says which (the
 *     caller answers NXDOMAIN); no output is written then.
 *  3. Answer section: records whose owner is not the qname or a chain
 *     name (DNAME: an ancestor of one), or whose class is not the
 *     question's, are removed; so are A/AAAA/HTTPS/SVCB of a class other
 *     than IN anywhere (stub resolvers such as musl take every A/AAAA of
 *     the answer section, ignoring owner and class). Counted as
 *     unrelated.
 *  4. Every A/AAAA in every section goes through addr_allowed() (default:
 *     keep iff !dns_addr_is_internal()); removed ones are counted.
 *  5. HTTPS/SVCB: ipv4hint/ipv6hint addresses go through addr_allowed()
 *     too; a hint key left empty is removed (and from "mandatory"); the
 *     ech key is removed with DNS_REWRITE_STRIP_ECH. A record whose
 *     TargetName (not "." and not a chain name) is denied by
 *     name_allowed() is removed.
 *  6. Every TTL is aged by age seconds (the time an answer spent in the
 *     cache; floor 0), then those of A/AAAA/HTTPS/SVCB are clamped to
 *     [ttl_min, ttl_max] (a zero bound is no bound).
 *  7. The client's view is restored: its ID, RD and CD bits, its question
 *     spelling (0x20 case) also on owners equal to the qname, and an OPT
 *     record only if the client sent one (udp size DNS_EDNS_UDP_SIZE, DO
 *     copied from the client, upstream's extended rcode kept, upstream
 *     options dropped). RA is set; AA is cleared; AD is cleared if
 *     anything was removed or the client set neither AD nor DO.
 *  8. Re-encode (counts recomputed). Kept A/AAAA of chain names and kept
 *     hints of chain-owned HTTPS/SVCB are reported for nft learning.
 *
 * Output larger than cap is an error; the caller compares *outlen with the
 * client's UDP limit and sends dns_build_truncated() if it is larger.
 */
#ifndef EGRESSD_DNS_REWRITE_H
#define EGRESSD_DNS_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/proto/dns_wire.h"
#include "util/err.h"

#define DNS_REWRITE_STRIP_ECH 0x1u /* drop the SVCB "ech" key */
#define DNS_REWRITE_DROP_ADDITIONAL 0x2u /* drop the additional section */

/*
 * Callbacks. addr is 4 or 16 bytes in network order. name is the
 * lowercase presentation form (no trailing dot). NULL addr_allowed means
 * "keep iff not internal"; NULL name_allowed means "allow every name".
 */
typedef bool (*dns_addr_allowed_fn)(void *arg, int family, const uint8_t *addr);
typedef bool (*dns_name_allowed_fn)(void *arg, const char *name);

struct dns_rewrite_opts {
	const struct dns_query
	    *client; /* the client's parsed query; required */
	dns_addr_allowed_fn addr_allowed;
	dns_name_allowed_fn name_allowed;
	void *arg; /* passed to both callbacks */
	uint32_t ttl_min, ttl_max; /* 0 = no bound */
	/*
	 * Seconds subtracted from every TTL first (a cache hit's age): the
	 * stored answer is aged in the output, never copied to be aged.
	 */
	uint32_t age;
	unsigned flags; /* DNS_REWRITE_* */
};

enum dns_rewrite_result {
	DNS_REWRITE_OK = 0, /* out holds the answer to release */
	DNS_REWRITE_DENIED, /* a chain name was denied: answer NXDOMAIN */
	DNS_REWRITE_ERROR, /* malformed or mismatched: answer SERVFAIL */
};

struct dns_rewrite_report {
	unsigned rcode; /* upstream's (extended) rcode */
	struct dns_chain chain; /* valid unless ERROR */
	char denied_name[DNS_NAME_PRES_MAX]; /* DENIED: the first denied name */
	/* Addresses to learn: kept A/AAAA and hints of chain names. */
	size_t naddr;
	struct dns_addr addr[DNS_ANSWER_ADDR_MAX];
	/* Addresses beyond DNS_ANSWER_ADDR_MAX (A/AAAA and hints) are
	 * removed from the answer, never released unlearned. */
	bool addr_truncated; /* some were */
	unsigned stripped_excess; /* how many */
	unsigned stripped_addrs; /* A/AAAA removed by addr_allowed */
	unsigned stripped_hints; /* hint addresses removed */
	unsigned stripped_ech; /* ech keys removed */
	unsigned stripped_svcb; /* HTTPS/SVCB removed (denied target) */
	unsigned stripped_unrelated; /* answer RRs not owned by the chain */
	unsigned ancount; /* answer RRs in the output */
	bool have_ttl; /* min TTL of the output, for caching */
	uint32_t ttl;
};

/*
 * Scratch is a caller-owned dns_msg (dns_msg_new) reused between calls so
 * the hot path does not allocate. Returns the result; *outlen is set only
 * for DNS_REWRITE_OK; e gets the reason for DNS_REWRITE_ERROR.
 */
enum dns_rewrite_result dns_rewrite(struct dns_msg *scratch, const uint8_t *msg,
    size_t len, const struct dns_rewrite_opts *opts, uint8_t *out, size_t cap,
    size_t *outlen, struct dns_rewrite_report *rep, struct err *e);

const char *dns_rewrite_result_str(enum dns_rewrite_result r);

#endif
