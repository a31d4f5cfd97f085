#!/bin/bash
# nft_dns_redirect: every port-53 query of the sandbox, to any address, v4
# or v6, UDP or TCP, lands on egressd's resolver port (here the driver's
# stub, which answers REFUSED), never on the resolver it named; DoT and
# DoQ are closed; egressd's own marked sockets are exempt.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF2
)
nd_start --policy "$pol"
d="tb_sandbox dig +time=2 +tries=1"

mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_match "hard-coded public resolver (udp) answered by egressd" \
    "status: REFUSED" "$($d @"$TB_RESOLVER_X4" a.test A)"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" driver.dns proto=udp family=4

mark=$(tb_log_mark "$TB_EGRESSD_LOG")
$d +tcp @"$TB_RESOLVER_X4" a.test A >/dev/null 2>&1
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" driver.dns proto=tcp family=4

mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_match "hard-coded IPv6 resolver answered by egressd" \
    "status: REFUSED" "$($d @"$TB_RESOLVER_X6" a.test AAAA)"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" driver.dns proto=udp family=6

mark=$(tb_log_mark "$TB_EGRESSD_LOG")
$d +tcp @"$TB_RESOLVER_X6" a.test A >/dev/null 2>&1
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" driver.dns proto=tcp family=6

mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_match "the configured resolver (resolv.conf) answered by egressd" \
    "status: REFUSED" "$($d a.test A)"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" driver.dns proto=udp

mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_match "metadata as a resolver (169.254.169.254:53) answered by egressd" \
    "status: REFUSED" "$($d @"$TB_META4" a.test A)"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" driver.dns proto=udp

tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X4" server.port=53
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X6" server.port=53
tb_assert_no_dns_query dns1 'a\.test'

# --- DoT / DoQ ------------------------------------------------------------------
nd_fails_fast "DoT to the public resolver" tcp "$TB_RESOLVER_X4" 853
nd_fails_fast "DoT over IPv6" tcp "$TB_RESOLVER_X6" 853
nd_fails_fast "DoQ (udp 853)" udpsend "$TB_RESOLVER_X4" 853
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X4" server.port=853

# --- egressd's own sockets are exempt ---------------------------------------------
tb_check "a marked UDP socket reaches the real resolver address" \
    tb_sandbox_root "$TB_PY" "$ND_PROBE" udpmark "$TB_RESOLVER_X4" 53 2
tb_assert_log "$TB_ECHO_LOG" echo.udp server.addr="$TB_RESOLVER_X4" server.port=53
tb_check "a marked TCP socket reaches it too" \
    tb_sandbox_root "$TB_PY" "$ND_PROBE" tcpmark "$TB_RESOLVER_X4" 53 2
tb_check "a marked query reaches the real upstream" \
    tb_sandbox_root "$TB_PY" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, 1)
s.settimeout(2)
q = bytes.fromhex("abcd01000001000000000000") + b"\x01a\x04test\x00\x00\x01\x00\x01"
s.sendto(q, (sys.argv[1], 53))
r = s.recv(512)
sys.exit(0 if r[:2] == b"\xab\xcd" and (r[3] & 15) == 0 else 1)' "$TB_DNS1_IP4"
tb_assert_dns_query dns1 'a\.test'
tb_finish
