/*
 * api_fixture: what the API server's tests share (api_fixture.h says what
 * each piece is). Linked into each test_api_<seam> executable; none of it
 * is a test.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "api_fixture.h"
#include "egressd/base/defaults.h"
#include "util/now.h"

#define RESP_MAX (4u << 20)
#define CLIENT_DEADLINE_MS 5000

/* ---- fake daemon ---- */

static struct policy *
fx_policy_get(void *arg)
{
	struct fx *f = arg;

	return f->cur;
}

static int
fx_commit(void *arg, struct policy *next, struct err *e)
{
	struct fx *f = arg;

	if (f->fail_commit) {
		err_set(e, "failed to apply nftables policy: boom");
		return -1;
	}
	f->commits++;
	policy_unref(f->cur);
	f->cur = policy_ref(next);
	f->stats.policy_revision = next->revision;
	return 0;
}

int
fx_mutate(void *arg, struct api_mutation *m, struct err *e)
{
	struct fx *f = arg;

	if (f->queue_full || f->nheld == sizeof(f->held) / sizeof(f->held[0])) {
		err_set(e, "1024 changes are waiting already");
		return -1;
	}
	f->held[f->nheld++] = m;
	return 0;
}

/* What the daemon's queue does at the mutation's turn, here and now. */
void
fx_complete(struct fx *f, size_t i)
{
	struct api_mutation *m = f->held[i];
	struct policy *cur = policy_ref(f->cur);
	struct policy *next = m->decide(m, cur);
	struct err e;

	err_clear(&e);
	if (next == NULL)
		m->done(m, 1, NULL, NULL);
	else
		m->done(m, fx_commit(f, next, &e) == 0 ? 0 : -1, next, &e);
	policy_unref(next);
	policy_unref(cur);
	f->held[i] = NULL;
}

static int
fx_vault_check(void *arg, const struct policy *next, struct err *e)
{
	struct fx *f = arg;

	(void)next;
	if (!f->fail_vault)
		return 0;
	err_set(e, "binding \"gh\" host api.github.com is not allowed");
	return -1;
}

static bool
fx_ready(void *arg, char *why, size_t len)
{
	struct fx *f = arg;

	if (f->not_ready)
		snprintf(why, len, "nft not ready");
	return !f->not_ready;
}

static bool
fx_healthy(void *arg, char *comp, size_t len)
{
	struct fx *f = arg;

	if (f->not_healthy)
		snprintf(comp, len, "credential proxy");
	return !f->not_healthy;
}

static void
fx_status(void *arg, struct api_status *st)
{
	(void)arg;
	st->configured_mode = "dns+nft";
	st->enforced[st->nenforced++] = "dns-filter";
	st->enforced[st->nenforced++] = "nft-default-deny";
	st->not_enforced[st->nnot_enforced].key = "transparentProxy";
	st->not_enforced[st->nnot_enforced++].why = "off (--proxy)";
	st->policy_file = "/etc/egressd/policy.yaml";
}

static const char *
fx_enf(void *arg)
{
	(void)arg;
	return "dns+nft";
}

/* ---- fixture ---- */

struct fx *
fx_alloc(void)
{
	struct fx *f = calloc(1, sizeof(*f));
	int fd;

	assert_non_null(f);
	assert_non_null(f->base = event_base_new());
	snprintf(f->logpath, sizeof(f->logpath), "/tmp/egressd-api-log-XXXXXX");
	fd = mkstemp(f->logpath);
	assert_true(fd >= 0);
	log_init(&f->log, fd, LOG_DEBUG);
	f->cur = policy_new_deny_all();
	assert_non_null(f->cur);
	f->hooks = (struct api_hooks){
	    .policy_get = fx_policy_get,
	    .policy_commit = fx_commit,
	    .policy_apicreds_check = fx_vault_check,
	    .healthy = fx_healthy,
	    .ready = fx_ready,
	    .status = fx_status,
	    .enforcement_mode = fx_enf,
	    .arg = f,
	};
	f->opts = (struct api_opts){
	    .listen_tcp = "127.0.0.1:0",
	    .token = TOKEN,
	    .max_rules = EGRESSD_DEFAULT_MAX_RULES,
	    /* A fifth of the daemon's deadlines or less: the behaviour is
	     * the same, the suite seconds shorter. */
	    .timing = {.head_ms = 1000,
	        .body_ms = 1500,
	        .linger_ms = 200,
	        .backoff_ms = 250,
	        .idle_s = 2},
	    .start_time_s = 1700000000,
	    .log = &f->log,
	    .stats = &f->stats,
	};
	return f;
}

void
fx_start(struct fx *f)
{
	struct err e;

	err_clear(&e);
	f->api = api_new(f->base, &f->opts, &f->hooks, &e);
	if (f->api == NULL)
		fail_msg("api_new: %s", e.msg);
}

int
setup(void **state)
{
	struct fx *f = fx_alloc();

	fx_start(f);
	*state = f;
	return 0;
}

int
teardown(void **state)
{
	struct fx *f = *state;

	api_free(f->api);
	policy_unref(f->cur);
	close(f->log.fd);
	unlink(f->logpath);
	event_base_free(f->base);
	free(f);
	return 0;
}

char *
fx_logs(struct fx *f)
{
	FILE *fp = fopen(f->logpath, "r");
	char *s = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(fp);
	assert_non_null(s);
	n = fread(s, 1, (1 << 20) - 1, fp);
	s[n] = '\0';
	fclose(fp);
	return s;
}

/* ---- client ---- */

int
client_connect(struct fx *f)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	sin.sin_port = htons(api_tcp_port(f->api));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1)
		assert_int_equal(errno, EINPROGRESS);
	return fd;
}

int
client_connect_unix(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		assert_true(errno == EINPROGRESS || errno == EAGAIN);
	return fd;
}

/* Spins the server loop a little. */
void
spin(struct fx *f, int ms)
{
	uint64_t end = now_mono_ms() + (uint64_t)ms;

	do {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		poll(NULL, 0, 1);
	} while (now_mono_ms() < end);
}

static void
resp_parse(struct resp *r)
{
	char *eoh;

	r->status = 0;
	r->body = NULL;
	r->bodylen = 0;
	if (r->len < 12 || strncmp(r->raw, "HTTP/1.1 ", 9) != 0)
		return;
	r->status = atoi(r->raw + 9);
	if ((eoh = strstr(r->raw, "\r\n\r\n")) == NULL)
		return;
	r->body = eoh + 4;
	r->bodylen = r->len - (size_t)(r->body - r->raw);
}

/*
 * Sends req on fd while running the server loop, reads until the server
 * closes (requests say Connection: close) or the deadline passes.
 */
void
exchange(struct fx *f, int fd, const char *req, size_t reqlen, struct resp *r)
{
	uint64_t deadline = now_mono_ms() + CLIENT_DEADLINE_MS;
	size_t sent = 0;
	bool eof = false;

	memset(r, 0, sizeof(*r));
	r->raw = malloc(RESP_MAX + 1);
	assert_non_null(r->raw);
	while (!eof && now_mono_ms() < deadline) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		if (sent < reqlen) {
			n = send(fd, req + sent, reqlen - sent,
			    MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0)
				sent += (size_t)n;
			else if (n == -1 && errno != EAGAIN &&
			    errno != EWOULDBLOCK && errno != ENOTCONN)
				sent = reqlen; /* server gave up on us */
		}
		(void)poll(&p, 1, 1);
		for (;;) {
			n = recv(fd, r->raw + r->len, RESP_MAX - r->len,
			    MSG_DONTWAIT);
			if (n > 0) {
				r->len += (size_t)n;
				continue;
			}
			if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
				eof = true;
			break;
		}
	}
	close(fd);
	r->raw[r->len] = '\0';
	resp_parse(r);
}

void
resp_free(struct resp *r)
{
	free(r->raw);
	r->raw = NULL;
}

void
call_full(struct fx *f, const char *method, const char *path, const char *extra,
    const char *body, size_t bodylen, struct resp *r)
{
	size_t cap = bodylen + (extra != NULL ? strlen(extra) : 0) + 4096, n;
	char *req = malloc(cap);

	assert_non_null(req);
	n = (size_t)snprintf(req, cap,
	    "%s %s HTTP/1.1\r\nHost: egressd\r\nConnection: close\r\n"
	    "%sContent-Length: %zu\r\n\r\n",
	    method, path, extra != NULL ? extra : "", bodylen);
	assert_true(n < cap - bodylen);
	memcpy(req + n, body, bodylen);
	exchange(f, client_connect(f), req, n + bodylen, r);
	free(req);
}

/* With the right token in OPENSANDBOX-EGRESS-AUTH. */
void
call(struct fx *f, const char *method, const char *path, const char *body,
    struct resp *r)
{
	call_full(f, method, path, "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n",
	    body != NULL ? body : "", body != NULL ? strlen(body) : 0, r);
}

const char *
header(const struct resp *r, const char *name, char *out, size_t outlen)
{
	const char *p = strstr(r->raw, "\r\n");
	size_t nl = strlen(name);

	while (p != NULL && p < r->body - 2) {
		p += 2;
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1, *end = strstr(v, "\r\n");
			while (*v == ' ')
				v++;
			snprintf(out, outlen, "%.*s", (int)(end - v), v);
			return out;
		}
		p = strstr(p, "\r\n");
	}
	return NULL;
}

/* Exact status, Content-Type and body bytes. */
void
expect(const struct resp *r, int status, const char *ctype, const char *body)
{
	char ct[128];

	if (r->status != status)
		fail_msg("status %d, want %d; response:\n%s", r->status, status,
		    r->raw);
	if (ctype != NULL) {
		if (header(r, "Content-Type", ct, sizeof(ct)) == NULL ||
		    strcmp(ct, ctype) != 0)
			fail_msg("content-type %s, want %s",
			    header(r, "Content-Type", ct, sizeof(ct)), ctype);
	}
	if (body != NULL &&
	    (r->bodylen != strlen(body) || memcmp(r->body, body, r->bodylen)))
		fail_msg(
		    "body [%.*s], want [%s]", (int)r->bodylen, r->body, body);
}

void
expect_text(const struct resp *r, int status, const char *body)
{
	char v[64];

	expect(r, status, TEXT, body);
	assert_non_null(header(r, "X-Content-Type-Options", v, sizeof(v)));
	assert_string_equal(v, "nosniff");
}

void
expect_prefix(const struct resp *r, int status, const char *prefix)
{
	expect(r, status, TEXT, NULL);
	if (r->bodylen < strlen(prefix) + 1 ||
	    strncmp(r->body, prefix, strlen(prefix)) != 0 ||
	    r->body[r->bodylen - 1] != '\n')
		fail_msg("body [%.*s], want prefix [%s] and a newline",
		    (int)r->bodylen, r->body, prefix);
}

void
roundtrip(struct fx *f, const char *method, const char *path, const char *body,
    int status, const char *ctype, const char *want)
{
	struct resp r;

	call(f, method, path, body, &r);
	expect(&r, status, ctype, want);
	resp_free(&r);
}

void
get_policy_is(struct fx *f, const char *want)
{
	roundtrip(f, "GET", "/policy", NULL, 200, JSON, want);
}

/* Reads what arrives on fd within ms while running the server loop. */
ssize_t
read_some(struct fx *f, int fd, char *buf, size_t len, int ms)
{
	uint64_t end = now_mono_ms() + (uint64_t)ms;
	ssize_t n;

	do {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		n = recv(fd, buf, len, MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return n;
		poll(NULL, 0, 1);
	} while (now_mono_ms() < end);
	return -1;
}
