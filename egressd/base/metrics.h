/*
 * metrics: Prometheus text exposition (format 0.0.4) of struct stats.
 *
 * Pure: a const stats snapshot and a few daemon facts in, text out; no
 * I/O, no clock. Names are stable and documented in docs/api.md. The
 * output passes `promtool check metrics` (tests/unit/egressd/base/test_metrics.c
 * runs it).
 *
 * Histogram convention for dns_upstream_lat_bucket: per-bucket (not
 * cumulative) counts, bucket i for latencies <= bound i and above bound
 * i-1, bucket STATS_LAT_BUCKETS for everything above the last bound (as
 * dns_upstream.c records them); the renderer makes them cumulative.
 */
#ifndef EGRESSD_METRICS_H
#define EGRESSD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "egressd/base/stats.h"

#define METRICS_LABEL_MAX 128 /* bytes of one label value before escaping */

struct evbuffer;

struct metrics_info {
	const char *version; /* egressd_build_info{version} */
	const char *enforcement_mode; /* "dns" | "dns+nft" */
	uint64_t start_time_s; /* unix seconds */
	uint64_t log_lines, log_dropped;
	uint64_t api_connections; /* gauge */
};

/* Appends the whole exposition to out. 0, or -1 when out ran out of
 * memory (out then holds a partial text the caller must discard). */
int metrics_render(const struct stats *st, const struct metrics_info *info,
    struct evbuffer *out);

#endif
