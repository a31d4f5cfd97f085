#!/bin/bash
# threat_18_nft_fail (THREATS §18): the kernel refuses egressd's batch.
# Something with CAP_NET_ADMIN (a broken operator tool, here root in the
# pod) replaces egressd's learned4 set with one of another type, so every
# batch that (re)declares it is refused. A policy update then fails
# closed: 500, one clear log line naming the refused message, the ruleset
# as it was, the old policy still answering DNS, the file
# not rewritten; an allowed name whose address cannot be learned gets
# SERVFAIL, never an answer it could not use; what the refused policy
# would allow is probed over IPv6, the path that can still open (IPv4
# lost its rules to the sabotage). A restart in that state refuses to
# report ready and leaves the table in force. Once the intruder is gone,
# the next update repairs everything.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup
tb_host_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
TB_EGRESSD_TOKEN=tok-$TB_ID-$RANDOM$RANDOM
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
args=(--policy "$pol" --http-addr ":18080")
tb_start_egressd "${args[@]}"
URL="http://$TB_SBX_HOST_IP4:18080/policy"
api() { # METHOD [BODY] -> status, body in $TB_DIR/api.out
	tb_host curl -sS --max-time 5 -o "$TB_DIR/api.out" -w '%{http_code}' \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" -X "$1" \
	    ${2:+--data-binary "$2"} "$URL" 2>/dev/null
}
sbx_nft() { ip netns exec "$TB_SBX" nft "$@"; }
dig_st() {
	tb_sandbox dig +time=3 +tries=1 "$@" | sed -n 's/.*status: \([A-Z]*\).*/\1/p'
}
sabotage() { # drop the rules that use learned4, re-create it as a port set
	local h
	for h in $(sbx_nft -a list chain inet egressd filter_out |
	    sed -n '/@learned4/s/.*# handle //p'); do
		sbx_nft delete rule inet egressd filter_out handle "$h"
	done
	sbx_nft delete set inet egressd learned4 &&
	    sbx_nft add set inet egressd learned4 '{ type inet_service; }'
}

tb_expect_eq "a.test AAAA resolves (learned6)" "$TB_ORIGIN_A6" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test AAAA)"
# The ruleset without counters and countdowns, as a digest.
snapshot() {
	sbx_nft -s list table inet egressd | sed 's/ expires [0-9a-z]*//' |
	    md5sum | cut -d' ' -f1
}
tb_check "the table is sabotaged" sabotage
before=$(snapshot)

# --- a policy update the kernel refuses -----------------------------------------------
m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "PATCH allowing b.test: 500" 500 \
    "$(api PATCH '[{"action":"allow","target":"b.test"}]')"
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" nft.apply_failed \
    "error~kernel refused message [0-9]+ of [0-9]+ \\(NEWSET learned4\\)"
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" policy.update_failed status=500
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" policy.updated
tb_expect_eq "the ruleset is as before (digest)" "$before" "$(snapshot)"
tb_expect_eq "b.test is still denied (old policy)" NXDOMAIN "$(dig_st b.test A)"
tb_expect_eq "GET /policy still shows the old policy" 200 "$(api GET)"
tb_check_fails "without b.test" grep -q b.test "$TB_DIR/api.out"
tb_check_fails "and the file was not rewritten" grep -q b.test "$pol"
tb_expect_eq "an allowed name whose address cannot be learned: SERVFAIL" \
    SERVFAIL "$(dig_st a.test A)"
tb_assert_log "$TB_EGRESSD_LOG" dns.learn_failed
# Over IPv4 nothing can open now: the sabotage removed every rule that
# matches learned4. So what the refused update must not have opened is
# probed over IPv6, where the table still opens what it learned: a.test's
# address (learned before) connects, b.test's (which only the refused
# policy would allow) neither resolves nor connects.
nd_works "IPv6 still opens what was learned (a.test)" tcp "$TB_ORIGIN_A6" 80
tb_expect_eq "b.test AAAA is still denied" NXDOMAIN "$(dig_st b.test AAAA)"
nd_fails_fast "b.test's IPv6 address was never opened" \
    tcp "$TB_ORIGIN_B6" 80
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request

# --- a restart in that state -----------------------------------------------------------
tb_stop_egressd
tb_expect_eq "clean stop" 0 "$TB_EGRESSD_STATUS"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
ip netns exec "$TB_SBX" env OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN" \
    timeout 20 "$EGRESSD_BIN" --log-file "$TB_EGRESSD_LOG" \
    --dns-upstream "$TB_DNS1_IP4" --rules-dir "$TB_DIR/egressd/rules" \
    "${args[@]}" >"$TB_DIR/restart.out" 2>&1
st=$?
tb_expect_eq "a restart refuses to start (exit 1)" 1 "$st"
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" egressd.start_failed \
    "error~NEWSET learned4"
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" egressd.ready
tb_check "the table is still in force" \
    bash -c "ip netns exec $TB_SBX nft list chain inet egressd filter_out |
    grep -q 'policy drop'"
nd_works "egressd down, table in force: a.test over IPv6 still opens" \
    tcp "$TB_ORIGIN_A6" 80
nd_fails_fast "... and b.test's IPv6 address stays closed" \
    tcp "$TB_ORIGIN_B6" 80
tb_check_fails "and DNS is still redirected (nothing answers)" \
    tb_sandbox dig +short +time=1 +tries=1 a.test A
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request

# --- the intruder goes: egressd repairs the table --------------------------------------
tb_check "the foreign set is removed" sbx_nft delete set inet egressd learned4
tb_start_egressd "${args[@]}"
tb_expect_eq "PATCH allowing b.test: 200" 200 \
    "$(api PATCH '[{"action":"allow","target":"b.test"}]')"
tb_check "learned4 is an address set again" \
    bash -c "ip netns exec $TB_SBX nft list set inet egressd learned4 |
    grep -q 'type ipv4_addr'"
tb_expect_eq "b.test resolves" "$TB_ORIGIN_B4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 b.test A)"
nd_works "and connects" tcp "$TB_ORIGIN_B4" 80
tb_finish
