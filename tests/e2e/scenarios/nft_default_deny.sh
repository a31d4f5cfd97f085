#!/bin/bash
# nft_default_deny: the L3/L4 default-deny table alone (tests/e2e/tools/
# nft_driver), with real packets from the sandbox uid. Not-allowed origins
# fail fast over IPv4 and IPv6, TCP, UDP and ICMP; a CIDR rule opens only
# its ports and protocols; DoT and QUIC stay closed even to an address
# allowed on every port; metadata stays closed even under default allow;
# the control API port is closed to the sandbox on every local address
# while egressd's own (marked) sockets reach it.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: $TB_ORIGIN_A4, ports: [80, 7], protocols: [tcp]}
  - {action: allow, target: "$TB_ORIGIN_A6", ports: [80], protocols: [tcp]}
  - {action: allow, target: $TB_ORIGIN_C4}
  - {action: allow, target: "$TB_ORIGIN_C6"}
EOF2
)
nd_start --policy "$pol"

# --- not allowed: fail fast, every family and protocol ----------------------
nd_fails_fast "TCP to a not-allowed IPv4 origin" tcp "$TB_ORIGIN_B4" 80
nd_fails_fast "TCP to a not-allowed IPv6 origin" tcp "$TB_ORIGIN_B6" 80
nd_fails_fast "UDP to a not-allowed IPv4 origin" udpsend "$TB_ORIGIN_B4" 7
nd_fails_fast "UDP to a not-allowed IPv6 origin" udpsend "$TB_ORIGIN_B6" 7
nd_fails_fast "ICMP echo to a not-allowed IPv4 origin" icmp "$TB_ORIGIN_B4" 0
# ping6 sockets ignore the local drop (the kernel's ping_v6_sendmsg drops
# the error), so this one fails by timeout rather than fast.
tb_check_fails "ICMPv6 echo to a not-allowed IPv6 origin" \
    nd_probe icmp "$TB_ORIGIN_B6" 0 1
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B4"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_ORIGIN_B4"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_ORIGIN_B6"

# --- a CIDR rule: only its ports and protocols -------------------------------
nd_works "TCP 80 to the allowed IPv4 origin" tcp "$TB_ORIGIN_A4" 80
nd_works "TCP 7 (echo) to the allowed IPv4 origin" tcp "$TB_ORIGIN_A4" 7
nd_fails_fast "TCP 8080, not in the rule's ports" tcp "$TB_ORIGIN_A4" 8080
nd_fails_fast "UDP 7, not in the rule's protocols" udpsend "$TB_ORIGIN_A4" 7
nd_works "TCP 80 to the allowed IPv6 origin" tcp "$TB_ORIGIN_A6" 80
nd_fails_fast "TCP 7 to the IPv6 origin (rule has port 80 only)" \
    tcp "$TB_ORIGIN_A6" 7
tb_check "curl http://$TB_ORIGIN_A4/ as the sandbox" \
    tb_sandbox curl -sS --max-time 3 "http://$TB_ORIGIN_A4/"

# --- allowed on every port: still no DoT, no QUIC ----------------------------
nd_works "TCP echo to the all-ports origin" tcp "$TB_ORIGIN_C4" 7
nd_works "UDP echo to the all-ports origin" udp "$TB_ORIGIN_C4" 7
nd_works "UDP echo to the all-ports IPv6 origin" udp "$TB_ORIGIN_C6" 7
nd_works "ICMP echo to the all-ports origin" icmp "$TB_ORIGIN_C4" 0
nd_works "ICMPv6 echo to the all-ports IPv6 origin" icmp "$TB_ORIGIN_C6" 0
nd_fails_fast "DoT (tcp 853) even there" tcp "$TB_ORIGIN_C4" 853
nd_fails_fast "DoT over IPv6" tcp "$TB_ORIGIN_C6" 853
nd_fails_fast "QUIC (udp 443) even there" udpsend "$TB_ORIGIN_C4" 443
nd_fails_fast "QUIC over IPv6" udpsend "$TB_ORIGIN_C6" 443
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_ORIGIN_C4" server.port=853
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_ORIGIN_C4" server.port=443

# --- metadata ------------------------------------------------------------------
nd_fails_fast "metadata 169.254.169.254:80" tcp "$TB_META4" 80

# --- the control API port, on every local address -------------------------------
ip netns exec "$TB_SBX" "$TB_PY" -c '
import socket, threading
def serve(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, 18080)); s.listen(16)
    while True:
        c, _ = s.accept(); c.close()
threading.Thread(target=serve, args=(socket.AF_INET6, "::"), daemon=True).start()
serve(socket.AF_INET, "0.0.0.0")' >/dev/null 2>&1 &
TB_PIDS+=($!)
tb_wait_port "$TB_SBX" tcp 0.0.0.0 18080 || tb_fail "API stand-in did not listen"
nd_fails_fast "sandbox -> 127.0.0.1:18080 (API)" tcp 127.0.0.1 18080
nd_fails_fast "sandbox -> 127.0.0.2:18080 (API)" tcp 127.0.0.2 18080
nd_fails_fast "sandbox -> [::1]:18080 (API)" tcp ::1 18080
nd_fails_fast "sandbox -> 0.0.0.0:18080 (API)" tcp 0.0.0.0 18080
nd_fails_fast "sandbox -> [::]:18080 (API)" tcp :: 18080
nd_fails_fast "sandbox -> own veth $TB_SBX_IP4:18080 (API)" tcp "$TB_SBX_IP4" 18080
nd_fails_fast "sandbox -> own veth [$TB_SBX_IP6]:18080 (API)" tcp "$TB_SBX_IP6" 18080
tb_check "egressd's marked socket reaches 127.0.0.1:18080" \
    tb_sandbox_root "$TB_PY" "$ND_PROBE" tcpmark 127.0.0.1 18080
tb_check_fails "an unmarked root socket does not either" \
    tb_sandbox_root "$TB_PY" "$ND_PROBE" tcp 127.0.0.1 18080 1

# --- default allow: everything but the always-denied ----------------------------
pol2=$(tb_policy_file allow.yaml <<'EOF2'
defaultAction: allow
EOF2
)
tb_check "apply default allow" nd_cmd apply "$pol2"
nd_works "default allow: the other origin now works" tcp "$TB_ORIGIN_B4" 80
nd_fails_fast "default allow: metadata still closed" tcp "$TB_META4" 80
nd_fails_fast "default allow: DoT still closed" tcp "$TB_ORIGIN_B4" 853
nd_fails_fast "default allow: API port still closed" tcp 127.0.0.1 18080
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_META4"

tb_check "counters readable" nd_cmd counters
tb_assert_log "$TB_EGRESSD_LOG" driver.counter name=default_deny
tb_finish
