#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fileread.h"
#include "util/secmem.h"

static int
fail(struct err *e, int code, const char *msg)
{
	err_set(e, "%s", msg);
	errno = code;
	return -1;
}

int
fileread_check_owner(const struct stat *st, struct err *e)
{
	if (st->st_uid != 0 && st->st_uid != geteuid()) {
		err_set(e,
		    "owned by uid %u; egressd reads policy and secrets only "
		    "from files owned by root or by itself",
		    (unsigned)st->st_uid);
		errno = EPERM;
		return -1;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		err_set(e,
		    "writable by group or others (mode %04o); egressd "
		    "refuses files another user might rewrite",
		    (unsigned)(st->st_mode & 07777));
		errno = EPERM;
		return -1;
	}
	return 0;
}

static int
check_dir(const char *dir, struct err *e)
{
	struct stat st;

	if (stat(dir, &st) == -1) {
		int saved = errno;

		err_set(e, "%s: %s", dir, strerror(saved));
		errno = saved;
		return -1;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		err_set(e,
		    "%s: directory owned by uid %u; egressd reads policy and "
		    "secrets only from directories owned by root or by itself",
		    dir, (unsigned)st.st_uid);
		errno = EPERM;
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
		err_set(e,
		    "%s: directory writable by group or others (mode %04o) "
		    "and not sticky; another user could replace the file",
		    dir, (unsigned)(st.st_mode & 07777));
		errno = EPERM;
		return -1;
	}
	return 0;
}

int
fileread_split_path(
    const char *path, char *dir, size_t dcap, char *base, size_t bcap)
{
	const char *slash = strrchr(path, '/');
	int n;

	if (base != NULL &&
	    snprintf(base, bcap, "%s", slash ? slash + 1 : path) >= (int)bcap)
		return -1;
	if (slash == NULL)
		n = snprintf(dir, dcap, ".");
	else if (slash == path)
		n = snprintf(dir, dcap, "/");
	else
		n = snprintf(dir, dcap, "%.*s", (int)(slash - path), path);
	return n >= (int)dcap ? -1 : 0;
}

int
fileread_check_dirs(const char *path, struct err *e)
{
	char dir[PATH_MAX];
	char *real;
	int rc;

	if (fileread_split_path(path, dir, sizeof(dir), NULL, 0) == -1)
		return fail(e, ENAMETOOLONG, "path too long");
	if (check_dir(dir, e) == -1)
		return -1;
	if ((real = realpath(path, NULL)) == NULL) {
		int saved = errno;

		err_set(e, "%s", strerror(saved));
		errno = saved;
		return -1;
	}
	rc = fileread_split_path(real, dir, sizeof(dir), NULL, 0);
	free(real);
	if (rc == -1)
		return fail(e, ENAMETOOLONG, "path too long");
	return check_dir(dir, e);
}

int
fileread_open(const char *path, unsigned flags, struct err *e)
{
	struct stat st;
	int fd, saved;

	if ((flags & FILEREAD_DIRS) && fileread_check_dirs(path, e) == -1)
		return -1;
	fd = open(path,
	    O_RDONLY | O_CLOEXEC | O_NOCTTY |
	        ((flags & FILEREAD_NOFOLLOW) ? O_NOFOLLOW : 0));
	if (fd == -1) {
		saved = errno;
		err_set(e, "cannot open: %s", strerror(saved));
		errno = saved;
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(e, EINVAL, "not a regular file");
	}
	if ((flags & FILEREAD_OWNED) && fileread_check_owner(&st, e) == -1) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	if ((flags & FILEREAD_PRIVATE) && (st.st_mode & 077) != 0) {
		err_set(e,
		    "readable by group or others (mode %03o): chmod 600 it",
		    (unsigned)(st.st_mode & 0777));
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* Reads until EOF or cap bytes; the count, or -1 with errno. */
static ssize_t
read_upto(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	while (n < cap && (r = read(fd, buf + n, cap - n)) != 0) {
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return -1;
		n += (size_t)r;
	}
	return (ssize_t)n;
}

int
fileread_all(const char *path, size_t max, unsigned flags, char **out,
    size_t *len, struct err *e)
{
	struct stat st;
	char *buf;
	size_t cap;
	ssize_t n;
	int fd, saved;

	if ((fd = fileread_open(path, flags, e)) == -1)
		return -1;
	if (fstat(fd, &st) == -1 || (uint64_t)st.st_size > max) {
		close(fd);
		err_set(e, "larger than %zu bytes", max);
		errno = EFBIG;
		return -1;
	}
	/* Sized by the file; it may still grow while we read, and one byte
	 * more than max tells. */
	cap = (size_t)st.st_size + 1;
	if ((buf = malloc(cap + 1)) == NULL) {
		close(fd);
		return fail(e, ENOMEM, "out of memory");
	}
	n = read_upto(fd, buf, cap);
	saved = errno;
	close(fd);
	if (n == -1 || (size_t)n > max || (size_t)n == cap) {
		if (flags & FILEREAD_PRIVATE)
			secmem_wipe(buf, cap + 1);
		free(buf);
		if (n == -1) {
			err_set(e, "read: %s", strerror(saved));
			errno = saved;
		} else {
			err_set(e, "larger than %zu bytes", max);
			errno = EFBIG;
		}
		return -1;
	}
	buf[n] = '\0';
	*out = buf;
	*len = (size_t)n;
	return 0;
}

ssize_t
fileread_buf(
    const char *path, char *buf, size_t cap, unsigned flags, struct err *e)
{
	ssize_t n;
	int fd, saved;

	if (cap < 2)
		return fail(e, EINVAL, "no room");
	if ((fd = fileread_open(path, flags, e)) == -1)
		return -1;
	n = read_upto(fd, buf, cap - 1);
	saved = errno;
	close(fd);
	if (n == -1 || (size_t)n == cap - 1) {
		secmem_wipe(buf, cap);
		if (n == -1) {
			err_set(e, "read: %s", strerror(saved));
			errno = saved;
		} else {
			err_set(e, "larger than %zu bytes", cap - 2);
			errno = EFBIG;
		}
		return -1;
	}
	buf[n] = '\0';
	return n;
}
