#!/bin/bash
# api_unix_socket: the control API on a Unix socket only (--api-socket,
# --http-addr ""). The socket is mode 0660 root-owned: root in the pod
# drives /policy through it; the sandbox uid, even where it can reach the
# path, cannot connect; no TCP listener exists; a clean stop removes it.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

TOKEN="api-$TB_ID-$RANDOM$RANDOM"
# A directory the sandbox uid can traverse, so only the socket's own mode
# keeps it out.
chmod 711 "$TB_DIR"
run="$TB_DIR/run"
mkdir -p "$run" && chmod 755 "$run"
sock="$run/api.sock"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TOKEN"
    'OPENSANDBOX_EGRESS_RULES={"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"}]}')
tb_start_egressd --http-addr "" --api-socket "$sock"

tb_expect_eq "socket is srw-rw---- root:root" "srw-rw---- 0:0" \
    "$(stat -c '%A %u:%g' "$sock")"
tb_assert_log "$TB_EGRESSD_LOG" api.listen tcp= unix="$sock"
tb_check_fails "no TCP listener on 18080" \
    tb_wait_port "$TB_SBX" tcp 127.0.0.1 18080 0.3

ucall()
{
	ip netns exec "$TB_SBX" curl -sS --max-time 5 --unix-socket "$sock" \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TOKEN" "$@"
}
tb_expect_eq "root GETs the policy over the socket" \
    '{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft","policy":{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"}]}}' \
    "$(ucall http://egressd/policy)"
tb_expect_eq "and PATCHes it" \
    '{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft"}' \
    "$(ucall -X PATCH --data-binary '[{"action":"allow","target":"b.test"}]' \
        http://egressd/policy)"
tb_expect_eq "the sandbox sees the change" "203.0.113.11" \
    "$(tb_sandbox dig +short +time=2 +tries=1 b.test A)"
tb_expect_eq "the token is still required on the socket" unauthorized \
    "$(ip netns exec "$TB_SBX" curl -sS --max-time 5 --unix-socket "$sock" \
        http://egressd/policy)"

mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_check "the sandbox uid can reach the path" tb_sandbox test -e "$sock"
tb_check_fails "but cannot connect, even with the token" \
    tb_sandbox curl -sS --max-time 3 --unix-socket "$sock" \
    -H "OPENSANDBOX-EGRESS-AUTH: $TOKEN" \
    --data-binary '{"defaultAction":"allow"}' http://egressd/policy
tb_expect_match "refused by the file mode" "Permission denied|Couldn't connect" \
    "$(cat "$TB_OUT" 2>/dev/null)"
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" api.request

tb_stop_egressd TERM
tb_expect_eq "clean stop exits 0" 0 "$TB_EGRESSD_STATUS"
tb_check_fails "and removes the socket" test -e "$sock"
tb_finish
