#!/bin/bash
# vault_binding_dest (issue 34 item 5, THREATS 12): a plain-http binding
# steered to another host's address. a.test has an http binding (bearer);
# b.test is allowed, and so is b.test's address by an IP rule (as an
# operator allows an API's address range). The sandbox resolves b.test
# and sends "Host: a.test" to b.test's address over plain HTTP: the
# credential must never reach b.test's server (the origin log says which
# server address got which Authorization), for IPv4 and IPv6, before and
# after b.test is resolved. A binding injects only toward an address its
# own host resolved to. On 9cc226d, once b.test is resolved, the IP rule
# lets the injection through (policy_addr_explicitly_allowed accepts any
# IP rule); before that, the address's plain HTTP is not sent to the
# proxy at all (the IP rule's traffic goes straight out, egressd logs no
# proxy.closed for it), so nothing is injected and those checks pass.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

SECRET=$(tb_random_key)
KEY=$TB_DIR/egressd/key-k
tb_vault_files "$SECRET"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: $TB_ORIGIN_B4/32}
  - {action: allow, target: $TB_ORIGIN_B6/128}
credentials:
  - {name: k, source: {type: file, path: $KEY}}
bindings:
  - name: a-plain
    match: {schemes: [http], hosts: [a.test], paths: ["/v1/*"]}
    auth: {type: bearer, credential: k}
EOF2
)
tb_start_egressd --policy "$pol" --proxy --state-dir "$TB_DIR/state"
OUT=$TB_SBX_HOME
# to_b NAME ADDR: "Host: a.test" to b.test's ADDR (an URL host part)
to_b() {
	tb_sandbox curl -sS --max-time 8 -o "$OUT/$1" -w '%{http_code}' \
	    -H 'Host: a.test' -H 'Authorization: Bearer fake' \
	    "http://$2/v1/$1?echo=Authorization"
}

# --- the binding itself: a.test's own address gets the key ------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox curl -sS --max-time 8 -4 -o "$OUT/own" -H 'Authorization: Bearer fake' \
    'http://a.test/v1/own?echo=Authorization'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/own \
    server.addr="$TB_ORIGIN_A4" server.scheme=http "h.authorization=Bearer $SECRET"
tb_expect_no_secret "... and its echo is redacted" "$KEY" "$OUT/own"

# --- Host: a.test to b.test's address, b.test not resolved yet ---------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
c4=$(to_b before4 "$TB_ORIGIN_B4")
c6=$(to_b before6 "[$TB_ORIGIN_B6]")
echo "# before resolving b.test: IPv4 $c4, IPv6 $c6"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.addr="$TB_ORIGIN_B4" "h.authorization=Bearer $SECRET"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.addr="$TB_ORIGIN_B6" "h.authorization=Bearer $SECRET"

# --- the same after resolving b.test (the issue's reproduction) --------------
tb_expect_eq "the sandbox resolves b.test" "$TB_ORIGIN_B4" \
    "$(tb_sandbox dig +short +time=2 b.test A)"
tb_expect_eq "... and its IPv6 address" "$TB_ORIGIN_B6" \
    "$(tb_sandbox dig +short +time=2 b.test AAAA)"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
c4=$(to_b after4 "$TB_ORIGIN_B4")
c6=$(to_b after6 "[$TB_ORIGIN_B6]")
echo "# after resolving b.test: IPv4 $c4, IPv6 $c6"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.addr="$TB_ORIGIN_B4" "h.authorization=Bearer $SECRET"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.addr="$TB_ORIGIN_B6" "h.authorization=Bearer $SECRET"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr!="$TB_ORIGIN_A4" \
    "h.authorization=Bearer $SECRET"
tb_check_fails "the secret never reaches egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
