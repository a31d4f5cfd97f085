/*
 * sock: egressd's own sockets. To the outside (DNS upstreams, the deny
 * webhook, the self-check probes, and the proxy's upstream connections
 * next) each carries SO_MARK so the filter lets egressd's own traffic
 * out while the sandbox's stays redirected: a socket whose mark cannot be
 * set is never used (its traffic would loop back into egressd or be
 * dropped). Local ones (the resolver's and the self-check's) are opened
 * one way too, so an IPv4 and an IPv6 socket can share a port.
 */
#ifndef EGRESSD_SOCK_H
#define EGRESSD_SOCK_H

#include <stdint.h>

#include "util/err.h"

/* Sets SO_MARK (nothing when mark is 0); -1 and e if the kernel refuses. */
int sock_set_mark(int fd, uint32_t mark, struct err *e);

/*
 * socket(family, type | SOCK_CLOEXEC) with the mark set: the fd, or -1
 * and e (the socket closed).
 */
int sock_open_marked(int family, int type, uint32_t mark, struct err *e);

/*
 * socket(family, type | SOCK_CLOEXEC) for binding to a local address and
 * port: SO_REUSEADDR (a restart binds again at once), and IPV6_V6ONLY on
 * an IPv6 one (its IPv4 twin binds the same port). The fd, unbound; or -1
 * with e and errno.
 */
int sock_open_local(int family, int type, struct err *e);

/*
 * Asks for a send (SO_SNDBUF) or receive (SO_RCVBUF) buffer of bytes,
 * capped at INT32_MAX / 2: SO_SNDBUFFORCE / SO_RCVBUFFORCE first, which
 * CAP_NET_ADMIN (egressd has it) lets pass the wmem_max / rmem_max
 * sysctls, else as much as they allow. Best effort: a smaller buffer
 * costs drops or retries, never correctness.
 */
void sock_set_buf(int fd, int opt, size_t bytes);

#endif
