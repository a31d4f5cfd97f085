/* Tests of egressd/proxy/proxy_pool.c: keyed reuse, caps, and an idle entry
 * closed when its peer closes, talks, or it outlives the idle time.
 * Plain socketpair bufferevents stand in for the TLS ones: the pool
 * treats both alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "egressd/proxy/proxy_pool.h"
#include "ts_policy.h"
#include "vault/vault.h"

struct fx {
	struct event_base *base;
	struct proxy_pool *pp;
	struct addr a, b;
};

static int
setup(void **state)
{
	static struct fx f;

	memset(&f, 0, sizeof(f));
	f.base = event_base_new();
	assert_non_null(f.base);
	f.pp = proxy_pool_new(f.base, 4, 200);
	assert_non_null(f.pp);
	assert_true(addr_parse_ip("198.51.100.7", 12, &f.a));
	assert_true(addr_parse_ip("2001:db8::7", 11, &f.b));
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	proxy_pool_free(f->pp);
	event_base_free(f->base);
	return 0;
}

/* A connected pair: the pool's side (returned) and the peer's (*peer). */
static struct bufferevent *
pair(struct fx *f, int *peer)
{
	int sv[2];
	struct bufferevent *b;

	assert_int_equal(
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	b = bufferevent_socket_new(f->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(b);
	*peer = sv[1];
	return b;
}

static void
turn(struct fx *f)
{
	(void)event_base_loop(f->base, EVLOOP_NONBLOCK);
}

/* Taken back only under its own name, address and port, newest first. */
static void
test_keyed(void **state)
{
	struct fx *f = *state;
	int p1, p2, p3;
	struct bufferevent *b1 = pair(f, &p1), *b2 = pair(f, &p2),
	                   *b3 = pair(f, &p3);
	struct vault *v;

	proxy_pool_put(f->pp, b1, NULL, "api.example.com", &f->a, 443);
	proxy_pool_put(f->pp, b2, NULL, "api.example.com", &f->a, 443);
	proxy_pool_put(f->pp, b3, NULL, "api.example.com", &f->b, 443);
	assert_int_equal(proxy_pool_count(f->pp), 3);
	assert_null(
	    proxy_pool_take(f->pp, "other.example.com", &f->a, 443, &v));
	assert_null(proxy_pool_take(f->pp, "api.example.com", &f->a, 8443, &v));
	assert_ptr_equal(
	    proxy_pool_take(f->pp, "api.example.com", &f->a, 443, &v), b2);
	assert_ptr_equal(
	    proxy_pool_take(f->pp, "api.example.com", &f->a, 443, &v), b1);
	assert_null(proxy_pool_take(f->pp, "api.example.com", &f->a, 443, &v));
	assert_ptr_equal(
	    proxy_pool_take(f->pp, "api.example.com", &f->b, 443, &v), b3);
	assert_int_equal(proxy_pool_count(f->pp), 0);
	/* the taker owns them now */
	bufferevent_free(b1);
	bufferevent_free(b2);
	bufferevent_free(b3);
	close(p1);
	close(p2);
	close(p3);
}

/* Full: the oldest goes (its peer sees the close). */
static void
test_cap(void **state)
{
	struct fx *f = *state;
	int peer[5];
	struct bufferevent *b[5];
	char c;
	size_t i;

	for (i = 0; i < 5; i++) {
		b[i] = pair(f, &peer[i]);
		proxy_pool_put(f->pp, b[i], NULL, "h.example", &f->a, 443);
	}
	assert_int_equal(proxy_pool_count(f->pp), 4);
	turn(f); /* libevent finalizes a freed bufferevent in the loop */
	assert_int_equal(read(peer[0], &c, 1), 0); /* closed: EOF */
	assert_int_equal(read(peer[1], &c, 1), -1); /* open, nothing */
	assert_int_equal(proxy_pool_flush(f->pp), 4);
	turn(f);
	for (i = 0; i < 5; i++) {
		assert_int_equal(read(peer[i], &c, 1), 0);
		close(peer[i]);
	}
}

/* Idle entries go when the peer closes, when it sends bytes nobody
 * asked for, and after the idle time. */
static void
test_idle_close(void **state)
{
	struct fx *f = *state;
	int p1, p2, p3;
	struct bufferevent *b1 = pair(f, &p1), *b2 = pair(f, &p2),
	                   *b3 = pair(f, &p3);
	struct vault *v;

	proxy_pool_put(f->pp, b1, NULL, "h.example", &f->a, 443);
	proxy_pool_put(f->pp, b2, NULL, "h.example", &f->a, 443);
	proxy_pool_put(f->pp, b3, NULL, "h.example", &f->a, 443);
	turn(f);
	assert_int_equal(proxy_pool_count(f->pp), 3);
	close(p1);
	assert_int_equal(write(p2, "x", 1), 1);
	turn(f);
	turn(f);
	assert_int_equal(proxy_pool_count(f->pp), 1);
	usleep(250 * 1000);
	turn(f);
	assert_int_equal(proxy_pool_count(f->pp), 0);
	assert_null(proxy_pool_take(f->pp, "h.example", &f->a, 443, &v));
	close(p2);
	close(p3);
}

/* The vault reference a connection carries goes and comes back with it
 * (whoever takes it redacts against it); closed entries drop theirs
 * (LeakSanitizer sees one that is kept). */
static void
test_vault_travels(void **state)
{
	struct fx *f = *state;
	struct policy *pol = ts_policy_yaml(
	    "defaultAction: deny\n"
	    "egress:\n"
	    "  - {action: allow, target: h.example}\n"
	    "credentials:\n"
	    "  - {name: k, source: {type: inline, value: pool-s3cr3t}}\n"
	    "bindings:\n"
	    "  - name: h\n"
	    "    match: {hosts: [h.example]}\n"
	    "    auth: {type: bearer, credential: k}\n",
	    "pool.yaml");
	struct err e = {""};
	struct vault *vault = vault_new(pol, NULL, &e), *v = NULL;
	int p1, p2, p3;
	struct bufferevent *b1 = pair(f, &p1), *b2 = pair(f, &p2),
	                   *b3 = pair(f, &p3);

	assert_non_null(vault);
	policy_unref(pol);
	proxy_pool_put(f->pp, b1, vault_ref(vault), "h.example", &f->a, 443);
	proxy_pool_put(f->pp, b2, NULL, "h.example", &f->a, 443);
	proxy_pool_put(f->pp, b3, vault_ref(vault), "h.example", &f->b, 443);
	assert_ptr_equal(
	    proxy_pool_take(f->pp, "h.example", &f->a, 443, &v), b2);
	assert_null(v);
	assert_ptr_equal(
	    proxy_pool_take(f->pp, "h.example", &f->a, 443, &v), b1);
	assert_ptr_equal(v, vault);
	vault_free(v);
	assert_null(proxy_pool_take(f->pp, "h.example", &f->a, 443, &v));
	assert_null(v);
	/* b3 and its reference go with the flush */
	assert_int_equal(proxy_pool_flush(f->pp), 1);
	vault_free(vault);
	bufferevent_free(b1);
	bufferevent_free(b2);
	close(p1);
	close(p2);
	close(p3);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_keyed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_vault_travels, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
