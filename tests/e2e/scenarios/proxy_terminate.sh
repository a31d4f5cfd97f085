#!/bin/bash
# proxy_terminate: a host a credential binding could match is terminated
# with egressd's CA (the sandbox trusts the exported bundle); the origin
# sees a verified TLS connection from egressd with the client's SNI; a
# Host other than the SNI inside it is 421 and never forwarded; an origin
# egressd cannot verify gets the client a 502 with nothing sent; hosts
# without a binding stay pass-through (the origin's own certificate).
# The binding of a.test covers /api/* only: what is tested here is the
# terminated connection, not injection (proxy_vault).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

mkdir -p "$TB_DIR/trust" "$TB_DIR/other-trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
# a root that did not sign the origins: verification must fail
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$TB_DIR/other-trust/k.pem" -out "$TB_DIR/other-trust/ca.pem" \
    -days 1 -subj "/CN=unrelated" 2>/dev/null || tb_die "openssl"
rm -f "$TB_DIR/other-trust/k.pem"

printf 'real-secret-value-1\n' >"$TB_DIR/egressd/key-k"
chmod 600 "$TB_DIR/egressd/key-k"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
  - {action: allow, target: shared-a.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/api/*"]}
    auth: {type: bearer, credential: k}
  - name: b-api
    match: {hosts: [b.test]}
    auth: {type: bearer, credential: k}
EOF2
)
# the state directory as a volume shared with the sandbox (read-only
# there): the bundle is public, the key is not
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE"
tb_check "the CA bundle is exported and readable by the sandbox" \
    tb_sandbox test -r "$STATE/ca-bundle.crt"
tb_check "ca.key is private (0600)" sh -c "[ \"\$(stat -c %a '$STATE/ca.key')\" = 600 ]"
tb_check_fails "... and the sandbox cannot read it" tb_sandbox cat "$STATE/ca.key"

mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox curl -sS --max-time 5 --cacert "$STATE/ca-bundle.crt" \
    -w '\n%{http_code} %{ssl_verify_result}' https://a.test/x 2>&1)
tb_expect_match "a bound host is served through egressd's CA" '200 0$' "$out"
tb_expect_match "the certificate the client saw is egressd's" \
    'CN ?= ?a.test' "$(tb_sandbox sh -c "openssl s_client -connect a.test:443 -servername a.test \
    -CAfile '$STATE/ca-bundle.crt' </dev/null 2>/dev/null | openssl x509 -noout -subject -issuer")"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'server.sni=a.test' 'path=/x'
tb_assert_log "$TB_EGRESSD_LOG" proxy.closed decision=terminated name=a.test
tb_check_fails "without egressd's CA the client refuses (nothing silent)" \
    tb_sandbox curl -sS -o /dev/null --max-time 5 https://a.test/
tb_assert_log "$TB_EGRESSD_LOG" proxy.client_tls_failed name=a.test \
    'error~unknown ca'
# a client that resets the connection mid-handshake (after egressd's
# ServerHello): the log says so, not libevent's bare SSL_get_error code
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_sandbox "$TB_PY" -c '
import socket, ssl, struct
s = socket.create_connection(("a.test", 443), timeout=5)
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
o = ctx.wrap_bio(inc, out, server_hostname="a.test")
try:
    o.do_handshake()
except ssl.SSLWantReadError:
    pass
s.sendall(out.read())
s.recv(1)  # the ServerHello has come: the handshake is under way
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()  # RST
'
tb_check "a reset mid-handshake is logged as one" \
    tb_wait_log_line --since "$mark" "$TB_EGRESSD_LOG" \
    proxy.client_tls_failed name=a.test 'error~reset by peer'
tb_assert_no_log "$TB_EGRESSD_LOG" proxy.client_tls_failed 'error~lib\(0\)'

mark=$(tb_log_mark "$TB_ORIGIN_LOG")
code=$(tb_sandbox curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
    --cacert "$STATE/ca-bundle.crt" -H 'Host: c.test' https://a.test/misdirected)
tb_expect_eq "Host other than the SNI inside a terminated connection: 421" 421 "$code"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'path=/misdirected'

# --- the HTTP engine inside a terminated connection ---------------------------
CA=$STATE/ca-bundle.crt
tb_sbx_tool http_client.py
HC=$TB_DIR/sbx-bin/http_client.py
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
urls=()
for i in $(seq 1 100); do urls+=("https://a.test/ka$i"); done
tb_check "100 keep-alive requests on one client connection" sh -c \
    "$(printf '%q ' "${TB_SBX_EXEC[@]}") curl -sS -f --max-time 20 --cacert '$CA' -o /dev/null ${urls[*]}"
ports=$("$TB_PY" - "$TB_ORIGIN_LOG" "$mark" <<'PY'
import json, sys
f = open(sys.argv[1]); f.seek(int(sys.argv[2]))
ps = set(); n = 0
for l in f:
    r = json.loads(l)
    if r.get("ev") == "origin.request" and r["path"].startswith("/ka"):
        n += 1; ps.add(r["client"]["port"])
print(n, len(ps))
PY
)
tb_expect_eq "... the origin got all 100 over one connection" "100 1" "$ports"
tb_expect_eq "chunked download through termination: every byte" 300000 \
    "$(tb_sandbox curl -sS --max-time 10 --cacert "$CA" 'https://a.test/dl?bytes=300000&chunked=1' | wc -c)"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_check "chunked upload through termination" sh -c \
    "head -c 200000 /dev/zero | tr '\\0' u | $(printf '%q ' "${TB_SBX_EXEC[@]}") curl -sS -f --max-time 10 --cacert '$CA' -T - -o /dev/null https://a.test/up"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/up body_len=200000 'h.transfer-encoding=chunked'
sse=$(tb_sandbox "$TB_PY" "$HC" sse 'https://a.test/ev?sse=3&gap_ms=700' "$CA")
tb_expect_match "SSE: three events" '^0 .*
1 .*
2 ' "$sse"
tb_check "SSE: the first event arrives as it is produced, not with the last" \
    "$TB_PY" -c 'import sys; t=[float(l.split()[1]) for l in sys.argv[1].splitlines()]; sys.exit(0 if t[2]-t[0] > 1.0 else 1)' "$sse"
ws=$(tb_sandbox "$TB_PY" "$HC" ws 'https://a.test/sock?ws=1' "$CA" hello second)
# every byte of a bound origin is redacted, and the frames of an upgraded
# connection are not: refused (502), never relayed unredacted
tb_expect_match "WebSocket to a bound origin: refused, not relayed unredacted" \
    '^HTTP/1.1 502' "$ws"

code=$(tb_sandbox curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
    --cacert "$STATE/ca-bundle.crt" https://c.test/)
tb_expect_eq "a host without a binding is passed through (origin's certificate, test CA)" \
    000 "$code"
tb_check "... which the test CA verifies" tb_sandbox curl -sS -o /dev/null --max-time 5 https://c.test/

# a new client connection resumes the origin's TLS session (tls_sess.c)
# or takes an idle origin connection (proxy_pool.c): no full handshake
# upstream after the first. One connection first (its origin connection
# goes to the pool, its session to the cache), then two at once, each
# answered after 1.5 s so they overlap even on a loaded machine: one
# takes the pooled connection, the other dials and resumes.
tb_sandbox curl -sS -o /dev/null --max-time 5 --cacert "$CA" https://a.test/resume0
m=$(tb_log_mark "$TB_EGRESSD_LOG")
pids=()
for i in 1 2; do
	tb_sandbox curl -sS -o /dev/null --max-time 5 --cacert "$CA" \
	    "https://a.test/resume$i?delay_ms=1500" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
tb_assert_log --since "$m" --min 1 "$TB_EGRESSD_LOG" proxy.closed \
    decision=terminated name=a.test resumed=true reused=false
tb_assert_log --since "$m" --min 1 "$TB_EGRESSD_LOG" proxy.closed \
    decision=terminated name=a.test reused=true
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" proxy.closed \
    decision=terminated name=a.test resumed=false reused=false

# egressd's own close of a terminated connection (the client asked for
# Connection: close) is a TLS close_notify, not a bare FIN: an OpenSSL 3
# client would otherwise read an unexpected EOF and drop the session it
# resumes with. Three connections, each resuming the last one's session.
cat >"$TB_DIR/sbx-bin/close_notify.py" <<'PY'
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
# Debian's Python forgives a missing close_notify; OpenSSL itself does not
ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
sess = None
for i in range(3):
    raw = socket.create_connection(("a.test", 443), timeout=5)
    s = ctx.wrap_socket(raw, server_hostname="a.test", session=sess,
                        suppress_ragged_eofs=False)
    s.sendall(b"GET /cn%d HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n" % i)
    body = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            body += d
        end = "close_notify"
    except ssl.SSLError as e:  # UNEXPECTED_EOF_WHILE_READING
        end = "unclean:" + str(e.reason)
    print(i, body.split(b" ", 2)[1].decode(), end, s.session_reused)
    sess = s.session
    s.close()
PY
chmod 755 "$TB_DIR/sbx-bin/close_notify.py"
tb_expect_eq "Connection: close ends with close_notify; every new connection resumes" \
    "0 200 close_notify False
1 200 close_notify True
2 200 close_notify True" \
    "$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/close_notify.py" "$CA" 2>&1)"

# an origin that closes without a TLS close_notify (the test origin,
# like many servers) after a Connection: close response: an end, not a
# failure; every byte still reaches the client
m=$(tb_log_mark "$TB_EGRESSD_LOG")
for i in 1 2 3; do
	tb_expect_eq "Connection: close response, unclean TLS close ($i): every byte" \
	    3000000 "$(tb_sandbox curl -sS --max-time 10 --cacert "$CA" \
	    "https://a.test/dirty$i?close=1&bytes=3000000" | wc -c)"
done
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" proxy.closed name=a.test \
    reason=upstream_error

# unverifiable origin
tb_stop_egressd
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/other-trust" \
    --state-dir "$STATE"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
code=$(tb_sandbox curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
    --cacert "$STATE/ca-bundle.crt" https://b.test/unverified)
tb_expect_eq "an origin egressd cannot verify: 502" 502 "$code"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'path=/unverified'
tb_assert_log "$TB_EGRESSD_LOG" proxy.upstream_tls_failed name=b.test
tb_finish
