#!/bin/bash
# proxy_vault_steering (issue 18 acceptance, THREATS: steering a secret):
# the sandbox tries every way to have the real credential of a.test's
# binding (https, /v1/*, GET and POST) sent somewhere else or for
# something else: Host other than the SNI, an absolute-form target naming
# another host, dot segments plain and percent-encoded, a method and a
# scheme the binding does not name, plain HTTP, a redirect to another
# host followed by the client, a second pipelined request to another
# path. The secret reaches the origin for the one request that matches,
# and for no other; nothing is injected into what is refused.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

SECRET=steer-secret-$RANDOM$RANDOM
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
printf '%s\n' "$SECRET" >"$TB_DIR/egressd/key"
chmod 600 "$TB_DIR/egressd/key"
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [GET, POST]}
    auth: {type: bearer, credential: k}
EOF
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE"
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/trust-all.pem"
chmod 644 "$TB_DIR/trust-all.pem"
C=(curl -sS --max-time 8 --cacert "$TB_DIR/trust-all.pem"
    -H 'Authorization: Bearer fake-key')
code() { tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}' "$@"; }
# nothing since mark carried the secret, to any host
no_secret() {
	tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
	    "h.authorization=Bearer $SECRET"
}

# --- the one request that matches ----------------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "the bound request" 200 "$(code https://a.test/v1/ok)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/ok \
    "h.authorization=Bearer $SECRET"

# --- Host other than the SNI: 421, nothing forwarded -----------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "Host: b.test inside a.test's TLS: 421" 421 \
    "$(code -H 'Host: b.test' https://a.test/v1/host)"
tb_expect_eq "absolute-form naming b.test inside a.test's TLS: 400" 400 \
    "$(code --request-target 'https://b.test/v1/abs' https://a.test/)"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/host
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/abs
no_secret

# --- paths: dot segments resolved before matching, the encoded ones too -----------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "/v1/../admin is /admin: forwarded" 200 \
    "$(code --path-as-is https://a.test/v1/../admin)"
tb_expect_eq "/v1/%2e%2e/admin2 is /admin2: forwarded" 200 \
    "$(code --path-as-is 'https://a.test/v1/%2e%2e/admin2')"
tb_expect_eq "/v1%2fadmin3 (an encoded slash): 400" 400 \
    "$(code --path-as-is 'https://a.test/v1%2fadmin3')"
# judged by the normalized path (no match), forwarded as the client sent it
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/../admin 'h.authorization=Bearer fake-key'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/%2e%2e/admin2 'h.authorization=Bearer fake-key'
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1%2fadmin3
no_secret

# --- a method and a scheme the binding does not name --------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "DELETE /v1/x: forwarded untouched" 200 \
    "$(code -X DELETE https://a.test/v1/del)"
tb_expect_eq "plain http://a.test/v1/x: forwarded untouched" 200 \
    "$(tb_sandbox curl -sS --max-time 8 -4 -o /dev/null -w '%{http_code}' \
        -H 'Authorization: Bearer fake-key' http://a.test/v1/plain)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/del \
    'h.authorization=Bearer fake-key'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/plain \
    'h.authorization=Bearer fake-key'
no_secret

# --- a redirect to another host, followed by the client -----------------------------
# (--location-trusted: curl sends its own Authorization on to b.test too)
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -L --location-trusted -o /dev/null \
    'https://a.test/v1/go?status=302&location=https://b.test/v1/steal'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/go \
    "h.authorization=Bearer $SECRET"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/steal \
    'h.authorization=Bearer fake-key'
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/steal \
    "h.authorization=Bearer $SECRET"

# --- pipelined: a second request on the same connection to another path -------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -o /dev/null https://a.test/v1/one \
    https://a.test/two
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/one \
    "h.authorization=Bearer $SECRET"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/two \
    'h.authorization=Bearer fake-key'

tb_check_fails "the secret never reaches egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
