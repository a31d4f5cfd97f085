/*
 * fileread: the one way egressd reads a file it was given: bounded in
 * size, a regular file only, and, where the file decides policy or holds
 * a secret, the owner and mode checks that keep another user from
 * rewriting or reading it.
 *
 * Messages in e never name the path (callers prefix it, with what the file
 * is for) and never hold the contents. On failure errno tells the cause
 * callers branch on: ENOENT (missing), EFBIG (larger than max), EPERM
 * (an owner or mode check), anything else from the system.
 */
#ifndef EGRESSD_FILEREAD_H
#define EGRESSD_FILEREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/err.h"

/* Owned by root or by egressd's user, writable by no one else. */
#define FILEREAD_OWNED 0x1u
/* Readable by no one but the owner (private keys, credentials). */
#define FILEREAD_PRIVATE 0x2u
/* A link as the last component is refused. */
#define FILEREAD_NOFOLLOW 0x4u
/*
 * The directory of path and, if path is a link, the directory of what it
 * resolves to pass the owner check too (sticky group/other-writable
 * directories are accepted: Kubernetes mounts Secret and ConfigMap
 * volumes 1777, and the sticky bit keeps others from replacing root's
 * ..data link).
 */
#define FILEREAD_DIRS 0x8u

/* Opens path for reading after the checks of flags; the fd, or -1 and e. */
int fileread_open(const char *path, unsigned flags, struct err *e);

/*
 * The whole of path, at most max bytes, NUL-terminated in a new buffer
 * *out (the caller frees it; wipes it first when it is a secret). With
 * FILEREAD_PRIVATE a failed read wipes what it had read.
 */
int fileread_all(const char *path, size_t max, unsigned flags, char **out,
    size_t *len, struct err *e);

/*
 * Into the caller's buffer (a secret that must not be copied around):
 * the length read, NUL-terminated; -1 and e, with the buffer wiped, if
 * the file holds cap - 1 bytes or more.
 */
ssize_t fileread_buf(
    const char *path, char *buf, size_t cap, unsigned flags, struct err *e);

/* The FILEREAD_OWNED check of a file already stat'ed. */
struct stat;
int fileread_check_owner(const struct stat *st, struct err *e);

/* The FILEREAD_DIRS check alone. */
int fileread_check_dirs(const char *path, struct err *e);

/*
 * The directory of path ("." for a bare name, "/" at the root) into dir,
 * and its last component into base (may be NULL). -1 if either does not
 * fit.
 */
int fileread_split_path(
    const char *path, char *dir, size_t dcap, char *base, size_t bcap);

#endif
