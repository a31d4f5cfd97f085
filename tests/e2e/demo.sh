#!/bin/bash
# ./run demo: egressd in a throwaway sandbox namespace, a fake internet in
# another, and a narrated tour of the whole job as the sandbox user sees
# it: filtering, the Credential Vault injecting a real key in place of the
# fake one, and the key redacted from what comes back; then the audit log
# and metrics. Every step checks itself (exit non-zero if one did not
# happen); everything is torn down on exit.
set -u -o pipefail
export EGRESSD_BIN=${1:-${EGRESSD_BIN:-build/egressd/egressd}}
. "$(dirname "$0")/lib/testbed.sh"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {
	printf '$ %s\n' "$*"
	"$@" 2>&1 | sed 's/^/    /' | head -n 15
	printf '    (exit %s)\n' "${PIPESTATUS[0]}"
}

tb_setup
TB_EGRESSD_TOKEN=demo-token-$RANDOM
tb_host_setup
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
  - {action: allow, target: cname-bad.test}
  - {action: allow, target: rebind.test}
EOF
)
tokfile=$TB_DIR/token
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$tokfile"
chmod 600 "$tokfile"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/fake-internet-ca.pem"
STATE=$TB_DIR/state
SOCK=$TB_DIR/egressd/api.sock
TB_EGRESSD_HTTP="[::]:18080"
tb_start_egressd --policy "$pol" --api-token-file "$tokfile" --proxy \
    --trust-dir "$TB_DIR/trust" --state-dir "$STATE" --api-socket "$SOCK"
REAL_KEY=sk-real-$RANDOM$RANDOM$RANDOM
CA=$STATE/ca-bundle.crt
C=(curl -sS --max-time 5 --cacert "$CA")
api() { # METHOD PATH [BODY]: the operator, on egressd's Unix socket
	tb_sandbox_root curl -sS --max-time 5 --unix-socket "$SOCK" \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" -X "$1" \
	    ${3:+--data-binary "$3"} "http://egressd$2"
}

say "The policy egressd enforces"
sed 's/^/    /' "$pol"

say "The operator puts the real key in egressd's Credential Vault (never in the sandbox)"
printf '$ POST /credential-vault  {credentials: [openai: <real key>], bindings: [a.test /v1/* bearer]}\n'
api POST /credential-vault '{"credentials":[{"name":"openai","source":{"value":"'"$REAL_KEY"'"}}],"bindings":[{"name":"openai-api","match":{"hosts":["a.test"],"paths":["/v1/*"]},"auth":{"type":"bearer","credential":"openai"}}]}' |
    sed 's/^/    /'

say "Inside the sandbox (uid $TB_SBX_USER): an allowed HTTPS fetch"
show tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code} from %{remote_ip}\n' https://a.test/

say "A denied name: NXDOMAIN, and nothing reaches the upstream"
show tb_sandbox dig +noall +comments b.test A
say "A hard-coded resolver is answered by egressd all the same"
show tb_sandbox dig +short @203.0.113.53 b.test A

say "Going around DNS: direct IPs and metadata fail fast"
show tb_sandbox curl -sS --max-time 3 -o /dev/null https://$TB_ORIGIN_B4/
show tb_sandbox curl -sS --max-time 3 -o /dev/null http://169.254.169.254/

say "Domain fronting: a denied name (SNI b.test) sent to an allowed address"
show tb_sandbox "${C[@]}" -o /dev/null --resolve "b.test:443:$TB_ORIGIN_A4" https://b.test/

say "An API call with the sandbox's fake key"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
show tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}\n' \
    -H 'Authorization: Bearer sk-fake-key-in-the-sandbox' https://a.test/v1/models
printf '    what the origin received:\n'
tail -c +"$((mark + 1))" "$TB_ORIGIN_LOG" | "$TB_PY" -c '
import json, sys
for l in sys.stdin:
    e = json.loads(l)
    if e.get("ev") == "origin.request" and e.get("path") == "/v1/models":
        print("    Authorization: " + e["h"].get("authorization", "(none)"))'

say "The origin echoes the key back: the sandbox sees it redacted"
printf '$ curl -D - https://a.test/v1/echo?echo=Authorization  (header and body lines naming it)\n'
tb_sandbox "${C[@]}" -D - -H 'Authorization: Bearer sk-fake-key-in-the-sandbox' \
    'https://a.test/v1/echo?echo=Authorization' | tr -d '\r' |
    grep -iE '^HTTP/|x-echo-authorization|"authorization"' | sed 's/^ */    /'

say "The sandbox cannot reach the control API, even with the token"
show tb_sandbox curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" http://127.0.0.1:18080/policy

say "The audit trail: one vault.inject per decision, never a value"
grep -E '"ev":"(vault\.(inject|updated)|proxy\.refused)"' "$TB_EGRESSD_LOG" |
    tail -n 6 | sed 's/^/    /'

say "A /metrics excerpt"
api GET /metrics >"$TB_DIR/metrics.txt"
grep -E '^egressd_(vault_decisions_total|proxy_connections_total)' \
    "$TB_DIR/metrics.txt" | sed 's/^/    /'
grep -E '^egressd_dns_queries_total\{decision="(allowed|denied)"' \
    "$TB_DIR/metrics.txt" | sed 's/^/    /'

say "The demo checks itself"
tb_check "an allowed name connects" tb_sandbox "${C[@]}" -o /dev/null https://a.test/
tb_expect_match "a denied name is NXDOMAIN" 'status: NXDOMAIN' \
    "$(tb_sandbox dig +time=2 +tries=1 b.test A)"
tb_check_fails "a direct IP is refused" tb_sandbox curl -sS --max-time 3 -o /dev/null "https://$TB_ORIGIN_C4/"
tb_check_fails "fronting is refused" tb_sandbox "${C[@]}" -o /dev/null \
    --resolve "b.test:443:$TB_ORIGIN_A4" https://b.test/
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/models \
    "h.authorization=Bearer $REAL_KEY"
out=$(tb_sandbox "${C[@]}" -D - 'https://a.test/v1/echo?echo=Authorization')
tb_check_fails "the echoed key never reaches the sandbox" grep -qF "$REAL_KEY" <<<"$out"
tb_check_fails "the real key is in no log line" grep -qF "$REAL_KEY" "$TB_EGRESSD_LOG"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected binding=openai-api
say "Done; egressd stops and the namespaces are removed."
tb_finish
