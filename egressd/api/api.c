/*
 * api: the control API's server: the listeners (TCP, optionally TLS, and
 * the Unix socket), the evhttp servers over them, the routing of each
 * request (auth, backoff, route) and the module's life. See api.h for
 * the contract and docs/api.md for every answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include "egressd/api/api.h"
#include "egressd/base/tls_ctx.h"
#include "egressd/api/api_frame.h"
#include "egressd/api/api_int.h"
#include "egressd/proto/http_head.h"
#include "egressd/base/log.h"
#include "egressd/base/metrics.h"
#include "egressd/base/stats.h"
#include "util/addr.h"
#include "util/now.h"
#include "util/secmem.h"

#define API_PATH_MAX 256 /* raw request target kept for routing */

/* ---- routing ---- */

struct api_route {
	const char *path;
	bool prefix; /* path ends in '/' and matches everything below */
	bool auth; /* token required when one is configured */
	bool quiet; /* successful requests logged at debug level */
	void (*handler)(struct api_req *r);
};

/* Read-only table. */
static const struct api_route api_routes[] = {
    {.path = "/policy", .auth = true, .handler = api_policy_cb},
    {.path = "/credential-vault", .auth = true, .handler = api_credvault_cb},
    {.path = "/credential-vault/",
        .prefix = true,
        .auth = true,
        .handler = api_credvault_sub_cb},
    {.path = "/healthz", .quiet = true, .handler = api_status_healthz_cb},
    {.path = "/readyz", .quiet = true, .handler = api_status_readyz_cb},
    {.path = "/metrics",
        .auth = true,
        .quiet = true,
        .handler = api_status_metrics_cb},
    {.path = "/v1/status", .auth = true, .handler = api_status_cb},
};

static const struct api_route *
api_route_find(const char *path)
{
	size_t i;

	if (path == NULL)
		return NULL;
	for (i = 0; i < sizeof(api_routes) / sizeof(api_routes[0]); i++) {
		const struct api_route *rt = &api_routes[i];
		if (rt->prefix ? strncmp(path, rt->path, strlen(rt->path)) == 0
		               : strcmp(path, rt->path) == 0)
			return rt;
	}
	return NULL;
}

/*
 * evhttp parses CONNECT targets as authorities and leaves no path; route
 * those by the raw target up to '?' so "CONNECT /policy" still gets 405.
 */
static const char *
api_raw_path(struct evhttp_request *req, char *buf, size_t len)
{
	const char *u = evhttp_request_get_uri(req);
	size_t n;

	if (u == NULL)
		return NULL;
	n = strcspn(u, "?#");
	if (n >= len)
		return NULL;
	memcpy(buf, u, n);
	buf[n] = '\0';
	return buf;
}

static void
api_request_cb(struct evhttp_request *req, void *arg)
{
	struct api *a = arg;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct api_req r = {.a = a, .req = req, .status = 0};
	const struct api_route *rt;
	uint64_t t0 = now_mono_us();
	char *peer = r.peer;
	char rawpath[API_PATH_MAX];
	char *host = NULL;
	ev_uint16_t port = 0;
	uint8_t key[17] = {0};
	unsigned wait_s = 0;
	bool guarded;

	if (a == NULL || a->magic != API_MAGIC)
		abort();
	a->stats->api_requests++;
	r.cmd = evhttp_request_get_command(req);
	r.path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	if (r.path == NULL || r.path[0] == '\0')
		r.path = api_raw_path(req, rawpath, sizeof(rawpath));
	if (evcon != NULL) {
		evhttp_connection_get_peer(evcon, &host, &port);
		snprintf(peer, sizeof(r.peer), "%s:%u",
		    host != NULL ? host : "", (unsigned)port);
	}

	if (evcon != NULL) {
		api_auth_peer_key(evhttp_connection_get_addr(evcon), key);
		r.transport_ok =
		    api_auth_peer_local(evhttp_connection_get_addr(evcon)) ||
		    bufferevent_openssl_get_ssl(
		        evhttp_connection_get_bufferevent(evcon)) != NULL ||
		    api_auth_forwarded_tls(
		        a, evhttp_connection_get_addr(evcon), req);
	}
	rt = api_route_find(r.path);
	r.t0 = t0;
	r.quiet = rt != NULL && rt->quiet;
	guarded = rt != NULL && rt->auth && a->token != NULL;
	if (evcon != NULL && !api_conn_admit(a, evcon)) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Connection", "close");
		api_reply_text(&r, 503, "too many connections");
	} else if (rt == NULL) {
		api_reply_text(&r, 404, "404 page not found");
	} else if (guarded && (wait_s = api_auth_backoff_s(a, key, t0)) > 0) {
		char ra[16];
		/* The token is not even compared; the try still counts. */
		a->stats->api_unauthorized++;
		api_auth_failed(a, key, t0, peer);
		snprintf(ra, sizeof(ra), "%u", api_auth_backoff_s(a, key, t0));
		evhttp_add_header(
		    evhttp_request_get_output_headers(req), "Retry-After", ra);
		api_reply_text(
		    &r, 429, "too many failed authentication attempts");
	} else if (rt->auth && !api_auth_authorized(a, req)) {
		a->stats->api_unauthorized++;
		if (guarded)
			api_auth_failed(a, key, t0, peer);
		api_reply_text(&r, 401, "unauthorized");
	} else {
		if (guarded)
			api_auth_ok(a, key, t0);
		rt->handler(&r);
	}

	if (!r.deferred)
		api_reply_log(&r);
}

/* ---- listeners ---- */

int
api_parse_addr(
    const char *s, struct sockaddr_storage *ss, socklen_t *len, struct err *e)
{
	static const struct addr any6 = {.family = AF_INET6};
	struct addr a;
	uint16_t port;
	char buf[API_ADDR_MAX + 16];

	memset(ss, 0, sizeof(*ss));
	if (s == NULL || s[0] == '\0') {
		err_set(e, "empty listen address");
		return -1;
	}
	/* ":port" is every address, both families; "localhost" the IPv4
	 * loopback: the two spellings the reference accepts beside literals. */
	if (s[0] == ':')
		(void)snprintf(buf, sizeof(buf), "[::]%s", s);
	else if (strncmp(s, "localhost:", 10) == 0)
		(void)snprintf(buf, sizeof(buf), "127.0.0.1%s", s + 9);
	else
		(void)snprintf(buf, sizeof(buf), "%s", s);
	if (addr_parse_hostport(buf, 0, ADDR_PORT_REQUIRED | ADDR_PORT_ZERO_OK,
	        &a, &port, e) == -1) {
		err_set(e,
		    "listen address %.64s: expected IP:port, [IPv6]:port, "
		    ":port or localhost:port",
		    s);
		return -1;
	}
	*len = addr_to_sockaddr(s[0] == ':' ? &any6 : &a, port, ss);
	return 0;
}

static int
api_listen_fd(int fd, const struct sockaddr *sa, socklen_t salen)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		return -1;
	if (bind(fd, sa, salen) == -1)
		return -1;
	return listen(fd, API_BACKLOG);
}

static int
api_bind_tcp(struct api *a, const char *s, struct err *e)
{
	struct sockaddr_storage ss, got;
	socklen_t len, glen = sizeof(got);
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	bool any6;
	int fd, zero = 0;
	char ip[INET6_ADDRSTRLEN];

	if (api_parse_addr(s, &ss, &len, e) == -1)
		return -1;
	any6 =
	    ss.ss_family == AF_INET6 && IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
	fd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 && any6 && errno == EAFNOSUPPORT) {
		/* No IPv6 in this kernel: every address means IPv4 only. */
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		uint16_t port = s6->sin6_port;
		memset(&ss, 0, sizeof(ss));
		s4->sin_family = AF_INET;
		s4->sin_port = port;
		len = sizeof(*s4);
		any6 = false;
		fd = socket(
		    AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	}
	if (fd == -1) {
		err_set(e, "api listen %s: socket: %s", s, strerror(errno));
		return -1;
	}
	/* ":port" and "[::]:port" serve IPv4 too. */
	if (any6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) ==
	        -1) {
		err_set(
		    e, "api listen %s: IPV6_V6ONLY: %s", s, strerror(errno));
		close(fd);
		return -1;
	}
	if (api_listen_fd(fd, (struct sockaddr *)&ss, len) == -1 ||
	    getsockname(fd, (struct sockaddr *)&got, &glen) == -1) {
		err_set(e, "api listen %s: %s", s, strerror(errno));
		close(fd);
		return -1;
	}
	if ((a->tcp = evhttp_accept_socket_with_handle(a->http, fd)) == NULL) {
		err_set(e, "api listen %s: evhttp refused the socket", s);
		close(fd);
		return -1;
	}
	if (got.ss_family == AF_INET6) {
		struct sockaddr_in6 *g6 = (struct sockaddr_in6 *)&got;
		inet_ntop(AF_INET6, &g6->sin6_addr, ip, sizeof(ip));
		a->tcp_port = ntohs(g6->sin6_port);
		snprintf(a->tcp_text, sizeof(a->tcp_text), "tcp:[%s]:%u", ip,
		    a->tcp_port);
	} else {
		struct sockaddr_in *g4 = (struct sockaddr_in *)&got;
		inet_ntop(AF_INET, &g4->sin_addr, ip, sizeof(ip));
		a->tcp_port = ntohs(g4->sin_port);
		snprintf(a->tcp_text, sizeof(a->tcp_text), "tcp:%s:%u", ip,
		    a->tcp_port);
	}
	return 0;
}

static int
api_bind_unix(struct api *a, const char *path, unsigned mode, struct err *e)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		err_set(e, "api socket %s: path too long", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		/* A stale socket of an earlier run; anything else is not ours. */
		if (!S_ISSOCK(st.st_mode)) {
			err_set(e, "api socket %s: exists and is not a socket",
			    path);
			return -1;
		}
		if (unlink(path) == -1) {
			err_set(e, "api socket %s: unlink: %s", path,
			    strerror(errno));
			return -1;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		err_set(e, "api socket %s: %s", path, strerror(errno));
		return -1;
	}
	/* chmod between bind and listen: nobody can connect before. */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chmod(path, mode) == -1 || listen(fd, API_BACKLOG) == -1) {
		err_set(e, "api socket %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	if ((a->unix_path = strdup(path)) == NULL ||
	    (a->unx = evhttp_accept_socket_with_handle(a->http_unix, fd)) ==
	        NULL) {
		err_set(e, "api socket %s: cannot register", path);
		close(fd);
		unlink(path);
		return -1;
	}
	return 0;
}

/* One evhttp server as the API wants it; bevcb makes its connections. */
static unsigned
api_or(unsigned v, unsigned dflt)
{
	return v != 0 ? v : dflt;
}

static void
api_timing_set(struct api_timing *t, const struct api_timing *o)
{
	t->head_ms = api_or(o->head_ms, API_HEAD_TIMEOUT_MS);
	t->body_ms = api_or(o->body_ms, API_BODY_TIMEOUT_MS);
	t->linger_ms = api_or(o->linger_ms, API_LINGER_MS);
	t->backoff_ms = api_or(o->backoff_ms, API_AUTH_BACKOFF_MS);
	t->idle_s = api_or(o->idle_s, API_TIMEOUT_S);
}

static struct evhttp *
api_http_new(
    struct api *a, struct bufferevent *(*bevcb)(struct event_base *, void *))
{
	struct evhttp *h = evhttp_new(a->base);

	if (h == NULL)
		return NULL;
	/* Every method reaches api_request_cb so /policy can answer 405. */
	evhttp_set_allowed_methods(h, 0xffff);
	/* api_frame enforces the real bounds, answering in our format;
	 * evhttp's (twice as large) are only a backstop. */
	evhttp_set_max_body_size(h, 2 * (ev_ssize_t)API_BODY_MAX);
	evhttp_set_max_headers_size(h, 2 * (ev_ssize_t)API_HEADERS_MAX);
	evhttp_set_timeout(h, (int)a->timing.idle_s);
	/* Read (and drop) an oversized body before answering 413, so the
	 * client sees the answer instead of a reset. */
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_gencb(h, api_request_cb, a);
	evhttp_set_bevcb(h, bevcb, a);
	return h;
}

/* The TLS listener's context: egressd's floor (tls_ctx.h), the operator's
 * chain and key; NULL and e when they do not load or do not match. */
static SSL_CTX *
api_tls_ctx(const char *cert, const char *key, struct err *e)
{
	SSL_CTX *ctx = tls_ctx_new(true, e);
	char why[256];

	if (ctx == NULL)
		return NULL;
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		tls_ctx_error(why, sizeof(why));
		err_set(e, "api TLS (%s, %s): %s", cert, key, why);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static int
api_trusted_set(struct api *a, const struct api_opts *o, struct err *e)
{
	if (o->ntrusted_proxies > API_TRUSTED_PROXIES_MAX) {
		err_set(e, "api: more than %d trusted proxies",
		    API_TRUSTED_PROXIES_MAX);
		return -1;
	}
	memcpy(a->trusted_proxies, o->trusted_proxies,
	    o->ntrusted_proxies * sizeof(o->trusted_proxies[0]));
	a->ntrusted_proxies = o->ntrusted_proxies;
	return 0;
}

struct api *
api_new(struct event_base *base, const struct api_opts *o,
    const struct api_hooks *h, struct err *e)
{
	struct api *a;

	if (h->policy_get == NULL ||
	    (h->policy_commit == NULL && h->mutate == NULL) ||
	    h->enforcement_mode == NULL || o->log == NULL || o->stats == NULL) {
		err_set(e, "api: missing hook or option");
		return NULL;
	}
	if ((a = calloc(1, sizeof(*a))) == NULL) {
		err_set(e, "api: out of memory");
		return NULL;
	}
	a->magic = API_MAGIC;
	a->base = base;
	a->h = *h;
	a->insecure_no_token = o->insecure_no_token;
	a->max_rules = o->max_rules;
	api_timing_set(&a->timing, &o->timing);
	if (api_trusted_set(a, o, e) == -1)
		goto out_free;
	a->start_time_s = o->start_time_s;
	a->log = o->log;
	a->stats = o->stats;
	if (o->token != NULL && o->token[0] != '\0') {
		a->tokenlen = strlen(o->token);
		if ((a->token = strdup(o->token)) == NULL) {
			err_set(e, "api: out of memory");
			goto out_free;
		}
	}
	if (o->tls_cert != NULL && o->tls_cert[0] != '\0' &&
	    (a->tls = api_tls_ctx(o->tls_cert, o->tls_key, e)) == NULL)
		goto out_free;
	if ((a->http = api_http_new(
	         a, a->tls != NULL ? api_conn_bev_tls_cb : api_conn_bev_cb)) ==
	        NULL ||
	    (a->http_unix = api_http_new(a, api_conn_bev_cb)) == NULL) {
		err_set(e, "api: evhttp_new failed");
		goto out_free;
	}
	if ((a->ev_sweep = event_new(
	         base, -1, EV_PERSIST, api_conn_sweep_timer_cb, a)) == NULL) {
		err_set(e, "api: out of memory");
		goto out_free;
	}

	if (o->listen_tcp != NULL && o->listen_tcp[0] != '\0' &&
	    api_bind_tcp(a, o->listen_tcp, e) == -1)
		goto out_free;
	if (o->listen_unix != NULL && o->listen_unix[0] != '\0' &&
	    api_bind_unix(a, o->listen_unix,
	        o->unix_mode != 0 ? o->unix_mode : API_UNIX_MODE, e) == -1)
		goto out_free;

	if (a->token == NULL && a->insecure_no_token)
		log_warn(a->log, "api.insecure",
		    LOG_S("reason",
		        "no token configured; policy mutations "
		        "are allowed without authentication"));
	else if (a->token == NULL)
		log_warn(a->log, "api.read_only",
		    LOG_S("reason",
		        "no token configured; policy mutations "
		        "are refused (412)"));
	log_info(a->log, "api.listen", LOG_S("tcp", a->tcp_text),
	    LOG_B("tls", a->tls != NULL),
	    LOG_S("unix", a->unix_path != NULL ? a->unix_path : ""),
	    LOG_B("auth", a->token != NULL));
	return a;
out_free:
	api_free(a);
	return NULL;
}

int
api_set_token(struct api *a, const char *token, struct err *e)
{
	size_t n = strlen(token);
	char *t;

	if (n == 0) {
		err_set(e, "api: an empty token would turn auth off");
		return -1;
	}
	if ((t = strdup(token)) == NULL) {
		err_set(e, "api: out of memory");
		return -1;
	}
	if (a->token != NULL) {
		secmem_wipe(a->token, a->tokenlen);
		free(a->token);
	}
	a->token = t;
	a->tokenlen = n;
	return 0;
}

bool
api_token_is(const struct api *a, const char *token)
{
	return a->token != NULL && api_auth_token_matches(a, token);
}

void
api_free(struct api *a)
{
	if (a == NULL)
		return;
	if (a->ev_sweep != NULL)
		event_free(a->ev_sweep);
	/* Frees every connection and closes the listeners. */
	if (a->http != NULL)
		evhttp_free(a->http);
	if (a->http_unix != NULL)
		evhttp_free(a->http_unix);
	SSL_CTX_free(a->tls);
	while (a->nall > 0)
		api_conn_free(a->conns[--a->nall]);
	if (a->unix_path != NULL) {
		if (a->unx != NULL)
			unlink(a->unix_path);
		free(a->unix_path);
	}
	if (a->token != NULL) {
		secmem_wipe(a->token, a->tokenlen);
		free(a->token);
	}
	a->magic = 0;
	free(a);
}

uint16_t
api_tcp_port(const struct api *a)
{
	return a->tcp != NULL ? a->tcp_port : 0;
}

size_t
api_connections(struct api *a)
{
	api_conn_sweep(a);
	return a->nconns;
}
