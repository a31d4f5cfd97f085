#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egressd/log.h"

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
	        LOG_S("utf8", "caf\xc3\xa9"), LOG_END_});
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
	    "cookie", "apiKey"};
	struct log lg;
	char buf[LOG_LINE_MAX];
	size_t i;
	(void)state;

	setup_log(&lg);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		log_format(&lg, buf, sizeof(buf), LOG_INFO, "t",
		    (const struct log_field[]){LOG_BEGIN_,
		        LOG_S(keys[i], "sk-live-SHOULD-NOT-APPEAR"), LOG_END_});
		assert_null(strstr(buf, "SHOULD-NOT-APPEAR"));
		assert_non_null(strstr(buf, "[REDACTED]"));
	}
	/* Keys that merely contain the word are kept. */
	log_format(&lg, buf, sizeof(buf), LOG_INFO, "t",
	    (const struct log_field[]){LOG_BEGIN_, LOG_S("tokenizer", "ok"),
	        LOG_S("values_count", "ok"), LOG_END_});
	assert_null(strstr(buf, "[REDACTED]"));
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
	    cmocka_unit_test(test_truncation_stays_valid),
	    cmocka_unit_test(test_emit_level_filter_and_fd),
	    cmocka_unit_test(test_emit_ts_cache),
	    cmocka_unit_test(test_truncation_commas),
	    cmocka_unit_test(test_level_parse),
	    cmocka_unit_test(test_limiter),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
