/*
 * Fuzzes the JSON reader, the schema walk and the API mutations.
 * Invariants: see fuzz_policy_common.h.
 */
#include <stdint.h>

#include "fuzz/fuzz_policy_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (fz_check_load(data, size, policy_parse_json))
		fz_check_mutations((const char *)data, size);
	return 0;
}
