#!/bin/bash
# proxy_inflight_kernel: the in-kernel judge (issue 36, docs/proxy.md "The
# judge in the kernel"), live. An address the resolver learned for a name,
# or a hello the queue passed, teaches the kernel its (SNI, address,
# port); connections naming the same pass in the kernel (BPF, run by
# nftables) with no trip through egressd; anything else still goes to
# the queue.
#  k. a.test, learned: its connections (IPv4 and IPv6, 21 in a row, the
#     first too: the resolver taught the kernel) pass in the kernel:
#     /v1/status counts them, no packet of theirs is queued, each has
#     its nfq.judged line (by=kernel, from the judge's audit ring), the
#     origin serves each; after a commit the next is judged from the queue,
#     which teaches the kernel again;
#  l. fronting on a taught address: SNI b.test (denied) and c.test
#     (allowed, another address) to a.test's address still reach the
#     queue and are refused there (name_denied, addr_mismatch); the
#     origin's socket receives no byte;
#  m. a tightening: a stream the kernel passed whose SNI is denied while
#     its address stays allowed for another name is cut (judged again by
#     the SNI the kernel kept), and what the kernel was taught is void
#     (the next hello with that SNI to that address is refused by the
#     queue);
#  p. names sharing an address (n1..n10.many.test on B4): a name pushed
#     out of the 8 an address keeps is forgotten by the kernel at that
#     address alone (its hello goes to the queue, refused addr_mismatch),
#     a.test's verdict on A4 stands (passed in the kernel, nothing
#     queued), the newest names still pass in the kernel;
#  n. kill -9: the judge's table goes with egressd at once, and a new
#     connection naming a taught name gets no payload through;
#  o. --kernel-judge off: the queue judges every hello, said in the
#     status and /metrics.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

tb_sbx_tool tls_hello.py inflight_hello.py
IH=$TB_DIR/sbx-bin/inflight_hello.py

# n1..n10.many.test all on b.test's address (B4), as a CDN's names share
# its addresses (section p), served by dns2 with the zone
conf=$TB_DIR/many.conf
for i in $(seq 10); do
	echo "host-record=n$i.many.test,$TB_ORIGIN_B4"
done >"$conf"
tb_dns_start dns2 "$TB_DNS2_IP4" -- --conf-file="$conf"

TB_EGRESSD_TOKEN="ifk-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
  - {action: allow, target: shared-a.test}
  - {action: allow, target: "*.many.test"}
EOF2
)
tb_start_egressd --policy "$pol" --proxy --passthrough-judge queue \
    --dns-upstream "$TB_DNS2_IP4"
tb_assert_log "$TB_EGRESSD_LOG" passthrough.kernel_judge judge=bpf why=bpf

A4=$TB_ORIGIN_A4 B4=$TB_ORIGIN_B4 C4=$TB_ORIGIN_C4
# the local ports chosen below are above the ephemeral range (32768-60999),
# so no connection of curl's own holds one
TAG=$RANDOM$RANDOM

# kstat: "judge passed missed queuedPackets judged" from /v1/status
kstat()
{
	[ "$(tb_host_api GET "http://$TB_SBX_HOST_IP4:18080/v1/status")" = 200 ] ||
	    { echo "status failed"; return; }
	"$TB_PY" -c 'import json,sys; p=json.load(open(sys.argv[1]))["passthrough"]
k=p.get("kernelJudge", {})
print(k.get("judge"), k.get("passed"), k.get("missed"), p["queuedPackets"], p["judged"])' \
	    "$TB_DIR/api.out"
}

# --- k. taught by the resolver, and by the queue --------------------------------
tb_learn a.test c.test shared-a.test
read -r j p0 m0 q0 _ <<<"$(kstat)"
tb_expect_eq "k: status: kernelJudge.judge bpf" bpf "$j"
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
ok=0
for i in $(seq 1 20); do
	tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 \
	    "https://a.test/k$i-$TAG" && ok=$((ok + 1))
done
tb_sandbox curl -6 -sS -f -o /dev/null --max-time 5 \
    "https://a.test/k6-$TAG" && ok=$((ok + 1))
tb_expect_eq "k: 21 connections to a.test (20 IPv4, 1 IPv6) pass" 21 "$ok"
read -r _ p1 m1 q1 _ <<<"$(kstat)"
tb_expect_eq "k: ... all 21 passed in the kernel, the first too: the resolver taught it (kernelJudge.passed $p0 -> $p1)" \
    21 "$((p1 - p0))"
tb_expect_eq "k: ... not one of their packets was queued (queuedPackets $q0)" \
    "$q0" "$q1"
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" nfq.judged by=queue
# each in the log all the same, as the queue logs its own passes (the
# kernel's record, read on egressd's tick)
tb_check "k: ... each logged: 21 nfq.judged passthrough by=kernel name=a.test" \
    tb_wait_cmd 5 tb_assert_log --since "$me" --min 21 --max 21 \
    "$TB_EGRESSD_LOG" nfq.judged decision=passthrough by=kernel name=a.test
tb_assert_log --since "$me" --min 20 --max 20 "$TB_EGRESSD_LOG" nfq.judged \
    decision=passthrough by=kernel name=a.test "dst=$A4:443"
tb_assert_log --since "$mo" --min 21 --max 21 "$TB_ORIGIN_LOG" \
    origin.request server.sni=a.test "path~^/k[0-9]+-$TAG\$"
# a commit (an unrelated rule) voids every verdict: the next hello is the
# queue's, which teaches the kernel again
tb_expect_eq "k: PATCH allow other.test: 200" 200 \
    "$(tb_host_api PATCH "http://$TB_SBX_HOST_IP4:18080/policy" \
        '[{"action":"allow","target":"other.test"}]')"
# (no DNS now: an answer's address teaches the kernel as it is learned)
me=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_check "k: after the commit, https://a.test/ passes" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 \
    --resolve "a.test:443:$A4" "https://a.test/kq-$TAG"
tb_check "k: ... judged from the queue" tb_wait_log_line --since "$me" \
    "$TB_EGRESSD_LOG" nfq.judged decision=passthrough by=queue name=a.test \
    "dst=$A4:443"
read -r _ p2 _ q2 _ <<<"$(kstat)"
tb_check "k: the next one passes" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 \
    --resolve "a.test:443:$A4" "https://a.test/kk-$TAG"
read -r _ p3 m3 q3 _ <<<"$(kstat)"
tb_expect_eq "k: ... in the kernel again (taught by the queue), nothing queued" \
    "1 0" "$((p3 - p2)) $((q3 - q2))"
tb_expect_match "k: the judge's table is in force (egressd_kjudge)" \
    'table inet egressd_kjudge' "$(tb_sandbox_root nft list tables 2>&1)"

# refused SEC WHAT SNI ADDR WHY LP SINCE: curl from local port LP naming
# SNI to ADDR:443 is reset ("SEC: WHAT"), the queue refused it for WHY
# (an nfq.judged line after log offset SINCE), and the origin's socket
# received no byte (curl -k: what is judged is the hello)
refused()
{
	local sec=$1 what=$2 sni=$3 addr=$4 why=$5 lp=$6 since=$7 out
	out=$(tb_sandbox curl -4 -sS -k -o /dev/null --max-time 5 \
	    --local-port "$lp" --resolve "$sni:443:$addr" \
	    "https://$sni/$sec-$TAG" 2>&1)
	tb_expect_match "$sec: $what" \
	    '(reset|Connection reset|SSL_ERROR_SYSCALL|errno 104)' "$out"
	tb_check "$sec: ... refused by the queue ($why)" tb_wait_log_line \
	    --since "$since" "$TB_EGRESSD_LOG" nfq.judged decision=refused \
	    "reason=$why" "name=$sni" "dst=$addr:443"
	tb_expect_eq "$sec: ... the origin's socket received no byte" 0 \
	    "$(tb_origin_rx "$addr" "$lp")"
}

# --- l. fronting on a taught address: still the queue's --------------------------
for case in "b.test name_denied" "c.test addr_mismatch"; do
	read -r sni why <<<"$case"
	refused l "SNI $sni to a.test's address is reset" "$sni" "$A4" "$why" \
	    $((61000 + RANDOM % 1500)) "$(tb_log_mark "$TB_EGRESSD_LOG")"
done
read -r _ p4 m4 _ <<<"$(kstat)"
tb_expect_eq "l: ... the kernel read both hellos and passed neither" \
    "$p3 2" "$p4 $((m4 - m3))"

# --- m. a tightening voids what the kernel was taught, and cuts its flows ------
tb_check "m: shared-a.test taught (a first connection)" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://shared-a.test/
read -r _ p3 _ <<<"$(kstat)"
cut=$TB_DIR/cut.out
tb_sandbox_bg "$cut" sh -c "curl -4 -sS -f -N --max-time 20 -o /dev/null \
    'https://shared-a.test/m-$TAG?sse=100&gap_ms=100'; echo rc=\$?"
cutpid=$TB_LAST_PID
# kpassed_over N: the kernel passed more than N hellos
kpassed_over()
{
	local p
	read -r _ p _ <<<"$(kstat)"
	[ "$p" -gt "$1" ]
}
tb_check "m: the stream to shared-a.test passed in the kernel" tb_wait_cmd 5 \
    kpassed_over "$p3"
me=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "m: PATCH deny shared-a.test (c.test keeps C4 allowed)" \
    200 "$(tb_host_api PATCH "http://$TB_SBX_HOST_IP4:18080/policy" \
        '[{"action":"deny","target":"shared-a.test"}]')"
t0=$(date +%s%N)
wait "$cutpid"
el=$((($(date +%s%N) - t0) / 1000000))
tb_expect_match "m: the stream the kernel passed is cut (curl fails)" \
    'rc=(18|56|35|28|7)' "$(tail -n 1 "$cut")"
if [ "$el" -le 3000 ]; then
	tb_pass "m: ... within ${el} ms of the PATCH"
else
	tb_fail "m: ... only after ${el} ms"
fi
tb_check "m: ... judged again by the SNI the kernel kept (nfq.rejudged)" \
    tb_wait_log_line --since "$me" "$TB_EGRESSD_LOG" nfq.rejudged
refused m "shared-a.test, taught before the PATCH, is now reset on C4" \
    shared-a.test "$C4" name_denied $((62500 + RANDOM % 1500)) "$me"

# --- p. names pushed out of a shared address: that pair alone is forgotten -------
# An address keeps its 8 newest names; a 9th pushes the oldest out. The
# kernel forgets that name at that address, and nothing else: a.test,
# taught on A4, still passes in the kernel. (m's commit voided every
# verdict: a.test is taught again first.)
tb_check "p: a.test taught again (a first connection)" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://a.test/p0
tb_check "p: ... and passed in the kernel the next time" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://a.test/p1
for i in $(seq 10); do
	tb_learn "n$i.many.test"
done
me=$(tb_log_mark "$TB_EGRESSD_LOG")
read -r _ p5 m5 q5 _ <<<"$(kstat)"
tb_check "p: after 10 names learned on B4, a.test passes" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://a.test/p2
read -r _ p6 m6 q6 _ <<<"$(kstat)"
tb_expect_eq "p: ... in the kernel, nothing queued: its verdict stood" \
    "1 0" "$((p6 - p5)) $((q6 - q5))"
# the newest names still pass in the kernel (curl -k: the test bed's
# certificate does not name many.test; what is judged is the hello)
tb_check "p: n10.many.test, among B4's 8 newest, passes" \
    tb_sandbox curl -4 -sS -k -o /dev/null --max-time 5 \
    https://n10.many.test/
read -r _ p7 m7 q7 _ <<<"$(kstat)"
tb_expect_eq "p: ... in the kernel" "1 0" "$((p7 - p6)) $((q7 - q6))"
refused p "n1.many.test, pushed out of B4's names, is reset there" \
    n1.many.test "$B4" addr_mismatch $((63500 + RANDOM % 500)) "$me"
read -r _ p8 m8 _ <<<"$(kstat)"
tb_expect_eq "p: ... the kernel read its hello and had forgotten it" \
    "0 1" "$((p8 - p7)) $((m8 - m7))"

# --- n. kill -9: the table goes with egressd ------------------------------------------
tb_learn c.test
tb_check "n: c.test taught (a first connection)" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://c.test/
tb_check "n: ... and passed in the kernel the next time" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://c.test/
tb_stop_egressd KILL
tb_expect_eq "n: egressd killed (SIGKILL)" 137 "$TB_EGRESSD_STATUS"
tb_expect_eq "n: the judge's table is gone with it" "" \
    "$(tb_sandbox_root nft list tables 2>/dev/null | grep -w egressd_kjudge)"
lp=$((64000 + RANDOM % 1500))
tb_expect_match "n: a new c.test connection's hello goes nowhere" \
    '^(timeout|reset)' \
    "$(tb_sandbox "$TB_PY" "$IH" raw "$C4" 443 --sni c.test --wait 2 \
        --lport "$lp")"
tb_expect_eq "n: ... the origin's socket received no byte" 0 \
    "$(tb_origin_rx "$C4" "$lp")"
# the client's socket outlives the script, retransmitting its hello (a
# FIN behind it) until the next egressd judges it: one flow more in o's
# count. Destroyed (a reset), it is gone before o starts.
tb_sandbox_root ss -K state all "( dport = :443 and sport = :$lp )" \
    >/dev/null 2>&1
tb_expect_eq "n: ... the client's socket destroyed" "" \
    "$(tb_sandbox_root ss -tnH state all "( dport = :443 and sport = :$lp )")"

# --- o. --kernel-judge off -------------------------------------------------------------
tb_start_egressd --policy "$pol" --proxy --passthrough-judge queue \
    --kernel-judge off
tb_assert_log "$TB_EGRESSD_LOG" passthrough.kernel_judge judge=queue why=off
tb_learn c.test
for i in 1 2 3; do
	tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://c.test/ ||
	    tb_fail "o: c.test connection $i failed"
done
read -r j p _ _ judged <<<"$(kstat)"
tb_expect_eq "o: status: kernelJudge.judge queue, nothing passed there, 3 judged from the queue" \
    "queue 0 3" "$j $p $judged"
tb_expect_eq "metrics: GET /metrics" 200 \
    "$(tb_host_api GET "http://$TB_SBX_HOST_IP4:18080/metrics")"
tb_expect_match "metrics: egressd_passthrough_kernel_judge 0" \
    '^egressd_passthrough_kernel_judge 0$' "$(cat "$TB_DIR/api.out")"
tb_finish
