/*
 * api_fixture: the API server's tests' shared fixture. The API runs on its
 * own event_base bound to 127.0.0.1:0; fake hooks stand in for the daemon
 * (a commit that records, and fails on demand); a raw-socket client in the
 * same thread drives the loop and compares status, headers and body bytes
 * exactly. Each test_api_<seam>.c that goes over a socket links
 * api_fixture.c (a static library per directory, tests/unit/CMakeLists.txt).
 */
#ifndef EGRESSD_TEST_API_FIXTURE_H
#define EGRESSD_TEST_API_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "egressd/api/api.h"
#include "egressd/base/log.h"
#include "egressd/base/stats.h"

#define TOKEN "s3cret-token"
#define TEXT "text/plain; charset=utf-8"
#define JSON "application/json"

#define POL_A                                                                  \
	"{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","       \
	"\"target\":\"a.example.com\"},{\"action\":\"deny\",\"target\":"       \
	"\"*.b.example.com\"}]}"

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

/* The commit queue's stand-in (hooks.mutate, not set by fx_alloc): holds
 * the mutation in f->held; 503's words when f->queue_full or held is full. */
int fx_mutate(void *arg, struct api_mutation *m, struct err *e);
/* What the daemon's queue does at the mutation's turn, here and now. */
void fx_complete(struct fx *f, size_t i);

/* ---- fixture ---- */

/* The fake daemon's hooks and the test's options (token TOKEN, short
 * deadlines), a log file and a deny-all policy; not started. */
struct fx *fx_alloc(void);
/* api_new with f's options and hooks; fails the test if it fails. */
void fx_start(struct fx *f);
/* fx_alloc and fx_start; for cmocka_unit_test_setup_teardown. */
int setup(void **state);
/* Frees what setup (or a test's own fx_alloc) made; f->api may be NULL. */
int teardown(void **state);
/* The log file so far; caller frees. */
char *fx_logs(struct fx *f);

/* ---- client ---- */

/* A non-blocking TCP connection to the API's port, maybe in progress. */
int client_connect(struct fx *f);
/* The same to the Unix socket at path. */
int client_connect_unix(const char *path);
/* Spins the server loop a little. */
void spin(struct fx *f, int ms);
/* Sends req on fd while running the server loop, reads until the server
 * closes (requests say Connection: close) or the deadline passes; closes
 * fd. resp_free the answer. */
void exchange(
    struct fx *f, int fd, const char *req, size_t reqlen, struct resp *r);
void resp_free(struct resp *r);
/* One request with Connection: close and Content-Length; extra is header
 * lines ("Name: value\r\n" each) or NULL. */
void call_full(struct fx *f, const char *method, const char *path,
    const char *extra, const char *body, size_t bodylen, struct resp *r);
/* With the right token in OPENSANDBOX-EGRESS-AUTH. */
void call(struct fx *f, const char *method, const char *path, const char *body,
    struct resp *r);
/* The value of r's header name, into out; NULL without one. */
const char *header(
    const struct resp *r, const char *name, char *out, size_t outlen);
/* Exact status, Content-Type and body bytes (NULL: not compared). */
void expect(
    const struct resp *r, int status, const char *ctype, const char *body);
/* expect with TEXT, and X-Content-Type-Options: nosniff. */
void expect_text(const struct resp *r, int status, const char *body);
/* TEXT, a body that starts with prefix and ends in a newline. */
void expect_prefix(const struct resp *r, int status, const char *prefix);
/* call, then expect. */
void roundtrip(struct fx *f, const char *method, const char *path,
    const char *body, int status, const char *ctype, const char *want);
/* GET /policy answers 200, JSON, want. */
void get_policy_is(struct fx *f, const char *want);
/* Reads what arrives on fd within ms while running the server loop: recv's
 * answer, or -1 when nothing came. */
ssize_t read_some(struct fx *f, int fd, char *buf, size_t len, int ms);

#endif
