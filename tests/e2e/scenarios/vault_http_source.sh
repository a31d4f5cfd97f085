#!/bin/bash
# vault_http_source: credential source type http (issue 38 item 4). A
# fake store (HTTPS, the run's CA) serves a credential in OpenSandbox's
# shape {"value", "ttl"} behind its own token (a file credential sent in
# a header); egressd fetches it at start and every TTL (2 s) in the
# background and injects it as Bearer; the sandbox sends a fake header.
# A value rotated at the store reaches the origin within the TTL and the
# old one is still masked; the store down (503, then a redirect, never
# followed): the last good value serves until TTL + maxStale (4 s), then
# 502 with the reason; back up, served again. A source whose first fetch
# fails answers 502 "not fetched", never unauthenticated; a store whose
# name resolves to loopback is refused unless allowPrivate. No value and
# not the store's token reach the sandbox or the log.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator reads /metrics

STORE=203.0.113.22
API=203.0.113.23
D=$TB_DIR/net/credstore
mkdir -p "$D"
ip -n "$TB_NET" addr add "$STORE/32" dev lo
ip -n "$TB_NET" addr add "$API/32" dev lo
tb_vault_files unused
STOK=st-$(tb_random_key)
printf '%s\n' "$STOK" >"$TB_DIR/egressd/store-token"
chmod 600 "$TB_DIR/egressd/store-token"
V1=v1-$(tb_random_key)
V2=v2-$(tb_random_key)
printf '%s\n' "$V1" >"$D/values"
cert=$(tb_pki_leaf credstore "DNS:store.test,DNS:kapi.test")
ip netns exec "$TB_NET" "$TB_PY" "$TB_SERVERS_DIR/credstore.py" \
    --store "$STORE" --api "$API" --cert "$cert" --key "${cert%.crt}.key" \
    --token-file "$TB_DIR/egressd/store-token" --ttl 2 --dir "$D" \
    --ready "$D/ready" >"$D/err" 2>&1 &
TB_PIDS+=("$!")
tb_wait_file "$D/ready" "$TB_SETUP_WAIT" ||
    tb_die "credential store not ready: $(tail -n 5 "$D/err")"

pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
infra: [127.0.0.1/32] # the resolver may answer rebind-lo.test's 127.0.0.1
egress:
  - {action: allow, target: kapi.test}
  - {action: allow, target: store.test}
  - {action: allow, target: rebind-lo.test}
credentials:
  - {name: stok, source: {type: file, path: $TB_DIR/egressd/store-token}}
  - name: k
    source:
      type: http
      url: https://store.test/v1/key
      headers: {X-Store-Token: {credential: stok}}
      ttl: 10
      maxStale: 4
  - name: kraw
    source:
      type: http
      url: https://store.test/v1/raw
      format: raw
      headers: {X-Store-Token: {credential: stok}}
  - name: kmissing
    source:
      type: http
      url: https://store.test/v1/missing
      headers: {X-Store-Token: {credential: stok}}
  - name: kpriv # a store whose name resolves to loopback
    source: {type: http, url: "https://rebind-lo.test/v1/key"}
  - name: kpriv-ok
    source:
      type: http
      url: https://rebind-lo.test/v1/key
      allowPrivate: true
bindings:
  - name: b
    match: {hosts: [kapi.test], paths: ["/k/*"], methods: [GET]}
    auth: {type: bearer, credential: k}
  - name: braw
    match: {hosts: [kapi.test], paths: ["/raw/*"], methods: [GET]}
    auth: {type: bearer, credential: kraw}
  - name: bmissing
    match: {hosts: [kapi.test], paths: ["/missing/*"], methods: [GET]}
    auth: {type: bearer, credential: kmissing}
EOF2
)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$TB_DIR/state" --http-addr ":18080"
CA=$TB_DIR/state/ca-bundle.crt
SEEN=$TB_DIR/root/seen # everything the sandbox received
C=(curl -sS --max-time 15 --cacert "$CA" -H 'Authorization: Bearer fake')
get() { tb_sandbox "${C[@]}" -D - -w '\n%{http_code}\n' "$1" | tee -a "$SEEN"; }
last_value() { tail -n 1 "$D/api.log" | "$TB_PY" -c \
    'import json, sys; print(json.loads(sys.stdin.read())["value"])'; }

# --- fetched at start, injected ----------------------------------------------
tb_wait_log_line "$TB_EGRESSD_LOG" vault.http_fetched credential_name=k \
    outcome=fetched >/dev/null || tb_fail "no first fetch of k"
out=$(get https://kapi.test/k/hello)
tb_expect_match "the store's value is injected: the API accepts it" \
    '^200$' "$(tail -1 <<<"$out")"
tb_expect_eq "... it is the store's first value" 1 "$(last_value)"
tb_expect_match "... the echoed Authorization is masked" '"seen": "\*+"' "$out"
out=$(get https://kapi.test/raw/hello)
tb_expect_match "format raw (the whole body): injected too" \
    '^200$' "$(tail -1 <<<"$out")"
tb_check "... the store saw its token on every request (no 401)" \
    test "$(grep -c '"status": 401' "$D/store.log")" -eq 0

# --- private targets: refused unless the operator allows them ---------------
tb_assert_log "$TB_EGRESSD_LOG" vault.http_failed credential_name=kpriv \
    'reason=private or loopback address refused'
tb_assert_log "$TB_EGRESSD_LOG" vault.http_failed credential_name=kpriv-ok \
    'reason=connect or TLS handshake failed' # nothing listens: it tried

# --- a source whose first fetch fails: 502, never unauthenticated -------------
n_api=$(wc -l <"$D/api.log")
out=$(get https://kapi.test/missing/x)
tb_expect_match "a source not fetched yet (the store answers 404): 502" \
    '^502$' "$(tail -1 <<<"$out")"
tb_expect_match "... saying why" \
    '^egressd: vault_token: credential not fetched from its http source yet' \
    "$out"
tb_expect_eq "... the API never saw it" "$n_api" "$(wc -l <"$D/api.log")"
tb_assert_log "$TB_EGRESSD_LOG" vault.http_failed credential_name=kmissing \
    'reason=store answered 404' held=false

# --- rotated at the store: the origin sees the new value within the TTL ------
printf '%s\n' "$V2" >>"$D/values"
t0=$(date +%s.%N)
seen=0
while [ "$seen" != 2 ] &&
    "$TB_PY" -c "import sys, time; sys.exit(time.time() - $t0 > 3.5)"; do
	get https://kapi.test/k/rot >/dev/null
	seen=$(last_value)
	[ "$seen" = 2 ] || sleep 0.3
done
tb_expect_eq "a rotated value reaches the origin within the TTL (2 s)" 2 "$seen"
tb_assert_log "$TB_EGRESSD_LOG" vault.http_fetched credential_name=k \
    outcome=refreshed changed=true ttl_s=2
out=$(get https://kapi.test/k/leak)
tb_expect_match "an API echoing the old and the new value: 200" \
    '^200$' "$(tail -1 <<<"$out")"
tb_expect_match "... both masked (the old one retired, still redacted)" \
    '"values": \["\*{43}", "\*{43}"\]' "$out"

# --- the store down: the last good value until TTL + maxStale, then 502 -----
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
echo 503 >"$D/mode"
down=$(date +%s.%N)
sleep 1
out=$(get https://kapi.test/k/stale-ok)
tb_expect_match "store down 1 s: the last good value still serves" \
    '^200$' "$(tail -1 <<<"$out")"
tb_wait_log_line --since "$mark" "$TB_EGRESSD_LOG" vault.http_failed \
    credential_name=k 'reason=store answered 503' held=true in_use=true \
    >/dev/null || tb_fail "no vault.http_failed for the store's 503"
tb_pass "... the failure logged: held, in use"
echo redirect >"$D/mode"
tb_wait_log_line --since "$mark" "$TB_EGRESSD_LOG" vault.http_failed \
    credential_name=k 'reason=store answered 302' >/dev/null ||
    tb_fail "a redirect is not a failure"
tb_pass "a redirect from the store is a failure, never followed"
# the value is used until its fetch + 2 s + 4 s: at most down + 6 s
"$TB_PY" -c "import time; time.sleep(max(0, $down + 6.3 - time.time()))"
n_api=$(wc -l <"$D/api.log")
out=$(get https://kapi.test/k/stale-no)
tb_expect_match "store down past TTL + maxStale: 502" '^502$' \
    "$(tail -1 <<<"$out")"
tb_expect_match "... saying why" \
    '^egressd: vault_token: credential from its http source past maxStale' \
    "$out"
tb_expect_eq "... nothing sent to the API" "$n_api" "$(wc -l <"$D/api.log")"
tb_check "... no request followed a redirect (only /v1/ paths asked)" \
    test "$(grep -vc '"/v1/' "$D/store.log")" -eq 0

# --- back up: served again within the TTL ------------------------------------
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
echo ok >"$D/mode"
tb_wait_log_line --since "$mark" --timeout 4 "$TB_EGRESSD_LOG" \
    vault.http_fetched credential_name=k >/dev/null ||
    tb_fail "no fetch after the store came back"
out=$(get https://kapi.test/k/back)
tb_expect_match "the store back: served again" '^200$' "$(tail -1 <<<"$out")"

# --- nothing secret reached the sandbox or the log ----------------------------
printf '%s\n' "$V1" >"$D/v1"
printf '%s\n' "$V2" >"$D/v2"
tb_expect_no_secret "the first value is in nothing the sandbox received" \
    "$D/v1" "$SEEN"
tb_expect_no_secret "... nor the second" "$D/v2" "$SEEN"
tb_expect_no_secret "... nor the store's token" \
    "$TB_DIR/egressd/store-token" "$SEEN"
tb_expect_no_secret "no value, nor the store's token, in egressd's log" \
    "$D/v1" "$TB_EGRESSD_LOG"
tb_expect_no_secret "... (the second value)" "$D/v2" "$TB_EGRESSD_LOG"
tb_expect_no_secret "... (the store's token)" "$TB_DIR/egressd/store-token" \
    "$TB_EGRESSD_LOG"
m=$(tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics")
tb_expect_match "metrics: fetches by credential, ok" \
    'egressd_vault_source_fetches_total\{credential="k",outcome="ok"\} [1-9]' "$m"
tb_expect_match "... and failed" \
    'egressd_vault_source_fetches_total\{credential="k",outcome="failed"\} [1-9]' \
    "$m"
tb_finish
