/*
 * err: the project's error convention. Commands return 0/-1 and fill a
 * caller-supplied struct err with one human-readable line. The message is
 * built by the callee and owned by the caller's struct; it never contains
 * secret material (callers must not format secrets into it).
 */
#ifndef EGRESSD_ERR_H
#define EGRESSD_ERR_H

#include <stddef.h>

#define ERR_MSG_MAX 512

struct err {
	char msg[ERR_MSG_MAX];
};

/* Sets e->msg (truncating if needed, never overflowing); e may be NULL. */
void err_set(struct err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "prefix: ". */
void err_prefix(struct err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void err_clear(struct err *e);

#endif
