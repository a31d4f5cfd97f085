/*
 * proxy_mint: oauth2 access tokens minted by egressd for the requests
 * that wait for them (issue 38 item 2). One token request per binding at
 * a time however many requests wait (single flight): the first request
 * that finds its binding without a fresh token starts it, the others
 * join its waiters. Waiting requests stay paused in the relay (their
 * head unread, nothing sent upstream); the loop goes on. Once the answer
 * is in, the revision holding the token is put in force (the daemon's
 * vault_minted hook) and every waiter is resumed: decided again, it is
 * injected; if the token endpoint failed, each gets 502 vault_token
 * with the reason, never an unauthenticated request.
 *
 * A githubApp binding's installation token (issue 38 item 3) is minted
 * the same way: the vault renders its request (the App's JWT signed
 * there) and reads its answer; only the log events are its own.
 *
 * Logs: vault.oauth2_token (binding, grant, outcome minted|refreshed,
 * expires_in, waiters, rotated), vault.oauth2_refresh_rotated when a
 * file-sourced refresh token was replaced in memory, vault.oauth2_failed
 * (binding, grant, reason, status); vault.github_token and
 * vault.github_failed for githubApp bindings (grant "githubApp"). Never
 * a value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/proxy/proxy_fetch.h"
#include "egressd/proxy/proxy_int.h"
#include "policy/policy_binding.h"
#include "policy/policy_oauth2.h"
#include "util/now.h"
#include "util/secmem.h"
#include "vault/vault_oauth.h"
#include "vault/vault_token.h"

#define PROXY_MINT_MAGIC 0x4d494e54u /* "MINT" */

struct proxy_mint {
	uint32_t magic;
	struct proxy *p;
	LIST_ENTRY(proxy_mint) le;
	char binding[POLICY_CRED_NAME_MAX + 1];
	enum vault_mint_kind kind;
	const char *grant; /* a static name: the grant's, or "githubApp" */
	bool renew; /* the binding held a token: a refresh of it */
	struct proxy_fetch *f;
	TAILQ_HEAD(, proxy_conn) waiters;
	size_t nwaiters;
};

struct stats_vault_binding *
proxy_mint_row(struct proxy_status *st, const char *name)
{
	struct stats_vault_binding *r;
	size_t i;

	for (i = 0; i < st->nvault_bindings; i++)
		if (strcmp(st->vault_bindings[i].name, name) == 0)
			return &st->vault_bindings[i];
	if (st->nvault_bindings == STATS_VAULT_BINDINGS - 1)
		name = STATS_VAULT_OTHER;
	if (st->nvault_bindings == STATS_VAULT_BINDINGS)
		return &st->vault_bindings[STATS_VAULT_BINDINGS - 1];
	r = &st->vault_bindings[st->nvault_bindings++];
	(void)snprintf(r->name, sizeof(r->name), "%s", name);
	return r;
}

static const struct policy_binding *
binding_of(const struct policy *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->nbindings; i++)
		if (strcmp(policy_binding_name(p->bindings[i]), name) == 0)
			return p->bindings[i];
	return NULL;
}

/* A rotated refresh token whose credential is a file: the operator is
 * told the file is stale now (egressd keeps the new one in memory). */
static void
mint_log_rotated(struct proxy_mint *m, const struct vault *v)
{
	const struct policy *p = vault_policy(v);
	const struct policy_binding *b = binding_of(p, m->binding);
	const struct policy_oauth2 *oa = b ? policy_binding_oauth2(b) : NULL;
	size_t i;

	for (i = 0;
	     oa != NULL && oa->refresh_token != NULL && i < p->ncredentials;
	     i++) {
		const struct policy_credential *c = p->credentials[i];

		if (strcmp(policy_credential_name(c), oa->refresh_token) != 0 ||
		    policy_credential_source(c) != POLICY_CRED_FILE)
			continue;
		log_warn(m->p->log, "vault.oauth2_refresh_rotated",
		    LOG_S("binding", m->binding),
		    LOG_S("credential_name", oa->refresh_token),
		    LOG_S("path", policy_credential_path(c)),
		    LOG_S("note",
		        "the token endpoint rotated the refresh token: egressd "
		        "keeps the new one in memory; the file still holds the "
		        "old one, which a restart would use"));
	}
}

/* The token in t put in force: 0, or -1 with why. */
static int
mint_install(
    struct proxy_mint *m, const struct vault_token *t, char *why, size_t whylen)
{
	struct proxy *p = m->p;
	struct vault *v, *nv;
	struct err e = {""};

	v = p->h.vault_get != NULL ? p->h.vault_get(p->h.arg) : NULL;
	if (v == NULL || p->h.vault_minted == NULL) {
		(void)snprintf(why, whylen, "no vault in force");
		return -1;
	}
	if ((nv = vault_mint(v, m->binding, t, now_mono_ms(), &e)) == NULL) {
		(void)snprintf(why, whylen, "%s", e.msg);
		return -1;
	}
	p->h.vault_minted(p->h.arg, nv);
	log_info(p->log,
	    m->kind == VAULT_MINT_GITHUB ? "vault.github_token"
	                                 : "vault.oauth2_token",
	    LOG_S("binding", m->binding), LOG_S("grant", m->grant),
	    LOG_S("outcome", m->renew ? "refreshed" : "minted"),
	    LOG_U("expires_in", t->expires_in),
	    LOG_U("expires_at_ms", now_wall_ms() + t->expires_in * 1000ull),
	    LOG_U("waiters", m->nwaiters),
	    LOG_B("rotated", t->refresh != NULL));
	if (t->refresh != NULL)
		mint_log_rotated(m, nv);
	vault_free(nv);
	return 0;
}

/* What the token endpoint said, made a token in force (0) or a reason
 * (-1, why: fixed text and numbers only, never the peer's words). */
static int
mint_answer(struct proxy_mint *m, int status, const uint8_t *body, size_t len,
    const char *err, char *why, size_t whylen)
{
	struct vault_token t;
	struct err e = {""};
	char *buf;
	int rc = -1;

	if (status == 0) {
		(void)snprintf(why, whylen, "token endpoint: %s", err);
		return -1;
	}
	if ((buf = malloc(len + 1)) == NULL) {
		(void)snprintf(why, whylen, "out of memory");
		return -1;
	}
	if (vault_oauth_answer(m->kind, status, body, len, buf, len + 1,
	        (int64_t)(now_wall_ms() / 1000), &t, &e) == 0)
		rc = mint_install(m, &t, why, whylen);
	else
		(void)snprintf(why, whylen, "%s", e.msg);
	secmem_wipe(buf, len + 1);
	free(buf);
	return rc;
}

static void
mint_free(struct proxy_mint *m)
{
	m->magic = 0;
	free(m);
}

static void
proxy_mint_done_cb(
    void *arg, int status, const uint8_t *body, size_t len, const char *err)
{
	struct proxy_mint *m = arg;
	struct proxy *p = m->p;
	struct stats_vault_binding *row;
	struct proxy_conn *c;
	char why[160];
	int rc;

	if (m->magic != PROXY_MINT_MAGIC)
		abort();
	m->f = NULL;
	/* out of the air first: a waiter decided again that still finds no
	 * fresh token starts a flight of its own, never joins this one */
	LIST_REMOVE(m, le);
	why[0] = '\0';
	rc = mint_answer(m, status, body, len, err, why, sizeof(why));
	row = proxy_mint_row(&p->st, m->binding);
	row->tokens[rc == -1 ? 2 : m->renew ? 1 : 0]++;
	if (rc == -1)
		log_warn(p->log,
		    m->kind == VAULT_MINT_GITHUB ? "vault.github_failed"
		                                 : "vault.oauth2_failed",
		    LOG_S("binding", m->binding), LOG_S("grant", m->grant),
		    LOG_S("reason", why), LOG_U("status", (uint64_t)status),
		    LOG_U("waiters", m->nwaiters));
	/* every waiter off the list first: resuming one may close others */
	while ((c = TAILQ_FIRST(&m->waiters)) != NULL) {
		TAILQ_REMOVE(&m->waiters, c, vault.mint_e);
		m->nwaiters--;
		c->vault.mint = NULL;
		if (rc == -1)
			(void)snprintf(c->vault.mint_why,
			    sizeof(c->vault.mint_why), "%s", why);
		p->mint_done_cb(c, rc == -1);
	}
	mint_free(m);
}

/* The flight of binding, started if none is in the air. */
static struct proxy_mint *
mint_flight(
    struct proxy *p, struct vault *v, const char *binding, const char **why)
{
	struct vault_oauth_req rq;
	struct proxy_mint *m;
	struct err e = {""};

	LIST_FOREACH(m, &p->mints, le)
	if (strcmp(m->binding, binding) == 0)
		return m;
	if (strlen(binding) > POLICY_CRED_NAME_MAX ||
	    (m = calloc(1, sizeof(*m))) == NULL) {
		*why = "out of memory";
		return NULL;
	}
	if (vault_oauth_request(v, binding, &rq, &e) == -1) {
		/* e: a fixed text (a key that cannot sign, no memory) */
		log_warn(p->log, "vault.token_request_failed",
		    LOG_S("binding", binding), LOG_S("reason", e.msg));
		free(m);
		*why = "no token request for the binding";
		return NULL;
	}
	m->magic = PROXY_MINT_MAGIC;
	m->p = p;
	memcpy(m->binding, binding, strlen(binding) + 1);
	m->kind = rq.kind;
	m->grant = rq.grant;
	m->renew = rq.renew;
	TAILQ_INIT(&m->waiters);
	m->f = proxy_fetch_start(p, rq.host, rq.port, rq.bytes, rq.len,
	    rq.body_max, proxy_mint_done_cb, m, &e);
	vault_oauth_request_clear(&rq);
	if (m->f == NULL) {
		log_warn(p->log, "vault.oauth2_failed",
		    LOG_S("binding", binding), LOG_S("reason", e.msg));
		free(m);
		*why = "token request could not start";
		return NULL;
	}
	LIST_INSERT_HEAD(&p->mints, m, le);
	return m;
}

int
proxy_mint_wait(struct proxy_conn *c, struct vault *v, const char *binding,
    const char **why)
{
	struct proxy_mint *m = mint_flight(c->p, v, binding, why);

	if (m == NULL)
		return -1;
	TAILQ_INSERT_TAIL(&m->waiters, c, vault.mint_e);
	m->nwaiters++;
	c->vault.mint = m;
	return 0;
}

void
proxy_mint_forget(struct proxy_conn *c)
{
	struct proxy_mint *m = c->vault.mint;

	if (m == NULL)
		return;
	TAILQ_REMOVE(&m->waiters, c, vault.mint_e);
	m->nwaiters--;
	c->vault.mint = NULL;
	/* the flight goes on: the token serves the next requests */
}

void
proxy_mint_free_all(struct proxy *p)
{
	struct proxy_mint *m;

	while ((m = LIST_FIRST(&p->mints)) != NULL) {
		LIST_REMOVE(m, le);
		proxy_fetch_cancel(m->f);
		mint_free(m);
	}
	proxy_fetch_shutdown(p);
}
