/*
 * fileread: sizes at and around the bound, the errno a caller branches
 * on, each owner/mode/link/directory check, and the path split. Files live
 * in a fresh directory under /tmp made by the test.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/fileread.h"

static char dir[64];

static void
put(const char *name, const char *content, mode_t mode, char *path, size_t cap)
{
	int fd;

	(void)snprintf(path, cap, "%s/%s", dir, name);
	(void)unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, content, strlen(content)), strlen(content));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

static int
setup(void **state)
{
	(void)state;
	(void)snprintf(dir, sizeof(dir), "/tmp/egressd-fileread-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	return chmod(dir, 0700);
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
test_all_sizes(void **state)
{
	char path[128], *buf = NULL;
	struct err e = {""};
	size_t len = 0;

	(void)state;
	put("ten", "0123456789", 0644, path, sizeof(path));
	assert_int_equal(fileread_all(path, 10, 0, &buf, &len, &e), 0);
	assert_int_equal(len, 10);
	assert_string_equal(buf, "0123456789");
	free(buf);
	errno = 0;
	assert_int_equal(fileread_all(path, 9, 0, &buf, &len, &e), -1);
	assert_int_equal(errno, EFBIG);
	assert_non_null(strstr(e.msg, "larger than 9 bytes"));
	assert_null(strstr(e.msg, path)); /* callers name the file */

	put("empty", "", 0644, path, sizeof(path));
	assert_int_equal(fileread_all(path, 10, 0, &buf, &len, &e), 0);
	assert_int_equal(len, 0);
	assert_string_equal(buf, "");
	free(buf);

	(void)snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(fileread_all(path, 10, 0, &buf, &len, &e), -1);
	assert_int_equal(errno, ENOENT);
	assert_non_null(strstr(e.msg, "cannot open"));

	assert_int_equal(fileread_all(dir, 10, 0, &buf, &len, &e), -1);
	assert_non_null(strstr(e.msg, "not a regular file"));
}

static void
test_buf(void **state)
{
	char path[128], buf[8];
	struct err e = {""};

	(void)state;
	put("six", "abcdef", 0600, path, sizeof(path));
	assert_int_equal(fileread_buf(path, buf, sizeof(buf), 0, &e), 6);
	assert_string_equal(buf, "abcdef");
	/* 7 bytes in an 8-byte buffer: cannot tell it from a longer file */
	put("seven", "abcdefg", 0600, path, sizeof(path));
	assert_int_equal(fileread_buf(path, buf, sizeof(buf), 0, &e), -1);
	assert_int_equal(errno, EFBIG);
	assert_int_equal(buf[0], 0); /* wiped */
}

static void
test_checks(void **state)
{
	char path[128], link[128], sub[128], *buf = NULL;
	struct err e = {""};
	size_t len;

	(void)state;
	put("gw", "x", 0664, path, sizeof(path));
	assert_int_equal(fileread_open(path, 0, &e) >= 0, 1);
	assert_int_equal(
	    fileread_all(path, 10, FILEREAD_OWNED, &buf, &len, &e), -1);
	assert_int_equal(errno, EPERM);
	assert_non_null(strstr(e.msg, "writable by group or others"));

	put("key", "k", 0640, path, sizeof(path));
	assert_int_equal(
	    fileread_all(path, 10, FILEREAD_OWNED, &buf, &len, &e), 0);
	free(buf);
	assert_int_equal(
	    fileread_all(path, 10, FILEREAD_PRIVATE, &buf, &len, &e), -1);
	assert_non_null(strstr(e.msg, "readable by group or others"));
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(
	    fileread_all(path, 10, FILEREAD_PRIVATE, &buf, &len, &e), 0);
	free(buf);

	if (geteuid() == 0) {
		assert_int_equal(chown(path, 65534, 65534), 0);
		assert_int_equal(
		    fileread_all(path, 10, FILEREAD_OWNED, &buf, &len, &e), -1);
		assert_non_null(strstr(e.msg, "owned by uid 65534"));
		assert_int_equal(chown(path, 0, 0), 0);
	}

	(void)snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(fileread_all(link, 10, 0, &buf, &len, &e), 0);
	free(buf);
	assert_int_equal(
	    fileread_all(link, 10, FILEREAD_NOFOLLOW, &buf, &len, &e), -1);

	/* FILEREAD_DIRS: a group-writable directory is refused unless sticky,
	 * both where the link is and where it points */
	(void)snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(mkdir(sub, 0775), 0);
	assert_int_equal(chmod(sub, 0775), 0);
	(void)snprintf(link, sizeof(link), "%s/sub/link", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(
	    fileread_all(link, 10, FILEREAD_DIRS, &buf, &len, &e), -1);
	assert_non_null(strstr(e.msg, "not sticky"));
	assert_int_equal(chmod(sub, 01777), 0);
	assert_int_equal(
	    fileread_all(link, 10, FILEREAD_DIRS, &buf, &len, &e), 0);
	free(buf);
	assert_int_equal(chmod(dir, 0770), 0); /* the target's directory */
	assert_int_equal(
	    fileread_all(link, 10, FILEREAD_DIRS, &buf, &len, &e), -1);
	assert_non_null(strstr(e.msg, dir));
	assert_int_equal(chmod(dir, 0700), 0);
}

static void
test_split(void **state)
{
	char d[16], b[8];

	(void)state;
	assert_int_equal(
	    fileread_split_path("a/b/c", d, sizeof(d), b, sizeof(b)), 0);
	assert_string_equal(d, "a/b");
	assert_string_equal(b, "c");
	assert_int_equal(
	    fileread_split_path("/c", d, sizeof(d), b, sizeof(b)), 0);
	assert_string_equal(d, "/");
	assert_int_equal(fileread_split_path("c", d, sizeof(d), NULL, 0), 0);
	assert_string_equal(d, ".");
	assert_int_equal(fileread_split_path("/x/basename-too-long", d,
	                     sizeof(d), b, sizeof(b)),
	    -1);
	assert_int_equal(fileread_split_path(
	                     "/a-directory-too-long/x", d, sizeof(d), NULL, 0),
	    -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_all_sizes),
	    cmocka_unit_test(test_buf),
	    cmocka_unit_test(test_checks),
	    cmocka_unit_test(test_split),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
