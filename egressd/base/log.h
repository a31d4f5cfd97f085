/*
 * log: JSON-line logging with stable event names.
 *
 * Every line: {"ts":"…","lvl":"info","ev":"dns.deny","sandbox":"…",…fields}
 * ev is a dotted constant from the caller (never peer text). String fields
 * are JSON-escaped (control bytes as \u00XX, invalid UTF-8 as \ufffd), so a
 * peer cannot forge a line or a field. Keys that name secrets (token,
 * secret, password, credential, authorization, value, key material) are
 * written as "[REDACTED]" whatever the caller passed: a belt to the vault's
 * braces.
 *
 * One struct log lives in the daemon context; nothing here is global.
 */
#ifndef EGRESSD_LOG_H
#define EGRESSD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/tbucket.h"

#define LOG_LINE_MAX 8192 /* longer lines are cut and marked "trunc":true */
#define LOG_FIELD_STR_MAX 1024 /* one string field, before escaping */
#define LOG_TS_SECS 27 /* {"ts":"YYYY-MM-DDTHH:MM:SS. */
#define LOG_PEND_MAX 4096 /* deferred lines held at once: PIPE_BUF */

enum log_level {
	LOG_DEBUG = 0,
	LOG_INFO,
	LOG_WARN,
	LOG_ERROR,
};

enum log_field_type {
	LOG_T_NONE = 0, /* skipped; terminates with LOG_T_END */
	LOG_T_END,
	LOG_T_STR,
	LOG_T_INT,
	LOG_T_UINT,
	LOG_T_BOOL,
	LOG_T_DOUBLE,
};

struct log_field {
	const char *key;
	/* ,"key": written by the preprocessor for a literal key (LOG_S &
	 * co.), qlen its length; NULL for a key known only at run time
	 * (LOG_FIELD): then quoted and escaped like a value */
	const char *qkey;
	size_t qlen;
	enum log_field_type type;
	union {
		const char *s;
		long long i;
		unsigned long long u;
		bool b;
		double d;
	} v;
};

/*
 * A field: k is a string literal of letters, digits, '_' and '.' (every
 * key of the code base), so its quoted form ,"k": is made at compile time
 * and a line copies it instead of checking and quoting it again. A key
 * known only at run time: LOG_FIELD.
 */
#define LOG_QKEY_(k) .key = (k), .qkey = ",\"" k "\":", .qlen = sizeof(k) + 3
#define LOG_S(k, val)                                                          \
	((struct log_field){LOG_QKEY_(k), .type = LOG_T_STR, .v.s = (val)})
#define LOG_I(k, val)                                                          \
	((struct log_field){LOG_QKEY_(k), .type = LOG_T_INT, .v.i = (val)})
#define LOG_U(k, val)                                                          \
	((struct log_field){LOG_QKEY_(k), .type = LOG_T_UINT, .v.u = (val)})
#define LOG_B(k, val)                                                          \
	((struct log_field){LOG_QKEY_(k), .type = LOG_T_BOOL, .v.b = (val)})
#define LOG_D(k, val)                                                          \
	((struct log_field){LOG_QKEY_(k), .type = LOG_T_DOUBLE, .v.d = (val)})
/* A string field whose key is not a literal (checked and escaped). */
#define LOG_FIELD(k, val)                                                      \
	((struct log_field){.key = (k), .type = LOG_T_STR, .v.s = (val)})
#define LOG_BEGIN_ ((struct log_field){.type = LOG_T_NONE})
#define LOG_END_ ((struct log_field){.type = LOG_T_END})

/* Wall clock in milliseconds since the epoch; injectable for tests. */
typedef uint64_t (*log_clock_fn)(void *arg);

struct log {
	int fd; /* where lines go; not owned when owns_fd false */
	bool owns_fd;
	char *path; /* reopened on SIGUSR1; NULL for stdout */
	enum log_level min_level;
	char *sandbox_id; /* added to every line when set */
	log_clock_fn clock;
	void *clock_arg;
	uint64_t lines, dropped; /* counters for metrics */
	/* log_emit's timestamp up to the seconds, for ts_sec (a cache) */
	uint64_t ts_sec;
	char ts[LOG_TS_SECS + 1];
	/* Deferred writing (log_defer): lines held here, in order, until
	 * log_flush writes them with one write(2). At most LOG_PEND_MAX
	 * bytes, PIPE_BUF on Linux, so the write stays atomic on a pipe
	 * shared with other writers; a longer line is written alone. */
	void (*arm)(void *arg);
	void *arm_arg;
	size_t plen, plines;
	char pend[LOG_PEND_MAX];
};

/* Logs to fd (borrowed). */
void log_init(struct log *lg, int fd, enum log_level min_level);
/* Opens path for append; 0/-1. */
int log_open_file(struct log *lg, const char *path);
/* Reopens the file after rotation; no-op for stdout. 0/-1. */
int log_reopen(struct log *lg);
void log_set_sandbox_id(struct log *lg, const char *id);
/*
 * From now on, lines are held and written together by log_flush: one
 * write(2) per event-loop turn instead of one per line (a terminated
 * request logs vault.inject, a connection proxy.closed). arm(arg) is
 * called when a batch starts (the first line held after a flush); the
 * caller makes log_flush run before the loop waits again (the daemon:
 * an event made active). A line is held for at most that loop turn.
 * arm NULL: flush, and write each line at once again (start-up,
 * shutdown). Single-threaded, like the rest of struct log.
 */
void log_defer(struct log *lg, void (*arm)(void *arg), void *arg);
/* Writes the held lines (if any) in one write. */
void log_flush(struct log *lg);
void log_clear(struct log *lg);

/* Parses "debug"|"info"|"warn"|"warning"|"error"; 0/-1. */
int log_level_parse(const char *s, enum log_level *out);
const char *log_level_name(enum log_level l);

/*
 * Formats one line into buf (NUL-terminated, '\n'-ended); returns its
 * length. Pure, for tests and for log_emit.
 */
size_t log_format(const struct log *lg, char *buf, size_t buflen,
    enum log_level lvl, const char *ev, const struct log_field *fields);
void log_emit(struct log *lg, enum log_level lvl, const char *ev,
    const struct log_field *fields);

/* Usage: log_info(lg, "dns.deny", LOG_S("name", q), LOG_U("qtype", t)); */
#define log_at_(lg, lvl, ev, ...)                                              \
	log_emit((lg), (lvl), (ev),                                            \
	    (const struct log_field[]){LOG_BEGIN_, ##__VA_ARGS__, LOG_END_})
#define log_debug(lg, ev, ...) log_at_(lg, LOG_DEBUG, ev, ##__VA_ARGS__)
#define log_info(lg, ev, ...) log_at_(lg, LOG_INFO, ev, ##__VA_ARGS__)
#define log_warn(lg, ev, ...) log_at_(lg, LOG_WARN, ev, ##__VA_ARGS__)
#define log_error(lg, ev, ...) log_at_(lg, LOG_ERROR, ev, ##__VA_ARGS__)

/*
 * Per-event rate limiting and deduplication for per-query events
 * (dns.deny, nft.drop). A token bucket per limiter plus a small table of
 * recently seen keys: the same key within window_ms is suppressed and
 * counted. The caller owns the struct; time is passed in (testable).
 */
#define LOG_DEDUP_SLOTS 256

struct log_limiter {
	struct tbucket tb;
	uint64_t window_ms;
	uint64_t suppressed;
	struct {
		uint64_t hash;
		uint64_t seen_ms;
	} slots[LOG_DEDUP_SLOTS];
};

void log_limiter_init(struct log_limiter *l, uint32_t rate_per_sec,
    uint32_t burst, uint64_t dedup_window_ms);
/* True when an event with this key may be logged now. */
bool log_limiter_allow(struct log_limiter *l, const char *key, uint64_t now_ms);

#endif
