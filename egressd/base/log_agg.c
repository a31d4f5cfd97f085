/*
 * log_agg: a bounded per-name table of denial counters with a token
 * bucket; see log_agg.h for the rules.
 */
#include "egressd/base/log_agg.h"

#include <stdio.h>
#include <string.h>

#include "util/hash.h"

#define LOG_AGG_NONE ((int16_t)-1)

/*
 * snprintf(dst, cap, "%s", src) without the formatter: every denied name
 * passes here four times, and snprintf was a quarter of a denial's
 * instructions. Truncates the same way; NULL is "".
 */
static void
rec_copy(char *dst, size_t cap, const char *src)
{
	size_t n = src != NULL ? strnlen(src, cap - 1) : 0;

	memcpy(dst, src != NULL ? src : "", n);
	dst[n] = '\0';
}

void
log_agg_rec_set(struct log_agg_rec *r, const char *name, unsigned qtype,
    const char *reason, const char *denied, const char *rule)
{
	rec_copy(r->name, sizeof(r->name), name);
	rec_copy(r->reason, sizeof(r->reason), reason);
	rec_copy(r->denied, sizeof(r->denied), denied);
	rec_copy(r->rule, sizeof(r->rule), rule);
	r->qtype = qtype;
}

void
log_agg_init(struct log_agg *a, uint32_t rate_per_sec, uint32_t burst,
    uint64_t window_ms)
{
	size_t i;

	memset(a, 0, sizeof(*a));
	tbucket_init(&a->tb, rate_per_sec, burst);
	a->window_ms = window_ms;
	for (i = 0; i < LOG_AGG_BUCKETS; i++)
		a->bucket[i] = LOG_AGG_NONE;
	a->oldest = a->newest = LOG_AGG_NONE;
	for (i = 0; i < LOG_AGG_SLOTS; i++)
		a->e[i].hnext =
		    i + 1 < LOG_AGG_SLOTS ? (int16_t)(i + 1) : LOG_AGG_NONE;
	a->free_head = 0;
}

static void
log_agg_refill(struct log_agg *a, uint64_t now)
{
	tbucket_refill(&a->tb, now);
}

static bool
log_agg_take(struct log_agg *a)
{
	if (!tbucket_take(&a->tb))
		return false;
	a->lines++;
	return true;
}

static size_t
log_agg_bucket_of(uint64_t h)
{
	return (size_t)(h & (LOG_AGG_BUCKETS - 1));
}

static int16_t
log_agg_find(const struct log_agg *a, uint64_t h, const char *name)
{
	int16_t i;

	for (i = a->bucket[log_agg_bucket_of(h)]; i != LOG_AGG_NONE;
	     i = a->e[i].hnext)
		if (a->e[i].hash == h && strcmp(a->e[i].rec.name, name) == 0)
			return i;
	return LOG_AGG_NONE;
}

static void
log_agg_list_unlink(struct log_agg *a, int16_t i)
{
	struct log_agg_entry *e = &a->e[i];

	if (e->older != LOG_AGG_NONE)
		a->e[e->older].newer = e->newer;
	else
		a->oldest = e->newer;
	if (e->newer != LOG_AGG_NONE)
		a->e[e->newer].older = e->older;
	else
		a->newest = e->older;
	e->older = e->newer = LOG_AGG_NONE;
}

static void
log_agg_list_push_newest(struct log_agg *a, int16_t i)
{
	struct log_agg_entry *e = &a->e[i];

	e->older = a->newest;
	e->newer = LOG_AGG_NONE;
	if (a->newest != LOG_AGG_NONE)
		a->e[a->newest].newer = i;
	else
		a->oldest = i;
	a->newest = i;
}

/* Evicts the least recently seen name; what it held goes to the summary. */
static int16_t
log_agg_evict(struct log_agg *a)
{
	int16_t i = a->oldest, *pp;
	struct log_agg_entry *e = &a->e[i];

	log_agg_list_unlink(a, i);
	for (pp = &a->bucket[log_agg_bucket_of(e->hash)]; *pp != i;
	     pp = &a->e[*pp].hnext)
		;
	*pp = e->hnext;
	if (!e->written) {
		a->sum.names++;
		a->pending--;
	}
	a->sum.events += e->count;
	e->used = false;
	return i;
}

static int16_t
log_agg_alloc(struct log_agg *a, uint64_t h)
{
	int16_t i;
	size_t b = log_agg_bucket_of(h);

	if (a->free_head != LOG_AGG_NONE) {
		i = a->free_head;
		a->free_head = a->e[i].hnext;
	} else
		i = log_agg_evict(a);
	memset(&a->e[i], 0, sizeof(a->e[i]));
	a->e[i].used = true;
	a->e[i].hash = h;
	a->e[i].hnext = a->bucket[b];
	a->bucket[b] = i;
	log_agg_list_push_newest(a, i);
	return i;
}

bool
log_agg_event(struct log_agg *a, const struct log_agg_rec *r, uint64_t now_ms,
    uint64_t *count)
{
	uint64_t h = hash_fnv1a(r->name, strlen(r->name));
	int16_t i = log_agg_find(a, h, r->name);
	struct log_agg_entry *e;

	log_agg_refill(a, now_ms);
	if (i != LOG_AGG_NONE) {
		e = &a->e[i];
		log_agg_list_unlink(a, i);
		log_agg_list_push_newest(a, i);
		e->rec = *r;
		if (!e->written || now_ms - e->written_ms < a->window_ms) {
			/* Pending, or a repeat within the window: counted. */
			e->count++;
			a->held++;
			return false;
		}
		/* Window over: like a new name, with the repeats counted. */
		if (a->pending == 0 && log_agg_take(a)) {
			*count = e->count + 1;
			e->count = 0;
			e->written_ms = now_ms;
			return true;
		}
		e->written = false;
		e->count++;
		a->pending++;
		a->held++;
		return false;
	}
	i = log_agg_alloc(a, h);
	e = &a->e[i];
	e->rec = *r;
	/* Nothing waiting: no new name may jump a queue of held ones. */
	if (a->pending == 0 && log_agg_take(a)) {
		e->written = true;
		e->written_ms = now_ms;
		*count = 1;
		return true;
	}
	e->count = 1;
	a->pending++;
	a->held++;
	return false;
}

void
log_agg_flush(struct log_agg *a, uint64_t now_ms, log_agg_emit_fn emit,
    void *arg, struct log_agg_summary *sum)
{
	int16_t i;

	log_agg_refill(a, now_ms);
	/* Pending names, newest first: what came after a flood goes first. */
	for (i = a->newest; i != LOG_AGG_NONE && a->pending > 0;
	     i = a->e[i].older) {
		struct log_agg_entry *e = &a->e[i];

		if (e->written)
			continue;
		if (!log_agg_take(a))
			break;
		emit(arg, &e->rec, e->count);
		e->written = true;
		e->written_ms = now_ms;
		e->count = 0;
		a->pending--;
	}
	/* Repeats whose window is over: one line with their count. */
	for (i = a->newest; i != LOG_AGG_NONE; i = a->e[i].older) {
		struct log_agg_entry *e = &a->e[i];

		if (!e->written || e->count == 0 ||
		    now_ms - e->written_ms < a->window_ms)
			continue;
		if (!log_agg_take(a))
			break;
		emit(arg, &e->rec, e->count);
		e->written_ms = now_ms;
		e->count = 0;
	}
	*sum = a->sum;
	memset(&a->sum, 0, sizeof(a->sum));
}
