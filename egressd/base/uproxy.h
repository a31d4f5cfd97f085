/*
 * uproxy: the upstream (corporate) proxy every origin connection of
 * egressd goes through when one is configured (issue 39, item 3;
 * docs/proxy.md, "Upstream proxy").
 *
 * The proxy's own connections (terminated, pass-through, plain HTTP) and
 * the deny webhook all dial through uproxy_dial: a socket carrying
 * egressd's mark connects to the proxy, sends "CONNECT host:port" with
 * the configured Proxy-Authorization, and reads the answer
 * (http_connect.h, strict and bounded). Only a 2xx hands the caller a
 * connected socket whose next byte is the origin's: the answer's head is
 * read with MSG_PEEK and then consumed to its last byte and no further,
 * so nothing of the tunnel is taken. Anything else (the proxy
 * unreachable, a non-2xx, a malformed answer, the deadline) closes the
 * socket and says why: there is no direct fallback, ever.
 *
 * The Proxy-Authorization value is a secret: it lives in a secret arena
 * (secmem.h: locked, never in a core dump, wiped when freed), no getter
 * returns it, and it never appears in an error or a log line. A dial
 * copies it into its request buffer only until the request is written,
 * then wipes that copy.
 *
 * Ownership: struct uproxy is the caller's (made at start, freed at
 * exit); a dial borrows it and must end first. Single-threaded, on the
 * caller's event_base.
 */
#ifndef EGRESSD_UPROXY_H
#define EGRESSD_UPROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/addr.h"
#include "util/err.h"

struct event_base;
struct uproxy;
struct uproxy_dial;

/* Why a dial failed; uproxy_fail_name() has the log spelling, stable. */
enum uproxy_fail {
	UPROXY_OK = 0,
	UPROXY_UNREACHABLE, /* the proxy refused or never answered the connect */
	UPROXY_AUTH, /* 407: the proxy refused the credentials (or none) */
	UPROXY_REFUSED, /* another non-2xx: the proxy refused the target */
	UPROXY_BAD_RESPONSE, /* not an answer http_connect_parse accepts */
	UPROXY_CLOSED, /* the proxy closed or reset before answering */
	UPROXY_TIMEOUT, /* no tunnel within the dial's deadline */
	UPROXY_NFAILS,
};

/* How the CONNECT target is named (docs/proxy.md: name vs address). */
enum uproxy_target {
	UPROXY_BY_NAME = 0, /* the SNI or Host egressd judged */
	UPROXY_BY_ADDRESS, /* the address egressd judged it at */
};

const char *uproxy_fail_name(enum uproxy_fail f);

/*
 * The proxy at addr:port (an IP literal: egressd does not resolve its own
 * way out), with auth[0..auth_len) as the Proxy-Authorization value (NULL:
 * none), copied into a secret arena; the caller wipes its own copy. NULL
 * and e on a bad value or no memory (e never quotes the value).
 */
struct uproxy *uproxy_new(const struct addr *addr, uint16_t port,
    enum uproxy_target by, const char *auth, size_t auth_len, struct err *e);
void uproxy_free(struct uproxy *u); /* NULL is a no-op; wipes the value */
/* "ip:port" of the proxy, for logs and status. */
void uproxy_describe(const struct uproxy *u, char *buf, size_t cap);
bool uproxy_has_auth(const struct uproxy *u);
enum uproxy_target uproxy_target_by(const struct uproxy *u);
/* false when the value's arena could not be locked (RLIMIT_MEMLOCK) */
bool uproxy_locked(const struct uproxy *u);

/*
 * The end of a dial, called once from the event loop (never from
 * uproxy_dial itself). fd >= 0: the tunnel, connected and non-blocking,
 * now the caller's; else f says why and status is the proxy's answer (0:
 * none). The dial is freed when cb returns: do not cancel it from cb.
 */
typedef void (*uproxy_done_fn)(
    void *arg, int fd, enum uproxy_fail f, int status);

/*
 * A tunnel to host:port (host: a DNS name or an IP literal, as the
 * CONNECT target) through u, from a socket carrying mark, within
 * timeout_ms (0: UPROXY_DIAL_MS). NULL and e when it cannot even start
 * (socket, a malformed target): then cb is never called.
 */
struct uproxy_dial *uproxy_dial(struct event_base *base, const struct uproxy *u,
    uint32_t mark, const char *host, uint16_t port, unsigned timeout_ms,
    uproxy_done_fn cb, void *arg, struct err *e);
/* Abandons a dial whose cb has not run: the socket closed, cb never
 * called. NULL is a no-op. */
void uproxy_dial_cancel(struct uproxy_dial *d);

#define UPROXY_DIAL_MS 10000

#endif
