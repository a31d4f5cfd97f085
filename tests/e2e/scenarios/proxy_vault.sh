#!/bin/bash
# proxy_vault: the Credential Vault on terminated and plain connections.
# The sandbox sends a fake key; the origin gets the real one (the fake
# removed) only when exactly one binding matches scheme, host, port,
# method and path; whatever the origin echoes back (headers, JSON body,
# chunked and its trailers, SSE) reaches the client with the secret
# masked; TRACE and encoded slashes to a bound host are refused before
# the origin sees anything; a response egressd cannot redact (an upgrade)
# or will not decode (compressed, --vault-compressed refuse) is a 502;
# the secret never reaches egressd's log.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator: the control API is closed to the sandbox

SECRET=real-secret-value-1
tb_vault_files "$SECRET"
# vault_policy [PLAIN]: the policy, with the plain-HTTP binding of b.test
# when PLAIN is 1
vault_policy() {
	cat <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [GET, POST]}
    auth: {type: bearer, credential: k}
EOF2
	[ "${1:-0}" = 1 ] && cat <<EOF2
  - name: b-plain
    match: {schemes: [http], hosts: [b.test], paths: ["/v1/*"]}
    auth: {type: apiKey, name: X-Api-Key, credential: k}
EOF2
	return 0
}
pol=$(vault_policy 1 | tb_policy_file policy.yaml)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --http-addr ":18080"
CA=$STATE/ca-bundle.crt
C=(curl -sS --max-time 8 --cacert "$CA")

# --- injection over TLS -------------------------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "${C[@]}" -D - -H 'Authorization: Bearer fake-key' \
    -H 'Accept-Encoding: gzip' 'https://a.test/v1/me?echo=Authorization')
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/me \
    "h.authorization=Bearer $SECRET" 'h.accept-encoding=identity'
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/me \
    'h.authorization=Bearer fake-key'
tb_expect_match "echoed header redacted" \
    '^X-Echo-Authorization: \[REDACTED\]' "$(tr -d '\r' <<<"$out")"
tb_expect_match "the JSON echo masks it in the body" \
    '"authorization": *"\*{26}"' "$out"
tb_check_fails "the secret is nowhere in the response" \
    grep -qF "$SECRET" <<<"$out"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected \
    binding=a-api host=a.test method=GET path=/v1/me

# the rest of the head is the origin's text too: the reason phrase is
# redacted, a header named after the secret dropped
out=$(tb_sandbox "${C[@]}" -D - -o /dev/null \
    'https://a.test/v1/r?reason=Authorization&hname=Authorization')
tb_expect_match "an echo in the reason phrase is redacted" \
    '^HTTP/1.[01] 200 \[REDACTED\]$' "$(tr -d '\r' <<<"$out" | head -1)"
tb_check_fails "... and one in a header's name dropped: no secret" \
    grep -qF "$SECRET" <<<"$out"
tb_expect_match "... the rest of the head arrives" '^Content-Type: ' \
    "$(tr -d '\r' <<<"$out")"

out=$(tb_sandbox "${C[@]}" -H 'Authorization: Bearer fake-key' \
    'https://a.test/v1/c?echo=Authorization&chunked=1')
tb_expect_match "chunked echo: redacted and re-chunked intact" \
    '"authorization": *"\*{26}"' "$out"
tb_check_fails "... no secret" grep -qF "$SECRET" <<<"$out"

# trailers: kept, and re-sent after the last chunk with every value
# redacted like a header's; fields a trailer may not carry are dropped
out=$(tb_sandbox "${C[@]}" --raw -D - -H 'Authorization: Bearer fake-key' \
    'https://a.test/v1/t?echo=Authorization&trailer=1')
tb_expect_match "chunked with trailers: the body arrives" '"authorization"' "$out"
tb_check_fails "... and neither body nor trailers carry the secret" \
    grep -qF "$SECRET" <<<"$out"
# curl --raw leaves the chunked framing alone: what follows the last chunk
# ("0") is the trailer section as egressd sent it
tail=$(tr -d '\r' <<<"$out" |
    awk '/^0$/ {t = ""; on = 1; next} on {t = t $0 "\n"} END {printf "%s", t}')
tb_expect_eq "curl: the echoed trailer arrives after the last chunk, redacted" \
    "X-Echo-Authorization: [REDACTED]" "$(sed '/^$/d' <<<"$tail")"
tb_sbx_tool http_client.py
HC=$TB_DIR/sbx-bin/http_client.py
tr=$(tb_sandbox "$TB_PY" "$HC" trailers \
    'https://a.test/v1/t2?echo=Authorization&trailer=1&trailer_extra=1&split=7' \
    "$CA" 'Authorization: Bearer fake-key')
tb_expect_match "python, chunked decoded by hand: the trailer section ends cleanly" \
    '^END$' "$tr"
tb_expect_match "... the echoed trailer redacted" \
    '^T X-Echo-Authorization: \[REDACTED\]$' "$tr"
tb_expect_match "... a field a trailer may carry passes" \
    '^T Server-Timing: app;dur=1$' "$tr"
tb_check_fails "... framing and cookie fields sent as trailers are dropped" \
    grep -qiE '^T (Content-Length|Set-Cookie|Transfer-Encoding):' <<<"$tr"
tb_check_fails "... no secret" grep -qF "$SECRET" <<<"$tr"
# a request no binding matches, on a fresh origin connection no credential
# went over, is redacted all the same: every response of a bound origin is
# (it may give back what it stored earlier). Its trailers go through the
# same filter. (Wait until the pool has closed the connections above.)
for _ in $(seq 80); do
	tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics" |
	    grep -qx 'egressd_proxy_upstream_idle 0' && break
	sleep 0.1
done
tr=$(tb_sandbox "$TB_PY" "$HC" trailers \
    'https://a.test/other?echo=Authorization&trailer=1&trailer_extra=1' \
    "$CA" 'Authorization: Bearer fake-key')
tb_expect_eq "not injected, clean connection: trailers filtered all the same" \
    "T X-Echo-Authorization: Bearer fake-key
T Server-Timing: app;dur=1
END" "$(grep -E '^(T|END)' <<<"$tr")"
# --vault-compressed refuse (the default): a compressed echo of the secret
# is answered 502, its bytes never forwarded (e2e proxy_vault_decode: decode)
out=$(tb_sandbox "${C[@]}" -w '\n%{http_code}' -H 'Authorization: Bearer fake-key' \
    'https://a.test/v1/z?echo=Authorization&enc=gzip')
tb_expect_match "a compressed response to an injected request is refused: 502" \
    '502$' "$out"
tb_expect_match "... saying why" '^egressd: vault_compressed: ' "$out"
tb_check_fails "... unscanned bytes never reach the client" grep -qF "$SECRET" <<<"$out"
tb_check_fails "... nor compressed ones (a gzip member's magic)" \
    grep -qF $'\x1f\x8b' <<<"$out"
tb_assert_log "$TB_EGRESSD_LOG" vault.compressed outcome=refused \
    encoding=gzip mode=refuse reason=mode_refuse name=a.test

# a pipelined second request on the same connection to a path the binding
# does not cover carries the client's own header, not the secret
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -o /dev/null -H 'Authorization: Bearer fake-key' \
    https://a.test/v1/first https://a.test/second
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/first \
    "h.authorization=Bearer $SECRET"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/second \
    'h.authorization=Bearer fake-key'
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=no_match host=a.test path=/second

# the response's Content-Length stays true (length-preserving masking);
# keep-alive goes on after a redacted response
n=$(tb_sandbox "${C[@]}" -o /dev/null -o /dev/null -w '%{num_connects} %{http_code}\n' \
    'https://a.test/v1/k1' 'https://a.test/v1/k2' | tr '\n' ' ')
tb_expect_eq "two injected requests on one connection" "1 200 0 200 " "$n"

# --- what does not match is forwarded untouched -------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Bearer fake-key' \
    https://a.test/other
tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Bearer fake-key' \
    -X PUT https://a.test/v1/put
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/other \
    'h.authorization=Bearer fake-key'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/put \
    'h.authorization=Bearer fake-key'

# --- refusals before the origin -----------------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
code=$(tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}' -X TRACE \
    https://a.test/v1/trace)
tb_expect_eq "TRACE to a bound host: 403" 403 "$code"
code=$(tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}' --path-as-is \
    'https://a.test/v1/a%2f..%2fadmin')
tb_expect_eq "an encoded slash in the path: 400" 400 "$code"
code=$(tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}' --path-as-is \
    'https://a.test/v1/../admin')
tb_expect_eq "dot segments are resolved before matching: /admin is not /v1/*" \
    200 "$code"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/trace
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'h.authorization=Bearer real-secret-value-1'
tb_assert_log "$TB_EGRESSD_LOG" proxy.closed decision=refused reason=vault_refused

# --- streams and upgrades -----------------------------------------------------
sse=$(tb_sandbox "$TB_PY" "$HC" sse 'https://a.test/v1/ev?sse=3&gap_ms=700' "$CA")
tb_expect_match "SSE on an injected request: three events" '^0 .*
1 .*
2 ' "$sse"
tb_check "... each as it is produced (the redactor does not hold an event back)" \
    "$TB_PY" -c 'import sys; t=[float(l.split()[1]) for l in sys.argv[1].splitlines()]; sys.exit(0 if t[2]-t[0] > 1.0 else 1)' "$sse"
ws=$(tb_sandbox "$TB_PY" "$HC" ws 'https://a.test/v1/sock?ws=1' "$CA" hello)
tb_expect_match "a WebSocket on an injected request cannot be redacted: 502" \
    '^HTTP/1.1 502' "$ws"
tb_assert_log "$TB_EGRESSD_LOG" vault.unsafe_response name=a.test

# --- plain HTTP: the http scheme binding --------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox curl -sS --max-time 8 -4 -D - -H 'X-Api-Key: fake' \
    'http://b.test/v1/p?echo=X-Api-Key')
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/p \
    "h.x-api-key=$SECRET"
tb_expect_match "plain HTTP echo redacted" \
    '^X-Echo-X-Api-Key: \[REDACTED\]' "$(tr -d '\r' <<<"$out")"
tb_check_fails "... no secret" grep -qF "$SECRET" <<<"$out"
# keep-alive: a path no binding covers next on the connection, its
# origin echoing the key it saw on the request before (proxy_pool: the
# same on terminated and pooled connections)
out=$(tb_sandbox curl -sS --max-time 8 -4 -D - -H 'X-Api-Key: fake' \
    http://b.test/v1/p2 'http://b.test/free?echo_prev=X-Api-Key')
tb_expect_match "plain HTTP: an echo on the next, unbound request redacted too" \
    '^X-Echo-Prev-X-Api-Key: \[REDACTED\]' "$(tr -d '\r' <<<"$out")"
tb_check_fails "... no secret" grep -qF "$SECRET" <<<"$out"

# the operator's view, from outside (the API is closed to the sandbox)
st=$(tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/v1/status")
tb_expect_match "status: the vault is enforced" '"credential-vault"' "$st"
tb_check_fails "status never shows the secret" grep -qF "$SECRET" <<<"$st"
met=$(tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics")
tb_expect_match "metrics count injections" \
    'egressd_vault_decisions_total\{decision="injected"\} [1-9]' "$met"
tb_expect_match "... and refusals" \
    'egressd_vault_decisions_total\{decision="refused"\} [1-9]' "$met"
tb_expect_match "... by binding" \
    'egressd_vault_binding_decisions_total\{binding="a-api",decision="injected"\} [1-9]' "$met"
tb_expect_match "... and the compressed response refused" \
    'egressd_vault_compressed_responses_total\{outcome="refused"\} 1' "$met"
tb_check_fails "metrics never show the secret" grep -qF "$SECRET" <<<"$met"

# --- a reload that drops a binding: the next request is not injected ----------
vault_policy 0 >"$pol"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
kill -HUP "$TB_EGRESSD_PID"
tb_check "SIGHUP reloads" tb_wait_log_line --since "$m" --timeout 3 \
    "$TB_EGRESSD_LOG" policy.loaded trigger=sighup
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox curl -sS --max-time 8 -4 -o /dev/null -H 'X-Api-Key: fake' \
    'http://b.test/v1/after'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/after \
    'h.x-api-key=fake'
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null https://a.test/v1/still
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/still \
    "h.authorization=Bearer $SECRET"

tb_check_fails "the secret never reaches egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
