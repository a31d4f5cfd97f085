#!/bin/bash
# nft_table_tamper: another root tool in the pod flushes the ruleset.
# egressd notices within its 10 s check, says so, and puts its table back;
# the sandbox is blocked again without any operator action.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
tb_start_egressd --policy "$pol"
tb_check_fails "a denied origin is blocked" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_ORIGIN_B4/"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_sandbox_root nft flush ruleset
tb_expect_eq "the table is gone" "" \
    "$(tb_sandbox_root nft list tables 2>/dev/null)"
tb_check "egressd reports the missing table" tb_wait_log_line --since "$m" \
    --timeout 15 "$TB_EGRESSD_LOG" nft.table_missing
tb_check "and restores it" tb_wait_log_line --since "$m" --timeout 5 \
    "$TB_EGRESSD_LOG" nft.table_restored
tb_expect_match "the table is back" "table inet egressd" \
    "$(tb_sandbox_root nft list tables)"
tb_check_fails "the denied origin is blocked again" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_ORIGIN_B4/"
tb_expect_eq "DNS is redirected to egressd again" "NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 b.test A | sed -n 's/.*status: \([A-Z]*\),.*/\1/p')"
tb_check "allowed names still work" \
    tb_sandbox curl -sS --max-time 5 -o /dev/null https://a.test/
tb_finish
