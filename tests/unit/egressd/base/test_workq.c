/* Tests of egressd/base/workq.c: jobs run one at a time end to end in FIFO
 * order, work on another thread, a job may take several work phases, a
 * failing job does not stop the next, and freeing the queue with jobs
 * queued (one in its work phase) cancels each exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "egressd/base/workq.h"

#define NJOBS 5
#define TRACE_MAX 128

struct fx {
	struct event_base *base;
	struct workq *q;
	pthread_t loop;
	/* What happened, in order: 's'tart, 'w'ork, 'd'one, 'c'ancel,
	 * each followed by the job's id. Written by the loop and, for 'w',
	 * by the worker while the loop waits for it. */
	char trace[TRACE_MAX];
	size_t ntrace;
	pthread_mutex_t mu;
	size_t finished;
	size_t want; /* break the loop after this many jobs */
};

struct job {
	struct workq_job wj;
	struct fx *f;
	char id;
	int phases; /* work phases still wanted */
	bool fail; /* its work "fails": done sees it */
	bool failed;
	bool worker_thread; /* work ran off the loop's thread */
	unsigned sleep_us;
	int cancelled;
	atomic_bool entered; /* its work phase has begun on the worker */
};

static void
note(struct fx *f, char what, char id)
{
	pthread_mutex_lock(&f->mu);
	if (f->ntrace + 2 < TRACE_MAX) {
		f->trace[f->ntrace++] = what;
		f->trace[f->ntrace++] = id;
	}
	pthread_mutex_unlock(&f->mu);
}

static struct job *
job_of(struct workq_job *wj)
{
	return (struct job *)((char *)wj - offsetof(struct job, wj));
}

static void
job_start(struct workq_job *wj)
{
	struct job *j = job_of(wj);

	note(j->f, 's', j->id);
}

static void
job_work(struct workq_job *wj)
{
	struct job *j = job_of(wj);

	j->worker_thread = !pthread_equal(pthread_self(), j->f->loop);
	atomic_store(&j->entered, true);
	if (j->sleep_us > 0)
		usleep(j->sleep_us);
	j->failed = j->fail;
	note(j->f, 'w', j->id);
}

static bool
job_done(struct workq_job *wj, bool cancelled)
{
	struct job *j = job_of(wj);
	struct fx *f = j->f;

	if (cancelled) {
		j->cancelled++;
		note(f, 'c', j->id);
		return false;
	}
	note(f, 'd', j->id);
	if (--j->phases > 0)
		return true;
	if (++f->finished == f->want)
		(void)event_base_loopbreak(f->base);
	return false;
}

static void
job_init(struct job *j, struct fx *f, char id)
{
	memset(j, 0, sizeof(*j));
	j->wj.start = job_start;
	j->wj.work = job_work;
	j->wj.done = job_done;
	j->f = f;
	j->id = id;
	j->phases = 1;
}

static int
setup(void **state)
{
	static struct fx f;
	struct err e = {""};

	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.mu, NULL);
	f.loop = pthread_self();
	f.base = event_base_new();
	assert_non_null(f.base);
	f.q = workq_new(f.base, &e);
	assert_non_null(f.q);
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	workq_free(f->q);
	event_base_free(f->base);
	pthread_mutex_destroy(&f->mu);
	return 0;
}

/* Runs the loop until f->want jobs finished, bounded by a timer. */
static void
run(struct fx *f, size_t want)
{
	struct timeval tv = {5, 0};

	f->want = want;
	(void)event_base_loopexit(f->base, &tv);
	(void)event_base_dispatch(f->base);
	assert_int_equal(f->finished, want);
}

static void
fifo_one_at_a_time(void **state)
{
	struct fx *f = *state;
	struct job j[NJOBS];
	struct err e = {""};
	size_t i;

	for (i = 0; i < NJOBS; i++) {
		job_init(&j[i], f, (char)('a' + i));
		/* The first is the slowest: nothing may overtake it. */
		j[i].sleep_us = (unsigned)(NJOBS - i) * 2000;
		assert_int_equal(workq_submit(f->q, &j[i].wj, &e), 0);
	}
	/* Nothing starts inside submit. */
	assert_int_equal(f->ntrace, 0);
	assert_int_equal(workq_pending(f->q), NJOBS);
	run(f, NJOBS);
	f->trace[f->ntrace] = '\0';
	assert_string_equal(f->trace, "sawadasbwbdbscwcdcsdwdddsewede");
	for (i = 0; i < NJOBS; i++) {
		assert_true(j[i].worker_thread);
		assert_int_equal(j[i].cancelled, 0);
	}
	assert_int_equal(workq_pending(f->q), 0);
}

static void
failing_job_then_next(void **state)
{
	struct fx *f = *state;
	struct job a, b;
	struct err e = {""};

	job_init(&a, f, 'a');
	job_init(&b, f, 'b');
	a.fail = true;
	assert_int_equal(workq_submit(f->q, &a.wj, &e), 0);
	assert_int_equal(workq_submit(f->q, &b.wj, &e), 0);
	run(f, 2);
	assert_true(a.failed);
	assert_false(b.failed);
	f->trace[f->ntrace] = '\0';
	assert_string_equal(f->trace, "sawadasbwbdb");
}

static void
phases_then_next(void **state)
{
	struct fx *f = *state;
	struct job a, b;
	struct err e = {""};

	job_init(&a, f, 'a');
	job_init(&b, f, 'b');
	a.phases = 3;
	b.wj.work = NULL; /* no work phase: done still comes from the loop */
	assert_int_equal(workq_submit(f->q, &a.wj, &e), 0);
	assert_int_equal(workq_submit(f->q, &b.wj, &e), 0);
	run(f, 2);
	f->trace[f->ntrace] = '\0';
	assert_string_equal(f->trace, "sawadawadawadasbdb");
}

static void
submit_from_done_waits_its_turn(void **state)
{
	struct fx *f = *state;
	struct job a, b;
	struct err e = {""};

	job_init(&a, f, 'a');
	job_init(&b, f, 'b');
	assert_int_equal(workq_submit(f->q, &a.wj, &e), 0);
	run(f, 1);
	assert_int_equal(workq_submit(f->q, &b.wj, &e), 0);
	run(f, 2);
	f->trace[f->ntrace] = '\0';
	assert_string_equal(f->trace, "sawadasbwbdb");
}

/* The daemon's way: done frees its job, and may queue another from
 * inside; the queue must not look at a freed job (ASan) nor lose the
 * ones behind it (a freed job's next pointer was once followed). */
struct heap_job {
	struct job j;
	struct heap_job *spawn; /* submitted from this one's done */
};

static bool
heap_done(struct workq_job *wj, bool cancelled)
{
	struct heap_job *h = (struct heap_job *)job_of(wj);
	struct fx *f = h->j.f;
	struct err e = {""};

	note(f, cancelled ? 'c' : 'd', h->j.id);
	if (!cancelled && h->spawn != NULL)
		assert_int_equal(workq_submit(f->q, &h->spawn->j.wj, &e), 0);
	memset(h, 0x5a, sizeof(*h)); /* what a reuse would leave */
	free(h);
	if (!cancelled && ++f->finished == f->want)
		(void)event_base_loopbreak(f->base);
	return false;
}

static struct heap_job *
heap_job_new(struct fx *f, char id)
{
	struct heap_job *h = calloc(1, sizeof(*h));

	assert_non_null(h);
	job_init(&h->j, f, id);
	h->j.wj.done = heap_done;
	return h;
}

static void
done_frees_and_submits(void **state)
{
	struct fx *f = *state;
	struct heap_job *a = heap_job_new(f, 'a'), *b = heap_job_new(f, 'b');
	struct heap_job *c = heap_job_new(f, 'c'), *x = heap_job_new(f, 'x');
	struct err e = {""};

	a->spawn = x; /* queued behind b and c, from a's done */
	assert_int_equal(workq_submit(f->q, &a->j.wj, &e), 0);
	assert_int_equal(workq_submit(f->q, &b->j.wj, &e), 0);
	assert_int_equal(workq_submit(f->q, &c->j.wj, &e), 0);
	run(f, 4);
	f->trace[f->ntrace] = '\0';
	assert_string_equal(f->trace, "sawadasbwbdbscwcdcsxwxdx");
	assert_int_equal(workq_pending(f->q), 0);
}

static void
bounded(void **state)
{
	struct fx *f = *state;
	static struct job j[WORKQ_MAX + 1];
	struct err e = {""};
	size_t i;

	for (i = 0; i < WORKQ_MAX; i++) {
		job_init(&j[i], f, 'x');
		assert_int_equal(workq_submit(f->q, &j[i].wj, &e), 0);
	}
	job_init(&j[WORKQ_MAX], f, 'y');
	assert_int_equal(workq_submit(f->q, &j[WORKQ_MAX].wj, &e), -1);
	assert_non_null(strstr(e.msg, "waiting"));
	run(f, WORKQ_MAX);
}

/* Free with one job in its work phase and two queued: the worker's
 * phase ends, then each job is cancelled once, in order; none of them
 * is done. Under ASan, nothing leaks and nothing is touched after. */
static void
free_with_jobs_queued(void **state)
{
	struct fx *f = *state;
	struct job a, b, c;
	struct err e = {""};
	int turns;

	job_init(&a, f, 'a');
	job_init(&b, f, 'b');
	job_init(&c, f, 'c');
	a.sleep_us = 100000;
	assert_int_equal(workq_submit(f->q, &a.wj, &e), 0);
	assert_int_equal(workq_submit(f->q, &b.wj, &e), 0);
	assert_int_equal(workq_submit(f->q, &c.wj, &e), 0);
	/* A loop turn starts a, then the worker sleeps inside its work: the
	 * free must come while it is there, however late a loaded machine
	 * schedules the worker (a fixed 20 ms turn was not always enough). */
	for (turns = 0; !atomic_load(&a.entered) && turns < 10000; turns++) {
		(void)event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	assert_true(atomic_load(&a.entered));
	workq_free(f->q);
	f->q = NULL;
	f->trace[f->ntrace] = '\0';
	assert_string_equal(f->trace, "sawacacbcc");
	assert_int_equal(a.cancelled, 1);
	assert_int_equal(b.cancelled, 1);
	assert_int_equal(c.cancelled, 1);
	assert_int_equal(f->finished, 0);
}

static void
free_idle_and_null(void **state)
{
	struct fx *f = *state;

	workq_free(f->q);
	f->q = NULL;
	workq_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        fifo_one_at_a_time, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        failing_job_then_next, setup, teardown),
	    cmocka_unit_test_setup_teardown(phases_then_next, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        submit_from_done_waits_its_turn, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        done_frees_and_submits, setup, teardown),
	    cmocka_unit_test_setup_teardown(bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        free_with_jobs_queued, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        free_idle_and_null, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
