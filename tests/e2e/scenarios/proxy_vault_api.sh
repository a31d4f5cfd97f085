#!/bin/bash
# proxy_vault_api: the Credential Vault driven through the control API
# (contract §4, §6) while the sandbox sends requests: create empty, add a
# credential and a binding, replace the value, delete; the origin sees the
# real value exactly while a binding says so, and the old value is never
# injected once the API has answered. The checks' order (401, 405, 412,
# 426, 400), revisions and 409s, the read routes, _active, and the policy
# coupling (a /policy change that uncovers a binding is refused). No API
# answer, log line or file egressd writes ever holds a value.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator's host: a non-loopback API peer

TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
# The operator's own inline credential (b.test), beside the API's vault.
S0=real-operator-secret-$RANDOM
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
credentials:
  - {name: op, source: {type: inline, value: "$S0"}}
bindings:
  - name: op-b
    match: {hosts: [b.test]}
    auth: {type: apiKey, name: X-Op-Key, credential: op}
EOF
)
STATE=$TB_DIR/state
SOCK=$TB_DIR/egressd/api.sock
EARGS=(--policy "$pol" --proxy --trust-dir "$TB_DIR/trust"
    --state-dir "$STATE" --http-addr ":18080" --api-socket "$SOCK"
    --api-token-file "$TB_DIR/token")
tb_start_egressd "${EARGS[@]}"
# tb_api METHOD PATH [BODY] on the Unix socket: the operator's local path
# (nft keeps every unmarked socket of the pod, root's too, off the TCP
# port; the host reaches it from outside and is not loopback).
tb_api() {
	local m=$1 p=$2 args=()
	[ -n "${TB_EGRESSD_TOKEN:-}" ] &&
	    args+=(-H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN")
	[ $# -ge 3 ] && args+=(-H "Content-Type: application/json" \
	    --data-binary "$3")
	tb_sandbox_root curl -sS --max-time 5 --unix-socket "$SOCK" \
	    -o "$TB_API_BODY" -w '%{http_code}' -X "$m" "${args[@]}" \
	    "http://egressd$p" 2>/dev/null
	return 0
}
# The sandbox trusts egressd's bundle and, for pass-through, the test CA.
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/trust-all.pem"
chmod 644 "$TB_DIR/trust-all.pem"
C=(curl -sS --max-time 8 --cacert "$TB_DIR/trust-all.pem")
S1=real-vault-secret-one-$RANDOM
S2=real-vault-secret-two-$RANDOM
B64=$(printf 'user:real-basic-%s' "$RANDOM" | base64) # basic: already base64
H1=real-header-one-$RANDOM
H2=real-header-two-$RANDOM
body() { cat "$TB_API_BODY"; }
# fetch: one request from the sandbox user with the fake key; the origin's
# view of its Authorization header is checked by the caller.
fetch() { tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Bearer fake-key' "$@"; }

# --- before a vault exists ---------------------------------------------------
tb_expect_eq "GET without a vault: 404" 404 "$(tb_api GET /credential-vault)"
tb_expect_eq "... credential vault not found" "credential vault not found" "$(body)"
tb_expect_eq "the lists too: 404" 404 "$(tb_api GET /credential-vault/credentials)"
tb_expect_eq "PATCH without a vault: 404" 404 "$(tb_api PATCH /credential-vault '{}')"
tb_expect_eq "DELETE without a vault: 404" 404 "$(tb_api DELETE /credential-vault)"

# --- order of checks ---------------------------------------------------------
tok=$TB_EGRESSD_TOKEN
TB_EGRESSD_TOKEN=wrong
tb_expect_eq "a wrong token: 401 first" 401 "$(tb_api PUT /credential-vault '{}')"
TB_EGRESSD_TOKEN=$tok
tb_expect_eq "PUT: 405" 405 "$(tb_api PUT /credential-vault '{}')"
allow=$(tb_sandbox_root curl -sS -o /dev/null -D - -X PUT --unix-socket "$SOCK" \
    -H "OPENSANDBOX-EGRESS-AUTH: $tok" http://egressd/credential-vault |
    tr -d '\r' | sed -n 's/^Allow: //Ip')
tb_expect_eq "... with Allow" "GET, POST, PATCH, DELETE" "$allow"
api="http://$TB_SBX_HOST_IP4:18080/credential-vault"
tb_expect_eq "a write from the host (not loopback, no TLS): 426" 426 \
    "$(tb_host_api POST "$api" '{"credentials":[],"bindings":[]}')"
tb_expect_eq "... the contract's message" \
    "credential vault writes require TLS or loopback transport" "$(cat "$TB_DIR/api.out")"
tb_expect_eq "... a read from the host is fine" 404 "$(tb_host_api GET "$api")"
tb_expect_eq "a body that is not JSON: 400" 400 "$(tb_api POST /credential-vault '{')"
tb_expect_match "... invalid credential vault" '^invalid credential vault: body:1' "$(body)"
tb_expect_eq "an unknown field: 400" 400 \
    "$(tb_api POST /credential-vault '{"credentials":[],"secrets":[]}')"
tb_expect_eq "a file source from the API: 400" 400 \
    "$(tb_api POST /credential-vault '{"credentials":[{"name":"f","source":{"type":"file","path":"/etc/shadow"}}]}')"

# --- create empty, then add ------------------------------------------------------
tb_expect_eq "POST an empty vault: 201" 201 \
    "$(tb_api POST /credential-vault '{"credentials":[],"bindings":[]}')"
tb_expect_eq "... revision 1, lists never null" \
    '{"revision":1,"credentials":[],"bindings":[]}' "$(body)"
tb_expect_eq "a second POST: 409" 409 \
    "$(tb_api POST /credential-vault '{"credentials":[],"bindings":[]}')"
tb_expect_eq "... already exists" "credential vault already exists" "$(body)"

mark=$(tb_log_mark "$TB_ORIGIN_LOG")
fetch https://a.test/v1/before
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/before \
    'h.authorization=Bearer fake-key'

add='{"expectedRevision":1,"credentials":{"add":[{"name":"k","source":{"type":"inline","value":"'$S1'"}}]},"bindings":{"add":[{"name":"a-api","match":{"hosts":["a.test"],"paths":["/v1/*"]},"auth":{"type":"bearer","credential":"k"}}]}}'
tb_expect_eq "PATCH add a credential and a binding: 200" 200 \
    "$(tb_api PATCH /credential-vault "$add")"
tb_expect_eq "... the state, sorted, without the value" \
    '{"revision":2,"credentials":[{"name":"k","sourceType":"inline","revision":2}],"bindings":[{"name":"a-api","revision":2,"match":{"schemes":["https"],"hosts":["a.test"],"methods":["GET","POST","PUT","PATCH","DELETE"],"paths":["/v1/*"]},"auth":{"type":"bearer"}}]}' \
    "$(body)"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "${C[@]}" -H 'Authorization: Bearer fake-key' \
    'https://a.test/v1/me?echo=Authorization')
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/me \
    "h.authorization=Bearer $S1"
tb_check_fails "the echo the sandbox got holds no secret" grep -qF "$S1" <<<"$out"
fetch https://a.test/other
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/other \
    'h.authorization=Bearer fake-key'
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected binding=a-api \
    host=a.test vault_revision=2

# --- replace: the old value is gone the moment the API answered ------------------
tb_expect_eq "a stale expectedRevision: 409" 409 \
    "$(tb_api PATCH /credential-vault '{"expectedRevision":1}')"
tb_expect_eq "... the contract's message" \
    "expectedRevision 1 does not match current revision 2" "$(body)"
rep='{"credentials":{"replace":[{"name":"k","source":{"value":"'$S2'"}}]}}'
tb_expect_eq "PATCH replace the value: 200" 200 "$(tb_api PATCH /credential-vault "$rep")"
tb_expect_match "... revision 3, the credential's too" \
    '^\{"revision":3,"credentials":\[\{"name":"k","sourceType":"inline","revision":3\}\]' "$(body)"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
for i in 1 2 3; do fetch "https://a.test/v1/r$i"; done
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/r1 \
    "h.authorization=Bearer $S2"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    "h.authorization=Bearer $S1"

# --- reads -----------------------------------------------------------------------
tb_expect_eq "GET the vault: 200" 200 "$(tb_api GET /credential-vault)"
tb_expect_match "... revision 3" '^\{"revision":3,' "$(body)"
tb_expect_eq "list credentials: 200" 200 "$(tb_api GET /credential-vault/credentials)"
tb_expect_eq "... revision and list" \
    '{"revision":3,"credentials":[{"name":"k","sourceType":"inline","revision":3}]}' "$(body)"
tb_expect_eq "one credential: 200" 200 "$(tb_api GET /credential-vault/credentials/k)"
tb_expect_eq "... its metadata" '{"name":"k","sourceType":"inline","revision":3}' "$(body)"
tb_expect_eq "list bindings: 200" 200 "$(tb_api GET /credential-vault/bindings)"
tb_expect_eq "one binding: 200" 200 "$(tb_api GET /credential-vault/bindings/a-api)"
tb_expect_match "... its match" '"hosts":\["a.test"\]' "$(body)"
tb_expect_eq "an unknown credential: 404" 404 "$(tb_api GET /credential-vault/credentials/nope)"
tb_expect_eq "... credential not found" "credential not found" "$(body)"
tb_expect_eq "an unknown binding: 404" 404 "$(tb_api GET /credential-vault/bindings/nope)"
tb_expect_eq "... binding not found" "binding not found" "$(body)"
tb_expect_eq "a write on a sub-resource: 405" 405 \
    "$(tb_api POST /credential-vault/credentials '{}')"
tb_expect_eq "_active over TCP: 403" 403 "$(tb_api GET /credential-vault/_active)"
tb_expect_eq "... forbidden" forbidden "$(body)"

# --- policy coupling -------------------------------------------------------------
bad='{"credentials":{"add":[{"name":"x","source":{"value":"'$S1'"}}]},"bindings":{"add":[{"name":"c-api","match":{"hosts":["c.test"]},"auth":{"type":"bearer","credential":"x"}}]}}'
tb_expect_eq "a binding for a host the policy does not allow: 400" 400 \
    "$(tb_api PATCH /credential-vault "$bad")"
tb_expect_match "... names the host" '^credential vault policy validation: .*c\.test' "$(body)"
tb_expect_eq "a /policy change that uncovers a-api: 400" 400 \
    "$(tb_api DELETE /policy '["a.test"]')"
tb_expect_match "... names the host" '^credential vault policy validation: .*a\.test' "$(body)"
tb_expect_eq "... nothing changed: the revision is still 3" 200 "$(tb_api GET /credential-vault)"
tb_expect_match "... revision 3" '^\{"revision":3,' "$(body)"
tb_expect_eq "a /policy change that keeps it covered: 200" 200 \
    "$(tb_api PATCH /policy '[{"action":"allow","target":"c.test"}]')"
tb_expect_eq "... and the vault is still there" 200 "$(tb_api GET /credential-vault/credentials/k)"
# basic and customHeaders on the host the PATCH just allowed
add2='{"credentials":{"add":[{"name":"u","source":{"value":"'$B64'"}},{"name":"h1","source":{"value":"'$H1'"}},{"name":"h2","source":{"value":"'$H2'"}}]},"bindings":{"add":[{"name":"c-basic","match":{"hosts":["c.test"],"paths":["/basic/*"]},"auth":{"type":"basic","credential":"u"}},{"name":"c-custom","match":{"hosts":["c.test"],"paths":["/custom/*"]},"auth":{"type":"customHeaders","headers":[{"name":"X-Key-One","credential":"h1"},{"name":"X-Key-Two","credential":"h2"}]}}]}}'
tb_expect_eq "PATCH add basic and customHeaders bindings: 200" 200 \
    "$(tb_api PATCH /credential-vault "$add2")"
tb_expect_match "... customHeaders has no auth.name" \
    '"name":"c-custom","revision":4,"match":\{[^}]*\},"auth":\{"type":"customHeaders"\}' "$(body)"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Basic ZmFrZTpmYWtl' \
    https://c.test/basic/x
tb_sandbox "${C[@]}" -o /dev/null -H 'X-Key-One: fake' https://c.test/custom/x
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/basic/x \
    "h.authorization=Basic $B64"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/custom/x \
    "h.x-key-one=$H1" "h.x-key-two=$H2"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
fetch https://a.test/v1/after-policy
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/after-policy \
    "h.authorization=Bearer $S2"

# --- delete ----------------------------------------------------------------------
tb_expect_eq "DELETE: 204" 204 "$(tb_api DELETE /credential-vault)"
tb_expect_eq "... GET: 404" 404 "$(tb_api GET /credential-vault)"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
fetch https://a.test/v1/gone
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/gone \
    'h.authorization=Bearer fake-key'
tb_expect_eq "created again: revision 1" 201 \
    "$(tb_api POST /credential-vault '{"credentials":[],"bindings":[]}')"
tb_expect_match "... revision 1" '^\{"revision":1,' "$(body)"

# --- the operator's inline credential survives the API's rewrite and a restart ----
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
fetch https://b.test/op1
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/op1 \
    "h.x-op-key=$S0"
tb_check "the /policy PATCH rewrote the file (c.test in it)" grep -q c.test "$pol"
tb_check "... with the operator's value kept as it was" grep -qF "value: \"$S0\"" "$pol"
tb_expect_eq "... readable by its owner only" 600 "$(stat -c %a "$pol")"
tb_stop_egressd TERM
tb_expect_eq "egressd stopped cleanly" 0 "$TB_EGRESSD_STATUS"
tb_start_egressd "${EARGS[@]}"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
fetch https://b.test/op2
fetch https://a.test/v1/restarted
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/op2 \
    "h.x-op-key=$S0"
tb_expect_eq "the API's vault is gone after a restart" 404 "$(tb_api GET /credential-vault)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/restarted \
    'h.authorization=Bearer fake-key'

# --- no value anywhere egressd writes ----------------------------------------------
for f in "$TB_EGRESSD_LOG" "$TB_DIR/egressd/stderr" "$TB_DIR/egressd/stdout"; do
	tb_check_fails "no value in ${f##*/}" grep -qF -e "$S0" -e "$S1" -e "$S2" -e "$B64" -e "$H1" -e "$H2" "$f"
done
tb_check_fails "no API value in the policy file" grep -qF -e "$S1" -e "$S2" -e "$B64" -e "$H1" -e "$H2" "$pol"
tb_check_fails "no value in the state dir" grep -rqF -e "$S0" -e "$S1" -e "$S2" -e "$B64" -e "$H1" -e "$H2" "$STATE"
tb_expect_eq "/v1/status answers" 200 "$(tb_api GET /v1/status)"
# the file's binding, and the bed's canaries (docs/testing.md)
tb_expect_match "... with the vault's revision" \
    '"credentialVault":\{"revision":0,"bindings":'$((1 + TB_CANARY_BINDINGS))',"apiBindings":0\}' "$(body)"
tb_check_fails "... without a value" grep -qF -e "$S0" -e "$S1" -e "$S2" -e "$B64" -e "$H1" -e "$H2" "$TB_API_BODY"
tb_expect_eq "/metrics answers" 200 "$(tb_api GET /metrics)"
tb_check_fails "... without a value" grep -qF -e "$S0" -e "$S1" -e "$S2" -e "$B64" -e "$H1" -e "$H2" "$TB_API_BODY"
tb_assert_log "$TB_EGRESSD_LOG" vault.updated op=patch revision=3
tb_finish
