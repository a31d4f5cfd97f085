/*
 * config: every knob of the daemon in one struct, filled from the
 * OpenSandbox environment variables (contract §1), then from the command
 * line (an explicit flag wins over the environment), then validated.
 *
 * The struct owns every string it holds; config_clear() frees them and
 * wipes the API token. Parsing is pure apart from reading a token file in
 * config_finish(), so it is unit-tested with made-up environments.
 */
#ifndef EGRESSD_CONFIG_H
#define EGRESSD_CONFIG_H

#include "egressd/daemon/config_uproxy.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "egressd/api/api.h"
#include "egressd/base/defaults.h"
#include "egressd/base/log.h"
#include "util/err.h"

#define CONFIG_LIST_MAX 64 /* entries of any comma-separated list */
#define CONFIG_TOKEN_MAX 4096 /* bytes of an API token */
#define CONFIG_VALUE_MAX 4096 /* bytes of any other value */
#define CONFIG_PORTS_MAX 16 /* --protect-port entries */

enum config_mode {
	CONFIG_MODE_DNS_NFT = 0, /* default: resolver + nftables */
	CONFIG_MODE_DNS, /* resolver only, explicitly chosen */
};

/* A parsed "IP", "IP:port" or "[IPv6]:port" (literals only). */
/* --vault-compressed (defaults.h): what a compressed response to an
 * injected request gets. */
enum config_pt_judge {
	CONFIG_PT_PROXY = 0,
	CONFIG_PT_QUEUE,
	CONFIG_PT_AUTO,
};
int config_parse_pt_judge(const char *s, enum config_pt_judge *out);
const char *config_pt_judge_name(enum config_pt_judge v);
struct config;
/* --passthrough-judge, --kernel-judge (what: the flag or variable, for
 * e). */
int config_set_pt_judge(
    struct config *c, const char *v, const char *what, struct err *e);
int config_set_kernel_judge(
    struct config *c, const char *v, const char *what, struct err *e);

enum config_vault_compressed {
	CONFIG_VAULT_COMPRESSED_REFUSE = 0,
	CONFIG_VAULT_COMPRESSED_DECODE,
};

struct config_hostport {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
	uint16_t port;
	char text[64]; /* canonical "ip:port" / "[ip]:port" */
};

struct config_strlist {
	char **v;
	size_t n;
};

struct config {
	enum config_mode mode;
	char *policy_file; /* --policy / OPENSANDBOX_EGRESS_POLICY_FILE */
	char *rules_json; /* OPENSANDBOX_EGRESS_RULES (used without a file) */
	char *rules_dir; /* always-rules directory */

	/*
	 * Control API: the module's own options (api.h), parsed into in
	 * place and owned here (config_clear frees the strings and wipes the
	 * token); the daemon adds only what is not configuration (start
	 * time, log, stats). listen_tcp: --http-addr, "" disables TCP;
	 * listen_unix: --api-socket; tls_cert, tls_key: TLS on the TCP API
	 * (both or neither: vault writes from off the pod need it, contract
	 * §4, 426 otherwise); token: secret, never logged; max_rules: 0 = no
	 * cap.
	 */
	struct api_opts api;
	char *token_file;
	/*
	 * --api-loopback-uid: loopback TCP to the API port from sockets
	 * owned by this one uid (execd's /proxy/PORT relay, the OpenSandbox
	 * server's path) passes nft; never set by default; 0 (root) only when
	 * named, with a warning (docs/security.md).
	 */
	bool api_loopback_uid_set;
	uint32_t api_loopback_uid;
	/* Bytes of the policy file (operator's, trusted): --policy-file-max,
	 * default POLICY_FILE_MAX (sized from the rule cap). */
	size_t policy_file_max;

	/* DNS. */
	uint16_t dns_port;
	struct config_hostport *dns_upstreams;
	size_t ndns_upstreams;
	unsigned dns_timeout_s;
	char *dns_probe; /* name probed for upstream health, or NULL */
	unsigned dns_probe_interval_s;
	struct config_strlist nameserver_exempt; /* IP literals */

	/* nft. */
	uint32_t mark;
	/* Loopback/local ports only egressd may reach (besides the API's). */
	uint16_t protected_ports[CONFIG_PORTS_MAX];
	size_t nprotected_ports;
	/* Pinned inbound TCP ports; none = replies from any listening port. */
	uint16_t inbound_ports[CONFIG_PORTS_MAX];
	size_t ninbound_ports;
	bool teardown_on_exit;
	uint32_t learned_max; /* elements per learned set */
	bool block_doh_443;
	struct config_strlist doh_blocklist; /* IPs/CIDRs */

	/* Transparent proxy (proxy.h); the vault's settings come later. */
	bool proxy_transparent;
	uint16_t proxy_port;
	size_t proxy_conns_max; /* connections at once */
	size_t proxy_buffer_mb; /* buffered bytes of all connections, MiB */
	unsigned proxy_head_timeout_s; /* a request head after the decision */
	/* TCP ports redirected to the proxy besides 80 and 443. */
	uint16_t intercept_ports[CONFIG_PORTS_MAX];
	size_t nintercept_ports;
	char *trust_dir;
	bool ssl_insecure;
	char *state_dir; /* the proxy's CA and the exported bundle */
	char *ca_key_file, *ca_cert_file; /* an operator's CA, or NULL */
	char *ca_bundle; /* where the bundle goes; NULL: in state_dir */
	enum config_vault_compressed vault_compressed;
	/* How pass-through TLS is judged (docs/proxy.md): through the
	 * proxy, in flight from NFQUEUE queue_num (start fails when the
	 * kernel cannot), or in flight where it can (auto). */
	enum config_pt_judge pt_judge;
	/* --kernel-judge off: in-flight judging stays in the queue, never
	 * in the kernel (nfq_bpf.h); auto (default) loads it when it can. */
	bool kernel_judge_off;
	uint16_t queue_num;
	/* A secret arena that mlock refused is fatal at start rather than
	 * logged (vault.mlock_failed). */
	bool vault_require_mlock;

	/*
	 * OpenSandbox's newer settings (config_compat.c, docs/compat.md).
	 * vault_scoped: every binding must name match.methods and
	 * match.paths, and none may be the host-wide wildcard path; ignore_hosts: names (or
	 * "*.suffix") never terminated, so no binding may cover one;
	 * extra_ports: TCP ports intercepted besides 80, 443 and
	 * intercept_ports (merged into intercept_ports by config_finish).
	 */
	bool vault_scoped;
	struct config_strlist ignore_hosts;
	uint16_t extra_ports[CONFIG_PORTS_MAX];
	size_t nextra_ports;
	/* Every origin connection through an upstream proxy
	 * (config_uproxy.h). */
	struct config_uproxy uproxy;

	/* Misc. */
	char *deny_webhook;
	char *sandbox_id;
	enum log_level log_level;
	char *log_file;

	/*
	 * Testing only (EGRESSD_TEST_FAILPOINT): the daemon kills itself
	 * with SIGKILL when it reaches the named step of a policy commit, so
	 * tests can prove crash consistency at every step.
	 */
	char *failpoint;
	/* EGRESSD_* variables egressd does not know (warned about at start). */
	struct config_strlist unknown_env;

	/* Actions. */
	bool check, version, help;
};

void config_init(struct config *c);
void config_clear(struct config *c);

/*
 * Reads the OPENSANDBOX_EGRESS_* and EGRESSD_* variables from envp (NULL
 * terminated "NAME=value" strings, e.g. environ). 0, or -1 with one line
 * naming the variable and what is wrong.
 */
int config_from_env(struct config *c, char *const *envp, struct err *e);
/* Parses argv (getopt_long); flags override the environment. */
int config_from_args(
    struct config *c, int argc, char *const *argv, struct err *e);
/*
 * Cross-field checks and the token file. Run once after both sources.
 */
int config_finish(struct config *c, struct err *e);
/*
 * Reads an API token file into buf (cap >= CONFIG_TOKEN_MAX + 2): one
 * non-empty line, through links, with the owner checks of
 * fileread (FILEREAD_OWNED | FILEREAD_DIRS). Returns its length;
 * -1 and e (never holding the token) otherwise, buf wiped. The caller
 * wipes buf after use.
 */
int config_token_read(const char *path, char *buf, size_t cap, struct err *e);

/* Parses "IP", "IP:port", "[IPv6]:port"; default_port when absent. */
int config_parse_hostport(const char *s, uint16_t default_port,
    struct config_hostport *out, struct err *e);

const char *config_mode_name(enum config_mode m);
/* "refuse" or "decode", the spelling of the flag's values. */
const char *config_vault_compressed_name(enum config_vault_compressed v);
/*
 * --api-loopback-uid (config_api_uid.c): sets or ("") clears the uid;
 * config_finish() calls the check, which refuses it without nft, the TCP
 * API or a token. 0 or -1 with e.
 */
int config_api_uid_set(
    struct config *c, const char *v, const char *what, struct err *e);
int config_api_uid_check(const struct config *c, struct err *e);

/* config_parse.c: helpers shared by config.c and config_compat.c. */
void config_strlist_clear(struct config_strlist *l);
int config_parse_bool(
    const char *s, bool *out, const char *what, struct err *e);
/* Splits s on commas and blanks (empty items skipped), at most
 * CONFIG_LIST_MAX items; replaces *out. */
int config_split(
    const char *s, struct config_strlist *out, const char *what, struct err *e);
int config_set_port(
    uint16_t *dst, const char *s, const char *what, struct err *e);
/* A whole number in [min, max] (decimal, 0x hex or 0 octal). */
int config_parse_uint(const char *s, unsigned long long min,
    unsigned long long max, unsigned long long *out, const char *what,
    struct err *e);

/* Prints the --help text to f. */
void config_usage(FILE *f);

/*
 * OpenSandbox's newer settings (config_compat.c): each is honoured with
 * the reference's meaning or refused with a message saying why.
 * config_compat_env: 1 when name (nl bytes) is one of them and v was
 * taken, 0 when it is not one of them, -1 with e when v is refused.
 */
int config_compat_env(struct config *c, const char *name, size_t nl,
    const char *v, struct err *e);
/* Cross checks of config_finish; merges extra_ports into intercept_ports. */
int config_compat_finish(struct config *c, struct err *e);
void config_compat_clear(struct config *c);

struct policy;
/* The MITMPROXY_IGNORE_HOSTS entry a name or "*.suffix" could match
 * (a name both cover), or NULL. */
const char *config_compat_ignored(const struct config *c, const char *name);
/*
 * The operator's rules for bindings: REQUIRE_SCOPED_MATCH and
 * IGNORE_HOSTS, checked on the bindings of the policy file (api false)
 * or of the API's vault (api true) in p. 0, or -1 with e naming the
 * binding, what is wrong and the setting that asks for it.
 */
int config_compat_bindings(
    const struct config *c, const struct policy *p, bool api, struct err *e);

#endif
