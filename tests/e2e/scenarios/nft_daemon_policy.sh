#!/bin/bash
# nft_daemon_policy: a policy update through the control API (from the
# node's namespace) swaps the table in one transaction and keeps the
# learned addresses the new policy still allows, without a new DNS answer,
# while the ones it now denies (name removed, or an address deny rule)
# close at once.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN="nft-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
dns: {ttlMin: 60, ttlMax: 300}
EOF2
)
tb_start_egressd --policy "$pol"

for n in a b c; do
	tb_expect_match "$n.test resolves through egressd" '^203\.0\.113\.' \
	    "$(tb_sandbox dig +short +time=2 +tries=1 $n.test A)"
done
nd_works "a.test's address open" tcp "$TB_ORIGIN_A4" 80
nd_works "b.test's address open" tcp "$TB_ORIGIN_B4" 80
nd_works "c.test's address open" tcp "$TB_ORIGIN_C4" 7

api_post()
{
	tb_host curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
	    --data-binary "$1" "http://$TB_SBX_HOST_IP4:18080/policy"
}
tb_expect_eq "POST a policy without b.test, denying c.test's address" 200 \
    "$(api_post '{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"},{"action":"allow","target":"c.test"},{"action":"deny","target":"'"$TB_ORIGIN_C4"'"}]}')"

nd_works "a.test's learned address survived the update" tcp "$TB_ORIGIN_A4" 80
nd_fails_fast "b.test's address closed at once (name no longer allowed)" \
    tcp "$TB_ORIGIN_B4" 80
nd_fails_fast "c.test's address closed at once (address deny rule)" \
    tcp "$TB_ORIGIN_C4" 7
tb_check "learned4 still holds a.test's address" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd learned4 | grep -q '$TB_ORIGIN_A4'"
tb_check_fails "and no longer b.test's" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd learned4 | grep -q '$TB_ORIGIN_B4'"
tb_check "the table still has its drop policy" bash -c \
    "ip netns exec $TB_SBX nft list chain inet egressd filter_out | grep -q 'policy drop'"
tb_finish
