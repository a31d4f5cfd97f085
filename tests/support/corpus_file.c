/* corpus_file: see corpus_file.h. */
#include "corpus_file.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

size_t
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
