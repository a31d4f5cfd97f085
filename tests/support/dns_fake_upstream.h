/*
 * A fake upstream DNS server for unit tests: UDP and TCP on 127.0.0.1, an
 * ephemeral port, inside the test's own event loop. It answers from a
 * small table of canned records (or not at all, or with TC=1 over UDP, or
 * with an rcode) and records every query it saw, so tests can prove what
 * reached "the internet" and what did not.
 *
 * Shared by the resolver and upstream unit tests (egressd_testsupport_core).
 */
#ifndef EGRESSD_TEST_DNS_FAKE_UPSTREAM_H
#define EGRESSD_TEST_DNS_FAKE_UPSTREAM_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_RR_MAX 64
#define FAKE_LOG_MAX 256
#define FAKE_CONN_MAX 16

enum fake_mode {
	FAKE_ANSWER = 0, /* answer from the table */
	FAKE_DROP, /* never answer (a dead upstream) */
	FAKE_TC, /* UDP: TC=1 and no records; TCP: full answer */
	FAKE_RCODE, /* answer with fake->rcode and no records */
	FAKE_GARBAGE, /* header and question, then random bytes */
	FAKE_HOSTILE, /* well-framed random RRs: internal addrs, CNAMEs */
};

/* One canned RR: owner name, type, TTL, rdata (names given pre-encoded). */
struct fake_rr {
	char owner[256];
	uint16_t type;
	uint32_t ttl;
	uint8_t rdata[512];
	uint16_t rdlen;
};

struct fake_upstream;

struct fake_conn {
	struct fake_upstream *owner;
	int fd;
	struct event *ev;
	uint8_t buf[70000];
	size_t have;
};

struct fake_upstream {
	struct event_base *base;
	int ufd, tfd;
	uint16_t port;
	struct event *uev, *tev;
	enum fake_mode mode;
	unsigned rcode;
	struct fake_rr rr[FAKE_RR_MAX];
	size_t nrr;
	bool nxdomain_if_empty; /* NXDOMAIN + SOA when nothing matches */
	unsigned delay_ms; /* UDP answers leave this much later */
	uint32_t seed; /* FAKE_GARBAGE's generator */
	/* What it saw. */
	unsigned udp_queries, tcp_queries;
	char log[FAKE_LOG_MAX][256]; /* lowercased qnames, in order */
	size_t nlog;
	uint16_t last_id;
	bool last_had_opt;
	struct fake_conn conns[FAKE_CONN_MAX];
};

/* Starts both listeners on 127.0.0.1:port (0: ephemeral) in base; NULL on
 * failure. */
struct fake_upstream *fake_upstream_new(struct event_base *base, uint16_t port);
void fake_upstream_free(struct fake_upstream *f);
/* "127.0.0.1:<port>" into buf. */
void fake_upstream_addr(const struct fake_upstream *f, char *buf, size_t cap);
/* Adds one canned RR to the table. */
void fake_add(struct fake_upstream *f, const char *owner, uint16_t type,
    uint32_t ttl, const void *rdata, uint16_t rdlen);
/* A (or AAAA when ip has a ':') record. */
void fake_add_a(
    struct fake_upstream *f, const char *owner, const char *ip, uint32_t ttl);
void fake_add_cname(struct fake_upstream *f, const char *owner,
    const char *target, uint32_t ttl);
/* Was name (lowercase) ever asked? */
bool fake_saw(const struct fake_upstream *f, const char *name);

#endif
