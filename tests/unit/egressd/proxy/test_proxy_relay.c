/* Tests of egressd/proxy/proxy_relay.c: the HTTP/1.1 relay between a
 * client and an origin, driven over two bufferevent pairs (no sockets,
 * no TLS, no vault): pipelining, 1xx, HEAD, close-delimited and chunked
 * bodies, trailers; each request judged by the request rules (issue 37). A connection is made the way proxy_dial and
 * proxy_connect leave it (proxy_int.h), then proxy_connect_start_relay runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "egressd/base/log.h"
#include "egressd/proxy/proxy.h"
#include "egressd/proxy/proxy_int.h"
#include "policy/policy.h"

struct fx {
	struct event_base *base;
	struct log lg;
	int devnull;
	struct proxy *p;
	struct proxy_conn *c;
	struct bufferevent *app; /* the client's end */
	struct bufferevent *origin; /* the origin's end */
	struct policy *pol; /* in force for the hook; NULL: none */
	unsigned judged; /* calls of the judge hook */
	enum proxy_reason verdict; /* its answer (PROXY_OK from setup) */
	uint64_t gen; /* what judge_gen says */
};

/* The policy in force, as the daemon lends it. */
static struct policy *
policy_get(void *arg)
{
	return ((struct fx *)arg)->pol;
}

/* Request rules on example.test: GET under /ok, nothing else. */
static struct policy *
rules(const char *yaml)
{
	struct policy_diag d;
	struct policy *p;

	policy_diag_init(&d);
	p = policy_parse_yaml(yaml, strlen(yaml), "test", &d);
	if (p == NULL && d.n > 0)
		fail_msg("%s", d.msgs[0]);
	assert_non_null(p);
	policy_diag_clear(&d);
	return p;
}

#define RULES_OK_ONLY                                                          \
	"egress:\n"                                                            \
	"  - {action: allow, target: example.test, methods: [GET],\n"          \
	"     paths: [\"/ok*\"]}\n"

static enum proxy_reason
judge_ok(void *arg, const char *name, const struct addr *dst, uint16_t port)
{
	struct fx *f = arg;

	(void)name;
	(void)dst;
	(void)port;
	f->judged++;
	return f->verdict;
}

static uint64_t
judge_gen(void *arg)
{
	return ((struct fx *)arg)->gen;
}

/* The origin side's events, as proxy_up_event has them once relaying. */
static void
up_event_cb(struct bufferevent *b, short what, void *arg)
{
	struct proxy_conn *c = proxy_conn_arg(arg);

	proxy_conn_touch(c);
	if (c->st == PROXY_ST_RELAY)
		proxy_relay_event(c, b, what);
}

/* A plain HTTP connection to 192.0.2.1:80, connected, not yet relaying:
 * cli and up are the proxy's ends of two pairs. */
static struct proxy_conn *
conn_attach(struct fx *f)
{
	struct proxy *p = f->p;
	struct proxy_conn *c = calloc(1, sizeof(*c));
	struct bufferevent *cp[2], *up[2];

	assert_non_null(c);
	assert_int_equal(
	    bufferevent_pair_new(
	        f->base, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS, cp),
	    0);
	assert_int_equal(
	    bufferevent_pair_new(
	        f->base, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS, up),
	    0);
	c->magic = PROXY_CONN_MAGIC;
	c->p = p;
	c->fd = -1;
	c->proto = PROTO_HTTP;
	c->st = PROXY_ST_CONNECT;
	c->t0_ms = c->last_ms = 1;
	assert_true(addr_parse_ip("192.0.2.1", 9, &c->dst));
	c->dport = 80;
	c->timer = evtimer_new(f->base, proxy_conn_timer_cb, c);
	assert_non_null(c->timer);
	p->st.accepted++;
	p->st.active++;
	p->st.by_state[PROXY_ST_CONNECT]++;
	c->next = p->conns;
	if (p->conns != NULL)
		p->conns->prev = c;
	p->conns = c;
	c->cli = cp[1];
	c->up = up[0];
	f->app = cp[0];
	f->origin = up[1];
	bufferevent_setcb(
	    c->cli, p->cli_read_cb, p->cli_write_cb, p->cli_event_cb, c);
	bufferevent_setcb(c->up, proxy_relay_up_read_cb, proxy_relay_write_cb,
	    up_event_cb, c);
	c->origin.keep = true;
	bufferevent_enable(f->app, EV_READ | EV_WRITE);
	bufferevent_enable(f->origin, EV_READ | EV_WRITE);
	return c;
}

static int
setup(void **state)
{
	static struct fx f;
	struct proxy_opts o;
	struct proxy_hooks h;
	struct err e = {""};

	memset(&f, 0, sizeof(f));
	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	f.base = event_base_new();
	assert_non_null(f.base);
	f.devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(f.devnull >= 0);
	log_init(&f.lg, f.devnull, LOG_ERROR);
	o.listen4 = o.listen6 = ""; /* no listener: connections by hand */
	h.judge = judge_ok;
	h.judge_gen = judge_gen;
	h.policy_get = policy_get;
	h.arg = &f;
	f.p = proxy_new(f.base, &o, &h, &f.lg, &e);
	assert_non_null(f.p);
	f.c = conn_attach(&f);
	proxy_connect_start_relay(f.c);
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	proxy_free(f->p);
	policy_unref(f->pol);
	bufferevent_free(f->app);
	bufferevent_free(f->origin);
	event_base_free(f->base);
	log_clear(&f->lg);
	close(f->devnull);
	return 0;
}

/* The loop run until nothing is left to do this turn. */
static void
spin(struct fx *f)
{
	int i;

	for (i = 0; i < 20; i++)
		(void)event_base_loop(f->base, EVLOOP_NONBLOCK);
}

static void
put(struct bufferevent *b, const char *s)
{
	assert_int_equal(bufferevent_write(b, s, strlen(s)), 0);
}

/* What b has received, taken (NUL-terminated, static). */
static const char *
take(struct bufferevent *b)
{
	static char buf[8192];
	struct evbuffer *in = bufferevent_get_input(b);
	size_t n = evbuffer_get_length(in);

	assert_true(n < sizeof(buf));
	assert_int_equal(evbuffer_remove(in, buf, n), (int)n);
	buf[n] = '\0';
	return buf;
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: example.test\r\n\r\n"

/* Two requests in one write go up as they came, two records queued;
 * their answers come back in order and empty the queue. */
static void
test_pipelining(void **state)
{
	struct fx *f = *state;
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
	                   "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb";

	put(f->app, GET("/a") GET("/b"));
	spin(f);
	assert_string_equal(take(f->origin), GET("/a") GET("/b"));
	assert_int_equal(f->c->relay.rq_n, 2);
	put(f->origin, resp);
	spin(f);
	assert_string_equal(take(f->app), resp);
	assert_int_equal(f->c->relay.rq_n, 0);
	assert_true(proxy_conn_relaying(f->c));
}

/* A 100 Continue is relayed and answers nothing: the final response
 * still belongs to the request. */
static void
test_interim(void **state)
{
	struct fx *f = *state;
	const char *cont = "HTTP/1.1 100 Continue\r\n\r\n";
	const char *fin = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

	put(f->app, GET("/x"));
	spin(f);
	(void)take(f->origin);
	put(f->origin, cont);
	spin(f);
	assert_string_equal(take(f->app), cont);
	assert_int_equal(f->c->relay.rq_n, 1);
	put(f->origin, fin);
	spin(f);
	assert_string_equal(take(f->app), fin);
	assert_int_equal(f->c->relay.rq_n, 0);
}

/* The answer to HEAD has no body whatever its Content-Length says: the
 * next response starts right after its head. */
static void
test_head(void **state)
{
	struct fx *f = *state;
	const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
	                   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";

	put(f->app, "HEAD /h HTTP/1.1\r\nHost: example.test\r\n\r\n" GET("/g"));
	spin(f);
	(void)take(f->origin);
	assert_int_equal(f->c->relay.rq_n, 2);
	put(f->origin, resp);
	spin(f);
	assert_string_equal(take(f->app), resp);
	assert_int_equal(f->c->relay.rq_n, 0);
	assert_int_equal(f->c->relay.rphase, H_HEAD);
}

/* A body without length ends with the origin's close: relayed whole,
 * then the origin's EOF seen. */
static void
test_close_delimited(void **state)
{
	struct fx *f = *state;
	const char *resp = "HTTP/1.1 200 OK\r\n\r\nuntil the end";

	put(f->app, GET("/c"));
	spin(f);
	(void)take(f->origin);
	put(f->origin, resp);
	spin(f);
	assert_int_equal(f->c->relay.rphase, H_BODY);
	assert_int_equal(f->c->relay.rbody.kind, HTTP_BODY_CLOSE);
	assert_string_equal(take(f->app), resp);
	(void)bufferevent_flush(f->origin, EV_WRITE, BEV_FINISHED);
	spin(f);
	/* the end of the body: FIN toward the client once it has it */
	assert_false(f->c->closed);
	assert_true(f->c->relay.up_eof);
	assert_true(f->c->relay.cli_shut);
}

/* A chunked response with a trailer section, then the next response:
 * the framing (trailers included) ends where it should. */
static void
test_chunked_trailers(void **state)
{
	struct fx *f = *state;
	const char *resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
	                   "\r\n5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n"
	                   "HTTP/1.1 204 No Content\r\n\r\n";

	put(f->app, GET("/1") GET("/2"));
	spin(f);
	(void)take(f->origin);
	put(f->origin, resp);
	spin(f);
	assert_string_equal(take(f->app), resp);
	assert_int_equal(f->c->relay.rq_n, 0);
	assert_true(proxy_conn_relaying(f->c));
}

/* A chunked request body goes up by its framing, and the request after
 * it is read as a request. */
static void
test_chunked_request(void **state)
{
	struct fx *f = *state;
	const char *req = "POST /p HTTP/1.1\r\nHost: example.test\r\n"
	                  "Transfer-Encoding: chunked\r\n\r\n"
	                  "3\r\nabc\r\n0\r\n\r\n" GET("/after");

	put(f->app, req);
	spin(f);
	assert_string_equal(take(f->origin), req);
	assert_int_equal(f->c->relay.rq_n, 2);
	assert_int_equal(f->c->relay.hphase, H_HEAD);
}

/* A response nobody asked for closes the connection; the struct lives
 * until the next loop turn (the graveyard), then is freed. */
static void
test_unasked_response_closes(void **state)
{
	struct fx *f = *state;

	put(f->origin, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	(void)event_base_loop(f->base, EVLOOP_NONBLOCK | EVLOOP_ONCE);
	spin(f);
	assert_null(f->p->conns);
	assert_null(f->p->graveyard);
}

/* The answer to a denied request: 403 with the reason in its header and
 * a JSON body naming the request, the connection closing after it. */
static void
assert_denied(const char *got, const char *status, const char *reason,
    const char *method, const char *path)
{
	char want[512];

	assert_non_null(strstr(got, status));
	(void)snprintf(
	    want, sizeof(want), "\r\nX-Egress-Denied: %s\r\n", reason);
	assert_non_null(strstr(got, want));
	assert_non_null(strstr(got, "\r\nConnection: close\r\n"));
	(void)snprintf(want, sizeof(want),
	    "{\"error\":\"egress_denied\",\"reason\":\"%s\","
	    "\"host\":\"example.test\",\"method\":\"%s\",\"path\":\"%s\"",
	    reason, method, path);
	assert_non_null(strstr(got, want));
}

/* Pipelined: each request judged on its own. The allowed one goes up and
 * is answered; the denied one, and all after it, never reach the origin;
 * its 403 follows the answer before it. */
static void
test_rules_pipelined(void **state)
{
	struct fx *f = *state;
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na";
	const char *got;

	f->pol = rules(RULES_OK_ONLY);
	put(f->app,
	    GET("/ok/1") "DELETE /ok/1 HTTP/1.1\r\nHost: "
	                 "example.test\r\n\r\n" GET("/ok/2"));
	spin(f);
	assert_string_equal(take(f->origin), GET("/ok/1"));
	put(f->origin, ok);
	spin(f);
	got = take(f->app);
	assert_memory_equal(got, ok, strlen(ok));
	assert_denied(
	    got + strlen(ok), "HTTP/1.1 403 ", "method", "DELETE", "/ok/1");
	assert_null(strstr(got, "\"rule\"")); /* the default decided */
	assert_string_equal(take(f->origin), "");
	assert_int_equal(f->p->st.denied[POLICY_REQ_METHOD], 1);
}

/* The path judged is the normalized one: dot segments cannot climb out
 * of an allowed prefix, and a path that cannot be normalized is 400. */
static void
test_rules_path_tricks(void **state)
{
	struct fx *f = *state;

	f->pol = rules(RULES_OK_ONLY);
	put(f->app, GET("/ok/%2e%2e/secret"));
	spin(f);
	assert_string_equal(take(f->origin), "");
	assert_denied(take(f->app), "HTTP/1.1 403 ", "path", "GET", "/secret");
	assert_int_equal(f->p->st.denied[POLICY_REQ_PATH], 1);
}

static void
test_rules_unjudgeable_path(void **state)
{
	struct fx *f = *state;

	f->pol = rules(RULES_OK_ONLY);
	put(f->app, GET("/ok//x"));
	spin(f);
	assert_string_equal(take(f->origin), "");
	assert_denied(
	    take(f->app), "HTTP/1.1 400 ", "invalid", "GET", "/ok//x");
	assert_int_equal(f->p->st.denied[POLICY_REQ_INVALID], 1);
}

/* A new policy applies from the next request of an open connection. */
static void
test_rules_policy_change(void **state)
{
	struct fx *f = *state;
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na";
	const char *got;

	f->pol = rules(RULES_OK_ONLY);
	put(f->app, GET("/ok/1"));
	spin(f);
	assert_string_equal(take(f->origin), GET("/ok/1"));
	put(f->origin, ok);
	spin(f);
	assert_string_equal(take(f->app), ok);
	policy_unref(f->pol);
	f->pol =
	    rules("egress:\n"
	          "  - {action: deny, target: example.test, methods: [GET]}\n"
	          "  - {action: allow, target: example.test}\n");
	put(f->app, GET("/ok/1"));
	spin(f);
	assert_string_equal(take(f->origin), "");
	got = take(f->app);
	assert_denied(got, "HTTP/1.1 403 ", "method", "GET", "/ok/1");
	assert_non_null(strstr(got, ",\"rule\":0}"));
}

/* A request and its answer through the relay. */
static void
round_trip(struct fx *f, const char *req)
{
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na";

	put(f->app, req);
	spin(f);
	assert_string_equal(take(f->origin), req);
	put(f->origin, ok);
	spin(f);
	assert_string_equal(take(f->app), ok);
}

/* The connection's name, once allowed, is not judged again until
 * hooks.judge_gen moves (a new policy, a learned address gone); then
 * the judge's refusal applies from the next request. */
static void
test_judge_kept_per_generation(void **state)
{
	struct fx *f = *state;
	const char *got;

	round_trip(f, GET("/a")); /* judged: the connection's first Host */
	round_trip(f, GET("/b")); /* judged again, and kept */
	round_trip(f, GET("/c")); /* kept */
	round_trip(f, GET("/d"));
	assert_int_equal(f->judged, 2);
	/* another name is judged every time */
	round_trip(f, "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n");
	assert_int_equal(f->judged, 3);
	round_trip(f, GET("/e"));
	assert_int_equal(f->judged, 3);
	/* the generation moves: judged again, and now refused */
	f->gen++;
	f->verdict = PROXY_ADDR_MISMATCH;
	put(f->app, GET("/f"));
	spin(f);
	assert_string_equal(take(f->origin), "");
	got = take(f->app);
	assert_true(strncmp(got, "HTTP/1.1 403 ", 13) == 0);
	assert_int_equal(f->judged, 4);
}

/* Without request rules for the host, requests are judged by host only:
 * every method and path goes. */
static void
test_rules_none_for_host(void **state)
{
	struct fx *f = *state;
	const char *del = "DELETE /x HTTP/1.1\r\nHost: example.test\r\n\r\n";

	f->pol =
	    rules("egress:\n"
	          "  - {action: allow, target: other.test, methods: [GET]}\n"
	          "  - {action: allow, target: example.test}\n");
	put(f->app, del);
	spin(f);
	assert_string_equal(take(f->origin), del);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pipelining, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_interim, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_head, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_close_delimited, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_chunked_trailers, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_chunked_request, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_unasked_response_closes, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_rules_pipelined, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_rules_path_tricks, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_rules_unjudgeable_path, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_rules_policy_change, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_rules_none_for_host, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_judge_kept_per_generation, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
