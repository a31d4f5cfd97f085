#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "egressd/base/log.h"
#include "egressd/base/tls_ctx.h"
#include "egressd/base/sock.h"
#include "egressd/base/uproxy.h"
#include "egressd/daemon/webhook.h"
#include "util/addr.h"
#include "util/hash.h"
#include "util/now.h"

#define WEBHOOK_MAGIC 0x5745424bu /* "WEBK" */

int
webhook_parse_url(const char *s, struct webhook_url *u, struct err *e)
{
	const char *p, *hend, *pstart;
	size_t hl;
	unsigned long port;

	memset(u, 0, sizeof(*u));
	if (strlen(s) >= WEBHOOK_URL_MAX) {
		err_set(e, "webhook URL longer than %d bytes", WEBHOOK_URL_MAX);
		return -1;
	}
	if (strncasecmp(s, "http://", 7) == 0) {
		p = s + 7;
		u->port = 80;
	} else if (strncasecmp(s, "https://", 8) == 0) {
		p = s + 8;
		u->tls = true;
		u->port = 443;
	} else {
		err_set(e, "webhook URL must start with http:// or https://");
		return -1;
	}
	pstart = p + strcspn(p, "/?#");
	if (memchr(p, '@', (size_t)(pstart - p)) != NULL) {
		err_set(e, "webhook URL must not carry user information");
		return -1;
	}
	if (*p == '[') {
		hend = memchr(p, ']', (size_t)(pstart - p));
		if (hend == NULL) {
			err_set(e, "webhook URL: missing ']'");
			return -1;
		}
		hl = (size_t)(hend - p - 1);
		if (hl == 0 || hl >= sizeof(u->host)) {
			err_set(e, "webhook URL: bad host");
			return -1;
		}
		memcpy(u->host, p + 1, hl);
		p = hend + 1;
	} else {
		hend = p + strcspn(p, ":/?#");
		hl = (size_t)(hend - p);
		if (hl == 0 || hl >= sizeof(u->host)) {
			err_set(e, "webhook URL: bad host");
			return -1;
		}
		memcpy(u->host, p, hl);
		p = hend;
	}
	if (*p == ':') {
		char *end;
		port = strtoul(p + 1, &end, 10);
		if (end == p + 1 || end != pstart || port == 0 ||
		    port > 65535) {
			err_set(e, "webhook URL: bad port");
			return -1;
		}
		u->port = (uint16_t)port;
	} else if (p != pstart) {
		err_set(e, "webhook URL: junk after host");
		return -1;
	}
	if (strchr(pstart, '#') != NULL) {
		err_set(e, "webhook URL must not carry a fragment");
		return -1;
	}
	for (const char *c = s; *c != '\0'; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
			err_set(e, "webhook URL: blank or control character");
			return -1;
		}
	(void)snprintf(u->path, sizeof(u->path), "%s%s",
	    *pstart == '/' ? "" : "/", pstart);
	return 0;
}

int
webhook_parse_status(const char *buf, size_t len)
{
	int st = 0, i;

	if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 ||
	    (buf[7] != '0' && buf[7] != '1') || buf[8] != ' ')
		return -1;
	for (i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		st = st * 10 + (buf[i] - '0');
	}
	if (len > 12 && buf[12] != ' ' && buf[12] != '\r')
		return -1;
	return (st >= 100 && st <= 599) ? st : -1;
}

static uint64_t
webhook_hash(const char *s)
{
	uint64_t h = hash_fnv1a(s, strlen(s));

	return h ? h : 1; /* 0 marks an empty dedup slot */
}

void
webhook_queue_init(struct webhook_queue *q)
{
	memset(q, 0, sizeof(*q));
}

static struct webhook_event *
webhook_queue_append(struct webhook_queue *q, uint64_t now_ms, uint64_t wall_ms)
{
	struct webhook_event *ev;

	ev = &q->ev[(q->head + q->len) % WEBHOOK_QUEUE_MAX];
	memset(ev, 0, sizeof(*ev));
	ev->created_ms = wall_ms;
	ev->not_before_ms = now_ms;
	q->len++;
	return ev;
}

/* Queues the summary of what was collapsed, when there is room. */
static void
webhook_queue_summarise(struct webhook_queue *q, uint64_t now_ms)
{
	struct webhook_event *ev;

	if (q->sum.names == 0 || q->len == WEBHOOK_QUEUE_MAX)
		return;
	ev = webhook_queue_append(q, now_ms, q->sum.wall_ms);
	(void)snprintf(ev->name, sizeof(ev->name), "%s", WEBHOOK_SUMMARY_NAME);
	(void)snprintf(ev->reason, sizeof(ev->reason), "flood");
	ev->names = q->sum.names;
	ev->count = q->sum.events;
	memset(&q->sum, 0, sizeof(q->sum));
	q->enqueued++;
}

/*
 * Full queue: the oldest event not being sent goes into the summary, and
 * its name may be reported again (its dedup mark is lifted).
 */
static void
webhook_queue_collapse(struct webhook_queue *q, uint64_t wall_ms)
{
	size_t k = q->inflight ? 1 : 0, at = (q->head + k) % WEBHOOK_QUEUE_MAX;
	struct webhook_event *ev = &q->ev[at];
	size_t slot = ev->hash % WEBHOOK_DEDUP_SLOTS;

	if (q->sum.names == 0)
		q->sum.wall_ms = wall_ms;
	q->sum.names += ev->names != 0 ? ev->names : 1;
	q->sum.events += ev->count;
	if (ev->names == 0 && q->dedup[slot].hash == ev->hash)
		q->dedup[slot].hash = 0;
	if (k == 1) /* the event in flight moves up into the freed slot */
		q->ev[at] = q->ev[q->head];
	q->head = (q->head + 1) % WEBHOOK_QUEUE_MAX;
	q->len--;
	q->collapsed++;
}

bool
webhook_queue_push(struct webhook_queue *q, const char *name,
    const char *reason, uint64_t now_ms, uint64_t wall_ms)
{
	uint64_t h = webhook_hash(name);
	size_t slot = h % WEBHOOK_DEDUP_SLOTS, k;
	struct webhook_event *ev;

	/* Waiting already (not being sent): one more denial of it. */
	for (k = q->inflight ? 1 : 0; k < q->len; k++) {
		ev = &q->ev[(q->head + k) % WEBHOOK_QUEUE_MAX];
		if (ev->names == 0 && ev->hash == h &&
		    strcmp(ev->name, name) == 0) {
			ev->count++;
			q->aggregated++;
			return false;
		}
	}
	if (q->dedup[slot].hash == h &&
	    now_ms - q->dedup[slot].seen_ms < WEBHOOK_DEDUP_MS) {
		q->deduplicated++;
		return false;
	}
	if (q->len == WEBHOOK_QUEUE_MAX)
		webhook_queue_collapse(q, wall_ms);
	q->dedup[slot].hash = h;
	q->dedup[slot].seen_ms = now_ms;
	ev = webhook_queue_append(q, now_ms, wall_ms);
	(void)snprintf(ev->name, sizeof(ev->name), "%s", name);
	(void)snprintf(ev->reason, sizeof(ev->reason), "%s", reason);
	ev->hash = h;
	ev->count = 1;
	q->enqueued++;
	webhook_queue_summarise(q, now_ms);
	return true;
}

void
webhook_queue_begin(struct webhook_queue *q)
{
	if (q->len > 0)
		q->inflight = true;
}

struct webhook_event *
webhook_queue_due(struct webhook_queue *q, uint64_t now_ms)
{
	struct webhook_event *ev;

	if (q->len == 0)
		return NULL;
	ev = &q->ev[q->head];
	return ev->not_before_ms <= now_ms ? ev : NULL;
}

int64_t
webhook_queue_wait_ms(const struct webhook_queue *q, uint64_t now_ms)
{
	const struct webhook_event *ev;

	if (q->len == 0)
		return -1;
	ev = &q->ev[q->head];
	return ev->not_before_ms <= now_ms
	    ? 0
	    : (int64_t)(ev->not_before_ms - now_ms);
}

static void
webhook_queue_pop(struct webhook_queue *q)
{
	q->head = (q->head + 1) % WEBHOOK_QUEUE_MAX;
	q->len--;
}

void
webhook_queue_done(
    struct webhook_queue *q, bool ok, bool retry, uint64_t now_ms)
{
	struct webhook_event *ev;

	q->inflight = false;
	if (q->len == 0)
		return;
	ev = &q->ev[q->head];
	ev->attempts++;
	if (ok) {
		q->delivered++;
		webhook_queue_pop(q);
	} else if (!retry || ev->attempts >= WEBHOOK_ATTEMPTS) {
		q->failed++;
		webhook_queue_pop(q);
	} else
		ev->not_before_ms = now_ms +
		    ((uint64_t)WEBHOOK_RETRY_BASE_MS << (ev->attempts - 1));
	webhook_queue_summarise(q, now_ms);
}

/* ---- runtime ------------------------------------------------------- */

enum webhook_state {
	WEBHOOK_IDLE,
	WEBHOOK_SENDING, /* connecting, writing or reading the status line */
};

struct webhook {
	uint32_t magic;
	struct event_base *base;
	struct webhook_url url;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	uint32_t mark;
	char *sandbox_id;
	struct log *log;
	SSL_CTX *ssl_ctx;
	struct webhook_queue q;
	enum webhook_state state;
	struct bufferevent *bev;
	struct event *timer;
	const struct uproxy *via; /* the upstream proxy, or NULL */
	struct uproxy_dial *dial; /* its CONNECT under way */
};

static void webhook_kick(struct webhook *w);

/* The single end of an attempt: frees the connection, schedules more. */
static void
webhook_finish(
    struct webhook *w, bool ok, bool retry, const char *reason, int status)
{
	struct webhook_event *ev = &w->q.ev[w->q.head];

	if (w->bev != NULL) {
		bufferevent_free(w->bev);
		w->bev = NULL;
	}
	uproxy_dial_cancel(w->dial);
	w->dial = NULL;
	if (!ok)
		log_warn(w->log, "webhook.failed", LOG_S("name", ev->name),
		    LOG_S("reason", reason), LOG_I("status", status),
		    LOG_U("attempt", ev->attempts + 1),
		    LOG_B(
		        "retry", retry && ev->attempts + 1 < WEBHOOK_ATTEMPTS));
	else
		log_debug(w->log, "webhook.sent", LOG_S("name", ev->name),
		    LOG_I("status", status));
	webhook_queue_done(&w->q, ok, retry, now_mono_ms());
	w->state = WEBHOOK_IDLE;
	webhook_kick(w);
}

static void
webhook_read_cb(struct bufferevent *bev, void *arg)
{
	struct webhook *w = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr eol;
	char head[64];
	size_t n;
	int st;

	if (w->magic != WEBHOOK_MAGIC)
		abort();
	eol = evbuffer_search(in, "\r\n", 2, NULL);
	if (eol.pos < 0) {
		if (evbuffer_get_length(in) > WEBHOOK_RESPONSE_HEAD_MAX)
			webhook_finish(w, false, true, "bad_response", 0);
		return;
	}
	n = (size_t)eol.pos < sizeof(head) ? (size_t)eol.pos : sizeof(head);
	evbuffer_copyout(in, head, n);
	st = webhook_parse_status(head, n);
	if (st < 0)
		webhook_finish(w, false, true, "bad_response", 0);
	else if (st >= 200 && st < 300)
		webhook_finish(w, true, false, "ok", st);
	else
		webhook_finish(w, false, st >= 500 || st == 429, "status", st);
}

static void
webhook_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct webhook *w = arg;

	(void)bev;
	if (w->magic != WEBHOOK_MAGIC)
		abort();
	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & BEV_EVENT_TIMEOUT)
		webhook_finish(w, false, true, "timeout", 0);
	else
		webhook_finish(w, false, true, "connect_or_io", 0);
}

static int
webhook_request(
    struct webhook *w, const struct webhook_event *ev, struct evbuffer *out)
{
	char ts[32], hostport[300];
	time_t secs = (time_t)(ev->created_ms / 1000);
	struct tm tm;
	json_t *j;
	char *body;
	bool v6 = strchr(w->url.host, ':') != NULL;

	gmtime_r(&secs, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	j = json_pack("{s:s, s:s, s:s, s:s, s:I}", "hostname", ev->name,
	    "reason", ev->reason, "timestamp", ts, "source", "egressd", "count",
	    (json_int_t)ev->count);
	if (j == NULL)
		return -1;
	if (ev->names != 0)
		json_object_set_new(
		    j, "names", json_integer((json_int_t)ev->names));
	if (w->sandbox_id != NULL)
		json_object_set_new(j, "sandboxId", json_string(w->sandbox_id));
	body = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (body == NULL)
		return -1;
	(void)snprintf(hostport, sizeof(hostport), v6 ? "[%s]:%u" : "%s:%u",
	    w->url.host, w->url.port);
	evbuffer_add_printf(out,
	    "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: egressd/%s\r\n"
	    "Content-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n%s",
	    w->url.path, hostport, EGRESSD_VERSION, strlen(body), body);
	free(body);
	return 0;
}

/* The attempt's connection on fd (connecting, or with connected, a
 * tunnel through the upstream proxy), the request queued. */
static int
webhook_open(
    struct webhook *w, struct webhook_event *ev, int fd, bool connected)
{
	struct timeval tv = {
	    WEBHOOK_TIMEOUT_MS / 1000, (WEBHOOK_TIMEOUT_MS % 1000) * 1000};
	SSL *ssl = NULL;

	if (w->ssl_ctx != NULL) {
		if ((ssl = SSL_new(w->ssl_ctx)) == NULL)
			goto fail_fd;
		struct addr lit;
		if (addr_parse_ip(w->url.host, strlen(w->url.host), &lit)) {
			if (!X509_VERIFY_PARAM_set1_ip_asc(
			        SSL_get0_param(ssl), w->url.host))
				goto fail_ssl;
		} else if (!SSL_set_tlsext_host_name(ssl, w->url.host) ||
		    !SSL_set1_host(ssl, w->url.host))
			goto fail_ssl;
		w->bev = bufferevent_openssl_socket_new(w->base, fd, ssl,
		    BUFFEREVENT_SSL_CONNECTING,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	} else
		w->bev = bufferevent_socket_new(w->base, fd,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (w->bev == NULL) {
		if (ssl != NULL)
			goto fail_ssl;
		goto fail_fd;
	}
	bufferevent_setcb(w->bev, webhook_read_cb, NULL, webhook_event_cb, w);
	bufferevent_set_timeouts(w->bev, &tv, &tv);
	if (webhook_request(w, ev, bufferevent_get_output(w->bev)) == -1 ||
	    bufferevent_enable(w->bev, EV_READ | EV_WRITE) == -1 ||
	    (!connected &&
	        bufferevent_socket_connect(w->bev, (struct sockaddr *)&w->addr,
	            (int)w->addrlen) == -1)) {
		bufferevent_free(w->bev);
		w->bev = NULL;
		return -1;
	}
	return 0;
fail_ssl:
	SSL_free(ssl);
fail_fd:
	close(fd);
	return -1;
}

/* The upstream proxy's tunnel for the head event: the request goes in,
 * or the attempt failed (no direct connection instead). */
static void
webhook_tunnel_cb(void *arg, int fd, enum uproxy_fail f, int status)
{
	struct webhook *w = arg;

	if (w->magic != WEBHOOK_MAGIC)
		abort();
	w->dial = NULL; /* freed when this returns */
	if (fd == -1) {
		log_warn(w->log, "webhook.upstream_proxy_failed",
		    LOG_S("reason", uproxy_fail_name(f)),
		    LOG_I("status", status));
		webhook_finish(w, false, true, "upstream_proxy", status);
		return;
	}
	if (webhook_open(w, &w->q.ev[w->q.head], fd, true) == -1)
		webhook_finish(w, false, true, "socket", 0);
}

static int
webhook_start(struct webhook *w, struct webhook_event *ev)
{
	struct err e; /* the caller counts the failure and backs off */
	int fd;

	if (w->via != NULL) {
		w->dial = uproxy_dial(w->base, w->via, w->mark, w->url.host,
		    w->url.port, WEBHOOK_TIMEOUT_MS, webhook_tunnel_cb, w, &e);
		if (w->dial == NULL)
			return -1;
		w->state = WEBHOOK_SENDING;
		return 0;
	}
	/* egressd's own traffic: exempt from the sandbox's filter. */
	fd = sock_open_marked(
	    w->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK, w->mark, &e);
	if (fd == -1 || webhook_open(w, ev, fd, false) == -1)
		return -1;
	w->state = WEBHOOK_SENDING;
	return 0;
}

static void
webhook_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct webhook *w = arg;

	(void)fd;
	(void)what;
	if (w->magic != WEBHOOK_MAGIC)
		abort();
	webhook_kick(w);
}

/* Starts the next due attempt, or arms the timer for it. */
static void
webhook_kick(struct webhook *w)
{
	uint64_t now = now_mono_ms();
	struct webhook_event *ev;
	int64_t wait;

	if (w->state != WEBHOOK_IDLE)
		return;
	while ((ev = webhook_queue_due(&w->q, now)) != NULL) {
		if (webhook_start(w, ev) == 0) {
			webhook_queue_begin(&w->q);
			return;
		}
		log_warn(w->log, "webhook.failed", LOG_S("name", ev->name),
		    LOG_S("reason", "socket"));
		webhook_queue_done(&w->q, false, true, now);
	}
	if ((wait = webhook_queue_wait_ms(&w->q, now)) > 0) {
		struct timeval tv = {wait / 1000, (wait % 1000) * 1000};
		evtimer_add(w->timer, &tv);
	}
}

struct webhook *
webhook_new(struct event_base *base, const struct webhook_url *u,
    const struct sockaddr *addr, socklen_t addrlen, uint32_t mark,
    const char *sandbox_id, const struct uproxy *via, struct log *lg,
    struct err *e)
{
	struct webhook *w;

	if (addrlen > sizeof(w->addr)) {
		err_set(e, "webhook: bad address");
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL) {
		err_set(e, "webhook: out of memory");
		return NULL;
	}
	w->magic = WEBHOOK_MAGIC;
	w->base = base;
	w->url = *u;
	memcpy(&w->addr, addr, addrlen);
	w->addrlen = addrlen;
	w->mark = mark;
	w->via = via;
	w->log = lg;
	webhook_queue_init(&w->q);
	if (sandbox_id != NULL && (w->sandbox_id = strdup(sandbox_id)) == NULL)
		goto oom;
	if ((w->timer = evtimer_new(base, webhook_timer_cb, w)) == NULL)
		goto oom;
	if (u->tls) {
		if ((w->ssl_ctx = tls_ctx_new(false, e)) == NULL ||
		    tls_ctx_trust(w->ssl_ctx, NULL, NULL, e) == -1) {
			err_prefix(e, "webhook: ");
			webhook_free(w);
			return NULL;
		}
	}
	return w;
oom:
	err_set(e, "webhook: out of memory");
	webhook_free(w);
	return NULL;
}

void
webhook_free(struct webhook *w)
{
	if (w == NULL)
		return;
	if (w->bev != NULL)
		bufferevent_free(w->bev);
	uproxy_dial_cancel(w->dial);
	if (w->timer != NULL)
		event_free(w->timer);
	SSL_CTX_free(w->ssl_ctx);
	free(w->sandbox_id);
	w->magic = 0;
	free(w);
}

void
webhook_notify(struct webhook *w, const char *name, const char *reason)
{
	if (w == NULL || name == NULL)
		return;
	if (webhook_queue_push(&w->q, name, reason ? reason : "policy",
	        now_mono_ms(), now_wall_ms()))
		webhook_kick(w);
}

const struct webhook_queue *
webhook_stats(const struct webhook *w)
{
	return &w->q;
}
