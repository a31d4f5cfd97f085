/*
 * api_pending: answers that wait for the daemon's commit queue (struct
 * api_pending, api_int.h).
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

/* ---- answers that wait for the commit queue ---- */

struct api_pending *
api_pending_of(struct api_mutation *m)
{
	struct api_pending *p = (struct api_pending *)m;

	if (p == NULL || p->magic != API_PENDING_MAGIC)
		abort();
	return p;
}

/* Our connection of req, or NULL (a request of a test's own). */
static struct api_conn *
api_conn_of(struct api *a, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev;
	size_t i;

	if (evcon == NULL ||
	    (bev = evhttp_connection_get_bufferevent(evcon)) == NULL)
		return NULL;
	for (i = 0; i < a->nall; i++)
		if (a->conns[i]->bev == bev)
			return a->conns[i];
	return NULL;
}

struct api_pending *
api_pending_new(struct api_req *r)
{
	struct api_pending *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->magic = API_PENDING_MAGIC;
	p->r = *r;
	if (r->path != NULL && (p->path = strdup(r->path)) == NULL) {
		free(p);
		return NULL;
	}
	p->r.path = p->path;
	if ((p->c = api_conn_of(r->a, r->req)) != NULL)
		p->c->pending++;
	r->deferred = true;
	return p;
}

void
api_pending_free(struct api_pending *p)
{
	if (p == NULL)
		return;
	api_reply_log(&p->r);
	if (p->c != NULL)
		p->c->pending--;
	if (p->body != NULL) {
		secmem_wipe(p->body, p->len);
		free(p->body);
	}
	policy_unref(p->v.next);
	free(p->path);
	p->magic = 0;
	free(p);
}

/* No queue (unit tests): decide and commit here and now. */
static void
api_pending_inline(struct api_pending *p)
{
	struct api *a = p->r.a;
	struct policy *cur = policy_ref(a->h.policy_get(a->h.arg));
	struct policy *next = p->m.decide(&p->m, cur);
	struct err e;
	int rc;

	err_clear(&e);
	if (next == NULL)
		p->m.done(&p->m, 1, NULL, NULL);
	else {
		rc = p->m.persist ? a->h.policy_commit(a->h.arg, next, &e)
		                  : a->h.vault_commit(a->h.arg, next, &e);
		p->m.done(&p->m, rc == 0 ? 0 : -1, next, &e);
	}
	policy_unref(next);
	policy_unref(cur);
}

int
api_pending_submit(struct api_pending *p)
{
	struct api *a = p->r.a;
	struct err e;

	if (a->h.mutate == NULL) {
		api_pending_inline(p);
		return 0;
	}
	err_clear(&e);
	if (a->h.mutate(a->h.arg, &p->m, &e) == -1) {
		api_reply_text(&p->r, 503, "%s", e.msg);
		api_pending_free(p);
		return -1;
	}
	return 0;
}
