#!/bin/bash
# vault_readback (issue 34 item 1, THREATS 13a): the origin keeps what it
# is sent, and the sandbox reads it back on a connection no credential
# went over. The binding injects the real key (bearer) into POSTs to
# a.test's /v1/* and puts it into their JSON bodies (a placeholder
# substitution); the fake origin stores such a request as received
# (store=KEY: a request log, a notes API) and gives it back (load=KEY).
# The sandbox stores one, then reads it back with a GET the binding does
# not cover (a) after the pooled origin connection expired (the pool
# keeps an idle one 4 s), (b) at once while the first origin connection
# is busy with a slow store (delay_ms), so a second one is dialed, and
# (c) on a path no binding covers at all. Whatever a bound origin sends
# must reach the client with no form of the secret and no 12 characters
# in a row of one (lib/secret_scan.py). On 9cc226d (a)-(c) fail: only the
# origin connection that carried the secret was redacted.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator reads /metrics (the pool's idle gauge)

SECRET=$(tb_random_key)
KEY=$TB_DIR/egressd/key-k
PH=PLACEHOLDER_K
tb_vault_files "$SECRET"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: file, path: $KEY}}
bindings:
  - name: notes-write
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [POST]}
    auth:
      type: bearer
      credential: k
      substitutions:
        - {credential: k, placeholder: $PH, in: [body]}
EOF2
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --http-addr ":18080"
CA=$STATE/ca-bundle.crt
C=(curl -sS --max-time 12 --cacert "$CA")
OUT=$TB_SBX_HOME # what the sandbox received, one file a read
METRICS="http://$TB_SBX_HOST_IP4:18080/metrics"

# store KEY [QUERY]: the sandbox stores a note holding the placeholder;
# egressd injects the key and substitutes the body
store() {
	tb_sandbox "${C[@]}" -o "$OUT/store-$1" -H 'Authorization: Bearer fake' \
	    -H 'Content-Type: application/json' \
	    --data-raw "{\"note\":\"$PH\"}" \
	    "https://a.test/v1/notes?store=$1${2:+&$2}"
}
# pool_empty: bounded wait until egressd keeps no idle origin connection
pool_empty() {
	local _
	for _ in $(seq 100); do
		tb_host curl -sS --max-time 5 "$METRICS" |
		    grep -qx 'egressd_proxy_upstream_idle 0' && return 0
		sleep 0.1
	done
	return 1
}

# --- the note, stored with the real key in its head and its body ----------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
store n1
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=POST \
    path=/v1/notes query=store=n1 "h.authorization=Bearer $SECRET" \
    "body={\"note\":\"$SECRET\"}"
tb_expect_no_secret "the store's own echo (an injected request) is redacted" \
    "$KEY" "$OUT/store-n1"

# --- (a) after the pooled origin connection expired ------------------------
tb_check "the pooled origin connection expires (idle gauge 0)" pool_empty
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
code=$(tb_sandbox "${C[@]}" -o "$OUT/read-a" -w '%{http_code}' \
    'https://a.test/v1/notes?load=n1')
tb_expect_eq "(a) the read-back is answered" 200 "$code"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=GET \
    query=load=n1 '!h.authorization'
tb_expect_match "(a) ... with the stored request (its Authorization line, masked)" \
    '^Authorization: ' "$(tr -d '\r' <"$OUT/read-a")"
tb_expect_no_secret "(a) read back on a clean connection: no form of the secret" \
    "$KEY" "$OUT/read-a"

# --- (b) at once, while the first origin connection is busy ---------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox_bg "$TB_DIR/slow-store.out" "${C[@]}" -o "$OUT/store-n2" \
    -w '%{http_code}' -H 'Authorization: Bearer fake' \
    -H 'Content-Type: application/json' --data-raw "{\"note\":\"$PH\"}" \
    'https://a.test/v1/notes?store=n2&delay_ms=4000'
slow=$TB_LAST_PID
tb_check "(b) the slow store reached the origin (kept before its delay)" \
    tb_wait_log_line --since "$mark" --timeout 5 "$TB_ORIGIN_LOG" \
    origin.request query=store=n2\&delay_ms=4000 \
    "h.authorization=Bearer $SECRET" "body={\"note\":\"$SECRET\"}"
code=$(tb_sandbox "${C[@]}" -o "$OUT/read-b" -w '%{http_code}' \
    'https://a.test/v1/notes?load=n2')
tb_check "(b) ... and was still in flight when the read-back was answered" \
    kill -0 "$slow"
tb_expect_eq "(b) the read-back is answered" 200 "$code"
tb_expect_match "(b) ... with the stored request" '^Authorization: ' \
    "$(tr -d '\r' <"$OUT/read-b")"
tb_expect_no_secret "(b) read back on a second origin connection: no form of the secret" \
    "$KEY" "$OUT/read-b"

# --- (c) a path no binding covers, on the bound host -----------------------
code=$(tb_sandbox "${C[@]}" -o "$OUT/read-c" -w '%{http_code}' \
    'https://a.test/pub/notes?load=n1')
tb_expect_eq "(c) the unbound read-back is answered" 200 "$code"
tb_expect_match "(c) ... with the stored request" '^Authorization: ' \
    "$(tr -d '\r' <"$OUT/read-c")"
tb_expect_no_secret "(c) an unbound request reading the note: no form of the secret" \
    "$KEY" "$OUT/read-c"
# a slice of it, its body only (a substring API)
code=$(tb_sandbox "${C[@]}" -o "$OUT/read-c2" -w '%{http_code}' \
    'https://a.test/pub/notes?load=n1&part=body&off=9&len=40')
tb_expect_eq "(c) the body's value, cut out by the origin" 200 "$code"
tb_expect_no_secret "(c) ... no form of the secret" "$KEY" "$OUT/read-c2"

tb_check "the slow store ends" wait "$slow"
tb_expect_eq "... answered 200" 200 "$(cat "$TB_DIR/slow-store.out")"
tb_expect_no_secret "... its echo redacted (it carried the secret)" \
    "$KEY" "$OUT/store-n2"
tb_check_fails "the secret never reaches egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
