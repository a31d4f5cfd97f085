#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "egressd/base/workq.h"

#define WORKQ_MAGIC 0x574b5121u /* "WKQ!" */

struct workq {
	uint32_t magic;
	struct event_base *base;
	int efd; /* eventfd: the worker's "work phase ended" to the loop */
	struct event *ev;
	pthread_t thread;
	bool thread_ok;

	/* The loop's alone. */
	/* The job in progress is out of the list: its done may free it (and
	 * submit more) before the queue looks at the list again. */
	struct workq_job *cur;
	STAILQ_HEAD(, workq_job) wait; /* waiting their turn */
	size_t n; /* cur and the waiting */

	/* Shared with the worker, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct workq_job *todo; /* handed to the worker, not yet taken */
	struct workq_job *busy; /* in the worker's work() now */
	bool finished; /* head's work phase ended, done not yet called */
	bool stop;
};

static void *
workq_thread(void *arg)
{
	struct workq *q = arg;
	struct workq_job *j;
	uint64_t one = 1;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (q->todo == NULL && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		if (q->stop)
			break;
		j = q->busy = q->todo;
		q->todo = NULL;
		pthread_mutex_unlock(&q->mu);
		j->work(j);
		pthread_mutex_lock(&q->mu);
		q->busy = NULL;
		q->finished = true;
		/* An eventfd write of 1 cannot fail short of a counter
		 * overflow; the loop reads it all at once. */
		(void)write(q->efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Hands cur's work phase to the worker, or straight back to the loop
 * when it has none (through the event: no done inside submit). */
static void
workq_dispatch(struct workq *q)
{
	struct workq_job *j = q->cur;

	pthread_mutex_lock(&q->mu);
	if (j->work != NULL) {
		q->todo = j;
		pthread_cond_signal(&q->cv);
	} else {
		q->finished = true;
		event_active(q->ev, EV_READ, 1);
	}
	pthread_mutex_unlock(&q->mu);
}

/* Starts the head job when nothing is in progress. */
static void
workq_next(struct workq *q)
{
	struct workq_job *j = STAILQ_FIRST(&q->wait);

	if (j == NULL || q->cur != NULL)
		return;
	STAILQ_REMOVE_HEAD(&q->wait, entry);
	q->cur = j;
	if (j->start != NULL)
		j->start(j);
	workq_dispatch(q);
}

static void
workq_event_cb(evutil_socket_t fd, short what, void *arg)
{
	struct workq *q = arg;
	struct workq_job *j;
	uint64_t v;
	bool fin;

	(void)what;
	if (q == NULL || q->magic != WORKQ_MAGIC)
		abort();
	(void)read(fd, &v, sizeof(v)); /* EAGAIN after an event_active */
	pthread_mutex_lock(&q->mu);
	fin = q->finished;
	q->finished = false;
	pthread_mutex_unlock(&q->mu);
	if (!fin) {
		workq_next(q);
		return;
	}
	j = q->cur;
	if (j->done(j, false)) {
		workq_dispatch(q);
		return;
	}
	/* j may be gone now. */
	q->cur = NULL;
	q->n--;
	workq_next(q);
}

struct workq *
workq_new(struct event_base *base, struct err *e)
{
	struct workq *q = calloc(1, sizeof(*q));
	int rc;

	if (q == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	q->magic = WORKQ_MAGIC;
	q->base = base;
	STAILQ_INIT(&q->wait);
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	if ((q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		err_set(e, "eventfd: %s", strerror(errno));
		goto out_free;
	}
	if ((q->ev = event_new(base, q->efd, EV_READ | EV_PERSIST,
	         workq_event_cb, q)) == NULL ||
	    event_add(q->ev, NULL) == -1) {
		err_set(e, "cannot register the worker's event");
		goto out_free;
	}
	if ((rc = pthread_create(&q->thread, NULL, workq_thread, q)) != 0) {
		err_set(e, "cannot start the worker thread: %s", strerror(rc));
		goto out_free;
	}
	q->thread_ok = true;
	return q;
out_free:
	workq_free(q);
	return NULL;
}

int
workq_submit(struct workq *q, struct workq_job *j, struct err *e)
{
	if (q->n >= WORKQ_MAX) {
		err_set(e, "%u changes are waiting already", WORKQ_MAX);
		return -1;
	}
	STAILQ_INSERT_TAIL(&q->wait, j, entry);
	q->n++;
	/* Started from the loop, never inside the caller's callback: a
	 * start that runs at once would surprise a caller mid-update. */
	if (q->cur == NULL)
		event_active(q->ev, EV_READ, 1);
	return 0;
}

size_t
workq_pending(const struct workq *q)
{
	return q->n;
}

void
workq_free(struct workq *q)
{
	struct workq_job *j;

	if (q == NULL)
		return;
	if (q->thread_ok) {
		pthread_mutex_lock(&q->mu);
		q->stop = true;
		pthread_cond_signal(&q->cv);
		pthread_mutex_unlock(&q->mu);
		/* A work phase in progress ends first: work is bounded. */
		(void)pthread_join(q->thread, NULL);
	}
	if (q->cur != NULL)
		(void)q->cur->done(q->cur, true);
	while ((j = STAILQ_FIRST(&q->wait)) != NULL) {
		STAILQ_REMOVE_HEAD(&q->wait, entry);
		(void)j->done(j, true);
	}
	if (q->ev != NULL)
		event_free(q->ev);
	if (q->efd != -1)
		close(q->efd);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	q->magic = 0;
	free(q);
}
