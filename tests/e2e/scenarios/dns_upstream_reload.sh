#!/bin/bash
# dns_upstream_reload: with no upstream on the command line or in the
# environment, the policy file's dns.upstreams decide, and an edit of them
# moves the resolver to the new upstream without a restart.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_dns_start dns2 "$TB_DNS2_IP4"

pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: "*.a.test"}
dns:
  upstreams: ["$TB_DNS1_IP4"]
EOF
)
# "--dns-upstream=" (empty): no upstream from flags, the file decides.
tb_start_egressd --policy "$pol" --dns-upstream=
tb_expect_eq "resolves through the file's upstream" "203.0.113.10" \
    "$(tb_sandbox dig +short +time=2 +tries=1 www.a.test A)"
tb_assert_dns_query dns1 'www\.a\.test'
tb_assert_no_dns_query dns2 'www\.a\.test'

m=$(tb_log_mark "$TB_EGRESSD_LOG")
# sed -i replaces the file by a rename too, and keeps its mode (0600: the
# file holds an inline credential, the bed's canary)
sed -i "s/$TB_DNS1_IP4/$TB_DNS2_IP4/" "$pol"
tb_check "the edit is loaded" tb_wait_log_line --since "$m" --timeout 2 \
    "$TB_EGRESSD_LOG" dns.upstreams_changed count=1
tb_expect_eq "a new name resolves through the new upstream" "203.0.113.10" \
    "$(tb_sandbox dig +short +time=2 +tries=1 deep.sub.a.test A)"
tb_assert_dns_query dns2 'deep\.sub\.a\.test'
tb_assert_no_dns_query dns1 'deep\.sub\.a\.test'
tb_finish
