/*
 * proxy: the transparent proxy behind nft's intercept redirect (issue 17).
 *
 * nft redirects the sandbox's TCP connections to intercepted ports (80,
 * 443 and configured ones) of addresses learned from DNS answers to
 * 127.0.0.1/[::1]:port. The proxy recovers the original destination
 * (SO_ORIGINAL_DST / IP6T_SO_ORIGINAL_DST), reads the client's first
 * bytes and decides before a byte goes upstream, or even a connection is
 * opened:
 *  - TLS: the ClientHello (tls_hello.h). Refused with a TLS alert: no
 *    SNI, an IP-literal SNI, ESNI, a malformed hello, an SNI the hook
 *    refuses (a denied name, or an allowed one that never resolved to the
 *    destination and no IP rule allows: the shared-IP / fronting
 *    defence). ECH counts as its outer, plain SNI, which must pass.
 *    Otherwise: a marked connection to the original destination and the
 *    bytes relayed both ways untouched (pass-through; no egressd CA).
 *  - Plain HTTP (anything else): every request head on the connection,
 *    pipelined or keep-alive, is parsed (http_head.h) and judged on its
 *    own by its Host; a refused one gets 403 (or the parser's status),
 *    and neither it nor anything after it reaches the origin. Bodies
 *    are streamed with their framing checked (length or http_chunk).
 *    CONNECT, and an Upgrade other than websocket on a GET, are refused
 *    (501); a websocket Upgrade is relayed as raw bytes once the origin
 *    answers 101.
 *  - TLS to a host a credential binding could match (hooks.terminate):
 *    terminated with a leaf from egressd's CA; the origin is a new TLS
 *    connection to the original destination, SNI = the client's,
 *    verified against the trust directory (else 502, nothing sent);
 *    the requests inside run through the plain-HTTP engine above, with
 *    Host required to equal the SNI (421 otherwise).
 * The first bytes are peeked (MSG_PEEK) and stay in the socket until the
 * decision: pass-through and termination both read them from there.
 *
 * Connections have one state machine (enum proxy_state) and one close
 * path (proxy_conn_close with a reason, logged as proxy.closed). Bounds:
 * a cap on connections (accept pauses at the cap; one fd is held in
 * reserve so EMFILE never spins the loop), a deadline per state, and
 * watermarks so a slow side stops reads on the fast one.
 *
 * Ownership: struct proxy owns its listeners and connections; the hooks'
 * arg and the log are borrowed and must outlive it. Single-threaded, on
 * the caller's event_base.
 */
#ifndef EGRESSD_PROXY_H
#define EGRESSD_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "egressd/base/stats.h"
#include "util/addr.h"
#include "util/err.h"

struct event_base;
struct log;
struct uproxy;

/* Descriptors one connection holds: the client's and the origin's
 * sockets. A spliced pass-through direction borrows a pipe only while
 * bytes are in flight, from at most PROXY_PIPES_MAX in all (two
 * descriptors each; a direction finding none waits for one). */
#define PROXY_FDS_PER_CONN 2
#define PROXY_PIPES_MAX 512
/* Descriptors kept for everything but proxy connections: the resolver's
 * TCP clients (DNS_TCP_CONNS_MAX) and upstream sockets, the API's
 * connections (API_CONNS_MAX on each listener), pooled origin
 * connections, netlink, logs, the policy file and its watch. */
#define PROXY_FD_RESERVE 1024
#define PROXY_HELLO_MS 10000 /* first bytes to a decision */
#define PROXY_CONNECT_MS 10000 /* upstream connect */
#define PROXY_IDLE_MS 300000 /* no byte either way */
/* a request head after the decision (keep-alive, terminated), from its
 * first byte to its end */
#define PROXY_HEAD_MS 10000
#define PROXY_LINGER_MS 1000 /* input drained after our own refusal */
#define PROXY_HIGH_WM (256u << 10) /* bytes queued toward one side */
/* Bytes read from one side and not yet moved on (the read high
 * watermark of both sides during the relay): reads stop there, whatever
 * the state, until the pumps take some (a full pipeline, a client closing
 * after a Connection: close request, an origin that sends unasked). At
 * least a head (the pumps look for its end in this much); a TLS side may
 * pass it by the rest of one record. A request held whole for placeholder
 * substitution raises it to its head and body (c->vault.hold_wait,
 * proxy_relay.c). */
#define PROXY_IN_MAX (128u << 10)
#define PROXY_BACKLOG 512
#define PROXY_COALESCE_MAX 16384 /* one TLS record's worth of plaintext */
/* In the state directory, for the sandbox's SSL_CERT_FILE & co.: the
 * system roots plus egressd's CA (the CA alone is tls_ca.h's ca.crt). */
#define PROXY_BUNDLE_FILE "ca-bundle.crt"

/* Why a connection was refused or closed; proxy_reason_name() has the
 * log spelling, stable. */
enum proxy_reason {
	PROXY_OK = 0, /* allowed (judge), or closed normally */
	PROXY_NO_SNI,
	PROXY_SNI_IP,
	PROXY_ESNI,
	PROXY_NAME_DENIED,
	PROXY_ADDR_MISMATCH,
	PROXY_BAD_HELLO,
	PROXY_BAD_REQUEST,
	PROXY_NO_HOST,
	PROXY_PORT_MISMATCH,
	PROXY_UNSUPPORTED,
	PROXY_NO_DST, /* no original destination: not redirected */
	PROXY_HELLO_TIMEOUT,
	PROXY_CONNECT_FAILED,
	PROXY_CONNECT_TIMEOUT,
	PROXY_IDLE,
	PROXY_CLIENT_ERROR,
	PROXY_UPSTREAM_ERROR,
	PROXY_SHUTDOWN,
	PROXY_MISDIRECTED, /* terminated: Host is not the SNI (421) */
	PROXY_UPSTREAM_TLS, /* terminated: origin not verified (502) */
	PROXY_CLIENT_TLS, /* terminated: the client's handshake failed */
	PROXY_VAULT_REFUSED, /* vault: bad path (400), TRACE/TRACK (403) */
	PROXY_VAULT_AMBIGUOUS, /* vault: more than one binding matched (403) */
	PROXY_VAULT_UNSAFE, /* vault: an injected request's response could
	                       not be redacted (encoded, close-delimited): 502 */
	PROXY_POLICY_CHANGED, /* a new policy denies an open connection's
	                         name or destination: closed (proxy_rejudge) */
	PROXY_VAULT_COMPRESSED, /* vault: a compressed response to an
	                           injected request, refused (502) */
	PROXY_VAULT_DECODE, /* vault: decoding a compressed response failed
	                       (a bomb, corrupt, truncated): 502 before its
	                       head went out, else the connection is cut */
	PROXY_HEAD_TIMEOUT, /* a request head after the decision did not
	                       end within head_ms of its first byte */
	PROXY_VAULT_MISROUTED, /* vault: a request a binding matched, to an
	                          address its host never resolved to (421) */
	PROXY_MEMORY, /* the connections' buffers together passed buf_max:
	                 this one held the most */
	PROXY_REQUEST_DENIED, /* request rules (issue 37): a request the
	                         policy denies by method or path (403), or
	                         whose path it cannot judge (400) */
	PROXY_UPSTREAM_PROXY, /* the upstream proxy (uproxy.h) gave no
	                         tunnel: 502, or a pass-through closed */
	PROXY_VAULT_TOKEN, /* vault: an oauth2 binding's token endpoint failed
	                      (502; never sent unauthenticated) */
	PROXY_NREASONS,
};

enum proxy_state {
	PROXY_ST_PEEK = 0, /* reading the first bytes */
	PROXY_ST_CONNECT, /* decided: connecting upstream (and, terminated,
	                     the client's TLS handshake) */
	PROXY_ST_RELAY, /* bytes both ways */
	PROXY_ST_REFUSE, /* our refusal is being sent, then lingering */
	PROXY_NSTATES,
};

/* The rows of proxy_status.vault_compressed; proxy_compressed_name()
 * the log's and the metric's spelling. */
enum proxy_compressed {
	PROXY_COMPRESSED_DECODED = 0,
	PROXY_COMPRESSED_REFUSED,
	PROXY_COMPRESSED_FAILED,
};

const char *proxy_reason_name(enum proxy_reason r);
const char *proxy_compressed_name(enum proxy_compressed c);
const char *proxy_state_name(enum proxy_state s);

struct vault;
struct policy;

/* Rows of proxy_status.denied: enum policy_req_reason's values. */
#define PROXY_DENIED_REASONS 5

struct proxy_hooks {
	/*
	 * May name (lowercase, no trailing dot: an SNI or a Host) be reached
	 * at dst:port over TCP? PROXY_OK, or the refusal: PROXY_NAME_DENIED,
	 * PROXY_ADDR_MISMATCH, PROXY_SNI_IP (an IP literal that is not
	 * allowed). Required.
	 */
	enum proxy_reason (*judge)(
	    void *arg, const char *name, const struct addr *dst, uint16_t port);
	/*
	 * A number that changes whenever a verdict of judge may: a new
	 * policy in force, a learned address gone (expired, evicted, cut)
	 * or a name dropped from one. A connection's name judged PROXY_OK
	 * at one generation is not judged again on its next requests until
	 * the number moves (the Host of every request on a terminated
	 * connection is its SNI). NULL: judged on every request.
	 */
	uint64_t (*judge_gen)(void *arg);
	/*
	 * Could a credential binding match requests to sni on port? Then
	 * the connection is terminated (egressd's CA) instead of passed
	 * through. NULL: never.
	 */
	bool (*terminate)(void *arg, const char *sni, uint16_t port);
	/*
	 * The Credential Vault in force, lent for the call: the proxy takes
	 * its own reference (vault_ref) for each request to a bound origin
	 * (every request on a terminated connection, and a plain one whose
	 * host a binding names), injected or not, and keeps it until that
	 * request's response is through: every byte of the response is
	 * redacted against it. The origin connection keeps one for as long
	 * as it lives (pooled too), so every later response on it is
	 * redacted as well. NULL (hook or result): no injection.
	 */
	struct vault *(*vault_get)(void *arg);
	/*
	 * An oauth2 token was minted: v (lent for the call: take a
	 * reference) is the revision in force from now on, the one
	 * vault_get returned with the token added. NULL: tokens cannot be
	 * minted (their requests are answered 502).
	 */
	void (*vault_minted)(void *arg, struct vault *v);
	/*
	 * Did the resolver learn dst for exactly name (an answer for name
	 * held it, and it has not expired)? A credential is injected only
	 * then, for plain HTTP as for TLS: an IP rule that lets the
	 * connection itself through never widens where a binding's secret
	 * may go. NULL: never (nothing is injected).
	 */
	bool (*learned)(void *arg, const char *name, const struct addr *dst);
	/*
	 * The policy in force, lent for the call (the proxy takes its own
	 * reference for what it keeps: the compiled rules of a host). A
	 * request to a host with request rules
	 * (policy_host_has_request_rules) is judged by policy_match_request
	 * against the policy in force when its head is read, so a change
	 * applies from the next request of an open connection; a denied one
	 * gets 403 with X-Egress-Denied and a JSON body, and nothing goes
	 * upstream. terminate should say yes for such hosts, and
	 * proxy_rejudge closes a pass-through connection to a host that has
	 * gained request rules. NULL (hook or result): requests are judged
	 * by their host only.
	 */
	struct policy *(*policy_get)(void *arg);
	void *arg;
};

struct proxy_opts {
	const char *listen4, *listen6; /* NULL: 127.0.0.1, ::1; "": none */
	uint16_t port; /* 0: ephemeral (tests), see proxy_port() */
	uint32_t mark; /* SO_MARK of upstream sockets */
	/*
	 * 0: EGRESSD_DEFAULT_PROXY_CONNS_MAX. proxy_new raises RLIMIT_NOFILE
	 * to conns_max * PROXY_FDS_PER_CONN + 2 * PROXY_PIPES_MAX +
	 * PROXY_FD_RESERVE (the hard
	 * limit too when it may: CAP_SYS_RESOURCE); when it cannot, the cap
	 * is lowered to what the limit holds and proxy.nofile says so.
	 */
	size_t conns_max;
	/*
	 * Bytes all connections may hold in their buffers together (each
	 * side's input and queue; 0: EGRESSD_DEFAULT_PROXY_BUFFER_MB MiB).
	 * Measured at the end of every loop turn in which a connection's
	 * callbacks ran; beyond it, the connection holding the most is
	 * closed (reason memory), then the next, until the total is under.
	 */
	size_t buf_max;
	/* 0: defaults above. head_ms: a request head read after the
	 * decision (the next one on a keep-alive connection, every one in a
	 * terminated connection) must end within it of its first byte;
	 * the first head of a plain connection is hello_ms's. */
	unsigned hello_ms, connect_ms, idle_ms, head_ms;
	/*
	 * Termination: the CA lives in state_dir (tls_ca.h), which also
	 * gets ca-bundle.crt (system roots + the CA) for the sandbox. NULL:
	 * no termination (terminate is never asked). trust_dir: the
	 * origins' roots (NULL: OpenSSL's defaults); ssl_insecure: origins
	 * are not verified (tests and debugging only).
	 */
	const char *state_dir;
	/* The merged bundle (system roots + the CA) for the sandbox: this
	 * path, or state_dir/ca-bundle.crt when NULL. */
	const char *ca_bundle;
	const char *ca_key_file, *ca_cert_file; /* operator's CA, or NULL */
	const char *trust_dir;
	bool ssl_insecure;
	/*
	 * A compressed response to an injected request: false, refused
	 * (502); true, gzip and deflate decoded (http_decode.h), redacted
	 * and sent as identity, chunked. Other codings are refused either
	 * way: compressed bytes never pass unscanned.
	 */
	bool vault_decode;
	/*
	 * Every origin connection through this upstream proxy (HTTP
	 * CONNECT, uproxy.h), borrowed; NULL: dialled directly. Judged
	 * first as ever; a failed tunnel fails the client's connection
	 * (502, or a pass-through closed), never a direct dial.
	 */
	const struct uproxy *upstream;
};

struct proxy_status {
	uint64_t accepted;
	uint64_t passthrough; /* connections relayed upstream untouched */
	uint64_t terminated; /* connections terminated with egressd's CA */
	uint64_t refused; /* connections refused before upstream */
	uint64_t injected; /* requests a credential was injected into */
	/* vault decisions on requests to bound hosts: no_match, injected,
	 * ambiguous, refused (enum vault_decision order) */
	uint64_t vault_decisions[4];
	/* the same per binding (stats.h) */
	struct stats_vault_binding vault_bindings[STATS_VAULT_BINDINGS];
	size_t nvault_bindings;
	/* http credential sources' fetches (stats.h) */
	struct stats_vault_source vault_sources[STATS_VAULT_SOURCES];
	size_t nvault_sources;
	/* compressed responses to injected requests: decoded, refused at
	 * the head, failed while decoding (enum proxy_compressed) */
	uint64_t vault_compressed[3];
	uint64_t by_reason[PROXY_NREASONS]; /* closes, by reason */
	/* requests the request rules denied, by enum policy_req_reason
	 * (index 0, allowed, stays 0) */
	uint64_t denied[PROXY_DENIED_REASONS];
	size_t active;
	size_t by_state[PROXY_NSTATES];
	uint64_t up_bytes, down_bytes; /* relayed, client->origin, back */
	/* terminated connections that took a pooled upstream connection;
	 * idle upstream connections in the pool now (proxy_pool.h) */
	uint64_t upstream_reused;
	size_t upstream_idle;
	bool paused; /* accept paused at the cap */
};

/* Binds the listeners; NULL and e on failure (nothing left open).
 * Raises the process's RLIMIT_NOFILE (o->conns_max). */
struct proxy *proxy_new(struct event_base *base, const struct proxy_opts *o,
    const struct proxy_hooks *h, struct log *lg, struct err *e);
/* Closes every connection (reason shutdown) and the listeners. */
void proxy_free(struct proxy *p);
uint16_t proxy_port(const struct proxy *p);
/*
 * A new policy is in force: every connection past its decision (being
 * connected or relaying: pass-through, terminated or plain HTTP) is
 * judged again by hooks.judge with its name (SNI, or a plain
 * connection's first Host) and original destination, and closed at once
 * (reason policy_changed) when refused, so stopping egress also stops
 * the tunnels already open, which the conntrack flow cut cannot see
 * (they are redirected to the proxy). A pass-through connection whose
 * name now has request rules is closed too: its requests cannot be
 * judged. Returns how many were closed.
 */
size_t proxy_rejudge(struct proxy *p);
void proxy_status(const struct proxy *p, struct proxy_status *st);

/*
 * Pure helpers, exposed for unit tests: the TLS alert record the proxy
 * sends for a refusal reason (7 bytes into out), and the HTTP status.
 */
void proxy_tls_alert(enum proxy_reason r, uint8_t out[7]);
int proxy_http_status(enum proxy_reason r);

#endif
