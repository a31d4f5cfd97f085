#!/bin/bash
# threat_14_smuggling (THREATS §14, issue 17 acceptance): a corpus of
# hostile request heads sent by the sandbox, over plain HTTP to an allowed
# host and inside TLS to a bound (terminated) host: Content-Length with
# Transfer-Encoding, two Content-Lengths, obfuscated or doubled
# Transfer-Encoding, obs-fold, a bare CR, a NUL, a duplicate Host, a
# malformed request line, a header without a colon, a signed length, an
# oversized head. Each is refused by egressd (4xx, or 501 for a coding it
# does not implement; the connection closed) and
# nothing of it (nor a request smuggled in its body) reaches the origin.
# Then good heads with broken chunked bodies: a prompt 400, and nothing
# behind the break reaches the origin.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
printf 'smuggle-secret\n' >"$TB_DIR/egressd/key"
chmod 600 "$TB_DIR/egressd/key"
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key}}
bindings:
  - name: b-api
    match: {hosts: [b.test]}
    auth: {type: bearer, credential: k}
EOF
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE"
CORPUS=$TB_DIR/sbx-corpus
mkdir -p "$CORPUS"
cp "$(dirname "$0")/../tools/http_client.py" "$CORPUS/"
HC=$CORPUS/http_client.py

# case NAME HEAD-AND-BODY (printf format, %s = host): one corpus file; the
# request's path is /smug-NAME and any request smuggled behind it is
# /smuggled-NAME.
NAMES=()
case_() {
	local n=$1 fmt=$2 h
	for h in a.test b.test; do
		# shellcheck disable=SC2059
		printf "$fmt" "$h" >"$CORPUS/$n.$h"
	done
	NAMES+=("$n")
}
case_ cl-te 'POST /smug-cl-te HTTP/1.1\r\nHost: %s\r\nContent-Length: 49\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled-cl-te HTTP/1.1\r\nHost: x\r\n\r\n'
case_ te-cl 'POST /smug-te-cl HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n2e\r\nGET /smuggled-te-cl HTTP/1.1\r\nHost: x\r\n\r\n\r\n0\r\n\r\n'
case_ two-cl 'POST /smug-two-cl HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\nGET /smuggled-two-cl HTTP/1.1\r\nHost: x\r\n\r\n'
case_ te-space 'POST /smug-te-space HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n'
case_ te-x 'POST /smug-te-x HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n'
case_ te-two 'POST /smug-te-two HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n'
case_ fold 'GET /smug-fold HTTP/1.1\r\nHost: %s\r\nX-A: a\r\n b\r\n\r\n'
case_ bare-cr 'GET /smug-bare-cr HTTP/1.1\r\nHost: %s\r\nX-A: a\rb\r\n\r\n'
case_ nul 'GET /smug-nul HTTP/1.1\r\nHost: %s\r\nX-A: a\000b\r\n\r\n'
case_ two-host 'GET /smug-two-host HTTP/1.1\r\nHost: %s\r\nHost: b.test\r\n\r\n'
case_ line 'GET /smug-line x HTTP/1.1\r\nHost: %s\r\n\r\n'
case_ colon 'GET /smug-colon HTTP/1.1\r\nHost: %s\r\nX-No-Colon\r\n\r\n'
case_ cl-sign 'POST /smug-cl-sign HTTP/1.1\r\nHost: %s\r\nContent-Length: +4\r\n\r\nabcd'
# an oversized head: 100 headers of 1 KiB
big='GET /smug-big HTTP/1.1\r\nHost: %s\r\n'
for i in $(seq 100); do big+="X-Pad-$i: $(head -c 1000 /dev/zero | tr '\0' a)\r\n"; done
case_ big "$big"'\r\n'
chmod 755 "$CORPUS" && chmod 644 "$CORPUS"/*

# both_ways NAME WHAT RE: NAME's file to a.test over plain HTTP and to
# b.test inside TLS; the first line of each reply must match RE
both_ways() {
	local out
	out=$(tb_sandbox "$TB_PY" "$HC" raw a.test 80 "$CORPUS/$1.a.test" | head -n 1)
	tb_expect_match "plain HTTP, $2" "$3" "$out"
	out=$(tb_sandbox "$TB_PY" "$HC" rawtls b.test 443 "$STATE/ca-bundle.crt" \
	    "$CORPUS/$1.b.test" | head -n 1)
	tb_expect_match "terminated TLS, $2" "$3" "$out"
}
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
for n in "${NAMES[@]}"; do
	both_ways "$n" "$n: refused" '^HTTP/1\.1 (4[0-9][0-9]|501) '
done
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'path~^/smug'
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.bad_request

# A good head, then a chunked body whose framing breaks (a size that is
# not hex, data longer than its size, a bare LF, a size past 60 bits),
# with a request behind it. The head went upstream before the body was
# read, so the origin sees it; nothing after the break does, and the
# client gets a 400 at once (the origin cannot answer a request whose
# body will never end: not waited for).
NAMES=()
bcase() {
	case_ "body-$1" "POST /body-$1 HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n$2"
}
bcase size 'zz\r\nGET /smuggled-size HTTP/1.1\r\nHost: x\r\n\r\n0\r\n\r\n'
bcase long '2\r\nabGET /smuggled-long HTTP/1.1\r\nHost: x\r\n\r\n0\r\n\r\n'
bcase bare-lf '3\nabc\r\nGET /smuggled-bare-lf HTTP/1.1\r\nHost: x\r\n\r\n0\r\n\r\n'
bcase big-size '10000000000000000\r\nGET /smuggled-big-size HTTP/1.1\r\nHost: x\r\n\r\n'
chmod 644 "$CORPUS"/body-*
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
# (raw gives up after 5 s: before, egressd waited for the origin until its
# connect timeout and answered nothing)
for n in "${NAMES[@]}"; do
	both_ways "$n" "$n: 400" '^HTTP/1\.1 400 '
done
# behind a pipelined request: its response first, then the 400
printf 'GET /body-first HTTP/1.1\r\nHost: a.test\r\n\r\n' >"$CORPUS/pipe"
cat "$CORPUS/body-long.a.test" >>"$CORPUS/pipe"
chmod 644 "$CORPUS/pipe"
out=$(tb_sandbox "$TB_PY" "$HC" raw a.test 80 "$CORPUS/pipe" | grep '^HTTP/1')
tb_expect_eq "pipelined: the first request answered, then the 400" \
    "HTTP/1.1 200 OK|HTTP/1.1 400 Bad Request" "$(tr -d '\r' <<<"$out" | paste -sd'|')"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/body-first
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'path~^/smuggled'
# a well-formed request on the same paths still works (the corpus is what
# is refused, not the hosts)
out=$(tb_sandbox curl -sS --max-time 5 -4 -o /dev/null -w '%{http_code}' \
    http://a.test/smug-control)
tb_expect_eq "control: a clean request passes" 200 "$out"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/smug-control
tb_finish
