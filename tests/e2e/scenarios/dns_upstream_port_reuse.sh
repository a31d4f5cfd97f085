#!/bin/bash
# dns_upstream_port_reuse (THREATS 16, 18): the sandbox cannot make
# egressd's upstream queries loop back into egressd. Conntrack decides NAT
# once per flow: a datagram the sandbox sends from port P to the upstream's
# port 53 leaves a flow redirected to the resolver, and when egressd's next
# upstream socket happened to get port P from the kernel, its own (marked)
# queries joined that flow and were redirected back to itself, forwarded
# again, and so on until the in-flight cap: SERVFAIL for everything. The
# e2e dns_malformed burst hit this by chance (750 random source ports).
# Here the sandbox occupies every port of its ephemeral range on purpose,
# and egressd's own source ports too, then egressd restarts (new sockets)
# and must still resolve.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

# A small ephemeral range, so that the sandbox can cover all of it.
tb_sandbox_root sysctl -q -w net.ipv4.ip_local_port_range="40000 40499" ||
    tb_die "cannot narrow ip_local_port_range"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
tb_start_egressd --policy "$pol" --dns-timeout 3

spray() {
	tb_sandbox "$TB_PY" - "$TB_DNS1_IP4" <<'EOF'
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x5151, 0x0100, 1, 0, 0, 0) + b"\x04deny\x04test\x00\x00\x01\x00\x01"
sent = 0
for port in list(range(40000, 40500)) + list(range(65280, 65536)):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("0.0.0.0", port))
        s.sendto(q, (sys.argv[1], 53))
        sent += 1
    except OSError:
        pass  # a port in use, or one the ruleset refuses
    finally:
        s.close()
print(sent)
EOF
}
sent=$(spray)
tb_expect_match "the sandbox sent from its whole ephemeral range" '^[0-9]+$' "$sent"
[ "${sent:-0}" -ge 490 ] && tb_pass "at least 490 source ports used ($sent)" ||
    tb_fail "only $sent source ports used"

# New egressd, new upstream sockets; the sandbox's flows are still there.
tb_stop_egressd
tb_start_egressd --policy "$pol" --dns-timeout 3
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "a.test resolves after the restart" "203.0.113.10" \
    "$(tb_sandbox dig +short +time=5 +tries=1 a.test A)"
tb_expect_eq "and again (the same upstream socket)" "2001:db8:2::10" \
    "$(tb_sandbox dig +short +time=5 +tries=1 a.test AAAA)"
tb_assert_no_log --since "$mark" \
    "$TB_EGRESSD_LOG" dns.overload
# Every upstream query of egressd left from its own port range.
tb_check "the upstream saw egressd's queries from 65280-65535 only" \
    awk '/query\[A+\] a\.test from/ { n++; split($6, a, "/");
	if (a[2] < 65280) bad++ } END { exit !(n > 0 && bad == 0) }' \
    "$TB_DIR/dns/dns1.log"
tb_finish
