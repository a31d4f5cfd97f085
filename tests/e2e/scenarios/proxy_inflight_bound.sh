#!/bin/bash
# proxy_inflight_bound: in-flight judging beside the vault and request
# rules (issue 36), with egressd's default --passthrough-judge (auto: the
# queue on this kernel) and the canary bindings of every bed. Only names
# the proxy must see keep the redirect: the resolver puts their learned
# addresses in the hold sets (nft_queue_held); every other learned
# address's TLS is judged in flight.
#  a. a.test (no binding, no rule): judged in flight, the proxy sees no
#     connection, the origin sees the client's own hello;
#  b. b.test (a binding): terminated, the real secret injected, never an
#     nfq.judged line; its address is in hold4, a.test's is not;
#  c. c.test (request rules: GET only): terminated, a GET passes and a
#     POST gets 403 egress_denied, nothing of it upstream;
#  d. a binding for a.test added at runtime (POST /credential-vault),
#     a.test not asked again: its next connection is terminated and
#     injected (the commit put its learned address in the hold set), and
#     a stream judged in flight before it is cut (it could not be read);
#  e. the binding removed again: the address stays held (the proxy path
#     is the safe one) and requests still pass, now without injection.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

SECRET=real-inflight-bound-$RANDOM$RANDOM
tb_vault_files "$SECRET"
TB_EGRESSD_TOKEN="ifb-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test, methods: [GET]}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: b-api
    match: {hosts: [b.test], paths: ["/v1/*"], methods: [GET]}
    auth: {type: bearer, credential: k}
EOF2
)
STATE=$TB_DIR/state
SOCK=$TB_DIR/egressd/api.sock
tb_start_egressd --policy "$pol" --proxy --passthrough-judge auto --state-dir "$STATE" \
    --trust-dir "$TB_DIR/trust" --api-socket "$SOCK"
tb_assert_log "$TB_EGRESSD_LOG" passthrough.judge path=queue
# both CAs: egressd's (terminated hosts) and the origins' (in flight)
BOTH=$TB_DIR/sbx-bin/both.pem
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$BOTH" && chmod 644 "$BOTH" ||
    tb_die "CA bundle"
C=(curl -4 -sS --max-time 8 --cacert "$BOTH")
A4=$TB_ORIGIN_A4 B4=$TB_ORIGIN_B4 C4=$TB_ORIGIN_C4

# api METHOD PATH BODY: the operator, on egressd's Unix socket
api()
{
	curl -sS --max-time 5 -o "$TB_DIR/api.out" -w '%{http_code}' \
	    --unix-socket "$SOCK" -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
	    -H 'Content-Type: application/json' -X "$1" --data-binary "$3" \
	    "http://egressd$2" 2>/dev/null
}

for n in a.test b.test c.test; do
	tb_sandbox dig +short +time=2 +tries=1 "$n" A >/dev/null
done

# hold4: the addresses in the hold set (one per line)
hold4()
{
	tb_sandbox_root nft -j list set inet egressd hold4 |
	    "$TB_PY" -c 'import json, sys
for o in json.load(sys.stdin)["nftables"]:
    for e in o.get("set", {}).get("elem", []) or []:
        print(e["elem"]["val"] if isinstance(e, dict) else e)'
}

# --- in flight: from the queue, or in the kernel (docs/proxy.md) --------------
# kpassed: the hellos the in-kernel judge passed (/v1/status; 0 without it)
kpassed()
{
	curl -sS --max-time 5 -o "$TB_DIR/status.out" --unix-socket "$SOCK" \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
	    http://egressd/v1/status 2>/dev/null
	"$TB_PY" -c 'import json,sys
p=json.load(open(sys.argv[1])).get("passthrough", {})
print(p.get("kernelJudge", {}).get("passed", 0))' "$TB_DIR/status.out"
}
# in_flight SINCE P0: a.test passed in flight since the log mark SINCE:
# from the queue (nfq.judged), or in the kernel (its count moved past P0)
in_flight()
{
	tb_wait_log_line --timeout 0.3 --since "$1" "$TB_EGRESSD_LOG" \
	    nfq.judged decision=passthrough name=a.test >/dev/null ||
	    [ "$(kpassed)" -gt "$2" ]
}
# --- a. no binding: judged in flight --------------------------------------------
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
k0=$(kpassed)
tb_check "a: https://a.test/ with the origin's own certificate" \
    tb_sandbox "${C[@]}" -o /dev/null --cacert "$TB_CA_CERT" \
    https://a.test/a-1
tb_check "a: judged in flight (the queue's nfq.judged, or the kernel's count)" \
    tb_wait_cmd 5 in_flight "$me" "$k0"
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" proxy.closed
tb_assert_log --since "$mo" "$TB_ORIGIN_LOG" origin.request path=/a-1

# --- b. a binding: terminated and injected ----------------------------------------
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "${C[@]}" -H 'Authorization: Bearer fake-key' \
    https://b.test/v1/b-1)
tb_assert_log --since "$mo" "$TB_ORIGIN_LOG" origin.request path=/v1/b-1 \
    "h.authorization=Bearer $SECRET"
tb_check_fails "b: the secret is nowhere in the response" \
    grep -qF "$SECRET" <<<"$out"
tb_assert_log --since "$me" "$TB_EGRESSD_LOG" vault.inject \
    decision=injected binding=b-api host=b.test
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" nfq.judged name=b.test
held=$(hold4)
tb_expect_match "b: b.test's address is in hold4" "^$B4\$" "$held"
tb_check_fails "b: a.test's is not" grep -qx "$A4" <<<"$held"

# --- c. request rules: terminated, judged per request ------------------------------
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "c: GET https://c.test/ passes" 200 \
    "$(tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}' https://c.test/c-1)"
tb_expect_eq "c: POST is refused: 403" 403 \
    "$(tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}' -d x \
        https://c.test/c-2)"
tb_assert_log --since "$mo" "$TB_ORIGIN_LOG" origin.request path=/c-1
tb_assert_no_log --since "$mo" "$TB_ORIGIN_LOG" origin.request path=/c-2
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" nfq.judged name=c.test
tb_expect_match "c: c.test's address is in hold4" "^$C4\$" "$(hold4)"

# --- d. a binding added at runtime for a learned name ----------------------------
# a server-sent stream judged in flight before the change
me=$(tb_log_mark "$TB_EGRESSD_LOG")
k0=$(kpassed)
sse=$TB_DIR/sse.out
tb_sandbox_bg "$sse" "${C[@]}" --cacert "$TB_CA_CERT" -N --max-time 20 \
    -o /dev/null -w '%{size_download} %{exitcode}\n' \
    "https://a.test/d-sse?sse=200&gap_ms=50"
ssepid=$TB_LAST_PID
tb_check "d: the stream to a.test is judged in flight (queue or kernel)" \
    tb_wait_cmd 5 in_flight "$me" "$k0"
S2=real-inflight-api-$RANDOM$RANDOM
add='{"credentials":[{"name":"ka","source":{"type":"inline","value":"'$S2'"}}],"bindings":[{"name":"a-api","match":{"hosts":["a.test"],"paths":["/v1/*"],"methods":["GET"]},"auth":{"type":"bearer","credential":"ka"}}]}'
tb_expect_eq "d: POST /credential-vault binds a.test: 201" 201 \
    "$(api POST /credential-vault "$add")"
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "${C[@]}" -H 'Authorization: Bearer fake-key' \
    https://a.test/v1/d-1)
tb_assert_log --since "$mo" "$TB_ORIGIN_LOG" origin.request path=/v1/d-1 \
    "h.authorization=Bearer $S2"
tb_check_fails "d: the secret is nowhere in the response" \
    grep -qF "$S2" <<<"$out"
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" nfq.judged name=a.test
tb_expect_match "d: a.test's address is in hold4 now" "^$A4\$" "$(hold4)"
wait "$ssepid"
tb_expect_match "d: the stream judged in flight was cut" \
    '^[0-9]+ (5[26]|18|35|56)$' "$(cat "$sse")"

# --- e. the binding removed: held still, no injection -----------------------------
tb_expect_eq "e: PATCH /credential-vault deletes the binding: 200" 200 \
    "$(api PATCH /credential-vault '{"bindings":{"delete":["a-api"]}}')"
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_check "e: a.test still answers (through the proxy)" \
    tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Bearer fake-key' \
    https://a.test/v1/e-1
tb_assert_log --since "$mo" "$TB_ORIGIN_LOG" origin.request path=/v1/e-1 \
    'h.authorization=Bearer fake-key'
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" nfq.judged name=a.test

tb_finish
