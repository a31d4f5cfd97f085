/*
 * api: every row of contract §3 and §6 over a real socket. The API runs on
 * its own event_base bound to 127.0.0.1:0; fake hooks stand in for the
 * daemon (a commit that records, and fails on demand); a raw-socket client
 * in the same thread drives the loop and compares status, headers and body
 * bytes exactly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "egressd/api/api.h"
#include "egressd/base/defaults.h"
#include "egressd/base/log.h"
#include "egressd/base/stats.h"
#include "util/now.h"

#define TOKEN "s3cret-token"
#define RESP_MAX (4u << 20)
#define CLIENT_DEADLINE_MS 5000

struct fx {
	struct event_base *base;
	struct api *api;
	struct log log;
	char logpath[64];
	struct stats stats;
	struct api_opts opts;
	struct api_hooks hooks;
	struct policy *cur;
	unsigned commits;
	bool fail_commit, fail_vault, not_ready, not_healthy;
	/* The commit queue's stand-in (hooks.mutate): mutations held until
	 * the test completes them. */
	struct api_mutation *held[8];
	size_t nheld;
	bool queue_full;
	char unix_path[108];
};

struct resp {
	int status;
	char *raw; /* whole response */
	size_t len;
	char *body; /* into raw */
	size_t bodylen;
};

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

static int
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
static void
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

static struct fx *
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

static void
fx_start(struct fx *f)
{
	struct err e;

	err_clear(&e);
	f->api = api_new(f->base, &f->opts, &f->hooks, &e);
	if (f->api == NULL)
		fail_msg("api_new: %s", e.msg);
}

static int
setup(void **state)
{
	struct fx *f = fx_alloc();

	fx_start(f);
	*state = f;
	return 0;
}

static int
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

static char *
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

static int
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

static int
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
static void
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
static void
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

static void
resp_free(struct resp *r)
{
	free(r->raw);
	r->raw = NULL;
}

enum auth_form { AUTH_NONE, AUTH_HEADER, AUTH_BEARER };

static void
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
static void
call(struct fx *f, const char *method, const char *path, const char *body,
    struct resp *r)
{
	call_full(f, method, path, "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n",
	    body != NULL ? body : "", body != NULL ? strlen(body) : 0, r);
}

static const char *
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
static void
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

#define TEXT "text/plain; charset=utf-8"
#define JSON "application/json"

static void
expect_text(const struct resp *r, int status, const char *body)
{
	char v[64];

	expect(r, status, TEXT, body);
	assert_non_null(header(r, "X-Content-Type-Options", v, sizeof(v)));
	assert_string_equal(v, "nosniff");
}

static void
expect_prefix(const struct resp *r, int status, const char *prefix)
{
	expect(r, status, TEXT, NULL);
	if (r->bodylen < strlen(prefix) + 1 ||
	    strncmp(r->body, prefix, strlen(prefix)) != 0 ||
	    r->body[r->bodylen - 1] != '\n')
		fail_msg("body [%.*s], want prefix [%s] and a newline",
		    (int)r->bodylen, r->body, prefix);
}

static void
roundtrip(struct fx *f, const char *method, const char *path, const char *body,
    int status, const char *ctype, const char *want)
{
	struct resp r;

	call(f, method, path, body, &r);
	expect(&r, status, ctype, want);
	resp_free(&r);
}

static void
get_policy_is(struct fx *f, const char *want)
{
	roundtrip(f, "GET", "/policy", NULL, 200, JSON, want);
}

/* ---- auth ---- */

static void
test_auth(void **state)
{
	struct fx *f = *state;
	struct resp r;

	call_full(f, "GET", "/policy", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: wrong\r\n", "",
	    0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	/* A prefix and an extension of the token are wrong too. */
	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: s3cret\r\n",
	    "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	/* (The right token now, before the fourth failure backs off.) */
	roundtrip(f, "GET", "/policy", NULL, 200, JSON, NULL);
	call_full(f, "GET", "/policy",
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "x\r\n", "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/policy", "Authorization: Basic " TOKEN "\r\n", "",
	    0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	assert_int_equal(f->stats.api_unauthorized, 5);

	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "opensandbox-egress-auth: " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "Authorization: Bearer " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "Authorization: bearer " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);

	/* Auth is checked before the method (reference order 401, 405). */
	call_full(f, "OPTIONS", "/policy", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	/* Mutations without a token never reach the commit. */
	call_full(f, "POST", "/policy", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	roundtrip(f, "GET", "/policy", NULL, 200, JSON, NULL);

	/* /healthz and /readyz never need it; /metrics and /v1/status do. */
	call_full(f, "GET", "/healthz", NULL, "", 0, &r);
	expect(&r, 200, TEXT, "ok");
	resp_free(&r);
	call_full(f, "GET", "/readyz", NULL, "", 0, &r);
	expect(&r, 200, TEXT, "ok");
	resp_free(&r);
	call_full(f, "GET", "/metrics", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/v1/status", NULL, "", 0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
	call_full(f, "GET", "/metrics", "Authorization: Bearer " TOKEN "\r\n",
	    "", 0, &r);
	expect(&r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL);
	resp_free(&r);
}

static void
test_no_token(void **state)
{
	struct fx *f = fx_alloc();
	struct resp r;
	char *logs;

	(void)state;
	f->opts.token = NULL;
	fx_start(f);
	*state = f;
	/* Reads are open, as in the reference. */
	call_full(f, "GET", "/policy", NULL, "", 0, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	/* Mutations are refused: 405 first, then 412. */
	call_full(f, "TRACE", "/policy", NULL, "", 0, &r);
	expect_text(&r, 405, "method not allowed\n");
	resp_free(&r);
	call_full(f, "POST", "/policy", NULL, "", 0, &r);
	expect_text(
	    &r, 412, "policy mutations require egress API auth token\n");
	resp_free(&r);
	call_full(f, "PATCH", "/policy", NULL, "[]", 2, &r);
	expect_text(
	    &r, 412, "policy mutations require egress API auth token\n");
	resp_free(&r);
	call_full(f, "DELETE", "/policy", NULL, "[\"a.com\"]", 9, &r);
	expect_text(
	    &r, 412, "policy mutations require egress API auth token\n");
	resp_free(&r);
	/* The vault: 405 first, then 412 (no token), before anything else. */
	call_full(f, "PUT", "/credential-vault", NULL, "{}", 2, &r);
	expect_text(&r, 405, "method not allowed\n");
	resp_free(&r);
	call_full(f, "POST", "/credential-vault", NULL, "{", 1, &r);
	expect_text(
	    &r, 412, "credential vault requires egress API auth token\n");
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"api.read_only\""));
	free(logs);
}

static void
test_no_token_insecure(void **state)
{
	struct fx *f = fx_alloc();
	struct resp r;
	char *logs;

	(void)state;
	f->opts.token = "";
	f->opts.insecure_no_token = true;
	fx_start(f);
	*state = f;
	call_full(f, "POST", "/policy", NULL, "", 0, &r);
	expect(&r, 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"reason\":\"policy "
	    "reset to default deny-all\"}\n");
	resp_free(&r);
	assert_int_equal(f->commits, 1);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"api.insecure\""));
	free(logs);
}

/* ---- /policy ---- */

static void
test_get_initial(void **state)
{
	get_policy_is(*state,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":[]"
	    "}}\n");
}

static void
test_405(void **state)
{
	static const char *const methods[] = {
	    "OPTIONS", "TRACE", "CONNECT", "BREW", "get", "B@D", "HEAD"};
	struct fx *f = *state;
	struct resp r;
	char v[128];
	size_t i;

	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		call(f, methods[i], "/policy", NULL, &r);
		if (r.status != 405)
			fail_msg(
			    "%s: status %d\n%s", methods[i], r.status, r.raw);
		assert_non_null(header(&r, "Allow", v, sizeof(v)));
		assert_string_equal(v, "GET, POST, PUT, PATCH, DELETE");
		if (strcmp(methods[i], "HEAD") != 0)
			expect_text(&r, 405, "method not allowed\n");
		resp_free(&r);
	}
	assert_int_equal(f->commits, 0);
}

#define POL_A                                                                  \
	"{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","       \
	"\"target\":\"a.example.com\"},{\"action\":\"deny\",\"target\":"       \
	"\"*.b.example.com\"}]}"

static void
test_post_put_replace(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 1);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":" POL_A "}\n");
	roundtrip(f, "PUT", "/policy", "{\"defaultAction\":\"allow\"}", 200,
	    JSON,
	    "{\"status\":\"ok\",\"mode\":\"allow_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 2);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"allow_all\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"allow\",\"egress\":["
	    "]}}\n");
	assert_int_equal(f->stats.policy_updates_ok, 2);
	assert_int_equal(f->cur->revision, 2);
}

static void
test_empty_post_resets(void **state)
{
	static const char reset[] =
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"reason\":\"policy "
	    "reset to default deny-all\"}\n";
	struct fx *f = *state;

	roundtrip(f, "PUT", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "POST", "/policy", "", 200, JSON, reset);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":[]"
	    "}}\n");
	roundtrip(f, "PUT", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "PUT", "/policy", " \r\n\t ", 200, JSON, reset);
	assert_int_equal(f->commits, 4);
	/* "{}" and null are deny-all too, but answered as a normal update. */
	roundtrip(f, "POST", "/policy", "{}", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	roundtrip(f, "POST", "/policy", "null", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
}

static void
check_unchanged(struct fx *f, unsigned commits)
{
	assert_int_equal(f->commits, commits);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":" POL_A "}\n");
}

static void
test_bad_policy(void **state)
{
	static const char *const bad[] = {
	    "{",
	    "[1,2]",
	    "{\"defaultAction\":\"maybe\"}",
	    "{\"defaultAction\":\"deny\",\"bogus\":1}",
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"a..b\"}]}",
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"1.2.3.4/40\"}]}",
	    /* Parenthesized: one element split over two lines. */
	    ("{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\","
	     "\"extra\":true}]}"),
	    "{\"egress\":[{\"action\":\"permit\",\"target\":\"a.com\"}]}",
	    "\"text\"",
	};
	struct fx *f = *state;
	struct resp r;
	size_t i;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		call(f, "POST", "/policy", bad[i], &r);
		if (r.status != 400)
			fail_msg("%s accepted: %s", bad[i], r.raw);
		expect_prefix(&r, 400, "invalid policy: ");
		resp_free(&r);
	}
	check_unchanged(f, 1);
	assert_int_equal(f->stats.policy_updates_failed, i);
}

static void
test_max_rules(void **state)
{
	struct fx *f = fx_alloc();

	(void)state;
	f->opts.max_rules = 2;
	fx_start(f);
	*state = f;
	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "POST", "/policy",
	    "{\"egress\":[{\"action\":\"allow\",\"target\":\"x.com\"},"
	    "{\"action\":\"allow\",\"target\":\"y.com\"},"
	    "{\"action\":\"allow\",\"target\":\"z.com\"}]}",
	    413, TEXT, "egress rule total count 3 exceeds limit 2\n");
	/* PATCH counts the merged result. */
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"x.com\"}]", 413, TEXT,
	    "egress rule total count 3 exceeds limit 2\n");
	/* Replacing a target already there keeps the count. */
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"deny\",\"target\":\"a.example.com\"}]", 200, JSON,
	    NULL);
	assert_int_equal(f->commits, 2);
}

static void
test_patch(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	/* Prepended; the first occurrence of a target wins, case-insensitive;
	 * old rules not named follow in their order. */
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"deny\",\"target\":\"A.Example.com\"},"
	    "{\"action\":\"allow\",\"target\":\"c.example.com\"},"
	    "{\"action\":\"allow\",\"target\":\"a.example.com\"}]",
	    200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"A.Example.com\"},"
	    "{\"action\":\"allow\",\"target\":\"c.example.com\"},"
	    "{\"action\":\"deny\",\"target\":\"*.b.example.com\"}]}}\n");
	assert_int_equal(f->commits, 2);
}

static void
test_patch_errors(void **state)
{
	struct fx *f = *state;
	struct resp r;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "PATCH", "/policy", "", 400, TEXT, "empty body\n");
	roundtrip(f, "PATCH", "/policy", " \n ", 400, TEXT, "empty body\n");
	roundtrip(f, "PATCH", "/policy", "[]", 400, TEXT,
	    "invalid patch rules: empty array\n");
	roundtrip(f, "PATCH", "/policy", " [ ] ", 400, TEXT,
	    "invalid patch rules: empty array\n");
	roundtrip(f, "PATCH", "/policy", "{}", 400, TEXT,
	    "invalid patch rules: expected a JSON array of rules\n");
	roundtrip(f, "PATCH", "/policy", "[\"a.com\"]", 400, TEXT,
	    "invalid patch rules: element 0: expected a rule object\n");
	call(f, "PATCH", "/policy", "[{", &r);
	expect_prefix(&r, 400, "invalid patch rules: ");
	resp_free(&r);
	call(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"bad..name\"}]", &r);
	expect_prefix(&r, 400, "invalid merged policy: ");
	resp_free(&r);
	call(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"ok.com\",\"bogus\":1}]", &r);
	expect_prefix(&r, 400, "invalid merged policy: ");
	resp_free(&r);
	call(f, "PATCH", "/policy", "[{\"action\":\"allow\"}]", &r);
	expect_prefix(&r, 400, "invalid merged policy: ");
	resp_free(&r);
	check_unchanged(f, 1);
}

static void
test_delete(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	/* Nothing matched: 200 with the reason, nothing applied. */
	roundtrip(f, "DELETE", "/policy", "[\"zzz.example.com\"]", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"reason\":\"no matching targets found\"}\n");
	assert_int_equal(f->commits, 1);
	roundtrip(f, "DELETE", "/policy", "[\"A.EXAMPLE.COM\"]", 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 2);
	get_policy_is(f,
	    "{\"status\":\"ok\",\"mode\":\"enforcing\",\"enforcementMode\":"
	    "\"dns+nft\",\"policy\":{\"defaultAction\":\"deny\",\"egress\":["
	    "{\"action\":\"deny\",\"target\":\"*.b.example.com\"}]}}\n");
	roundtrip(f, "DELETE", "/policy", "[\"*.b.example.com\",\"nope.com\"]",
	    200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"enforcementMode\":"
	    "\"dns+nft\"}\n");
	assert_int_equal(f->commits, 3);
}

static void
test_delete_errors(void **state)
{
	struct fx *f = *state;
	struct resp r;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "DELETE", "/policy", "", 400, TEXT, "empty body\n");
	roundtrip(f, "DELETE", "/policy", "[]", 400, TEXT,
	    "invalid delete targets: empty array\n");
	roundtrip(f, "DELETE", "/policy", "[1]", 400, TEXT,
	    "invalid delete targets: element 0: expected a target string\n");
	roundtrip(f, "DELETE", "/policy", "\"a.com\"", 400, TEXT,
	    "invalid delete targets: expected a JSON array of target "
	    "strings\n");
	call(f, "DELETE", "/policy", "[\"a.com\"", &r);
	expect_prefix(&r, 400, "invalid delete targets: ");
	resp_free(&r);
	check_unchanged(f, 1);
}

static void
test_commit_failure(void **state)
{
	struct fx *f = *state;
	char *logs;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	f->fail_commit = true;
	roundtrip(f, "POST", "/policy", "", 500, TEXT,
	    "failed to apply nftables policy: boom\n");
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"z.com\"}]", 500, TEXT,
	    "failed to apply nftables policy: boom\n");
	roundtrip(f, "DELETE", "/policy", "[\"a.example.com\"]", 500, TEXT,
	    "failed to apply nftables policy: boom\n");
	f->fail_commit = false;
	check_unchanged(f, 1);
	assert_int_equal(f->stats.policy_updates_failed, 3);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"policy.update_failed\""));
	assert_non_null(strstr(logs, "\"reason\":\"commit failed\""));
	free(logs);
}

static void
test_vault_check(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	f->fail_vault = true;
	roundtrip(f, "POST", "/policy", "{\"defaultAction\":\"allow\"}", 400,
	    TEXT,
	    "credential vault policy validation: binding \"gh\" host "
	    "api.github.com is not allowed\n");
	roundtrip(f, "DELETE", "/policy", "[\"a.example.com\"]", 400, TEXT,
	    "credential vault policy validation: binding \"gh\" host "
	    "api.github.com is not allowed\n");
	f->fail_vault = false;
	check_unchanged(f, 1);
}

static void
test_body_cap(void **state)
{
	struct fx *f = *state;
	size_t n = API_BODY_MAX;
	char *big = malloc(n + 2);
	struct resp r;

	assert_non_null(big);
	/* Exactly the cap: accepted whole (white space around "{}"). */
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	call_full(f, "POST", "/policy",
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n", big, n, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	assert_int_equal(f->commits, 1);
	/* One byte over: 413, never a truncated parse. */
	memset(big, ' ', n + 1);
	big[0] = '{';
	big[n] = '}';
	call_full(f, "POST", "/policy",
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n", big, n + 1, &r);
	expect_text(&r, 413, "request body too large\n");
	resp_free(&r);
	assert_int_equal(f->commits, 1);
	free(big);
	/* Far over every bound (libevent's too): still our answer, at the
	 * head, before any of the body is sent. */
	{
		static const char req[] =
		    "POST /policy HTTP/1.1\r\nHost: x\r\n"
		    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
		    "Content-Length: 104857600\r\n\r\n";
		exchange(f, client_connect(f), req, sizeof(req) - 1, &r);
		expect_text(&r, 413, "request body too large\n");
		resp_free(&r);
	}
}

static void
test_header_cap(void **state)
{
	struct fx *f = *state;
	size_t n = API_HEADERS_MAX + 1024;
	char *h = malloc(n + 32);
	struct resp r;

	assert_non_null(h);
	memcpy(h, "X-Big: ", 7);
	memset(h + 7, 'a', n);
	memcpy(h + 7 + n, "\r\n", 3);
	call_full(f, "GET", "/policy", h, "", 0, &r);
	/* Answered in the API's own format, not libevent's HTML. */
	expect_text(&r, 431, "request header fields too large\n");
	resp_free(&r);
	free(h);
	/* Still serving. */
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
}

/* ---- probes, metrics, status, routes ---- */

static void
test_healthz_readyz(void **state)
{
	struct fx *f = *state;

	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	roundtrip(f, "POST", "/healthz", NULL, 200, TEXT, "ok");
	f->not_healthy = true;
	roundtrip(f, "GET", "/healthz", NULL, 503, TEXT,
	    "credential proxy not ready\n");
	f->not_healthy = false;
	roundtrip(f, "GET", "/readyz", NULL, 200, TEXT, "ok");
	f->not_ready = true;
	roundtrip(f, "GET", "/readyz", NULL, 503, TEXT, "nft not ready\n");
	roundtrip(
	    f, "POST", "/readyz", NULL, 405, TEXT, "method not allowed\n");
}

static void
test_metrics(void **state)
{
	struct fx *f = *state;
	char path[] = "/tmp/egressd-api-metrics-XXXXXX", cmd[128];
	struct resp r;
	int fd, rc;

	f->stats.dns_denied = 17;
	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	call(f, "GET", "/metrics", NULL, &r);
	expect(&r, 200, "text/plain; version=0.0.4; charset=utf-8", NULL);
	assert_non_null(strstr(r.body,
	    "\negressd_build_info{version=\"" EGRESSD_VERSION "\"} 1\n"));
	assert_non_null(strstr(
	    r.body, "\negressd_dns_queries_total{decision=\"denied\"} 17\n"));
	assert_non_null(strstr(r.body, "\negressd_policy_revision 1\n"));
	assert_non_null(strstr(
	    r.body, "\negressd_policy_updates_total{result=\"ok\"} 1\n"));
	assert_non_null(strstr(r.body, "\negressd_api_requests_total 2\n"));
	assert_null(strstr(r.body, TOKEN));
	/* promtool must accept what goes over the wire. */
	assert_int_equal(access("/usr/bin/promtool", X_OK), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, r.body, r.bodylen), (ssize_t)r.bodylen);
	close(fd);
	snprintf(
	    cmd, sizeof(cmd), "/usr/bin/promtool check metrics < %s", path);
	rc = system(cmd);
	unlink(path);
	assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	resp_free(&r);
	roundtrip(
	    f, "DELETE", "/metrics", NULL, 405, TEXT, "method not allowed\n");
}

static void
test_status(void **state)
{
	struct fx *f = *state;
	struct resp r;
	json_t *o, *p, *api, *l;
	json_error_t je;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	f->not_ready = true;
	call(f, "GET", "/v1/status", NULL, &r);
	expect(&r, 200, JSON, NULL);
	assert_int_equal(r.body[r.bodylen - 1], '\n');
	o = json_loadb(r.body, r.bodylen, 0, &je);
	if (o == NULL)
		fail_msg("status not JSON: %s", je.text);
	assert_string_equal(
	    json_string_value(json_object_get(o, "status")), "ok");
	assert_string_equal(
	    json_string_value(json_object_get(o, "version")), EGRESSD_VERSION);
	assert_string_equal(
	    json_string_value(json_object_get(o, "enforcementMode")),
	    "dns+nft");
	assert_true(json_is_false(json_object_get(o, "ready")));
	assert_string_equal(
	    json_string_value(json_object_get(o, "notReady")), "nft not ready");
	/* The daemon's side: the hook's plain struct, rendered here. */
	assert_string_equal(
	    json_string_value(json_object_get(o, "configuredMode")), "dns+nft");
	l = json_object_get(o, "enforced");
	assert_int_equal(json_array_size(l), 2);
	assert_string_equal(
	    json_string_value(json_array_get(l, 0)), "dns-filter");
	assert_string_equal(
	    json_string_value(json_array_get(l, 1)), "nft-default-deny");
	assert_string_equal(
	    json_string_value(json_object_get(
	        json_object_get(o, "notEnforced"), "transparentProxy")),
	    "off (--proxy)");
	assert_null(json_object_get(o, "dns"));
	assert_null(json_object_get(o, "proxy"));
	p = json_object_get(o, "policy");
	assert_int_equal(json_integer_value(json_object_get(p, "revision")), 1);
	assert_string_equal(
	    json_string_value(json_object_get(p, "source")), "api");
	assert_string_equal(
	    json_string_value(json_object_get(p, "mode")), "enforcing");
	assert_int_equal(json_integer_value(json_object_get(p, "rules")), 2);
	assert_string_equal(json_string_value(json_object_get(p, "file")),
	    "/etc/egressd/policy.yaml");
	api = json_object_get(o, "api");
	assert_string_equal(
	    json_string_value(json_object_get(api, "auth")), "token");
	l = json_object_get(api, "listeners");
	assert_int_equal(json_array_size(l), 1);
	assert_int_equal(strncmp(json_string_value(json_array_get(l, 0)),
	                     "tcp:127.0.0.1:", 14),
	    0);
	assert_null(strstr(r.body, TOKEN));
	json_decref(o);
	resp_free(&r);
}

static void
test_routes(void **state)
{
	static const char *const paths[] = {"/", "/policy/", "/policyx",
	    "/credential-vaultx", "/credential-vault/other",
	    "/credential-vault/credentials/", "/credential-vault/bindingsx",
	    "/v1/status/x", "/POLICY"};
	struct fx *f = *state;
	size_t i;

	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		roundtrip(f, "GET", paths[i], NULL, 404, TEXT,
		    "404 page not found\n");
	/* The vault's routes (the fixture has none: e2e_proxy_vault_api
	 * drives a real one). */
	roundtrip(f, "GET", "/credential-vault", NULL, 404, TEXT,
	    "credential vault not found\n");
	roundtrip(f, "GET", "/credential-vault/credentials", NULL, 404, TEXT,
	    "credential vault not found\n");
	roundtrip(f, "GET", "/credential-vault/bindings/x", NULL, 404, TEXT,
	    "credential vault not found\n");
	roundtrip(f, "GET", "/credential-vault/_active", NULL, 403, TEXT,
	    "forbidden\n");
	roundtrip(f, "POST", "/credential-vault/credentials", "{}", 405, TEXT,
	    "method not allowed\n");
	/* No vault hooks (no proxy): writes are 412, the body never read. */
	roundtrip(f, "POST", "/credential-vault", "{", 412, TEXT,
	    "credential proxy is not ready\n");
	/* The query string is not part of the route. */
	roundtrip(f, "GET", "/healthz?x=1", NULL, 200, TEXT, "ok");
}

static void
test_logs(void **state)
{
	struct fx *f = *state;
	struct resp r;
	char *logs;

	roundtrip(f, "POST", "/policy", POL_A, 200, JSON, NULL);
	roundtrip(f, "POST", "/policy", "{\"defaultAction\":\"maybe\"}", 400,
	    TEXT, NULL);
	call_full(f, "GET", "/policy?token=" TOKEN,
	    "Authorization: Bearer " TOKEN "\r\n", "", 0, &r);
	resp_free(&r);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	logs = fx_logs(f);
	assert_non_null(strstr(logs,
	    "\"lvl\":\"info\",\"ev\":\"api.request\",\"method\":\"POST\","
	    "\"path\":\"/policy\",\"status\":200"));
	/* Successful probes are routine: debug level. */
	assert_non_null(strstr(logs,
	    "\"lvl\":\"debug\",\"ev\":\"api.request\",\"method\":\"GET\","
	    "\"path\":\"/healthz\",\"status\":200"));
	assert_non_null(strstr(logs, "\"peer\":\"127.0.0.1:"));
	assert_non_null(strstr(logs,
	    "\"ev\":\"policy.updated\",\"op\":\"replace\",\"revision\":1"));
	assert_non_null(strstr(logs,
	    "\"ev\":\"policy.update_failed\",\"op\":\"replace\",\"status\":400,"
	    "\"reason\":\"invalid policy\""));
	/* Neither the token (header or query) nor request bodies. */
	assert_null(strstr(logs, TOKEN));
	assert_null(strstr(logs, "a.example.com"));
	free(logs);
}

/* ---- connections, listeners ---- */

/* Reads what arrives on fd within ms while running the server loop. */
static ssize_t
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

static void
test_connections(void **state)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
	struct fx *f = *state;
	int fds[API_CONNS_MAX], extra;
	char buf[512], *logs;
	size_t i;
	ssize_t n;

	/* Keep-alive connections, one request each, all tracked. */
	for (i = 0; i < API_CONNS_MAX; i++) {
		fds[i] = client_connect(f);
		spin(f, 2);
		assert_int_equal(send(fds[i], req, sizeof(req) - 1, 0),
		    (ssize_t)(sizeof(req) - 1));
	}
	spin(f, 200);
	assert_int_equal(api_connections(f->api), API_CONNS_MAX);
	for (i = 0; i < API_CONNS_MAX; i++) {
		n = recv(fds[i], buf, sizeof(buf) - 1, MSG_DONTWAIT);
		assert_true(n > 12);
		assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
	}
	/* One more gets through the kernel's backlog but is not served while
	 * the cap holds: accept is paused. */
	extra = client_connect(f);
	spin(f, 20);
	assert_int_equal(send(extra, req, sizeof(req) - 1, MSG_NOSIGNAL),
	    (ssize_t)(sizeof(req) - 1));
	assert_int_equal(read_some(f, extra, buf, sizeof(buf), 400), -1);
	assert_int_equal(api_connections(f->api), API_CONNS_MAX);
	logs = fx_logs(f);
	assert_non_null(strstr(logs, "\"ev\":\"api.pause\""));
	free(logs);
	/* A slot frees: it is served. */
	close(fds[0]);
	n = read_some(f, extra, buf, sizeof(buf) - 1, 2000);
	assert_true(n > 12);
	assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
	close(extra);
	for (i = 1; i < API_CONNS_MAX; i++)
		close(fds[i]);
	spin(f, 300);
	assert_int_equal(api_connections(f->api), 0);

	/* Silent connections (slowloris) hold a slot each, and no more. */
	for (i = 0; i < API_CONNS_MAX; i++) {
		fds[i] = client_connect(f);
		spin(f, 2);
	}
	spin(f, 100);
	assert_int_equal(api_connections(f->api), API_CONNS_MAX);
	for (i = 0; i < API_CONNS_MAX; i++)
		close(fds[i]);
	spin(f, 300);
	assert_int_equal(api_connections(f->api), 0);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
}

/* Racing updates (THREATS 15): PATCHes sent at once on many connections
 * are applied one by one; none is lost, revisions are consecutive. */
static void
test_racing_patches(void **state)
{
	enum { N = 16 };
	struct fx *f = *state;
	int fds[N];
	char req[512], buf[512], want[64];
	size_t i;
	struct resp r;

	for (i = 0; i < N; i++) {
		char body[96];
		int bl = snprintf(body, sizeof(body),
		    "[{\"action\":\"allow\",\"target\":\"r%zu.example.com\"}]",
		    i);
		int n = snprintf(req, sizeof(req),
		    "PATCH /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
		    "Content-Length: %d\r\n\r\n%s",
		    bl, body);
		fds[i] = client_connect(f);
		spin(f, 1);
		assert_int_equal(send(fds[i], req, (size_t)n, 0), n);
	}
	for (i = 0; i < N; i++) {
		ssize_t n = read_some(f, fds[i], buf, sizeof(buf) - 1, 3000);
		assert_true(n > 12);
		assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
		close(fds[i]);
	}
	assert_int_equal(f->commits, N);
	assert_int_equal(f->cur->revision, N);
	assert_int_equal(f->cur->nrules, N);
	call(f, "GET", "/policy", NULL, &r);
	for (i = 0; i < N; i++) {
		snprintf(want, sizeof(want), "\"r%zu.example.com\"", i);
		assert_non_null(strstr(r.body, want));
	}
	resp_free(&r);
}

/*
 * With the daemon's commit queue (hook mutate): the answer waits until the
 * mutation is in force, the loop keeps serving meanwhile, the decide sees
 * the snapshot in force at the mutation's turn (not at its arrival), a
 * client that left gets its change anyway (answered into the void: ASan
 * checks nothing freed is used), and a full queue is 503.
 */
static void
test_deferred(void **state)
{
	struct fx *f = *state;
	static const char patch[] =
	    "PATCH /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Content-Length: 46\r\n\r\n"
	    "[{\"action\":\"allow\",\"target\":\"q1.example.com\"}]";
	static const char patch2[] =
	    "PATCH /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Content-Length: 46\r\n\r\n"
	    "[{\"action\":\"allow\",\"target\":\"q2.example.com\"}]";
	char buf[1024], *logs;
	int a, b;
	ssize_t n;
	struct resp r;

	api_free(f->api);
	f->hooks.mutate = fx_mutate;
	f->hooks.policy_commit = NULL;
	fx_start(f);

	a = client_connect(f);
	spin(f, 2);
	assert_int_equal(
	    send(a, patch, sizeof(patch) - 1, 0), (ssize_t)(sizeof(patch) - 1));
	b = client_connect(f);
	spin(f, 2);
	assert_int_equal(send(b, patch2, sizeof(patch2) - 1, 0),
	    (ssize_t)(sizeof(patch2) - 1));
	spin(f, 50);
	assert_int_equal(f->nheld, 2);
	/* Queued: no answer yet, and the loop still serves. */
	assert_int_equal(read_some(f, a, buf, sizeof(buf), 50), -1);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	assert_int_equal(f->commits, 0);

	/* b leaves while its change waits behind a's. */
	close(b);
	spin(f, 20);

	fx_complete(f, 0);
	n = read_some(f, a, buf, sizeof(buf) - 1, 2000);
	assert_true(n > 12);
	assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
	close(a);
	assert_int_equal(f->commits, 1);

	/* b's turn: decided against a's result, committed, answered to
	 * nobody. */
	fx_complete(f, 1);
	spin(f, 50);
	assert_int_equal(f->commits, 2);
	assert_int_equal(f->cur->revision, 2);
	assert_int_equal(f->cur->nrules, 2);
	call(f, "GET", "/policy", NULL, &r);
	assert_non_null(strstr(r.body, "\"q1.example.com\""));
	assert_non_null(strstr(r.body, "\"q2.example.com\""));
	resp_free(&r);
	logs = fx_logs(f);
	/* Each request line written once, when its answer went out. */
	assert_non_null(strstr(logs,
	    "\"method\":\"PATCH\",\"path\":\"/policy\","
	    "\"status\":200"));
	assert_null(strstr(logs, "\"status\":0"));
	free(logs);

	/* A full queue: 503 with its words, nothing held. */
	f->nheld = 0;
	f->queue_full = true;
	roundtrip(f, "PATCH", "/policy",
	    "[{\"action\":\"allow\",\"target\":\"q3.example.com\"}]", 503, TEXT,
	    "1024 changes are waiting already\n");
	assert_int_equal(f->nheld, 0);
	assert_int_equal(f->commits, 2);
}

/* A connection that sends nothing is closed after the head deadline; one
 * that sends not a whole head is answered 408 (text) and closed. */
static void
test_idle_timeout(void **state)
{
	struct fx *f = *state;
	char buf[256];
	int silent, partial;
	ssize_t n;

	silent = client_connect(f);
	partial = client_connect(f);
	spin(f, 20);
	assert_int_equal(send(partial, "GET /policy HT", 14, 0), 14);
	spin(f, 50);
	assert_int_equal(api_connections(f->api), 2);
	assert_int_equal(read_some(f, silent, buf, sizeof(buf),
	                     (int)f->opts.timing.head_ms + 2000),
	    0);
	n = read_some(f, partial, buf, sizeof(buf) - 1, 2000);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_int_equal(strncmp(buf, "HTTP/1.1 408 ", 13), 0);
	assert_non_null(strstr(buf, "\r\n\r\nrequest timeout\n"));
	assert_non_null(strstr(buf, "Content-Type: text/plain; charset=utf-8"));
	spin(f, (int)f->opts.timing.linger_ms + 500);
	assert_int_equal(api_connections(f->api), 0);
	close(silent);
	close(partial);
}

/*
 * Slowloris: every byte restarts evhttp's idle timer, so a client that
 * drips its head (or its body) would hold its slot for ever; the head and
 * body deadlines end it, with a 408, and the slot frees.
 */
static void
drip(struct fx *f, const char *prefix, const char *drop, int deadline_ms)
{
	uint64_t t0 = now_mono_ms(), end = t0 + (uint64_t)deadline_ms + 3000;
	int fd = client_connect(f);
	char buf[512];
	ssize_t n = -1;
	size_t k = 0;

	spin(f, 20);
	assert_int_equal(
	    send(fd, prefix, strlen(prefix), 0), (ssize_t)strlen(prefix));
	while (now_mono_ms() < end) {
		/* one byte every 200 ms: well inside the idle timeout */
		if (send(fd, drop + (k++ % strlen(drop)), 1,
		        MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
			break;
		if ((n = read_some(f, fd, buf, sizeof(buf) - 1, 200)) > 0)
			break;
	}
	assert_true(n > 0);
	buf[n] = '\0';
	assert_int_equal(strncmp(buf, "HTTP/1.1 408 ", 13), 0);
	/* ended by the deadline, not by evhttp's idle timeout */
	assert_true(now_mono_ms() - t0 >= (uint64_t)deadline_ms - 100);
	assert_true(now_mono_ms() - t0 <
	    (uint64_t)f->opts.timing.idle_s * 1000 + (uint64_t)deadline_ms);
	close(fd);
	spin(f, (int)f->opts.timing.linger_ms + 500);
	assert_int_equal(api_connections(f->api), 0);
}

static void
test_drip_head(void **state)
{
	drip(*state, "GET /policy HTTP/1.1\r\n", "X-Drip: aaaa\r\n",
	    (int)((struct fx *)*state)->opts.timing.head_ms);
}

static void
test_drip_body(void **state)
{
	drip(*state,
	    "POST /policy HTTP/1.1\r\nHost: x\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Content-Length: 1000\r\n\r\n",
	    " ", (int)((struct fx *)*state)->opts.timing.body_ms);
	assert_int_equal(((struct fx *)*state)->commits, 0);
}

/* A chunked body over the cap is refused as it arrives, in text. */
static void
test_chunked_cap(void **state)
{
	struct fx *f = *state;
	size_t chunk = 64 << 10, nchunks = API_BODY_MAX / chunk + 2, i, o;
	size_t cap = nchunks * (chunk + 16) + 512;
	char *req = malloc(cap);
	struct resp r;

	assert_non_null(req);
	o = (size_t)snprintf(req, cap,
	    "POST /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n");
	for (i = 0; i < nchunks; i++) {
		o += (size_t)snprintf(req + o, cap - o, "%zx\r\n", chunk);
		memset(req + o, ' ', chunk);
		o += chunk;
		o += (size_t)snprintf(req + o, cap - o, "\r\n");
	}
	o += (size_t)snprintf(req + o, cap - o, "0\r\n\r\n");
	exchange(f, client_connect(f), req, o, &r);
	expect_text(&r, 413, "request body too large\n");
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	free(req);
	/* A small chunked body is read as before. */
	{
		static const char ok[] =
		    "POST /policy HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		    "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n"
		    "5\r\n{\"def\r\n"
		    "14 ext=1\r\naultAction\":\"allow\"}\r\n0\r\n\r\n";
		exchange(f, client_connect(f), ok, sizeof(ok) - 1, &r);
		expect(&r, 200, JSON, NULL);
		resp_free(&r);
	}
	assert_int_equal(f->commits, 1);
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
}

/* Wrong tokens back off per peer; tries during the backoff count too. */
static void
test_auth_backoff(void **state)
{
	struct fx *f = *state;
	struct resp r;
	char ra[16];
	int i;

	for (i = 0; i < API_AUTH_FREE_FAILS + 1; i++) {
		call_full(f, "GET", "/policy",
		    "OPENSANDBOX-EGRESS-AUTH: wrong\r\n", "", 0, &r);
		expect_text(&r, 401, "unauthorized\n");
		resp_free(&r);
	}
	/* Backing off: even the right token is not looked at. */
	call(f, "GET", "/policy", NULL, &r);
	expect_text(&r, 429, "too many failed authentication attempts\n");
	assert_non_null(header(&r, "Retry-After", ra, sizeof(ra)));
	assert_true(atoi(ra) >= 1 && atoi(ra) <= 3);
	resp_free(&r);
	call(f, "POST", "/policy", "{}", &r);
	assert_int_equal(r.status, 429);
	resp_free(&r);
	assert_int_equal(f->commits, 0);
	assert_int_equal(f->stats.api_unauthorized, API_AUTH_FREE_FAILS + 3);
	/* Unauthenticated routes are not affected. */
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	{
		char *logs = fx_logs(f);
		assert_non_null(strstr(logs, "\"ev\":\"api.auth_backoff\""));
		free(logs);
	}
	/* After the backoff (doubled per try: 4 backoffs now), the right
	 * token works and clears the record. */
	spin(f, 4 * (int)f->opts.timing.backoff_ms + 200);
	call(f, "GET", "/policy", NULL, &r);
	expect(&r, 200, JSON, NULL);
	resp_free(&r);
	call_full(f, "GET", "/policy", "OPENSANDBOX-EGRESS-AUTH: wrong\r\n", "",
	    0, &r);
	expect_text(&r, 401, "unauthorized\n");
	resp_free(&r);
}

static void
test_unix_socket(void **state)
{
	static const char req[] = "POST /policy HTTP/1.1\r\nHost: x\r\n"
	                          "Connection: close\r\n"
	                          "OPENSANDBOX-EGRESS-AUTH: " TOKEN "\r\n"
	                          "Content-Length: 0\r\n\r\n";
	struct fx *f = fx_alloc();
	struct resp r;
	struct stat st;

	(void)state;
	snprintf(f->unix_path, sizeof(f->unix_path), "/tmp/egressd-api-%d.sock",
	    (int)getpid());
	f->opts.listen_tcp = NULL;
	f->opts.listen_unix = f->unix_path;
	fx_start(f);
	*state = f;
	assert_int_equal(api_tcp_port(f->api), 0);
	assert_int_equal(lstat(f->unix_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660);
	exchange(
	    f, client_connect_unix(f->unix_path), req, sizeof(req) - 1, &r);
	expect(&r, 200, JSON,
	    "{\"status\":\"ok\",\"mode\":\"deny_all\",\"reason\":\"policy "
	    "reset to default deny-all\"}\n");
	resp_free(&r);
	api_free(f->api);
	f->api = NULL;
	assert_int_equal(lstat(f->unix_path, &st), -1);
}

static void
test_unix_socket_not_clobbered(void **state)
{
	struct fx *f = fx_alloc();
	struct err e;
	int fd;

	(void)state;
	*state = f;
	snprintf(f->unix_path, sizeof(f->unix_path), "/tmp/egressd-api-%d.file",
	    (int)getpid());
	fd = open(f->unix_path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	f->opts.listen_tcp = NULL;
	f->opts.listen_unix = f->unix_path;
	err_clear(&e);
	assert_null(api_new(f->base, &f->opts, &f->hooks, &e));
	assert_non_null(strstr(e.msg, "not a socket"));
	assert_int_equal(access(f->unix_path, F_OK), 0);
	unlink(f->unix_path);
}

static void
test_parse_addr(void **state)
{
	static const char *const bad[] = {"", "18080", "::1:80", "[::1]80",
	    "[::1]", "host.example:80", "1.2.3.4:99999", "1.2.3.4:", "[zz]:1",
	    "1.2.3.4:8a", "1.2.3:80", ":"};
	struct sockaddr_storage ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	socklen_t len;
	struct err e;
	size_t i;

	(void)state;
	assert_int_equal(api_parse_addr(":18080", &ss, &len, &e), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_true(IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr));
	assert_int_equal(ntohs(s6->sin6_port), 18080);
	assert_int_equal(api_parse_addr("[::1]:0", &ss, &len, &e), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_true(IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr));
	assert_int_equal(api_parse_addr("127.0.0.1:80", &ss, &len, &e), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(ntohs(s4->sin_port), 80);
	assert_int_equal(len, sizeof(*s4));
	assert_int_equal(api_parse_addr("localhost:65535", &ss, &len, &e), 0);
	assert_int_equal(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (api_parse_addr(bad[i], &ss, &len, &e) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
}

static void
test_dual_stack(void **state)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n"
	                          "Connection: close\r\n\r\n";
	struct fx *f = fx_alloc();
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
	struct resp r;
	struct err e;
	int fd;

	(void)state;
	*state = f;
	f->opts.listen_tcp = ":0";
	err_clear(&e);
	f->api = api_new(f->base, &f->opts, &f->hooks, &e);
	assert_non_null(f->api);
	/* IPv4 reaches it through the default client. */
	roundtrip(f, "GET", "/healthz", NULL, 200, TEXT, "ok");
	/* And IPv6 loopback, when the kernel has it. */
	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd == -1)
		return;
	s6.sin6_port = htons(api_tcp_port(f->api));
	s6.sin6_addr = in6addr_loopback;
	if (connect(fd, (struct sockaddr *)&s6, sizeof(s6)) == -1 &&
	    errno != EINPROGRESS) {
		close(fd);
		return; /* no ::1 here */
	}
	exchange(f, fd, req, strlen(req), &r);
	expect(&r, 200, TEXT, "ok");
	resp_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
	    cmocka_unit_test_teardown(test_no_token, teardown),
	    cmocka_unit_test_teardown(test_no_token_insecure, teardown),
	    cmocka_unit_test_setup_teardown(test_get_initial, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_405, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_post_put_replace, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_empty_post_resets, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_policy, setup, teardown),
	    cmocka_unit_test_teardown(test_max_rules, teardown),
	    cmocka_unit_test_setup_teardown(test_patch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_patch_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delete, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_delete_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_commit_failure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_vault_check, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_body_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_header_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_healthz_readyz, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_metrics, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_status, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_connections, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drip_head, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drip_body, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_chunked_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_auth_backoff, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_racing_patches, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deferred, setup, teardown),
	    cmocka_unit_test_teardown(test_unix_socket, teardown),
	    cmocka_unit_test_teardown(test_unix_socket_not_clobbered, teardown),
	    cmocka_unit_test(test_parse_addr),
	    cmocka_unit_test_teardown(test_dual_stack, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
