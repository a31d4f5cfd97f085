/*
 * policyfile: where the policy comes from and where it goes back to.
 *
 * policyfile_load() is the one loader used by --check, start and reload, so
 * they can never disagree: the policy file (when it exists) wins over
 * OPENSANDBOX_EGRESS_RULES; neither means deny-all (fail closed); then the
 * always-rules directory. policyfile_write() persists a snapshot after an
 * API change atomically (temp file, fsync, rename, fsync of the directory)
 * in canonical YAML, never with a secret in it.
 */
#ifndef EGRESSD_POLICYFILE_H
#define EGRESSD_POLICYFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "egressd/daemon/config.h"
#include "egressd/base/log.h"
#include "policy/policy.h"

/* Digits of the pid in a temp file's name "<policy>.tmp.<pid>" (a pid_t
 * has at most 10). */
#define POLICYFILE_PID_DIGITS_MAX 10

/*
 * What policyfile_load fell back to. The reference starts from
 * OPENSANDBOX_EGRESS_RULES (or deny-all) when the policy file does not
 * exist; egressd does the same, but a typo in --policy must not block
 * everything silently, so the caller learns it and warns.
 */
struct policyfile_info {
	bool file_missing; /* policy_file configured, but not there */
	const char *fallback; /* then: "OPENSANDBOX_EGRESS_RULES" or
			       * "deny-all" (static strings) */
};

/*
 * New snapshot (refs 1), or NULL with every error in d. info (may be
 * NULL) says whether a configured policy file was missing. Only a file
 * that does not exist (ENOENT, ENOTDIR) falls back; one that cannot be
 * read is an error.
 */
struct policy *policyfile_load(const struct config *cfg, struct policy_diag *d,
    struct policyfile_info *info);

/*
 * Why path cannot take egressd's rewrites, or NULL when it can: a file
 * in a Kubernetes ConfigMap/Secret volume (a link through "..data": the
 * kubelet owns it, and a rewrite would be replaced by the next sync) or
 * on a read-only file system. The daemon then keeps API changes in
 * memory only (static string; NULL path is NULL).
 */
const char *policyfile_persist_off(const char *path);

/*
 * Writes p to path, through "<path>.tmp.<pid>" (created afresh: a file or
 * link already there is replaced, never written through). *hash (may be
 * NULL) gets the hash of the bytes written, so the daemon can recognise
 * its own rewrite coming back through the file watch. failpoint/lg serve
 * crash-injection tests. 0/-1.
 */
int policyfile_write(const struct policy *p, const char *path, uint64_t *hash,
    const char *failpoint, struct log *lg, struct err *e);

/*
 * policyfile_write in its halves, so the slow one can run on the commit
 * worker (egressd/base/workq.h) and the ordered one on the loop:
 *   prepare  renders p, writes "<path>.tmp.<pid>" afresh and fsyncs it
 *            (thread-safe: no logging, touches only t); t->hash is the
 *            hash of the bytes, t->ready set;
 *   publish  failpoint "persist.before_rename", then the rename into
 *            place (the temp file removed when it fails); loop only;
 *   sync_dir the directory's fsync, which makes the rename durable
 *            (thread-safe; its failure changes nothing in force);
 *   discard  removes a prepared temp file that will not be published.
 */
struct policyfile_tmp {
	char path[PATH_MAX], tmp[PATH_MAX];
	uint64_t hash;
	bool ready; /* tmp written and synced, not yet renamed or removed */
};

int policyfile_prepare(const struct policy *p, const char *path,
    struct policyfile_tmp *t, struct err *e);
int policyfile_publish(struct policyfile_tmp *t, const char *failpoint,
    struct log *lg, struct err *e);
void policyfile_sync_dir(const char *path);
void policyfile_discard(struct policyfile_tmp *t);

/*
 * Removes the temp files of policyfile_write that a crash (egressd killed
 * between create and rename) left next to path: regular files named
 * "<base>.tmp.<digits>" owned by uid, which may hold the operator's inline
 * credential values and would otherwise stay forever. Each one is logged
 * (policy.stale_tmp_removed, path) to lg; *nremoved (may be NULL) gets
 * their number. -1 with e when the directory cannot be read or a file
 * cannot be removed (the others still are). Call before the first write.
 */
int policyfile_remove_stale(const char *path, uid_t uid, size_t *nremoved,
    struct log *lg, struct err *e);

#endif
