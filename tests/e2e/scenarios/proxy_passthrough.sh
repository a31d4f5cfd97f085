#!/bin/bash
# proxy_passthrough: the transparent proxy's pass-through slice (issue 17),
# as real clients in the sandbox see it. Allowed names pass through
# untouched (bytes identical, the origin's own certificate, IPv4 and IPv6,
# a GREASE ECH hello, a hello split in 7-byte segments); refused: a denied
# SNI on an allowed address (also upper case with a trailing dot), fronting
# on a shared address, an allowed name on an address it never resolved to,
# no SNI, an IP-literal SNI, ESNI, ECH with a denied SNI, a malformed
# hello, DoH to an allowed address under a denied SNI. Plain HTTP is judged
# per request by Host: absolute form to a denied host, a pipelined second
# request with a denied Host, no Host, an allowed Host on another name's
# address. Every refusal is checked three ways: what the client got, the
# proxy.refused line with its reason, and that the origin saw nothing.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

# The sandbox runs the tools from its own bin directory.
tb_sbx_tool tls_hello.py http_client.py
TH=$TB_DIR/sbx-bin/tls_hello.py
HC=$TB_DIR/sbx-bin/http_client.py

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
  - {action: allow, target: shared-a.test}
EOF2
)
# the proxy's pass-through path (its proxy.refused/proxy.closed lines);
# the same hellos judged in flight: proxy_inflight_refusals
tb_start_egressd --policy "$pol" --proxy --passthrough-judge "${PT_JUDGE:-proxy}"
tb_assert_log "$TB_EGRESSD_LOG" proxy.listening port=18081
tb_assert_log "$TB_EGRESSD_LOG" passthrough.judge path=${PT_JUDGE:-proxy}

A4=$TB_ORIGIN_A4 A6=$TB_ORIGIN_A6 C4=$TB_ORIGIN_C4
X300K=$(head -c 300000 /dev/zero | tr '\0' x | sha256sum | cut -d' ' -f1)
TAG=$RANDOM$RANDOM


# expect_log DESC [--since OFF] FILE EV COND...: a matching line appears
# (bounded wait: proxy.closed follows the client's exit).
expect_log()
{
	local desc=$1
	shift
	if tb_wait_log_line "$@" >/dev/null; then
		tb_pass "$desc"
		return 0
	fi
	tb_fail "$desc (no line: $*)"
	tb_egressd_dump
	return 1
}

# refused_logged DESC PROTO REASON NAME DST MARK: the proxy.refused line of
# this refusal, written since MARK. egressd logs one line per (dst, reason)
# per second (log_limiter, PROXY_LOG_RATE): when none was written, the one
# it was folded into must be there, at most 1 s before this connection's
# proxy.closed, and no line since MARK may name another reason or name.
refused_logged()
{
	local desc=$1 proto=$2 reason=$3 name=$4 dst=$5 mark=$6 out rc=0
	out=$("$TB_PY" - "$TB_EGRESSD_LOG" "$mark" "$proto" "$reason" "$name" \
	    "$dst" <<'PY'
import json, sys, datetime
path, mark, proto, reason, name, dst = sys.argv[1:]
mark = int(mark)
def ts(r):
    return datetime.datetime.fromisoformat(r["ts"].replace("Z", "+00:00")).timestamp()
before, since, closed = [], [], None
with open(path, "rb") as f:
    off = 0
    for raw in f:
        at, off = off, off + len(raw)
        try:
            r = json.loads(raw)
        except ValueError:
            continue
        if r.get("dst") != dst:
            continue
        if r.get("ev") == "proxy.refused" and r.get("proto") == proto:
            (since if at >= mark else before).append(r)
        elif (r.get("ev") == "proxy.closed" and at >= mark and
              r.get("decision") == "refused" and closed is None):
            closed = r
mine = [r for r in since if r.get("reason") == reason and r.get("name") == name]
if mine:
    print("logged"); sys.exit(0)
if since:
    print("wrong line: %s" % json.dumps(since[0])); sys.exit(1)
prev = [r for r in before if r.get("reason") == reason]
if prev and closed is not None and 0 <= ts(closed) - ts(prev[-1]) < 1.05:
    print("deduplicated into the line of %.3f s before" % (ts(closed) - ts(prev[-1])))
    sys.exit(0)
print("none"); sys.exit(1)
PY
) || rc=$?
	if [ "$rc" -eq 0 ]; then
		tb_pass "$desc: proxy.refused reason=$reason name=$name ($out)"
		return 0
	fi
	tb_fail "$desc: proxy.refused proto=$proto reason=$reason name=$name dst=$dst ($out)"
	return 1
}

# origin_sync: a request straight from the internet namespace (never
# through the proxy) and its log line: whatever reached the origin before
# is logged by now.
origin_sync()
{
	local p="/tb-sync-$RANDOM$RANDOM"
	tb_net curl -s -o /dev/null --max-time 3 "http://$TB_ORIGIN_B4$p"
	tb_wait_log_line "$TB_ORIGIN_LOG" origin.request "path=$p" \
	    >/dev/null || tb_die "origin sync: $p not logged"
}

# origin_saw_nothing DESC MARK ADDR PORT: not one line (request, bad
# request, TLS error) at that listener since MARK.
origin_saw_nothing()
{
	local n rc=0
	origin_sync
	n=$("$TB_PY" "$TB_LIB_DIR/jsonlog.py" match "$TB_ORIGIN_LOG" \
	    --since "$2" --min 0 --max 0 '*' "server.addr=$3" \
	    "server.port=$4") || rc=$?
	if [ "$rc" -eq 0 ]; then
		tb_pass "$1"
		return 0
	fi
	tb_fail "$1 ($n lines at $3:$4)"
	"$TB_PY" "$TB_LIB_DIR/jsonlog.py" show "$TB_ORIGIN_LOG" --since "$2" \
	    '*' "server.addr=$3" "server.port=$4" | head -n 3 | sed 's/^/#   /'
	return 1
}

# refused_tls DESC REASON NAME DST ADDR -- CLIENT...: CLIENT (run in the
# sandbox) prints an alert (tls_hello.py) or fails (curl); egressd logs
# proxy.refused; the origin at ADDR:443 saw nothing.
refused_tls()
{
	local desc=$1 reason=$2 name=$3 dst=$4 addr=$5 mo me out rc=0
	shift 6
	mo=$(tb_log_mark "$TB_ORIGIN_LOG")
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	out=$(tb_sandbox "$@" 2>&1) || rc=$?
	case $1 in
	curl)
		if [ "$rc" -ne 0 ]; then
			tb_pass "$desc: curl fails (exit $rc)"
		else
			tb_fail "$desc: curl succeeded ($(head -c 200 <<<"$out"))"
		fi
		;;
	*) tb_expect_match "$desc: the client gets a TLS alert" \
	    '^alert:[0-9]+$' "$out" ;;
	esac
	expect_log "$desc: proxy.closed decision=refused reason=$reason" \
	    --since "$me" "$TB_EGRESSD_LOG" proxy.closed decision=refused \
	    proto=tls "reason=$reason" "name=$name" "dst=$dst" up=0
	refused_logged "$desc" tls "$reason" "$name" "$dst" "$me"
	origin_saw_nothing "$desc: the origin saw nothing" "$mo" "$addr" 443
}

# passed_tls DESC NAME DST -- tls_hello.py ARGS...: a ServerHello comes
# back (the hello reached the origin) and egressd says passthrough.
passed_tls()
{
	local desc=$1 name=$2 dst=$3 me
	shift 4
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	tb_expect_eq "$desc: the origin's ServerHello comes back" handshake \
	    "$(tb_sandbox "$TB_PY" "$TH" "$@" 2>&1)"
	expect_log "$desc: proxy.closed decision=passthrough" --since "$me" \
	    "$TB_EGRESSD_LOG" proxy.closed decision=passthrough "name=$name" \
	    "dst=$dst"
}

# raw_http NAME ADDR PORT PAYLOAD: send PAYLOAD (printf format) over
# plain TCP from the sandbox, print what came back.
raw_http()
{
	local f="$TB_SBX_HOME/$1.req"
	# shellcheck disable=SC2059
	printf "$4" >"$f"
	chmod 644 "$f"
	tb_sandbox "$TB_PY" "$HC" raw "$2" "$3" "$f" 2>&1
}

# --- allowed: pass-through, bytes untouched -------------------------------------
for fam in 4 6; do
	if [ "$fam" = 4 ]; then addr=$A4 dst="$A4:443"; else addr=$A6 dst="[$A6]:443"; fi
	mo=$(tb_log_mark "$TB_ORIGIN_LOG")
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	sum=$(tb_sandbox curl -"$fam" -sS -f --max-time 10 \
	    "https://a.test/big$fam-$TAG?bytes=300000" | sha256sum | cut -d' ' -f1)
	tb_expect_eq "IPv$fam: https://a.test/ 300000 bytes through the proxy, identical" \
	    "$X300K" "$sum"
	tb_assert_log --since "$mo" --min 1 --max 1 "$TB_ORIGIN_LOG" \
	    origin.request server.sni=a.test "server.addr=$addr" \
	    "path=/big$fam-$TAG"
	expect_log "IPv$fam: proxy.closed passthrough for $dst, every byte relayed" \
	    --since "$me" "$TB_EGRESSD_LOG" proxy.closed decision=passthrough \
	    proto=tls name=a.test "dst=$dst" 'down~^[0-9]{6,}$'
	tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" proxy.refused
done
tb_check "the client verified the origin's own certificate (test CA only)" \
    tb_sandbox curl -sS -f -o /dev/null --max-time 5 \
    -w '%{ssl_verify_result}\n' https://a.test/cert

# --- denied SNI on an allowed (learned) address ---------------------------------
tb_learn a.test
refused_tls "SNI b.test on a.test's address" name_denied b.test "$A4:443" "$A4" \
    -- curl -sS -o /dev/null --max-time 5 --resolve "b.test:443:$A4" \
    "https://b.test/deny-$TAG"
refused_tls "SNI 'B.TEST.' (case, trailing dot) on a.test's address" \
    name_denied b.test "$A4:443" "$A4" \
    -- "$TB_PY" "$TH" --sni 'B.TEST.' "$A4" 443
tb_assert_no_log "$TB_ORIGIN_LOG" '*' 'server.sni~(?i)^b\.test\.?$'

# --- fronting on a shared address; an allowed name on another's address -----------
tb_learn shared-a.test
refused_tls "SNI shared-b.test on shared-a.test's address (fronting)" \
    name_denied shared-b.test "$C4:443" "$C4" \
    -- curl -sS -o /dev/null --max-time 5 --resolve "shared-b.test:443:$C4" \
    "https://shared-b.test/front-$TAG"
refused_tls "SNI c.test (allowed) on shared-a.test's address before c.test resolved to it" \
    addr_mismatch c.test "$C4:443" "$C4" \
    -- "$TB_PY" "$TH" --sni c.test "$C4" 443
tb_learn c.test
refused_tls "SNI c.test (allowed) on a.test's address" \
    addr_mismatch c.test "$A4:443" "$A4" \
    -- curl -sS -o /dev/null --max-time 5 --resolve "c.test:443:$A4" \
    "https://c.test/mismatch-$TAG"
tb_check "c.test on its own address passes" \
    tb_sandbox curl -sS -f -o /dev/null --max-time 5 https://c.test/
tb_check "shared-a.test on the shared address passes" \
    tb_sandbox curl -sS -f -o /dev/null --max-time 5 https://shared-a.test/

# --- hellos curl cannot send --------------------------------------------------------
tb_learn a.test
refused_tls "no SNI" no_sni "" "$A4:443" "$A4" \
    -- "$TB_PY" "$TH" --no-sni "$A4" 443
refused_tls "IP-literal SNI" sni_ip "$A4" "$A4:443" "$A4" \
    -- "$TB_PY" "$TH" --sni "$A4" "$A4" 443
refused_tls "ESNI (0xffce), even beside an allowed SNI" esni a.test \
    "$A4:443" "$A4" -- "$TB_PY" "$TH" --sni a.test --esni "$A4" 443
refused_tls "ECH (0xfe0d) with a denied outer SNI" name_denied b.test \
    "$A4:443" "$A4" -- "$TB_PY" "$TH" --sni b.test --ech "$A4" 443
refused_tls "ECH without any SNI" no_sni "" "$A4:443" "$A4" \
    -- "$TB_PY" "$TH" --no-sni --ech "$A4" 443
refused_tls "malformed SNI (empty label)" bad_hello "" "$A4:443" "$A4" \
    -- "$TB_PY" "$TH" --sni 'a..test' "$A4" 443
passed_tls "GREASE ECH with the allowed SNI a.test" a.test "$A4:443" \
    -- --sni a.test --ech "$A4" 443
passed_tls "a hello split in 7-byte segments" a.test "$A4:443" \
    -- --sni a.test --split 7 "$A4" 443

# --- DoH to an allowed address under a denied SNI ------------------------------------
# a DNS query for a.test A, wire format
"$TB_PY" -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(
    "abcd01000001000000000000") + b"\x01a\x04test\x00" + b"\x00\x01\x00\x01")' \
    >"$TB_SBX_HOME/q.bin"
chmod 644 "$TB_SBX_HOME/q.bin"
refused_tls "DoH POST under SNI dns.b.test to a.test's address" name_denied \
    dns.b.test "$A4:443" "$A4" \
    -- curl -sS -o /dev/null --max-time 5 --resolve "dns.b.test:443:$A4" \
    -H 'content-type: application/dns-message' -X POST \
    --data-binary @q.bin https://dns.b.test/dns-query
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request path=/dns-query

# --- IPv6 refusals ----------------------------------------------------------------
tb_learn a.test c.test
refused_tls "IPv6: SNI b.test on a.test's address" name_denied b.test \
    "[$A6]:443" "$A6" \
    -- curl -6 -sS -o /dev/null --max-time 5 --resolve "b.test:443:[$A6]" \
    "https://b.test/deny6-$TAG"
refused_tls "IPv6: no SNI" no_sni "" "[$A6]:443" "$A6" \
    -- "$TB_PY" "$TH" --no-sni "$A6" 443
refused_tls "IPv6: IPv6-literal SNI" sni_ip "$A6" "[$A6]:443" "$A6" \
    -- "$TB_PY" "$TH" --sni "$A6" "$A6" 443
refused_tls "IPv6: c.test on a.test's address" addr_mismatch c.test \
    "[$A6]:443" "$A6" -- "$TB_PY" "$TH" --sni c.test "$A6" 443
passed_tls "IPv6: a hello split in 7-byte segments" a.test "[$A6]:443" \
    -- --sni a.test --split 7 "$A6" 443

# --- plain HTTP: each request judged by its Host --------------------------------------
tb_learn a.test c.test
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
me=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_check "http://a.test/ through the proxy" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 "http://a.test/plain-$TAG"
tb_assert_log --since "$mo" --min 1 --max 1 "$TB_ORIGIN_LOG" origin.request \
    "server.addr=$A4" server.port=80 h.host=a.test "path=/plain-$TAG"
expect_log "plain HTTP: proxy.closed passthrough for $A4:80" --since "$me" \
    "$TB_EGRESSD_LOG" proxy.closed decision=passthrough proto=http \
    name=a.test "dst=$A4:80"
sum=$(tb_sandbox curl -6 -sS -f --max-time 10 \
    "http://a.test/plain6-$TAG?bytes=300000" | sha256sum | cut -d' ' -f1)
tb_expect_eq "IPv6: http://a.test/ 300000 bytes, identical" "$X300K" "$sum"

# refused_http DESC STATUS-ERE REASON NAME ADDR DST PAYLOAD: the client gets
# an egressd refusal with Connection: close; the origin's ADDR:80 saw
# nothing since the send.
refused_http()
{
	local desc=$1 st=$2 reason=$3 name=$4 addr=$5 dst=$6 mo me out
	mo=$(tb_log_mark "$TB_ORIGIN_LOG")
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	out=$(raw_http "req$RANDOM" "$addr" 80 "$7")
	tb_expect_match "$desc: HTTP $st" "^HTTP/1\\.[01] $st " "$out"
	tb_expect_match "$desc: Connection: close" \
	    $'^[Cc]onnection: close\r?$' "$out"
	tb_expect_match "$desc: body names the reason" \
	    "^egressd: $reason\$" "$out"
	expect_log "$desc: proxy.closed decision=refused reason=$reason" \
	    --since "$me" "$TB_EGRESSD_LOG" proxy.closed decision=refused \
	    proto=http "reason=$reason" "name=$name" "dst=$dst" up=0
	refused_logged "$desc" http "$reason" "$name" "$dst" "$me"
	origin_saw_nothing "$desc: the origin saw nothing" "$mo" "$addr" 80
}

refused_http "absolute form to denied b.test" '40[03]' name_denied b.test \
    "$A4" "$A4:80" \
    "GET http://b.test/abs-$TAG HTTP/1.1\r\nHost: b.test\r\n\r\n"
refused_http "no Host (HTTP/1.0)" '40[03]' no_host "" "$A4" "$A4:80" \
    "GET /nohost-$TAG HTTP/1.0\r\n\r\n"
refused_http "Host c.test (allowed) on a.test's address" 403 addr_mismatch \
    c.test "$A4" "$A4:80" \
    "GET /mismatch-$TAG HTTP/1.1\r\nHost: c.test\r\n\r\n"
refused_http "IPv6: Host b.test on a.test's address" 403 name_denied b.test \
    "$A6" "[$A6]:80" \
    "GET /deny6-$TAG HTTP/1.1\r\nHost: b.test\r\n\r\n"

# absolute form naming another host than Host: 400, nothing forwarded
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(raw_http absmix "$A4" 80 \
    "GET http://b.test/absmix-$TAG HTTP/1.1\r\nHost: a.test\r\n\r\n")
tb_expect_match "absolute form b.test with Host a.test: refused (400/403)" \
    '^HTTP/1\.[01] 40[03] ' "$out"
origin_saw_nothing "... the origin saw nothing" "$mo" "$A4" 80

# pipelined: the first request (a.test) is answered, the second (b.test)
# is refused and never forwarded, nor anything after it
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
me=$(tb_log_mark "$TB_EGRESSD_LOG")
out=$(raw_http pipe "$A4" 80 "GET /pipe1-$TAG HTTP/1.1\r\nHost: a.test\r\n\r\nGET /pipe2-$TAG HTTP/1.1\r\nHost: b.test\r\n\r\nGET /pipe3-$TAG HTTP/1.1\r\nHost: a.test\r\n\r\n")
tb_expect_eq "pipelined: one 200 then one 403, nothing more" "200 403" \
    "$(grep -aoE '^HTTP/1\.[01] [0-9]{3}' <<<"$out" | awk '{print $2}' | paste -sd' ')"
tb_expect_match "pipelined: the refusal names the reason" \
    '^egressd: name_denied$' "$out"
expect_log "pipelined: proxy.closed refused, naming the refused request's Host" \
    --since "$me" "$TB_EGRESSD_LOG" proxy.closed decision=refused \
    proto=http reason=name_denied name=b.test "dst=$A4:80"
refused_logged "pipelined" http name_denied b.test "$A4:80" "$me"
origin_sync
tb_assert_log --since "$mo" --min 1 --max 1 "$TB_ORIGIN_LOG" \
    '*' "server.addr=$A4" server.port=80
tb_assert_log --since "$mo" --min 1 --max 1 "$TB_ORIGIN_LOG" \
    origin.request "path=/pipe1-$TAG" h.host=a.test
tb_assert_no_log "$TB_ORIGIN_LOG" '*' "raw_head~/pipe[23]-$TAG"

# --- nothing denied ever reached an origin ---------------------------------------------
origin_sync
tb_assert_no_log "$TB_ORIGIN_LOG" '*' 'server.sni~^(b|shared-b|dns\.b)\.test$'
tb_assert_no_log "$TB_ORIGIN_LOG" '*' 'h.host~(?i)^b\.test'
tb_assert_no_log "$TB_ORIGIN_LOG" '*' "raw_head~(deny|deny6|front|mismatch|abs|absmix|nohost)-$TAG"
tb_finish
