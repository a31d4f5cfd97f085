#!/bin/bash
# proxy_inflight_refusals: every hello proxy_passthrough refuses on the
# proxy path, refused in flight too (issue 36: the same judge, default
# --passthrough-judge auto, the queue on this kernel). For each: the
# client is reset (no TLS alert: egressd never speaks TLS here), egressd
# logs nfq.judged decision=refused with the proxy's reason, and the
# origin's socket for that connection received not one byte (the
# handshake was the client's with the origin; the hello never left the
# queue). A GREASE ECH hello and one split in 100-byte segments pass; one
# in 7-byte segments cannot complete unacknowledged and is refused at the
# hello bound. proxy_passthrough runs on the proxy path (its log lines
# are the proxy's).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

tb_sbx_tool tls_hello.py
TH=$TB_DIR/sbx-bin/tls_hello.py

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
  - {action: allow, target: shared-a.test}
EOF2
)
tb_start_egressd --policy "$pol" --proxy --passthrough-judge auto
tb_assert_log "$TB_EGRESSD_LOG" passthrough.judge path=queue
A4=$TB_ORIGIN_A4 A6=$TB_ORIGIN_A6 C4=$TB_ORIGIN_C4



# egressd logs one refused line per destination and reason a second
# (the log limiter): a case waits until its pair's last one is older
declare -A last=()
spaced()
{
	local k=$1 now
	now=${EPOCHREALTIME//[.,]/}
	if [ -n "${last[$k]:-}" ] && [ $((now - last[$k])) -lt 1100000 ]; then
		sleep "0.$(printf '%06d' $((1100000 - (now - last[$k]))))"
	fi
	last[$k]=${EPOCHREALTIME//[.,]/}
}

# refused DESC REASON NAME ADDR ARGS...: tls_hello.py ARGS (to ADDR:443)
refused()
{
	local desc=$1 reason=$2 name=$3 addr=$4 dst lp me out
	shift 4
	case $addr in *:*) dst="[$addr]:443" ;; *) dst="$addr:443" ;; esac
	spaced "$dst $reason"
	lp=$((20000 + RANDOM % 40000))
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	out=$(tb_sandbox "$TB_PY" "$TH" --lport "$lp" "$@" "$addr" 443 2>&1)
	tb_expect_match "$desc: the client is reset" '^(reset|closed)$' "$out"
	tb_check "$desc: nfq.judged refused reason=$reason" \
	    tb_wait_log_line --since "$me" "$TB_EGRESSD_LOG" nfq.judged \
	    decision=refused "reason=$reason" "name=$name" "dst=$dst"
	tb_expect_match "$desc: the origin's socket received no byte" \
	    '^(0|none)$' "$(tb_origin_rx "$addr" "$lp")"
}

passed()
{
	local desc=$1 addr=$2 dst me
	shift 2
	case $addr in *:*) dst="[$addr]:443" ;; *) dst="$addr:443" ;; esac
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	tb_expect_eq "$desc: the origin's ServerHello comes back" handshake \
	    "$(tb_sandbox "$TB_PY" "$TH" "$@" "$addr" 443 2>&1)"
	tb_check "$desc: nfq.judged passthrough" tb_wait_log_line --since "$me" \
	    "$TB_EGRESSD_LOG" nfq.judged decision=passthrough name=a.test \
	    "dst=$dst"
}

tb_learn a.test shared-a.test
refused "SNI b.test on a.test's address" name_denied b.test "$A4" --sni b.test
refused "SNI 'B.TEST.' (case, trailing dot), IPv6" name_denied b.test "$A6" \
    --sni B.TEST.
refused "SNI shared-b.test on shared-a.test's address (fronting)" \
    name_denied shared-b.test "$C4" --sni shared-b.test
refused "SNI c.test (allowed) on shared-a.test's address before c.test resolved to it" \
    addr_mismatch c.test "$C4" --sni c.test
tb_learn c.test
refused "SNI c.test (allowed) on a.test's address" addr_mismatch c.test \
    "$A4" --sni c.test
refused "no SNI" no_sni "" "$A4" --no-sni
refused "IP-literal SNI" sni_ip "$A4" "$A4" --sni "$A4"
refused "IPv6-literal SNI" sni_ip "$A6" "$A6" --sni "$A6"
refused "ESNI (0xffce), even beside an allowed SNI" esni a.test "$A4" \
    --sni a.test --esni
refused "ECH (0xfe0d) with a denied outer SNI" name_denied b.test "$A4" \
    --sni b.test --ech
refused "ECH without any SNI, IPv6" no_sni "" "$A6" --no-sni --ech
refused "malformed SNI (empty label)" bad_hello "" "$A4" --sni 'a..test'
passed "GREASE ECH with the allowed SNI a.test" "$A4" --sni a.test --ech
passed "IPv6: a hello split in 100-byte segments" "$A6" --sni a.test \
    --split 100
tb_assert_no_log "$TB_EGRESSD_LOG" proxy.closed
# A hello in 7-byte segments: the queue holds them unacknowledged, and
# the client stops at its congestion window (10 segments) long before
# the hello is whole: refused at the hello bound (fail closed; the proxy
# path, which acknowledges, passes it: docs/proxy.md)
refused "a hello split in 7-byte segments" hello_timeout "" "$A4" \
    --sni a.test --split 7

tb_finish
