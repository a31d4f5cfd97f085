/*
 * api: the control API (contract §3, §6) on libevent's evhttp.
 *
 * Routes (docs/api.md has every answer byte for byte):
 *   GET|POST|PUT|PATCH|DELETE /policy   token when configured
 *   *    /healthz                        never authenticated
 *   GET  /readyz                         never authenticated
 *   GET  /metrics                        token when configured
 *   GET  /v1/status                      token when configured
 *   GET|POST|PATCH|DELETE /credential-vault   token (writes: see below)
 *   GET  /credential-vault/credentials[/NAME], /bindings[/NAME]
 *   *    /credential-vault/_active       always 403
 * Anything else is 404 "404 page not found".
 *
 * Checks on /policy run in the reference's order: 401 (token), 405
 * (method), 412 (mutation without any configured token, unless
 * insecure_no_token), then 400/413 from validation, 400 from the vault
 * check, 500 when the commit fails.
 *
 * The module owns no policy state: it reads the current snapshot and
 * commits new ones through struct api_hooks, so it is testable without the
 * daemon. A mutation is handed to the daemon's commit queue (hook mutate):
 * it waits its turn behind the ones before it (FIFO, never refused while
 * the queue has room, never interleaved), is decided against the snapshot
 * in force at its turn, and is answered once it is in force; the loop
 * keeps serving meanwhile. Without that hook (unit tests), a mutation is
 * decided and committed inline through policy_commit / vault_commit.
 * A client that leaves while its mutation waits changes nothing: the
 * mutation still runs, the answer goes nowhere (evhttp frees a request
 * whose connection is gone when it is answered).
 *
 * Counters: the API increments stats->api_requests, api_unauthorized,
 * policy_updates_ok and policy_updates_failed; every other field is the
 * daemon's.
 */
#ifndef EGRESSD_API_H
#define EGRESSD_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>

#include "policy/policy.h"
#include "util/addr.h"
#include "util/err.h"

#define API_BODY_MAX POLICY_BODY_MAX /* 1 MiB; larger bodies are 413 */
#define API_HEADERS_MAX (16u << 10) /* bytes of request line + headers */
#define API_TIMEOUT_S 10 /* idle read/write timeout per connection */
/* Deadlines (api_frame): a client that drips bytes holds a slot no
 * longer than these; 408 "request timeout" then. */
#define API_HEAD_TIMEOUT_MS 5000 /* from accept or a head's first byte */
#define API_BODY_TIMEOUT_MS 10000 /* from the end of the head */
#define API_LINGER_MS 1000 /* input dropped after our own refusal */
/* Wrong tokens back off per peer (IPv6: per /64). */
#define API_AUTH_FREE_FAILS 3 /* failures before any backoff */
#define API_AUTH_BACKOFF_MS 1000u /* first backoff, doubled per failure */
#define API_AUTH_BACKOFF_MAX_MS 60000u
#define API_AUTH_PEERS 256 /* peers remembered (oldest replaced) */
#define API_AUTH_FORGET_S 600 /* quiet this long: forgotten */
#define API_CONNS_MAX 64 /* connections at once; then accept pauses */
#define API_BACKLOG 64 /* listen(2) backlog */
#define API_UNIX_MODE 0660 /* mode of the Unix socket */
#define API_WHY_MAX 256 /* readiness / health explanation */
#define API_ADDR_MAX 128 /* "[v6]:port" text of one listener */
#define API_MSG_MAX 1024 /* bytes of one text/plain answer */
#define API_LOG_ERR_MAX 256 /* bytes of an error message in a log line */
#define API_TRUSTED_PROXIES_MAX 16 /* CIDRs of TLS-terminating proxies */

struct event_base;
struct log;
struct stats;

/* Bounds of struct api_status's lists. */
#define API_STATUS_LIST_MAX 8 /* enforced, notEnforced entries */
#define API_STATUS_UPSTREAMS_MAX 8 /* resolver upstreams shown */
#define API_STATUS_TEXT_MAX 64 /* "[v6]:port" + NUL */
#define API_STATUS_COUNTS_MAX 40 /* proxy reasons or states */

/* One named counter of /v1/status (the name static, the daemon's). */
struct api_status_count {
	const char *name;
	uint64_t n;
};

/*
 * The daemon's side of /v1/status, a plain struct the status hook fills
 * (zeroed first) and the API renders (api_status.c): what is enforced and
 * what is not, and the state of the resolver and the proxy. Strings are
 * lent until the hook's caller returns (daemon.h, "Hooks"). The policy's
 * own fields (revision, source, mode, rules, the vault's counts) come from
 * the snapshot policy_get lends.
 */
struct api_status {
	const char *configured_mode; /* "dns+nft", "dns" */
	const char *enforced[API_STATUS_LIST_MAX];
	size_t nenforced;
	struct {
		const char *key, *why;
	} not_enforced[API_STATUS_LIST_MAX];
	size_t nnot_enforced;
	/* The policy file: its path (NULL: none), why API changes are not
	 * written back (NULL: they are), and a missing file's fallback. */
	const char *policy_file;
	const char *persist_off;
	bool policy_file_missing;
	const char *policy_fallback;
	bool dns_on;
	struct {
		uint16_t port;
		bool udp4, tcp4, udp6, tcp6;
		size_t cache_entries;
		size_t nupstreams;
		struct {
			char text[API_STATUS_TEXT_MAX];
			bool healthy;
		} upstream[API_STATUS_UPSTREAMS_MAX];
	} dns;
	bool proxy_on;
	struct {
		uint16_t port;
		uint64_t accepted, passthrough, refused;
		/* closes by reason (shown when not 0); connections open by
		 * state (all shown) */
		struct api_status_count closed[API_STATUS_COUNTS_MAX];
		size_t nclosed;
		struct api_status_count open[API_STATUS_COUNTS_MAX];
		size_t nopen;
	} proxy;
	bool learned_on;
	uint64_t learned; /* addresses in the learned sets */
	/* The path of pass-through TLS: "queue" (judged in flight) or
	 * "proxy", and why (both lent); the queue's counts (nfq.h). */
	bool passthrough_on;
	struct {
		const char *path, *why;
		uint64_t judged, refused, hello_timeouts, errors, packets;
		/* the in-kernel judge: "bpf" or "queue" (lent), why, and the
		 * hellos it passed or read and left to the queue */
		const char *kernel, *kernel_why;
		uint64_t kernel_passed, kernel_missed, kernel_unlogged;
		uint64_t flows;
	} passthrough;
};

/*
 * One mutation (/policy, /credential-vault) on its way through the
 * daemon's commit queue. The API owns it; the daemon borrows it from
 * mutate until it calls done, exactly once.
 */
struct api_mutation {
	/*
	 * The snapshot to commit (a new reference the daemon takes over),
	 * decided against cur (the snapshot in force at this mutation's turn,
	 * borrowed), or NULL when there is nothing to commit (the API keeps
	 * its own verdict). Runs on the commit worker's thread unless
	 * on_loop: pure then, touching only m and cur, no logging.
	 */
	struct policy *(*decide)(
	    struct api_mutation *m, const struct policy *cur);
	/* Decide on the loop's thread: vault bodies carry secrets, and
	 * their decide is small. */
	bool on_loop;
	bool persist; /* rewrite the policy file (the /policy routes) */
	/*
	 * On the loop: the outcome. rc 1: decide returned NULL, nothing
	 * changed. 0: next (lent) is in force, persisted when asked. -1: the
	 * commit failed and nothing changed, or the daemon is stopping (e
	 * says which; next NULL then).
	 */
	void (*done)(struct api_mutation *m, int rc, const struct policy *next,
	    const struct err *e);
};

struct api_hooks {
	/*
	 * Queues m in the daemon's commit queue (see struct api_mutation).
	 * -1 with e when the queue is full (answered 503). NULL: mutations
	 * are decided and committed inline (policy_commit, vault_commit).
	 */
	int (*mutate)(void *arg, struct api_mutation *m, struct err *e);

	/* Current snapshot, lent (see daemon.h, "Hooks"). Required. */
	struct policy *(*policy_get)(void *arg);
	/*
	 * Puts a validated snapshot in force (nft batch, swap, persist).
	 * Borrows next (takes its own reference when it keeps it). Returns 0,
	 * or -1 with e set and NOTHING changed; the API answers 500 with e's
	 * message (e.g. "failed to apply nftables policy: …"). Required
	 * unless mutate is set.
	 */
	int (*policy_commit)(void *arg, struct policy *next, struct err *e);
	/*
	 * Would next leave an active credential binding uncovered? 0, or -1
	 * with e set (answered 400 "credential vault policy validation: …").
	 * NULL until the vault exists.
	 */
	int (*policy_apicreds_check)(
	    void *arg, const struct policy *next, struct err *e);
	/*
	 * Liveness for /healthz: false with the component name ("credential
	 * proxy") when a configured component is not up yet: 503
	 * "<component> not ready". NULL: always healthy.
	 */
	bool (*healthy)(void *arg, char *component, size_t len);
	/* Readiness for /readyz: true, or false with why ("nft not ready").
	 * NULL: always ready. */
	bool (*ready)(void *arg, char *why, size_t whylen);
	/*
	 * Puts a Credential Vault mutation (a snapshot from policy_apicreds.h)
	 * in force like policy_commit, without rewriting the policy file
	 * (the vault is never written to disk). NULL: vault writes 412.
	 */
	int (*vault_commit)(void *arg, struct policy *next, struct err *e);
	/* May the vault be written now? false with the 412 message in why
	 * ("credential proxy is not ready"). NULL: never. */
	bool (*vault_writable)(void *arg, char *why, size_t whylen);
	/*
	 * The operator's rules for the API's bindings in next (a vault
	 * mutation's result, borrowed): 0, or -1 with e set, answered 400
	 * "credential vault policy validation: <e>" and nothing changes.
	 * Called on the loop, at the mutation's turn. NULL: no such rules.
	 */
	int (*vault_check)(void *arg, const struct policy *next, struct err *e);
	/* Fills the daemon's side of /v1/status (st zeroed). May be NULL. */
	void (*status)(void *arg, struct api_status *st);
	/* Called right before /metrics renders: refresh stats from the
	 * kernel (nft counters). May be NULL. */
	void (*metrics_refresh)(void *arg);
	/* "dns" or "dns+nft": what is really enforced now. Required. */
	const char *(*enforcement_mode)(void *arg);
	void *arg;
};

/*
 * The API's options. The strings are borrowed for api_new (the API keeps
 * copies of what it needs later); they are not const because the
 * daemon's configuration holds this struct as its own and owns them
 * there (egressd/daemon/config.h, struct config's api).
 */
struct api_opts {
	char *listen_tcp; /* see api_parse_addr; NULL or "" = none */
	char *listen_unix; /* socket path; NULL or "" = none */
	/* TLS on the TCP listener: a PEM certificate chain and its key
	 * (both or neither). The Unix socket stays plain. */
	char *tls_cert, *tls_key;
	unsigned unix_mode; /* 0 means API_UNIX_MODE */
	char *token; /* copied (and wiped on free); NULL/"" = none */
	/*
	 * Peers that terminate TLS in front of the API (reverse proxies,
	 * OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS): a request
	 * from one of these networks (prefix already masked) that carries
	 * exactly one "X-Forwarded-Proto: https" counts as TLS for the vault
	 * write rule (contract section 4). Nobody else's header counts.
	 */
	struct api_cidr {
		struct addr net;
		unsigned plen;
	} trusted_proxies[API_TRUSTED_PROXIES_MAX];
	size_t ntrusted_proxies;
	bool insecure_no_token; /* allow mutations without any token */
	size_t max_rules; /* 0 = no cap */
	/* Deadlines; a 0 field means its default (API_HEAD_TIMEOUT_MS,
	 * API_BODY_TIMEOUT_MS, API_LINGER_MS, API_AUTH_BACKOFF_MS,
	 * API_TIMEOUT_S). The daemon keeps the defaults; the unit tests
	 * shorten them so a slowloris check costs a second, not ten. */
	struct api_timing {
		unsigned head_ms, body_ms, linger_ms, backoff_ms, idle_s;
	} timing;
	uint64_t start_time_s; /* process start, for /metrics */
	struct log *log; /* borrowed, required */
	struct stats *stats; /* borrowed, required */
};

struct api;

/*
 * Binds the listeners and registers on base. NULL with e set when an
 * address does not parse or cannot be bound. Logs a warning at start when
 * mutations are allowed without a token.
 */
struct api *api_new(struct event_base *base, const struct api_opts *o,
    const struct api_hooks *h, struct err *e);
/* Closes the listeners and every connection; NULL is a no-op. */
/*
 * Replaces the API token (a rotated Secret): token is copied, the old one
 * wiped. An empty token is refused (-1): a rotation never turns auth off.
 */
int api_set_token(struct api *a, const char *token, struct err *e);
/* True if token is the one in force (constant time). */
bool api_token_is(const struct api *a, const char *token);
void api_free(struct api *a);

/* Port the TCP listener got (useful with port 0), or 0 without one. */
uint16_t api_tcp_port(const struct api *a);
/* Connections open right now (gauge); not from inside a hook. */
size_t api_connections(struct api *a);

enum api_op {
	API_OP_REPLACE, /* POST, PUT */
	API_OP_PATCH,
	API_OP_DELETE,
};

/* What a /policy mutation body means against the current snapshot. */
struct api_verdict {
	int status; /* 200, 400 or 413 */
	struct policy *next; /* 200: the snapshot to commit (caller unrefs);
			      * NULL when nomatch */
	bool reset; /* replace with an empty body (deny-all reset) */
	bool nomatch; /* DELETE named no rule: answer 200, apply nothing */
	const char *reason; /* fixed category for logs; NULL on 200 */
	char msg[API_MSG_MAX]; /* error body without its newline */
};

/*
 * Pure: validates one mutation (body of len bytes, white space around it
 * ignored) against cur (borrowed) with contract §6's messages and prefixes.
 * The vault check and the commit are the caller's (api_policy_mutate).
 */
void api_policy_decide(const struct policy *cur, enum api_op op,
    const char *body, size_t len, size_t max_rules, struct api_verdict *v);

/*
 * Pure: parses "host:port", "[v6]:port" or ":port" (host: IP literal or
 * "localhost"; ":port" means every address, IPv6 and IPv4). Fills ss and
 * *len; 0/-1 with e.
 */
int api_parse_addr(
    const char *s, struct sockaddr_storage *ss, socklen_t *len, struct err *e);

#endif
