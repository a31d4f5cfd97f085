/*
 * daemon_int: what the daemon's own files share (daemon.c: context, loop,
 * signals; daemon_commit.c: the commit queue and steps; daemon_watch.c:
 * file watches; daemon_nft.c, daemon_wire.c, daemon_api.c: module
 * wiring; daemon_status.c: what /v1/status and /metrics show). Nothing
 * outside egressd/daemon/ includes it.
 *
 * Calls between these files go one way only (no cycle): daemon.c ->
 * daemon_api.c -> daemon_commit.c -> daemon_watch.c, daemon_wire.c ->
 * daemon_nft.c; daemon_api.c -> daemon_status.c. What must call back up
 * (the watch's debounce timer, the signals) is a callback daemon.c hands
 * down.
 */
#ifndef EGRESSD_DAEMON_INT_H
#define EGRESSD_DAEMON_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <event2/event.h>

#include "egressd/base/stats.h"
#include "util/err.h"

struct api_mutation;
struct api_status;
struct config;
struct log;
struct policy;
struct policyfile_info;
struct workq;

/*
 * The daemon context, opaque outside egressd/daemon/ (daemon.h): modules
 * get the borrowed pieces they need through their options and hooks,
 * never this struct.
 */
#define EGRESSD_MAGIC 0x45475244u /* "EGRD" */
#define EGRESSD_RELOAD_DEBOUNCE_MS 100
#define EGRESSD_WHY_MAX 256
#define EGRESSD_CRED_WATCH_MAX 64 /* credential files watched */
#define EGRESSD_NSIGNALS 5 /* rows of egressd_signal_rows */

struct event_base;
struct event;
struct nft;
struct dns;
struct api;
struct webhook;
struct uproxy;

struct egressd {
	uint32_t magic;
	struct event_base *base;
	const struct config *cfg; /* borrowed from main */
	struct log *log; /* borrowed from main */
	struct stats stats;

	struct policy *policy; /* current snapshot, one reference owned */
	uint64_t policy_gen; /* policies swapped in (egressd_swap) */
	/* Every policy change (API mutation, reload) waits its turn here:
	 * decided and persisted off the loop, put in force on it. */
	struct workq *wq;

	struct nft *nft; /* NULL in dns mode */
	struct dns *dns;
	struct api *api;
	struct webhook *webhook; /* deny webhook, NULL when not configured */
	/* the upstream proxy every origin connection goes through (the
	 * proxy's and the webhook's), NULL when not configured */
	struct uproxy *uproxy;
	struct proxy *proxy; /* transparent proxy, NULL when off */
	/* In-flight judging (daemon_wire_nfq): the queue reader, NULL on
	 * the proxy path; the path in words and why, for the status. */
	struct nfq *nfq;
	const char *pt_path; /* "queue", "proxy" or "none" (no proxy) */
	char pt_why[ERR_MSG_MAX];
	/* The Credential Vault revision of the policy in force (one
	 * reference owned; connections take their own). NULL when the proxy
	 * is off and no binding was ever loaded. */
	struct vault *vault;

	/* Readiness, truthful: each flag says what is really in force. */
	bool nft_ok, dns_ok, api_ok, selfcheck_ok;
	char nft_why[EGRESSD_WHY_MAX];
	char dns_why[EGRESSD_WHY_MAX];

	struct event *ev_sig[EGRESSD_NSIGNALS]; /* NULL: an ignored signal */
	int inotify_fd, wd_policy, wd_rules, wd_token;
	char policy_base[4096]; /* file name of the policy inside its dir */
	char token_base[4096]; /* file name of the token file inside its dir */
	bool rules_dir_dirty;
	/* The directories of file credentials (a Kubernetes Secret volume
	 * swaps their ..data link): an event there reloads, and the commit
	 * reads the files again. Only added (a watch may be shared with the
	 * policy's or the token's directory), at most EGRESSD_CRED_WATCH_MAX. */
	struct {
		int wd;
		char base[NAME_MAX + 1];
	} cred_watch[EGRESSD_CRED_WATCH_MAX];
	size_t ncred_watch;
	bool creds_dirty;
	struct event *ev_inotify, *ev_reload, *ev_renew;
	uint32_t renew_interval_ms; /* what ev_renew was last armed with */
	struct nft_renew *renew; /* conntrack renew, sliced on the loop */
	/* Flow cutting: passes on the loop, one after the other. */
	struct nft_cut *cut;
	size_t cut_total, cut_passes;
	uint64_t cut_revision; /* of the policy the passes judge by */
	const char *cut_trigger; /* static string: "update", "start" */
	/* Hash of the policy file as last loaded or written by egressd: a
	 * watch event for unchanged bytes (our own rewrite, a touch) is not
	 * a new policy. */
	uint64_t file_hash;
	bool file_hash_valid;
	/* The configured policy file did not exist at the last load: what
	 * is in force came from policy_fallback (shown in /v1/status). */
	bool policy_file_missing;
	const char *policy_fallback;
	/* Why API changes are not written back (policyfile_persist_off),
	 * NULL when they are. */
	const char *persist_off;
};

/*
 * The daemon context behind a callback's void *: every event and hook
 * callback of the daemon's files starts here, so a stray or freed pointer
 * stops the process instead of being used.
 */
static inline struct egressd *
egressd_arg(void *arg)
{
	struct egressd *d = arg;

	if (d == NULL || d->magic != EGRESSD_MAGIC)
		abort();
	return d;
}

/* ---- daemon_commit.c: the commit queue and its steps ---------------- */

/* Queues a re-read of the policy file and rules directory; why is a
 * fixed string ("sighup", "inotify"). */
void daemon_commit_reload(struct egressd *d, const char *why);
/* The API's mutate hook (api.h): m waits its turn in d's queue. */
int daemon_commit_mutate(void *arg, struct api_mutation *m, struct err *e);
/* Hash of the policy file's bytes now; false when there is none. */
bool daemon_commit_file_hash(const struct egressd *d, uint64_t *h);
/* Notes (and logs) a missing policy file and the fallback in force. */
void daemon_commit_note_file(
    struct egressd *d, const struct policyfile_info *info, const char *why);

/* ---- daemon_watch.c: policy, rules, token and credential files ------- */

/*
 * Watches the directories of the policy file, the rules directory, the
 * token file and every file credential of the policy in force; once
 * things are quiet after a relevant event, reload_cb runs (arg d).
 */
int daemon_watch_files(
    struct egressd *d, event_callback_fn reload_cb, struct err *e);
/* Watches the directory of every file credential of p not watched yet. */
void daemon_watch_creds(struct egressd *d, const struct policy *p);

/* ---- daemon_nft.c: nftables wiring ----------------------------------- */

/* The netlink handle, the renew and the cut engines (no rules yet). */
int daemon_nft_open(struct egressd *d, struct err *e);
/* The ruleset in force, self-checked, and the first cut of old flows. */
int daemon_nft_enforce(struct egressd *d, struct err *e);
/* The renew tick: every half of dns.ttlMax, between 500 ms and 10 s. */
int daemon_nft_arm_renew(struct egressd *d, struct err *e);
/* A new policy in force: a shorter dns.ttlMax brings the tick nearer. */
void daemon_nft_follow_ttl(struct egressd *d);
/* A new policy (or the start): judge every live flow again. */
void daemon_nft_cut_flows(struct egressd *d, const char *trigger);
/* The resolver's learn hooks (dns.h), arg d. */
struct dns_learn_addr;
int daemon_nft_learn_cb(void *arg, const char *qname,
    const struct dns_learn_addr *a, size_t n, struct err *e);
uint64_t daemon_nft_learn_submit_cb(void *arg, const char *qname,
    const struct dns_learn_addr *a, size_t n,
    void (*done)(void *done_arg, int rc, const char *why), void *done_arg,
    struct err *e);
void daemon_nft_learn_cancel_cb(void *arg, uint64_t ticket);

/* ---- daemon_wire.c: webhook, resolver and proxy ---------------------- */

int daemon_wire_uproxy(struct egressd *d, struct err *e);
int daemon_wire_webhook(struct egressd *d, struct err *e);
int daemon_wire_dns(struct egressd *d, struct err *e);
int daemon_wire_proxy(struct egressd *d, struct err *e);
int daemon_wire_nfq(struct egressd *d, struct err *e);
/* Flows judged in flight judged again by name after a commit. */
void daemon_nfq_rejudge(struct egressd *d, uint64_t revision);
/* 0 when this configuration can enforce every rule of p; -1 with the
 * first that it cannot (request rules without the proxy) in e. */
int daemon_wire_enforceable(
    const struct config *cfg, const struct policy *p, struct err *e);
/* The snapshot in force, lent (daemon.h, "Hooks"); arg d. */
struct policy *daemon_wire_policy_get_cb(void *arg);
/* The resolver follows the policy file's dns.upstreams (flags win). */
void daemon_wire_follow_upstreams(
    struct egressd *d, const struct policy *old, const struct policy *next);

/* ---- daemon_api.c: the control API ----------------------------------- */

int daemon_api_start(struct egressd *d, struct err *e);
/* A rotated token file takes effect (why: the reload's trigger). */
void daemon_api_reload_token(struct egressd *d, const char *why);

/* ---- daemon_status.c: what the API shows ----------------------------- */

/* /v1/status: d's side of it, filled into st (api.h). */
void daemon_status_fill(struct egressd *d, struct api_status *st);
/* /metrics: fresh proxy counters and nft rule counters into d->stats. */
void daemon_status_refresh_metrics(struct egressd *d);

#endif
