/*
 * What every fuzz target shares: the libFuzzer entry point's prototype and
 * check(), an invariant that says which one broke, then aborts so the
 * fuzzer (or the corpus replay under ctest) reports the input.
 */
#ifndef EGRESSD_FUZZ_CHECK_H
#define EGRESSD_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define check(x)                                                               \
	do {                                                                   \
		if (!(x)) {                                                    \
			fprintf(stderr, "invariant failed: %s:%d: %s\n",       \
			    __FILE__, __LINE__, #x);                           \
			abort();                                               \
		}                                                              \
	} while (0)

#endif
