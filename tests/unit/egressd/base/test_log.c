#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "egressd/base/log.h"

static uint64_t
fixed_clock(void *arg)
{
	return *(uint64_t *)arg;
}

static uint64_t test_now = 1764700000123ULL;

static void
setup_log(struct log *lg)
{
	log_init(lg, -1, LOG_DEBUG);
	lg->clock = fixed_clock;
	lg->clock_arg = &test_now;
}

/* Parses a formatted line back with jansson: it must be one JSON object. */
static json_t *
parse_line(const char *line)
{
	json_error_t je;
	size_t n = strlen(line);
	json_t *j;

	assert_true(n > 2);
	assert_int_equal(line[n - 1], '\n');
	assert_null(memchr(line, '\n', n - 1));
	j = json_loadb(line, n - 1, 0, &je);
	if (j == NULL)
		fail_msg("not JSON: %s (%s)", line, je.text);
	return j;
}

static void
test_format_fields(void **state)
{
	struct log lg;
	char buf[LOG_LINE_MAX];
	json_t *j;
	(void)state;

	setup_log(&lg);
	log_set_sandbox_id(&lg, "sbx-42");
	log_format(&lg, buf, sizeof(buf), LOG_WARN, "dns.deny",
	    (const struct log_field[]){LOG_BEGIN_, LOG_S("name", "evil.test"),
	        LOG_I("neg", -3), LOG_U("qtype", 28), LOG_B("cached", true),
	        LOG_D("ms", 1.5), LOG_S("nul", NULL), LOG_END_});
	j = parse_line(buf);
	assert_string_equal(json_string_value(json_object_get(j, "ts")),
	    "2025-12-02T18:26:40.123Z");
	assert_string_equal(
	    json_string_value(json_object_get(j, "lvl")), "warn");
	assert_string_equal(
	    json_string_value(json_object_get(j, "ev")), "dns.deny");
	assert_string_equal(
	    json_string_value(json_object_get(j, "sandbox")), "sbx-42");
	assert_string_equal(
	    json_string_value(json_object_get(j, "name")), "evil.test");
	assert_int_equal(json_integer_value(json_object_get(j, "neg")), -3);
	assert_int_equal(json_integer_value(json_object_get(j, "qtype")), 28);
	assert_true(json_is_true(json_object_get(j, "cached")));
	assert_true(json_is_null(json_object_get(j, "nul")));
	/* Key order is stable: ts, lvl, ev, sandbox, then fields. */
	assert_true(strncmp(buf, "{\"ts\":", 6) == 0);
	assert_non_null(
	    strstr(buf, "\"ev\":\"dns.deny\",\"sandbox\":\"sbx-42\""));
	json_decref(j);
	log_clear(&lg);
}

/* Peer bytes cannot break out of their string or forge a line. */
static void
test_escaping(void **state)
{
	struct log lg;
	char buf[LOG_LINE_MAX];
	json_t *j;
	const char *evil = "a\"b\\c\nd\r\te\x01\x7f\xff\xc3\x28"
	                   "\",\"lvl\":\"error\"}\n{\"ev\":\"x";
	(void)state;

	setup_log(&lg);
	log_format(&lg, buf, sizeof(buf), LOG_INFO, "dns.query",
	    (const struct log_field[]){LOG_BEGIN_, LOG_S("name", evil),
	        LOG_S("utf8", "caf\xc3\xa9"), LOG_S("bs", "c:\\x"),
	        LOG_S("q", "say \"hi"), LOG_END_});
	j = parse_line(buf);
	assert_string_equal(
	    json_string_value(json_object_get(j, "lvl")), "info");
	const char *got = json_string_value(json_object_get(j, "name"));
	assert_non_null(got);
	/* Control bytes and invalid UTF-8 are replaced, quotes kept inside. */
	assert_non_null(strstr(got, "a\"b\\c\nd\r\te"));
	assert_non_null(strstr(got, "\xef\xbf\xbd")); /* U+FFFD */
	assert_string_equal(
	    json_string_value(json_object_get(j, "utf8")), "caf\xc3\xa9");
	/* one byte to escape in an otherwise plain string */
	assert_string_equal(
	    json_string_value(json_object_get(j, "bs")), "c:\\x");
	assert_string_equal(
	    json_string_value(json_object_get(j, "q")), "say \"hi");
	assert_non_null(strstr(buf, "\\u0001"));
	assert_non_null(strstr(buf, "\\u007f"));
	json_decref(j);
	log_clear(&lg);
}

/* Whatever a caller passes under a secret-like key never reaches a line. */
static void
test_secret_keys_redacted(void **state)
{
	static const char *keys[] = {"token", "api_token", "secret",
	    "client.secret", "password", "credential", "Authorization", "value",
	    "cookie", "apiKey", "db.passwd", "PASSWD", "privkey", "tls_privkey",
	    "private_key", "X_PRIVATE_KEY", "api_key", "openai.api_key",
	    "apikey", "proxy_authorization", "session_cookie", "user.password",
	    "aws_credential", "new_value", "TOKEN"};
	struct log lg;
	char buf[LOG_LINE_MAX];
	size_t i;
	(void)state;

	setup_log(&lg);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		log_format(&lg, buf, sizeof(buf), LOG_INFO, "t",
		    (const struct log_field[]){LOG_BEGIN_,
		        LOG_FIELD(keys[i], "sk-live-SHOULD-NOT-APPEAR"),
		        LOG_END_});
		assert_null(strstr(buf, "SHOULD-NOT-APPEAR"));
		assert_non_null(strstr(buf, "[REDACTED]"));
	}
	/* literal keys (quoted by the preprocessor) are checked the same */
	log_format(&lg, buf, sizeof(buf), LOG_INFO, "t",
	    (const struct log_field[]){LOG_BEGIN_,
	        LOG_S("token", "sk-live-SHOULD-NOT-APPEAR"),
	        LOG_S("Authorization", "sk-live-SHOULD-NOT-APPEAR"),
	        LOG_S("openai.api_key", "sk-live-SHOULD-NOT-APPEAR"),
	        LOG_S("new_value", "sk-live-SHOULD-NOT-APPEAR"), LOG_END_});
	assert_null(strstr(buf, "SHOULD-NOT-APPEAR"));
	assert_non_null(strstr(buf, ",\"token\":\"[REDACTED]\","));
	assert_non_null(strstr(buf, ",\"new_value\":\"[REDACTED]\"}"));
	/* Keys that merely contain the word are kept. */
	log_format(&lg, buf, sizeof(buf), LOG_INFO, "t",
	    (const struct log_field[]){LOG_BEGIN_, LOG_S("tokenizer", "ok"),
	        LOG_S("values_count", "ok"), LOG_S("mytoken", "ok"),
	        LOG_S("xapikey", "ok"), LOG_S("d", "ok"), LOG_S("y", "ok"),
	        LOG_S("keyvalue", "ok"), LOG_S("host", "ok"), LOG_END_});
	assert_null(strstr(buf, "[REDACTED]"));
	log_clear(&lg);
}

/* A literal key (LOG_S & co., quoted at compile time) and the same key
 * at run time (LOG_FIELD, quoted as the line is made) give the same line,
 * at every buffer size (the pre-quoted key goes through the same bounded
 * writer and truncation). */
static void
test_literal_keys_same_line(void **state)
{
	struct log lg;
	char a[LOG_LINE_MAX], b[LOG_LINE_MAX];
	const char *k = "path", *h = "host";
	size_t cap, na, nb;
	(void)state;

	setup_log(&lg);
	for (cap = 64; cap <= 160; cap++) {
		na = log_format(&lg, a, cap, LOG_INFO, "t",
		    (const struct log_field[]){LOG_BEGIN_,
		        LOG_S("host", "term.bench.test"),
		        LOG_S("path", "/plain/\"small\""), LOG_END_});
		nb = log_format(&lg, b, cap, LOG_INFO, "t",
		    (const struct log_field[]){LOG_BEGIN_,
		        LOG_FIELD(h, "term.bench.test"),
		        LOG_FIELD(k, "/plain/\"small\""), LOG_END_});
		assert_int_equal(na, nb);
		assert_string_equal(a, b);
	}
	assert_non_null(
	    strstr(a, ",\"host\":\"term.bench.test\",\"path\":\"/plain/"));
	log_clear(&lg);
}

static void
test_truncation_stays_valid(void **state)
{
	struct log lg;
	char buf[300];
	char big[2000];
	json_t *j;
	(void)state;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	setup_log(&lg);
	log_format(&lg, buf, sizeof(buf), LOG_INFO, "t",
	    (const struct log_field[]){
	        LOG_BEGIN_, LOG_S("a", "short"), LOG_S("big", big), LOG_END_});
	j = parse_line(buf);
	assert_true(json_is_true(json_object_get(j, "trunc")));
	assert_string_equal(
	    json_string_value(json_object_get(j, "a")), "short");
	json_decref(j);

	/* A single field longer than LOG_FIELD_STR_MAX is cut with "...". */
	char line[LOG_LINE_MAX];
	log_format(&lg, line, sizeof(line), LOG_INFO, "t",
	    (const struct log_field[]){
	        LOG_BEGIN_, LOG_S("big", big), LOG_END_});
	j = parse_line(line);
	assert_int_equal(strlen(json_string_value(json_object_get(j, "big"))),
	    LOG_FIELD_STR_MAX + 3);
	json_decref(j);
	log_clear(&lg);
}

static void
test_emit_level_filter_and_fd(void **state)
{
	struct log lg;
	int p[2];
	char buf[LOG_LINE_MAX];
	ssize_t n;
	(void)state;

	assert_int_equal(pipe(p), 0);
	log_init(&lg, p[1], LOG_INFO);
	log_debug(&lg, "hidden.debug", LOG_S("k", "v"));
	log_info(&lg, "shown.info");
	log_error(&lg, "shown.error", LOG_U("n", 1));
	close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_null(strstr(buf, "hidden.debug"));
	assert_non_null(strstr(buf, "\"ev\":\"shown.info\"}\n"));
	assert_non_null(strstr(buf, "\"ev\":\"shown.error\",\"n\":1}\n"));
	assert_int_equal(lg.lines, 2);
	close(p[0]);
	log_clear(&lg);
}

static void
count_arm(void *arg)
{
	(*(int *)arg)++;
}

static size_t
count_lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

/* The pipe's bytes so far (non-blocking read): "" when nothing came. */
static size_t
drain(int fd, char *buf, size_t cap)
{
	ssize_t n = read(fd, buf, cap - 1);

	if (n < 0)
		n = 0;
	buf[n] = '\0';
	return (size_t)n;
}

/*
 * log_defer: lines are held until log_flush, in order, written as one
 * batch; arm is called once per batch; a batch never passes LOG_PEND_MAX
 * (full: flushed first, arm again); a line longer than that is written
 * alone after what was held; log_defer(NULL) flushes and writes at once
 * again; counters count lines once written.
 */
static void
test_emit_deferred(void **state)
{
	struct log lg;
	int p[2], arms = 0, i;
	char buf[4 * LOG_PEND_MAX], big[LOG_FIELD_STR_MAX + 1];
	size_t n, nl = 0;
	(void)state;

	assert_int_equal(pipe2(p, O_NONBLOCK), 0);
	log_init(&lg, p[1], LOG_INFO);
	log_defer(&lg, count_arm, &arms);
	log_info(&lg, "one.a");
	log_debug(&lg, "hidden.debug");
	log_info(&lg, "one.b", LOG_U("n", 2));
	assert_int_equal(arms, 1);
	assert_int_equal(drain(p[0], buf, sizeof(buf)), 0);
	assert_int_equal(lg.lines, 0);
	log_flush(&lg);
	n = drain(p[0], buf, sizeof(buf));
	assert_true(n > 0);
	assert_non_null(strstr(buf, "\"ev\":\"one.a\"}\n{\"ts\""));
	assert_non_null(strstr(buf, "\"ev\":\"one.b\",\"n\":2}\n"));
	assert_null(strstr(buf, "hidden.debug"));
	assert_int_equal(lg.lines, 2);
	log_flush(&lg); /* nothing held: no write */
	assert_int_equal(drain(p[0], buf, sizeof(buf)), 0);

	/* more than a batch holds: flushed when full, never above the cap */
	arms = 0;
	for (i = 0; i < 100; i++)
		log_info(&lg, "many.lines", LOG_I("i", i));
	assert_true(arms >= 2);
	assert_true(lg.plen <= LOG_PEND_MAX);
	n = drain(p[0], buf, sizeof(buf));
	assert_true(n > 0 && n <= LOG_PEND_MAX); /* the full batches so far */
	nl += count_lines(buf);
	log_flush(&lg);
	n = drain(p[0], buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"i\":99}\n"));
	nl += count_lines(buf);
	assert_int_equal(nl, 100); /* whole lines, none lost or doubled */
	assert_int_equal(lg.lines, 102);

	/* a line longer than a batch: what was held first, then it, alone */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	arms = 0;
	log_info(&lg, "held.first");
	/* five fields of LOG_FIELD_STR_MAX: a line past LOG_PEND_MAX */
	log_info(&lg, "long.line", LOG_S("a", big), LOG_S("b", big),
	    LOG_S("c", big), LOG_S("d", big), LOG_S("e", big));
	assert_int_equal(arms, 1);
	assert_int_equal(lg.plen, 0);
	n = drain(p[0], buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"ev\":\"held.first\"}\n{"));
	assert_non_null(strstr(buf, "\"ev\":\"long.line\""));
	assert_true(strstr(buf, "held.first") < strstr(buf, "long.line"));

	/* off again: flushes what is held, then a write per line */
	log_info(&lg, "held.last");
	log_defer(&lg, NULL, NULL);
	n = drain(p[0], buf, sizeof(buf));
	assert_non_null(strstr(buf, "held.last"));
	log_info(&lg, "at.once");
	n = drain(p[0], buf, sizeof(buf));
	assert_non_null(strstr(buf, "at.once"));
	assert_int_equal(lg.lines, 106);
	close(p[0]);
	close(p[1]);
	log_clear(&lg);
}

/*
 * log_emit keeps the date and time of the second it last wrote: each line
 * it writes equals log_format's for the same clock, across a second's
 * and a day's turn and back in time.
 */
static void
test_emit_ts_cache(void **state)
{
	static const uint64_t at[] = {1764700000123ULL, 1764700000999ULL,
	    1764700001000ULL, 1764700001005ULL, 1764719999999ULL,
	    1764720000000ULL, 1764700000001ULL, 0, 253402300799999ULL};
	struct log lg;
	int p[2];
	char want[LOG_LINE_MAX], got[LOG_LINE_MAX];
	size_t i, n;
	(void)state;

	for (i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		assert_int_equal(pipe(p), 0);
		log_init(&lg, p[1], LOG_DEBUG);
		lg.clock = fixed_clock;
		test_now = at[i];
		lg.clock_arg = &test_now;
		if (i > 0) /* the cache of the line before, as a daemon has */
			lg.ts_sec = at[i - 1] / 1000;
		if (i > 0 && i % 2 == 1) {
			/* a first line at the earlier second fills it */
			test_now = at[i - 1];
			log_info(&lg, "t.first");
			test_now = at[i];
			n = (size_t)read(p[0], got, sizeof(got));
			assert_true(n > 0);
		}
		log_info(&lg, "t.ev", LOG_U("u", 18446744073709551615ULL),
		    LOG_I("min", -9223372036854775807LL - 1), LOG_I("z", 0),
		    LOG_I("neg", -42));
		n = (size_t)read(p[0], got, sizeof(got) - 1);
		got[n] = '\0';
		log_format(&lg, want, sizeof(want), LOG_INFO, "t.ev",
		    (const struct log_field[]){LOG_BEGIN_,
		        LOG_U("u", 18446744073709551615ULL),
		        LOG_I("min", -9223372036854775807LL - 1), LOG_I("z", 0),
		        LOG_I("neg", -42), LOG_END_});
		assert_string_equal(got, want);
		close(p[0]);
		close(p[1]);
		log_clear(&lg);
	}
	/* and the numbers are printf's */
	assert_non_null(strstr(want, "\"u\":18446744073709551615,"));
	assert_non_null(strstr(want, "\"min\":-9223372036854775808,"));
	assert_non_null(strstr(want, "\"z\":0,\"neg\":-42}"));
	test_now = 1764700000123ULL;
}

/* A line cut short drops the field that did not fit whole, even when a
 * string value holds commas and escapes (a cut at its last comma would
 * leave half a string). */
static void
test_truncation_commas(void **state)
{
	struct log lg;
	char buf[200], val[400];
	size_t i, cap;
	json_t *j;
	(void)state;

	for (i = 0; i + 1 < sizeof(val); i++)
		val[i] = "a,\"b\\,c"[i % 7];
	val[sizeof(val) - 1] = '\0';
	setup_log(&lg);
	for (cap = 64; cap <= sizeof(buf); cap++) {
		log_format(&lg, buf, cap, LOG_INFO, "t",
		    (const struct log_field[]){LOG_BEGIN_, LOG_S("a", "x,y"),
		        LOG_S("v", val), LOG_END_});
		j = parse_line(buf);
		/* the mark too, where it fits */
		if (cap >= 100)
			assert_true(json_is_true(json_object_get(j, "trunc")));
		assert_null(json_object_get(j, "v"));
		json_decref(j);
	}
	log_clear(&lg);
}

/* Plain strings (copied as they are checked) at every buffer size: the
 * line is the whole line when it fits, else the whole line cut at a field
 * boundary and marked, and always valid JSON. */
static void
test_truncation_plain(void **state)
{
	struct log lg;
	char full[512], buf[512], val[300];
	size_t i, cap, n, k;
	json_t *j;
	(void)state;

	for (i = 0; i + 1 < sizeof(val); i++)
		val[i] = (char)('a' + i % 26);
	val[sizeof(val) - 1] = '\0';
	setup_log(&lg);
#define PLAIN_FIELDS                                                           \
	(const struct log_field[]){LOG_BEGIN_,                                 \
	    LOG_S("host", "term.bench.test"), LOG_S("path", "/plain/small"),   \
	    LOG_S("v", val), LOG_S("k", "x"), LOG_END_}
	n = log_format(&lg, full, sizeof(full), LOG_INFO, "t", PLAIN_FIELDS);
	assert_null(strstr(full, "trunc"));
	for (cap = 64; cap <= n + 8; cap++) {
		k = log_format(&lg, buf, cap, LOG_INFO, "t", PLAIN_FIELDS);
		assert_true(k < cap);
		j = parse_line(buf);
		json_decref(j);
		if (strstr(buf, ",\"trunc\":true}") == NULL &&
		    strcmp(buf, full) != 0) {
			/* cut without the mark (no room for it): a prefix */
			assert_memory_equal(buf, full, k - 2);
			continue;
		}
		if (strcmp(buf, full) == 0)
			continue;
		assert_memory_equal(
		    buf, full, k - sizeof(",\"trunc\":true}\n") + 1);
	}
#undef PLAIN_FIELDS
	log_clear(&lg);
}

/* A byte to escape (or not plain ASCII) at every offset of strings of
 * every length up to 23 (checked a word at a time from 8 bytes on, the
 * last word overlapping): escaped, never copied raw. */
static void
test_escape_every_offset(void **state)
{
	static const unsigned char bytes[] = {
	    0x01, '\n', 0x1f, '"', '\\', 0x7f, 0x80, 0xff};
	struct log lg;
	char buf[LOG_LINE_MAX], val[24];
	size_t b, off, len;
	json_t *j;
	const char *got;
	(void)state;

	setup_log(&lg);
	for (b = 0; b < sizeof(bytes); b++)
		for (len = 1; len < sizeof(val); len++)
			for (off = 0; off < len; off++) {
				memset(val, 'a', len);
				val[len] = '\0';
				val[off] = (char)bytes[b];
				log_format(&lg, buf, sizeof(buf), LOG_INFO, "t",
				    (const struct log_field[]){
				        LOG_BEGIN_, LOG_S("v", val), LOG_END_});
				j = parse_line(buf);
				got =
				    json_string_value(json_object_get(j, "v"));
				assert_non_null(got);
				if (bytes[b] < 0x80)
					assert_string_equal(got, val);
				else
					assert_non_null(
					    strstr(got, "\xef\xbf\xbd"));
				if (bytes[b] == 0x7f)
					assert_non_null(strstr(buf, "\\u007f"));
				json_decref(j);
			}
	log_clear(&lg);
}

static void
test_level_parse(void **state)
{
	enum log_level l;
	(void)state;

	assert_int_equal(log_level_parse("DEBUG", &l), 0);
	assert_int_equal(l, LOG_DEBUG);
	assert_int_equal(log_level_parse("warning", &l), 0);
	assert_int_equal(l, LOG_WARN);
	assert_int_equal(log_level_parse("verbose", &l), -1);
	assert_int_equal(log_level_parse(NULL, &l), -1);
}

static void
test_limiter(void **state)
{
	struct log_limiter l;
	int i, allowed = 0;
	(void)state;

	/* Dedup: the same key within the window is suppressed. */
	log_limiter_init(&l, 1000, 1000, 10000);
	assert_true(log_limiter_allow(&l, "evil.test", 1000));
	assert_false(log_limiter_allow(&l, "evil.test", 2000));
	assert_true(log_limiter_allow(&l, "other.test", 2000));
	assert_true(log_limiter_allow(&l, "evil.test", 11001));

	/* Rate: burst 5, 10/s; 100 distinct keys at once → 5 pass. */
	log_limiter_init(&l, 10, 5, 0);
	for (i = 0; i < 100; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		allowed += log_limiter_allow(&l, k, 5000);
	}
	assert_int_equal(allowed, 5);
	assert_int_equal(l.suppressed, 95);
	/* After 1 s, 10 more tokens (capped by burst 5). */
	allowed = 0;
	for (i = 0; i < 100; i++)
		allowed += log_limiter_allow(&l, NULL, 6000);
	assert_int_equal(allowed, 5);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_format_fields),
	    cmocka_unit_test(test_escaping),
	    cmocka_unit_test(test_secret_keys_redacted),
	    cmocka_unit_test(test_literal_keys_same_line),
	    cmocka_unit_test(test_truncation_stays_valid),
	    cmocka_unit_test(test_emit_level_filter_and_fd),
	    cmocka_unit_test(test_emit_ts_cache),
	    cmocka_unit_test(test_emit_deferred),
	    cmocka_unit_test(test_truncation_commas),
	    cmocka_unit_test(test_truncation_plain),
	    cmocka_unit_test(test_escape_every_offset),
	    cmocka_unit_test(test_level_parse),
	    cmocka_unit_test(test_limiter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
