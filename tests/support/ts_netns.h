/*
 * ts_netns: the private network namespace of the unit tests that program
 * the kernel (nft tables, conntrack). The calling process unshares its
 * own, so nothing outside is touched and it dies with the process; inside,
 * a veth pair with documentation addresses only (198.51.100.2/24,
 * 2001:db8:1::2/64, default routes via .1 and ::1) and a working nft.
 */
#ifndef EGRESSD_TEST_TS_NETNS_H
#define EGRESSD_TEST_TS_NETNS_H

#include <stdbool.h>

/* Enters the namespace; false (with the reason on stderr, naming test)
 * when not root or it cannot be set up: the kernel cases then skip. */
bool ts_netns_enter(const char *test);

#endif
