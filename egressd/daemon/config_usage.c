/*
 * config_usage: egressd --help. Kept apart from the parser (config.c) so
 * that the table of settings and the text describing them are each
 * readable on their own.
 */
#include <stdio.h>

#include "egressd/base/defaults.h"
#include "egressd/base/log.h"
#include "egressd/daemon/config.h"
#include "egressd/nft/nft.h"

/*
 * The numbers come from defaults.h (and the bounds it names), printed
 * rather than spelled out here, so the help cannot drift from the code.
 * Two halves: the policy, API, resolver and nftables flags here ...
 */
static void
config_usage_core(FILE *f)
{
	fprintf(f,
	    "usage: egressd [options]\n"
	    "  --policy FILE           policy file (YAML or JSON); rewritten "
	    "after API\n"
	    "                          changes (env "
	    "OPENSANDBOX_EGRESS_POLICY_FILE)\n"
	    "  --check                 validate the policy file and exit\n"
	    "  --mode MODE             dns+nft (default) or dns (no nftables)\n"
	    "  --rules-dir DIR         always-rules directory (%s)\n"
	    "  --http-addr ADDR        control API address, \"\" to disable "
	    "(%s)\n"
	    "  --api-socket PATH       control API on a Unix socket (mode "
	    "0660)\n"
	    "  --api-token-file FILE   file holding the API token "
	    "(preferred)\n"
	    "  --api-token TOKEN       API token (wiped from the process "
	    "arguments)\n"
	    "  --api-insecure-no-token allow mutations without a token\n"
	    "  --api-loopback-uid UID  let loopback sockets of this uid "
	    "(execd's\n"
	    "                          /proxy relay) reach the API port; "
	    "token still\n"
	    "                          needed (off; 0 = root, warned)\n"
	    "  --max-rules N           cap on egress rules, 0 = none (%u)\n"
	    "  --policy-file-max BYTES largest policy file (%u)\n"
	    "  --dns-upstream ADDR     upstream resolver IP[:port] "
	    "(repeatable)\n"
	    "  --dns-port PORT         resolver listen port on 127.0.0.1/::1 "
	    "(%u)\n"
	    "  --dns-timeout SECONDS   per-upstream timeout, 1..%u (%u)\n"
	    "  --mark MARK             SO_MARK of egressd's own sockets "
	    "(%#x)\n"
	    "  --protect-port PORT     a local port the sandbox may not reach\n"
	    "                          (repeatable; the API port always is)\n"
	    "  --inbound-port PORT     pin a TCP port peers may connect to; "
	    "replies\n"
	    "                          of inbound connections leave only from "
	    "the\n"
	    "                          pinned ports and the API port "
	    "(repeatable)\n",
	    EGRESSD_DEFAULT_RULES_DIR, EGRESSD_DEFAULT_HTTP_ADDR,
	    (unsigned)EGRESSD_DEFAULT_MAX_RULES, (unsigned)POLICY_FILE_MAX,
	    (unsigned)EGRESSD_DEFAULT_DNS_PORT,
	    (unsigned)EGRESSD_DNS_TIMEOUT_S_MAX,
	    (unsigned)EGRESSD_DEFAULT_DNS_TIMEOUT_S, EGRESSD_DEFAULT_MARK);
}

/* ... the proxy, vault, learned sets and logging flags here. */
static void
config_usage_rest(FILE *f)
{
	fprintf(f,
	    "  --proxy                 transparent proxy on intercepted ports "
	    "(env\n"
	    "                          "
	    "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT)"
	    "\n"
	    "  --proxy-port PORT       its port on 127.0.0.1/::1 (%u)\n"
	    "  --proxy-conns-max N     proxy connections at once, 1..%u; "
	    "accept\n"
	    "                          pauses there (%u)\n"
	    "  --proxy-buffer-max MIB  bytes all proxy connections may "
	    "buffer\n"
	    "                          together; beyond, the one holding "
	    "most is\n"
	    "                          closed (%u)\n"
	    "  --proxy-head-timeout SECONDS\n"
	    "                          a request head after the decision "
	    "(keep-alive,\n"
	    "                          terminated) from its first byte, "
	    "1..%u (%u)\n"
	    "  --intercept-port PORT   a TCP port redirected to the proxy "
	    "besides\n"
	    "                          80 and 443 (repeatable)\n"
	    "  --passthrough-judge MODE pass-through TLS judged by the proxy, "
	    "or in\n"
	    "                          flight from NFQUEUE: proxy, queue, "
	    "auto (%s)\n"
	    "  --kernel-judge MODE     auto: a hello egressd passed once, "
	    "passed in\n"
	    "                          the kernel next time (BPF); off: the "
	    "queue\n"
	    "                          judges every one (auto)\n"
	    "  --vault-compressed MODE a compressed response to an injected "
	    "request:\n"
	    "                          refuse (502) or decode (gzip, deflate; "
	    "then\n"
	    "                          redacted) (%s)\n"
	    "  --vault-require-mlock   fail at start when the credential "
	    "vault's\n"
	    "                          memory cannot be locked (mlock)\n"
	    "  --upstream-proxy URL    every origin connection through this "
	    "HTTP\n"
	    "                          CONNECT proxy, http://IP[:port] (env\n"
	    "                          OPENSANDBOX_EGRESS_UPSTREAM_PROXY; "
	    "its\n"
	    "                          Proxy-Authorization value: env\n"
	    "                          "
	    "OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH)\n"
	    "  --upstream-proxy-auth-file FILE\n"
	    "                          that value from a file (preferred)\n"
	    "  --upstream-proxy-connect MODE\n"
	    "                          CONNECT to the judged name (default) "
	    "or\n"
	    "                          address\n"
	    "  --teardown-on-exit      remove the nftables table on a clean "
	    "stop\n"
	    "  --learned-max N         elements per learned set; beyond it the "
	    "least\n"
	    "                          recently learned are evicted (%u)\n"
	    "  --sandbox-id ID         added to every log line\n"
	    "  --log-level LEVEL       debug, info, warn, error (%s)\n"
	    "  --log-file FILE         JSON lines to FILE (reopened on "
	    "SIGUSR1)\n"
	    "  --version, --help\n",
	    (unsigned)EGRESSD_DEFAULT_PROXY_PORT,
	    (unsigned)EGRESSD_PROXY_CONNS_MAX_MAX,
	    (unsigned)EGRESSD_DEFAULT_PROXY_CONNS_MAX,
	    (unsigned)EGRESSD_DEFAULT_PROXY_BUFFER_MB,
	    (unsigned)EGRESSD_PROXY_HEAD_TIMEOUT_S_MAX,
	    (unsigned)EGRESSD_DEFAULT_PROXY_HEAD_TIMEOUT_S,
	    EGRESSD_DEFAULT_PASSTHROUGH_JUDGE, EGRESSD_DEFAULT_VAULT_COMPRESSED,
	    (unsigned)EGRESSD_DEFAULT_LEARNED_MAX,
	    log_level_name(EGRESSD_DEFAULT_LOG_LEVEL));
}

void
config_usage(FILE *f)
{
	config_usage_core(f);
	config_usage_rest(f);
}
