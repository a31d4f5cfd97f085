#!/bin/bash
# unit_skips.sh BINARY [ARGS...]: run one cmocka binary for ctest. cmocka
# exits 0 when a case called skip() (the kernel cases without a network
# namespace, say), which ctest would count as a pass; here a binary that
# passed but skipped a case exits 77, SKIP_RETURN_CODE, and ./run's gate
# (tests/tools/skips.py) names it. A failure stays a failure whatever was
# skipped.
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
rc=0
"$@" >"$out" 2>&1 || rc=$?
cat "$out"
[ "$rc" -eq 0 ] || exit "$rc"
grep -q '^\[  SKIPPED \] [^0-9]' "$out" && exit 77
exit 0
