#!/bin/bash
# bench_canary.sh: what the end-to-end bed's canary secrets cost a
# scenario (docs/testing.md, "The canary sweep"). A benchmark, not a test:
# it prints numbers. One bed, egressd with the proxy and a token (every
# part of the sweep runs, the API canary too), and per round:
#   inject  tb__canary_start on a fresh policy file and fresh values (the
#           first tb_start_egressd of a scenario: one python process)
#   proc    tb__canary_proc (each tb_stop_egressd: two greps)
#   sweep   tb_canary_sweep --live, egressd left running (tb_finish: one
#           python process: API canary and reads, then every file)
# Wall time swings with the machine's load; CPU (user + sys, the
# processes' own and their children's) much less: both are printed, as
# the median of the rounds, with python's own start for scale.
#
# Usage (root): bench/bench_canary.sh [BUILD-DIR]   (BENCH_ROUNDS, 10)
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
EGRESSD_BIN=${EGRESSD_BIN:-${1:-$HERE/../build}/egressd/egressd}
ROUNDS=${BENCH_ROUNDS:-10}
. "$HERE/../tests/e2e/lib/testbed.sh"
[ -x "$EGRESSD_BIN" ] || { echo "bench_canary: no $EGRESSD_BIN" >&2; exit 1; }
tb_setup

TB_EGRESSD_TOKEN=bench-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/ca.pem"
POL=$TB_DIR/egressd/policy.yaml
T=$TB_DIR/root/times
TIMEFORMAT='%R %U %S'

OUT=$TB_DIR/root/bench.out

# measure PART CMD...: one line "PART real_ms cpu_ms" into $T; CMD's
# output into $OUT.
measure()
{
	local part=$1 r u s
	shift
	read -r r u s < <({ time "$@" >>"$OUT" 2>&4; } 4>&2 2>&1)
	awk -v p="$part" -v r="$r" -v u="$u" -v s="$s" \
	    'BEGIN {printf "%s %d %d\n", p, r * 1000, (u + s) * 1000}' >>"$T"
}

# median: of the numbers on stdin, one a line.
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

: >"$T"
for i in $(seq "$ROUNDS"); do
	printf 'defaultAction: deny\negress:\n  - {action: allow, target: a.test}\n' \
	    >"$POL"
	chmod 600 "$POL"
	rm -rf "$TB_CANARY_DIR" "${TB_CANARY_SRC%/*}"
	TB__SWEPT=0
	measure inject tb__canary_start --policy "$POL"
	tb_start_egressd --policy "$POL" --proxy --trust-dir "$TB_DIR/trust" \
	    --api-token-file "$TB_DIR/token"
	measure proc tb__canary_proc "$TB_EGRESSD_PID"
	measure sweep tb_canary_sweep --live :
	measure python "$TB_PY" -S -c pass
	tb_stop_egressd
done
# The sweep's own checks: a hit here would be a leak, not a number.
grep -h '^not ok' "$OUT" && echo "bench_canary: the sweep found a canary" >&2

echo "bench_canary: $ROUNDS rounds, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %10s %10s   (medians)\n' part real_ms cpu_ms
for p in inject proc sweep python; do
	printf '%-8s %10d %10d\n' "$p" \
	    "$(awk -v p="$p" '$1 == p {print $2}' "$T" | median)" \
	    "$(awk -v p="$p" '$1 == p {print $3}' "$T" | median)"
done
awk -v n="$ROUNDS" '$1 != "python" {r += $2; c += $3} END {
	printf "%-8s %10d %10d   (inject + proc + sweep, mean of a round)\n",
	    "total", r / n, c / n}' "$T"
TB_PASS=1
tb_finish >/dev/null
