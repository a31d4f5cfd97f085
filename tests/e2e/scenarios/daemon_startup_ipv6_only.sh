#!/bin/bash
# daemon_startup_ipv6_only: the first-release story in an IPv6-only pod. The
# sandbox namespace has IPv4 on loopback only (no address on its link, no
# IPv4 route; its resolver is dns1's IPv6 address). egressd starts (its
# self-check needs no route), an allowed name resolves (AAAA) and connects
# over IPv6, a denied name gets NXDOMAIN, a direct IPv6 connection to an
# address nobody allowed fails, hard-coded IPv6 resolvers are redirected,
# and the control API works over IPv6 from the node.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
TB_SBX_IPV6_ONLY=1
tb_setup
tb_host_setup

tb_expect_eq "the bed: sbx has no IPv4 route" "" \
    "$(tb_sandbox_root ip -4 route show)"
tb_expect_eq "the bed: sbx has IPv4 on loopback only" "127.0.0.1" \
    "$(tb_sandbox_root ip -4 -o addr show | awk '{print $4}' | cut -d/ -f1 | paste -sd,)"

token="api-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$token")
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
EOF
)
api="http://[$TB_SBX_HOST_IP6]:18080"
host_api() { # METHOD PATH [BODY]: prints the status, body in $TB_DIR/api.out
	tb_host curl -sS --max-time 5 -o "$TB_DIR/api.out" -w '%{http_code}' \
	    -H "OPENSANDBOX-EGRESS-AUTH: $token" -X "$1" \
	    ${3:+-H "Content-Type: application/json" --data-binary "$3"} \
	    "$api$2" 2>/dev/null
}
aaaa() { # NAME: the first AAAA record, or the rcode
	tb_sandbox dig +time=2 +tries=1 "$@" AAAA |
	    awk '/status:/{gsub(",","",$6); s=$6} /^[^;].*\tAAAA\t/{a=$NF} END{print (a!="" ? a : s)}'
}

# Before the fix: "nft self-check: DNS redirect: ... sendto 192.0.2.1 port
# 53: Network is unreachable", and no egressd.ready.
tb_start_egressd --policy "$pol" --http-addr ":18080"
tb_assert_log "$TB_EGRESSD_LOG" nft.selfcheck_passed ipv4=true ipv6=true
tb_assert_no_log "$TB_EGRESSD_LOG" egressd.start_failed

tb_expect_eq "allowed name resolves (AAAA) through egressd" \
    "$TB_ORIGIN_A6" "$(aaaa a.test)"
tb_check "and connects over IPv6" \
    tb_sandbox curl -6 -sS --max-time 5 -o /dev/null https://a.test/
tb_check "a wildcard subdomain too, with an ordinary (dual-stack) client" \
    tb_sandbox curl -sS --max-time 5 -o /dev/null https://www.a.test/
tb_assert_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_A6"
tb_expect_eq "denied name gets NXDOMAIN" "NXDOMAIN" "$(aaaa b.test)"
tb_expect_eq "also from a hard-coded IPv6 resolver (redirected)" \
    "NXDOMAIN" "$(aaaa @"$TB_RESOLVER_X6" b.test)"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X6" server.port=53
tb_check_fails "a direct IPv6 connection to an address nobody allowed fails" \
    tb_sandbox curl -6 -sS --max-time 3 -o /dev/null "https://[$TB_ORIGIN_B6]/"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B6"
tb_assert_no_dns_query dns1 'b\.test'

# The control API, from the node, over IPv6.
tb_expect_eq "GET /v1/status over IPv6" 200 "$(host_api GET /v1/status)"
tb_expect_match "status says nft is enforced" '"configuredMode":"dns\+nft"' \
    "$(cat "$TB_DIR/api.out")"
tb_expect_eq "PATCH /policy over IPv6 allows b.test" 200 \
    "$(host_api PATCH /policy '[{"action":"allow","target":"b.test"}]')"
tb_expect_eq "GET /policy shows it" 200 "$(host_api GET /policy)"
tb_expect_match "b.test in the policy" '"target":"b.test"' \
    "$(cat "$TB_DIR/api.out")"
tb_expect_eq "b.test resolves now" "$TB_ORIGIN_B6" "$(aaaa b.test)"
tb_check "and connects over IPv6" \
    tb_sandbox curl -6 -sS --max-time 5 -o /dev/null https://b.test/
tb_expect_eq "the API port is closed to the sandbox" 000 \
    "$(tb_sandbox curl -sS --max-time 3 -o /dev/null -w '%{http_code}' \
    "http://[::1]:18080/v1/status" 2>/dev/null)"
tb_finish
