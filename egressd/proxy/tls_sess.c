/*
 * tls_sess: the proxy's upstream session cache (tls_sess.h). A small
 * array searched linearly: at most TLS_SESS_MAX entries, one search per
 * new upstream connection and one per close, against a TLS handshake.
 */
#include <stdlib.h>
#include <string.h>

#include "egressd/proxy/tls_sess.h"

struct tls_sess_ent {
	char name[TLS_SESS_NAME_MAX + 1];
	struct addr dst;
	uint16_t port;
	SSL_SESSION *s; /* NULL: free slot */
	uint64_t used; /* tick of the last put, for replacement */
};

struct tls_sess_cache {
	struct tls_sess_ent e[TLS_SESS_MAX];
	uint64_t tick;
	size_t n;
};

struct tls_sess_cache *
tls_sess_new(void)
{
	return calloc(1, sizeof(struct tls_sess_cache));
}

void
tls_sess_free(struct tls_sess_cache *t)
{
	size_t i;

	if (t == NULL)
		return;
	for (i = 0; i < TLS_SESS_MAX; i++)
		SSL_SESSION_free(t->e[i].s);
	free(t);
}

static struct tls_sess_ent *
find(struct tls_sess_cache *t, const char *name, const struct addr *dst,
    uint16_t port)
{
	size_t i;

	for (i = 0; i < TLS_SESS_MAX; i++) {
		struct tls_sess_ent *x = &t->e[i];
		if (x->s != NULL && x->port == port &&
		    x->dst.family == dst->family &&
		    memcmp(x->dst.a, dst->a, sizeof(x->dst.a)) == 0 &&
		    strcmp(x->name, name) == 0)
			return x;
	}
	return NULL;
}

int
tls_sess_offer(struct tls_sess_cache *t, SSL *ssl, const char *name,
    const struct addr *dst, uint16_t port)
{
	struct tls_sess_ent *x;

	if (t == NULL || (x = find(t, name, dst, port)) == NULL)
		return 0;
	return SSL_set_session(ssl, x->s) == 1 ? 1 : 0;
}

static void
drop(struct tls_sess_cache *t, struct tls_sess_ent *x)
{
	SSL_SESSION_free(x->s);
	x->s = NULL;
	t->n--;
}

void
tls_sess_keep(struct tls_sess_cache *t, SSL *ssl, bool ok, const char *name,
    const struct addr *dst, uint16_t port)
{
	SSL_SESSION *s = SSL_get_session(ssl);
	struct tls_sess_ent *x;
	size_t i;

	if (t == NULL || strlen(name) > TLS_SESS_NAME_MAX)
		return;
	x = find(t, name, dst, port);
	if (!ok || s == NULL || !SSL_SESSION_is_resumable(s)) {
		if (x != NULL)
			drop(t, x);
		return;
	}
	if (x != NULL && x->s == s)
		return; /* the session it resumed, still good */
	if (x == NULL) {
		/* a free slot, else the least recently kept */
		x = &t->e[0];
		for (i = 0; i < TLS_SESS_MAX && x->s != NULL; i++)
			if (t->e[i].s == NULL || t->e[i].used < x->used)
				x = &t->e[i];
		if (x->s != NULL)
			drop(t, x);
		(void)strcpy(x->name, name);
		x->dst = *dst;
		x->port = port;
	} else
		drop(t, x);
	if (SSL_SESSION_up_ref(s) != 1)
		return;
	x->s = s;
	x->used = ++t->tick;
	t->n++;
}

size_t
tls_sess_count(const struct tls_sess_cache *t)
{
	return t != NULL ? t->n : 0;
}
