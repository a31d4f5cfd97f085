/*
 * fdwrite: all of a buffer to a descriptor, as one write(2) when the
 * kernel takes it whole (a log line, a file egressd publishes).
 */
#ifndef EGRESSD_FDWRITE_H
#define EGRESSD_FDWRITE_H

#include <stddef.h>

/*
 * Writes p[0..n) to fd, retrying after EINTR and short writes. 0, or -1
 * with errno (EIO for a write that took nothing).
 */
int fdwrite_all(int fd, const void *p, size_t n);

#endif
