#!/bin/bash
# nft_daemon: the nft module inside the real daemon. A hard-coded resolver
# is answered by egressd (redirect) and the answer's address is learned
# before the client sees it; a short TTL closes the address again; after
# kill -9 the table holds (learned address still open, others closed),
# and a restart adopts it while a probe loop never gets through.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: short.test}
dns: {ttlMin: 1, ttlMax: 60}
EOF2
)
tb_start_egressd --policy "$pol"
tb_check "the table is installed" \
    tb_sandbox_root nft list chain inet egressd filter_out

tb_expect_eq "a hard-coded resolver is answered by egressd" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 @"$TB_RESOLVER_X4" a.test A)"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X4" server.port=53
nd_works "the answer's address is open at once" tcp "$TB_ORIGIN_A4" 80
tb_check "learned4 holds it" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd learned4 | grep -q '$TB_ORIGIN_A4'"
nd_fails_fast "an address never resolved stays closed" tcp "$TB_ORIGIN_C4" 80

# --- TTL ---------------------------------------------------------------------------
tb_expect_eq "short.test resolves (TTL 2 s)" "$TB_ORIGIN_B4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 short.test A)"
nd_works "short.test's address is open" tcp "$TB_ORIGIN_B4" 80
end=$(( $(date +%s) + 8 ))
while nd_probe tcp "$TB_ORIGIN_B4" 80 1 >/dev/null; do
	[ "$(date +%s)" -le "$end" ] || break
	sleep 0.2
done
nd_fails_fast "after its TTL it closes again" tcp "$TB_ORIGIN_B4" 80

# --- kill -9 and restart -------------------------------------------------------------
tb_expect_eq "a.test resolves again (fresh lease)" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
loop=$TB_DIR/loop.out
tb_sandbox_bg "$loop" "$TB_PY" "$ND_PROBE" loop "$TB_ORIGIN_C4" 80 4
loop_pid=$TB_LAST_PID
sleep 0.3
tb_stop_egressd KILL
tb_expect_eq "egressd died of SIGKILL" 137 "$TB_EGRESSD_STATUS"
nd_fails_fast "dead egressd: closed stays closed" tcp "$TB_ORIGIN_C4" 80
nd_works "dead egressd: the learned address stays open" tcp "$TB_ORIGIN_A4" 80
tb_check_fails "dead egressd: DNS is still redirected (nothing answers)" \
    tb_sandbox dig +short +time=1 +tries=1 @"$TB_RESOLVER_X4" a.test A
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X4" server.port=53
tb_start_egressd --policy "$pol"
nd_works "restarted: the learned address is still open" tcp "$TB_ORIGIN_A4" 80
wait "$loop_pid"
read -r tries oks <"$loop" || { tries=0; oks=-1; }
tb_check "the probe loop ran throughout ($tries attempts)" test "$tries" -gt 50
tb_expect_eq "and never got through" 0 "$oks"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_C4"
tb_finish
