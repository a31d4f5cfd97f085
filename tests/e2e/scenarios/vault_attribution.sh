#!/bin/bash
# vault_attribution (issue 34 item 3, THREATS 14a): making egressd frame
# the origin's stream wrongly, so that the response to an injected request
# is forwarded as the body of a clean one, unscanned. The binding injects
# the real key (bearer) into GETs to a.test's /v1/*; the fake origin
# echoes it (echo=Authorization).
#   lowercase head: methods are case-sensitive, and the origin (like Go
#   or hyper) answers "head" as an unknown method, with a body. The
#   sandbox first plants a fake response head as a resource (store=),
#   then pipelines on ONE terminated TLS connection "head" of that
#   resource, a clean GET and an injected GET whose echo holds the key.
#   If egressd takes "head" for HEAD, the planted head (Content-Length:
#   60000) becomes the clean GET's response and swallows the rest.
#   CL.0: an origin that answers a POST without reading its body
#   (noread=1) reads the body as a request: a HEAD of a 60000-byte
#   resource. Its answer (Content-Length: 60000, no body) is taken for the
#   clean GET's, whose body then swallows the injected GET's echo.
# Either way the sandbox's bytes must hold no form of the key; on 9cc226d
# both fail. A raw TLS client (tools/raw_tls.py) sends the bytes.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

SECRET=$(tb_random_key)
KEY=$TB_DIR/egressd/key-k
tb_vault_files "$SECRET"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: file, path: $KEY}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [GET, POST]}
    auth: {type: bearer, credential: k}
EOF2
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE"
CA=$STATE/ca-bundle.crt
OUT=$TB_SBX_HOME
tb_sbx_tool raw_tls.py
# raw NAME: send $OUT/NAME.req on one TLS connection to a.test, keep what
# came back in $OUT/NAME.got
raw() {
	tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/raw_tls.py" --idle 3 --max 10 \
	    a.test 443 "$CA" "$OUT/$1.req" "$OUT/$1.got" 2>&1
}
# the status lines the sandbox saw, in order (a body need not end in a
# newline: anywhere on a line)
heads() { tr -d '\r' <"$OUT/$1.got" | grep -aoE 'HTTP/1\.[01] [0-9]{3} [A-Za-z ]*' | tr '\n' ' '; }
# said MARK WHAT COND...: how many requests the origin logged since MARK
# matching COND. What the origin saw is said, not checked: on 9cc226d
# each step reaches it, but egressd may rightly refuse "head" or hold the
# injected GET back behind responses it cannot attribute.
said() {
	local m=$1 what=$2 n
	shift 2
	n=$("$TB_PY" "$TB_LIB_DIR/jsonlog.py" match "$TB_ORIGIN_LOG" --since "$m" \
	    origin.request "$@" 2>/dev/null) || n=0
	echo "# the origin got $what: ${n:-0} time(s)"
}
reached() {
	said "$1" "the injected GET, with the key" method=GET path=/v1/echo \
	    "h.authorization=Bearer $SECRET"
}
injected="GET /v1/echo?echo=Authorization HTTP/1.1\r\nHost: a.test\r\nAuthorization: Bearer fake\r\n\r\n"

# --- the planted response head -----------------------------------------------
fake="HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 60000\r\n\r\n"
printf "$fake" >"$OUT/fake-head"
chmod 644 "$OUT/fake-head"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
code=$(tb_sandbox curl -sS --max-time 8 --cacert "$CA" -o /dev/null \
    -w '%{http_code}' --data-binary "@$OUT/fake-head" \
    'https://a.test/pub/plant?store=fake')
tb_expect_eq "a fake response head planted as a resource (an unbound path)" \
    200 "$code"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/pub/plant \
    '!h.authorization'

# --- lowercase head, a clean GET, an injected GET, pipelined -----------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
printf "head /pub/plant?load=fake&part=body HTTP/1.1\r\nHost: a.test\r\n\r\nGET /pub/clean?bytes=10 HTTP/1.1\r\nHost: a.test\r\n\r\n$injected" \
    >"$OUT/head.req"
r=$(raw head)
echo "# head: $r; response heads seen: $(heads head)"
said "$mark" "'head' of the planted head" method=head path=/pub/plant
reached "$mark"
tb_expect_no_secret "lowercase head pipelined before an injected GET: no form of the secret" \
    "$KEY" "$OUT/head.got"

# --- CL.0: the origin reads a POST's body as the next request -----------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
smuggled="HEAD /pub/s?bytes=60000 HTTP/1.1\r\nHost: a.test\r\n\r\n"
n=$(printf "$smuggled" | wc -c)
printf "POST /pub/cl0?noread=1 HTTP/1.1\r\nHost: a.test\r\nContent-Length: $n\r\n\r\n${smuggled}GET /pub/clean2?bytes=10 HTTP/1.1\r\nHost: a.test\r\n\r\n$injected" \
    >"$OUT/cl0.req"
r=$(raw cl0)
echo "# cl0: $r; response heads seen: $(heads cl0)"
said "$mark" "the smuggled HEAD" method=HEAD path=/pub/s
reached "$mark"
tb_expect_no_secret "CL.0: an origin answering before the body, then an injected GET: no form of the secret" \
    "$KEY" "$OUT/cl0.got"

# --- the controls: framed right, the same echo is redacted -------------------
# (what makes the two above leak is the framing, not the echo)
printf "HEAD /pub/plant?load=fake&part=body HTTP/1.1\r\nHost: a.test\r\n\r\nGET /pub/clean?bytes=10 HTTP/1.1\r\nHost: a.test\r\n\r\n$injected" \
    >"$OUT/HEAD.req"
r=$(raw HEAD)
tb_expect_eq "control: HEAD (uppercase), the clean GET, the injected GET: three responses" \
    "HTTP/1.1 200 OK HTTP/1.1 200 OK HTTP/1.1 200 OK " "$(heads HEAD)"
tb_expect_match "... the echo arrives" '^X-Echo-Authorization: ' \
    "$(tr -d '\r' <"$OUT/HEAD.got")"
tb_expect_no_secret "... redacted" "$KEY" "$OUT/HEAD.got"
printf "POST /pub/cl0 HTTP/1.1\r\nHost: a.test\r\nContent-Length: $n\r\n\r\n${smuggled}GET /pub/clean2?bytes=10 HTTP/1.1\r\nHost: a.test\r\n\r\n$injected" \
    >"$OUT/post.req"
r=$(raw post)
tb_expect_match "control: the same POST to an origin that reads its body: the echo arrives" \
    '^X-Echo-Authorization: ' "$(tr -d '\r' <"$OUT/post.got")"
tb_expect_no_secret "... redacted" "$KEY" "$OUT/post.got"
tb_check_fails "the secret never reaches egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
