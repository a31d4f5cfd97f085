#include "util/fdwrite.h"

#include <errno.h>
#include <unistd.h>

int
fdwrite_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	size_t off = 0;

	while (off < n) {
		ssize_t w = write(fd, c + off, n - off);

		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}
