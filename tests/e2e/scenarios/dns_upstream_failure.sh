#!/bin/bash
# dns_upstream_failure: a dead or silent upstream costs at most the timeout
# budget and then SERVFAIL (never a hang, never an unfiltered answer); with
# a second upstream configured, queries fail over to it and the dead one is
# marked down; when it comes back, a health probe brings it back.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
dns:
  timeoutMs: 400
EOF
)
tb_dns_start dns2 "$TB_DNS2_IP4" "$TB_DNS2_IP6"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_LOG_LEVEL=debug
    OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=2
    OPENSANDBOX_EGRESS_DNS_UPSTREAM_PROBE=a.test
    OPENSANDBOX_EGRESS_DNS_UPSTREAM_PROBE_INTERVAL_SEC=1)
tb_start_egressd --policy "$pol" --dns-upstream "$TB_DNS1_IP4" \
    --dns-upstream "$TB_DNS2_IP4"

# dig's own "Query time" (sent to answered): no process start-up in it,
# which on a loaded machine alone can take hundreds of milliseconds.
qtime() { sed -n 's/^;; Query time: \([0-9]*\) msec.*/\1/p' <<<"$1"; }

tb_expect_eq "both upstreams up: answered" "203.0.113.10" \
    "$(tb_sandbox dig +short +time=3 +tries=1 a.test A)"
tb_assert_dns_query dns1 'a\.test'

# dns1 goes silent: the next query is hedged to dns2 after dns1's RTO
# (at most one attempt, 400 ms), well inside the 2 s budget.
tb_dns_blackhole dns1 on
out=$(tb_sandbox dig +time=4 +tries=1 www.a.test A)
qt=$(qtime "$out")
tb_expect_match "silent first upstream: failover answers" \
    "IN[[:space:]]+A[[:space:]]+203\.0\.113\.10" "$out"
tb_expect_match "within the budget (dig: ${qt:-?} ms)" '^1$' \
    "$(( ${qt:-99999} < 2000 ))"
tb_assert_dns_query dns2 'www\.a\.test'
# A second failure in a row marks it down (one lost packet does not);
# a hedged attempt fails when it runs out of time (the 2 s attempt
# timeout), not when the hedge goes out.
tb_expect_eq "a second query fails over too" "2001:db8:2::10" \
    "$(tb_sandbox dig +short +time=4 +tries=1 www.a.test AAAA)"
tb_check "the silent upstream is marked down" \
    tb_wait_log_line --timeout 5 "$TB_EGRESSD_LOG" dns.upstream.down \
    "upstream=$TB_DNS1_IP4:53"

# Once dns1 is down, healthy dns2 is asked first: no more waiting. (Not
# a timing check: had dns1 been asked first, silent, the query would have
# been hedged away from it, and the debug log says so.)
m=$(tb_log_mark "$TB_EGRESSD_LOG")
got=$(tb_sandbox dig +short +time=4 +tries=1 b.test A)
tb_expect_eq "next query answered by the healthy upstream" "203.0.113.11" \
    "$got"
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" dns.upstream.hedge \
    "upstream=$TB_DNS1_IP4:53"

# dns1 comes back: the 1 s probe notices.
tb_dns_blackhole dns1 off
tb_check "probe marks the first upstream up again" \
    tb_wait_log_line --timeout 5 "$TB_EGRESSD_LOG" dns.upstream.up \
    "upstream=$TB_DNS1_IP4:53"

# Everything down: SERVFAIL within the budget, over UDP and TCP.
tb_dns_blackhole dns1 on
tb_dns_stop dns2
out=$(tb_sandbox dig +time=5 +tries=1 c.test A)
qt=$(qtime "$out")
tb_expect_match "all upstreams down: SERVFAIL" "status: SERVFAIL" "$out"
tb_expect_match "within the 2 s budget (dig: ${qt:-?} ms)" '^1$' \
    "$(( ${qt:-99999} < 2600 ))"
tb_expect_match "over TCP as well" "status: SERVFAIL" \
    "$(tb_sandbox dig +tcp +time=5 +tries=1 b.test AAAA)"
tb_assert_log "$TB_EGRESSD_LOG" dns.servfail name=c.test reason=upstream
# A denied name is still NXDOMAIN: policy needs no upstream.
tb_expect_match "denied names are still refused locally" "status: NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 evil.test A)"
# Cached answers keep working while the upstreams are down.
tb_expect_eq "a cached answer is still served" "203.0.113.10" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
tb_finish
