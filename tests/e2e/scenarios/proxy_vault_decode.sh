#!/bin/bash
# proxy_vault_decode: --vault-compressed decode. The request a credential
# is injected into asks for identity, but the origin compresses anyway
# (gzip, deflate zlib-wrapped or raw, by length or chunked in 7-byte
# pieces, a gzip event stream): egressd decodes it, masks the secret in
# every rendered form and sends identity, chunked, so curl and python see
# plain redacted text; trailers of a decoded response arrive redacted;
# br is refused with a clear 502 even in this mode, a gzip bomb gets a
# clear 502 naming the bomb, and a response to a request nothing was
# injected into passes compressed and untouched. The secret never reaches
# the client in any form, nor egressd's log.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator: the control API is closed to the sandbox

SECRET=real-secret-value-1
tb_vault_files "$SECRET"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [GET]}
    auth: {type: bearer, credential: k}
EOF2
)
STATE=$TB_DIR/state
TB_EGRESSD_ENV=(EGRESSD_VAULT_COMPRESSED=decode)
tb_start_egressd --policy "$pol" --proxy \
    --trust-dir "$TB_DIR/trust" --state-dir "$STATE" --http-addr ":18080"
CA=$STATE/ca-bundle.crt
C=(curl -sS --max-time 8 --cacert "$CA" -H 'Authorization: Bearer fake-key')
tb_sbx_tool http_client.py
HC=$TB_DIR/sbx-bin/http_client.py
# the secret's rendered forms a response could carry (the origin's forms=
# echo renders them); the base64 ones without padding match either way
B64=$(printf %s "$SECRET" | base64 | tr -d '=')
B64URL=$(tr '+/' '-_' <<<"$B64")
no_secret() # NAME TEXT: no rendered form of the secret in TEXT
{
	tb_check_fails "$1: no secret, raw" grep -qF "$SECRET" <<<"$2"
	tb_check_fails "$1: ... nor base64" grep -qF -e "$B64" -e "$B64URL" <<<"$2"
}

# --- gzip by length: curl without --compressed sees plain text --------------
out=$(tb_sandbox "${C[@]}" -D - \
    'https://a.test/v1/g?echo=Authorization&forms=Authorization&enc=gzip')
hd=$(tr -d '\r' <<<"$out" | sed '/^$/q')
tb_expect_match "gzip: 200" '^HTTP/1.1 200' "$hd"
tb_check_fails "... sent as identity: no Content-Encoding" \
    grep -qi '^Content-Encoding:' <<<"$hd"
tb_check_fails "... nor the compressed length" grep -qi '^Content-Length:' <<<"$hd"
tb_expect_match "... chunked instead" '^Transfer-Encoding: chunked$' "$hd"
tb_expect_match "... the echoed header redacted" \
    '^X-Echo-Authorization: \[REDACTED\]$' "$hd"
tb_expect_match "... the JSON echo decoded, the secret masked" \
    '"authorization": *"\*{26}"' "$out"
tb_expect_match "... its base64 forms masked too" \
    '"b64": *"\*{26}.*"b64url": *"\*{26}"' "$(tr -d '\n' <<<"$out")"
tb_expect_match "... the request asked for identity" \
    '"accept-encoding": *"identity"' "$out"
no_secret "gzip" "$out"
tb_assert_log "$TB_EGRESSD_LOG" vault.compressed outcome=decoded \
    encoding=gzip mode=decode name=a.test

# --- deflate (zlib-wrapped), chunked in 7-byte pieces: python http.client --
PYGET='import http.client, json, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
c = http.client.HTTPSConnection("a.test", context=ctx, timeout=8)
c.request("GET", sys.argv[2], headers={"Authorization": "Bearer fake-key",
                                       "Accept-Encoding": "gzip, deflate"})
r = c.getresponse()
body = r.read()
print("status", r.status, "ce", r.getheader("Content-Encoding"))
print(body.decode("latin-1"))
j = json.loads(body)
print("auth", j["h"]["authorization"])'
for enc in deflate rawdeflate; do
	out=$(tb_sandbox "$TB_PY" -c "$PYGET" "$CA" \
	    "/v1/d?echo=Authorization&forms=Authorization&enc=$enc&chunked=1&split=7")
	tb_expect_match "$enc, 7-byte chunks: python gets plain JSON" \
	    '^status 200 ce None$' "$out"
	tb_expect_match "... that parses, the secret masked" \
	    '^auth \*{26}$' "$out"
	no_secret "$enc" "$out"
done
tb_assert_log "$TB_EGRESSD_LOG" vault.compressed outcome=decoded \
    encoding=deflate name=a.test

# --- a large decoded body: streamed under the watermark, intact ---------------
want=$("$TB_PY" -c 'import hashlib, sys
n, out, i, size = int(sys.argv[1]), [], 0, 0
while size < n:
    ln = b"%d %s\n" % (i, hashlib.sha256(b"%d" % i).hexdigest().encode())
    out.append(ln); size += len(ln); i += 1
print(hashlib.sha256(b"".join(out)[:n]).hexdigest())' 6000000)
for q in 'enc=gzip' 'enc=deflate&chunked=1'; do
	got=$(tb_sandbox "${C[@]}" "https://a.test/v1/big?text=6000000&$q" |
	    sha256sum | cut -d' ' -f1)
	tb_expect_eq "6 MB of text, $q: decoded whole, byte for byte" "$want" "$got"
done

# --- trailers of a decoded response -----------------------------------------
tr=$(tb_sandbox "$TB_PY" "$HC" trailers \
    'https://a.test/v1/t?echo=Authorization&enc=gzip&trailer=1&trailer_extra=1&split=5' \
    "$CA" 'Authorization: Bearer fake-key')
tb_expect_match "gzip with trailers: decoded, the trailer section ends cleanly" \
    '^END$' "$tr"
tb_expect_match "... the echoed trailer redacted" \
    '^T X-Echo-Authorization: \[REDACTED\]$' "$tr"
tb_check_fails "... no Content-Encoding left" grep -qi '^H Content-Encoding' <<<"$tr"
tb_check_fails "... framing fields sent as trailers dropped" \
    grep -qiE '^T (Content-Length|Transfer-Encoding):' <<<"$tr"
no_secret "trailers" "$tr"

# --- a gzip event stream: each event as it is produced, decoded -------------
sse=$(tb_sandbox "$TB_PY" "$HC" sse \
    'https://a.test/v1/ev?sse=3&gap_ms=700&enc=gzip&echo=Authorization' "$CA")
tb_expect_match "gzip SSE: three events, decoded, the echo masked" \
    '^0 Authorization=\*{26} .*
1 Authorization=\*{26} .*
2 Authorization=\*{26} ' "$sse"
tb_check "... each as it is produced (nothing held for the whole stream)" \
    "$TB_PY" -c 'import sys; t=[float(l.split()[-1]) for l in sys.argv[1].splitlines()]; sys.exit(0 if t[2]-t[0] > 1.0 else 1)' "$sse"
no_secret "sse" "$sse"

# --- refused: br (not decoded in any mode), an HTTP/1.0 client --------------
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
out=$(tb_sandbox "${C[@]}" -w '\n%{http_code}' \
    'https://a.test/v1/b?echo=Authorization&enc=br')
tb_expect_match "br: 502" '502$' "$out"
tb_expect_match "... saying why" '^egressd: vault_compressed: ' "$out"
no_secret "br" "$out"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" vault.compressed \
    outcome=refused encoding=br reason=unsupported_encoding
out=$(tb_sandbox "${C[@]}" --http1.0 -w '\n%{http_code}' \
    'https://a.test/v1/h10?echo=Authorization&enc=gzip')
tb_expect_match "gzip to an HTTP/1.0 client (no chunked framing): 502" '502$' "$out"
no_secret "http/1.0" "$out"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" vault.compressed \
    outcome=refused encoding=gzip reason=http10_client

# --- a bomb: 64 MiB of zeros in 64 KiB ---------------------------------------
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
out=$(tb_sandbox "${C[@]}" -w '\n%{http_code} %{size_download}' \
    'https://a.test/v1/bomb?bomb=64')
tb_expect_match "gzip bomb: 502 before any of it went out" '^502 [0-9]+$' \
    "$(tail -n 1 <<<"$out")"
tb_expect_match "... saying it is a decompression bomb" \
    '^egressd: vault_decode_failed: decompression bomb' "$out"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" vault.compressed \
    outcome=failed encoding=gzip reason=ratio
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" proxy.closed \
    reason=vault_decode_failed
code=$(tb_sandbox "${C[@]}" -o /dev/null -w '%{http_code}' \
    'https://a.test/v1/after?enc=gzip')
tb_expect_eq "egressd goes on: the next compressed response is decoded" 200 "$code"

# --- not injected -------------------------------------------------------------
# On an origin connection the secret went over (taken from the pool), a
# request nothing was injected into has its response redacted all the
# same (the origin may echo what it saw before): decoded here.
for _ in $(seq 50); do
	tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics" |
	    grep -qx 'egressd_proxy_upstream_idle 0' || break
	sleep 0.1
done
out=$(tb_sandbox "${C[@]}" -D - -H 'Accept-Encoding: gzip' \
    'https://a.test/other?echo=Authorization&enc=gzip')
tb_expect_match "not injected, on an origin connection that carried the secret: decoded" \
    '"authorization": *"Bearer fake-key"' "$out"
tb_check_fails "... no Content-Encoding left" \
    grep -qi '^Content-Encoding:' <<<"$(tr -d '\r' <<<"$out")"
# On one no credential went over (the pool's closed first), decoded all
# the same: every response of a bound origin is redacted (it may give
# back what it stored of an earlier request).
for _ in $(seq 80); do
	tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics" |
	    grep -qx 'egressd_proxy_upstream_idle 0' && break
	sleep 0.1
done
out=$(tb_sandbox "${C[@]}" -D - \
    'https://a.test/other?echo=Authorization&enc=gzip')
tb_expect_match "no binding matched, clean connection: decoded" \
    '"authorization": *"Bearer fake-key"' "$out"
tb_check_fails "... no Content-Encoding left" \
    grep -qi '^Content-Encoding:' <<<"$(tr -d '\r' <<<"$out")"

# --- the operator's view -------------------------------------------------------
met=$(tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics")
tb_expect_match "metrics: decoded responses counted" \
    'egressd_vault_compressed_responses_total\{outcome="decoded"\} ([5-9]|[1-9][0-9])' "$met"
tb_expect_match "... refused ones" \
    'egressd_vault_compressed_responses_total\{outcome="refused"\} 2' "$met"
tb_expect_match "... and the bomb" \
    'egressd_vault_compressed_responses_total\{outcome="failed"\} 1' "$met"
no_secret "metrics" "$met"
tb_check_fails "the secret never reaches egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
