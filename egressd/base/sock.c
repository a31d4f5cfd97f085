#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egressd/base/sock.h"

int
sock_set_mark(int fd, uint32_t mark, struct err *e)
{
	if (mark != 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) == -1) {
		err_set(e, "SO_MARK: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
sock_open_marked(int family, int type, uint32_t mark, struct err *e)
{
	int fd = socket(family, type | SOCK_CLOEXEC, 0);

	if (fd == -1) {
		err_set(e, "socket: %s", strerror(errno));
		return -1;
	}
	if (sock_set_mark(fd, mark, e) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

int
sock_open_local(int family, int type, struct err *e)
{
	int fd = socket(family, type | SOCK_CLOEXEC, 0), one = 1;

	if (fd == -1) {
		err_set(e, "socket: %s", strerror(errno));
		return -1;
	}
	/* Best effort, as before: neither is needed for the bind itself. */
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6)
		(void)setsockopt(
		    fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	return fd;
}

void
sock_set_buf(int fd, int opt, size_t bytes)
{
	int force = opt == SO_SNDBUF ? SO_SNDBUFFORCE : SO_RCVBUFFORCE;
	int v = bytes > (size_t)INT32_MAX / 2 ? INT32_MAX / 2 : (int)bytes;

	if (setsockopt(fd, SOL_SOCKET, force, &v, sizeof(v)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}
