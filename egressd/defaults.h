/*
 * defaults: every default of egressd's configuration, in one place. The
 * numbers are the reference's (../shared/contract/opensandbox-egress.md
 * §1), so a deployment written for it runs unchanged; config.c applies
 * them, the nft builder's own defaults (for tests and tools that build a
 * ruleset without a config) and the help text read them from here.
 */
#ifndef EGRESSD_DEFAULTS_H
#define EGRESSD_DEFAULTS_H

#define EGRESSD_STR_(x) #x
#define EGRESSD_STR(x) EGRESSD_STR_(x)

#define EGRESSD_DEFAULT_API_PORT 18080 /* OPENSANDBOX_EGRESS_HTTP_ADDR */
#define EGRESSD_DEFAULT_HTTP_ADDR ":" EGRESSD_STR(EGRESSD_DEFAULT_API_PORT)
#define EGRESSD_DEFAULT_DNS_PORT 15353 /* the resolver, 127.0.0.1 and ::1 */
#define EGRESSD_DEFAULT_PROXY_PORT 18081 /* OPENSANDBOX_EGRESS_MITMPROXY_PORT */
#define EGRESSD_DEFAULT_MARK 0x1u /* SO_MARK of egressd's own sockets */
#define EGRESSD_DEFAULT_MAX_RULES 4096 /* OPENSANDBOX_EGRESS_MAX_RULES */
#define EGRESSD_DEFAULT_DNS_TIMEOUT_S 5
#define EGRESSD_DEFAULT_PROBE_INTERVAL_S 30
#define EGRESSD_DEFAULT_RULES_DIR "/var/egress/rules"
#define EGRESSD_DEFAULT_TRUST_DIR "/etc/ssl/certs"
#define EGRESSD_DEFAULT_STATE_DIR "/var/lib/egressd"

#endif
