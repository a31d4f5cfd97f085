/*
 * corpus_file: unit tests that check the verdicts on files of a fuzz
 * corpus (fuzz/corpus/<dir>/<name>) read them with this, so the corpus
 * the fuzzer grows from and the table of what each file must give are
 * the same bytes.
 */
#ifndef EGRESSD_TEST_CORPUS_FILE_H
#define EGRESSD_TEST_CORPUS_FILE_H

#include <stddef.h>

/* Reads up to cap bytes of $EGRESSD_SRCDIR/fuzz/corpus/dir/name into buf;
 * returns how many. Fails the test (cmocka) when it cannot be read. */
size_t corpus_file(const char *dir, const char *name, void *buf, size_t cap);

#endif
