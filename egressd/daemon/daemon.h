/*
 * daemon: the egressd context and its life cycle.
 *
 * struct egressd is the only home of mutable daemon state (STYLE.md): the
 * event base, the current policy snapshot, the nft, dns and api modules,
 * counters and the reload machinery. Opaque: main() owns it through
 * daemon_new/daemon_free; every module gets a borrowed pointer to what
 * it needs, never to the whole context, except through the hooks below.
 *
 * Hooks (the dns_hooks, api_hooks, ... the daemon fills in): one ownership
 * rule for all of them. What a hook returns is lent: valid until the
 * caller returns to the event loop or calls a hook that can change it (a
 * commit swaps the snapshot); a caller that keeps it longer takes its own
 * reference. What a caller passes to a hook is lent the same way: a hook
 * that keeps it takes its own reference.
 *
 * Commit order for every policy change (API mutation or file reload), one
 * change at a time in a FIFO (egressd/base/workq.h): decide against the
 * snapshot in force and write the policy file's new bytes beside it (on
 * the commit worker) -> apply the nft batch -> swap the snapshot -> rename
 * the file into place (API mutations only) -> sync its directory (worker)
 * -> answer. A failure at any step before the answer leaves everything as
 * it was (docs/architecture.md, "Policy changes").
 */
#ifndef EGRESSD_DAEMON_H
#define EGRESSD_DAEMON_H

#include "util/err.h"

struct config;
struct egressd;
struct log;

/*
 * Loads the policy, programs nft, opens the resolver and the API: a
 * running daemon context, or NULL and e (everything it had set up torn
 * down again, nft rules it had applied left in force: fail closed). cfg
 * and lg are borrowed and must outlive it.
 */
struct egressd *daemon_new(
    const struct config *cfg, struct log *lg, struct err *e);
/* Runs the loop until SIGTERM/SIGINT. Returns the exit code. */
int daemon_run(struct egressd *d);
/* Stops and frees everything d owns; NULL is fine. */
void daemon_free(struct egressd *d);

#endif
