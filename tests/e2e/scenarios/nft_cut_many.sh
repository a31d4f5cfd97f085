#!/bin/bash
# nft_cut_many (issue 16 item 14, THREATS §9): cutting on a tightening has
# no cap. The sandbox holds 5,000 live UDP flows to b.test's echo (more than
# the NFT_CT_DELETE_MAX = 4,096 deletions of one pass); the operator PATCHes
# b.test to deny: egressd cuts them all (two passes, the second as an event
# loop slice after the answer) and logs one nft.flows_cut with cut >= 5000;
# afterwards not one of the 5,000 sockets can still send (EPERM: the next
# datagram is NEW and meets the deny chain). Before the fix the first 4,096
# were cut and the rest kept flowing while the API said 200.
# Then the cut at start: a live UDP flow to a.test, egressd stopped, the
# policy file changed to deny a.test, egressd started again: the flow is
# cut at start (before: the first apply cut nothing and it kept flowing).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN="cutm-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
dns: {ttlMin: 120, ttlMax: 300}
EOF
)
tb_start_egressd --policy "$pol"

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
tb_expect_eq "a.test resolves through egressd" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
tb_expect_eq "b.test resolves through egressd" "$TB_ORIGIN_B4" "$(dig_s b.test A)"

# FLOWS HOST N GO OUT: N UDP sockets, each one datagram to HOST:7 and its
# echo (the flow is established), then "up N" on OUT; until the file GO
# appears (<= 60 s) one datagram per socket every 5 s keeps the entries
# from timing out (30 s); then one more datagram on every socket, and
# "sent K eperm E other O" (K: still passing as established).
flows='
import errno, os, resource, socket, sys, time
host, n, go, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
socks, up = [], 0
for i in range(n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.connect((host, 7))
    for attempt in range(3):
        try:
            s.send(b"x%d" % i)
            s.recv(64)
            up += 1
            break
        except socket.timeout:
            pass
    socks.append(s)
with open(out, "w") as f:
    f.write("up %d\n" % up)
end = time.monotonic() + 60
keep = time.monotonic() + 5
while not os.path.exists(go) and time.monotonic() < end:
    if time.monotonic() >= keep:
        for s in socks:
            try:
                s.send(b"keep")
            except OSError:
                pass
        keep = time.monotonic() + 5
    time.sleep(0.05)
sent = eperm = other = 0
for s in socks:
    try:
        s.send(b"again")
        sent += 1
    except OSError as e:
        if e.errno == errno.EPERM:
            eperm += 1
        else:
            other += 1
with open(out, "a") as f:
    f.write("sent %d eperm %d other %d\n" % (sent, eperm, other))
'
N=5000
go=$TB_SBX_HOME/go
out=$TB_SBX_HOME/flows.out
tb_sandbox_bg "$TB_DIR/flows.log" "$TB_PY" -c "$flows" "$TB_ORIGIN_B4" "$N" "$go" "$out"
pf=$TB_LAST_PID
tb_check "$N UDP flows to b.test established" tb_wait_line "$out" "^up $N\$" 60
tb_expect_match "flows up" "^up $N\$" "$(head -n 1 "$out" 2>/dev/null)"

m=$(tb_log_mark "$TB_EGRESSD_LOG")
st=$(tb_host curl -sS -o /dev/null -w '%{http_code}' --max-time 10 \
    -X PATCH -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
    -H "Content-Type: application/json" \
    --data-binary '[{"action":"deny","target":"b.test"}]' \
    "http://$TB_SBX_HOST_IP4:18080/policy")
tb_expect_eq "PATCH b.test to deny" 200 "$st"
# the outcome of the cut: nft.flows_cut, or nft.flows_cut_failed
end=$((SECONDS + 30))
line=""
while [ -z "$line" ] && [ "$SECONDS" -lt "$end" ]; do
	line=$(tail -c +"$((m + 1))" "$TB_EGRESSD_LOG" |
	    grep -m 1 '"ev":"nft.flows_cut' || true)
	[ -n "$line" ] || sleep 0.1
done
cut=$(printf '%s\n' "$line" | grep '"ev":"nft.flows_cut"' |
    sed -n 's/.*"cut":\([0-9]*\).*/\1/p')
tb_check "one nft.flows_cut for the update, cut ${cut:-?} >= $N" \
    test "${cut:-0}" -ge "$N"
passes=$(printf '%s\n' "$line" | sed -n 's/.*"passes":\([0-9]*\).*/\1/p')
tb_check "in passes of at most 4096: ${passes:-?} (the later ones as event-loop slices)" \
    test "${passes:-0}" -ge 2
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" nft.flows_cut_failed
tb_sandbox touch "$go"
tb_check "the sandbox tried every socket again" tb_wait_line "$out" '^sent ' 60
wait "$pf"
res=$(grep '^sent ' "$out")
tb_expect_eq "not one of the $N flows still passes; every send EPERM" \
    "sent 0 eperm $N other 0" "$res"

# --- the cut at start ---------------------------------------------------
# HOLDUDP HOST GO OUT: one UDP socket to HOST:7, one echo, "up" on OUT;
# after GO appears (<= 60 s), one more send: "sent" or "err ERRNO".
holdudp='
import errno, os, socket, sys, time
host, go, out = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.connect((host, 7))
s.send(b"hello")
s.recv(64)
open(out, "w").write("up\n")
end = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < end:
    time.sleep(0.05)
try:
    s.send(b"again")
    r = "sent"
except OSError as e:
    r = "err " + errno.errorcode.get(e.errno, "?")
open(out, "a").write(r + "\n")
'
go2=$TB_SBX_HOME/go2
out2=$TB_SBX_HOME/hold.out
tb_sandbox_bg "$TB_DIR/hold.log" "$TB_PY" -c "$holdudp" "$TB_ORIGIN_A4" "$go2" "$out2"
ph=$TB_LAST_PID
tb_check "a UDP flow to a.test is up" tb_wait_line "$out2" '^up$' 10
tb_stop_egressd TERM
tb_expect_eq "egressd stopped cleanly" 0 "$TB_EGRESSD_STATUS"
cat >"$pol" <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: c.test}
dns: {ttlMin: 120, ttlMax: 300}
EOF
m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_start_egressd --policy "$pol"
tb_assert_log --since "$m" --min 1 --max 1 "$TB_EGRESSD_LOG" nft.flows_cut \
    trigger=start cut=1
tb_sandbox touch "$go2"
tb_check "the flow was tried again" tb_wait_line "$out2" '^(sent|err)' 10
wait "$ph"
tb_expect_eq "the flow to a.test was cut at start (next send EPERM)" \
    "err EPERM" "$(tail -n 1 "$out2")"
tb_finish
