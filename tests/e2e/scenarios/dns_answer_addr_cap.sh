#!/bin/bash
# dns_answer_addr_cap: an answer with more addresses than egressd learns
# per answer (DNS_ANSWER_ADDR_MAX, 256) is released with only the ones it
# learned: every address the sandbox is given is open, none beyond.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

# many.test: 300 AAAA records (2001:db8:3:1::1 .. ::12c), ~9 KB: TCP only.
conf=$TB_DIR/many.conf
for i in $(seq 300); do
	printf 'host-record=many.test,2001:db8:3:1::%x\n' "$i"
done >"$conf"
tb_dns_start dns2 "$TB_DNS2_IP4" -- --conf-file="$conf"

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: many.test}
EOF
)
tb_start_egressd --policy "$pol" --dns-upstream "$TB_DNS2_IP4"

tb_sandbox dig +tcp +time=5 +tries=1 many.test AAAA >"$TB_DIR/answer"
tb_expect_match "the answer comes (NOERROR)" "status: NOERROR" \
    "$(cat "$TB_DIR/answer")"
awk '$4 == "AAAA" { print $5 }' "$TB_DIR/answer" | sort >"$TB_DIR/released"
tb_sandbox_root nft -j list set inet egressd learned6 |
    grep -o '2001:db8:3:1::[0-9a-f]*' | sort -u >"$TB_DIR/learned"
tb_expect_eq "256 addresses released (the learn cap per answer)" 256 \
    "$(wc -l <"$TB_DIR/released")"
tb_expect_eq "every released address is in learned6" "" \
    "$(comm -23 "$TB_DIR/released" "$TB_DIR/learned" | head -3)"
tb_expect_eq "and nothing was learned that was not released" "" \
    "$(comm -13 "$TB_DIR/released" "$TB_DIR/learned" | head -3)"
tb_assert_log "$TB_EGRESSD_LOG" dns.strip name=many.test \
    reason=too_many_addresses
tb_finish
