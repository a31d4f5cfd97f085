/*
 * log_agg: per-name aggregation of per-query denial lines (dns.deny), so a
 * flood of distinct names cannot hide a real one.
 *
 * A bounded table (LOG_AGG_SLOTS) of per-name counters in least-recently-
 * seen order, plus a token bucket for the lines themselves:
 *   - a name not seen within the window is written at once while tokens
 *     last and nothing waits ("immediate", count 1);
 *   - otherwise its event is held in its entry: a name already written
 *     within the window counts repeats, a name never written is pending;
 *   - log_agg_flush() (the caller's timer, about once a second) writes
 *     pending names newest first, then repeat counts whose window is
 *     over, each as one line carrying the count of events it stands for,
 *     as far as the tokens go;
 *   - when the table is full the least recently seen name is evicted; if
 *     it was never written (or had repeats not yet written) it goes into
 *     a summary (names, events) that the flush hands back once.
 * A real name that comes after a flood is therefore among the newest
 * entries: it is written by the next flush, and the flood collapses into
 * the summary. Memory and the line rate are bounded whatever the names.
 *
 * Pure: time is passed in, nothing here writes; the caller owns the
 * struct (about 200 KiB: embed it in a heap object).
 */
#ifndef EGRESSD_LOG_AGG_H
#define EGRESSD_LOG_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tbucket.h"

#define LOG_AGG_SLOTS 256 /* names tracked */
#define LOG_AGG_BUCKETS 512 /* hash buckets (power of two) */
#define LOG_AGG_NAME_MAX 255
#define LOG_AGG_REASON_MAX 16
#define LOG_AGG_RULE_MAX 256 /* rule display text kept (cut) */

/* What one line says (all strings NUL-terminated, cut to size). */
struct log_agg_rec {
	char name[LOG_AGG_NAME_MAX + 1];
	char reason[LOG_AGG_REASON_MAX];
	char denied[LOG_AGG_NAME_MAX + 1]; /* "" when none */
	char rule[LOG_AGG_RULE_MAX]; /* "" when none */
	unsigned qtype;
};

struct log_agg_entry {
	struct log_agg_rec rec;
	uint64_t hash;
	uint64_t count; /* events not in a line yet */
	uint64_t written_ms; /* last line, when written */
	bool used, written;
	int16_t hnext; /* hash chain */
	int16_t older, newer; /* recency list */
};

struct log_agg_summary {
	uint64_t names; /* names evicted before any line named them */
	uint64_t events; /* events of those, and unwritten repeats */
};

struct log_agg {
	struct tbucket tb;
	uint64_t window_ms;
	struct log_agg_entry e[LOG_AGG_SLOTS];
	int16_t bucket[LOG_AGG_BUCKETS];
	int16_t oldest, newest, free_head;
	size_t pending; /* entries never written */
	struct log_agg_summary sum;
	uint64_t lines, held; /* counters: lines written, events held */
};

void log_agg_init(struct log_agg *a, uint32_t rate_per_sec, uint32_t burst,
    uint64_t window_ms);
/*
 * One event. True: write r now, as a line standing for *count events.
 * False: held (counted) for a later flush.
 */
bool log_agg_event(struct log_agg *a, const struct log_agg_rec *r,
    uint64_t now_ms, uint64_t *count);

typedef void (*log_agg_emit_fn)(
    void *arg, const struct log_agg_rec *r, uint64_t count);
/*
 * Writes what is due within the tokens (see above) through emit, and
 * moves the summary of evicted events into *sum (zeroed when there is
 * none); the caller writes it as one line when non-zero.
 */
void log_agg_flush(struct log_agg *a, uint64_t now_ms, log_agg_emit_fn emit,
    void *arg, struct log_agg_summary *sum);
/* Fills r from its parts (NULLs are ""), cutting what is too long. */
void log_agg_rec_set(struct log_agg_rec *r, const char *name, unsigned qtype,
    const char *reason, const char *denied, const char *rule);

#endif
