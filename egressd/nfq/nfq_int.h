/*
 * nfq internals: the queue object and its flows (nfq.c, nfq_flow.c).
 */
#ifndef EGRESSD_NFQ_INT_H
#define EGRESSD_NFQ_INT_H

#include <string.h>
#include <sys/socket.h>

#include "egressd/base/log.h"
#include "egressd/nfq/nfq.h"
#include "egressd/proto/ip_tcp.h"
#include "egressd/proto/tls_flow.h"

#define NFQ_MAGIC 0x6e667131u
#define NFQ_BUCKETS 1024

enum nfq_flow_state {
	NFQ_FLOW_HOLD = 0, /* reading the hello; packets held */
	NFQ_FLOW_OK,
	NFQ_FLOW_REFUSED,
};

struct nfq_flow {
	struct nfq_flow *next; /* hash chain */
	int family;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	enum nfq_flow_state state;
	uint64_t deadline_ms; /* HOLD: refuse; judged: forget */
	uint32_t held[NFQ_HOLD_MAX];
	size_t nheld;
	uint8_t *buf; /* TLS_FLOW_BYTES_MAX while HOLD */
	struct tls_flow tf;
};

/* One flow passed in flight, for nfq_rejudge (nfq_judged.c). */
struct nfq_judged {
	struct nfq_flow_id id;
	char sni[TLS_HELLO_SNI_MAX + 1]; /* "" = a free slot */
};

struct nfq {
	uint32_t magic;
	struct event_base *base;
	struct event *ev, *tick;
	struct mnl_socket *nl;
	uint32_t portid;
	struct nfq_opts o;
	struct nfq_hooks h;
	struct log *log;
	struct log_limiter lim;
	struct nfq_flow *buckets[NFQ_BUCKETS];
	struct nfq_status st;
	uint8_t *rbuf;
	/* a ring of NFQ_JUDGED_MAX, the oldest overwritten; NULL when it
	 * could not be allocated (then no flow is judged again by name) */
	struct nfq_judged *judged;
	size_t judged_next;
	struct nfq_bpf *kb; /* the in-kernel judge, or NULL (kb_why) */
	char kb_why[ERR_MSG_MAX];
	uint64_t kb_unlogged; /* its passes the audit ring lost, said */
};

uint64_t nfq_now(const struct nfq *q);
/* A flow's destination (family 4 or 6, 16 bytes, IPv4 in the first 4)
 * as the hooks take it. Inline: nfq_flow.c and nfq_judged.c both use
 * it, and nfq_judged.c may not call into nfq_flow.c, which calls it
 * (tests/tools/call_cycles). */
static inline void
nfq_dst_addr(int family, const uint8_t *dst, struct addr *out)
{
	memset(out, 0, sizeof(*out));
	out->family = family == 4 ? AF_INET : AF_INET6;
	memcpy(out->a, dst, 16);
}
/* The verdict on one packet (nfq.c). */
void nfq_verdict(struct nfq *q, uint32_t id, uint32_t verdict, uint32_t mark);
/* One queued packet through its flow (nfq_flow.c). */
void nfq_flow_packet(
    struct nfq *q, uint32_t id, uint32_t mark, const uint8_t *pkt, size_t len);
/* Refuses held flows past their deadline, forgets judged ones. */
void nfq_flow_sweep(struct nfq *q);
void nfq_flow_free_all(struct nfq *q);
/* Remembers a flow passed with its SNI (nfq_judged.c). */
void nfq_judged_add(struct nfq *q, const struct nfq_flow *f, const char *sni);
/* The in-kernel judge is told of a flow passed (nfq_judged.c). */
void nfq_judged_teach(struct nfq *q, const struct nfq_flow *f, const char *sni);

#endif
