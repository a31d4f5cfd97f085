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
# The precondition, asserted: conntrack holds an un-redirected entry (the
# reply comes from port 53 itself, not egressd's listener) from every
# port of the narrowed range, IPv4 and IPv6. Without it the restart below
# would prove nothing.
tb_check "conntrack has such an entry for all $((2 * (hi_port - lo_port + 1))) (family, port)" \
    tb_sandbox_root "$TB_PY" - "$lo_port" "$hi_port" <<'EOF2'
import re, sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
seen = set()
for line in open("/proc/net/nf_conntrack"):
    f = line.split()
    ports = re.findall(r"sport=(\d+) dport=(\d+)", line)
    if len(f) < 3 or f[2] != "udp" or len(ports) != 2:
        continue
    (osp, odp), (rsp, rdp) = [(int(a), int(b)) for a, b in ports]
    if lo <= osp <= hi and odp == 53 and rsp == 53 and rdp == osp:
        seen.add((f[0], osp))
want = {(fam, p) for fam in ("ipv4", "ipv6") for p in range(lo, hi + 1)}
missing = sorted(want - seen)
print("stale entries:", len(seen & want), "missing:", missing)
sys.exit(1 if missing else 0)
EOF2

tb_start_egressd --policy "$pol"
tb_pass "egressd restarts with a stale entry on every ephemeral port"
tb_expect_eq "and resolves an allowed name" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
tb_finish
