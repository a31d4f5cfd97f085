/*
 * webhook: the deny webhook (OPENSANDBOX_EGRESS_DENY_WEBHOOK).
 *
 * Every denied name is offered to webhook_notify(); it never blocks and
 * never fails the caller. Events are aggregated per name: a name already
 * waiting in the queue only counts up ("count"), and one sent within
 * WEBHOOK_DEDUP_MS is not sent again. The queue is a bounded ring; when
 * it is full the oldest waiting event (never the one being sent) is
 * collapsed into a summary and the new name is queued, so a flood of
 * distinct names cannot keep a later real one out: the flood ends up as
 * one summary event {"hostname":"*","reason":"flood","names":N,
 * "count":M} queued as soon as there is room. Delivery is one at a time:
 *   POST <url>  Content-Type: application/json
 *   {"hostname":"evil.test","sandboxId":"…","reason":"policy","count":1,
 *    "timestamp":"2026-12-02T20:00:00Z","source":"egressd"}
 * over a fresh connection (Connection: close) from a socket carrying
 * egressd's SO_MARK, so the nft filter treats it as egressd's own traffic.
 * 2xx is success; 5xx, 429 and connection failures are retried with
 * exponential backoff (WEBHOOK_RETRY_BASE_MS doubling, WEBHOOK_ATTEMPTS
 * tries); other statuses drop the event. https URLs are verified against
 * the system trust store with the URL's host name.
 *
 * The target must be an IP literal or a name resolvable at start; the
 * daemon requires it to be covered by an operator (infra) allow rule so
 * that the sandbox policy never decides where egressd itself may talk.
 */
#ifndef EGRESSD_WEBHOOK_H
#define EGRESSD_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/err.h"

#define WEBHOOK_QUEUE_MAX 256
#define WEBHOOK_DEDUP_SLOTS 1024
#define WEBHOOK_DEDUP_MS 60000
#define WEBHOOK_ATTEMPTS 5
#define WEBHOOK_RETRY_BASE_MS 1000
#define WEBHOOK_TIMEOUT_MS 5000 /* connect + exchange per attempt */
#define WEBHOOK_NAME_MAX 255
#define WEBHOOK_URL_MAX 2048
#define WEBHOOK_RESPONSE_HEAD_MAX 4096
#define WEBHOOK_SUMMARY_NAME "*" /* hostname of a flood summary event */

struct event_base;
struct log;

/* A parsed http(s) URL. */
struct webhook_url {
	bool tls;
	char host[256]; /* as written (IP literal without brackets, or name) */
	uint16_t port;
	char path[WEBHOOK_URL_MAX]; /* path and query, at least "/" */
};

/* Pure: "http[s]://host[:port][/path]". No userinfo, no fragment. */
int webhook_parse_url(const char *s, struct webhook_url *u, struct err *e);

/*
 * Pure: parses "HTTP/1.x NNN ..." from the start of a response; returns
 * the status (100..599) or -1 when the bytes are not a status line.
 */
int webhook_parse_status(const char *buf, size_t len);

/* Pure queue + dedup + backoff state, time passed in (testable). */
struct webhook_event {
	char name[WEBHOOK_NAME_MAX + 1];
	char reason[32];
	uint64_t hash; /* of name */
	uint64_t count; /* denials this event stands for */
	uint64_t names; /* summary: distinct names collapsed; 0: one name */
	uint64_t created_ms; /* wall clock ms, for the timestamp */
	unsigned attempts;
	uint64_t not_before_ms; /* monotonic ms of the next try */
};

struct webhook_queue {
	struct webhook_event ev[WEBHOOK_QUEUE_MAX];
	size_t head, len;
	bool inflight; /* the head event is being sent */
	struct {
		uint64_t hash, seen_ms;
	} dedup[WEBHOOK_DEDUP_SLOTS];
	struct {
		uint64_t names, events, wall_ms;
	} sum; /* collapsed, not yet queued as a summary event */
	uint64_t enqueued, deduplicated, aggregated, collapsed, delivered,
	    failed;
};

void webhook_queue_init(struct webhook_queue *q);
/*
 * false when the name was aggregated into a waiting event or
 * deduplicated (counted either way); true when queued (which on a full
 * queue collapses the oldest waiting event into the summary).
 */
bool webhook_queue_push(struct webhook_queue *q, const char *name,
    const char *reason, uint64_t now_ms, uint64_t wall_ms);
/* The head event goes out now: it is neither collapsed nor aggregated. */
void webhook_queue_begin(struct webhook_queue *q);
/* The head event when due at now_ms, else NULL (borrowed). */
struct webhook_event *webhook_queue_due(
    struct webhook_queue *q, uint64_t now_ms);
/* Outcome of the head event's attempt: delivered, retry later or drop. */
void webhook_queue_done(
    struct webhook_queue *q, bool ok, bool retry, uint64_t now_ms);
/* Milliseconds until the head event is due (0 = now); -1 when empty. */
int64_t webhook_queue_wait_ms(const struct webhook_queue *q, uint64_t now_ms);

struct webhook;

struct uproxy;

/*
 * addr/addrlen: where to connect (resolved by the caller). mark: SO_MARK
 * for the socket (0 = none, tests). via: the upstream proxy every
 * attempt goes through (HTTP CONNECT to the URL's host and port, then
 * the request, TLS too, inside the tunnel; a failed tunnel is a failed
 * attempt, retried like one, never a direct connection), or NULL. lg and
 * via borrowed. NULL with e set.
 */
struct webhook *webhook_new(struct event_base *base,
    const struct webhook_url *u, const struct sockaddr *addr, socklen_t addrlen,
    uint32_t mark, const char *sandbox_id, const struct uproxy *via,
    struct log *lg, struct err *e);
void webhook_free(struct webhook *w);
/* Never blocks; reason is a fixed string ("policy", "cname", …). */
void webhook_notify(struct webhook *w, const char *name, const char *reason);
const struct webhook_queue *webhook_stats(const struct webhook *w);

#endif
