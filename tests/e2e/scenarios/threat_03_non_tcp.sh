#!/bin/bash
# threat_03_non_tcp (THREATS §3): the sandbox leaves TCP. ICMP and UDP to
# an address never resolved through an allowed name fail at once; QUIC
# (udp 443) fails even to an address egressd learned for an allowed name;
# an address rule limited to TCP opens neither UDP nor ICMP. A learned
# address of a name allowed without restrictions is open to every
# protocol (policy.md: a rule without protocols means all of them), and
# that is shown too, so the closed cases above cannot pass by accident.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: $TB_ORIGIN_C4, protocols: [tcp]}
  - {action: allow, target: "$TB_ORIGIN_C6", protocols: [tcp]}
EOF
)
tb_start_egressd --policy "$pol"

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
tb_expect_eq "a.test resolves (learned)" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
tb_expect_eq "and its IPv6 address" "$TB_ORIGIN_A6" "$(dig_s a.test AAAA)"

# --- never resolved: nothing but TCP gets out either ----------------------------
nd_fails_fast "ICMP echo to an unlearned IPv4 address" icmp "$TB_ORIGIN_B4" 0
nd_fails_fast "UDP to an unlearned IPv4 address (echo 7)" udpsend "$TB_ORIGIN_B4" 7
nd_fails_fast "UDP to an unlearned IPv6 address (echo 7)" udpsend "$TB_ORIGIN_B6" 7
nd_fails_fast "UDP 9000 to the public resolver's address" udpsend "$TB_RESOLVER_X4" 9000
nd_fails_fast "QUIC (udp 443) to an unlearned address" udpsend "$TB_ORIGIN_B4" 443
# ping sockets for IPv6 drop the local error (docs/nft.md): a timeout.
tb_check_fails "ICMPv6 echo to an unlearned IPv6 address" \
    nd_probe icmp "$TB_ORIGIN_B6" 0 1
tb_check_fails "ping (the tool) to an unlearned address" \
    tb_sandbox "$TB_DIR/sbx-bin/ping" -c 1 -W 1 "$TB_ORIGIN_B4"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_ORIGIN_B4"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_ORIGIN_B6"
tb_assert_no_log "$TB_ECHO_LOG" echo.udp server.addr="$TB_RESOLVER_X4"

# --- learned for an allowed name: every protocol but QUIC ------------------------
nd_works "ICMP echo to a.test's learned address" icmp "$TB_ORIGIN_A4" 0
nd_works "UDP echo to a.test's learned address" udp "$TB_ORIGIN_A4" 7
nd_works "UDP echo to a.test's learned IPv6 address" udp "$TB_ORIGIN_A6" 7
nd_fails_fast "QUIC (udp 443) to the learned IPv4 address" udpsend "$TB_ORIGIN_A4" 443
nd_fails_fast "QUIC (udp 443) to the learned IPv6 address" udpsend "$TB_ORIGIN_A6" 443
tb_check_fails "an HTTP/3-style exchange (udp 443 and wait) gets nothing" \
    nd_probe udp "$TB_ORIGIN_A4" 443 1
tb_assert_no_log "$TB_ECHO_LOG" echo.udp server.port=443

# --- an address rule for TCP only ------------------------------------------------
nd_works "TCP echo to the tcp-only address" tcp "$TB_ORIGIN_C4" 7
nd_works "over IPv6 too" tcp "$TB_ORIGIN_C6" 7
nd_fails_fast "UDP to the tcp-only address" udpsend "$TB_ORIGIN_C4" 7
nd_fails_fast "UDP to the tcp-only IPv6 address" udpsend "$TB_ORIGIN_C6" 7
nd_fails_fast "ICMP echo to the tcp-only address" icmp "$TB_ORIGIN_C4" 0
tb_assert_no_log "$TB_ECHO_LOG" echo.udp server.addr="$TB_ORIGIN_C4"
tb_assert_no_log "$TB_ECHO_LOG" echo.udp server.addr="$TB_ORIGIN_C6"
tb_check "the kernel counted QUIC drops" bash -c \
    "ip netns exec $TB_SBX nft list counter inet egressd quic |
    grep -Eq 'packets [1-9]'"
tb_finish
