/*
 * corpus_file: unit tests that check the verdicts on files of a fuzz
 * corpus (fuzz/corpus/<dir>/<name>) read them with this, so the corpus
 * the fuzzer grows from and the table of what each file must give are
 * the same bytes. Fails the test (cmocka) when the file cannot be read.
 */
#ifndef EGRESSD_TEST_CORPUS_FILE_H
#define EGRESSD_TEST_CORPUS_FILE_H

#include <stdio.h>
#include <stdlib.h>

static inline size_t
corpus_file(const char *dir, const char *name, void *buf, size_t cap)
{
	const char *src = getenv("EGRESSD_SRCDIR");
	char path[1024];
	FILE *f;
	size_t n;

	assert_non_null(src);
	snprintf(path, sizeof(path), "%s/fuzz/corpus/%s/%s", src, dir, name);
	if ((f = fopen(path, "rb")) == NULL)
		fail_msg("cannot open %s", path);
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

#endif
