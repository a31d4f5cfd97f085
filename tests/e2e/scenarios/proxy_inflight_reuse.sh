#!/bin/bash
# proxy_inflight_reuse: a new connection that reuses the 5-tuple (the
# local port) of a flow judged in flight a moment before is judged
# afresh, never given the old flow's verdict (docs/proxy.md, "Reused
# 5-tuples"). Each case: a.test (allowed) from local port P, ended one
# way, then from P again naming b.test (denied), on a.test's address.
#  a. the client resets (the tracker reopens the entry, PENDING again):
#     b.test is reset, judged (nfq.judged refused name_denied); before,
#     egressd gave the tuple's remembered OK and the hello passed;
#     then a.test from P again: judged, passes;
#  b. the server closes first (TIME_WAIT): the same;
#  c. the server resets: the tracker keeps the entry and lets the new
#     SYN ride it (ct state established, its OK mark): the flow is made
#     pending again and b.test judged, refused; before, the hello was
#     never queued and b.test's request was answered; a.test passes;
#  d. a refused flow's port reused at once (the entry kept, marked
#     refused): judged again, b.test refused, a.test passes (before,
#     the SYN was reset: the bench's curl exit 7).
# The origin never sees a hello naming b.test.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

tb_sbx_tool port_reuse.py tls_hello.py
PR=$TB_DIR/sbx-bin/port_reuse.py

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF2
)
tb_start_egressd --policy "$pol" --proxy --passthrough-judge queue
tb_assert_log "$TB_EGRESSD_LOG" passthrough.judge path=queue
A4=$TB_ORIGIN_A4
tb_sandbox dig +short +time=2 +tries=1 a.test A >/dev/null
mo=$(tb_log_mark "$TB_ORIGIN_LOG")

# reuse LPORT FIRST END SECOND: the two connections' outcomes, "X then
# Y" (the second one a GET the origin logs with its SNI when it passes)
reuse()
{
	local o1 o2
	o1=$(tb_sandbox "$TB_PY" "$PR" "$A4" 443 "$1" "$2" "$3")
	sleep 0.2
	o2=$(tb_sandbox "$TB_PY" "$PR" "$A4" 443 "$1" "$4" sfin)
	echo "$o1 then $o2"
}

lp=$((40000 + RANDOM % 2000 * 2))
for end in crst sfin; do
	sleep 1.1 # refusals are logged once per destination and second
	lp=$((lp + 2))
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	tb_expect_match "$end: a.test, then b.test from the same port ($lp): reset" \
	    '^handshake.* then reset$' "$(reuse "$lp" a.test "$end" b.test)"
	tb_check "$end: ... b.test judged afresh: nfq.judged refused name_denied" \
	    tb_wait_log_line --since "$me" "$TB_EGRESSD_LOG" nfq.judged \
	    decision=refused reason=name_denied name=b.test "dst=$A4:443"
	lp=$((lp + 2))
	tb_expect_match "$end: a.test, then a.test again from the same port: passes" \
	    '^handshake.* then handshake end=eof' "$(reuse "$lp" a.test "$end" a.test)"
done

for end in srst refused; do
	sleep 1.1
	lp=$((lp + 2))
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	if [ "$end" = srst ]; then
		out=$(reuse "$lp" a.test srst b.test)
	else
		out=$(reuse "$lp" b.test none b.test)
	fi
	tb_expect_match "$end: then b.test from the same port: reset" \
	    '^(handshake.*|reset) then reset$' "$out"
	tb_check "$end: ... b.test judged afresh: nfq.judged refused name_denied" \
	    tb_wait_log_line --since "$me" "$TB_EGRESSD_LOG" nfq.judged \
	    decision=refused reason=name_denied name=b.test "dst=$A4:443"
	lp=$((lp + 2))
	if [ "$end" = srst ]; then
		out=$(reuse "$lp" a.test srst a.test)
	else
		out=$(reuse "$lp" b.test none a.test)
	fi
	tb_expect_match "$end: then a.test from the same port: judged, passes" \
	    '^(handshake.*|reset) then handshake end=eof' "$out"
done

tb_net curl -s -o /dev/null --max-time 3 "http://$TB_ORIGIN_B4/tb-sync-$TB_ID"
tb_wait_log_line "$TB_ORIGIN_LOG" origin.request "path=/tb-sync-$TB_ID" \
    >/dev/null || tb_die "origin sync"
tb_assert_no_log --since "$mo" "$TB_ORIGIN_LOG" '*' 'server.sni~^b\.test$'
tb_finish
