#!/bin/bash
# nft_renew_real (issue 16 item 15): a learned address is renewed past its
# TTL only by a flow that really goes to it, and without a gap. With TTL
# 4 s (ttlMin = ttlMax = 4) three addresses are learned, then for ~16 s:
#   - the sandbox sends a DNS query to a.test's address port 53 every 1 s
#     (redirected to egressd: the datagrams never reach 203.0.113.10);
#   - each of those is a new name, so egressd forwards it upstream to
#     198.51.100.1, which the sandbox had learned as dns.test (egressd's
#     own, marked flows);
#   - a real UDP flow to c.test's echo, a datagram every 1 s.
# For 12 s the set is read twice a second: c.test's address (renewed) is
# in it every time, a.test's and dns.test's expire, and a new connection to
# a.test's address is refused. Before the first fix every conntrack entry
# counted, the redirected and egressd's own included, and all three stayed
# learned for ever; before the second the renew tick came every 10 s
# whatever the TTL, so a 4 s lease lapsed for 6 s of every 10. egressd
# starts under the default ttlMax and is given 4 s by a file change, so
# the tick must also follow a new policy at once.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

rules='defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
  - {action: allow, target: c.test}
  - {action: allow, target: dns.test}'
pol=$(tb_policy_file policy.yaml <<<"$rules")
tb_start_egressd --policy "$pol"
# started under the default ttlMax (3600: a tick every 10 s); the file
# then gives 4 s, which must bring the tick nearer at once
m=$(tb_log_mark "$TB_EGRESSD_LOG")
printf '%s\ndns: {ttlMin: 4, ttlMax: 4}\n' "$rules" >"$pol"
tb_check "the policy with ttlMax 4 in force" tb_wait_log_line --since "$m" \
    "$TB_EGRESSD_LOG" nft.applied '!trigger'

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
tb_expect_eq "a.test learned" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
tb_expect_eq "dns.test learned" "$TB_DNS1_IP4" "$(dig_s dns.test A)"
learned4() { tb_sandbox_root nft list set inet egressd learned4; }
# has4 ADDR: is ADDR in learned4? (the listing read whole first: piped into
# grep -q under pipefail, nft's last write can meet a closed pipe)
has4() { grep -q "$1 " <<<"$(learned4)"; }
for a in "$TB_ORIGIN_A4" "$TB_DNS1_IP4"; do
	tb_check "learned4 holds $a" has4 "$a"
done

# QUERIES N: a new name under a.test to a.test's address port 53 every
# 1 s (dig's own socket each time); prints how many got an answer.
queries='
for i in $(seq 1 "$1"); do
	dig +time=1 +tries=1 @'"$TB_ORIGIN_A4"' "n$i-$RANDOM.a.test" A >/dev/null 2>&1 && echo ok
	sleep 1
done | wc -l
'
# UDPFLOW NAME SECS: NAME resolved (through egressd: its lease starts
# here, and the flow a moment later, whatever the load), then one socket,
# a datagram to its port 7 every 1 s and its echo.
udpflow='
import socket, sys, time
a = socket.getaddrinfo(sys.argv[1], 7, socket.AF_INET, socket.SOCK_DGRAM)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.connect(a[0][4])
end, n = time.monotonic() + float(sys.argv[2]), 0
while time.monotonic() < end:
    try:
        s.send(b"keep"); s.recv(64); n += 1
    except OSError:
        pass
    time.sleep(1)
print("echoed %d" % n)
'
tb_sandbox_bg "$TB_DIR/queries.out" bash -c "$queries" _ 14
pq=$TB_LAST_PID
tb_sandbox_bg "$TB_DIR/udpflow.out" "$TB_PY" -c "$udpflow" c.test 16
pu=$TB_LAST_PID
tb_check "c.test learned by the flow's own lookup" \
    tb_wait_cmd 3 has4 "$TB_ORIGIN_C4"
# 24 reads over 12 s: three leases of c.test's address, each renewed
# within it (the tick every 2 s), or it is missing from some read.
missing=0
for _ in $(seq 1 24); do
	sleep 0.5
	has4 "$TB_ORIGIN_C4" || missing=$((missing + 1))
done
tb_expect_eq "c.test's address, in use by a real flow, in the set at every read" \
    0 "$missing"
l4=$(learned4)
tb_check "c.test's address, in use by a real flow, renewed past its TTL" \
    grep -q "$TB_ORIGIN_C4 " <<<"$l4"
tb_check_fails "a.test's address, only redirected DNS to it, expired" \
    grep -q "$TB_ORIGIN_A4 " <<<"$l4"
tb_check_fails "dns.test's address, only egressd's own upstream flows, expired" \
    grep -q "$TB_DNS1_IP4 " <<<"$l4"
nd_fails_fast "a new connection to a.test's address is refused" \
    tcp "$TB_ORIGIN_A4" 7
wait "$pq"
nq=$(tr -d ' ' <"$TB_DIR/queries.out")
tb_check "the redirected queries were answered all along ($nq of 14)" \
    test "${nq:-0}" -ge 11
wait "$pu"
tb_expect_match "the real flow kept working" '^echoed (1[0-9])' \
    "$(cat "$TB_DIR/udpflow.out")"
tb_finish
