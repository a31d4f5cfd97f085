/*
 * Fuzzes the YAML reader and the schema walk. Invariants: see
 * fuzz_policy_common.h; plus every refusal carries a diagnostic.
 */
#include <stdint.h>

#include "fuzz/fuzz_policy_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)fz_check_load(data, size, policy_parse_yaml);
	return 0;
}
