#!/bin/bash
# dns_upstream_failover: one dead resolver first in the list never fails a
# lookup another one can answer (issue #16 item 2). Upstreams: a silent
# 203.0.113.99, then the live dns1; budget 2 s
# (OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=2) and the policy's default
# per-attempt timeout (5 s): before the fix the first queries waited the
# whole budget on the dead one and got SERVFAIL. Now the query is hedged
# to the next upstream after a short delay, inside the budget.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

dead=203.0.113.99
# Nothing answers there; make sure nothing even says "unreachable".
tb_net nft -f - <<EOF || tb_die "blackhole $dead"
table inet tb_dead {
	chain in {
		type filter hook prerouting priority -300;
		ip daddr $dead drop
	}
}
EOF

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: "*.a.test"}
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
EOF
)
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=2)
tb_start_egressd --policy "$pol" --dns-upstream "$dead" \
    --dns-upstream "$TB_DNS1_IP4"

ms() { echo $(($(date +%s%N) / 1000000)); }

# The first lookups: the dead upstream is still believed healthy and is
# asked first. Each must be answered (by dns1), not SERVFAIL; over UDP
# and over TCP.
i=0
for q in "a.test A" "+tcp www.a.test A" "b.test AAAA" "deep.sub.a.test A"; do
	i=$((i + 1))
	t0=$(ms)
	out=$(tb_sandbox dig +time=5 +tries=1 $q)
	t1=$(ms)
	tb_expect_match "lookup $i ($q) answered, not SERVFAIL ($((t1 - t0)) ms)" \
	    "status: NOERROR" "$out"
	tb_expect_match "lookup $i carries its address" \
	    "IN[[:space:]]+A{1,4}[[:space:]]+(203\.0\.113\.1[01]|2001:db8:2::1[01])" \
	    "$out"
done
tb_assert_dns_query dns1 'deep\.sub\.a\.test'
tb_assert_no_log "$TB_EGRESSD_LOG" dns.servfail
# The dead one is found out meanwhile (c-ares' own timeout per attempt).
tb_check "the dead upstream is marked down" \
    tb_wait_log_line --timeout 6 "$TB_EGRESSD_LOG" dns.upstream.down \
    "upstream=$dead:53"
tb_assert_no_log "$TB_EGRESSD_LOG" dns.upstream.down \
    "upstream=$TB_DNS1_IP4:53"
tb_finish
