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
	struct policy_diag d;
	struct policy *p;

	if (size > 65536)
		return 0;
	policy_diag_init(&d);
	p = policy_parse_yaml((const char *)data, size, "fuzz", &d);
	if (p == NULL && d.n == 0)
		fz_fail("refused without a diagnostic", NULL, NULL);
	if (p != NULL) {
		if (d.n != 0)
			fz_fail("loaded with diagnostics", d.msgs[0], NULL);
		fz_check_round_trip(p);
		policy_unref(p);
	}
	policy_diag_clear(&d);
	return 0;
}
