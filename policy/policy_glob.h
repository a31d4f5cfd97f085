/*
 * policy_glob: the path patterns of request rules (issue 37).
 *
 * A pattern starts with '/'. A '*' at its very end makes it a prefix
 * match ("/v1*" matches "/v1", "/v1beta" and "/v1/x/y"); a '*' anywhere
 * else matches zero or more bytes within one segment, never a '/'
 * ("/api/v*" "/users" matches "/api/v2/users", not "/api/v2/x/users").
 * Everything else matches itself exactly. (Policy files write the
 * git example as a star for each of the first two segments, then
 * "/info/refs"; a C comment cannot spell it.) Patterns
 * are stored in normal form: policy_path_normalize of the pattern, with
 * '*' a plain pchar, must give the pattern back, so that a pattern and
 * the normalized request path it is compared with are spelled alike.
 *
 * Pure: no allocation, no I/O.
 */
#ifndef EGRESSD_POLICY_GLOB_H
#define EGRESSD_POLICY_GLOB_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define POLICY_GLOB_MAX 1024 /* bytes of one pattern */
#define POLICY_GLOB_STARS_MAX 16 /* '*' in one pattern */

/* 0 when pat is a valid pattern in normal form; -1 with the reason in e
 * (naming the normal form when that is all that differs). */
int policy_glob_check(const char *pat, struct err *e);
/* True when the normalized path matches the (checked) pattern. */
bool policy_glob_match(const char *pat, const char *path);

#endif
