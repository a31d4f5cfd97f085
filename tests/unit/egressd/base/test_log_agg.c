/*
 * log_agg: per-name aggregation of denial lines under an injected clock:
 * immediate lines while tokens last, repeats counted within the window,
 * held names written by the flush newest first, a flood of distinct names
 * collapsed into the summary while a real name after it is still written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/base/log_agg.h"

#define OUT_MAX 1024

struct out {
	char name[OUT_MAX][LOG_AGG_NAME_MAX + 1];
	uint64_t count[OUT_MAX];
	size_t n;
};

static void
emit(void *arg, const struct log_agg_rec *r, uint64_t count)
{
	struct out *o = arg;

	assert_true(o->n < OUT_MAX);
	snprintf(o->name[o->n], sizeof(o->name[o->n]), "%s", r->name);
	o->count[o->n++] = count;
}

static bool
ev(struct log_agg *a, const char *name, uint64_t now, uint64_t *count)
{
	struct log_agg_rec r;

	log_agg_rec_set(&r, name, 1, "policy", NULL, "deny *.evil.test");
	return log_agg_event(a, &r, now, count);
}

static ssize_t
find(const struct out *o, const char *name)
{
	size_t i;

	for (i = 0; i < o->n; i++)
		if (strcmp(o->name[i], name) == 0)
			return (ssize_t)i;
	return -1;
}

static void
test_immediate_then_repeats_counted(void **state)
{
	static struct log_agg a;
	static struct out o;
	struct log_agg_summary s;
	uint64_t c = 0;
	int i;

	(void)state;
	memset(&o, 0, sizeof(o));
	log_agg_init(&a, 20, 100, 10000);
	assert_true(ev(&a, "evil.test", 1000, &c));
	assert_int_equal(c, 1);
	for (i = 0; i < 5; i++)
		assert_false(ev(&a, "evil.test", 2000 + i, &c));
	/* Within the window the repeats wait... */
	log_agg_flush(&a, 5000, emit, &o, &s);
	assert_int_equal(o.n, 0);
	assert_int_equal(s.names, 0);
	/* ...and after it come out as one line with their count. */
	log_agg_flush(&a, 11000, emit, &o, &s);
	assert_int_equal(o.n, 1);
	assert_string_equal(o.name[0], "evil.test");
	assert_int_equal(o.count[0], 5);
	/* A new event after a written window is immediate again. */
	assert_true(ev(&a, "evil.test", 22000, &c));
	assert_int_equal(c, 1);
}

static void
test_burst_exhausted_names_held_not_lost(void **state)
{
	static struct log_agg a;
	static struct out o;
	struct log_agg_summary s;
	uint64_t c;
	char name[64];
	int i, now_lines = 0;

	(void)state;
	memset(&o, 0, sizeof(o));
	log_agg_init(&a, 10, 5, 10000);
	for (i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "n%d.evil.test", i);
		now_lines += ev(&a, name, 1000, &c);
	}
	assert_int_equal(now_lines, 5);
	/* One second later: the bucket is full again (5), newest first. */
	log_agg_flush(&a, 2000, emit, &o, &s);
	assert_int_equal(o.n, 5);
	assert_string_equal(o.name[0], "n19.evil.test");
	assert_string_equal(o.name[4], "n15.evil.test");
	/* While names are held, a new one is held too (no jumping)... */
	assert_false(ev(&a, "late.evil.test", 2000, &c));
	/* ...and, the newest, goes first at the next flush. */
	log_agg_flush(&a, 4000, emit, &o, &s);
	assert_int_equal(o.n, 10);
	assert_string_equal(o.name[5], "late.evil.test");
	/* The rest follows; nothing was lost, nothing summarised. */
	log_agg_flush(&a, 6000, emit, &o, &s);
	log_agg_flush(&a, 8000, emit, &o, &s);
	assert_int_equal(o.n, 16);
	assert_true(find(&o, "n5.evil.test") >= 0);
	assert_true(find(&o, "n0.evil.test") < 0); /* immediate */
	assert_int_equal(s.names, 0);
	assert_int_equal(s.events, 0);
}

/*
 * The flood: 5000 distinct names in one instant, then the real one. The
 * real one is written by the next flush; the flood beyond the table is
 * one summary with the names it could not name.
 */
static void
test_flood_then_real_name(void **state)
{
	static struct log_agg a;
	static struct out o;
	struct log_agg_summary s, total = {0, 0};
	uint64_t c, t = 1000;
	char name[64];
	size_t i, immediate = 0;

	(void)state;
	memset(&o, 0, sizeof(o));
	log_agg_init(&a, 20, 100, 10000);
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "x%zu.exfil.test", i);
		immediate += ev(&a, name, t, &c);
	}
	assert_int_equal(immediate, 100);
	assert_false(ev(&a, "real.evil.test", t, &c));
	log_agg_flush(&a, t + 1000, emit, &o, &s);
	assert_true(o.n >= 1);
	assert_string_equal(o.name[0], "real.evil.test");
	assert_int_equal(o.count[0], 1);
	total.names += s.names;
	total.events += s.events;
	/* Everything is accounted for: written now, later, or summarised. */
	for (i = 0; i < 30; i++) {
		t += 1000;
		log_agg_flush(&a, t + 1000, emit, &o, &s);
		total.names += s.names;
		total.events += s.events;
	}
	assert_int_equal(immediate + o.n + total.names, 5001);
	assert_int_equal(total.events, total.names);
	assert_int_equal(total.names, 5000 - 100 - (LOG_AGG_SLOTS - 1));
	assert_true(find(&o, "real.evil.test") == 0);
}

/* Repeats of the real name during a flood keep it in the table. */
static void
test_repeated_name_survives_flood(void **state)
{
	static struct log_agg a;
	static struct out o;
	struct log_agg_summary s;
	uint64_t c, t = 1000;
	char name[64];
	size_t i;
	ssize_t k;

	(void)state;
	memset(&o, 0, sizeof(o));
	log_agg_init(&a, 20, 100, 10000);
	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "f%zu.exfil.test", i);
		(void)ev(&a, name, t, &c);
		/* From after the burst on, once per 100 flood names. */
		if (i >= 200 && i % 100 == 0)
			assert_false(ev(&a, "real.evil.test", t, &c));
	}
	for (i = 0; i < 20; i++)
		log_agg_flush(&a, t + 1000 * (i + 1), emit, &o, &s);
	k = find(&o, "real.evil.test");
	assert_true(k >= 0);
	/* All of its denials are in that line (it was never immediate). */
	assert_int_equal(o.count[k], 28);
}

static void
test_rec_cuts_long_fields(void **state)
{
	struct log_agg_rec r;
	char big[600];

	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_agg_rec_set(&r, big, 28, big, NULL, big);
	assert_int_equal(strlen(r.name), LOG_AGG_NAME_MAX);
	assert_int_equal(strlen(r.reason), LOG_AGG_REASON_MAX - 1);
	assert_int_equal(strlen(r.rule), LOG_AGG_RULE_MAX - 1);
	assert_string_equal(r.denied, "");
	assert_int_equal(r.qtype, 28);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_immediate_then_repeats_counted),
	    cmocka_unit_test(test_burst_exhausted_names_held_not_lost),
	    cmocka_unit_test(test_flood_then_real_name),
	    cmocka_unit_test(test_repeated_name_survives_flood),
	    cmocka_unit_test(test_rec_cuts_long_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
