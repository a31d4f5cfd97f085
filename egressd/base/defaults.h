/*
 * defaults: every default of egressd's configuration, and the range each
 * number may take, in one place. The defaults are the reference's
 * (../shared/contract/opensandbox-egress.md §1), so a deployment written
 * for it runs unchanged. config.c applies them and prints them in --help;
 * the modules that fall back to a default when handed 0 (the resolver,
 * the upstream set, the nft builder for tests and tools that build a
 * ruleset without a config) read the same names; the deploy_manpage test
 * checks that docs/egressd.8 states each one.
 *
 * Bounds that belong to a module's data rather than to a setting stay
 * with the module (the rule ceiling in policy/policy.h, the learned-set
 * limits in nft.h) and are named here only where a setting is checked
 * against them.
 */
#ifndef EGRESSD_DEFAULTS_H
#define EGRESSD_DEFAULTS_H

#define EGRESSD_STR_(x) #x
#define EGRESSD_STR(x) EGRESSD_STR_(x)

/* Control API. */
#define EGRESSD_DEFAULT_API_PORT 18080 /* OPENSANDBOX_EGRESS_HTTP_ADDR */
#define EGRESSD_DEFAULT_HTTP_ADDR ":" EGRESSD_STR(EGRESSD_DEFAULT_API_PORT)
#define EGRESSD_DEFAULT_MAX_RULES 4096 /* OPENSANDBOX_EGRESS_MAX_RULES */

/* Policy files. */
#define EGRESSD_DEFAULT_RULES_DIR "/var/egress/rules"
/* --policy-file-max: default POLICY_FILE_MAX (sized from the rule cap),
 * at most POLICY_FILE_CEILING (policy/policy.h), at least this. */
#define EGRESSD_POLICY_FILE_MAX_MIN 1024

/* The resolver. */
#define EGRESSD_DEFAULT_DNS_PORT 15353 /* on 127.0.0.1 and ::1 */
#define EGRESSD_DEFAULT_DNS_UPSTREAM_PORT 53 /* an upstream without :port */
/* Budget of one upstream query, all attempts (…_DNS_UPSTREAM_TIMEOUT). */
#define EGRESSD_DEFAULT_DNS_TIMEOUT_S 5
#define EGRESSD_DNS_TIMEOUT_S_MAX 120
/* Upstream health probe (…_DNS_UPSTREAM_PROBE_INTERVAL_SEC). */
#define EGRESSD_DEFAULT_PROBE_INTERVAL_S 30
#define EGRESSD_PROBE_INTERVAL_S_MAX 86400

/* nftables. */
#define EGRESSD_DEFAULT_MARK 0x1u /* SO_MARK of egressd's own sockets */
#define EGRESSD_DEFAULT_LEARNED_MAX 262144 /* elements per learned set */

/* The transparent proxy. */
#define EGRESSD_DEFAULT_PROXY_PORT 18081 /* OPENSANDBOX_EGRESS_MITMPROXY_PORT */
#define EGRESSD_DEFAULT_TRUST_DIR "/etc/ssl/certs"
/* Proxy connections at once (accept pauses there); each may take
 * PROXY_FDS_PER_CONN descriptors, and RLIMIT_NOFILE is raised at start
 * to hold them (proxy.h). */
#define EGRESSD_DEFAULT_PROXY_CONNS_MAX 4096
#define EGRESSD_PROXY_CONNS_MAX_MAX 65536
/* MiB the proxy's connections may hold in their buffers together (issue
 * 34: each is bounded, but thousands of flooding ones were not): beyond,
 * the connection holding the most is closed (proxy.h, buf_max). Well
 * under the manifests' 512 MiB with the per-connection overhead of
 * conns_max connections (docs/proxy.md, "Memory under load"). */
#define EGRESSD_DEFAULT_PROXY_BUFFER_MB 192
#define EGRESSD_PROXY_BUFFER_MB_MAX 65536
/* A request head after the proxy's decision (the next one on a
 * keep-alive connection, every one inside a terminated connection):
 * seconds from its first byte to its end (PROXY_HEAD_MS, proxy.h). */
#define EGRESSD_DEFAULT_PROXY_HEAD_TIMEOUT_S 10
#define EGRESSD_PROXY_HEAD_TIMEOUT_S_MAX 300
#define EGRESSD_DEFAULT_STATE_DIR "/var/lib/egressd"
/* A compressed response on a connection the vault injected into:
 * "refuse" (502, never forwarded unscanned) or "decode" (decoded,
 * redacted, forwarded as identity). */
#define EGRESSD_DEFAULT_VAULT_COMPRESSED "refuse"

/* Logging (enum log_level, egressd/base/log.h). */
#define EGRESSD_DEFAULT_LOG_LEVEL LOG_INFO

/*
 * Source ports of egressd's own UDP sockets (upstream queries), above the
 * kernel's default ephemeral range (32768-60999). The ruleset drops every
 * unmarked UDP datagram from these ports, so the sandbox can never leave a
 * conntrack entry there: conntrack decides NAT once per flow, and a
 * sandbox flow (redirected to the resolver) that egressd's socket later
 * happened to reuse the 5-tuple of sent egressd's own queries back to
 * itself, in a loop.
 * dns/ binds them, nft/ guards them: so the numbers live here.
 */
#define EGRESSD_DNS_SPORT_LO 65280
#define EGRESSD_DNS_SPORT_HI 65535

/*
 * In-flight judging (docs/proxy.md): the conntrack marks of a flow whose
 * ClientHello egressd judges from the queue, shared by the ruleset
 * (egressd/nft, NFT_QMARK_*) and the queue reader (egressd/nfq), which
 * gives them back as packet marks in its verdicts.
 */
/* The NFQUEUE number in-flight judging binds (--passthrough-judge). */
#define EGRESSD_DEFAULT_QUEUE_NUM 4351
#define EGRESSD_DEFAULT_PASSTHROUGH_JUDGE "auto"
#define EGRESSD_QMARK_PENDING 0x45510001u
#define EGRESSD_QMARK_OK 0x45510002u
#define EGRESSD_QMARK_REFUSED 0x45510003u
/* A packet mark only, never a ct mark: given back (NF_REPEAT) to a
 * packet queued on the 5-tuple of a flow already judged. If its flow's
 * ct mark is OK or REFUSED by now, the ruleset passes or resets it; if
 * it is still PENDING, the packet belongs to a new connection that
 * reuses the tuple and comes back to the queue carrying this mark, to be
 * judged afresh (docs/proxy.md, "Reused 5-tuples"). */
#define EGRESSD_QMARK_RECHECK 0x45510004u

#endif
