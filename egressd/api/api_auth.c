/*
 * api_auth: the token check (constant time) and the per-peer backoff of
 * wrong tokens (struct api_peer, api_int.h).
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
#include <sys/queue.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include "egressd/api/api.h"
#include "egressd/api/api_frame.h"
#include "egressd/api/api_int.h"
#include "egressd/proto/http_head.h"
#include "egressd/base/log.h"
#include "egressd/base/metrics.h"
#include "egressd/base/stats.h"
#include "util/addr.h"
#include "util/now.h"
#include "util/secmem.h"

#define API_TOKEN_HEADER "OPENSANDBOX-EGRESS-AUTH"

/* ---- auth ---- */

bool
api_auth_token_matches(const struct api *a, const char *got)
{
	if (got == NULL)
		return false;
	return secmem_equal(got, strlen(got), a->token, a->tokenlen);
}

bool
api_auth_authorized(const struct api *a, struct evhttp_request *req)
{
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	const char *v;
	bool ok = false;

	if (a->token == NULL)
		return true;
	ok |=
	    api_auth_token_matches(a, evhttp_find_header(ih, API_TOKEN_HEADER));
	v = evhttp_find_header(ih, "Authorization");
	if (v != NULL && strncasecmp(v, "Bearer ", 7) == 0) {
		v += 7;
		while (*v == ' ' || *v == '\t')
			v++;
		ok |= api_auth_token_matches(a, v);
	}
	return ok;
}

/* ---- wrong tokens back off, per peer ---- */

void
api_auth_peer_key(const struct sockaddr *sa, uint8_t key[17])
{
	memset(key, 0, 17);
	if (sa == NULL)
		return;
	key[0] = (uint8_t)sa->sa_family;
	if (sa->sa_family == AF_INET)
		memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
		    &((const struct sockaddr_in6 *)sa)->sin6_addr;
		/* IPv4 peers on a dual-stack listener: their own address,
		 * not the /64 every IPv4 peer shares (::ffff:0:0/64). */
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			key[0] = AF_INET;
			memcpy(key + 1, a6->s6_addr + 12, 4);
		} else
			memcpy(key + 1, a6->s6_addr, 8); /* the /64 */
	}
}

/* Loopback or the Unix socket: the transports vault writes accept
 * besides TLS (contract §4), which this API does not serve. */
bool
api_auth_peer_local(const struct sockaddr *sa)
{
	const uint8_t *a;

	if (sa == NULL)
		return false;
	if (sa->sa_family == AF_UNIX)
		return true;
	if (sa->sa_family == AF_INET)
		return ((const uint8_t *)&((const struct sockaddr_in *)sa)
		               ->sin_addr)[0] == 127;
	if (sa->sa_family != AF_INET6)
		return false;
	a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	if (IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)a))
		return true;
	return IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a) && a[12] == 127;
}

static struct api_peer *
api_peer_find(struct api *a, const uint8_t key[17], uint64_t now)
{
	size_t i;

	for (i = 0; i < API_AUTH_PEERS; i++) {
		struct api_peer *p = &a->peers[i];
		if (!p->used)
			continue;
		if (now - p->last_us > (uint64_t)API_AUTH_FORGET_S * 1000000u &&
		    now >= p->until_us) {
			p->used = false; /* quiet long enough: forgotten */
			continue;
		}
		if (memcmp(p->key, key, 17) == 0)
			return p;
	}
	return NULL;
}

/* Seconds left of the peer's backoff, 0 when it may try a token. */
unsigned
api_auth_backoff_s(struct api *a, const uint8_t key[17], uint64_t now)
{
	struct api_peer *p = api_peer_find(a, key, now);

	if (p == NULL || now >= p->until_us)
		return 0;
	return (unsigned)((p->until_us - now + 999999u) / 1000000u);
}

void
api_auth_failed(
    struct api *a, const uint8_t key[17], uint64_t now, const char *peer)
{
	struct api_peer *p = api_peer_find(a, key, now);
	uint64_t ms;
	size_t i;

	if (p == NULL) {
		/* A free entry, else the one quiet the longest. */
		p = &a->peers[0];
		for (i = 0; i < API_AUTH_PEERS; i++) {
			if (!a->peers[i].used) {
				p = &a->peers[i];
				break;
			}
			if (a->peers[i].last_us < p->last_us)
				p = &a->peers[i];
		}
		memset(p, 0, sizeof(*p));
		p->used = true;
		memcpy(p->key, key, 17);
	}
	if (p->fails < UINT32_MAX)
		p->fails++;
	p->last_us = now;
	if (p->fails <= API_AUTH_FREE_FAILS)
		return;
	ms = a->timing.backoff_ms;
	for (i = API_AUTH_FREE_FAILS + 1;
	     i < p->fails && ms < API_AUTH_BACKOFF_MAX_MS; i++)
		ms *= 2;
	if (ms > API_AUTH_BACKOFF_MAX_MS)
		ms = API_AUTH_BACKOFF_MAX_MS;
	p->until_us = now + ms * 1000u;
	if (p->fails == API_AUTH_FREE_FAILS + 1)
		log_warn(a->log, "api.auth_backoff", LOG_S("peer", peer),
		    LOG_U("failures", p->fails), LOG_U("backoff_ms", ms));
}

void
api_auth_ok(struct api *a, const uint8_t key[17], uint64_t now)
{
	struct api_peer *p = api_peer_find(a, key, now);

	if (p != NULL)
		p->used = false;
}

/* ---- TLS terminated by a trusted proxy ---- */

/* The peer's address, an IPv4-mapped IPv6 one as IPv4 (a dual-stack
 * listener reports IPv4 peers so). */
static bool
api_auth_peer_addr(const struct sockaddr *sa, struct addr *out)
{
	uint16_t port;

	if (sa == NULL || addr_from_sockaddr(sa, out, &port) == -1)
		return false;
	if (out->family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)out->a)) {
		memmove(out->a, out->a + 12, 4);
		memset(out->a + 4, 0, 12);
		out->family = AF_INET;
	}
	return true;
}

static bool
api_auth_forwarded_https(struct evhttp_request *req)
{
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	struct evkeyval *kv;
	const char *v = NULL, *end;
	size_t n = 0;

	TAILQ_FOREACH(kv, ih, next)
	{
		if (strcasecmp(kv->key, "X-Forwarded-Proto") != 0)
			continue;
		v = kv->value;
		n++;
	}
	if (n != 1 || v == NULL)
		return false;
	while (*v == ' ' || *v == '\t')
		v++;
	end = v + strlen(v);
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	return end - v == 5 && strncasecmp(v, "https", 5) == 0;
}

bool
api_auth_forwarded_tls(
    const struct api *a, const struct sockaddr *sa, struct evhttp_request *req)
{
	struct addr peer;
	size_t i;

	if (a->ntrusted_proxies == 0 || !api_auth_peer_addr(sa, &peer))
		return false;
	for (i = 0; i < a->ntrusted_proxies; i++) {
		const struct api_cidr *c = &a->trusted_proxies[i];
		struct addr m = peer;

		if (c->net.family != peer.family)
			continue;
		addr_mask(&m, c->plen);
		if (memcmp(m.a, c->net.a, addr_bits(&m) / 8) == 0)
			return api_auth_forwarded_https(req);
	}
	return false;
}
