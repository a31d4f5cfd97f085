#!/bin/bash
# nft_selfcheck_stale_ct: a restart's self-check is not fooled by conntrack
# entries a killed egressd left behind. The old self-check's marked probes
# (loopback port 53, not redirected) leave un-NAT-ed UDP entries that live
# 30 s; a new probe whose ephemeral source port happens to be one of them
# matches the stale entry, skips the redirect and is lost, so the restart
# failed ("a datagram to ::1 port 53 did not arrive"), about once in a
# hundred restarts in CI. Here the sandbox's ephemeral range is narrowed to
# a few ports and every one of them gets such a stale entry first, so the
# collision is certain rather than rare.
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
tb_stop_egressd KILL
tb_expect_eq "egressd died of SIGKILL" 137 "$TB_EGRESSD_STATUS"

lo_port=40000 hi_port=40007
tb_sandbox_root sysctl -q -w \
    net.ipv4.ip_local_port_range="$lo_port $hi_port" ||
    tb_die "cannot narrow the ephemeral port range"
# Marked (as egressd's own sockets are) so the table does not redirect
# them: exactly the entries an old self-check's exemption probe leaves.
tb_check "stale un-redirected entries from every ephemeral port" \
    tb_sandbox_root "$TB_PY" - "$lo_port" "$hi_port" <<'EOF2'
import socket, sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    for port in range(lo, hi + 1):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, 1)
        s.bind((addr, port))
        s.sendto(b"stale", (addr, 53))
        s.close()
EOF2
out=$(tb_sandbox_root cat /proc/net/nf_conntrack 2>/dev/null |
    grep -c "dport=53 .*dport=$lo_port\b\|sport=$lo_port dport=53" || true)
tb_log "conntrack entries from port $lo_port: ${out:-unknown}"

tb_start_egressd --policy "$pol"
tb_pass "egressd restarts with a stale entry on every ephemeral port"
tb_expect_eq "and resolves an allowed name" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
tb_finish
