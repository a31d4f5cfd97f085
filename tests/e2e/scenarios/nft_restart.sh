#!/bin/bash
# nft_restart: fail closed. egressd killed with SIGKILL leaves the table in
# force (no drop, no redirect lost); a restart adopts it in one transaction
# while the sandbox probes a closed origin back to back and never gets
# through; learned addresses survive; a clean stop keeps enforcement; only
# an explicit teardown removes the table.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
dns: {ttlMin: 1, ttlMax: 300}
EOF2
)
nd_start --policy "$pol"
tb_check "learn a.test (ttl 120)" nd_cmd learn "$TB_ORIGIN_A4" 120 a.test

loop=$TB_DIR/loop.out
tb_sandbox_bg "$loop" "$TB_PY" "$ND_PROBE" loop "$TB_ORIGIN_B4" 80 5
loop_pid=$TB_LAST_PID
sleep 0.5

# --- kill -9 -----------------------------------------------------------------------
tb_stop_egressd KILL
tb_expect_eq "egressd died of SIGKILL" 137 "$TB_EGRESSD_STATUS"
tb_check "the table is still there" \
    tb_sandbox_root nft list chain inet egressd filter_out
nd_fails_fast "dead egressd: the closed origin stays closed" tcp "$TB_ORIGIN_B4" 80
nd_works "dead egressd: the learned address stays open" tcp "$TB_ORIGIN_A4" 80
tb_sandbox dig +time=1 +tries=1 @"$TB_RESOLVER_X4" a.test A >/dev/null 2>&1
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X4" server.port=53

# --- restart while the probe loop runs --------------------------------------------
nd_start --policy "$pol"
tb_assert_log "$TB_EGRESSD_LOG" egressd.ready learned=1
nd_works "after the restart the learned address is still open" \
    tcp "$TB_ORIGIN_A4" 80
wait "$loop_pid"
read -r tries oks <"$loop" || { tries=0; oks=-1; }
tb_check "the probe loop ran throughout ($tries attempts)" test "$tries" -gt 100
tb_expect_eq "and never got through" 0 "$oks"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B4"

# --- clean stop keeps enforcement --------------------------------------------------
tb_stop_egressd TERM
tb_expect_eq "clean stop exits 0" 0 "$TB_EGRESSD_STATUS"
nd_fails_fast "stopped egressd: still closed" tcp "$TB_ORIGIN_B4" 80

# --- only teardown removes it -------------------------------------------------------
nd_start --policy "$pol"
tb_check "teardown" nd_cmd teardown
tb_check_fails "the table is gone" \
    tb_sandbox_root nft list table inet egressd
nd_works "without the table the origin is reachable (teardown did it)" \
    tcp "$TB_ORIGIN_B4" 80
tb_finish
