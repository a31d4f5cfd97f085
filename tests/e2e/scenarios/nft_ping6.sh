#!/bin/bash
# nft_ping6 (issue 16, notes): ping6 to a denied address fails fast like
# IPv4, with the reject's answer rather than a timeout. The kernel's IPv6
# ping sockets ignore the output hook's verdict (sendmsg succeeds, unlike
# IPv4's EPERM), but the deny chain's ICMPv6 admin-prohibited comes back
# at once on the socket's error queue (IPV6_RECVERR, which ping sets): ping
# prints "Destination unreachable: Administratively prohibited" and gives
# up after its one try instead of waiting -W 10 seconds for a reply.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF2
)
tb_start_egressd --policy "$pol"
tb_expect_eq "a.test learned" "$TB_ORIGIN_A6" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test AAAA)"

out=$(tb_sandbox ping -6 -n -c 1 -W 10 "$TB_ORIGIN_B6" 2>&1)
printf '%s\n' "$out" | sed 's/^/# /'
tb_expect_match "ping6 to a denied address: the reject comes back" \
    'Destination unreachable: Administratively prohibited' "$out"
tb_expect_match "ping6 to a denied address: an error, not a lost packet" \
    '\+1 errors' "$out"
# the socket-level view: with IPV6_RECVERR the error is there at once
# (recv fails EACCES well inside the 10 s a lost reply would take)
tb_expect_match "ICMPv6 echo socket with IPV6_RECVERR: EACCES" '^EACCES$' \
    "$(tb_sandbox "$TB_PY" -c '
import errno, socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_ICMPV6)
s.setsockopt(socket.IPPROTO_IPV6, 25, 1)  # IPV6_RECVERR
s.settimeout(10)
s.sendto(b"\x80\0\0\0\0\0\0\1", (sys.argv[1], 0))
try:
    s.recv(64); print("reply")
except socket.timeout:
    print("timeout")
except OSError as e:
    print(errno.errorcode.get(e.errno, "?"))
' "$TB_ORIGIN_B6")"
out=$(tb_sandbox ping -n -c 1 -W 10 "$TB_ORIGIN_B4" 2>&1)
tb_expect_match "IPv4 ping to a denied address: EPERM" \
    'Operation not permitted|Packet filtered' "$out"
tb_check "ping6 to an allowed address works" \
    tb_sandbox ping -6 -n -c 1 -W 5 "$TB_ORIGIN_A6"
tb_finish
