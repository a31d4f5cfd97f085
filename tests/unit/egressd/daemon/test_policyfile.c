#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egressd/base/log.h"
#include "egressd/daemon/policyfile.h"
#include "ts_policy.h"
#include "util/fileread.h"

/* A fresh directory per case, its policy path, and a log into a file. */
struct fx {
	char dir[PATH_MAX / 2]; /* room for the names below it */
	char policy[PATH_MAX];
	char logpath[PATH_MAX];
	struct log lg;
};

static int
fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *tmp = getenv("TMPDIR");

	assert_non_null(f);
	(void)snprintf(
	    f->dir, sizeof(f->dir), "%s/pf.XXXXXX", tmp != NULL ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->dir));
	(void)snprintf(f->policy, sizeof(f->policy), "%s/policy.yaml", f->dir);
	(void)snprintf(f->logpath, sizeof(f->logpath), "%s.log", f->dir);
	log_init(&f->lg, -1, LOG_DEBUG);
	assert_int_equal(log_open_file(&f->lg, f->logpath), 0);
	*state = f;
	return 0;
}

static int
fx_teardown(void **state)
{
	struct fx *f = *state;
	char cmd[PATH_MAX + 16];

	log_clear(&f->lg);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	unlink(f->logpath);
	free(f);
	return 0;
}

/* Creates dir/name holding text, with mode. */
static void
put(const struct fx *f, const char *name, const char *text, mode_t mode)
{
	char p[PATH_MAX * 2];
	int fd;

	(void)snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static bool
exists(const struct fx *f, const char *name)
{
	char p[PATH_MAX * 2];
	struct stat st;

	(void)snprintf(p, sizeof(p), "%s/%s", f->dir, name);
	return lstat(p, &st) == 0;
}

/* The whole log written so far (caller frees). */
static char *
log_text(const struct fx *f)
{
	char *buf;
	size_t len;
	struct err e = {""};

	assert_int_equal(
	    fileread_all(f->logpath, 1 << 20, 0, &buf, &len, &e), 0);
	return buf;
}

static void
test_stale_tmp_removed(void **state)
{
	struct fx *f = *state;
	struct err e = {""};
	char want[PATH_MAX * 2];
	size_t n = 99;
	char *log;

	put(f, "policy.yaml", "defaultAction: deny\n", 0600);
	put(f, "policy.yaml.tmp.4242", "value: \"left by a crash\"\n", 0600);
	put(f, "policy.yaml.tmp.1", "", 0644);
	assert_int_equal(
	    policyfile_remove_stale(f->policy, geteuid(), &n, &f->lg, &e), 0);
	assert_int_equal(n, 2);
	assert_false(exists(f, "policy.yaml.tmp.4242"));
	assert_false(exists(f, "policy.yaml.tmp.1"));
	assert_true(exists(f, "policy.yaml"));
	log = log_text(f);
	(void)snprintf(want, sizeof(want),
	    "\"ev\":\"policy.stale_tmp_removed\",\"path\":\"%s/"
	    "policy.yaml.tmp.4242\"",
	    f->dir);
	if (strstr(log, want) == NULL)
		fail_msg("no %s in %s", want, log);
	free(log);
}

/* Only "<base>.tmp.<digits>", regular, of the uid: nothing that merely
 * looks alike, nothing of another user, no link. */
static void
test_stale_tmp_others_kept(void **state)
{
	static const char *const keep[] = {"policy.yaml.tmp.",
	    "policy.yaml.tmp.12a", "policy.yaml.tmp.12345678901",
	    "policy.yaml.tmpx.12", "policy.yml.tmp.3", "xpolicy.yaml.tmp.3",
	    "policy.yaml.bak"};
	struct fx *f = *state;
	struct err e = {""};
	char p[PATH_MAX * 2];
	size_t i, n = 99;

	for (i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		put(f, keep[i], "x", 0600);
	(void)snprintf(p, sizeof(p), "%s/policy.yaml.tmp.77", f->dir);
	assert_int_equal(symlink("policy.yaml.bak", p), 0);
	(void)snprintf(p, sizeof(p), "%s/policy.yaml.tmp.78", f->dir);
	assert_int_equal(mkdir(p, 0700), 0);
	put(f, "policy.yaml.tmp.79", "x", 0600);
	/* the same files, but egressd runs as another uid */
	assert_int_equal(
	    policyfile_remove_stale(f->policy, geteuid() + 1, &n, &f->lg, &e),
	    0);
	assert_int_equal(n, 0);
	assert_true(exists(f, "policy.yaml.tmp.79"));
	assert_int_equal(
	    policyfile_remove_stale(f->policy, geteuid(), &n, &f->lg, &e), 0);
	assert_int_equal(n, 1);
	assert_false(exists(f, "policy.yaml.tmp.79"));
	for (i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		assert_true(exists(f, keep[i]));
	assert_true(exists(f, "policy.yaml.tmp.77"));
	assert_true(exists(f, "policy.yaml.tmp.78"));
	assert_true(exists(f, "policy.yaml.bak"));
}

static void
test_stale_tmp_no_dir(void **state)
{
	struct fx *f = *state;
	struct err e = {""};
	char p[PATH_MAX * 2];

	(void)snprintf(p, sizeof(p), "%s/gone/policy.yaml", f->dir);
	assert_int_equal(
	    policyfile_remove_stale(p, geteuid(), NULL, &f->lg, &e), -1);
	assert_non_null(strstr(e.msg, "gone"));
}

/* A file or link already at the temp name (planted, or a crash's under a
 * reused pid) is replaced: the write never goes through a link and the
 * policy never takes a mode it did not choose. */
static void
test_write_replaces_what_is_at_tmp(void **state)
{
	struct fx *f = *state;
	struct err e = {""};
	struct policy *p;
	char tmp[PATH_MAX * 2], target[PATH_MAX * 2], *text;
	size_t len;
	struct stat st;

	p = ts_policy_yaml("defaultAction: deny\n"
	                   "egress:\n"
	                   "  - {action: allow, target: a.test}\n"
	                   "credentials:\n"
	                   "  - {name: k, source: {type: inline, value: v1}}\n"
	                   "bindings:\n"
	                   "  - {name: b, match: {hosts: [a.test]},"
	                   " auth: {type: bearer, credential: k}}\n",
	    "policy.yaml");
	(void)snprintf(
	    tmp, sizeof(tmp), "%s.tmp.%ld", f->policy, (long)getpid());
	put(f, "elsewhere", "untouched\n", 0644);
	(void)snprintf(target, sizeof(target), "%s/elsewhere", f->dir);
	assert_int_equal(symlink(target, tmp), 0);
	assert_int_equal(
	    policyfile_write(p, f->policy, NULL, NULL, NULL, &e), 0);
	assert_int_equal(fileread_all(target, 4096, 0, &text, &len, &e), 0);
	assert_string_equal(text, "untouched\n");
	free(text);
	assert_int_equal(lstat(f->policy, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);

	assert_int_equal(rename(target, tmp), 0); /* a world-readable file */
	assert_int_equal(
	    policyfile_write(p, f->policy, NULL, NULL, NULL, &e), 0);
	assert_int_equal(lstat(f->policy, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_false(exists(f, "elsewhere"));
	assert_int_equal(lstat(tmp, &st), -1);
	policy_unref(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_stale_tmp_removed, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_stale_tmp_others_kept, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_stale_tmp_no_dir, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_write_replaces_what_is_at_tmp, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
