/*
 * ts_clock: the monotonic clock as the unit tests read it, to bound their
 * waits (never to assert on timing: tests do not measure speed).
 */
#ifndef EGRESSD_TEST_TS_CLOCK_H
#define EGRESSD_TEST_TS_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t ts_now_ms(void);

#endif
