#include "util/tbucket.h"

#include <string.h>

void
tbucket_init(struct tbucket *b, uint32_t rate_per_sec, uint32_t burst)
{
	memset(b, 0, sizeof(*b));
	b->rate_per_sec = rate_per_sec;
	b->burst = burst ? burst : 1;
	b->tokens = b->burst;
}

void
tbucket_refill(struct tbucket *b, uint64_t now_ms)
{
	if (now_ms > b->last_ms) {
		b->tokens +=
		    (double)(now_ms - b->last_ms) * b->rate_per_sec / 1000.0;
		if (b->tokens > b->burst)
			b->tokens = b->burst;
	}
	b->last_ms = now_ms;
}

bool
tbucket_take(struct tbucket *b)
{
	if (b->tokens < 1.0)
		return false;
	b->tokens -= 1.0;
	return true;
}
