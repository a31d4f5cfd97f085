#!/bin/bash
# proxy_pool: a terminated client connection that ends between requests
# leaves its verified origin connection in a pool, and the next client
# connection to the same name and address takes it instead of dialling
# (issue 17: upstream keep-alive pooling). Checked from the origin's side
# (its client port) and egressd's (proxy.closed reused=, /metrics):
# sequential connections share one origin connection; injection on a
# reused connection is judged per request (nothing carried over); an
# origin that closes an idle connection is dialled afresh, never fails a
# client; a client's Connection: close stays hop-by-hop (pooled all
# the same), an origin's or HTTP/1.0 is never pooled; a new policy
# empties the pool; an origin connection that carried the secret has
# every later response redacted (an origin echoing what it saw on an
# earlier request), also on the next client connection taking it.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
S1=real-pool-secret-$RANDOM$RANDOM
printf '%s\n' "$S1" >"$TB_DIR/egressd/key-k"
chmod 600 "$TB_DIR/egressd/key-k"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/api/*"]}
    auth: {type: bearer, credential: k}
  - name: b-api
    match: {hosts: [b.test], paths: ["/api/*"]}
    auth: {type: bearer, credential: k}
EOF2
)
STATE=$TB_DIR/state
TB_EGRESSD_TOKEN=pool-token-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
SOCK=$TB_DIR/egressd/api.sock
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --api-token-file "$TB_DIR/token" --api-socket "$SOCK"
# the API over its Unix socket, as the operator (the sandbox's own
# network path to it is closed: nft_protected_ports)
tb_api() {
	local m=$1 p=$2 args=(-H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN")
	[ $# -ge 3 ] && args+=(-H "Content-Type: application/json" \
	    --data-binary "$3")
	tb_sandbox_root curl -sS --max-time 5 --unix-socket "$SOCK" \
	    -o "$TB_API_BODY" -w '%{http_code}' -X "$m" "${args[@]}" \
	    "http://egressd$p" 2>/dev/null
	return 0
}
CA=$STATE/ca-bundle.crt
get() { tb_sandbox curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
    --cacert "$CA" "$@"; }
# metric NAME: its value in /metrics
metric() {
	tb_api GET /metrics >/dev/null
	awk -v n="$1" '$1 == n {print $2}' "$TB_API_BODY"
}
# ports MARK PREFIX: "requests distinct-client-ports" the origin logged
# since MARK for paths starting with PREFIX
ports() {
	"$TB_PY" - "$TB_ORIGIN_LOG" "$1" "$2" <<'PY'
import json, sys
f = open(sys.argv[1]); f.seek(int(sys.argv[2]))
ps = set(); n = 0
for l in f:
    r = json.loads(l)
    if r.get("ev") == "origin.request" and r["path"].startswith(sys.argv[3]):
        n += 1; ps.add(r["client"]["port"])
print(n, len(ps))
PY
}

# --- sequential client connections share one origin connection -------------
m=$(tb_log_mark "$TB_ORIGIN_LOG")
e=$(tb_log_mark "$TB_EGRESSD_LOG")
for i in 1 2 3 4 5; do
	tb_expect_eq "client connection $i: 200" 200 "$(get "https://a.test/seq$i")"
done
tb_expect_eq "five client connections, one origin connection" "5 1" \
    "$(ports "$m" /seq)"
tb_assert_log --since "$e" --min 4 "$TB_EGRESSD_LOG" proxy.closed \
    decision=terminated name=a.test reused=true
tb_expect_eq "/metrics: four reuses" 4 \
    "$(metric egressd_proxy_upstream_reused_total)"
tb_expect_eq "/metrics: one idle origin connection" 1 \
    "$(metric egressd_proxy_upstream_idle)"

# --- the vault judges each request on a reused connection ---------------------
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "a bound path on the pooled connection: 200" 200 \
    "$(get -H 'Authorization: Bearer fake-key' https://a.test/api/one)"
tb_expect_eq "an unbound path next, on the same origin connection: 200" 200 \
    "$(get -H 'Authorization: Bearer fake-key' https://a.test/plain)"
tb_assert_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/api/one \
    "h.authorization=Bearer $S1"
tb_assert_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/plain \
    "h.authorization=Bearer fake-key"
tb_expect_eq "... both over the one pooled origin connection" "1 1" \
    "$(ports "$m" /api/one)"
tb_expect_eq "the origin connection of before is the one used" 1 \
    "$("$TB_PY" - "$TB_ORIGIN_LOG" <<'PY'
import json, sys
ps = set()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("ev") == "origin.request" and (r["path"].startswith("/seq") or
            r["path"] in ("/api/one", "/plain")):
        ps.add(r["client"]["port"])
print(len(ps))
PY
)"

# --- an origin that closes an idle connection: dialled afresh ---------------
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "a response after which the origin closes when idle 300 ms" 200 \
    "$(get 'https://a.test/idle1?idle_ms=300')"
# the origin closes 300 ms after the response; allow the loaded machine
# up to 5 s to deliver that close to the pool
for _ in $(seq 50); do
	[ "$(metric egressd_proxy_upstream_idle)" = 0 ] && break
	sleep 0.1
done
tb_expect_eq "/metrics: the closed connection left the pool" 0 \
    "$(metric egressd_proxy_upstream_idle)"
tb_expect_eq "the next client connection is served (a new dial)" 200 \
    "$(get https://a.test/idle2)"
tb_expect_eq "... over a second origin connection" "2 2" "$(ports "$m" /idle)"

# --- Connection: close ------------------------------------------------------------
# The client's is hop-by-hop: left out upstream, the client closes after
# the response, the origin connection is pooled. The origin's, or an
# HTTP/1.0 client's, ends the origin connection: never pooled.
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "a client's Connection: close" 200 \
    "$(get -H 'Connection: close' https://a.test/close1)"
tb_check "... the origin did not get it" "$TB_PY" - "$TB_ORIGIN_LOG" "$m" <<'PY'
import json, sys
f = open(sys.argv[1]); f.seek(int(sys.argv[2]))
rs = [json.loads(l) for l in f]
rs = [r for r in rs if r.get("ev") == "origin.request" and r["path"] == "/close1"]
sys.exit(0 if len(rs) == 1 and "connection" not in rs[0]["h"] else 1)
PY
tb_expect_match "... while the client is told Connection: close" \
    '^[Cc]onnection: close' "$(tb_sandbox curl -sS -D - -o /dev/null \
    --max-time 5 --cacert "$CA" -H 'Connection: close' https://a.test/close1b |
    tr -d '\r')"
tb_expect_match "... also on an injected request (the vault's head)" \
    '^[Cc]onnection: close' "$(tb_sandbox curl -sS -D - -o /dev/null \
    --max-time 5 --cacert "$CA" -H 'Connection: close' \
    -H 'Authorization: Bearer fake-key' https://a.test/api/close |
    tr -d '\r')"
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "a request pipelined after a close request: one answer, then EOF" "1 eof" \
    "$(tb_sandbox "$TB_PY" -c '
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
s = ctx.wrap_socket(socket.create_connection(("a.test", 443), timeout=5),
                    server_hostname="a.test")
s.sendall(b"GET /close3 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"
          b"GET /after-close HTTP/1.1\r\nHost: a.test\r\n\r\n")
data, eof = b"", False
while True:
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    except (ssl.SSLError, OSError):
        eof = True
        break
    if not d:
        eof = True
        break
    data += d
print(data.count(b"HTTP/1.1 "), "eof" if eof else "open")' "$CA")"
tb_assert_no_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/after-close
tb_expect_eq "/metrics: its origin connection pooled all the same" 1 \
    "$(metric egressd_proxy_upstream_idle)"
tb_expect_eq "an origin's Connection: close (on the pooled connection)" 200 \
    "$(get 'https://a.test/close2?close=1')"
tb_expect_eq "/metrics: not pooled after the origin's Connection: close" 0 \
    "$(metric egressd_proxy_upstream_idle)"
tb_expect_eq "a request to warm the pool again" 200 "$(get https://a.test/warm)"
tb_expect_eq "an HTTP/1.0 client (on the pooled connection)" 200 \
    "$(get --http1.0 https://a.test/ten)"
tb_expect_eq "/metrics: not pooled after HTTP/1.0" 0 \
    "$(metric egressd_proxy_upstream_idle)"

# --- a new policy empties the pool ----------------------------------------------
# (pooled connections are not judged again: the next client connection
# is judged by its SNI first, then dials; a denied name never gets that
# far, as proxy_passthrough and daemon_ops_runbook check)
tb_expect_eq "b.test: 200" 200 "$(get https://b.test/before)"
tb_expect_eq "/metrics: b.test's origin connection pooled" 1 \
    "$(metric egressd_proxy_upstream_idle)"
tb_expect_eq "PATCH: an unrelated deny rule" 200 \
    "$(tb_api PATCH /policy '[{"action":"deny","target":"c.test"}]')"
tb_expect_eq "/metrics: the pool is empty after the commit" 0 \
    "$(metric egressd_proxy_upstream_idle)"
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "b.test after the commit: 200 (a new dial)" 200 \
    "$(get https://b.test/after)"
tb_expect_eq "... over another origin connection than before" 2 \
    "$("$TB_PY" - "$TB_ORIGIN_LOG" <<'PY'
import json, sys
ps = set()
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("ev") == "origin.request" and r["path"] in ("/before", "/after"):
        ps.add(r["client"]["port"])
print(len(ps))
PY
)"

# --- an origin's echo of a secret it saw earlier on the connection ------------
# Redaction follows the origin connection, not the request: one that
# carried the secret has every later response redacted, to requests
# nothing was injected into as well, on the same client connection or
# on the next one that takes it from the pool. The origin echoes
# (echo_prev) the Authorization its previous request on the connection had.
out=$(tb_sandbox curl -sS -D - --max-time 5 --cacert "$CA" \
    -H 'Authorization: Bearer fake-key' https://a.test/api/echo-2 \
    'https://a.test/plain-2?echo_prev=Authorization')
tb_expect_match "one client connection: an unbound path after an injected one, its echo redacted" \
    '^X-Echo-Prev-Authorization: \[REDACTED\]' "$(tr -d '\r' <<<"$out")"
tb_check_fails "... no secret in either response" grep -qF "$S1" <<<"$out"
e=$(tb_log_mark "$TB_EGRESSD_LOG")
m=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "an injected request, its origin connection pooled after" 200 \
    "$(get -H 'Authorization: Bearer fake-key' https://a.test/api/echo-1)"
tb_wait_log_line --since "$e" "$TB_EGRESSD_LOG" proxy.closed \
    decision=terminated name=a.test >/dev/null
e=$(tb_log_mark "$TB_EGRESSD_LOG")
out=$(tb_sandbox curl -sS -D - --max-time 5 --cacert "$CA" \
    -H 'Accept-Encoding: gzip' 'https://a.test/whoami?echo_prev=Authorization')
tb_assert_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/api/echo-1 \
    "h.authorization=Bearer $S1"
tb_assert_log --since "$m" "$TB_ORIGIN_LOG" origin.request path=/whoami \
    '!h.authorization' 'h.accept-encoding=identity'
tb_expect_eq "... the next client connection, nothing injected, on the same origin connection" \
    "2 1" "$(ports "$m" /)"
tb_check "... taken from the pool (proxy.closed reused=true)" \
    tb_wait_log_line --since "$e" "$TB_EGRESSD_LOG" proxy.closed \
    decision=terminated name=a.test reused=true
tb_expect_match "the echo of the earlier request's secret arrives redacted" \
    '^X-Echo-Prev-Authorization: \[REDACTED\]' "$(tr -d '\r' <<<"$out")"
tb_expect_match "... and masked in the body" \
    '"Authorization": *"\*+"' "$out"
tb_check_fails "... the secret is nowhere in the response" \
    grep -qF "$S1" <<<"$out"
tb_finish
