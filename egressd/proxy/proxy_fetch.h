/*
 * proxy_fetch: egressd's own HTTPS request to an operator-named endpoint
 * (an oauth2 token endpoint today; a GitHub App's installation-token
 * endpoint and an http credential source can reuse it). One exchange per
 * fetch, on the proxy's event loop, never blocking it:
 * - the host name resolved asynchronously (evdns with the system's
 *   resolv.conf: in the pod that is egressd's own resolver, so the name
 *   is judged by the policy and its answers filtered like the sandbox's);
 * - a socket carrying egressd's SO_MARK (the filter's "egressd's own
 *   traffic"; never the proxy's intercept);
 * - TLS verified like any origin (the proxy's client context and trust
 *   directory, the host name checked, verification forced on even with
 *   --ssl-insecure);
 * - the caller's request bytes as given (they hold "Connection: close"),
 *   the response read within PROXY_FETCH_HEAD_MAX + the caller's body
 *   bound, framed by Content-Length, chunked or the close; no redirect
 *   is followed (a 3xx is just a status);
 * - a deadline over the whole exchange (PROXY_FETCH_TIMEOUT_MS).
 * - with an upstream proxy configured (uproxy.h), the connection is a
 *   tunnel through it, like every origin connection of egressd's: to
 *   the name, or to the address it resolved to (the CONNECT target
 *   mode); a failed tunnel fails the fetch, never a direct connection.
 *
 * Exactly one callback per fetch unless it is cancelled first. The
 * request and response bytes may be secret: both are wiped and freed.
 */
#ifndef EGRESSD_PROXY_PROXY_FETCH_H
#define EGRESSD_PROXY_PROXY_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define PROXY_FETCH_TIMEOUT_MS 10000u
#define PROXY_FETCH_HEAD_MAX 16384u

struct proxy;
struct proxy_fetch;

/*
 * The outcome: status (0 when no response came: err says why, a fixed
 * text such as "connect failed", "TLS handshake failed", "timed out")
 * and the response body (decoded when chunked; valid during the call,
 * wiped after it).
 */
typedef void (*proxy_fetch_cb)(
    void *arg, int status, const uint8_t *body, size_t len, const char *err);

/*
 * Starts a fetch of host:port sending req[0..len) (copied). body_max
 * bounds the response body. NULL and e when it cannot start (then no
 * callback comes).
 */
struct proxy_fetch *proxy_fetch_start(struct proxy *p, const char *host,
    uint16_t port, const uint8_t *req, size_t len, size_t body_max,
    proxy_fetch_cb cb, void *arg, struct err *e);
/*
 * Refuses, for f (right after proxy_fetch_start), every address the DNS
 * rebinding filter strips (loopback, private, link-local, CGNAT, ULA,
 * cloud metadata: special_ranges.h SPECIAL_STRIP): the first other one
 * the name resolves to is used; none: "private or loopback address
 * refused". For an operator URL that must not reach into the node or
 * the cluster unless the operator says so.
 */
void proxy_fetch_refuse_private(struct proxy_fetch *f);
/* Cancels a fetch whose callback has not come: none will. */
void proxy_fetch_cancel(struct proxy_fetch *f);
/* The proxy's resolver for fetches, freed with the proxy. */
void proxy_fetch_shutdown(struct proxy *p);

#endif
