/*
 * daemon: the context's life (daemon.h): start-up in order, the loop, the
 * signals, the shutdown. What each module needs is wired in
 * daemon_nft.c, daemon_wire.c and daemon_api.c; policy changes go through
 * daemon_commit.c; file watches are daemon_watch.c's.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egressd/api/api.h"
#include "egressd/base/log.h"
#include "egressd/base/workq.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon.h"
#include "egressd/daemon/daemon_int.h"
#include "egressd/daemon/policyfile.h"
#include "egressd/daemon/webhook.h"
#include "egressd/base/uproxy.h"
#include "egressd/dns/dns.h"
#include "egressd/nft/nft.h"
#include "egressd/nfq/nfq.h"
#include "egressd/proxy/proxy.h"
#include "policy/policy.h"
#include "vault/vault.h"

/*
 * A reload: the API token (no policy: it need not wait for the queue),
 * then the policy's re-read, queued. why is a fixed string.
 */
static void
egressd_reload(struct egressd *d, const char *why)
{
	daemon_api_reload_token(d, why);
	daemon_commit_reload(d, why);
}

static void
egressd_reload_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egressd *d = egressd_arg(arg);

	(void)fd;
	(void)what;
	egressd_reload(d, "inotify");
}

/* TERM, INT: leave the loop; daemon_free() then tears down. */
static void
egressd_signal_stop(struct egressd *d, const char *name)
{
	log_info(d->log, "egressd.stopping", LOG_S("signal", name));
	event_base_loopexit(d->base, NULL);
}

/* HUP: the policy and the API token, read again. */
static void
egressd_signal_reload(struct egressd *d, const char *name)
{
	(void)name;
	egressd_reload(d, "sighup");
}

/* USR1: the log file reopened (after logrotate moved it). */
static void
egressd_signal_reopen(struct egressd *d, const char *name)
{
	(void)name;
	if (log_reopen(d->log) == -1)
		log_error(d->log, "log.reopen_failed",
		    LOG_S("error", strerror(errno)));
	else
		log_info(d->log, "log.reopened");
}

/*
 * Every signal egressd handles and what it does, on the loop (libevent
 * turns each into an event). A row without a handler is ignored
 * outright: SIGPIPE, so that a peer gone mid-write costs that one
 * connection an EPIPE, not the daemon its life.
 */
static const struct {
	int sig;
	const char *name; /* as egressd.stopping logs it */
	void (*handle)(struct egressd *d, const char *name);
} egressd_signal_rows[] = {
    {SIGPIPE, "PIPE", NULL},
    {SIGTERM, "TERM", egressd_signal_stop},
    {SIGINT, "INT", egressd_signal_stop},
    {SIGHUP, "HUP", egressd_signal_reload},
    {SIGUSR1, "USR1", egressd_signal_reopen},
};

_Static_assert(sizeof(egressd_signal_rows) / sizeof(egressd_signal_rows[0]) ==
        EGRESSD_NSIGNALS,
    "one event slot per signal row");

static void
egressd_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct egressd *d = egressd_arg(arg);
	size_t i;

	(void)what;
	for (i = 0; i < EGRESSD_NSIGNALS; i++)
		if (egressd_signal_rows[i].sig == sig &&
		    egressd_signal_rows[i].handle != NULL)
			egressd_signal_rows[i].handle(
			    d, egressd_signal_rows[i].name);
}

static int
egressd_signals(struct egressd *d, struct err *e)
{
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	for (i = 0; i < EGRESSD_NSIGNALS; i++) {
		int sig = egressd_signal_rows[i].sig;

		if (egressd_signal_rows[i].handle == NULL) {
			(void)sigaction(sig, &sa, NULL);
			continue;
		}
		d->ev_sig[i] = evsignal_new(d->base, sig, egressd_signal_cb, d);
		if (d->ev_sig[i] == NULL ||
		    evsignal_add(d->ev_sig[i], NULL) == -1) {
			err_set(e, "cannot register signal events");
			return -1;
		}
	}
	return 0;
}

/*
 * A rewrite cut short by a crash leaves its temp file beside the policy
 * file, with whatever inline credential values the policy held, and
 * nothing else would ever remove it. Not fatal: the file in force is fine.
 */
static void
egressd_remove_stale_tmp(struct egressd *d)
{
	struct err e = {""};

	if (policyfile_remove_stale(
	        d->cfg->policy_file, geteuid(), NULL, d->log, &e) == -1)
		log_warn(
		    d->log, "policy.stale_tmp_failed", LOG_S("error", e.msg));
}

/*
 * The epoll changelist folds every change to one descriptor's interest
 * within a loop turn into at most one epoll_ctl, and an arm and a
 * disarm in one turn into none: the proxy writes at once (proxy_kick),
 * so the EPOLLOUT libevent arms for each write is disarmed in the same
 * turn. libevent warns that it misbehaves with dup()ed descriptors;
 * egressd never dups one.
 */
static struct event_base *
egressd_base_new(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *b;

	if (cfg == NULL)
		return NULL;
	(void)event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	b = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return b;
}

static int
egressd_init(
    struct egressd *d, const struct config *cfg, struct log *lg, struct err *e)
{
	struct policyfile_info info;
	struct policy_diag dg;
	size_t i;

	memset(d, 0, sizeof(*d));
	d->magic = EGRESSD_MAGIC;
	d->cfg = cfg;
	d->log = lg;
	d->inotify_fd = -1;
	if ((d->base = egressd_base_new()) == NULL) {
		err_set(e, "cannot create event base");
		return -1;
	}
	if ((d->wq = workq_new(d->base, e)) == NULL)
		return -1;
	policy_diag_init(&dg);
	d->file_hash_valid = daemon_commit_file_hash(d, &d->file_hash);
	d->policy = policyfile_load(cfg, &dg, &info);
	if (d->policy == NULL) {
		for (i = 0; i < dg.n; i++)
			log_error(lg, "policy.load_failed",
			    LOG_S("error", dg.msgs[i]));
		policy_diag_to_err(&dg, e);
		err_prefix(e, "policy");
		policy_diag_clear(&dg);
		return -1;
	}
	policy_diag_clear(&dg);
	if (daemon_wire_enforceable(cfg, d->policy, e) == -1) {
		log_error(lg, "policy.load_failed", LOG_S("error", e->msg));
		err_prefix(e, "policy");
		return -1;
	}
	d->stats.policy_revision = d->policy->revision;
	log_info(lg, "policy.loaded", LOG_S("trigger", "start"),
	    LOG_S("source", d->policy->source ? d->policy->source : "default"),
	    LOG_U("revision", d->policy->revision),
	    LOG_U("rules", d->policy->nrules),
	    LOG_S("mode", policy_mode_name(d->policy)));
	daemon_commit_note_file(d, &info, "start");
	if ((d->persist_off = policyfile_persist_off(cfg->policy_file)) != NULL)
		log_warn(lg, "policy.persist_off",
		    LOG_S("path", cfg->policy_file),
		    LOG_S("reason", d->persist_off),
		    LOG_S("effect",
		        "API changes stay in memory until a restart or the "
		        "file's next update"));
	else if (cfg->policy_file != NULL)
		egressd_remove_stale_tmp(d);
	for (i = 0; i < cfg->unknown_env.n; i++)
		log_warn(lg, "config.unknown_variable",
		    LOG_S("name", cfg->unknown_env.v[i]));
	/* Order: the resolver and the proxy bind before the ruleset
	 * redirects to them. */
	if (egressd_signals(d, e) == -1 || daemon_wire_uproxy(d, e) == -1 ||
	    daemon_wire_webhook(d, e) == -1 || daemon_nft_open(d, e) == -1 ||
	    daemon_wire_dns(d, e) == -1 || daemon_wire_proxy(d, e) == -1 ||
	    daemon_wire_nfq(d, e) == -1 || daemon_nft_enforce(d, e) == -1 ||
	    daemon_api_start(d, e) == -1 ||
	    daemon_watch_files(d, egressd_reload_cb, e) == -1 ||
	    daemon_nft_arm_renew(d, e) == -1)
		return -1;
	return 0;
}

/* The log's batch goes out at the end of the loop turn that started it:
 * an event made active runs in this turn, after those before it. */
static void
egressd_log_arm(void *arg)
{
	event_active(arg, EV_TIMEOUT, 1);
}

static void
egressd_log_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	log_flush(arg);
}

int
daemon_run(struct egressd *d)
{
	struct dns_status ds;
	struct event *flush;
	int rc = 0;

	dns_status(d->dns, &ds);
	log_info(d->log, "egressd.ready", LOG_S("version", EGRESSD_VERSION),
	    LOG_S("mode", config_mode_name(d->cfg->mode)),
	    LOG_B("nft", d->nft_ok), LOG_U("dns_port", ds.port),
	    LOG_U("upstreams", ds.nupstreams),
	    LOG_U("revision", d->policy->revision));
	/* While the loop runs, a turn's lines go out in one write (without
	 * the event: a write per line, as at start-up and shutdown). */
	flush = event_new(d->base, -1, 0, egressd_log_flush_cb, d->log);
	if (flush != NULL)
		log_defer(d->log, egressd_log_arm, flush);
	if (event_base_dispatch(d->base) == -1) {
		log_error(d->log, "egressd.loop_failed");
		rc = 1;
	}
	log_defer(d->log, NULL, NULL);
	if (flush != NULL)
		event_free(flush);
	return rc;
}

static void
egressd_clear(struct egressd *d)
{
	struct err e = {""};
	size_t i;

	if (d->magic != EGRESSD_MAGIC)
		return;
	/* First: a change still queued answers its request (the API is
	 * still there) and lets go of its snapshots. */
	workq_free(d->wq);
	d->wq = NULL;
	api_free(d->api);
	nfq_free(d->nfq);
	d->nfq = NULL; /* nft's learned-gen hook reads it until nft_free */
	proxy_free(d->proxy);
	vault_free(d->vault);
	dns_free(d->dns);
	webhook_free(d->webhook);
	uproxy_free(d->uproxy);
	nft_renew_free(d->renew);
	nft_cut_free(d->cut);
	if (d->nft != NULL) {
		if (d->cfg->teardown_on_exit) {
			if (nft_teardown(d->nft, &e) == -1)
				log_error(d->log, "nft.teardown_failed",
				    LOG_S("error", e.msg));
			else
				log_info(d->log, "nft.teardown");
		}
		nft_free(d->nft);
	}
	if (d->ev_renew != NULL)
		event_free(d->ev_renew);
	if (d->ev_reload != NULL)
		event_free(d->ev_reload);
	if (d->ev_inotify != NULL)
		event_free(d->ev_inotify);
	if (d->inotify_fd != -1)
		close(d->inotify_fd);
	for (i = 0; i < EGRESSD_NSIGNALS; i++)
		if (d->ev_sig[i] != NULL)
			event_free(d->ev_sig[i]);
	policy_unref(d->policy);
	if (d->base != NULL) {
		/* A bufferevent freed while its deferred callback was queued
		 * keeps a reference until that callback runs, and
		 * event_base_free cancels it without dropping the reference:
		 * the bufferevent (and its SSL) would be lost at exit. One
		 * turn runs them; every event of ours is gone by now, and a
		 * freed bufferevent's callbacks are cleared. */
		(void)event_base_loop(d->base, EVLOOP_NONBLOCK);
		event_base_free(d->base);
	}
	d->magic = 0;
}

struct egressd *
daemon_new(const struct config *cfg, struct log *lg, struct err *e)
{
	struct egressd *d = calloc(1, sizeof(*d));

	if (d == NULL) {
		err_set(e, "out of memory");
		return NULL;
	}
	if (egressd_init(d, cfg, lg, e) == -1) {
		egressd_clear(d);
		free(d);
		return NULL;
	}
	return d;
}

void
daemon_free(struct egressd *d)
{
	if (d == NULL)
		return;
	egressd_clear(d);
	free(d);
}
