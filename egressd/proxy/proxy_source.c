/*
 * proxy_source: credentials whose source is http (issue 38 item 4,
 * vault/vault_http.h), fetched by egressd in the background, never on a
 * request's path. A timer looks at the vault in force every
 * PROXY_SOURCE_TICK_MS: each http credential without a value, or whose
 * value is due (its TTL passed), gets one fetch (proxy_fetch.c: verified
 * TLS, marked socket, no redirect, bounded answer; private and loopback
 * addresses refused unless its allowPrivate says otherwise). An answer
 * becomes the revision in force (vault_http_set, then the vault_minted
 * hook, like an oauth2 token): the value it replaces is retired, so it
 * is still redacted. A failure keeps the value held (vault_decide stops
 * using it past maxStale) and retries with a backoff (1 s doubling to
 * PROXY_SOURCE_BACKOFF_MAX_MS, never later than the value's TTL).
 *
 * Start: nothing waits for the first fetch; until it succeeds the
 * requests that need the credential are answered 502 vault_token with
 * the reason (never sent unauthenticated).
 *
 * Logs: vault.http_fetched (credential_name: the logger masks a
 * "credential" key; outcome fetched|refreshed,
 * changed, ttl_s, status, elapsed_ms), vault.http_failed (credential_name,
 * reason, status, age_ms of the value held, in_use: whether it is still
 * used, until_ms: how long more). Never a value, never the store's words.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proxy/proxy_fetch.h"
#include "egressd/proxy/proxy_int.h"
#include "policy/policy_cred_http.h"
#include "util/now.h"
#include "util/secmem.h"
#include "vault/vault_http.h"
#include "vault/vault_http_body.h"

#define PROXY_SOURCE_MAGIC 0x53524345u /* "SRCE" */
#define PROXY_SOURCE_TICK_MS 1000u
#define PROXY_SOURCE_BACKOFF_MAX_MS 30000u

/* One http credential egressd keeps fetched. */
struct proxy_source {
	uint32_t magic;
	struct proxy *p;
	LIST_ENTRY(proxy_source) le;
	char cred[POLICY_CRED_NAME_MAX + 1];
	/* the settings fetched with (an answer to a changed url is dropped) */
	const struct policy_cred_http *h;
	struct policy *pol; /* the snapshot h is borrowed from (a reference:
	                       the one in force, swapped each tick) */
	struct proxy_fetch *f; /* in flight, or NULL */
	uint64_t started_ms, next_ms; /* next_ms: not before (backoff) */
	unsigned failures;
	bool seen; /* still in the policy (this tick) */
};

struct proxy_sources {
	LIST_HEAD(, proxy_source) list;
	struct event *tick;
};

static struct stats_vault_source *
source_row(struct proxy_status *st, const char *name)
{
	struct stats_vault_source *r;
	size_t i;

	for (i = 0; i < st->nvault_sources; i++)
		if (strcmp(st->vault_sources[i].name, name) == 0)
			return &st->vault_sources[i];
	if (st->nvault_sources == STATS_VAULT_SOURCES)
		return &st->vault_sources[STATS_VAULT_SOURCES - 1];
	if (st->nvault_sources == STATS_VAULT_SOURCES - 1)
		name = STATS_VAULT_OTHER;
	r = &st->vault_sources[st->nvault_sources++];
	memcpy(r->name, name, strlen(name) + 1);
	return r;
}

static void
source_free(struct proxy_source *s)
{
	LIST_REMOVE(s, le);
	proxy_fetch_cancel(s->f);
	policy_unref(s->pol);
	s->magic = 0;
	free(s);
}

/* 1 s doubling to PROXY_SOURCE_BACKOFF_MAX_MS, never longer than the
 * refresh period of the value held (st; else the policy's): a store that
 * comes back is used within one TTL. */
static uint64_t
backoff_ms(const struct proxy_source *s, const struct vault_http_state *st)
{
	unsigned n = s->failures > 6 ? 6 : s->failures;
	uint64_t ms = 1000ull << (n > 0 ? n - 1 : 0);
	uint64_t ttl = st->have
	    ? st->due_ms - st->fetched_ms
	    : (s->h->ttl_s != 0 ? s->h->ttl_s : POLICY_HTTP_TTL_DEFAULT) *
	        1000ull;

	if (ms > PROXY_SOURCE_BACKOFF_MAX_MS)
		ms = PROXY_SOURCE_BACKOFF_MAX_MS;
	return ms < ttl ? ms : ttl;
}

/* The answer in force (0), or -1 with why (fixed text and numbers). */
static int
source_take(struct proxy_source *s, int status, const uint8_t *body, size_t len,
    const char *err, char *why, size_t whylen)
{
	struct proxy *p = s->p;
	struct vault *v, *nv;
	struct vault_http_value val;
	struct vault_http_state st, old;
	struct err e = {""};
	char *buf;
	int rc = -1;

	if (status == 0) {
		(void)snprintf(why, whylen, "%s", err);
		return -1;
	}
	if (status < 200 || status > 299) {
		(void)snprintf(why, whylen, "store answered %d", status);
		return -1;
	}
	v = p->h.vault_get != NULL ? p->h.vault_get(p->h.arg) : NULL;
	if (v == NULL || p->h.vault_minted == NULL ||
	    vault_http_state(v, s->cred, &old) == -1) {
		(void)snprintf(why, whylen, "credential no longer in force");
		return -1;
	}
	if ((buf = malloc(len + 1)) == NULL) {
		(void)snprintf(why, whylen, "out of memory");
		return -1;
	}
	if (vault_http_body_parse(
	        body, len, s->h->format, buf, len + 1, &val, &e) == -1)
		(void)snprintf(why, whylen, "%s", e.msg);
	else if ((nv = vault_http_set(v, s->cred, val.val, val.len, val.ttl_s,
	              vault_http_now(v), &e)) == NULL)
		(void)snprintf(why, whylen, "%s", e.msg);
	else {
		(void)vault_http_state(nv, s->cred, &st);
		log_info(p->log, "vault.http_fetched",
		    LOG_S("credential_name", s->cred),
		    LOG_S("outcome", old.have ? "refreshed" : "fetched"),
		    LOG_B("changed", vault_http_changed(nv, v, s->cred)),
		    LOG_U("ttl_s", (st.due_ms - st.fetched_ms) / 1000),
		    LOG_U("status", (uint64_t)status),
		    LOG_U("elapsed_ms", now_mono_ms() - s->started_ms));
		p->h.vault_minted(p->h.arg, nv);
		vault_free(nv);
		rc = 0;
	}
	secmem_wipe(buf, len + 1);
	free(buf);
	return rc;
}

static void
proxy_source_done_cb(
    void *arg, int status, const uint8_t *body, size_t len, const char *err)
{
	struct proxy_source *s = arg;
	struct proxy *p;
	struct vault *v;
	struct vault_http_state st;
	char why[160];
	uint64_t now;

	if (s->magic != PROXY_SOURCE_MAGIC)
		abort();
	p = s->p;
	s->f = NULL;
	why[0] = '\0';
	if (source_take(s, status, body, len, err, why, sizeof(why)) == 0) {
		source_row(&p->st, s->cred)->fetches[0]++;
		s->failures = 0;
		s->next_ms = 0;
		return;
	}
	source_row(&p->st, s->cred)->fetches[1]++;
	s->failures++;
	v = p->h.vault_get != NULL ? p->h.vault_get(p->h.arg) : NULL;
	memset(&st, 0, sizeof(st));
	if (v != NULL)
		(void)vault_http_state(v, s->cred, &st);
	now = v != NULL ? vault_http_now(v) : now_mono_ms();
	s->next_ms = now_mono_ms() + backoff_ms(s, &st);
	log_warn(p->log, "vault.http_failed", LOG_S("credential_name", s->cred),
	    LOG_S("reason", why), LOG_U("status", (uint64_t)status),
	    LOG_U("failures", s->failures), LOG_B("held", st.have),
	    LOG_U("age_ms", st.have ? now - st.fetched_ms : 0),
	    LOG_B("in_use", st.have && now < st.until_ms),
	    LOG_U("until_ms",
	        st.have && now < st.until_ms ? st.until_ms - now : 0));
}

/* The slot of http credential name (settings h of v), made or reset
 * when its settings changed (a fetch in flight for the old ones is
 * dropped). NULL: out of memory. */
static struct proxy_source *
source_slot(struct proxy *p, struct vault *v, const char *name,
    const struct policy_cred_http *h)
{
	struct proxy_source *s;

	LIST_FOREACH(s, &p->sources->list, le)
	if (strcmp(s->cred, name) == 0)
		break;
	if (s != NULL && policy_cred_http_same(s->h, h)) {
		/* the same settings: borrowed from the snapshot in force from
		 * now on (an old one, and its secrets, are let go) */
		policy_unref(s->pol);
		s->pol =
		    policy_ref((struct policy *)(uintptr_t)vault_policy(v));
		s->h = h;
		return s;
	}
	if (s != NULL)
		source_free(s);
	if (strlen(name) > POLICY_CRED_NAME_MAX ||
	    (s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->magic = PROXY_SOURCE_MAGIC;
	s->p = p;
	memcpy(s->cred, name, strlen(name) + 1);
	s->h = h;
	s->pol = policy_ref((struct policy *)(uintptr_t)vault_policy(v));
	LIST_INSERT_HEAD(&p->sources->list, s, le);
	return s;
}

/* One fetch of s's credential from v, when due. */
static void
source_maybe_fetch(struct proxy_source *s, struct vault *v)
{
	struct proxy *p = s->p;
	struct vault_http_state st;
	struct vault_http_req rq;
	struct err e = {""};

	if (s->f != NULL || vault_http_state(v, s->cred, &st) == -1 ||
	    (st.have && vault_http_now(v) < st.due_ms) ||
	    now_mono_ms() < s->next_ms)
		return;
	if (vault_http_request(v, s->cred, &rq, &e) == 0) {
		s->started_ms = now_mono_ms();
		s->f = proxy_fetch_start(p, rq.h->host, rq.h->port, rq.bytes,
		    rq.len, VAULT_HTTP_BODY_MAX, proxy_source_done_cb, s, &e);
		if (s->f != NULL && !rq.h->allow_private)
			proxy_fetch_refuse_private(s->f);
		vault_http_request_clear(&rq);
	}
	if (s->f == NULL) {
		s->failures++;
		s->next_ms = now_mono_ms() + backoff_ms(s, &st);
		source_row(&p->st, s->cred)->fetches[1]++;
		log_warn(p->log, "vault.http_failed",
		    LOG_S("credential_name", s->cred), LOG_S("reason", e.msg),
		    LOG_U("failures", s->failures));
	}
}

static void
proxy_source_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct proxy *p = arg;
	struct timeval tv = {
	    PROXY_SOURCE_TICK_MS / 1000, (PROXY_SOURCE_TICK_MS % 1000) * 1000};
	struct proxy_source *s, *next;
	const struct policy *pol;
	struct vault *v;
	size_t i;

	(void)fd;
	(void)what;
	v = p->h.vault_get != NULL ? p->h.vault_get(p->h.arg) : NULL;
	LIST_FOREACH(s, &p->sources->list, le)
	s->seen = false;
	for (i = 0, pol = v != NULL ? vault_policy(v) : NULL;
	     pol != NULL && i < pol->ncredentials; i++) {
		const struct policy_credential *c = pol->credentials[i];
		const struct policy_cred_http *h = policy_credential_http(c);

		if (h == NULL ||
		    (s = source_slot(p, v, policy_credential_name(c), h)) ==
		        NULL)
			continue;
		s->seen = true;
		source_maybe_fetch(s, v);
	}
	for (s = LIST_FIRST(&p->sources->list); s != NULL; s = next) {
		next = LIST_NEXT(s, le);
		if (!s->seen) /* gone from the policy */
			source_free(s);
	}
	(void)evtimer_add(p->sources->tick, &tv);
}

int
proxy_source_start(struct proxy *p, struct err *e)
{
	if ((p->sources = calloc(1, sizeof(*p->sources))) == NULL ||
	    (p->sources->tick =
	            evtimer_new(p->base, proxy_source_tick_cb, p)) == NULL) {
		free(p->sources);
		p->sources = NULL;
		err_set(e, "proxy: out of memory");
		return -1;
	}
	LIST_INIT(&p->sources->list);
	/* the first look at once: a credential is fetched at start */
	event_active(p->sources->tick, EV_TIMEOUT, 0);
	return 0;
}

void
proxy_source_free_all(struct proxy *p)
{
	if (p->sources == NULL)
		return;
	while (!LIST_EMPTY(&p->sources->list))
		source_free(LIST_FIRST(&p->sources->list));
	event_free(p->sources->tick);
	free(p->sources);
	p->sources = NULL;
}
