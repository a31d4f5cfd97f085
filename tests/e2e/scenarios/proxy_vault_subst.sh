#!/bin/bash
# proxy_vault_subst: placeholder substitutions (contract §4, issue 18 item
# 6). The sandbox holds only a placeholder; curl sends it in the path, the
# query, a header and a JSON (and a form) body to the bound host, and the
# origin sees the real value there, encoded for each surface
# (percent-encoded in path and query, raw in the header, JSON-escaped or
# form-encoded in the body, Content-Length fixed up; a placeholder the
# client percent-encoded is found there too; a body of 1 MiB is
# rewritten, one byte more is not; Expect: 100-continue answered by
# egressd; plain HTTP too). Chunked bodies are held whole, substituted
# and sent with a Content-Length (split placeholders, extensions, a
# pipelined request behind; bad framing is a 400), unless they carry
# trailers or pass a bound (curl, Python's http.client, Node's https). Compressed and multipart bodies and reserved
# headers keep their placeholders. The same placeholder to an
# unbound host (plain and TLS), to a path the binding does not cover, or
# to a host bound to another binding without substitutions arrives
# untouched. A passthrough binding adds no header. What the origin echoes
# back reaches the client redacted, and the value never reaches egressd's
# log, stdout, stderr or /v1/status.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator: the control API is closed to the sandbox

# '/', ' ' and '+' need encoding in a URL; the value has no '"' or '\'
# (an origin echoing a JSON body inside its JSON echo would escape those
# twice, a form the redactor does not know)
SECRET='sub/s3cret v+1'
PCT='sub%2Fs3cret%20v%2B1'   # path and query: RFC 3986 unreserved kept
FORM='sub%2Fs3cret+v%2B1'    # form bodies: a space is '+'
PH=PLACEHOLDER_K
OTHER=other-secret-2
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
printf '%s\n' "$SECRET" >"$TB_DIR/egressd/key-k"
printf '%s\n' "$OTHER" >"$TB_DIR/egressd/key-o"
chmod 600 "$TB_DIR/egressd/key-k" "$TB_DIR/egressd/key-o"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
  - {action: allow, target: shared-a.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
  - {name: o, source: {type: file, path: $TB_DIR/egressd/key-o}}
bindings:
  - name: a-subst
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [GET, POST]}
    auth:
      type: passthrough
      substitutions:
        - {credential: k, placeholder: $PH, in: [path, query, header, body]}
        - {credential: k, placeholder: '{{K}}', in: [query, body]}
  - name: c-key
    match: {hosts: [c.test]}
    auth: {type: apiKey, name: X-Api-Key, credential: o}
  - name: plain-query
    match: {schemes: [http], hosts: [shared-a.test]}
    auth:
      type: passthrough
      substitutions:
        - {credential: k, placeholder: $PH, in: [query]}
EOF2
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --http-addr ":18080"
CA=$STATE/ca-bundle.crt
C=(curl -sS --max-time 8 --cacert "$CA")

# --- every surface, on the bound host ----------------------------------------
sent="{\"key\":\"$SECRET\",\"again\":\"$SECRET\",\"n\":1}"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "${C[@]}" -D - -H "X-Token: tok $PH end" \
    -H "Authorization: Bearer $PH" \
    -H 'Content-Type: application/json' \
    --data-raw "{\"key\":\"$PH\",\"again\":\"$PH\",\"n\":1}" \
    "https://a.test/v1/items/$PH?key=$PH&echo=X-Token,Authorization")
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=POST \
    "path=/v1/items/$PCT" "query=key=$PCT&echo=X-Token,Authorization" \
    "h.x-token=tok $SECRET end" "h.authorization=Bearer $SECRET" \
    "body=$sent" "h.content-length=${#sent}" \
    'h.accept-encoding=identity'
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    "raw_head~$PH"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected \
    binding=a-subst host=a.test method=POST "path=/v1/items/$PH"
tb_expect_match "the echoed header is redacted" \
    '^X-Echo-X-Token: tok \[REDACTED\] end' "$(tr -d '\r' <<<"$out")"
tb_expect_match "... and the echoed Authorization (the sandbox wrote Bearer PLACEHOLDER)" \
    '^X-Echo-Authorization: \[REDACTED\]$' "$(tr -d '\r' <<<"$out")"
tb_expect_match "the JSON echo masks the percent-encoded path" \
    '"path": *"/v1/items/\*{20}"' "$out"
tb_check_fails "the value is nowhere in the response" \
    grep -qF "$SECRET" <<<"$out"
tb_check_fails "... nor its percent-encoded form" grep -qF "$PCT" <<<"$out"

# a form body, and a JSON body with no placeholder (forwarded as it is)
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "${C[@]}" --data-raw "a=1&k=$PH" https://a.test/v1/form)
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/form \
    "body=a=1&k=$FORM" "h.content-length=$((6 + ${#FORM}))"
tb_check_fails "form echo: no value" grep -qF "$FORM" <<<"$out"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Content-Type: application/json' \
    --data-raw '{"none":1}' https://a.test/v1/plain
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/plain 'body={"none":1}' h.content-length=10

# a placeholder the client percent-encodes: Python's urlencode writes
# "{{K}}" as %7B%7BK%7D%7D in the query and in a form body
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
py_enc='import ssl, sys, urllib.parse as up, urllib.request as ur
q = up.urlencode({"key": "{{K}}", "n": "1"})
r = ur.Request("https://a.test/v1/enc?" + q, data=up.urlencode({"k": "{{K}}"}).encode())
print(ur.urlopen(r, context=ssl.create_default_context(cafile=sys.argv[1]), timeout=8).status)'
tb_expect_eq "urlencoded placeholder: 200" 200 \
    "$(tb_sandbox "$TB_PY" -c "$py_enc" "$CA" 2>&1)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/enc \
    "query=key=$PCT&n=1" "body=k=$FORM"

# "Expect: 100-continue" (curl sends it for larger bodies): egressd needs
# the body before the head goes, so it answers 100 itself and drops Expect
big=$(head -c 3000 /dev/zero | tr '\0' x)
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
t0=$(date +%s%N)
tb_sandbox "${C[@]}" -o /dev/null -H 'Content-Type: application/json' \
    -H 'Expect: 100-continue' --expect100-timeout 5 \
    --data-raw "{\"pad\":\"$big\",\"key\":\"$PH\"}" https://a.test/v1/big
t1=$(date +%s%N)
# (jsonlog's "~" conditions cannot hold '=': the regex avoids it)
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/big \
    '!h.expect' "body_len=$((${#big} + 19 + ${#SECRET}))" \
    'body~^\{"pad":"x{3000}","key":"sub/s3cret v\+1"\}$'
tb_check "... without waiting for curl's Expect timeout (5 s)" \
    test $(((t1 - t0) / 1000000)) -lt 3000

# the body bound: 1 MiB exactly is rewritten, one byte more is not
mkdir -p "$TB_DIR/sbx-bin" && chmod 755 "$TB_DIR/sbx-bin"
for n in 1048576 1048577; do
	"$TB_PY" -c 'import sys; n = int(sys.argv[1]); h = "{\"key\":\"%s\",\"pad\":\"" % sys.argv[2]
sys.stdout.write(h + "x" * (n - len(h) - 2) + "\"}")' "$n" "$PH" >"$TB_DIR/sbx-bin/body-$n.json"
	chmod 644 "$TB_DIR/sbx-bin/body-$n.json"
done
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Content-Type: application/json' \
    --data-binary "@$TB_DIR/sbx-bin/body-1048576.json" https://a.test/v1/at-bound
tb_sandbox "${C[@]}" -o /dev/null -H 'Content-Type: application/json' \
    --data-binary "@$TB_DIR/sbx-bin/body-1048577.json" https://a.test/v1/over-bound
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/at-bound "h.content-length=$((1048576 - ${#PH} + ${#SECRET}))" \
    'body~^\{"key":"sub/s3cret v\+1","pad":"x'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/over-bound h.content-length=1048577 \
    "body~^\\{\"key\":\"$PH\",\"pad\":\"x"

# compressed and multipart bodies are left alone
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Content-Type: application/json' \
    -H 'Content-Encoding: gzip' --data-raw "{\"k\":\"$PH\"}" \
    https://a.test/v1/gz
tb_sandbox "${C[@]}" -o /dev/null -F "k=$PH" https://a.test/v1/multi
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/gz \
    "body={\"k\":\"$PH\"}"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/multi "body~\"k\"\\r\\n\\r\\n$PH\\r\\n"

# --- chunked request bodies ----------------------------------------------------
# held whole (at most 1 MiB, framed in at most 1 MiB + 64 KiB, no
# trailer section), decoded, substituted and sent with a Content-Length;
# otherwise forwarded as they came. curl (one chunk, and with Expect:
# 100-continue), Python's http.client with a generator body (the
# placeholder split across chunks, an extension on one), and raw bytes for
# what clients rarely send: trailers, bad framing, a request pipelined
# behind the body, the bounds.
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H 'Content-Type: application/json' \
    -H 'Transfer-Encoding: chunked' --data-raw "{\"k\":\"$PH\"}" \
    https://a.test/v1/chunked
t0=$(date +%s%N)
tb_sandbox "${C[@]}" -o /dev/null -H 'Content-Type: application/json' \
    -H 'Transfer-Encoding: chunked' -H 'Expect: 100-continue' \
    --expect100-timeout 5 --data-raw "{\"k\":\"$PH\",\"pad\":\"$big\"}" \
    https://a.test/v1/chunked-expect
t1=$(date +%s%N)
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/chunked "body={\"k\":\"$SECRET\"}" \
    "h.content-length=$((8 + ${#SECRET}))" '!h.transfer-encoding'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/chunked-expect '!h.expect' '!h.transfer-encoding' \
    "h.content-length=$((17 + ${#SECRET} + ${#big}))"
tb_check "chunked with Expect: answered without curl's timeout (5 s)" \
    test $(((t1 - t0) / 1000000)) -lt 3000

# Node's http.request with write() and no Content-Length: chunked
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
node_post='const r = require("https").request({host: "a.test", path: process.argv[2],
  method: "POST", headers: {"Content-Type": "application/json"}},
  (res) => { res.resume(); res.on("end", () => console.log(res.statusCode)); });
r.on("error", (e) => console.log(e.code));
r.write("{\"k\":\""); r.write(process.argv[1]); r.end("\"}");'
for path in /v1/node /other/node; do
	tb_expect_eq "node, write() twice, $path: 200" 200 "$(tb_sandbox \
	    env NODE_EXTRA_CA_CERTS="$CA" timeout 10 node -e "$node_post" "$PH" "$path")"
done
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/node "body={\"k\":\"$SECRET\"}" '!h.transfer-encoding' \
    "h.content-length=$((8 + ${#SECRET}))"
# (what node sends where no binding substitutes: chunked, as it came)
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/other/node "body={\"k\":\"$PH\"}" h.transfer-encoding=chunked

cat >"$TB_DIR/sbx-bin/chunked.py" <<'EOF'
import http.client, re, socket, ssl, sys
ca, ph = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)

def gen():
    yield b'{"k":"' + ph[:5].encode()
    yield ph[5:].encode() + b'","n":'
    yield b"1}"

c = http.client.HTTPSConnection("a.test", 443, context=ctx, timeout=8)
c.request("POST", "/v1/split", body=gen(), encode_chunked=True,
          headers={"Content-Type": "application/json"})
r = c.getresponse()
r.read()
print("split=%d" % r.status)
c.close()

def raw(name, data):
    s = ctx.wrap_socket(socket.create_connection(("a.test", 443), timeout=8),
                        server_hostname="a.test")
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except socket.timeout:
        got += b"TIMEOUT"
    s.close()
    codes = re.findall(rb"^HTTP/1\.1 (\d{3})", got, re.M)
    print("%s=%s" % (name, ",".join(x.decode() for x in codes)))

def post(path, body, extra=b"", close=True):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: a.test\r\n"
            b"Content-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n" + extra +
            (b"Connection: close\r\n" if close else b"") + b"\r\n" + body)

def chunk(b):
    return b"%x\r\n" % len(b) + b + b"\r\n"

j = b'{"k":"' + ph.encode() + b'"}'
raw("ext", post(b"/v1/ext", b"%x;name=val\r\n" % len(j) + j + b"\r\n0\r\n\r\n"))
raw("trailer", post(b"/v1/trailer", chunk(j) + b"0\r\nX-Sum: 1\r\n\r\n",
                    b"Trailer: X-Sum\r\n"))
raw("bad", post(b"/v1/bad", b"zz\r\n" + j + b"\r\n0\r\n\r\n"))
raw("pipelined", post(b"/v1/pipe1", chunk(j) + b"0\r\n\r\n", close=False) +
    b"GET /v1/pipe2 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
# 200,000 one-byte chunks: a 200 KB body framed in 1.2 MB
raw("wire", post(b"/v1/wire", chunk(j[:-1]) + chunk(b"}") +
    b"1\r\n \r\n" * 200000 + b"0\r\n\r\n"))
pad = 1048576 - len(j) - 9
for name, n in (("at", pad), ("over", pad + 1)):
    body = j[:-1] + b',"pad":"' + b"x" * n + b'"}'
    parts = [body[i:i + 16384] for i in range(0, len(body), 16384)]
    raw(name, post(b"/v1/" + name.encode(),
        b"".join(chunk(p) for p in parts) + b"0\r\n\r\n"))
EOF
chmod 644 "$TB_DIR/sbx-bin/chunked.py"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/chunked.py" "$CA" "$PH" 2>&1)
echo "$out" | sed 's/^/# /'
get() { sed -n "s/^$1=//p" <<<"$out"; }
tb_expect_eq "http.client, placeholder split across chunks: 200" 200 "$(get split)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/split "body={\"k\":\"$SECRET\",\"n\":1}" '!h.transfer-encoding' \
    "h.content-length=$((14 + ${#SECRET}))"
tb_expect_eq "a chunk extension: 200" 200 "$(get ext)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/ext "body={\"k\":\"$SECRET\"}" '!h.transfer-encoding'
tb_expect_eq "a trailer section: forwarded as it came (200)" 200 "$(get trailer)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/trailer "body={\"k\":\"$PH\"}" h.transfer-encoding=chunked \
    h.trailer=X-Sum
tb_expect_eq "bad chunked framing: 400 from egressd" 400 "$(get bad)"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/bad
tb_expect_eq "a request pipelined behind a substituted chunked body" 200,200 \
    "$(get pipelined)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/pipe1 "body={\"k\":\"$SECRET\"}"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/pipe2 method=GET body_len=0
tb_expect_eq "framed in more than 1 MiB + 64 KiB: forwarded as it came" 200 \
    "$(get wire)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/wire h.transfer-encoding=chunked body_len=$((${#PH} + 200008)) \
    "body~^\\{\"k\":\"$PH\"\\} "
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/at '!h.transfer-encoding' \
    "h.content-length=$((1048576 - ${#PH} + ${#SECRET}))" \
    'body~^\{"k":"sub/s3cret v\+1","pad":"x'
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/over h.transfer-encoding=chunked "body~^\\{\"k\":\"$PH\",\"pad\":\"x"

# plain HTTP, a binding with schemes [http] that substitutes in the query
# only: the header keeps its placeholder
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox curl -sS --max-time 8 -4 -H "X-Token: $PH" \
    "http://shared-a.test/v1/p?k=$PH")
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/p \
    "query=k=$PCT" "h.x-token=$PH" server.scheme=http
tb_check_fails "plain HTTP echo: no value" grep -qF "$PCT" <<<"$out"

# --- elsewhere the placeholder stays a placeholder ----------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
# a path the binding does not cover (same host)
tb_sandbox "${C[@]}" -o /dev/null -H "X-Token: $PH" "https://a.test/other/$PH?k=$PH"
# a host bound to another binding (no substitutions): its own header only
tb_sandbox "${C[@]}" -o /dev/null -H "X-Token: $PH" "https://c.test/v1/$PH?k=$PH"
# an unbound host, plain HTTP and TLS (passed through, the origin's own
# certificate)
tb_sandbox curl -sS --max-time 8 -4 -o /dev/null -H "X-Token: $PH" \
    "http://b.test/v1/$PH?k=$PH"
mkdir -p "$TB_DIR/sbx-bin" && chmod 755 "$TB_DIR/sbx-bin"
cat "$CA" "$TB_CA_CERT" >"$TB_DIR/sbx-bin/both.pem"
chmod 644 "$TB_DIR/sbx-bin/both.pem"
tb_sandbox curl -sS --max-time 8 -4 --cacert "$TB_DIR/sbx-bin/both.pem" \
    -o /dev/null -H "X-Token: $PH" "https://b.test/v1/$PH?k=$PH"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    "path=/other/$PH" "query=k=$PH" "h.x-token=$PH"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.sni=c.test "path=/v1/$PH" "query=k=$PH" "h.x-token=$PH" \
    "h.x-api-key=$OTHER"
tb_assert_log --min 2 --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.addr="$TB_ORIGIN_B4" "path=/v1/$PH" "query=k=$PH" "h.x-token=$PH"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    "raw_head~$PCT"

# --- headers that frame the request or name its host are never substituted --
# (a header value that would hold CR or LF after substitution is refused:
# values cannot hold them and the proxy refuses them in client heads, so
# that is covered by the unit tests only)
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" -o /dev/null -H "Forwarded: for=$PH" \
    "https://a.test/v1/fwd"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/fwd \
    "h.forwarded=for=$PH"

# --- the secret never reaches egressd's log or its status ---------------------
st=$(tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/v1/status")
tb_check_fails "status: substitutions are no longer 'not enforced'" \
    grep -qF credentialSubstitutions <<<"$st"
tb_check_fails "status never shows the secret" grep -qF "$SECRET" <<<"$st"
for f in "$TB_EGRESSD_LOG" "$TB_DIR/egressd/stdout" "$TB_DIR/egressd/stderr"; do
	tb_check_fails "the secret never reaches ${f##*/}" grep -qF "$SECRET" "$f"
	tb_check_fails "... nor its percent-encoded form" grep -qF "$PCT" "$f"
done
tb_finish
