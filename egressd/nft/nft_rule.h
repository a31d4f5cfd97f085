/*
 * nft_rule: one rule of a chain, from what it matches (nft_rule.c).
 */
#ifndef EGRESSD_NFT_RULE_H
#define EGRESSD_NFT_RULE_H

#include <stdbool.h>
#include <stdint.h>
#include "egressd/nft/nft.h"
#include "egressd/nft/nft_msg.h"

enum verdict {
	V_NONE,
	V_ACCEPT,
	V_DENY, /* jump deny: log, reset/icmpx */
	V_REDIRECT,
	V_TCP_RESET,
	V_ICMPX,
	V_LOG,
	V_QUEUE, /* to NFQUEUE o->queue_num, no bypass */
	V_DROP,
};

/* What a rule matches, in evaluation order; zero = don't care. */
struct rspec {
	const char *chain;
	bool l4_first; /* compare l4proto before anything else (a cheap
	                  first test for rows most packets fail) */
	bool ct_estrel; /* ct state established,related */
	uint32_t ct_state; /* other ct state bits (NF_CT_STATE_BIT), 0 = none */
	uint8_t ct_dir; /* 0 = any, else 1 + IP_CT_DIR_ORIGINAL/REPLY */
	uint8_t ip4_option; /* IPv4 option type present (needs nfproto) */
	bool ip6_rthdr; /* IPv6 routing header present (needs nfproto) */
	bool mark;
	uint8_t nfproto; /* NFPROTO_IPV4/6 */
	uint8_t l4proto; /* IPPROTO_* */
	uint8_t icmp6_lo, icmp6_hi; /* ICMP/ICMPv6 type range */
	bool icmp_type; /* compare the type even when icmp6_hi is 0 */
	const uint8_t *daddr; /* exact, needs nfproto */
	const char *daddr_set;
	uint16_t dport; /* needs l4proto tcp/udp */
	const char *dport_set;
	uint16_t sport_lo, sport_hi; /* range; needs l4proto tcp/udp */
	const char *sport_set; /* needs l4proto tcp/udp */
	bool oif_lo;
	bool fib_local;
	const uint32_t *skuid; /* meta skuid: the socket's owner (output) */
	uint32_t ct_mark_eq; /* ct mark == this (0: not compared); compared
	                        before ct_estrel (rule_ct) */
	uint32_t meta_mark_eq; /* meta mark == this (0: not compared) */
	bool tfo_cookie; /* a TCP Fast Open option carrying a cookie */
	bool synack; /* tcp flags & (syn | ack) == syn | ack; needs l4proto
	                tcp */
	bool syn_only; /* tcp flags & (syn | ack) == syn; needs l4proto tcp;
	                  with l4proto, before anything else (nft_rule_msg) */
	/* A TCP segment without payload whose header is this many 32-bit
	 * words (e_tcp_bare); needs nfproto and l4proto tcp. 0: any. */
	uint8_t tcp_bare_doff;
	bool ct_no_dnat; /* ct status without IPS_DST_NAT (not redirected) */
	bool not_mark; /* meta mark != the own mark */
	bool ct_mark_set; /* ct mark set meta mark (own flows, for cuts) */
	uint32_t ct_mark_imm; /* ct mark set this (0: not set) */
	/* xt_bpf: the BPF socket filter bpf_fd matches (nft_kjudge.c);
	 * after the ports, before the marks are set */
	bool bpf;
	int bpf_fd;
	uint32_t meta_mark_imm; /* meta mark set this (0: not set) */
	const char *counter;
	enum verdict v;
	uint16_t redir_port;
	uint32_t log_rate; /* V_LOG: lines per second */
};

/*
 * One row of a chain's rules. A row with l4proto stands for one rule per
 * protocol in it, in that order; with per_family, for one rule per
 * address family that has a destination in it (daddr[0] or daddr_set[0]
 * for IPv4, [1] for IPv6; a family with neither is left out), the
 * families inside the protocols. skip leaves the row out (what an option
 * turned off).
 */
struct rrow {
	struct rspec s;
	uint8_t l4proto[2]; /* one rule per protocol given, in this order */
	bool per_family;
	const uint8_t *daddr[2];
	const char *daddr_set[2];
	bool skip;
};

/* One NEWRULE of s; one per protocol and family of a row; rows in order;
 * the learned-limited rule of family (verdict from the default def). */
int nft_rule_msg(struct bctx *c, const struct rspec *s);
int nft_rule_row(struct bctx *c, const char *chain, const struct rrow *row);
int nft_rule_rows(
    struct bctx *c, const char *chain, const struct rrow *rows, size_t n);
uint32_t nft_rule_limited_type(int family);
/* The queue verdict of kind k to queue num (nft_queue.c). */
struct nftnl_rule;
int nft_rule_queue_expr(
    struct nftnl_rule *r, enum nft_queue_kind k, uint16_t num);
/* The rows and set of in-flight judging in nat_out and filter_out, its
 * port set and its hold sets (nothing when o->queue_kind is NONE). */
int nft_queue_nat_rows(struct bctx *c);
int nft_queue_filter_rows(struct bctx *c);
int nft_queue_sets(struct bctx *c);
int nft_queue_hold_sets(struct bctx *c, uint32_t size);
int nft_rule_limited(struct bctx *c, int family, enum policy_action def);

#endif
