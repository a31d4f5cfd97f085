/* ts_netns: see ts_netns.h. */
#include "ts_netns.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool
ts_netns_enter(const char *test)
{
	if (geteuid() != 0) {
		fprintf(stderr,
		    "%s: not root: kernel cases skipped (they need "
		    "CAP_NET_ADMIN in a private network namespace)\n",
		    test);
		return false;
	}
	if (unshare(CLONE_NEWNET) != 0) {
		fprintf(stderr,
		    "%s: unshare(CLONE_NEWNET): %s: kernel cases skipped\n",
		    test, strerror(errno));
		return false;
	}
	if (system("ip link set lo up && "
	           "ip link add d0 type veth peer name d1 && "
	           "ip link set d0 up && ip link set d1 up && "
	           "ip addr add 198.51.100.2/24 dev d0 && "
	           "ip route add default via 198.51.100.1 && "
	           "ip -6 addr add 2001:db8:1::2/64 dev d0 nodad && "
	           "ip -6 route add default via 2001:db8:1::1") != 0 ||
	    system("nft list ruleset >/dev/null") != 0) {
		fprintf(stderr,
		    "%s: cannot set up the namespace (ip, nft): kernel "
		    "cases skipped\n",
		    test);
		return false;
	}
	return true;
}
