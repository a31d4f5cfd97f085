/*
 * tbucket: the one token bucket of the rate limits (per-event log lines,
 * the dns.deny aggregator): rate_per_sec tokens a second up to burst,
 * one taken per line. Time is passed in (monotonic ms), so it is pure.
 */
#ifndef EGRESSD_TBUCKET_H
#define EGRESSD_TBUCKET_H

#include <stdbool.h>
#include <stdint.h>

struct tbucket {
	uint32_t rate_per_sec, burst;
	double tokens;
	uint64_t last_ms;
};

/* Full; a burst of 0 is 1 (a bucket that never holds a token would
 * silence its events for good). */
void tbucket_init(struct tbucket *b, uint32_t rate_per_sec, uint32_t burst);
/* Adds what the time since the last call earned, capped at burst. */
void tbucket_refill(struct tbucket *b, uint64_t now_ms);
/* Takes one token; false when there is none. */
bool tbucket_take(struct tbucket *b);

#endif
