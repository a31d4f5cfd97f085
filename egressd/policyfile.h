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

#include <stddef.h>
#include <stdint.h>

#include "egressd/config.h"
#include "egressd/log.h"
#include "policy/policy.h"

/* New snapshot (refs 1), or NULL with every error in d. */
struct policy *policyfile_load(const struct config *cfg, struct policy_diag *d);

/*
 * Writes p to path. *hash (may be NULL) gets the hash of the bytes
 * written, so the daemon can recognise its own rewrite coming back through
 * the file watch. failpoint/lg serve crash-injection tests. 0/-1.
 */
int policyfile_write(const struct policy *p, const char *path, uint64_t *hash,
    const char *failpoint, struct log *lg, struct err *e);

/*
 * 0 when a file egressd takes policy or secrets from is owned by root or
 * egressd's euid and writable by nobody else; -1 with the reason in e
 * (without the path: callers name the file).
 */
struct stat;
int policyfile_check_owner(const struct stat *st, struct err *e);

/* Reads a whole file of at most max bytes (NUL-terminated, caller frees);
 * NULL when missing or larger. */
char *policyfile_read(const char *path, size_t max, size_t *len);

#endif
