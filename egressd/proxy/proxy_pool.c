#include "egressd/proxy/proxy_pool.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "egressd/proto/tls_hello.h"
#include "vault/vault.h"

struct pentry {
	struct proxy_pool *pp;
	TAILQ_ENTRY(pentry) entry; /* newest first */
	struct bufferevent *up;
	struct vault *v; /* what went over up, for redaction; NULL: none */
	struct event *timer;
	char name[TLS_HELLO_SNI_MAX + 1];
	struct addr dst;
	uint16_t port;
};

struct proxy_pool {
	struct event_base *base;
	size_t max, n;
	unsigned idle_ms;
	TAILQ_HEAD(pentries, pentry) entries;
};

static bool
key_eq(const struct pentry *x, const char *name, const struct addr *dst,
    uint16_t port)
{
	return x->port == port && x->dst.family == dst->family &&
	    memcmp(x->dst.a, dst->a, addr_bits(dst) / 8) == 0 &&
	    strcmp(x->name, name) == 0;
}

static void
unlink_entry(struct pentry *x)
{
	struct proxy_pool *pp = x->pp;

	TAILQ_REMOVE(&pp->entries, x, entry);
	pp->n--;
}

/* The one way an entry goes without being taken. */
static void
close_entry(struct pentry *x)
{
	unlink_entry(x);
	bufferevent_free(x->up);
	vault_free(x->v);
	event_free(x->timer);
	free(x);
}

/* Idle, any read is the origin closing or talking out of turn. */
static void
idle_read_cb(struct bufferevent *b, void *arg)
{
	(void)b;
	close_entry(arg);
}

static void
idle_event_cb(struct bufferevent *b, short what, void *arg)
{
	(void)b;
	(void)what;
	close_entry(arg);
}

static void
idle_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	close_entry(arg);
}

struct proxy_pool *
proxy_pool_new(struct event_base *base, size_t max, unsigned idle_ms)
{
	struct proxy_pool *pp = calloc(1, sizeof(*pp));

	if (pp == NULL)
		return NULL;
	pp->base = base;
	TAILQ_INIT(&pp->entries);
	pp->max = max != 0 ? max : PROXY_POOL_MAX;
	pp->idle_ms = idle_ms != 0 ? idle_ms : PROXY_POOL_IDLE_MS;
	return pp;
}

size_t
proxy_pool_flush(struct proxy_pool *pp)
{
	size_t n = 0;

	while (pp != NULL && !TAILQ_EMPTY(&pp->entries)) {
		close_entry(TAILQ_FIRST(&pp->entries));
		n++;
	}
	return n;
}

void
proxy_pool_free(struct proxy_pool *pp)
{
	if (pp == NULL)
		return;
	(void)proxy_pool_flush(pp);
	free(pp);
}

void
proxy_pool_put(struct proxy_pool *pp, struct bufferevent *up, struct vault *v,
    const char *name, const struct addr *dst, uint16_t port)
{
	struct pentry *x, *y, *oldest = NULL;
	size_t same = 0;
	struct timeval tv = {
	    pp->idle_ms / 1000, (long)(pp->idle_ms % 1000) * 1000};

	if (strlen(name) > TLS_HELLO_SNI_MAX ||
	    (x = calloc(1, sizeof(*x))) == NULL) {
		bufferevent_free(up);
		vault_free(v);
		return;
	}
	if ((x->timer = evtimer_new(pp->base, idle_timer_cb, x)) == NULL) {
		free(x);
		bufferevent_free(up);
		vault_free(v);
		return;
	}
	TAILQ_FOREACH(y, &pp->entries, entry)
	if (key_eq(y, name, dst, port)) {
		same++;
		oldest = y;
	}
	if (same >= PROXY_POOL_PER_KEY)
		close_entry(oldest);
	else if (pp->n >= pp->max)
		close_entry(TAILQ_LAST(&pp->entries, pentries));
	x->pp = pp;
	x->up = up;
	x->v = v;
	memcpy(x->name, name, strlen(name) + 1);
	x->dst = *dst;
	x->port = port;
	TAILQ_INSERT_HEAD(&pp->entries, x, entry);
	pp->n++;
	bufferevent_setcb(up, idle_read_cb, NULL, idle_event_cb, x);
	bufferevent_setwatermark(up, EV_READ, 0, 0);
	bufferevent_disable(up, EV_WRITE);
	bufferevent_enable(up, EV_READ);
	(void)evtimer_add(x->timer, &tv);
}

struct bufferevent *
proxy_pool_take(struct proxy_pool *pp, const char *name, const struct addr *dst,
    uint16_t port, struct vault **v)
{
	struct pentry *x;
	struct bufferevent *up;

	*v = NULL;
	if (pp == NULL)
		return NULL;
	TAILQ_FOREACH(x, &pp->entries, entry)
	if (key_eq(x, name, dst, port))
		break;
	if (x == NULL)
		return NULL;
	up = x->up;
	*v = x->v;
	unlink_entry(x);
	event_free(x->timer);
	free(x);
	bufferevent_setcb(up, NULL, NULL, NULL, NULL);
	return up;
}

size_t
proxy_pool_count(const struct proxy_pool *pp)
{
	return pp != NULL ? pp->n : 0;
}
