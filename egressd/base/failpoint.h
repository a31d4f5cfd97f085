/*
 * failpoint: crash injection for tests. When the operator-invisible
 * EGRESSD_TEST_FAILPOINT names a step, the process SIGKILLs itself there,
 * so end-to-end tests can prove crash consistency at every step of a
 * policy commit. Never set in production; harmless when unset.
 */
#ifndef EGRESSD_FAILPOINT_H
#define EGRESSD_FAILPOINT_H

#include "egressd/base/log.h"

/* configured: the failpoint in force (NULL = none); lg may be NULL. */
void failpoint_hit(const char *configured, const char *step, struct log *lg);

#endif
