/*
 * now: the clocks. Monotonic for every timeout, interval and rate (never
 * steps); wall time only for what is shown to people (log timestamps,
 * webhook event times).
 */
#ifndef EGRESSD_NOW_H
#define EGRESSD_NOW_H

#include <stdint.h>

/*
 * An injected clock: monotonic milliseconds, arg the caller's. Modules
 * with time-dependent logic take one (tests pass a clock they step);
 * now_mono_ms_clock is the real one in this form.
 */
typedef uint64_t (*now_clock_fn)(void *arg);

uint64_t now_mono_ms(void);
/* now_mono_ms as a now_clock_fn; arg is ignored. */
uint64_t now_mono_ms_clock(void *arg);
uint64_t now_mono_us(void);
/* Monotonic seconds at the clock's full resolution, for measuring
 * durations (the benchmarks). */
double now_mono_s(void);
/* Milliseconds since the Unix epoch. */
uint64_t now_wall_ms(void);

#endif
