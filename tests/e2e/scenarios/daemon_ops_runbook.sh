#!/bin/bash
# daemon_ops_runbook: docs/operations.md's incident runbook and upgrade, done as
# an operator would against a running egressd with the proxy and a vault
# binding. (1) The sandbox has a raw TCP connection up, a terminated
# keep-alive HTTPS connection whose first request got the real key, and a
# pass-through keep-alive one. (2) "Stop all egress now": a deny-all while
# a binding covers a host is refused (400), so the runbook revokes the API
# vault first (DELETE /credential-vault), then POST /policy with an empty
# body: the raw connection is cut, the proxy closes the terminated and the
# pass-through connections (proxy_rejudge), new lookups are NXDOMAIN, new
# connections fail; killing egressd leaves the table in force; the restarted
# egressd keeps the deny-all (persisted) and has no vault. (3) Egress
# restored: the next request is not injected; the vault written again
# injects, a PATCH revokes one credential, the next request is not
# injected. An upgrade (SIGTERM, start): in the gap HTTPS to a learned
# address is refused and DNS unanswered; the new egressd serves it at
# once. (4) The documented jq one-liners (checked to be in the doc
# verbatim) find the injections, the revocations, the policy commits,
# the API calls, the cut, the denials and the refused proxy connection.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup
DOC=$(cd "$(dirname "$0")/../../.." && pwd)/docs/operations.md

TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
EOF
)
STATE=$TB_DIR/state
SOCK=$TB_DIR/egressd/api.sock
SBX_ID=ops-$TB_ID
# the runbook reads the proxy's lines for the pass-through connection
# too (proxy.closed, proxy.rejudged): the proxy path, said here; the
# cut of a flow judged in flight is proxy_inflight_judge's
EARGS=(--policy "$pol" --proxy --trust-dir "$TB_DIR/trust"
    --state-dir "$STATE" --api-socket "$SOCK" --api-token-file "$TB_DIR/token"
    --sandbox-id "$SBX_ID" --passthrough-judge proxy)
tb_start_egressd "${EARGS[@]}"
LOG=$TB_EGRESSD_LOG
# tb_api METHOD PATH [BODY] over the Unix socket: the operator's local
# path (vault writes need TLS or a local peer).
tb_api() {
	local m=$1 p=$2 args=()
	args+=(-H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN")
	[ $# -ge 3 ] && args+=(-H "Content-Type: application/json" \
	    --data-binary "$3")
	tb_sandbox_root curl -sS --max-time 5 --unix-socket "$SOCK" \
	    -o "$TB_API_BODY" -w '%{http_code}' -X "$m" "${args[@]}" \
	    "http://egressd$p" 2>/dev/null
	return 0
}
body() { cat "$TB_API_BODY"; }
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/trust-all.pem"
chmod 644 "$TB_DIR/trust-all.pem"
C=(curl -sS --max-time 5 --cacert "$TB_DIR/trust-all.pem")
S1=real-runbook-secret-$RANDOM$RANDOM
dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
rcode() { tb_sandbox dig +time=2 +tries=1 "$1" A | sed -n 's/.*status: \([A-Z]*\).*/\1/p'; }

# ka.py HOST CA PATH GO...: one keep-alive HTTPS connection; request 0 at
# once, request i when file GO_i exists. Prints "rI STATUS|ERROR same|new".
cat >"$TB_DIR/ka.py" <<'EOF'
import http.client, os, ssl, sys, time
host, ca, path, gos = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
c = http.client.HTTPSConnection(host, 443, timeout=5,
    context=ssl.create_default_context(cafile=ca))
used = None
def req(i):
    global used
    try:
        c.request("GET", "%s%d" % (path, i),
                  headers={"Authorization": "Bearer fake-key"})
        used = c.sock
        r = c.getresponse(); r.read()
        return str(r.status)
    except Exception as e:
        used = c.sock if c.sock is not None else used
        return type(e).__name__
print("r0", req(0), flush=True)
sock = used
for i, g in enumerate(gos, 1):
    end = time.monotonic() + 30
    while not os.path.exists(g):
        if time.monotonic() > end:
            print("r%d timeout" % i, flush=True); sys.exit(1)
        time.sleep(0.02)
    used = None
    st = req(i)
    print("r%d %s %s" % (i, st, "same" if used is sock else "new"), flush=True)
EOF
chmod 644 "$TB_DIR/ka.py"
GO=$TB_DIR/go
mkdir -p "$GO" && chmod 755 "$GO"

# --- (1) the sandbox at work ---------------------------------------------------------
add='{"credentials":[{"name":"k","source":{"type":"inline","value":"'$S1'"}}],"bindings":[{"name":"a-api","match":{"hosts":["a.test"],"paths":["/v1/*"]},"auth":{"type":"bearer","credential":"k"}}]}'
tb_expect_eq "the server creates the vault: 201" 201 "$(tb_api POST /credential-vault "$add")"
tb_expect_eq "a.test resolves" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
hold=$TB_DIR/hold.out
tb_sandbox_bg "$hold" "$TB_PY" "$ND_TOOLS/tcp_hold.py" "$TB_ORIGIN_A4" 15
hold_pid=$TB_LAST_PID
term=$TB_DIR/term.out
tb_sandbox_bg "$term" "$TB_PY" "$TB_DIR/ka.py" a.test "$TB_DIR/trust-all.pem" \
    /v1/ka "$GO/stop"
term_pid=$TB_LAST_PID
pass=$TB_DIR/pass.out
tb_sandbox_bg "$pass" "$TB_PY" "$TB_DIR/ka.py" b.test "$TB_DIR/trust-all.pem" \
    /pt "$GO/stop" "$GO/killed"
pass_pid=$TB_LAST_PID
tb_check "a raw TCP connection to a.test:7 is up" tb_wait_line "$hold" '^up ' 5
tb_check "a terminated keep-alive connection: first request 200" \
    tb_wait_line "$term" '^r0 200$' 8
tb_check "a pass-through keep-alive connection: first request 200" \
    tb_wait_line "$pass" '^r0 200$' 8
tb_assert_log "$TB_ORIGIN_LOG" origin.request path=/v1/ka0 \
    "h.authorization=Bearer $S1"
tb_assert_log "$LOG" vault.inject decision=injected binding=a-api \
    vault_revision=1 path=/v1/ka0

# --- (2) stop all egress now ------------------------------------------------------
m=$(tb_log_mark "$LOG")
tb_expect_eq "a deny-all while a binding covers a.test: 400" 400 \
    "$(tb_api POST /policy '')"
tb_expect_match "... credential vault policy validation" \
    '^credential vault policy validation: .*a\.test' "$(body)"
# the runbook: revoke the API vault, then deny all
tb_expect_eq "runbook 1: DELETE /credential-vault: 204" 204 \
    "$(tb_api DELETE /credential-vault)"
# a commit that denies nothing open closes nothing (the rejudge ran)
tb_assert_no_log --since "$m" "$LOG" proxy.closed
tb_expect_eq "runbook 2: POST /policy with an empty body: 200" 200 \
    "$(tb_api POST /policy '')"
tb_expect_eq "... deny_all" \
    '{"status":"ok","mode":"deny_all","reason":"policy reset to default deny-all"}' "$(body)"
touch "$GO/stop"
wait "$hold_pid"
tb_expect_match "the raw connection was cut (reset)" '^err (ECONNRESET|EPIPE) ' \
    "$(grep '^err' "$hold" || cat "$hold")"
tb_check "nft.flows_cut logged it" tb_wait_log_line --since "$m" --timeout 3 \
    "$LOG" nft.flows_cut trigger=update 'cut~^[1-9]'
# the proxy's tunnels are redirected flows the conntrack cut skips: the
# proxy judges its open connections again and closes both at once
tb_check "the proxy closed the terminated connection (policy_changed)" \
    tb_wait_log_line --since "$m" --timeout 3 "$LOG" proxy.closed \
    name=a.test reason=policy_changed
tb_check "... and the pass-through one" \
    tb_wait_log_line --since "$m" --timeout 3 "$LOG" proxy.closed \
    name=b.test reason=policy_changed
tb_assert_log "$LOG" proxy.rejudged closed=2
tb_check "the terminated connection's next request fails (closed)" \
    tb_wait_line "$term" '^r1 [A-Za-z]' 8
tb_check "the pass-through connection no longer relays" \
    tb_wait_line "$pass" '^r1 [A-Za-z]' 8
tb_expect_eq "a new lookup of a.test: NXDOMAIN" NXDOMAIN "$(rcode a.test)"
tb_expect_eq "... and of b.test" NXDOMAIN "$(rcode b.test)"
nd_fails_fast "a new connection to a.test's address fails" tcp "$TB_ORIGIN_A4" 7
tb_check_fails "a new HTTPS request to a.test fails" \
    tb_sandbox "${C[@]}" -o /dev/null https://a.test/v1/after-stop
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request path=/v1/after-stop
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request path=/v1/ka1

# --- a kill of egressd: the rules stay --------------------------------------------
tb_stop_egressd KILL
tb_expect_eq "egressd killed (SIGKILL)" 137 "$TB_EGRESSD_STATUS"
tb_check "the table is still in force" \
    tb_sandbox_root nft list chain inet egressd filter_out
touch "$GO/killed"
wait "$pass_pid"
tb_expect_match "with egressd dead the sandbox cannot reconnect" '^r2 [A-Za-z]' \
    "$(grep '^r2' "$pass" || cat "$pass")"
tb_check_fails "with egressd dead, nothing answers DNS" \
    tb_sandbox dig +short +time=1 +tries=1 a.test A
tb_start_egressd "${EARGS[@]}"
tb_expect_eq "restarted: the deny-all was persisted (NXDOMAIN)" NXDOMAIN "$(rcode a.test)"
tb_expect_eq "... and the API's vault is gone" 404 "$(tb_api GET /credential-vault)"

# --- (3) egress restored: the revoked credential is not injected --------------------
tb_expect_eq "restore egress: POST /policy" 200 \
    "$(tb_api POST /policy '{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"},{"action":"allow","target":"b.test"}]}')"
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_check "the sandbox reaches a.test again" tb_sandbox "${C[@]}" -o /dev/null \
    -H 'Authorization: Bearer fake-key' https://a.test/v1/restored
tb_assert_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/v1/restored \
    'h.authorization=Bearer fake-key'
# the server writes its vault again; then one credential is revoked alone
S2=real-runbook-second-$RANDOM$RANDOM
add2=${add//$S1/$S2}
tb_expect_eq "the vault created again (new value): 201" 201 \
    "$(tb_api POST /credential-vault "$add2")"
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Bearer fake-key' \
    https://a.test/v1/again
tb_assert_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/v1/again \
    "h.authorization=Bearer $S2"
tb_expect_eq "revoke: PATCH deletes the credential and its binding: 200" 200 \
    "$(tb_api PATCH /credential-vault '{"credentials":{"delete":["k"]},"bindings":{"delete":["a-api"]}}')"
tb_expect_eq "... revision 2, empty" '{"revision":2,"credentials":[],"bindings":[]}' "$(body)"
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Bearer fake-key' \
    https://a.test/v1/revoked
tb_assert_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/v1/revoked \
    'h.authorization=Bearer fake-key'
wait "$term_pid"

# --- an upgrade: SIGTERM, then the new egressd adopts the table ------------------------
tb_expect_eq "a.test's address is learned" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
tb_stop_egressd TERM
tb_expect_eq "the old egressd stops cleanly" 0 "$TB_EGRESSD_STATUS"
R=(--resolve "a.test:443:$TB_ORIGIN_A4")
tb_check_fails "in the gap, HTTPS to the learned address meets no proxy (refused)" \
    tb_sandbox "${C[@]}" "${R[@]}" -o /dev/null https://a.test/v1/gap
nd_works "... a raw connection to it still opens (its lease runs)" \
    tcp "$TB_ORIGIN_A4" 7
tb_check_fails "... and no lookup is answered" \
    tb_sandbox dig +short +time=1 +tries=1 a.test A
tb_start_egressd "${EARGS[@]}"
tb_check "the new egressd: the learned address works at once (adopted)" \
    tb_sandbox "${C[@]}" "${R[@]}" -o /dev/null https://a.test/v1/upgraded
tb_assert_log "$TB_ORIGIN_LOG" origin.request path=/v1/upgraded
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request path=/v1/gap

# --- (4) reconstruct from the log with the documented one-liners ----------------------
# Each command below is in docs/operations.md verbatim (LOG=egressd's log).
J_INJECT='jq -c '\''select(.ev=="vault.inject" and .decision=="injected") | {ts, sandbox, binding, vault_revision, revision, host, method, path}'\'' "$LOG"'
J_CHANGES='jq -c '\''select(.ev=="policy.updated" or .ev=="policy.loaded" or .ev=="vault.updated") | {ts, ev, op, trigger, revision, mode, reset, credentials, bindings}'\'' "$LOG"'
J_REVOKED='jq -r '\''select(.ev=="vault.updated") | .ts'\'' "$LOG" | tail -n 1'
J_AFTER='jq -c --arg t "$T" '\''select(.ev=="vault.inject" and .decision=="injected" and .ts > $t)'\'' "$LOG"'
J_API='jq -c '\''select(.ev=="api.request" and .method!="GET") | {ts, method, path, status, peer}'\'' "$LOG"'
J_CUT='jq -c '\''select(.ev=="nft.flows_cut") | {ts, trigger, cut, revision}'\'' "$LOG"'
J_DENY='jq -c '\''select(.ev=="dns.deny") | {ts, name, reason, count}'\'' "$LOG"'
J_PROXY='jq -c '\''select(.ev=="proxy.closed") | {ts, decision, reason, name, dst, up, down, ms}'\'' "$LOG"'
for j in J_INJECT J_CHANGES J_REVOKED J_AFTER J_API J_CUT J_DENY J_PROXY; do
	tb_check "$j is documented verbatim" grep -qF -- "${!j}" "$DOC"
done
run_j() { LOG=$LOG T=${T:-} bash -c "${!1}"; }
out=$(run_j J_INJECT)
tb_expect_match "injections: a-api at vault revision 1, path /v1/ka0" \
    '^\{"ts":"[^"]*","sandbox":"'"$SBX_ID"'","binding":"a-api","vault_revision":1,"revision":2,"host":"a.test","method":"GET","path":"/v1/ka0"\}$' \
    "$(sed -n 1p <<<"$out")"
tb_expect_match "... then /v1/again, by the vault of the restarted egressd" \
    '"binding":"a-api","vault_revision":1,.*"path":"/v1/again"\}$' \
    "$(sed -n 2p <<<"$out")"
tb_expect_eq "... and no other" 2 "$(grep -c . <<<"$out")"
out=$(run_j J_CHANGES | jq -r '[.ev, (.op // .trigger), (.reset|tostring)] | join(":")' | tr '\n' ' ')
tb_expect_match "commits in order: vault create, delete, deny-all, restart, restore, vault create, revoke, restart" \
    'vault.updated:create:null .*vault.updated:delete:null policy.updated:replace:true .*policy.loaded:start:null policy.updated:replace:false vault.updated:create:null vault.updated:patch:null policy.loaded:start:null $' "$out"
T=$(run_j J_REVOKED)
tb_expect_eq "the last vault change is the revocation (PATCH)" \
    "$T" "$(jq -r 'select(.ev=="vault.updated" and .op=="patch") | .ts' "$LOG")"
tb_expect_eq "nothing injected after it" "" "$(T=$T run_j J_AFTER)"
tb_expect_eq "... while before it there was" 2 \
    "$(T=2000-01-01 run_j J_AFTER | grep -c .)"
out=$(run_j J_API)
tb_expect_match "API calls: the refused deny-all, the DELETE, the deny-all" \
    '"method":"POST","path":"/policy","status":400.*"method":"DELETE","path":"/credential-vault","status":204.*"method":"POST","path":"/policy","status":200' \
    "$(tr '\n' ' ' <<<"$out")"
tb_expect_match "flow cuts: at least one by the update" '"trigger":"update","cut":[1-9]' \
    "$(run_j J_CUT)"
tb_expect_match "denials: a.test after the stop" '"name":"a.test","reason":' "$(run_j J_DENY)"
out=$(run_j J_PROXY)
tb_expect_match "proxy connections: the terminated one closed by the stop" \
    '"decision":"terminated","reason":"policy_changed","name":"a.test"' "$out"
tb_expect_match "... and the pass-through one" \
    '"decision":"passthrough","reason":"policy_changed","name":"b.test"' "$out"
tb_check_fails "no value in the log" grep -qF -e "$S1" -e "$S2" "$LOG"
tb_finish
