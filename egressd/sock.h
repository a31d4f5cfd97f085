/*
 * sock: egressd's own sockets to the outside (DNS upstreams, the deny
 * webhook, the self-check probes, and the proxy's upstream connections
 * next). Each carries SO_MARK so the filter lets egressd's own traffic
 * out while the sandbox's stays redirected: a socket whose mark cannot be
 * set is never used (its traffic would loop back into egressd or be
 * dropped).
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

#endif
