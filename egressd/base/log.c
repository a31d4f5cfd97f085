#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "egressd/base/log.h"
#include "util/fdwrite.h"
#include "util/hash.h"
#include "util/now.h"
#include "util/utf8.h"

/* key ends in s (lower case, n bytes), as a whole key or after '_' or
 * '.' */
static bool
log_key_ends(const char *key, size_t klen, const char *s, size_t n)
{
	/* the separator first: it rules out most keys without a compare */
	return klen >= n &&
	    (klen == n || key[klen - n - 1] == '_' ||
	        key[klen - n - 1] == '.') &&
	    strcasecmp(key + klen - n, s) == 0;
}

/* key ends in the literal s */
#define LOG_ENDS_(s) log_key_ends(key, klen, s, sizeof(s) - 1)

/*
 * Field keys that, whatever the caller meant, may carry secret material:
 * token, secret, password, passwd, credential, authorization, cookie,
 * value, privkey, private_key, api_key, apikey, matched as whole keys or
 * as a suffix after '_' or '.', case-insensitive. Every line checks every
 * key: the last letter picks the few to compare (most keys end in none
 * of these letters, or rule out all but one or two).
 */
static bool
log_key_is_secret(const char *key, size_t klen)
{
	if (klen == 0)
		return false;
	switch (key[klen - 1] | 0x20) {
	case 'd':
		return LOG_ENDS_("password") || LOG_ENDS_("passwd");
	case 'e':
		return LOG_ENDS_("cookie") || LOG_ENDS_("value");
	case 'l':
		return LOG_ENDS_("credential");
	case 'n':
		return LOG_ENDS_("token") || LOG_ENDS_("authorization");
	case 't':
		return LOG_ENDS_("secret");
	case 'y':
		return LOG_ENDS_("privkey") || LOG_ENDS_("private_key") ||
		    LOG_ENDS_("api_key") || LOG_ENDS_("apikey");
	default:
		return false;
	}
}
#undef LOG_ENDS_

static uint64_t
log_wall_ms(void *arg)
{
	(void)arg;
	return now_wall_ms();
}

void
log_init(struct log *lg, int fd, enum log_level min_level)
{
	memset(lg, 0, sizeof(*lg));
	lg->fd = fd;
	lg->owns_fd = false;
	lg->min_level = min_level;
	lg->clock = log_wall_ms;
}

int
log_open_file(struct log *lg, const char *path)
{
	int fd;
	char *copy;

	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd == -1)
		return -1;
	if ((copy = strdup(path)) == NULL) {
		close(fd);
		return -1;
	}
	if (lg->owns_fd)
		close(lg->fd);
	free(lg->path);
	lg->fd = fd;
	lg->owns_fd = true;
	lg->path = copy;
	return 0;
}

int
log_reopen(struct log *lg)
{
	int fd;

	log_flush(lg); /* what was logged before the rotation goes there */
	if (lg->path == NULL)
		return 0;
	fd = open(lg->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd == -1)
		return -1;
	if (lg->owns_fd)
		close(lg->fd);
	lg->fd = fd;
	lg->owns_fd = true;
	return 0;
}

void
log_set_sandbox_id(struct log *lg, const char *id)
{
	free(lg->sandbox_id);
	lg->sandbox_id = (id != NULL && *id != '\0') ? strdup(id) : NULL;
}

void
log_clear(struct log *lg)
{
	log_defer(lg, NULL, NULL);
	if (lg->owns_fd && lg->fd >= 0)
		close(lg->fd);
	free(lg->path);
	free(lg->sandbox_id);
	lg->path = NULL;
	lg->sandbox_id = NULL;
	lg->fd = -1;
	lg->owns_fd = false;
}

int
log_level_parse(const char *s, enum log_level *out)
{
	if (s == NULL)
		return -1;
	if (strcasecmp(s, "debug") == 0)
		*out = LOG_DEBUG;
	else if (strcasecmp(s, "info") == 0)
		*out = LOG_INFO;
	else if (strcasecmp(s, "warn") == 0 || strcasecmp(s, "warning") == 0)
		*out = LOG_WARN;
	else if (strcasecmp(s, "error") == 0)
		*out = LOG_ERROR;
	else
		return -1;
	return 0;
}

const char *
log_level_name(enum log_level l)
{
	switch (l) {
	case LOG_DEBUG:
		return "debug";
	case LOG_INFO:
		return "info";
	case LOG_WARN:
		return "warn";
	case LOG_ERROR:
		return "error";
	}
	return "info";
}

/* A bounded writer that never overflows and remembers truncation. */
struct log_buf {
	char *p;
	size_t len, cap;
	bool trunc;
};

static void
log_put(struct log_buf *b, const char *s, size_t n)
{
	/* Keep room for the closing "}\n" and NUL. Once something did not
	 * fit nothing more is written: the line is cut back to a field
	 * boundary (log_format), which a later, shorter piece could move. */
	if (b->trunc || b->len + n + 3 > b->cap) {
		b->trunc = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void
log_puts(struct log_buf *b, const char *s)
{
	log_put(b, s, strlen(s));
}

/* The two-byte JSON escape of c (RFC 8259 7), NULL when it has none. */
static const char *
log_short_escape(unsigned char c)
{
	static const char *const two[] = {
	    ['"'] = "\\\"",
	    ['\\'] = "\\\\",
	    ['\n'] = "\\n",
	    ['\r'] = "\\r",
	    ['\t'] = "\\t",
	};

	return c < sizeof(two) / sizeof(two[0]) ? two[c] : NULL;
}

/*
 * Most strings of a line (keys, event names, hosts, paths) are printable
 * ASCII with nothing to escape and fit: checked 8 bytes at a time (a word
 * holds no byte below 0x20, at or above 0x7f, '"' or '\\' exactly when
 * the mask is 0: without such a byte no subtraction borrows) and copied
 * whole. 1: written, quoted; 0: nothing written (the general
 * path's turn: it writes the same bytes for such a string).
 */
/* Whether the 8 bytes of x hold none below 0x20, at or above 0x7f, '"'
 * or '\\' (log_put_plain_str). */
static bool
log_word_plain(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ULL;
	const uint64_t tops = 0x8080808080808080ULL;
	uint64_t q = x ^ (ones * '"'), k = x ^ (ones * '\\'),
	         d = x ^ (ones * 0x7f);

	return ((((x - ones * 0x20) & ~x) | x | ((q - ones) & ~q) |
	            ((k - ones) & ~k) | ((d - ones) & ~d)) &
	           tops) == 0;
}

static int
log_put_plain_str(struct log_buf *b, const char *s, size_t max)
{
	size_t i, n = strnlen(s, max + 1);
	uint64_t x;
	char *o;

	/* the quotes and log_put's 3 bytes of reserve */
	if (n > max || b->trunc || b->len + n + 5 > b->cap)
		return 0;
	/* a string of 8 bytes or more: its last word overlaps the one
	 * before (checked twice, harmless) rather than a byte loop; a
	 * shorter one is checked as one word padded with a plain byte */
	for (i = 0; n >= 8 && i < n; i += 8) {
		memcpy(&x, s + (i + 8 <= n ? i : n - 8), sizeof(x));
		if (!log_word_plain(x))
			return 0;
	}
	if (n < 8) {
		x = 0x6161616161616161ULL; /* "aaaaaaaa" */
		memcpy(&x, s, n);
		if (!log_word_plain(x))
			return 0;
	}
	o = b->p + b->len;
	o[0] = '"';
	memcpy(o + 1, s, n);
	o[n + 1] = '"';
	b->len += n + 2;
	return 1;
}

static void
log_put_json_str(struct log_buf *b, const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, n;
	bool cut;

	if (log_put_plain_str(b, s, max))
		return;
	n = strnlen(s, max + 1);
	cut = n > max;
	if (cut)
		n = max;
	log_put(b, "\"", 1);
	while (i < n) {
		const char *two;
		char esc[8];
		size_t l;

		/* runs of printable ASCII go out as they are, in one piece */
		for (l = i; l < n && u[l] >= 0x20 && u[l] < 0x7f &&
		     u[l] != '"' && u[l] != '\\';
		     l++)
			;
		if (l > i) {
			log_put(b, s + i, l - i);
			i = l;
			continue;
		}
		if ((two = log_short_escape(u[i])) != NULL) {
			log_put(b, two, 2);
			i++;
			continue;
		}
		if (u[i] < 0x20 || u[i] == 0x7f) {
			(void)snprintf(esc, sizeof(esc), "\\u%04x", u[i]);
			log_put(b, esc, 6);
			i++;
			continue;
		}
		l = utf8_decode(u + i, n - i, NULL);
		if (l == 0) {
			log_put(b, "\\ufffd", 6);
			i++;
			continue;
		}
		log_put(b, s + i, l);
		i += l;
	}
	if (cut)
		log_put(b, "...", 3);
	log_put(b, "\"", 1);
}

/* Decimal digits of v, without printf. */
static void
log_put_u64(struct log_buf *b, unsigned long long v)
{
	char d[24];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	log_put(b, d + i, sizeof(d) - i);
}

static void
log_put_i64(struct log_buf *b, long long v)
{
	if (v < 0) {
		log_put(b, "-", 1);
		/* -(v + 1) + 1: no overflow for LLONG_MIN */
		log_put_u64(b, (unsigned long long)(-(v + 1)) + 1);
	} else
		log_put_u64(b, (unsigned long long)v);
}

static void
log_put_key(struct log_buf *b, const char *key)
{
	log_put(b, ",", 1);
	log_put_json_str(b, key, 64);
	log_put(b, ":", 1);
}

/* The line's start up to the seconds' dot: {"ts":"YYYY-MM-DDTHH:MM:SS.
 * (into out, LOG_TS_SECS bytes and a NUL). */
static void
log_ts_secs(uint64_t sec, char *out)
{
	static const char zero[] = "{\"ts\":\"0000-00-00T00:00:00.";
	time_t t = (time_t)sec;
	struct tm tm;
	char tmp[64];

	gmtime_r(&t, &tm);
	/* fixed width, or a year out of 0..9999: zeros */
	if (snprintf(tmp, sizeof(tmp),
	        "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
	        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	        tm.tm_sec) != LOG_TS_SECS)
		memcpy(tmp, zero, LOG_TS_SECS);
	memcpy(out, tmp, LOG_TS_SECS);
	out[LOG_TS_SECS] = '\0';
}

static size_t log_format_ts(const struct log *lg, struct log_buf *b,
    const char *secs, unsigned ms, enum log_level lvl, const char *ev,
    const struct log_field *fields);

size_t
log_format(const struct log *lg, char *buf, size_t buflen, enum log_level lvl,
    const char *ev, const struct log_field *fields)
{
	struct log_buf b = {.p = buf, .len = 0, .cap = buflen, .trunc = false};
	char secs[LOG_TS_SECS + 1];
	uint64_t ms;

	if (buflen < 64) {
		if (buflen > 0)
			buf[0] = '\0';
		return 0;
	}
	ms = lg->clock != NULL ? lg->clock(lg->clock_arg) : log_wall_ms(NULL);
	log_ts_secs(ms / 1000, secs);
	return log_format_ts(
	    lg, &b, secs, (unsigned)(ms % 1000), lvl, ev, fields);
}

/* log_format with the timestamp's seconds already written (buflen >= 64). */
/* One field's value as JSON (its key is written already). */
static void
log_put_value(struct log_buf *b, const struct log_field *f)
{
	char tmp[64];

	switch (f->type) {
	case LOG_T_STR:
		if (f->v.s == NULL)
			log_puts(b, "null");
		else
			log_put_json_str(b, f->v.s, LOG_FIELD_STR_MAX);
		break;
	case LOG_T_INT:
		log_put_i64(b, f->v.i);
		break;
	case LOG_T_UINT:
		log_put_u64(b, f->v.u);
		break;
	case LOG_T_BOOL:
		log_puts(b, f->v.b ? "true" : "false");
		break;
	case LOG_T_DOUBLE:
		/* JSON has no NaN/Inf. */
		if (f->v.d != f->v.d || f->v.d > 1e300 || f->v.d < -1e300)
			log_puts(b, "null");
		else {
			(void)snprintf(tmp, sizeof(tmp), "%.6g", f->v.d);
			log_puts(b, tmp);
		}
		break;
	default:
		log_puts(b, "null");
		break;
	}
}

static size_t
log_format_ts(const struct log *lg, struct log_buf *b, const char *secs,
    unsigned ms, enum log_level lvl, const char *ev,
    const struct log_field *fields)
{
	char *buf = b->p;
	char tmp[64];
	const struct log_field *f;
	size_t whole; /* bytes up to the end of the last whole field */
	size_t klen;

	log_put(b, secs, LOG_TS_SECS);
	tmp[0] = (char)('0' + ms / 100);
	tmp[1] = (char)('0' + ms / 10 % 10);
	tmp[2] = (char)('0' + ms % 10);
	log_put(b, tmp, 3);
	log_puts(b, "Z\",\"lvl\":\"");
	log_puts(b, log_level_name(lvl));
	log_puts(b, "\",\"ev\":");
	log_put_json_str(b, ev != NULL ? ev : "unknown", 64);
	if (lg->sandbox_id != NULL) {
		log_put_key(b, "sandbox");
		log_put_json_str(b, lg->sandbox_id, 256);
	}
	whole = b->len;
	for (f = fields; f != NULL && f->type != LOG_T_END; f++) {
		if (f->type == LOG_T_NONE || f->key == NULL)
			continue;
		if (f->qkey != NULL) {
			/* quoted by the preprocessor (log.h, LOG_QKEY_) */
			log_put(b, f->qkey, f->qlen);
			klen = f->qlen - 4;
		} else {
			log_put_key(b, f->key);
			klen = strlen(f->key);
		}
		if (log_key_is_secret(f->key, klen)) {
			log_puts(b, "\"[REDACTED]\"");
			if (!b->trunc)
				whole = b->len;
			continue;
		}
		log_put_value(b, f);
		if (!b->trunc)
			whole = b->len;
	}
	if (b->trunc) {
		/* Drop the field that did not fit whole (a string value may
		 * hold commas: cut where the last whole field ended); keep
		 * the line valid. */
		static const char mark[] = ",\"trunc\":true";

		b->len = whole;
		if (b->len + sizeof(mark) - 1 + 3 <= b->cap) {
			memcpy(buf + b->len, mark, sizeof(mark) - 1);
			b->len += sizeof(mark) - 1;
		}
	}
	buf[b->len++] = '}';
	buf[b->len++] = '\n';
	buf[b->len] = '\0';
	return b->len;
}

/* One write per line or batch of whole lines, so concurrent writers
 * never interleave mid-line on pipes (up to PIPE_BUF). 0/-1. */
static int
log_write(int fd, const char *p, size_t n)
{
	return fdwrite_all(fd, p, n);
}

void
log_emit(struct log *lg, enum log_level lvl, const char *ev,
    const struct log_field *fields)
{
	char buf[LOG_LINE_MAX];
	struct log_buf b = {.p = buf, .len = 0, .cap = sizeof(buf)};
	size_t n;
	uint64_t ms;

	if (lg == NULL || lvl < lg->min_level || lg->fd < 0)
		return;
	ms = lg->clock != NULL ? lg->clock(lg->clock_arg) : log_wall_ms(NULL);
	/* the date and time change once a second, the lines far more often */
	if (lg->ts_sec != ms / 1000 || lg->ts[0] == '\0') {
		lg->ts_sec = ms / 1000;
		log_ts_secs(lg->ts_sec, lg->ts);
	}
	n = log_format_ts(
	    lg, &b, lg->ts, (unsigned)(ms % 1000), lvl, ev, fields);
	if (lg->arm != NULL && n <= sizeof(lg->pend)) {
		if (lg->plen + n > sizeof(lg->pend))
			log_flush(lg);
		if (lg->plen == 0)
			lg->arm(lg->arm_arg);
		memcpy(lg->pend + lg->plen, buf, n);
		lg->plen += n;
		lg->plines++;
		return;
	}
	log_flush(lg); /* lines stay in order */
	if (log_write(lg->fd, buf, n) == 0)
		lg->lines++;
	else
		lg->dropped++;
}

void
log_flush(struct log *lg)
{
	if (lg == NULL || lg->plen == 0)
		return;
	if (lg->fd >= 0 && log_write(lg->fd, lg->pend, lg->plen) == 0)
		lg->lines += lg->plines;
	else
		lg->dropped += lg->plines;
	lg->plen = lg->plines = 0;
}

void
log_defer(struct log *lg, void (*arm)(void *arg), void *arg)
{
	if (arm == NULL)
		log_flush(lg);
	lg->arm = arm;
	lg->arm_arg = arg;
}

static uint64_t
log_hash(const char *s)
{
	uint64_t h = hash_fnv1a(s, strlen(s));

	return h ? h : 1; /* 0 marks an empty dedup slot */
}

void
log_limiter_init(struct log_limiter *l, uint32_t rate_per_sec, uint32_t burst,
    uint64_t dedup_window_ms)
{
	memset(l, 0, sizeof(*l));
	tbucket_init(&l->tb, rate_per_sec, burst);
	l->window_ms = dedup_window_ms;
}

bool
log_limiter_allow(struct log_limiter *l, const char *key, uint64_t now_ms)
{
	uint64_t h = 0;
	size_t slot = 0;
	bool dedup = key != NULL && l->window_ms > 0;

	if (dedup) {
		h = log_hash(key);
		slot = h % LOG_DEDUP_SLOTS;
		if (l->slots[slot].hash == h &&
		    now_ms - l->slots[slot].seen_ms < l->window_ms) {
			l->suppressed++;
			return false;
		}
	}
	tbucket_refill(&l->tb, now_ms);
	if (!tbucket_take(&l->tb)) {
		/*
		 * Not logged: not "seen" either, or a key refused during a
		 * flood would stay silent for its whole window.
		 */
		l->suppressed++;
		return false;
	}
	if (dedup) {
		l->slots[slot].hash = h;
		l->slots[slot].seen_ms = now_ms;
	}
	return true;
}
