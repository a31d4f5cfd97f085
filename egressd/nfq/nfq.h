/*
 * nfq: in-flight judging of pass-through TLS (docs/proxy.md, "Pass-through
 * judged in flight"). The kernel queues the first payload packets of a
 * flow the ruleset marked pending (nft.h, NFT_QMARK_*) to one NFQUEUE;
 * egressd reads them over netlink (nfq_msg.h), reassembles the
 * ClientHello per flow (tls_flow.h), asks the daemon's judge exactly as
 * the proxy does, and gives every held packet of the flow its verdict:
 * NF_REPEAT with the packet mark NFT_QMARK_OK (a rule copies it into the
 * conntrack mark; the rest of the flow never leaves the kernel) or
 * NFT_QMARK_REFUSED (the flow is reset; the origin saw the handshake but
 * no byte of payload). Segments of an unfinished hello are held (no
 * verdict) until it is whole, bounded by bytes (TLS_FLOW_BYTES_MAX),
 * packets (NFQ_HOLD_MAX) and time (hello_ms): past a bound the flow is
 * refused. The queue has no bypass: with egressd gone, pending flows get
 * no verdict and nothing of them passes; judged flows keep their mark.
 *
 * The kernel's share (nfq_bpf.h): a flow passed here teaches the
 * in-kernel judge its (SNI, address, port), and the next flows naming
 * the same pass in the kernel without a trip through the queue, until
 * the judge's generation moves (nfq_judge_moved) or the address's lease
 * ends.
 *
 * Threading: none; one read event and one timer on the daemon's loop.
 */
#ifndef EGRESSD_NFQ_H
#define EGRESSD_NFQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/addr.h"
#include "util/err.h"

struct event_base;
struct log;

/* Bounds. */
#define NFQ_FLOWS_MAX 1024 /* flows held or recently judged */
#define NFQ_HOLD_MAX 64 /* packets of one flow held for its hello */
#define NFQ_QUEUE_MAXLEN 4096 /* packets the kernel holds for us */
#define NFQ_COPY_RANGE 65535 /* bytes of a packet copied to us */
#define NFQ_RECV_MAX (NFQ_COPY_RANGE + 4096) /* one read */
#define NFQ_RCVBUF (8u << 20) /* socket buffer: a burst of hellos */
#define NFQ_TICK_MS 100 /* the sweep of expired flows */
/* The last this many flows passed are remembered with their SNI, to be
 * judged again by name when the policy changes (nfq_rejudge). */
#define NFQ_JUDGED_MAX 4096
/* A judged flow is remembered this long: packets queued before its
 * conntrack mark changed still arrive, and get the same verdict. */
#define NFQ_JUDGED_KEEP_MS 10000
/* ... but a full table forgets those judged this long ago (nfq_flow.c).
 * Late packets come within the read that judged the flow or the next;
 * at 1 s, a client opening 1,100 TLS connections a second (wrk -c64
 * here) filled the table with flows judged within it, and its new ones
 * were refused (table_full), leaving the origin sockets that had seen
 * their handshakes to collide with the ports' next use. 100 ms: 10,000
 * new flows a second before that. */
#define NFQ_JUDGED_GRACE_MS 100
#define NFQ_HELLO_MS_DEFAULT 5000

struct nfq_hooks {
	/*
	 * May name (an SNI: lowercase, no trailing dot, not an IP literal)
	 * be reached at dst:port over TCP? NULL, or the refusal's reason
	 * (a fixed string). Required.
	 */
	const char *(*judge)(
	    void *arg, const char *name, const struct addr *dst, uint16_t port);
	/*
	 * Must the proxy now see name's requests on port (a binding could
	 * match it, request rules name it)? Then a flow judged in flight
	 * cannot stay (nfq_rejudge). NULL: never.
	 */
	bool (*held)(void *arg, const char *name, uint16_t port);
	/*
	 * A hello naming a held name (above) reached the queue: its address
	 * was not yet known to need the proxy (a binding added after the
	 * name was learned, or the address's hold lapsed before its learned
	 * element). The flow is refused ("held"), and this puts dst on the
	 * proxy path for its next flow. NULL: nothing.
	 */
	void (*hold)(void *arg, const struct addr *dst);
	/*
	 * The in-kernel judge (nfq_opts.kernel_judge). gen: a number that
	 * moves whenever judge or held could answer differently for any
	 * name before until (below) says (a verdict the kernel holds is
	 * void once it moves). until:
	 * CLOCK_MONOTONIC milliseconds until which judge's "allowed" for
	 * name at dst:port holds at the latest (the address's lease; UINT64_MAX
	 * when only gen can end it); 0: the kernel is not told. NULL: the
	 * queue judges alone.
	 */
	uint64_t (*gen)(void *arg);
	uint64_t (*until)(
	    void *arg, const char *name, const struct addr *dst, uint16_t port);
	void *arg;
};

/* A judged flow, as nfq_rejudge hands it over: original direction. */
struct nfq_flow_id {
	int family; /* 4 or 6 */
	uint8_t src[16], dst[16]; /* network order; IPv4 in the first 4 */
	uint16_t sport, dport; /* host order */
};

struct nfq_opts {
	uint16_t queue_num;
	unsigned hello_ms; /* 0: NFQ_HELLO_MS_DEFAULT */
	/* Monotonic milliseconds; NULL = CLOCK_MONOTONIC. For tests. */
	uint64_t (*clock)(void *arg);
	void *clock_arg;
	/* Load the in-kernel judge (nfq_bpf.h); its table is the caller's
	 * to install (nfq_kernel_fd). Failing to load is not an error: the
	 * queue judges alone, nfq_status says why. */
	bool kernel_judge;
};

struct nfq_status {
	uint64_t packets; /* read from the queue */
	uint64_t judged; /* flows allowed */
	uint64_t refused; /* flows refused (every reason) */
	uint64_t timeouts; /* ... of them: the hello did not complete */
	uint64_t errors; /* unreadable messages, failed verdicts, drops */
	size_t flows; /* held or recently judged now */
	bool conntrack_glue; /* the kernel takes conntrack in verdicts */
	bool kernel; /* the in-kernel judge is loaded */
	const char *kernel_why; /* "bpf", or why not (lent by q) */
	uint64_t kernel_passed; /* hellos it passed */
	uint64_t kernel_missed; /* hellos it read and left to the queue */
	uint64_t kernel_unlogged; /* passed, not in the log (ring full) */
};

struct nfq;

/*
 * Binds queue o->queue_num on a new netlink socket (fails when the
 * kernel has no nfnetlink_queue, or another process holds the queue)
 * and reads it on base. log is borrowed and must outlive q.
 */
struct nfq *nfq_new(struct event_base *base, const struct nfq_opts *o,
    const struct nfq_hooks *h, struct log *log, struct err *e);
void nfq_free(struct nfq *q); /* pending flows lose their packets */
void nfq_status(const struct nfq *q, struct nfq_status *out);

/*
 * After a policy change, what the proxy does to its open connections
 * (proxy_rejudge): the flows passed in flight (the last NFQ_JUDGED_MAX)
 * are judged again by their SNI with the hooks, and each the judge now
 * refuses, or whose host the proxy must now see (hooks.held), is
 * forgotten and handed to cut (which marks its conntrack entry refused:
 * the flow may be long gone, or the address-based cut may have got it
 * already). Returns how many were handed over. The conntrack cut judges
 * by address alone: this is what catches a denied SNI on an address
 * still allowed for another name.
 */
size_t nfq_rejudge(struct nfq *q,
    void (*cut)(void *arg, const struct nfq_flow_id *f), void *arg);

/* The in-kernel judge's program, for its table (nft_kjudge_install); -1
 * when it is not loaded. */
int nfq_kernel_fd(const struct nfq *q);
/* Unloads it (its table could not be installed), keeping why. */
void nfq_kernel_off(struct nfq *q, const char *why);
/* hooks.gen moved: every verdict the kernel holds is void. */
void nfq_judge_moved(struct nfq *q);
/*
 * The resolver learned dst for name: when the hooks now allow name at
 * dst:port (judge, not held), the in-kernel judge is taught so, and the
 * first connection passes in the kernel too (with a new name per
 * connection, as a first one always is, none would else). Nothing
 * without it.
 */
void nfq_teach(
    struct nfq *q, const char *name, const struct addr *dst, uint16_t port);
/* The in-kernel judge forgets what it was taught for name at dst:port
 * (the name left the address before its lease: nft_on_forget); the
 * next such hello is the queue's. */
void nfq_forget(
    struct nfq *q, const char *name, const struct addr *dst, uint16_t port);

#endif
