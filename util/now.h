/*
 * now: the clocks. Monotonic for every timeout, interval and rate (never
 * steps); wall time only for what is shown to people (log timestamps,
 * webhook event times).
 */
#ifndef EGRESSD_NOW_H
#define EGRESSD_NOW_H

#include <stdint.h>

uint64_t now_mono_ms(void);
uint64_t now_mono_us(void);
/* Milliseconds since the Unix epoch. */
uint64_t now_wall_ms(void);

#endif
