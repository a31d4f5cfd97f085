/*
 * api_auth_forwarded_tls: a trusted proxy's X-Forwarded-Proto: https
 * counts as TLS for vault writes; nobody else's, and nothing vaguer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/http.h>

#include "egressd/api/api_int.h"

static struct api *
api_with(const char *const *cidrs, const unsigned *plens, size_t n)
{
	struct api *a = calloc(1, sizeof(*a));
	size_t i;

	assert_non_null(a);
	for (i = 0; i < n; i++) {
		struct api_cidr *c = &a->trusted_proxies[i];
		bool v6 = strchr(cidrs[i], ':') != NULL;

		c->net.family = v6 ? AF_INET6 : AF_INET;
		assert_int_equal(
		    inet_pton(c->net.family, cidrs[i], c->net.a), 1);
		c->plen = plens[i];
	}
	a->ntrusted_proxies = n;
	return a;
}

static struct sockaddr_storage
peer(const char *ip)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(ip, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
	}
	return ss;
}

/* A request with the given X-Forwarded-Proto headers (NULL ends). */
static struct evhttp_request *
req_with(const char *const *protos)
{
	struct evhttp_request *r = evhttp_request_new(NULL, NULL);
	struct evkeyvalq *h;

	assert_non_null(r);
	h = evhttp_request_get_input_headers(r);
	for (; protos != NULL && *protos != NULL; protos++)
		assert_int_equal(
		    evhttp_add_header(h, "X-Forwarded-Proto", *protos), 0);
	return r;
}

static bool
forwarded(struct api *a, const char *ip, const char *const *protos)
{
	struct sockaddr_storage ss = peer(ip);
	struct evhttp_request *r = req_with(protos);
	bool ok = api_auth_forwarded_tls(a, (struct sockaddr *)&ss, r);

	evhttp_request_free(r);
	return ok;
}

static void
test_forwarded_tls(void **state)
{
	static const char *const cidrs[] = {"198.51.100.0", "2001:db8:1::"};
	static const unsigned plens[] = {24, 48};
	struct api *a = api_with(cidrs, plens, 2);
	(void)state;

	assert_true(
	    forwarded(a, "198.51.100.7", (const char *[]){"https", NULL}));
	assert_true(
	    forwarded(a, "198.51.100.7", (const char *[]){" HTTPS ", NULL}));
	assert_true(forwarded(
	    a, "::ffff:198.51.100.9", (const char *[]){"https", NULL}));
	assert_true(
	    forwarded(a, "2001:db8:1::5", (const char *[]){"https", NULL}));
	/* Outside the networks, the header means nothing. */
	assert_false(
	    forwarded(a, "198.51.101.7", (const char *[]){"https", NULL}));
	assert_false(
	    forwarded(a, "2001:db8:2::5", (const char *[]){"https", NULL}));
	assert_false(
	    forwarded(a, "203.0.113.5", (const char *[]){"https", NULL}));
	/* Inside, only one plain "https" counts. */
	assert_false(forwarded(a, "198.51.100.7", NULL));
	assert_false(
	    forwarded(a, "198.51.100.7", (const char *[]){"http", NULL}));
	assert_false(forwarded(
	    a, "198.51.100.7", (const char *[]){"https, http", NULL}));
	assert_false(forwarded(
	    a, "198.51.100.7", (const char *[]){"https", "https", NULL}));
	assert_false(
	    forwarded(a, "198.51.100.7", (const char *[]){"httpsx", NULL}));
	assert_false(forwarded(a, "198.51.100.7", (const char *[]){"", NULL}));
	free(a);

	/* No trusted proxies: never. */
	a = api_with(NULL, NULL, 0);
	assert_false(
	    forwarded(a, "198.51.100.7", (const char *[]){"https", NULL}));
	free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_forwarded_tls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
