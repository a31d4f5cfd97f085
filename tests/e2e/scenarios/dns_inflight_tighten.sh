#!/bin/bash
# dns_inflight_tighten: an answer in flight across a tightening is judged
# by the policy in force when it is released, and never learned if that
# denies it (issue #16 item 12). The only upstream is a slow server that
# holds its answers until the scenario opens a gate: the sandbox asks for
# x1.delay.example (allowed by *.delay.example), the query reaches the
# upstream, the operator PATCHes *.delay.example to deny (200), then the
# gate opens. Before the fix the answer came back NOERROR under the old
# snapshot and its address was learned, so the sandbox could connect.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

slow_log=$TB_DIR/slowdns.log
gate=$TB_DIR/slowdns.gate
: >"$slow_log"
tb_net_bg "$TB_DIR/slowdns.out" "$TB_PY" "$TB_SERVERS_DIR/slowdns.py" \
    "$TB_DNS2_IP4" 53 delay.example "$TB_ORIGIN_A4" 0 "$slow_log" "$gate"
tb_check "the slow upstream listens" \
    tb_wait_port "$TB_NET" udp "$TB_DNS2_IP4" 53

tok="tighten-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"
# A long budget: the answer may wait for the gate for several seconds on
# a loaded machine (c-ares retransmits to the same upstream meanwhile).
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$tok"
    OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=12)
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: "*.delay.example"}
EOF
)
tb_start_egressd --policy "$pol" --dns-upstream "$TB_DNS2_IP4"
api=http://$TB_SBX_HOST_IP4:18080

# Control: with the gate open, an allowed name resolves and is usable.
touch "$gate"
tb_expect_eq "control: x0.delay.example resolves" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=5 +tries=1 x0.delay.example A)"
rm -f "$gate"

m=$(tb_log_mark "$TB_EGRESSD_LOG")
dig_out=$TB_DIR/dig.out
tb_sandbox_bg "$dig_out" dig +time=14 +tries=1 x1.delay.example A
dig_pid=$TB_LAST_PID
tb_check "the query for x1.delay.example is at the upstream" \
    tb_wait_line "$slow_log" '"qname": "x1\.delay\.example", "qtype": 1' 5

st=$(tb_host curl -sS --max-time 5 -o /dev/null -w '%{http_code}' \
    -X PATCH -H "OPENSANDBOX-EGRESS-AUTH: $tok" \
    --data '[{"action":"deny","target":"*.delay.example"}]' "$api/policy")
tb_expect_eq "operator: PATCH *.delay.example to deny" 200 "$st"
tb_expect_eq "the answer is still in flight after the PATCH" 0 \
    "$(grep -c '"ev": "slowdns.answer".*x1\.delay\.example' "$slow_log")"
touch "$gate"
wait "$dig_pid"
out=$(cat "$dig_out")
tb_check "the upstream did answer" \
    tb_wait_line "$slow_log" '"ev": "slowdns.answer", "qname": "x1\.delay\.example"' 5
tb_expect_match "the late answer is NXDOMAIN under the new policy" \
    "status: NXDOMAIN" "$out"
tb_expect_eq "and carries no address" "" \
    "$(awk '$4 == "A" {print $5}' "$dig_out")"
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" dns.deny \
    name=x1.delay.example reason=policy
tb_check_fails "the sandbox cannot connect to its address" \
    tb_sandbox curl -4 -sS --max-time 3 -o /dev/null "http://$TB_ORIGIN_A4/"
tb_expect_eq "nothing of the late answer was learned" "" \
    "$(tb_sandbox_root nft list set inet egressd learned4 2>/dev/null |
        grep -o 'x1\.delay\.example' | head -n 1)"
tb_finish
