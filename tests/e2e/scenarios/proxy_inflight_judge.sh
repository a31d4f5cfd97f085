#!/bin/bash
# proxy_inflight_judge: pass-through TLS judged in flight (issue 36,
# docs/proxy.md "Pass-through judged in flight"), live, with
# --passthrough-judge queue (the canary bindings name hosts of their
# own: only their addresses are held on the proxy, proxy_inflight_bound)
# and --kernel-judge off: every hello is the queue's here (the kernel's
# share: proxy_inflight_kernel).
# The kernel queues the first payload packets of TLS to learned
# addresses; egressd judges the ClientHello and marks the flow; the rest
# never leaves the kernel.
#  a. an allowed name: curl succeeds, egressd logs nfq.judged passthrough,
#     the proxy sees no connection; segments without payload (a
#     connection's last handshake ACK, its FIN) pass in the kernel, never
#     through the queue, IPv4 and IPv6;
#  b. a denied SNI on an allowed (learned) address: reset, nfq.judged
#     refused, the origin's socket received no byte;
#  c. a real OpenSSL hello in two segments (100 bytes, 50 ms, the rest),
#     and a 1.9 KB hand-made hello in two, each judged correctly;
#  d. a hello dripped one byte at a time: refused within the hello bound;
#  e. kill -9 of egressd during a rate-limited pass-through download: the
#     download completes; a connection opened during the downtime gets no
#     payload through (no queue reader, no bypass); restarted with
#     --passthrough-judge proxy, that still-pending flow is reset (the
#     restart gap), judged flows survive both restarts;
#  f. a tightening (PATCH deny) cuts a judged flow, one where only the
#     origin speaks (server-sent events), within 3 s;
#  g. ... also when it denies the flow's SNI but its address stays
#     allowed for another name (shared-a.test and c.test share one):
#     the flows judged in flight are judged again by name.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

tb_sbx_tool tls_hello.py inflight_hello.py
IH=$TB_DIR/sbx-bin/inflight_hello.py

TB_EGRESSD_TOKEN="ifj-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080" # the operator, from the node's namespace
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
  - {action: allow, target: shared-a.test}
EOF2
)
tb_start_egressd --policy "$pol" --proxy --passthrough-judge queue \
    --kernel-judge off
tb_assert_log "$TB_EGRESSD_LOG" passthrough.judge path=queue

A4=$TB_ORIGIN_A4 C4=$TB_ORIGIN_C4
TAG=$RANDOM$RANDOM

learn()
{
	local n
	for n in "$@"; do
		tb_sandbox dig +short +time=2 +tries=1 "$n" A >/dev/null
	done
}

# origin_sync: a request straight from the internet namespace: whatever
# reached the origin before is logged by now.
origin_sync()
{
	local p="/tb-sync-$RANDOM$RANDOM"
	tb_net curl -s -o /dev/null --max-time 3 "http://$TB_ORIGIN_B4$p"
	tb_wait_log_line "$TB_ORIGIN_LOG" origin.request "path=$p" \
	    >/dev/null || tb_die "origin sync: $p not logged"
}

# queued: /v1/status's passthrough.queuedPackets
queued()
{
	[ "$(tb_host_api GET "http://$TB_SBX_HOST_IP4:18080/v1/status")" = 200 ] ||
	    { echo "status failed"; return; }
	"$TB_PY" -c 'import json,sys
print(json.load(open(sys.argv[1]))["passthrough"]["queuedPackets"])' \
	    "$TB_DIR/api.out"
}

# --- a. an allowed name passes, judged in flight, the proxy not involved ------
learn a.test c.test
tb_sandbox dig +short +time=2 +tries=1 a.test AAAA >/dev/null
q0=$(queued)
for a in "$A4" "$TB_ORIGIN_A6"; do
	tb_check "a: connect to $a:443 and close, sending nothing" \
	    tb_sandbox "$TB_PY" -c 'import socket, sys, time
s = socket.create_connection((sys.argv[1], 443), timeout=3)
time.sleep(0.2)
s.close()
time.sleep(0.2)' "$a"
done
tb_expect_eq "a: ... no packet of either reached the queue (queuedPackets $q0)" \
    "$q0" "$(queued)"
X64K=$(head -c 65536 /dev/zero | tr '\0' x | sha256sum | cut -d' ' -f1)
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
sum=$(tb_sandbox curl -4 -sS -f --max-time 10 \
    "https://a.test/a-$TAG?bytes=65536" | sha256sum | cut -d' ' -f1)
tb_expect_eq "a: https://a.test/ 64 KiB, identical" "$X64K" "$sum"
tb_check "a: nfq.judged decision=passthrough name=a.test" \
    tb_wait_log_line --since "$me" "$TB_EGRESSD_LOG" nfq.judged \
    decision=passthrough name=a.test "dst=$A4:443"
tb_assert_log --since "$mo" --min 1 --max 1 "$TB_ORIGIN_LOG" origin.request \
    server.sni=a.test "server.addr=$A4" "path=/a-$TAG" \
    "client.addr=$TB_SBX_IP4"
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" proxy.closed
tb_check "a: the client verified the origin's own certificate" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://c.test/

# --- b. a denied SNI on a.test's (learned) address: reset, no payload ---------
lp=$((41000 + RANDOM % 4000))
me=$(tb_log_mark "$TB_EGRESSD_LOG")
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox curl -4 -sS -o /dev/null --max-time 5 --local-port "$lp" \
    --resolve "b.test:443:$A4" "https://b.test/b-$TAG" 2>&1)
rc=$?
tb_expect_match "b: curl to SNI b.test on a.test's address is reset (exit $rc)" \
    '(reset|Connection reset|SSL_ERROR_SYSCALL|errno 104)' "$out"
tb_check "b: nfq.judged decision=refused reason=name_denied name=b.test" \
    tb_wait_log_line --since "$me" "$TB_EGRESSD_LOG" nfq.judged \
    decision=refused reason=name_denied name=b.test "dst=$A4:443"
tb_expect_eq "b: the origin's socket received no byte" 0 \
    "$(tb_origin_rx "$A4" "$lp")"
origin_sync
tb_assert_no_log --since "$mo" "$TB_ORIGIN_LOG" '*' 'server.sni~^b\.test$'
tb_assert_no_log --since "$mo" "$TB_ORIGIN_LOG" origin.request "path=/b-$TAG"
tb_assert_no_log --since "$me" "$TB_EGRESSD_LOG" proxy.closed

# --- c. two-segment hellos -----------------------------------------------------------
me=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_match "c: a real hello in two segments (100 B, 50 ms, rest): 200, 4096 B" \
    '^ok 200 4096 hello=' \
    "$(tb_sandbox "$TB_PY" "$IH" real "$A4" 443 a.test "/c-$TAG?bytes=4096" \
        --split 100 --gap-ms 50)"
tb_check "c: ... judged passthrough" tb_wait_log_line --since "$me" \
    "$TB_EGRESSD_LOG" nfq.judged decision=passthrough name=a.test
tb_expect_match "c: a 1.9 KB hello (padding) in two segments: the origin answers" \
    '^handshake ' \
    "$(tb_sandbox "$TB_PY" "$IH" raw "$A4" 443 --sni a.test --pad 1600 \
        --split 1200 --gap-ms 50)"
me=$(tb_log_mark "$TB_EGRESSD_LOG")
lp=$((45000 + RANDOM % 4000))
tb_expect_match "c: the same 1.9 KB hello naming b.test, to c.test's address: reset" \
    '^reset ' \
    "$(tb_sandbox "$TB_PY" "$IH" raw "$C4" 443 --sni b.test --pad 1600 \
        --split 1200 --gap-ms 50 --lport "$lp")"
tb_check "c: ... nfq.judged refused name_denied" tb_wait_log_line --since "$me" \
    "$TB_EGRESSD_LOG" nfq.judged decision=refused reason=name_denied \
    name=b.test "dst=$C4:443"
tb_expect_eq "c: ... the origin's socket received no byte" 0 \
    "$(tb_origin_rx "$C4" "$lp")"

# --- d. a hello dripped byte by byte: refused within the bound (5 s) ---------------
me=$(tb_log_mark "$TB_EGRESSD_LOG")
lp=$((49000 + RANDOM % 4000))
out=$(tb_sandbox "$TB_PY" "$IH" raw "$A4" 443 --sni a.test --drip-ms 20 \
    --wait 9 --lport "$lp")
tb_expect_match "d: a dripped hello is reset" '^reset ' "$out"
ms=${out#* }
if [ "$ms" -ge 4000 ] && [ "$ms" -le 7000 ]; then
	tb_pass "d: ... after ${ms} ms (bound 5000 ms)"
else
	tb_fail "d: ... after ${ms} ms, not within 4-7 s of the 5 s bound"
fi
tb_check "d: ... nfq.judged refused hello_timeout" tb_wait_log_line \
    --since "$me" "$TB_EGRESSD_LOG" nfq.judged decision=refused \
    reason=hello_timeout
tb_expect_eq "d: ... the origin's socket received no byte" 0 \
    "$(tb_origin_rx "$A4" "$lp")"

# --- the path in use and its counts: /v1/status and /metrics -------------------
# status_pt: /v1/status's passthrough object, as "path why judged refused
# helloTimeouts"
status_pt()
{
	[ "$(tb_host_api GET "http://$TB_SBX_HOST_IP4:18080/v1/status")" = 200 ] ||
	    { echo "status failed"; return; }
	"$TB_PY" -c 'import json,sys; p=json.load(open(sys.argv[1])).get("passthrough",{})
print(p.get("path"), p.get("why"), p.get("judged"), p.get("refused"), p.get("helloTimeouts"))' \
	    "$TB_DIR/api.out"
}
read -r p_path p_why p_judged p_refused p_to <<<"$(status_pt)"
tb_expect_eq "status: passthrough.path queue" queue "$p_path"
tb_expect_match "status: passthrough.why names the queue verdict" \
    '^(xt-nfqueue|nft-queue)$' "$p_why"
tb_expect_match "status: judged >= 4 (a, c), refused >= 3 (b, c, d), helloTimeouts >= 1" \
    '^([4-9]|[1-9][0-9]+) ([3-9]|[1-9][0-9]+) [1-9]' "$p_judged $p_refused $p_to"
tb_expect_eq "metrics: GET /metrics" 200 \
    "$(tb_host_api GET "http://$TB_SBX_HOST_IP4:18080/metrics")"
tb_expect_match "metrics: egressd_passthrough_path_info says queue" \
    '^egressd_passthrough_path_info\{path="queue",why="(xt-nfqueue|nft-queue)"\} 1$' \
    "$(cat "$TB_DIR/api.out")"
tb_expect_match "metrics: egressd_passthrough_judged_total{verdict=passthrough} = status" \
    "^egressd_passthrough_judged_total\\{verdict=\"passthrough\"\\} $p_judged\$" \
    "$(cat "$TB_DIR/api.out")"
tb_expect_match "metrics: no proxy connection at all" \
    '^egressd_proxy_accepted_total 0$' "$(cat "$TB_DIR/api.out")"

# --- e. kill -9 during a download; fail closed; restart -------------------------
N=$((256 << 20))
XN=$(head -c "$N" /dev/zero | tr '\0' x | sha256sum | cut -d' ' -f1)
dl=$TB_DIR/dl.out
tb_sandbox_bg "$dl" sh -c "curl -4 -sS -f --max-time 30 --limit-rate 32M \
    'https://a.test/e-$TAG?bytes=$N' | sha256sum"
dlpid=$TB_LAST_PID
sleep 1
# the verdict lives in conntrack: the download's entry carries the OK mark
tb_expect_match "e: the download's conntrack entry carries the judged mark" \
    "mark=$((0x45510002))" \
    "$(tb_sandbox_root grep -E "ESTABLISHED src=$TB_SBX_IP4 dst=$A4 .*dport=443 " \
        /proc/net/nf_conntrack)"
tb_stop_egressd KILL
tb_expect_eq "e: egressd killed (SIGKILL)" 137 "$TB_EGRESSD_STATUS"
dl_running()
{
	if kill -0 "$dlpid" 2>/dev/null; then
		tb_pass "e: the download is still running $1"
	else
		tb_fail "e: the download ended before $1: $(cat "$dl")"
	fi
}
dl_running "when egressd is gone"
lp=$((53000 + RANDOM % 4000))
mo=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox_bg "$TB_DIR/gap.out" "$TB_PY" "$IH" raw "$A4" 443 --sni a.test \
    --wait 10 --lport "$lp"
gappid=$TB_LAST_PID
sleep 1.5
tb_expect_eq "e: with egressd gone, a new connection's hello does not reach the origin" \
    0 "$(tb_origin_rx "$A4" "$lp")"
tb_assert_no_log --since "$mo" "$TB_ORIGIN_LOG" origin.request
# the restart gap: an egressd without the queue resets the pending flow
tb_start_egressd --policy "$pol" --proxy --passthrough-judge proxy
dl_running "after the restart without the queue"
read -r p_path p_why _ <<<"$(status_pt)"
tb_expect_eq "status: restarted with --passthrough-judge proxy, the path says so and why" \
    "proxy --passthrough-judge" "$p_path $p_why"
wait "$gappid"
tb_expect_match "e: restarted without the queue, the still-pending flow is reset" \
    '^reset ' "$(cat "$TB_DIR/gap.out")"
tb_expect_eq "e: ... its origin socket never received a byte" 0 \
    "$(tb_origin_rx "$A4" "$lp")"
tb_stop_egressd KILL
tb_start_egressd --policy "$pol" --proxy --passthrough-judge queue \
    --kernel-judge off
wait "$dlpid"
tb_expect_eq "e: the 256 MiB download across kill -9 and a restart without the queue completed, identical" \
    "$XN  -" "$(cat "$dl")"

# --- f. a tightening cuts a judged flow ------------------------------------------------
learn a.test
me=$(tb_log_mark "$TB_EGRESSD_LOG")
cut=$TB_DIR/cut.out
# a stream the origin pushes (an event every 100 ms for 10 s) and the
# client only ACKs: a deleted conntrack entry would be picked up again
# from the origin's next packet as an inbound flow (docs/nft.md), so the
# cut marks judged flows refused instead
tb_sandbox_bg "$cut" sh -c "curl -4 -sS -f -N --max-time 20 -o /dev/null \
    'https://a.test/f-$TAG?sse=100&gap_ms=100'; echo rc=\$?"
cutpid=$TB_LAST_PID
tb_check "f: the download was judged in flight" tb_wait_log_line \
    --since "$me" "$TB_EGRESSD_LOG" nfq.judged decision=passthrough \
    name=a.test
sleep 0.5
tb_expect_eq "f: PATCH a.test to deny" 200 \
    "$(tb_host_api PATCH "http://$TB_SBX_HOST_IP4:18080/policy" \
        '[{"action":"deny","target":"a.test"}]')"
t0=$(date +%s%N)
wait "$cutpid"
el=$((($(date +%s%N) - t0) / 1000000))
tb_expect_match "f: the judged flow is cut (curl fails)" 'rc=(18|56|35|28|7)' \
    "$(tail -n 1 "$cut")"
if [ "$el" -le 3000 ]; then
	tb_pass "f: ... within ${el} ms of the PATCH"
else
	tb_fail "f: ... only after ${el} ms"
fi

# --- g. a tightening by name on a shared address ---------------------------------------
learn c.test shared-a.test
me=$(tb_log_mark "$TB_EGRESSD_LOG")
cut=$TB_DIR/cutg.out
tb_sandbox_bg "$cut" sh -c "curl -4 -sS -f -N --max-time 20 -o /dev/null \
    'https://shared-a.test/g-$TAG?sse=100&gap_ms=100'; echo rc=\$?"
cutpid=$TB_LAST_PID
tb_check "g: the stream to shared-a.test was judged in flight" \
    tb_wait_log_line --since "$me" "$TB_EGRESSD_LOG" nfq.judged \
    decision=passthrough name=shared-a.test "dst=$C4:443"
sleep 0.5
tb_expect_eq "g: PATCH shared-a.test to deny (c.test keeps the address allowed)" \
    200 "$(tb_host_api PATCH "http://$TB_SBX_HOST_IP4:18080/policy" \
        '[{"action":"deny","target":"shared-a.test"}]')"
t0=$(date +%s%N)
wait "$cutpid"
el=$((($(date +%s%N) - t0) / 1000000))
tb_expect_match "g: the judged flow is cut (curl fails)" 'rc=(18|56|35|28|7)' \
    "$(tail -n 1 "$cut")"
if [ "$el" -le 3000 ]; then
	tb_pass "g: ... within ${el} ms of the PATCH"
else
	tb_fail "g: ... only after ${el} ms"
fi
tb_check "g: egressd logs nfq.rejudged closed=1" tb_wait_log_line \
    --since "$me" "$TB_EGRESSD_LOG" nfq.rejudged closed=1
tb_check "g: c.test on the same address still passes" \
    tb_sandbox curl -4 -sS -f -o /dev/null --max-time 5 https://c.test/
tb_finish
