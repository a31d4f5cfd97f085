#!/bin/bash
# daemon_deny_flood_report: a flood of distinct denied names cannot hide a real
# denial (issue #16 item 17). The sandbox asks for 3000 distinct denied
# names as fast as egressd answers, then once for a real one
# (real-target.evil.test). Before the fix the flood filled the deny
# webhook's queue (the real name was dropped) and the log's token bucket
# (the real name was suppressed, and marked "seen" for 10 s). Now both
# still report the real name by name, and the flood shows up as one
# summary that counts it.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
# The receiver takes 20 ms per event (origin.py delay_ms): the flood
# comes much faster than the webhook can deliver.
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_DENY_WEBHOOK="http://$TB_ORIGIN_C4/deny-hook?delay_ms=20"
    OPENSANDBOX_EGRESS_SANDBOX_ID=sbx-flood-test)
tb_start_egressd --policy "$pol"
WEBHOOK_QUEUE_MAX=256 # egressd/daemon/webhook.h

# N distinct denied names over UDP, at most 64 outstanding, each answered
# (or given up on after 1 s), then at once the real name; prints how many
# NXDOMAIN came back for the flood, and the real name's rcode.
flood='
import socket, struct, sys, time
n, real = int(sys.argv[1]), sys.argv[2].encode()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.0)
def q(qid, labels):
    name = b"".join(bytes([len(l)]) + l for l in labels) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + name + b"\0\1\0\1"
sent = got = nx = 0
end = time.monotonic() + 60
while got < n and time.monotonic() < end:
    while sent < n and sent - got < 64:
        s.sendto(q(sent & 0x7fff, (b"x%d" % sent, b"flood", b"test")), ("198.51.100.1", 53))
        sent += 1
    try:
        r = s.recv(512)
    except socket.timeout:
        got = sent  # lost ones are given up on
        continue
    got += 1
    nx += (r[3] & 15) == 3
s.sendto(q(0xbeef, real.split(b".")), ("198.51.100.1", 53))
rc = "none"
while time.monotonic() < end + 3:
    try:
        r = s.recv(512)
    except socket.timeout:
        break
    if r[:2] == b"\xbe\xef":
        rc = r[3] & 15
        break
print(nx, rc)
'
m=$(tb_log_mark "$TB_EGRESSD_LOG")
t0=$(date +%s)
read -r nx rc <<<"$(tb_sandbox "$TB_PY" -c "$flood" 3000 real-target.evil.test)"
t1=$(date +%s)
tb_check "the flood was answered NXDOMAIN (${nx:-0} of 3000)" \
    test "${nx:-0}" -ge 2900
tb_expect_eq "right after it, the real denied name: NXDOMAIN" 3 "${rc:-}"

tb_check "the log names the real one" tb_wait_log_line --since "$m" \
    --timeout 5 "$TB_EGRESSD_LOG" dns.deny name=real-target.evil.test \
    reason=policy
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" dns.deny \
    name=real-target.evil.test count=1
tb_check "the log sums the flood up" tb_wait_log_line --since "$m" \
    --timeout 5 "$TB_EGRESSD_LOG" dns.deny_summary reason=flood 'names~^[1-9]'
# The bucket: 100 at once, 20 a second since the flood began.
deny_lines=$(tail -c +$((m + 1)) "$TB_EGRESSD_LOG" | grep -c '"ev":"dns.deny"')
max_lines=$((100 + 20 * ($(date +%s) - t0 + 1)))
tb_check "dns.deny lines stay rate-limited ($deny_lines <= $max_lines for 3001 names)" \
    test "$deny_lines" -le "$max_lines"

tb_check "the webhook receives the real one" tb_wait_log_line --timeout 40 \
    "$TB_ORIGIN_LOG" origin.request method=POST path=/deny-hook \
    'body~"hostname":"real-target.evil.test"'
tb_check "and a summary of the flood" tb_wait_log_line --timeout 40 \
    "$TB_ORIGIN_LOG" origin.request method=POST path=/deny-hook \
    'body~"hostname":"\*"' 'body~"reason":"flood"' 'body~"names":[1-9]'
# What the receiver took while the flood ran (at most one per 20 ms),
# then one queue's worth and the summaries: not one per name.
posts=$(grep -c '"path": *"/deny-hook"' "$TB_ORIGIN_LOG")
max_posts=$((WEBHOOK_QUEUE_MAX + 2 + 50 * (t1 - t0 + 1)))
tb_check "webhook deliveries stay bounded ($posts <= $max_posts for 3001 names)" \
    test "$posts" -le "$max_posts"
tb_assert_log "$TB_ORIGIN_LOG" origin.request path=/deny-hook \
    'body~"hostname":"real-target.evil.test"' 'body~"count":1' \
    'body~"sandboxId":"sbx-flood-test"'
tb_expect_eq "allowed names still resolve" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
tb_finish
