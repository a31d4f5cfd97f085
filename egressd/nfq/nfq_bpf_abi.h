/*
 * nfq_bpf_abi: what egressd and its in-kernel judge (bpf/judge.bpf.c)
 * share: the maps' keys and values, byte for byte. Both sides compile
 * this header; nothing here may depend on either's headers.
 */
#ifndef EGRESSD_NFQ_BPF_ABI_H
#define EGRESSD_NFQ_BPF_ABI_H

#include <linux/types.h>

/* An SNI in a key: at most 253 bytes (tls_hello.h), NUL-padded. */
#define NFQ_BPF_NAME_LEN 256

/* A hello longer than this (record header included) is left to the
 * queue: the in-kernel parser reads the packet into a buffer this big. */
#define NFQ_BPF_HELLO_MAX 4096

/* The verdicts remembered, the stream starts followed (SYN-ACKs) and the
 * flows passed. */
#define NFQ_BPF_VERDICTS_MAX 8192
#define NFQ_BPF_STARTS_MAX 16384
#define NFQ_BPF_PASSED_MAX 4096

/* One verdict egressd gave: name may be reached at addr:port. */
struct nfq_bpf_vkey {
	__u8 family; /* 4 or 6 */
	__u8 pad;
	__u16 port; /* host order */
	__u8 addr[16]; /* network order; IPv4 in the first 4, rest 0 */
	char name[NFQ_BPF_NAME_LEN]; /* lowercase, NUL-padded */
};

/* ... valid while the judge's generation is gen and until until_ns
 * (CLOCK_MONOTONIC, the lease of the learned address). */
struct nfq_bpf_verdict {
	__u64 gen;
	__u64 until_ns;
};

/* A flow, original direction. */
struct nfq_bpf_tuple {
	__u8 family;
	__u8 pad[3];
	__u8 src[16], dst[16];
	__u16 sport, dport; /* host order */
};

/*
 * The audit ring (map "audit"): one record per hello passed in the
 * kernel, the flow and its SNI, for egressd's log. egressd reads it on
 * its tick, not woken per record; a record the full ring cannot take is
 * counted (NFQ_BPF_UNLOGGED), the flow passes all the same.
 */
#define NFQ_BPF_AUDIT_BYTES (256 * 1024)
struct nfq_bpf_audit {
	struct nfq_bpf_tuple t;
	char name[NFQ_BPF_NAME_LEN]; /* NUL-padded */
};

/* The judge's generation (map "gen", one element, mmapped by egressd). */
struct nfq_bpf_gen {
	__u64 gen;
};

/* Counters (map "stats", per CPU). */
enum nfq_bpf_stat {
	NFQ_BPF_PASSED = 0, /* hellos passed in the kernel */
	NFQ_BPF_MISSED, /* a hello the kernel read, with no verdict for it */
	NFQ_BPF_UNLOGGED, /* passed, but the audit ring was full */
	NFQ_BPF_STATS
};

#endif
