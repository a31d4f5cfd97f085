/*
 * daemon: the egressd context and its life cycle.
 *
 * struct egressd is the only home of mutable daemon state (STYLE.md): the
 * event base, the current policy snapshot, the nft, dns and api modules,
 * counters and the reload machinery. main() owns it; every module gets a
 * borrowed pointer to what it needs, never to the whole context, except
 * through the hooks below.
 *
 * Hooks (the dns_hooks, api_hooks, ... the daemon fills in): one ownership
 * rule for all of them. What a hook returns is lent: valid until the
 * caller returns to the event loop or calls a hook that can change it (a
 * commit swaps the snapshot); a caller that keeps it longer takes its own
 * reference. What a caller passes to a hook is lent the same way: a hook
 * that keeps it takes its own reference.
 *
 * Commit order for every policy change (API mutation or file reload):
 * validate (done by the caller) -> apply the nft batch -> swap the
 * snapshot -> persist (API mutations only) -> answer. A failure at any step
 * before the swap leaves everything as it was.
 */
#ifndef EGRESSD_DAEMON_H
#define EGRESSD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "egressd/config.h"
#include "egressd/log.h"
#include "egressd/stats.h"
#include "policy/policy.h"

#define EGRESSD_MAGIC 0x45475244u /* "EGRD" */
#define EGRESSD_RELOAD_DEBOUNCE_MS 100
#define EGRESSD_WHY_MAX 256

struct event_base;
struct event;
struct nft;
struct dns;
struct api;
struct webhook;

struct egressd {
	uint32_t magic;
	struct event_base *base;
	const struct config *cfg; /* borrowed from main */
	struct log *log; /* borrowed from main */
	struct stats stats;

	struct policy *policy; /* current snapshot, one reference owned */

	struct nft *nft; /* NULL in dns mode */
	struct dns *dns;
	struct api *api;
	struct webhook *webhook; /* deny webhook, NULL when not configured */

	/* Readiness, truthful: each flag says what is really in force. */
	bool nft_ok, dns_ok, api_ok, selfcheck_ok;
	char nft_why[EGRESSD_WHY_MAX];
	char dns_why[EGRESSD_WHY_MAX];

	struct event *ev_term, *ev_int, *ev_hup, *ev_usr1;
	int inotify_fd, wd_policy, wd_rules, wd_token;
	char policy_base[4096]; /* file name of the policy inside its dir */
	char token_base[4096]; /* file name of the token file inside its dir */
	bool rules_dir_dirty;
	struct event *ev_inotify, *ev_reload, *ev_renew;
	struct nft_renew *renew; /* conntrack renew, sliced on the loop */
	/* Flow cutting left for later slices (more than one pass). */
	struct event *ev_cut;
	size_t cut_total, cut_passes;
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
};

int egressd_init(
    struct egressd *d, const struct config *cfg, struct log *lg, struct err *e);
/* Runs the loop until SIGTERM/SIGINT. Returns the exit code. */
int egressd_run(struct egressd *d);
void egressd_clear(struct egressd *d);

/*
 * Puts next in force (takes a new reference; the caller keeps its own).
 * persist: rewrite the policy file afterwards (API mutations).
 */
int egressd_commit(
    struct egressd *d, struct policy *next, bool persist, struct err *e);
/* Re-reads the policy file and rules directory; why is a fixed string. */
int egressd_reload(struct egressd *d, const char *why);

#endif
