#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egressd/api/api.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon.h"
#include "egressd/dns/dns.h"
#include "egressd/base/failpoint.h"
#include "egressd/base/log.h"
#include "egressd/nft/nft.h"
#include "egressd/daemon/policyfile.h"
#include "egressd/proxy/proxy.h"
#include "egressd/base/stats.h"
#include "egressd/daemon/webhook.h"
#include "egressd/base/workq.h"
#include "policy/policy.h"
#include "policy/policy_binding.h"
#include "policy/policy_vault.h"
#include "vault/vault.h"
#include "util/addr.h"
#include "util/fileread.h"
#include "util/hash.h"
#include "util/now.h"
#include "util/secmem.h"

/*
 * The daemon context, opaque outside this file (daemon.h): modules get
 * the borrowed pieces they need through their options and hooks, never
 * this struct.
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

struct egressd {
	uint32_t magic;
	struct event_base *base;
	const struct config *cfg; /* borrowed from main */
	struct log *log; /* borrowed from main */
	struct stats stats;

	struct policy *policy; /* current snapshot, one reference owned */
	/* Every policy change (API mutation, reload) waits its turn here:
	 * decided and persisted off the loop, put in force on it. */
	struct workq *wq;

	struct nft *nft; /* NULL in dns mode */
	struct dns *dns;
	struct api *api;
	struct webhook *webhook; /* deny webhook, NULL when not configured */
	struct proxy *proxy; /* transparent proxy, NULL when off */
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
 * callback of this file starts here, so a stray or freed pointer stops
 * the process instead of being used.
 */
static struct egressd *
egressd_arg(void *arg)
{
	struct egressd *d = arg;

	if (d == NULL || d->magic != EGRESSD_MAGIC)
		abort();
	return d;
}

/*
 * Puts next in force (takes a new reference; the caller keeps its own).
 * tmp: the policy file's rewrite, prepared (policyfile_prepare) and put
 * in place after the swap; NULL: none (reloads, the vault). prep: why
 * preparing it failed (the persist step fails with it), or NULL.
 */
static int egressd_commit(struct egressd *d, struct policy *next,
    struct policyfile_tmp *tmp, const struct err *prep, struct err *e);
/* Queues a re-read of the policy file and rules directory; why is a
 * fixed string. */
static void egressd_reload(struct egressd *d, const char *why);

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
static void
egressd_note_policy_file(
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
static bool
egressd_file_hash(const struct egressd *d, uint64_t *h)
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
 * A rotated token file (a Secret update) takes effect at the next reload;
 * a file that cannot be read now keeps the token in force (fail closed:
 * auth never turns off), and says so.
 */
static void
egressd_reload_token(struct egressd *d, const char *why)
{
	char buf[CONFIG_TOKEN_MAX + 2];
	struct err e = {""};

	if (d->cfg->token_file == NULL || d->api == NULL)
		return;
	if (config_token_read(d->cfg->token_file, buf, sizeof(buf), &e) < 0) {
		secmem_wipe(buf, sizeof(buf)); /* what was read before */
		log_error(d->log, "api.token_reload_failed",
		    LOG_S("trigger", why), LOG_S("error", e.msg));
		return;
	}
	if (!api_token_is(d->api, buf)) {
		if (api_set_token(d->api, buf, &e) < 0)
			log_error(d->log, "api.token_reload_failed",
			    LOG_S("trigger", why), LOG_S("error", e.msg));
		else
			log_info(d->log, "api.token_rotated",
			    LOG_S("trigger", why),
			    LOG_S("path", d->cfg->token_file));
	}
	secmem_wipe(buf, sizeof(buf));
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
	j->have = egressd_file_hash(d, &j->h);
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
	j->next = policy_vault_carry(loaded, j->base, &j->e);
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
	egressd_note_policy_file(d, &j->info, j->why);
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

static void
egressd_reload(struct egressd *d, const char *why)
{
	struct commit_job *j =
	    commit_job_new(d, reload_start_cb, reload_work_cb, reload_done_cb);
	struct err e = {""};

	/* The token is no policy: it need not wait for the queue. */
	egressd_reload_token(d, why);
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

static void
egressd_reload_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egressd *d = egressd_arg(arg);

	(void)fd;
	(void)what;
	egressd_reload(d, "inotify");
}

/*
 * Editors save by rename, by truncate+write or by several writes: watch
 * the directories, not the files, and reload once things are quiet.
 */
static void
egressd_inotify_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egressd *d = egressd_arg(arg);
	char buf[4096]
	    __attribute__((aligned(__alignof__(struct inotify_event))));
	struct timeval tv = {0, EGRESSD_RELOAD_DEBOUNCE_MS * 1000};
	bool relevant = false;
	ssize_t n;

	(void)what;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		char *p = buf;
		while (p < buf + n) {
			const struct inotify_event *ev = (void *)p;
			/* a Kubernetes volume update swaps the ..data link
			 * the files point through */
			bool kswap =
			    ev->len > 0 && strcmp(ev->name, "..data") == 0;

			/* not else-if: the files may share a directory (one
			 * watch, one wd) */
			if (ev->wd == d->wd_rules && ev->len > 0 &&
			    (kswap || strstr(ev->name, ".always") != NULL)) {
				relevant = true;
				d->rules_dir_dirty = true;
			}
			if (ev->wd == d->wd_policy && ev->len > 0 &&
			    (kswap || strcmp(ev->name, d->policy_base) == 0))
				relevant = true;
			if (ev->wd == d->wd_token && ev->len > 0 &&
			    (kswap || strcmp(ev->name, d->token_base) == 0))
				relevant = true;
			for (size_t i = 0; ev->len > 0 && i < d->ncred_watch;
			     i++)
				if (ev->wd == d->cred_watch[i].wd &&
				    (kswap ||
				        strcmp(ev->name,
				            d->cred_watch[i].base) == 0)) {
					relevant = true;
					d->creds_dirty = true;
				}
			p += sizeof(*ev) + ev->len;
		}
	}
	if (relevant)
		evtimer_add(d->ev_reload, &tv);
}

/* Watches the directory holding path (its name into base); -1 on failure,
 * logged as event: the file is still read on SIGHUP. */
static int
egressd_watch_dir_of(struct egressd *d, const char *path, char *base,
    size_t bcap, const char *event, uint32_t mask)
{
	char dir[PATH_MAX];
	int wd;

	if (fileread_split_path(path, dir, sizeof(dir), base, bcap) == -1) {
		log_warn(d->log, event, LOG_S("path", path),
		    LOG_S("error", "path too long"));
		return -1;
	}
	wd = inotify_add_watch(d->inotify_fd, dir, mask);
	if (wd == -1)
		log_warn(d->log, event, LOG_S("path", dir),
		    LOG_S("error", strerror(errno)));
	return wd;
}

#define EGRESSD_WATCH_MASK                                                     \
	(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE |                \
	    IN_MOVED_FROM | IN_ATTRIB)

/* Watches the directory of every file credential of p not watched yet. */
static void
egressd_watch_creds(struct egressd *d, const struct policy *p)
{
	char base[NAME_MAX + 1];
	size_t i, j;
	int wd;

	if (d->inotify_fd == -1)
		return;
	for (i = 0; i < p->ncredentials; i++) {
		const char *path = policy_credential_path(p->credentials[i]);
		if (policy_credential_source(p->credentials[i]) !=
		        POLICY_CRED_FILE ||
		    path == NULL)
			continue;
		if (d->ncred_watch == EGRESSD_CRED_WATCH_MAX) {
			log_warn(d->log, "vault.watch_failed",
			    LOG_S("path", path),
			    LOG_S("error", "too many credential files"));
			return;
		}
		wd = egressd_watch_dir_of(d, path, base, sizeof(base),
		    "vault.watch_failed", EGRESSD_WATCH_MASK);
		if (wd == -1)
			continue;
		for (j = 0; j < d->ncred_watch; j++)
			if (d->cred_watch[j].wd == wd &&
			    strcmp(d->cred_watch[j].base, base) == 0)
				break;
		if (j < d->ncred_watch)
			continue;
		d->cred_watch[j].wd = wd;
		memcpy(d->cred_watch[j].base, base, sizeof(base));
		d->ncred_watch++;
	}
}

static int
egressd_watch_files(struct egressd *d, struct err *e)
{
	const uint32_t mask = EGRESSD_WATCH_MASK;

	d->wd_policy = d->wd_rules = d->wd_token = -1;
	d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->inotify_fd == -1) {
		err_set(e, "inotify: %s", strerror(errno));
		return -1;
	}
	if (d->cfg->policy_file != NULL)
		d->wd_policy =
		    egressd_watch_dir_of(d, d->cfg->policy_file, d->policy_base,
		        sizeof(d->policy_base), "policy.watch_failed", mask);
	if (d->cfg->token_file != NULL)
		d->wd_token =
		    egressd_watch_dir_of(d, d->cfg->token_file, d->token_base,
		        sizeof(d->token_base), "api.token_watch_failed", mask);
	if (d->cfg->rules_dir != NULL && d->cfg->rules_dir[0] != '\0') {
		d->wd_rules =
		    inotify_add_watch(d->inotify_fd, d->cfg->rules_dir, mask);
		/* A missing rules directory is normal; SIGHUP still works. */
		if (d->wd_rules == -1 && errno != ENOENT)
			log_warn(d->log, "policy.watch_failed",
			    LOG_S("path", d->cfg->rules_dir),
			    LOG_S("error", strerror(errno)));
	}
	egressd_watch_creds(d, d->policy);
	d->ev_inotify = event_new(d->base, d->inotify_fd, EV_READ | EV_PERSIST,
	    egressd_inotify_cb, d);
	d->ev_reload = evtimer_new(d->base, egressd_reload_cb, d);
	if (d->ev_inotify == NULL || d->ev_reload == NULL ||
	    event_add(d->ev_inotify, NULL) == -1) {
		err_set(e, "cannot register file watch events");
		return -1;
	}
	return 0;
}

/* TERM, INT: leave the loop; egressd_free() then tears down. */
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

/* ---- module wiring --------------------------------------------------- */

static struct policy *
egressd_policy_get_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->policy;
}

/*
 * The resolver's learn hook: every address of an answer goes into the
 * learned sets, in batches of NFT_LEARN_BATCH_MAX, before the answer is
 * released.
 */
static int
egressd_learn_cb(void *arg, const char *qname, const struct dns_learn_addr *a,
    size_t n, struct err *e)
{
	struct egressd *d = egressd_arg(arg);
	struct nft_learn_addr batch[NFT_LEARN_BATCH_MAX];
	size_t i, k;

	if (d->nft == NULL)
		return 0;
	for (i = 0; i < n; i += k) {
		for (k = 0; k < NFT_LEARN_BATCH_MAX && i + k < n; k++) {
			const struct dns_learn_addr *s = &a[i + k];
			batch[k].family = (uint8_t)s->family;
			memcpy(batch[k].addr, s->addr, sizeof(batch[k].addr));
			batch[k].ttl = s->ttl;
			batch[k].name = qname;
		}
		if (nft_learn(d->nft, batch, k, e) == -1) {
			log_error(d->log, "nft.learn_failed",
			    LOG_S("name", qname), LOG_S("error", e->msg));
			return -1;
		}
	}
	return 0;
}

/*
 * The asynchronous learn hook (what the resolver uses): the answer is
 * released from done once its transaction's ack arrived.
 */
static uint64_t
egressd_learn_submit_cb(void *arg, const char *qname,
    const struct dns_learn_addr *a, size_t n,
    void (*done)(void *done_arg, int rc, const char *why), void *done_arg,
    struct err *e)
{
	struct egressd *d = egressd_arg(arg);
	struct nft_learn_addr batch[NFT_LEARN_BATCH_MAX];
	uint64_t ticket;
	size_t i;

	if (n > NFT_LEARN_BATCH_MAX) {
		err_set(e, "nft: %zu addresses in one answer (max %d)", n,
		    NFT_LEARN_BATCH_MAX);
		return 0;
	}
	for (i = 0; i < n; i++) {
		batch[i].family = (uint8_t)a[i].family;
		memcpy(batch[i].addr, a[i].addr, sizeof(batch[i].addr));
		batch[i].ttl = a[i].ttl;
		batch[i].name = qname;
	}
	ticket = nft_learn_submit(d->nft, batch, n, qname, done, done_arg, e);
	if (ticket == 0)
		log_error(d->log, "nft.learn_failed", LOG_S("name", qname),
		    LOG_S("error", e->msg));
	return ticket;
}

static void
egressd_learn_cancel_cb(void *arg, uint64_t ticket)
{
	struct egressd *d = egressd_arg(arg);

	nft_learn_cancel(d->nft, ticket);
}

/*
 * The API port the sandbox must never reach, parsed as the API parses its
 * listen address (an address it cannot parse fails the API's start, so
 * egressd never runs with that port unprotected).
 */
static uint16_t
egressd_api_port(const struct config *cfg)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct addr a;
	uint16_t port;

	if (cfg->http_addr == NULL || cfg->http_addr[0] == '\0' ||
	    api_parse_addr(cfg->http_addr, &ss, &len, NULL) == -1 ||
	    addr_from_sockaddr((const struct sockaddr *)&ss, &a, &port) == -1)
		return 0;
	return port;
}

/* Adds port to an nft port list unless present (sets refuse duplicates). */
static void
egressd_add_port(uint16_t *v, size_t *n, uint16_t port)
{
	size_t i;

	for (i = 0; i < *n; i++)
		if (v[i] == port)
			return;
	if (*n < NFT_PORTS_MAX)
		v[(*n)++] = port;
}

static int
egressd_nft_opts(const struct egressd *d, struct nft_opts *o, struct err *e)
{
	const struct config *c = d->cfg;
	uint16_t api_port = egressd_api_port(c);
	size_t i;

	nft_opts_init(o);
	o->mark = c->mark;
	o->dns_port = c->dns_port;
	o->learned_max = c->learned_max;
	/* The proxy binds before the first batch (egressd_start_proxy), so
	 * the redirect never points at a closed port. */
	o->proxy_port = c->proxy_transparent ? c->proxy_port : 0;
	for (i = 0; i < c->nintercept_ports; i++)
		egressd_add_port(o->intercept_ports, &o->nintercept_ports,
		    c->intercept_ports[i]);
	o->nprotected_ports = 0;
	if (api_port != 0)
		o->protected_ports[o->nprotected_ports++] = api_port;
	for (i = 0;
	     i < c->nprotected_ports && o->nprotected_ports < NFT_PORTS_MAX;
	     i++)
		if (c->protected_ports[i] != api_port)
			o->protected_ports[o->nprotected_ports++] =
			    c->protected_ports[i];
	/* pinned inbound ports: the API's own port is one (the lifecycle
	 * server reaches it on the pod IP; its socket carries no mark) */
	o->ninbound_ports = 0;
	for (i = 0; i < c->ninbound_ports; i++)
		egressd_add_port(
		    o->inbound_ports, &o->ninbound_ports, c->inbound_ports[i]);
	if (o->ninbound_ports != 0 && api_port != 0)
		egressd_add_port(
		    o->inbound_ports, &o->ninbound_ports, api_port);
	o->block_doh_443 = c->block_doh_443;
	if (c->nameserver_exempt.n > NFT_ADDRS_MAX ||
	    c->doh_blocklist.n > NFT_ADDRS_MAX) {
		err_set(e, "more than %d nameserver-exempt or DoH addresses",
		    NFT_ADDRS_MAX);
		return -1;
	}
	for (i = 0; i < c->nameserver_exempt.n; i++)
		if (nft_parse_prefix(c->nameserver_exempt.v[i],
		        &o->ns_exempt[o->nns_exempt++], e) == -1)
			return -1;
	for (i = 0; i < c->doh_blocklist.n; i++)
		if (nft_parse_prefix(c->doh_blocklist.v[i],
		        &o->doh_block[o->ndoh_block++], e) == -1)
			return -1;
	return 0;
}

/*
 * Established flows to what the policy in force denies are cut in passes
 * (one conntrack dump, at most NFT_CT_DELETE_MAX deletions each) on the
 * event loop (nft_cut_start: the dump read and the deletes sent in
 * slices), so DNS and the API are served throughout; the first starts
 * before the update is answered, the next when one ends with candidates
 * left, until none remains. Never fails the update: the rules already
 * block new connections.
 */
static void egressd_cut_done(
    void *arg, int rc, size_t cut, bool more, const char *why);

static void
egressd_cut_failed(struct egressd *d, const char *why)
{
	log_error(d->log, "nft.flows_cut_failed",
	    LOG_S("trigger", d->cut_trigger), LOG_U("cut", d->cut_total),
	    LOG_U("passes", d->cut_passes), LOG_S("error", why));
	d->cut_total = d->cut_passes = 0;
}

static void
egressd_cut_pass(struct egressd *d)
{
	struct err e = {""};

	if (nft_cut_start(d->cut, d->policy, egressd_cut_done, d, &e) == -1)
		egressd_cut_failed(d, e.msg);
}

static void
egressd_cut_done(void *arg, int rc, size_t cut, bool more, const char *why)
{
	struct egressd *d = egressd_arg(arg);

	d->cut_total += cut;
	d->cut_passes++;
	if (rc == -1) {
		egressd_cut_failed(d, why);
		return;
	}
	if (more && d->cut_passes < NFT_CT_CUT_PASSES_MAX) {
		egressd_cut_pass(d);
		return;
	}
	if (more) {
		egressd_cut_failed(d, "flows still to cut after the last pass");
		return;
	}
	log_info(d->log, "nft.flows_cut", LOG_S("trigger", d->cut_trigger),
	    LOG_U("cut", d->cut_total), LOG_U("passes", d->cut_passes),
	    LOG_U("revision", d->cut_revision));
	d->cut_total = d->cut_passes = 0;
}

/* A new policy (or the start): judge every live flow again. */
static void
egressd_cut_flows(struct egressd *d, const char *trigger)
{
	/* a pass under way is superseded: this one judges against the
	 * newer policy (what was cut stays cut) */
	nft_cut_abort(d->cut);
	d->cut_total = d->cut_passes = 0;
	d->cut_trigger = trigger;
	d->cut_revision = d->policy->revision;
	egressd_cut_pass(d);
}

/*
 * nftables in two steps around the resolver's start: the netlink handle
 * first (the resolver's learn hook needs it), the ruleset only once the
 * resolver's sockets are bound, so that a query redirected the instant
 * the ruleset is in force queues in a socket instead of meeting a closed
 * port. Until the apply nothing is redirected, and nothing is filtered by
 * egressd either: that is the namespace as egressd found it.
 */
static int
egressd_open_nft(struct egressd *d, struct err *e)
{
	struct nft_opts o;

	if (d->cfg->mode == CONFIG_MODE_DNS) {
		(void)snprintf(d->nft_why, sizeof(d->nft_why),
		    "nftables disabled by mode dns");
		return 0;
	}
	if (egressd_nft_opts(d, &o, e) == -1)
		return -1;
	if ((d->nft = nft_new(&o, &d->stats, e)) == NULL)
		return -1;
	if (nft_attach(d->nft, d->base, e) == -1)
		return -1;
	if ((d->renew = nft_renew_new(d->nft, d->base, e)) == NULL)
		return -1;
	if ((d->cut = nft_cut_new(d->nft, d->base, e)) == NULL)
		return -1;
	return 0;
}

/* The self-check's hand-over: queries that arrived with its probes. */
struct egressd_held {
	struct egressd *d;
	size_t n;
};

static void
egressd_selfcheck_query_cb(void *arg, int family, const uint8_t *msg,
    size_t len, const struct sockaddr *peer, socklen_t peerlen)
{
	struct egressd_held *h = arg;

	if (h->d->magic != EGRESSD_MAGIC)
		abort();
	h->n++;
	dns_udp_input(h->d->dns, family, msg, len, peer, peerlen);
}

static int
egressd_enforce_nft(struct egressd *d, struct err *e)
{
	struct egressd_held held = {.d = d};
	struct nft_selfcheck_io io;
	uint64_t t0;

	if (d->nft == NULL)
		return 0;
	if (nft_apply_policy(d->nft, d->policy, e) == -1) {
		err_prefix(e, "nft apply");
		return -1;
	}
	log_info(d->log, "nft.applied", LOG_U("revision", d->policy->revision),
	    LOG_S("trigger", "start"));
	if (nft_learned_cap(d->nft) < d->cfg->learned_max)
		log_warn(d->log, "nft.learned_size",
		    LOG_U("want", d->cfg->learned_max),
		    LOG_U("kernel", nft_learned_cap(d->nft)),
		    LOG_S("reason", "kernel_kept_set_size"));
	/*
	 * On the resolver's own sockets: what the sandbox sent since the
	 * apply is in them, ahead of the probes, and is answered, not lost.
	 */
	memset(&io, 0, sizeof(io));
	io.fd4 = dns_udp_fd(d->dns, AF_INET);
	io.fd6 = dns_udp_fd(d->dns, AF_INET6);
	io.foreign = egressd_selfcheck_query_cb;
	io.arg = &held;
	t0 = now_mono_us();
	if (io.fd4 < 0 && io.fd6 < 0) {
		err_set(e, "nft self-check: no resolver UDP socket");
		return -1;
	}
	if (nft_selfcheck(d->nft, &io, e) == -1) {
		err_prefix(e, "nft self-check");
		return -1;
	}
	log_info(d->log, "nft.selfcheck_passed",
	    LOG_U("us", now_mono_us() - t0), LOG_B("ipv4", io.fd4 >= 0),
	    LOG_B("ipv6", io.fd6 >= 0), LOG_U("queries", held.n));
	/* Flows from before this start (a restart, a policy file changed
	 * while egressd was down) meet the policy in force too. After the
	 * check: a conntrack dump takes milliseconds, the queries held in the
	 * resolver's sockets need not wait for it. */
	egressd_cut_flows(d, "start");
	d->selfcheck_ok = true;
	d->nft_ok = true;
	return 0;
}

static void
egressd_on_deny_cb(void *arg, const char *qname, const char *reason)
{
	struct egressd *d = egressd_arg(arg);

	webhook_notify(d->webhook, qname, reason);
}

/*
 * The deny webhook's target comes from operator configuration only and its
 * traffic is egressd's own (marked): the sandbox policy neither has to
 * allow it nor lets the sandbox reach it. Its host must be an IP literal:
 * egressd does not resolve its own notification target.
 */
static int
egressd_start_webhook(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	struct webhook_url u;
	struct sockaddr_storage ss;
	struct addr a;
	socklen_t sl;

	if (c->deny_webhook == NULL || c->deny_webhook[0] == '\0')
		return 0;
	if (webhook_parse_url(c->deny_webhook, &u, e) == -1)
		goto fail;
	if (!addr_parse_ip(u.host, strlen(u.host), &a)) {
		err_set(e, "host \"%s\" must be an IP address literal", u.host);
		goto fail;
	}
	sl = addr_to_sockaddr(&a, u.port, &ss);
	d->webhook = webhook_new(d->base, &u, (struct sockaddr *)&ss, sl,
	    c->mark, c->sandbox_id, d->log, e);
	if (d->webhook == NULL)
		goto fail;
	return 0;
fail:
	err_prefix(e, "OPENSANDBOX_EGRESS_DENY_WEBHOOK");
	return -1;
}

/* A credential goes only to an address the resolver learned for its
 * binding's host itself (proxy.h, "learned"): IP rules do not count. */
static bool
egressd_proxy_learned_cb(void *arg, const char *name, const struct addr *dst)
{
	struct egressd *d = egressd_arg(arg);
	const char *names[NFT_NAMES_PER_ADDR];
	size_t i, n;

	if (d->nft == NULL)
		return false;
	n = nft_learned_lookup(d->nft, dst->family == AF_INET ? 4 : 6, dst->a,
	    names, NFT_NAMES_PER_ADDR);
	for (i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* Upstreams: flags/env win, then the policy file's dns.upstreams. */
/*
 * The proxy's decision for a name at the original destination: the name
 * must be allowed for TCP to that port, and the destination must be an
 * address the resolver learned for exactly that name (the shared-IP and
 * fronting defence: an allowed name does not open another name's
 * address), unless an explicit IP/CIDR rule allows the address itself.
 */
static enum proxy_reason
egressd_proxy_judge_cb(
    void *arg, const char *name, const struct addr *dst, uint16_t port)
{
	struct egressd *d = egressd_arg(arg);
	struct policy_reach reach;
	struct addr lit;
	int fam;

	fam = dst->family == AF_INET ? 4 : 6;
	if (addr_parse_ip(name, strlen(name), &lit))
		return lit.family == dst->family &&
		        memcmp(lit.a, dst->a, fam == 4 ? 4 : 16) == 0 &&
		        policy_addr_explicitly_allowed(
		            d->policy, fam, dst->a, POLICY_PROTO_TCP, port)
		    ? PROXY_OK
		    : PROXY_SNI_IP;
	if (policy_match_domain_reach(d->policy, name, NULL, &reach) !=
	        POLICY_ALLOW ||
	    !policy_reach_allows(&reach, POLICY_PROTO_TCP, port))
		return PROXY_NAME_DENIED;
	if (policy_addr_explicitly_allowed(
	        d->policy, fam, dst->a, POLICY_PROTO_TCP, port))
		return PROXY_OK;
	return egressd_proxy_learned_cb(arg, name, dst) ? PROXY_OK
	                                                : PROXY_ADDR_MISMATCH;
}

/* Terminate when a binding of the vault in force could match sni on
 * port (the scheme follows the port). */
static bool
egressd_proxy_terminate_cb(void *arg, const char *sni, uint16_t port)
{
	struct egressd *d = egressd_arg(arg);

	return d->vault != NULL && vault_host_bound(d->vault, sni, port);
}

/* The vault in force, lent (daemon.h, "Hooks"). */
static struct vault *
egressd_proxy_vault_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->vault;
}

/* With the proxy on, every answer loses its ECH keys (clients then send
 * a plain SNI the proxy can judge). */
static bool
egressd_intercepted_cb(void *arg, const char *name)
{
	struct egressd *d = egressd_arg(arg);

	(void)name;
	return d->proxy != NULL;
}

/* The start-up vault's arena is not locked (vault_locked): said once,
 * with the limit that refused it; fatal with --vault-require-mlock. */
static int
egressd_vault_unlocked(struct egressd *d, struct err *e)
{
	bool fatal = d->cfg->vault_require_mlock;
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == -1)
		rl.rlim_cur = 0;
	if (!fatal) {
		log_warn(d->log, "vault.mlock_failed",
		    LOG_U("memlock_limit", rl.rlim_cur), LOG_B("fatal", false),
		    LOG_S("effect", "credential values may be swapped out"));
		return 0;
	}
	log_error(d->log, "vault.mlock_failed",
	    LOG_U("memlock_limit", rl.rlim_cur), LOG_B("fatal", true));
	err_set(e,
	    "credential vault: mlock refused (RLIMIT_MEMLOCK %llu bytes) "
	    "and --vault-require-mlock is set: give egressd CAP_IPC_LOCK "
	    "or a larger memlock limit",
	    (unsigned long long)rl.rlim_cur);
	return -1;
}

static int
egressd_start_proxy(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	struct proxy_opts o;
	struct proxy_hooks h;

	if (!c->proxy_transparent)
		return 0;
	if ((d->vault = vault_new(d->policy, NULL, e)) == NULL) {
		err_prefix(e, "credential vault");
		return -1;
	}
	if (!vault_locked(d->vault) && egressd_vault_unlocked(d, e) == -1)
		return -1;
	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	o.port = c->proxy_port;
	o.conns_max = c->proxy_conns_max;
	o.buf_max = c->proxy_buffer_mb << 20;
	o.head_ms = c->proxy_head_timeout_s * 1000;
	o.mark = c->mark;
	o.state_dir = c->state_dir;
	o.ca_bundle = c->ca_bundle;
	o.ca_key_file = c->ca_key_file;
	o.ca_cert_file = c->ca_cert_file;
	o.trust_dir = c->trust_dir;
	o.ssl_insecure = c->ssl_insecure;
	o.vault_decode = c->vault_compressed == CONFIG_VAULT_COMPRESSED_DECODE;
	h.judge = egressd_proxy_judge_cb;
	h.terminate = egressd_proxy_terminate_cb;
	h.vault_get = egressd_proxy_vault_cb;
	h.learned = egressd_proxy_learned_cb;
	h.arg = d;
	if ((d->proxy = proxy_new(d->base, &o, &h, d->log, e)) == NULL)
		return -1;
	log_info(
	    d->log, "proxy.listening", LOG_U("port", proxy_port(d->proxy)));
	return 0;
}

static int
egressd_start_dns(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	const char *ups[DNS_UPSTREAMS_MAX];
	struct dns_opts o;
	struct dns_hooks h;
	size_t i, n = 0;

	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	if (c->ndns_upstreams > DNS_UPSTREAMS_MAX ||
	    d->policy->dns.nupstreams > DNS_UPSTREAMS_MAX) {
		err_set(e, "more than %d DNS upstreams", DNS_UPSTREAMS_MAX);
		return -1;
	}
	if (c->ndns_upstreams > 0)
		for (i = 0; i < c->ndns_upstreams; i++)
			ups[n++] = c->dns_upstreams[i].text;
	else
		for (i = 0; i < d->policy->dns.nupstreams; i++)
			ups[n++] = d->policy->dns.upstreams[i];
	o.port = c->dns_port;
	o.mark = c->mark;
	o.upstreams = ups;
	o.nupstreams = n;
	o.timeout_ms = c->dns_timeout_s * 1000;
	o.attempt_timeout_ms = o.timeout_ms < DNS_UPSTREAM_ATTEMPT_MS_DEFAULT
	    ? o.timeout_ms
	    : DNS_UPSTREAM_ATTEMPT_MS_DEFAULT;
	o.probe_name = c->dns_probe;
	o.probe_interval_ms = c->dns_probe_interval_s * 1000;
	h.policy_get = egressd_policy_get_cb;
	h.learn = d->nft != NULL ? egressd_learn_cb : NULL;
	h.learn_submit = d->nft != NULL ? egressd_learn_submit_cb : NULL;
	h.learn_cancel = d->nft != NULL ? egressd_learn_cancel_cb : NULL;
	h.on_deny = d->webhook != NULL ? egressd_on_deny_cb : NULL;
	h.intercepted = c->proxy_transparent ? egressd_intercepted_cb : NULL;
	h.arg = d;
	if ((d->dns = dns_new(d->base, &o, &h, d->log, &d->stats, e)) == NULL) {
		err_prefix(e, "resolver");
		return -1;
	}
	d->dns_ok = true;
	return 0;
}

/* Every 10 s: forget expired learned elements, renew those in use. */
#define EGRESSD_RENEW_INTERVAL_S 10
#define EGRESSD_RENEW_WINDOW_S 30

static void
egressd_renewed_cb(void *arg, int rc, size_t renewed, const char *why)
{
	struct egressd *d = arg;

	if (rc == -1)
		log_warn(d->log, "nft.renew_failed", LOG_S("error", why));
	else if (renewed > 0)
		log_debug(d->log, "nft.renewed", LOG_U("count", renewed));
}

static void
egressd_renew_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egressd *d = egressd_arg(arg);
	struct err e = {""};

	(void)fd;
	(void)what;
	if (d->nft == NULL)
		return;
	/*
	 * Another root tool in the namespace may flush the ruleset (an
	 * iptables-nft restore, a careless "nft flush ruleset"): put ours
	 * back at once rather than leave egress open until the next change.
	 */
	if (nft_table_present(d->nft, &e) == 0) {
		log_error(d->log, "nft.table_missing",
		    LOG_U("revision", d->policy->revision));
		if (nft_apply_policy(d->nft, d->policy, &e) == -1)
			log_error(d->log, "nft.apply_failed",
			    LOG_S("trigger", "table_missing"),
			    LOG_S("error", e.msg));
		else
			log_warn(d->log, "nft.table_restored",
			    LOG_U("revision", d->policy->revision));
		err_clear(&e);
	}
	(void)nft_expire_tick(d->nft);
	/* a dump still under way (a huge table) covers this tick too */
	if (d->renew == NULL || nft_renew_busy(d->renew))
		return;
	if (nft_renew_start(d->renew, EGRESSD_RENEW_WINDOW_S,
	        egressd_renewed_cb, d, &e) == -1)
		log_warn(d->log, "nft.renew_failed", LOG_S("error", e.msg));
}

/* ---- control API hooks ----------------------------------------------- */

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

static int
egressd_api_mutate_cb(void *arg, struct api_mutation *m, struct err *e)
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

/*
 * Writes need the proxy that injects (contract §4: 412 before it is
 * ready) and verified upstreams: a secret never goes to an origin whose
 * certificate was not checked.
 */
static bool
egressd_api_vault_writable_cb(void *arg, char *why, size_t whylen)
{
	struct egressd *d = egressd_arg(arg);

	if (d->proxy == NULL) {
		(void)snprintf(why, whylen, "credential proxy is not ready");
		return false;
	}
	if (d->cfg->ssl_insecure) {
		(void)snprintf(why, whylen,
		    "credential vault writes are refused while upstream TLS "
		    "verification is off (--ssl-insecure)");
		return false;
	}
	return true;
}

/* A mutation must not leave a binding (the file's or the vault's)
 * uncovered. */
static int
egressd_api_vault_check_cb(void *arg, const struct policy *next, struct err *e)
{
	(void)egressd_arg(arg);
	return policy_check_bindings(next, e);
}

/* Fresh per-decision nft counters for each scrape (one netlink dump). */
static void
egressd_proxy_stats(struct egressd *d)
{
	struct stats *st = &d->stats;
	struct proxy_status ps;
	size_t i;

	if (d->proxy == NULL)
		return;
	proxy_status(d->proxy, &ps);
	st->proxy_on = true;
	st->proxy_accepted = ps.accepted;
	st->proxy_passthrough = ps.passthrough;
	st->proxy_terminated = ps.terminated;
	st->proxy_upstream_reused = ps.upstream_reused;
	st->proxy_upstream_idle = ps.upstream_idle;
	st->proxy_refused = ps.refused;
	st->proxy_up_bytes = ps.up_bytes;
	st->proxy_down_bytes = ps.down_bytes;
	memcpy(st->vault_decisions, ps.vault_decisions,
	    sizeof(st->vault_decisions));
	memcpy(st->vault_bindings, ps.vault_bindings,
	    ps.nvault_bindings * sizeof(ps.vault_bindings[0]));
	st->nvault_bindings = ps.nvault_bindings;
	memcpy(st->vault_compressed, ps.vault_compressed,
	    sizeof(st->vault_compressed));
	for (i = 0; i < PROXY_NREASONS && i < STATS_PROXY_REASONS; i++) {
		st->proxy_reason_names[i] = proxy_reason_name(i);
		st->proxy_closed[i] = ps.by_reason[i];
	}
	st->proxy_nreasons = i;
	for (i = 0; i < PROXY_NSTATES && i < STATS_PROXY_STATES; i++) {
		st->proxy_state_names[i] = proxy_state_name(i);
		st->proxy_active[i] = ps.by_state[i];
	}
	st->proxy_nstates = i;
}

static void
egressd_api_metrics_refresh_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);
	struct nft_counter c[NFT_NCOUNTERS];
	struct err e = {""};
	size_t i;

	egressd_proxy_stats(d);
	if (d->nft == NULL)
		return;
	if (nft_read_counters(d->nft, c, &e) == -1) {
		log_warn(d->log, "nft.counters_failed", LOG_S("error", e.msg));
		return;
	}
	for (i = 0; i < NFT_NCOUNTERS && i < STATS_NFT_COUNTERS; i++) {
		d->stats.nft_rule_names[i] = nft_counter_name(i);
		d->stats.nft_rule_packets[i] = c[i].packets;
		d->stats.nft_rule_bytes[i] = c[i].bytes;
	}
	d->stats.nft_rule_counters = i;
}

static const char *
egressd_api_mode_cb(void *arg)
{
	struct egressd *d = egressd_arg(arg);

	return d->nft_ok ? "dns+nft" : "dns";
}

/* Ready only when everything this mode promises is really in place. */
static bool
egressd_api_ready_cb(void *arg, char *why, size_t whylen)
{
	struct egressd *d = egressd_arg(arg);
	const char *dwhy = NULL;

	if (d->cfg->mode == CONFIG_MODE_DNS_NFT && !d->nft_ok) {
		(void)snprintf(why, whylen, "nft not ready");
		return false;
	}
	if (d->cfg->mode == CONFIG_MODE_DNS_NFT && !d->selfcheck_ok) {
		(void)snprintf(why, whylen, "nft self-check not passed");
		return false;
	}
	if (d->dns == NULL || !dns_ready(d->dns, &dwhy)) {
		(void)snprintf(why, whylen, "dns not ready: %s",
		    dwhy ? dwhy : "not started");
		return false;
	}
	return true;
}

static void
egressd_api_status_cb(void *arg, json_t *out)
{
	struct egressd *d = egressd_arg(arg);
	struct dns_status ds;
	json_t *enf, *notenf, *dns, *ups, *pol;
	size_t i;

	enf = json_array();
	notenf = json_object();
	if (d->nft_ok) {
		json_array_append_new(enf, json_string("nft-default-deny"));
		json_array_append_new(enf, json_string("dns-redirect"));
		json_array_append_new(enf, json_string("learned-address-sets"));
	} else
		json_object_set_new(notenf, "nft", json_string(d->nft_why));
	json_array_append_new(enf, json_string("dns-filter"));
	if (d->proxy != NULL)
		json_array_append_new(enf, json_string("proxy-sni-host-check"));
	else
		json_object_set_new(
		    notenf, "transparentProxy", json_string("off (--proxy)"));
	if (d->proxy != NULL && d->vault != NULL)
		json_array_append_new(enf, json_string("credential-vault"));
	else
		json_object_set_new(notenf, "credentialVault",
		    json_string("off (needs --proxy)"));
	/* The API's vault (revision 0: none) and every binding in force. */
	json_object_set_new(out, "credentialVault",
	    json_pack("{s:I, s:I, s:I}", "revision",
	        (json_int_t)policy_vault_revision(d->policy), "bindings",
	        (json_int_t)d->policy->nbindings, "apiBindings",
	        (json_int_t)policy_vault_nbindings(d->policy)));
	json_object_set_new(out, "version", json_string(EGRESSD_VERSION));
	json_object_set_new(
	    out, "configuredMode", json_string(config_mode_name(d->cfg->mode)));
	json_object_set_new(out, "enforced", enf);
	json_object_set_new(out, "notEnforced", notenf);

	pol = json_object();
	json_object_set_new(
	    pol, "revision", json_integer((json_int_t)d->policy->revision));
	json_object_set_new(pol, "source",
	    json_string(d->policy->source ? d->policy->source : "default"));
	json_object_set_new(
	    pol, "mode", json_string(policy_mode_name(d->policy)));
	json_object_set_new(
	    pol, "rules", json_integer((json_int_t)d->policy->nrules));
	if (d->cfg->policy_file != NULL)
		json_object_set_new(
		    pol, "file", json_string(d->cfg->policy_file));
	if (d->persist_off != NULL)
		json_object_set_new(pol, "persist",
		    json_pack(
		        "{s:b, s:s}", "enabled", 0, "reason", d->persist_off));
	if (d->policy_file_missing) {
		char w[EGRESSD_WHY_MAX + PATH_MAX];
		(void)snprintf(w, sizeof(w),
		    "policy file %s does not exist; in force: %s",
		    d->cfg->policy_file, d->policy_fallback);
		json_object_set_new(pol, "fileMissing", json_true());
		json_object_set_new(pol, "warning", json_string(w));
	}
	json_object_set_new(out, "policy", pol);

	if (d->dns != NULL) {
		dns_status(d->dns, &ds);
		dns = json_object();
		json_object_set_new(dns, "port", json_integer(ds.port));
		json_object_set_new(dns, "udp4", json_boolean(ds.udp4));
		json_object_set_new(dns, "tcp4", json_boolean(ds.tcp4));
		json_object_set_new(dns, "udp6", json_boolean(ds.udp6));
		json_object_set_new(dns, "tcp6", json_boolean(ds.tcp6));
		json_object_set_new(dns, "cacheEntries",
		    json_integer((json_int_t)ds.cache_entries));
		ups = json_array();
		for (i = 0; i < ds.nupstreams && i < DNS_UPSTREAMS_MAX; i++) {
			json_t *u = json_object();
			json_object_set_new(
			    u, "address", json_string(ds.upstream[i].text));
			json_object_set_new(
			    u, "healthy", json_boolean(ds.upstream[i].healthy));
			json_array_append_new(ups, u);
		}
		json_object_set_new(dns, "upstreams", ups);
		json_object_set_new(out, "dns", dns);
	}
	if (d->proxy != NULL) {
		struct proxy_status ps;
		json_t *px = json_object(), *by = json_object(),
		       *sts = json_object();

		proxy_status(d->proxy, &ps);
		json_object_set_new(
		    px, "port", json_integer(proxy_port(d->proxy)));
		json_object_set_new(
		    px, "accepted", json_integer((json_int_t)ps.accepted));
		json_object_set_new(px, "passthrough",
		    json_integer((json_int_t)ps.passthrough));
		json_object_set_new(
		    px, "refused", json_integer((json_int_t)ps.refused));
		for (i = 1; i < PROXY_NREASONS; i++)
			if (ps.by_reason[i] != 0)
				json_object_set_new(by, proxy_reason_name(i),
				    json_integer((json_int_t)ps.by_reason[i]));
		json_object_set_new(px, "closedByReason", by);
		for (i = 0; i < PROXY_NSTATES; i++)
			json_object_set_new(sts, proxy_state_name(i),
			    json_integer((json_int_t)ps.by_state[i]));
		json_object_set_new(px, "open", sts);
		json_object_set_new(out, "proxy", px);
	}
	if (d->nft != NULL)
		json_object_set_new(out, "learnedAddresses",
		    json_integer((json_int_t)nft_learned_count(d->nft)));
}

static int
egressd_start_api(struct egressd *d, struct err *e)
{
	const struct config *c = d->cfg;
	struct api_opts o;
	struct api_hooks h;

	if ((c->http_addr == NULL || c->http_addr[0] == '\0') &&
	    c->api_socket == NULL) {
		log_warn(d->log, "api.disabled");
		d->api_ok = true;
		return 0;
	}
	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	o.listen_tcp = c->http_addr;
	o.listen_unix = c->api_socket;
	o.tls_cert = c->api_tls_cert;
	o.tls_key = c->api_tls_key;
	o.token = c->token;
	o.insecure_no_token = c->api_insecure_no_token;
	o.max_rules = c->max_rules;
	o.start_time_s = (uint64_t)time(NULL);
	o.log = d->log;
	o.stats = &d->stats;
	h.policy_get = egressd_policy_get_cb;
	h.mutate = egressd_api_mutate_cb;
	h.policy_vault_check = egressd_api_vault_check_cb;
	h.vault_writable = egressd_api_vault_writable_cb;
	h.ready = egressd_api_ready_cb;
	h.status = egressd_api_status_cb;
	h.enforcement_mode = egressd_api_mode_cb;
	h.metrics_refresh = egressd_api_metrics_refresh_cb;
	h.arg = d;
	if ((d->api = api_new(d->base, &o, &h, e)) == NULL) {
		err_prefix(e, "control API");
		return -1;
	}
	d->api_ok = true;
	return 0;
}

/*
 * The policy file may change dns.upstreams; flags and environment win
 * over it, so only follow the file when they named none.
 */
static void
egressd_follow_upstreams(
    struct egressd *d, const struct policy *old, const struct policy *next)
{
	struct err e = {""};
	size_t i;
	bool same = old->dns.nupstreams == next->dns.nupstreams;

	if (d->dns == NULL || d->cfg->ndns_upstreams > 0)
		return;
	for (i = 0; same && i < next->dns.nupstreams; i++)
		same =
		    strcmp(old->dns.upstreams[i], next->dns.upstreams[i]) == 0;
	if (same)
		return;
	if (dns_set_upstreams(d->dns, (const char *const *)next->dns.upstreams,
	        next->dns.nupstreams, &e) == -1)
		log_error(
		    d->log, "dns.upstreams_failed", LOG_S("error", e.msg));
	else
		log_info(d->log, "dns.upstreams_changed",
		    LOG_U("count", next->dns.nupstreams));
}

/* ---- commit, start, run, stop ---------------------------------------- */

static void
egressd_swap(struct egressd *d, struct policy *next)
{
	struct policy *old = d->policy;

	d->policy = policy_ref(next);
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
	egressd_watch_creds(d, next);
	egressd_follow_upstreams(d, c.old, next);
	policy_unref(c.old);
	if (d->nft != NULL) {
		log_info(
		    d->log, "nft.applied", LOG_U("revision", next->revision));
		egressd_cut_flows(d, "update");
	}
	/* The proxy's connections are redirected flows the cut skips. */
	if (d->proxy != NULL) {
		size_t closed = proxy_rejudge(d->proxy);

		if (closed > 0)
			log_info(d->log, "proxy.rejudged",
			    LOG_U("closed", closed),
			    LOG_U("revision", next->revision));
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
	struct timeval renew = {EGRESSD_RENEW_INTERVAL_S, 0};
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
	d->file_hash_valid = egressd_file_hash(d, &d->file_hash);
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
	d->stats.policy_revision = d->policy->revision;
	log_info(lg, "policy.loaded", LOG_S("trigger", "start"),
	    LOG_S("source", d->policy->source ? d->policy->source : "default"),
	    LOG_U("revision", d->policy->revision),
	    LOG_U("rules", d->policy->nrules),
	    LOG_S("mode", policy_mode_name(d->policy)));
	egressd_note_policy_file(d, &info, "start");
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
	if (egressd_signals(d, e) == -1 || egressd_start_webhook(d, e) == -1 ||
	    egressd_open_nft(d, e) == -1 || egressd_start_dns(d, e) == -1 ||
	    egressd_start_proxy(d, e) == -1 ||
	    egressd_enforce_nft(d, e) == -1 || egressd_start_api(d, e) == -1 ||
	    egressd_watch_files(d, e) == -1)
		return -1;
	if ((d->ev_renew = event_new(
	         d->base, -1, EV_PERSIST, egressd_renew_cb, d)) == NULL ||
	    event_add(d->ev_renew, &renew) == -1) {
		err_set(e, "cannot register renew timer");
		return -1;
	}
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
egressd_run(struct egressd *d)
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
	proxy_free(d->proxy);
	vault_free(d->vault);
	dns_free(d->dns);
	webhook_free(d->webhook);
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
	if (d->base != NULL)
		event_base_free(d->base);
	d->magic = 0;
}

struct egressd *
egressd_new(const struct config *cfg, struct log *lg, struct err *e)
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
egressd_free(struct egressd *d)
{
	if (d == NULL)
		return;
	egressd_clear(d);
	free(d);
}
