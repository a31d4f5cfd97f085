/*
 * daemon_commit: every policy change (API mutation or file reload) as one
 * job of the commit queue (egressd/base/workq.h), and the commit itself
 * as ordered steps with their undo (daemon.h, "Commit order").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/api/api.h"
#include "egressd/base/failpoint.h"
#include "egressd/base/log.h"
#include "egressd/base/workq.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon_int.h"
#include "egressd/nfq/nfq.h"
#include "egressd/daemon/policyfile.h"
#include "egressd/nft/nft.h"
#include "egressd/proxy/proxy.h"
#include "policy/policy.h"
#include "policy/policy_apicreds.h"
#include "util/fileread.h"
#include "util/hash.h"
#include "util/secmem.h"
#include "vault/vault.h"

/*
 * Puts next in force (takes a new reference; the caller keeps its own).
 * tmp: the policy file's rewrite, prepared (policyfile_prepare) and put
 * in place after the swap; NULL: none (reloads, the vault). prep: why
 * preparing it failed (the persist step fails with it), or NULL.
 */
static int egressd_commit(struct egressd *d, struct policy *next,
    struct policyfile_tmp *tmp, const struct err *prep, struct err *e);

/* Logs every diagnostic of a failed load, one line each. */
static void
egressd_log_diag(
    struct egressd *d, const char *ev, const struct policy_diag *dg)
{
	size_t i;

	for (i = 0; i < dg->n; i++)
		log_error(d->log, ev, LOG_S("error", dg->msgs[i]));
	if (dg->truncated)
		log_error(d->log, ev, LOG_S("error", "more errors not shown"));
}

/*
 * A --policy path with a typo would otherwise start deny-all in silence:
 * say which file is missing and what is in force instead, at every load.
 */
void
daemon_commit_note_file(
    struct egressd *d, const struct policyfile_info *info, const char *why)
{
	d->policy_file_missing = info->file_missing;
	d->policy_fallback = info->fallback;
	if (info->file_missing)
		log_warn(d->log, "policy.file_missing",
		    LOG_S("path", d->cfg->policy_file), LOG_S("trigger", why),
		    LOG_S("fallback", info->fallback));
}

/* Hash of the policy file's bytes now; false when there is none. */
bool
daemon_commit_file_hash(const struct egressd *d, uint64_t *h)
{
	struct err e;
	char *bytes;
	size_t len;

	if (d->cfg->policy_file == NULL ||
	    fileread_all(d->cfg->policy_file, d->cfg->policy_file_max, 0,
	        &bytes, &len, &e) == -1)
		return false;
	*h = hash_fnv1a(bytes, len);
	secmem_wipe(bytes, len); /* inline credential values */
	free(bytes);
	return true;
}

/*
 * A policy change waiting its turn in d->wq: an API mutation (m) or a
 * reload (why). start, on the loop: the snapshot in force becomes base.
 * work, on the worker: next decided from base (the API's decide, or the
 * loader), and the policy file's new bytes written and synced beside it
 * when the change persists. done, on the loop: egressd_commit (nft ->
 * vault -> swap -> rename into place, undone as one); then, when the
 * file was renamed, one more work phase syncs its directory before the
 * answer goes out.
 */
#define COMMIT_JOB_MAGIC 0x434a4f42u /* "CJOB" */

struct commit_job {
	struct workq_job wj; /* first */
	uint32_t magic;
	struct egressd *d;
	struct api_mutation *m; /* API: borrowed until m->done */
	const char *why; /* reload: "sighup", "inotify" */
	struct policy *base, *next; /* one reference each */
	/* The policy file's rewrite (API /policy mutations). */
	bool persist;
	struct policyfile_tmp tmp;
	bool prep_failed;
	struct err prep_e;
	bool sync_dir; /* renamed: the directory's fsync is next */
	/* Reload. */
	bool skip; /* the file's bytes are the ones in force */
	bool have;
	uint64_t h;
	struct policyfile_info info;
	struct policy_diag dg;
	bool load_failed;
	struct err e; /* the vault carry's error */
};

static struct commit_job *
commit_job_of(struct workq_job *wj)
{
	struct commit_job *j = (struct commit_job *)wj;

	if (j == NULL || j->magic != COMMIT_JOB_MAGIC)
		abort();
	return j;
}

/*
 * A new job of d's queue with the phases of one kind of change (reload,
 * API mutation); the caller adds what that kind needs (why, m) and
 * submits it. NULL when out of memory.
 */
static struct commit_job *
commit_job_new(struct egressd *d, workq_start_fn start, workq_work_fn work,
    workq_done_fn done)
{
	struct commit_job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return NULL;
	j->magic = COMMIT_JOB_MAGIC;
	j->d = d;
	j->wj.start = start;
	j->wj.work = work;
	j->wj.done = done;
	policy_diag_init(&j->dg);
	return j;
}

static void
commit_job_free(struct commit_job *j)
{
	policyfile_discard(&j->tmp);
	policy_unref(j->base);
	policy_unref(j->next);
	policy_diag_clear(&j->dg);
	j->magic = 0;
	free(j);
}

static void
reload_start_cb(struct workq_job *wj)
{
	struct commit_job *j = commit_job_of(wj);
	struct egressd *d = j->d;

	/* Hash before loading: a change racing the load triggers again. */
	j->have = daemon_commit_file_hash(d, &j->h);
	/*
	 * Our own rewrite, or a touch, comes back through inotify with the
	 * bytes already in force: not a new policy. SIGHUP always reloads.
	 */
	if (strcmp(j->why, "inotify") == 0 && !d->rules_dir_dirty &&
	    !d->creds_dirty && j->have && d->file_hash_valid &&
	    j->h == d->file_hash) {
		j->skip = true;
		return;
	}
	d->rules_dir_dirty = false;
	d->creds_dirty = false;
	j->base = policy_ref(d->policy);
}

/* The worker's: reads files, touches j alone (cfg is immutable). */
static void
reload_work_cb(struct workq_job *wj)
{
	struct commit_job *j = commit_job_of(wj);
	struct policy *loaded;

	if (j->skip)
		return;
	if ((loaded = policyfile_load(j->d->cfg, &j->dg, &j->info)) == NULL) {
		j->load_failed = true;
		return;
	}
	/* The loader's snapshot is still ours alone: number it in sequence. */
	loaded->revision = j->base->revision + 1;
	/* The API's vault stays in force across the operator's reload. */
	j->next = policy_apicreds_carry(loaded, j->base, &j->e);
	policy_unref(loaded);
}

static bool
reload_done_cb(struct workq_job *wj, bool cancelled)
{
	struct commit_job *j = commit_job_of(wj);
	struct egressd *d = j->d;
	struct err e = {""};

	if (cancelled || j->skip)
		goto out_free;
	if (j->load_failed) {
		d->stats.policy_reloads_failed++;
		egressd_log_diag(d, "policy.reload_failed", &j->dg);
		log_error(d->log, "policy.reload_failed",
		    LOG_S("trigger", j->why), LOG_U("errors", j->dg.n),
		    LOG_U("revision", d->policy->revision));
		goto out_free;
	}
	if (j->next == NULL) {
		d->stats.policy_reloads_failed++;
		log_error(d->log, "policy.reload_failed",
		    LOG_S("trigger", j->why), LOG_S("error", j->e.msg),
		    LOG_S("reason", "credential vault"),
		    LOG_U("revision", d->policy->revision));
		goto out_free;
	}
	if (egressd_commit(d, j->next, NULL, NULL, &e) == -1) {
		d->stats.policy_reloads_failed++;
		log_error(d->log, "policy.reload_failed",
		    LOG_S("trigger", j->why), LOG_S("error", e.msg),
		    LOG_U("revision", d->policy->revision));
		goto out_free;
	}
	d->stats.policy_reloads_ok++;
	daemon_commit_note_file(d, &j->info, j->why);
	d->file_hash = j->h;
	d->file_hash_valid = j->have;
	log_info(d->log, "policy.loaded", LOG_S("trigger", j->why),
	    LOG_U("revision", j->next->revision),
	    LOG_U("rules", j->next->nrules),
	    LOG_S("mode", policy_mode_name(j->next)));
out_free:
	commit_job_free(j);
	return false;
}

void
daemon_commit_reload(struct egressd *d, const char *why)
{
	struct commit_job *j =
	    commit_job_new(d, reload_start_cb, reload_work_cb, reload_done_cb);
	struct err e = {""};

	if (j == NULL) {
		log_error(d->log, "policy.reload_failed", LOG_S("trigger", why),
		    LOG_S("error", "out of memory"));
		return;
	}
	j->why = why;
	if (workq_submit(d->wq, &j->wj, &e) == -1) {
		d->stats.policy_reloads_failed++;
		log_error(d->log, "policy.reload_failed", LOG_S("trigger", why),
		    LOG_S("error", e.msg));
		commit_job_free(j);
	}
}

/* ---- API mutations --------------------------------------------------- */

static void
mutation_start_cb(struct workq_job *wj)
{
	struct commit_job *j = commit_job_of(wj);
	struct egressd *d = j->d;

	j->base = policy_ref(d->policy);
	/* The vault lives in memory: its mutations never rewrite the file;
	 * nor does anything while the operator's volume is the source. */
	j->persist = j->m->persist && d->cfg->policy_file != NULL &&
	    d->persist_off == NULL;
	if (j->m->on_loop)
		j->next = j->m->decide(j->m, j->base);
}

/* The worker's: the API's pure decide, then the file's new bytes. */
static void
mutation_work_cb(struct workq_job *wj)
{
	struct commit_job *j = commit_job_of(wj);

	if (j->sync_dir) {
		policyfile_sync_dir(j->tmp.path);
		return;
	}
	if (!j->m->on_loop)
		j->next = j->m->decide(j->m, j->base);
	if (j->next != NULL && j->persist &&
	    policyfile_prepare(
	        j->next, j->d->cfg->policy_file, &j->tmp, &j->prep_e) == -1)
		j->prep_failed = true;
}

static bool
mutation_done_cb(struct workq_job *wj, bool cancelled)
{
	struct commit_job *j = commit_job_of(wj);
	struct egressd *d = j->d;
	struct err e = {""};
	int rc = 1;

	if (cancelled && j->sync_dir) {
		/* In force already: make it durable, then say so. */
		policyfile_sync_dir(j->tmp.path);
		rc = 0;
	} else if (cancelled) {
		err_set(&e, "egressd is shutting down");
		rc = -1;
	} else if (j->sync_dir) {
		rc = 0;
	} else if (j->next != NULL) {
		rc = egressd_commit(d, j->next, j->persist ? &j->tmp : NULL,
		    j->prep_failed ? &j->prep_e : NULL, &e);
		/* Renamed into place: durable once the directory is synced,
		 * and that fsync is the worker's. */
		if (rc == 0 && j->persist) {
			j->sync_dir = true;
			return true;
		}
	}
	j->m->done(j->m, rc, rc == 0 ? j->next : NULL, &e);
	commit_job_free(j);
	return false;
}

int
daemon_commit_mutate(void *arg, struct api_mutation *m, struct err *e)
{
	struct egressd *d = egressd_arg(arg);
	struct commit_job *j = commit_job_new(
	    d, mutation_start_cb, mutation_work_cb, mutation_done_cb);

	if (j == NULL) {
		err_set(e, "out of memory");
		return -1;
	}
	j->m = m;
	if (workq_submit(d->wq, &j->wj, e) == -1) {
		commit_job_free(j);
		return -1;
	}
	return 0;
}

/* ---- the commit steps ------------------------------------------------ */

static void
egressd_swap(struct egressd *d, struct policy *next)
{
	struct policy *old = d->policy;

	d->policy = policy_ref(next);
	d->policy_gen++; /* the proxy's judge_gen: verdicts may change */
	if (d->nfq != NULL)
		nfq_judge_moved(d->nfq); /* ... and the kernel's are void */
	d->stats.policy_revision = next->revision;
	policy_unref(old);
}

/*
 * The commit, as ordered steps. Each one that can fail is undone, last
 * first, when a later one fails, so a failed commit leaves everything as
 * it was; failpoint "commit.after_<name>" follows each step that ran
 * (crash tests). The vault becomes one more row between nft and swap.
 */
struct commit {
	struct policy *old, *next; /* old: a reference held for the undo */
	struct policyfile_tmp *tmp; /* NULL: nothing to persist */
	const struct err *prep; /* why tmp could not be prepared, or NULL */
	struct vault *vold; /* the vault replaced, kept for the undo */
};

/* 0 done, 1 nothing to do (no failpoint, no undo), -1 and e failed. */
typedef int (*commit_do_fn)(struct egressd *d, struct commit *c, struct err *e);
typedef void (*commit_undo_fn)(struct egressd *d, struct commit *c);

/* A file reload's policy this daemon cannot enforce fails here, before
 * anything changed (the API refused it already). */
static int
commit_enforceable(struct egressd *d, struct commit *c, struct err *e)
{
	return daemon_wire_enforceable(d->cfg, c->next, e);
}

static int
commit_nft(struct egressd *d, struct commit *c, struct err *e)
{
	/* The wire first: the answer may only say what is in force. */
	if (d->nft == NULL)
		return 1;
	if (nft_apply_policy(d->nft, c->next, e) == -1) {
		log_error(d->log, "nft.apply_failed",
		    LOG_U("revision", c->next->revision),
		    LOG_S("error", e->msg));
		err_prefix(e, "nft apply");
		return -1;
	}
	return 0;
}

static void
commit_nft_undo(struct egressd *d, struct commit *c)
{
	struct err re = {""};

	if (nft_apply_policy(d->nft, c->old, &re) == -1)
		log_error(d->log, "nft.apply_failed",
		    LOG_S("trigger", "rollback"), LOG_S("error", re.msg));
}

/*
 * The vault revision of next, built (credentials read, file sources
 * too) and put in force with it: a file source that cannot be read
 * fails the commit, nothing changes. Connections keep the revision they
 * took (vault_ref) until their request is done.
 */
static int
commit_vault(struct egressd *d, struct commit *c, struct err *e)
{
	struct vault *v;

	if (d->proxy == NULL && c->next->nbindings == 0 && d->vault == NULL)
		return 1;
	if ((v = vault_new(c->next, d->vault, e)) == NULL) {
		log_error(d->log, "vault.build_failed",
		    LOG_U("revision", c->next->revision),
		    LOG_S("error", e->msg));
		err_prefix(e, "credential vault");
		return -1;
	}
	c->vold = d->vault;
	d->vault = v;
	return 0;
}

static void
commit_vault_undo(struct egressd *d, struct commit *c)
{
	vault_free(d->vault);
	d->vault = c->vold;
	c->vold = NULL;
}

static int
commit_swap(struct egressd *d, struct commit *c, struct err *e)
{
	(void)e;
	/* In-flight queries keep their own reference to the old snapshot. */
	egressd_swap(d, c->next);
	return 0;
}

static void
commit_swap_undo(struct egressd *d, struct commit *c)
{
	egressd_swap(d, c->old);
}

/*
 * The new bytes were written and synced beside the file on the worker
 * (no fsync on the loop); here they are put in place, after the swap, so
 * the file never names a policy that is not in force. The operator's
 * volume (persist_off) is the source of truth: nothing was prepared then,
 * and the change stays in memory until a restart or the volume's next
 * update. A failed preparation fails here, as a failed write did, so the
 * rollback is the same.
 */
static int
commit_persist(struct egressd *d, struct commit *c, struct err *e)
{
	if (c->tmp == NULL)
		return 1;
	if (c->prep != NULL)
		err_set(e, "%s", c->prep->msg);
	if (c->prep != NULL ||
	    policyfile_publish(c->tmp, d->cfg->failpoint, d->log, e) == -1) {
		log_error(d->log, "policy.persist_failed",
		    LOG_S("path", d->cfg->policy_file), LOG_S("error", e->msg));
		err_prefix(e, "persist");
		return -1;
	}
	d->file_hash = c->tmp->hash;
	d->file_hash_valid = true;
	d->policy_file_missing = false; /* it exists now */
	return 0;
}

static const struct {
	const char *failpoint; /* hit after the step */
	commit_do_fn apply;
	commit_undo_fn undo; /* NULL: nothing later can fail */
} commit_steps[] = {
    {"commit.after_check", commit_enforceable, NULL},
    {"commit.after_nft", commit_nft, commit_nft_undo},
    {"commit.after_vault", commit_vault, commit_vault_undo},
    {"commit.after_swap", commit_swap, commit_swap_undo},
    {"commit.after_persist", commit_persist, NULL},
};

#define COMMIT_NSTEPS (sizeof(commit_steps) / sizeof(commit_steps[0]))

static int
egressd_commit(struct egressd *d, struct policy *next,
    struct policyfile_tmp *tmp, const struct err *prep, struct err *e)
{
	struct commit c = {policy_ref(d->policy), next, tmp, prep, NULL};
	bool done[COMMIT_NSTEPS] = {false};
	size_t i;
	int rc;

	failpoint_hit(d->cfg->failpoint, "commit.before_nft", d->log);
	for (i = 0; i < COMMIT_NSTEPS; i++) {
		rc = commit_steps[i].apply(d, &c, e);
		if (rc == -1) {
			while (i-- > 0)
				if (done[i] && commit_steps[i].undo != NULL)
					commit_steps[i].undo(d, &c);
			policy_unref(c.old);
			return -1;
		}
		done[i] = rc == 0;
		if (done[i])
			failpoint_hit(d->cfg->failpoint,
			    commit_steps[i].failpoint, d->log);
	}
	/* In force everywhere: what follows the new policy. */
	vault_free(c.vold);
	daemon_watch_creds(d, next);
	daemon_wire_follow_upstreams(d, c.old, next);
	policy_unref(c.old);
	if (d->nft != NULL) {
		log_info(
		    d->log, "nft.applied", LOG_U("revision", next->revision));
		daemon_nft_cut_flows(d, "update");
		daemon_nft_follow_ttl(d);
	}
	/* The proxy's connections are redirected flows the cut skips. */
	if (d->proxy != NULL) {
		size_t closed = proxy_rejudge(d->proxy);

		if (closed > 0)
			log_info(d->log, "proxy.rejudged",
			    LOG_U("closed", closed),
			    LOG_U("revision", next->revision));
	}
	/* ... and the flows judged in flight, by name (nfq_rejudge) */
	daemon_nfq_rejudge(d, next->revision);
	return 0;
}
