#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "egressd/base/failpoint.h"
#include "egressd/daemon/policyfile.h"
#include "util/fileread.h"
#include "util/fdwrite.h"
#include "util/hash.h"

/* The file holds the operator's inline credential values when it came
 * with them: written back only for its owner. */
static bool
policyfile_has_inline(const struct policy *p)
{
	size_t i;

	for (i = 0; i < p->ncredentials; i++)
		if (policy_credential_source(p->credentials[i]) ==
		        POLICY_CRED_INLINE ||
		    policy_credential_source(p->credentials[i]) ==
		        POLICY_CRED_HTTP) /* its headers may hold secrets */
			return true;
	return false;
}

/*
 * Whoever can write what egressd reads decides the policy: the policy file
 * and the always-rules must be root's (or egressd's) and not writable by
 * anybody else. Missing files are fine (they mean "none").
 */
static int
policyfile_check_sources(const struct config *cfg, struct policy_diag *d)
{
	static const char *const always[] = {
	    "deny.always", "allow.always", "log_skip.always"};
	char path[PATH_MAX];
	struct stat st;
	struct err e = {""};
	size_t i;
	int rc = 0;

	if (cfg->policy_file != NULL && stat(cfg->policy_file, &st) == 0 &&
	    fileread_check_owner(&st, &e) == -1) {
		policy_diag_add(d, cfg->policy_file, 0, 0, "%s", e.msg);
		rc = -1;
	}
	if (cfg->rules_dir == NULL || cfg->rules_dir[0] == '\0')
		return rc;
	for (i = 0; i < sizeof(always) / sizeof(always[0]); i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s",
		        cfg->rules_dir, always[i]) >= sizeof(path))
			continue;
		if (stat(path, &st) == 0 &&
		    fileread_check_owner(&st, &e) == -1) {
			policy_diag_add(d, path, 0, 0, "%s", e.msg);
			rc = -1;
		}
	}
	return rc;
}

struct policy *
policyfile_load(const struct config *cfg, struct policy_diag *d,
    struct policyfile_info *info)
{
	struct policy *base = NULL, *full;
	struct policyfile_info dummy;
	struct err e;
	struct stat st;
	bool have_rules = cfg->rules_json != NULL && cfg->rules_json[0] != '\0';

	if (info == NULL)
		info = &dummy;
	info->file_missing = false;
	info->fallback = NULL;
	if (policyfile_check_sources(cfg, d) == -1)
		return NULL;
	if (cfg->policy_file != NULL && stat(cfg->policy_file, &st) == -1 &&
	    (errno == ENOENT || errno == ENOTDIR)) {
		info->file_missing = true;
		info->fallback =
		    have_rules ? "OPENSANDBOX_EGRESS_RULES" : "deny-all";
	}
	if (cfg->policy_file != NULL && !info->file_missing)
		base = policy_load_file_max(
		    cfg->policy_file, cfg->policy_file_max, d);
	else if (have_rules)
		base = policy_parse_json(cfg->rules_json,
		    strlen(cfg->rules_json), "OPENSANDBOX_EGRESS_RULES", d);
	else
		base = policy_new_deny_all();
	if (base == NULL)
		return NULL;
	/* The operator's rules for bindings hold for the file's too: a
	 * binding the API would refuse does not come in through the file. */
	if (config_compat_bindings(cfg, base, false, &e) == -1) {
		policy_diag_add(d,
		    base->source != NULL ? base->source : "policy", 0, 0, "%s",
		    e.msg);
		policy_unref(base);
		return NULL;
	}
	if (cfg->rules_dir == NULL || cfg->rules_dir[0] == '\0')
		return base;
	full = policy_with_overlays_dir(base, cfg->rules_dir, d);
	policy_unref(base);
	return full;
}

const char *
policyfile_persist_off(const char *path)
{
	char dir[PATH_MAX], link[PATH_MAX], base[NAME_MAX + 1];
	struct statvfs vfs;
	struct stat st;
	ssize_t n;

	if (path == NULL)
		return NULL;
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) &&
	    (n = readlink(path, link, sizeof(link) - 1)) > 0) {
		link[n] = '\0';
		if (strncmp(link, "..data/", 7) == 0)
			return "a Kubernetes ConfigMap or Secret volume";
	}
	if (fileread_split_path(path, dir, sizeof(dir), base, sizeof(base)) ==
	        0 &&
	    statvfs(dir, &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0)
		return "a read-only file system";
	return NULL;
}

int
policyfile_prepare(const struct policy *p, const char *path,
    struct policyfile_tmp *t, struct err *e)
{
	char *yaml;
	size_t len;
	int fd;

	memset(t, 0, sizeof(*t));
	if ((size_t)snprintf(t->path, sizeof(t->path), "%s", path) >=
	        sizeof(t->path) ||
	    (size_t)snprintf(t->tmp, sizeof(t->tmp), "%s.tmp.%ld", path,
	        (long)getpid()) >= sizeof(t->tmp)) {
		err_set(e, "%s: path too long", path);
		return -1;
	}
	if ((yaml = policy_to_yaml(p)) == NULL) {
		err_set(e, "cannot serialize policy");
		return -1;
	}
	len = strlen(yaml);
	/* A stale file or a link of that name would keep its own mode and
	 * owner, or lead the write elsewhere: the file is always new. */
	if (unlink(t->tmp) == -1 && errno != ENOENT) {
		err_set(e, "%s: %s", t->tmp, strerror(errno));
		goto out_free;
	}
	fd = open(t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    policyfile_has_inline(p) ? 0600 : 0640);
	if (fd == -1) {
		err_set(e, "%s: %s", t->tmp, strerror(errno));
		goto out_free;
	}
	if (fdwrite_all(fd, yaml, len) == -1) {
		err_set(e, "%s: write: %s", t->tmp, strerror(errno));
		goto out_unlink;
	}
	if (fsync(fd) == -1) {
		err_set(e, "%s: fsync: %s", t->tmp, strerror(errno));
		goto out_unlink;
	}
	close(fd);
	t->hash = hash_fnv1a(yaml, len);
	t->ready = true;
	policy_yaml_free(yaml);
	return 0;
out_unlink:
	close(fd);
	unlink(t->tmp);
out_free:
	policy_yaml_free(yaml);
	return -1;
}

int
policyfile_publish(struct policyfile_tmp *t, const char *failpoint,
    struct log *lg, struct err *e)
{
	if (!t->ready) {
		err_set(e, "%s: nothing prepared", t->path);
		return -1;
	}
	failpoint_hit(failpoint, "persist.before_rename", lg);
	t->ready = false;
	if (rename(t->tmp, t->path) == -1) {
		err_set(e, "rename %s: %s", t->path, strerror(errno));
		unlink(t->tmp);
		return -1;
	}
	return 0;
}

void
policyfile_sync_dir(const char *path)
{
	char dir[PATH_MAX];
	char *slash;
	int dfd;

	(void)snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL)
		(void)snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		(void)fsync(dfd);
		close(dfd);
	}
}

void
policyfile_discard(struct policyfile_tmp *t)
{
	if (t->ready)
		(void)unlink(t->tmp);
	t->ready = false;
}

int
policyfile_write(const struct policy *p, const char *path, uint64_t *hash,
    const char *failpoint, struct log *lg, struct err *e)
{
	struct policyfile_tmp t;

	if (policyfile_prepare(p, path, &t, e) == -1 ||
	    policyfile_publish(&t, failpoint, lg, e) == -1)
		return -1;
	/* The rename is durable only once the directory is synced. */
	policyfile_sync_dir(path);
	if (hash != NULL)
		*hash = t.hash;
	return 0;
}

/* "<base>.tmp.<digits>": the name policyfile_write gives its temp file. */
static bool
policyfile_is_tmp_of(const char *name, const char *base)
{
	size_t n = strlen(base);
	const char *p;

	if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0)
		return false;
	p = name + n + 5;
	if (*p == '\0' || strlen(p) > POLICYFILE_PID_DIGITS_MAX)
		return false;
	for (; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

int
policyfile_remove_stale(const char *path, uid_t uid, size_t *nremoved,
    struct log *lg, struct err *e)
{
	char dir[PATH_MAX], base[NAME_MAX + 1];
	char full[PATH_MAX + NAME_MAX + 2]; /* dir/name: never truncated */
	struct dirent *de;
	struct stat st;
	size_t n = 0;
	DIR *dp;
	int rc = 0;

	if (nremoved != NULL)
		*nremoved = 0;
	if (fileread_split_path(path, dir, sizeof(dir), base, sizeof(base)) ==
	    -1) {
		err_set(e, "%s: path too long", path);
		return -1;
	}
	if ((dp = opendir(dir)) == NULL) {
		err_set(e, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(dp)) != NULL) {
		if (!policyfile_is_tmp_of(de->d_name, base))
			continue;
		/* Only what egressd itself could have left: a regular file
		 * of its uid (not a link, not somebody else's file). */
		if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
		        -1 ||
		    !S_ISREG(st.st_mode) || st.st_uid != uid)
			continue;
		(void)snprintf(full, sizeof(full), "%s/%s", dir, de->d_name);
		if (unlinkat(dirfd(dp), de->d_name, 0) == -1) {
			err_set(e, "%s: %s", full, strerror(errno));
			rc = -1;
			continue;
		}
		n++;
		log_info(lg, "policy.stale_tmp_removed", LOG_S("path", full));
	}
	closedir(dp);
	if (nremoved != NULL)
		*nremoved = n;
	return rc;
}
