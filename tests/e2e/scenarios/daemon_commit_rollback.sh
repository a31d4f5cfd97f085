#!/bin/bash
# daemon_commit_rollback: an API change whose last commit step fails (the policy
# file cannot be rewritten) is undone in every step before it: the answer
# is an error naming the cause, nft, the resolver and GET /policy all keep
# the old policy, and the file is unchanged. Loosening (an address opened)
# and tightening (a name denied) both. The failure is real: a directory
# stands where egressd writes its temporary file, so open(2) fails.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
tok=$TB_DIR/token
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$tok"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
api="http://$TB_SBX_HOST_IP4:18080/policy"
host_api() { tb_host_api "$1" "$api" "${2-}"; } # METHOD [BODY]
resolves() { tb_resolve_a "$1"; }
b_by_ip() {
	tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_ORIGIN_B4/"
}
open_b="[{\"action\":\"allow\",\"target\":\"$TB_ORIGIN_B4\"}]"

tb_start_egressd --policy "$pol" --api-token-file "$tok" --http-addr ":18080"
tb_expect_eq "a.test resolves at start" "$TB_ORIGIN_A4" "$(resolves a.test)"
tb_check_fails "b.test's address is closed at start" b_by_ip
before=$(sha256sum <"$pol")

# What egressd writes before its atomic rename, made unopenable.
mkdir "$pol.tmp.$TB_EGRESSD_PID"

m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "opening an address: 500" "500" "$(host_api PATCH "$open_b")"
tb_expect_match "the answer names the failed step" "persist" \
    "$(cat "$TB_DIR/api.out")"
tb_check "persist_failed is logged" tb_wait_log_line --since "$m" \
    --timeout 2 "$TB_EGRESSD_LOG" policy.persist_failed
tb_check_fails "nft was rolled back: the address is still closed" b_by_ip
tb_expect_eq "GET /policy" "200" "$(host_api GET)"
tb_check_fails "GET /policy shows the old policy" \
    grep -qF "$TB_ORIGIN_B4" "$TB_DIR/api.out"

m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "denying a.test: 500" "500" \
    "$(host_api PATCH '[{"action":"deny","target":"a.test"}]')"
tb_check "persist_failed again" tb_wait_log_line --since "$m" \
    --timeout 2 "$TB_EGRESSD_LOG" policy.persist_failed
tb_expect_eq "a.test still resolves (old policy in force)" "$TB_ORIGIN_A4" \
    "$(resolves a.test)"
tb_check "and connects" tb_sandbox curl -sS --max-time 5 -o /dev/null \
    https://a.test/
tb_expect_eq "the file is unchanged" "$before" "$(sha256sum <"$pol")"
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" policy.updated

# Once the file can be written again, the same change goes through.
rmdir "$pol.tmp.$TB_EGRESSD_PID"
tb_expect_eq "opening the address now: 200" "200" "$(host_api PATCH "$open_b")"
tb_check "and it is open" b_by_ip
tb_check "and persisted" grep -qF "$TB_ORIGIN_B4" "$pol"
tb_stop_egressd
tb_finish
