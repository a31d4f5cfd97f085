/*
 * workq: one worker thread beside the event loop, fed one job at a time,
 * so pure and slow work (a policy commit's decide, the policy file's
 * write and fsync) never holds up the loop that answers DNS and serves
 * the proxy.
 *
 * A job runs end to end before the next one starts, in submission order
 * (FIFO): start (loop) -> work (worker thread) -> done (loop); done may
 * ask for another work phase (returns true), as often as the job needs.
 * The next job's start runs only after the previous job's last done has
 * returned, so each job sees what the one before it put in force.
 *
 * Threads: start and done run on the loop's thread, work on the worker's.
 * Nothing else of the queue runs on the worker. What a job's work touches
 * must be its own (owned objects passed in, results passed out) or
 * immutable; no logging, no event loop calls there.
 *
 * Ownership: the queue borrows each job from workq_submit until its done
 * returns false or is called with cancelled (the owner frees it then,
 * from inside done if it likes; the queue never looks at it again).
 * workq_free waits for a work phase in progress to end (work is bounded),
 * then calls done(cancelled) for that job and for every queued one, in
 * order, on the caller's thread.
 */
#ifndef EGRESSD_WORKQ_H
#define EGRESSD_WORKQ_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

#include "util/err.h"

/* Jobs queued at once (the one in progress included); then submit
 * refuses. Mutations are small and rare: this is a bound, not a tuning. */
#define WORKQ_MAX 1024

struct event_base;
struct workq;
struct workq_job;

/* Loop thread, at the job's turn. May be NULL. */
typedef void (*workq_start_fn)(struct workq_job *j);
/* Worker thread. May be NULL (done follows at once, still via the loop). */
typedef void (*workq_work_fn)(struct workq_job *j);
/*
 * Loop thread, after work. Return true to run work again (the job keeps
 * its own phase), false when finished. cancelled: the queue is being
 * freed (the loop no longer runs; what it serves still exists); the
 * return value is ignored and the job must let go of everything.
 */
typedef bool (*workq_done_fn)(struct workq_job *j, bool cancelled);

/* Embedded by the job's owner (container_of through offsetof). */
struct workq_job {
	workq_start_fn start;
	workq_work_fn work;
	workq_done_fn done; /* required */
	STAILQ_ENTRY(workq_job) entry; /* the queue's */
};

/* The queue and its worker thread, registered on base (borrowed, must
 * outlive it). NULL with e. */
struct workq *workq_new(struct event_base *base, struct err *e);
/* Queues j (borrowed, see above). -1 with e when WORKQ_MAX are queued. */
int workq_submit(struct workq *q, struct workq_job *j, struct err *e);
/* Jobs queued or in progress. */
size_t workq_pending(const struct workq *q);
/* Joins the worker, cancels what is left (see above); NULL is a no-op. */
void workq_free(struct workq *q);

#endif
