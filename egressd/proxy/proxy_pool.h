/*
 * proxy_pool: idle upstream TLS connections of terminated client
 * connections, kept for the next client connection to the same origin
 * (issue 17: "upstream keep-alive pooling per (host, address) so a
 * terminated keep-alive client does not cost a handshake per request").
 *
 * A terminated client connection that ends between two requests (every
 * response delivered, nothing buffered either way, neither side asked
 * for Connection: close) hands its verified upstream connection here
 * instead of closing it; the next terminated connection for the same
 * (SNI name, original destination address, port) takes it rather than
 * dialling. Keyed by the name too: a connection verified for one name is
 * never used under another. An idle entry that reads anything (the
 * origin closing it, or bytes nobody asked for) or outlives idle_ms is
 * closed, so a taken connection was quiet a moment ago; the idle time
 * stays below common server keep-alive timeouts (5 s) to make an origin
 * closing it under a new request unlikely.
 *
 * A connection an injected credential went over keeps the vault
 * revision it came from (a reference) while pooled: the origin may echo
 * it in any later response on that connection, and whoever takes the
 * connection redacts every response against it.
 *
 * Ownership: the pool owns what was put (the connection and the vault
 * reference) until it is taken (then the taker owns both, callbacks
 * cleared) or closed; proxy_pool_free and proxy_pool_flush close every
 * entry. Single-threaded, on the proxy's
 * event_base.
 */
#ifndef EGRESSD_PROXY_POOL_H
#define EGRESSD_PROXY_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "util/addr.h"

#define PROXY_POOL_MAX 64 /* idle connections kept, all origins */
#define PROXY_POOL_PER_KEY 32 /* of one (name, address, port) */
#define PROXY_POOL_IDLE_MS 4000 /* closed after this long unused */

struct bufferevent;
struct event_base;
struct proxy_pool;
struct vault;

/* max 0: PROXY_POOL_MAX; idle_ms 0: PROXY_POOL_IDLE_MS. NULL when out of
 * memory. */
struct proxy_pool *proxy_pool_new(
    struct event_base *base, size_t max, unsigned idle_ms);
void proxy_pool_free(struct proxy_pool *pp); /* NULL is a no-op */
/*
 * Keeps up (an established upstream connection at a message boundary,
 * nothing buffered) for (name, dst, port), and v (the vault revision a
 * credential injected on up came from, or NULL); the pool owns both
 * from here. When full (or the key holds PROXY_POOL_PER_KEY), the
 * oldest entry goes. On an allocation failure up is closed and v
 * unreferenced.
 */
void proxy_pool_put(struct proxy_pool *pp, struct bufferevent *up,
    struct vault *v, const char *name, const struct addr *dst, uint16_t port);
/* The most recently kept connection for (name, dst, port), now the
 * caller's, or NULL; *v gets its vault reference (NULL: no credential
 * went over it), the caller's too. It comes with no callbacks and with
 * reading still enabled, so that the caller, which sets its callbacks at
 * once (no loop turn between), costs the socket no epoll_ctl. */
struct bufferevent *proxy_pool_take(struct proxy_pool *pp, const char *name,
    const struct addr *dst, uint16_t port, struct vault **v);
/* Closes every idle connection (a new policy: none is judged again);
 * returns how many. */
size_t proxy_pool_flush(struct proxy_pool *pp);
size_t proxy_pool_count(const struct proxy_pool *pp);

#endif
