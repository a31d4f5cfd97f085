#!/bin/bash
# api_unreachable: the sandbox cannot reach the control API on any address
# (loopback v4/v6, its own addresses), even with the right token (contract
# §5.10, THREATS 15); from the node's namespace it works, and egressd never
# saw the sandbox's attempts.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN="api-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"   # every address, IPv6 and IPv4
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN"
    'OPENSANDBOX_EGRESS_RULES={"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"}]}')
tb_start_egressd

tok=$TB_EGRESSD_TOKEN
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
for addr in 127.0.0.1 "[::1]" "$TB_SBX_IP4" "[$TB_SBX_IP6]" \
    "$TB_SBX_HOST_IP4" "[$TB_SBX_HOST_IP6]"; do
	tb_check_fails "sandbox uid cannot GET /policy at $addr" \
	    tb_sandbox curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $tok" \
	    "http://$addr:18080/policy"
	tb_check_fails "nor POST a policy at $addr" \
	    tb_sandbox curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $tok" \
	    --data-binary '{"defaultAction":"allow"}' "http://$addr:18080/policy"
	tb_check_fails "nor reach /healthz at $addr" \
	    tb_sandbox curl -sS --max-time 3 "http://$addr:18080/healthz"
done
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" api.request
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" policy.updated
tb_expect_match "a.test still the only allowed name" "status: NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 b.test A)"

# The node (a third namespace) reaches it over IPv4 and IPv6.
for addr in "$TB_SBX_HOST_IP4" "[$TB_SBX_HOST_IP6]"; do
	tb_expect_eq "host reaches GET /policy at $addr" 200 \
	    "$(tb_host curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
	        -H "OPENSANDBOX-EGRESS-AUTH: $tok" "http://$addr:18080/policy")"
	tb_expect_eq "but not without the token" 401 \
	    "$(tb_host curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
	        "http://$addr:18080/policy")"
done
tb_expect_eq "host can PATCH" 200 \
    "$(tb_host curl -sS -o /dev/null -w '%{http_code}' --max-time 5 -X PATCH \
        -H "OPENSANDBOX-EGRESS-AUTH: $tok" \
        --data-binary '[{"action":"allow","target":"b.test"}]' \
        "http://$TB_SBX_HOST_IP4:18080/policy")"
tb_expect_eq "and the sandbox sees the change" "203.0.113.11" \
    "$(tb_sandbox dig +short +time=2 +tries=1 b.test A)"
tb_assert_log "$TB_EGRESSD_LOG" api.request method=PATCH status=200 \
    peer~"^(::ffff:)?$TB_HOST_IP4:"
# Not even root in the pod's namespace: only egressd's own (marked)
# sockets pass the local-port rule, so a workload that gained root in the
# namespace still cannot reconfigure egressd.
tb_check_fails "root in sbx cannot reach it on loopback either" \
    tb_sandbox_root curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $tok" \
    "http://127.0.0.1:18080/policy"
tb_finish
