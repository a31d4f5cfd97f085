#include <time.h>

#include "util/now.h"

static uint64_t
now_read(clockid_t id, uint64_t per_sec)
{
	struct timespec ts;

	/* Cannot fail for these clock ids on Linux; zeros if it ever did. */
	if (clock_gettime(id, &ts) == -1)
		return 0;
	return (uint64_t)ts.tv_sec * per_sec +
	    (uint64_t)ts.tv_nsec / (1000000000u / per_sec);
}

uint64_t
now_mono_ms(void)
{
	return now_read(CLOCK_MONOTONIC, 1000u);
}

uint64_t
now_mono_ms_clock(void *arg)
{
	(void)arg;
	return now_mono_ms();
}

uint64_t
now_mono_us(void)
{
	return now_read(CLOCK_MONOTONIC, 1000000u);
}

double
now_mono_s(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t
now_wall_ms(void)
{
	return now_read(CLOCK_REALTIME, 1000u);
}
