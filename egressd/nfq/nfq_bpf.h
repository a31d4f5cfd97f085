/*
 * nfq_bpf: the kernel's share of in-flight judging (docs/proxy.md, "The
 * judge in the kernel"). egressd loads bpf/judge.bpf.c, a socket filter
 * that nftables runs (xt_bpf) on pending flows' packets: a hello whose
 * (SNI, address, port) egressd already judged allowed passes in the
 * kernel, with no trip through the queue; anything else still goes to
 * the queue (nfq.h). This is the object that owns the program and its
 * maps: what the kernel may pass (nfq_bpf_remember), the generation
 * that voids all of it at once (nfq_bpf_set_gen), the flows it passed
 * (nfq_bpf_passed_each) and the record of each pass for the log
 * (nfq_bpf_audit_drain).
 *
 * Loading needs CAP_BPF (or CAP_SYS_ADMIN) and a kernel with bpf_loop
 * (5.17): without either, nfq_bpf_new fails and the queue judges alone.
 *
 * Threading: none; every call is a bpf(2) syscall or a store.
 */
#ifndef EGRESSD_NFQ_BPF_H
#define EGRESSD_NFQ_BPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/nfq/nfq_bpf_abi.h"
#include "util/err.h"

struct nfq_bpf;

struct nfq_bpf *nfq_bpf_new(struct err *e);
void nfq_bpf_free(struct nfq_bpf *b);

/* The program, for the nftables rule that runs it. */
int nfq_bpf_prog_fd(const struct nfq_bpf *b);

/* Voids every verdict remembered under another generation. A store. */
void nfq_bpf_set_gen(struct nfq_bpf *b, uint64_t gen);

/*
 * The kernel may pass a hello naming name (lowercase, no trailing dot)
 * to addr:port (family 4 or 6; addr network order, 4 or 16 bytes) while
 * the generation is gen and until until_ms (CLOCK_MONOTONIC). -1 and e
 * when the map refuses it (full: the queue keeps judging that name).
 */
int nfq_bpf_remember(struct nfq_bpf *b, const char *name, int family,
    const uint8_t *addr, uint16_t port, uint64_t gen, uint64_t until_ms,
    struct err *e);

/* The kernel no longer passes a hello naming name to addr:port (what
 * nfq_bpf_remember taught, if anything). */
void nfq_bpf_forget(struct nfq_bpf *b, const char *name, int family,
    const uint8_t *addr, uint16_t port);

/*
 * Each flow the kernel passed (the last NFQ_BPF_PASSED_MAX) with its SNI;
 * those fn returns true for are forgotten. Returns how many were.
 */
size_t nfq_bpf_passed_each(struct nfq_bpf *b,
    bool (*fn)(void *arg, const struct nfq_bpf_tuple *f, const char *sni),
    void *arg);

/*
 * Each flow passed in the kernel since the last call, in order, with its
 * SNI (the audit ring: at most NFQ_BPF_AUDIT_BYTES of them; the ring
 * never wakes anyone, the caller drains it on a tick). Returns how many.
 */
size_t nfq_bpf_audit_drain(struct nfq_bpf *b,
    void (*fn)(void *arg, const struct nfq_bpf_tuple *f, const char *sni),
    void *arg);

/* Hellos passed in the kernel; hellos read there and left to the queue
 * for want of a verdict; passed ones the full audit ring could not
 * take (never logged). */
void nfq_bpf_counts(const struct nfq_bpf *b, uint64_t *passed, uint64_t *missed,
    uint64_t *unlogged);

#endif
