/*
 * daemon_watch: the files a policy is made of, watched with inotify
 * through their directories (editors save by rename; a Kubernetes volume
 * swaps its ..data link): the policy file, the always-rules directory,
 * the API token file and the directories of file credentials. A relevant
 * event arms the debounce timer; what a reload does is the caller's.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "egressd/base/log.h"
#include "egressd/daemon/config.h"
#include "egressd/daemon/daemon_int.h"
#include "policy/policy.h"
#include "util/fileread.h"

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

void
daemon_watch_creds(struct egressd *d, const struct policy *p)
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

int
daemon_watch_files(
    struct egressd *d, event_callback_fn reload_cb, struct err *e)
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
	daemon_watch_creds(d, d->policy);
	d->ev_inotify = event_new(d->base, d->inotify_fd, EV_READ | EV_PERSIST,
	    egressd_inotify_cb, d);
	d->ev_reload = evtimer_new(d->base, reload_cb, d);
	if (d->ev_inotify == NULL || d->ev_reload == NULL ||
	    event_add(d->ev_inotify, NULL) == -1) {
		err_set(e, "cannot register file watch events");
		return -1;
	}
	return 0;
}
