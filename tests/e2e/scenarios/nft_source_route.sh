#!/bin/bash
# nft_source_route (issue 16 item 18): source routing cannot carry a packet
# to a denied destination through an allowed (learned) address. Any user
# may set IPV6_RTHDR (type 4, SRv6; type 2 when the kernel has MIPv6; type
# 0 the kernel refuses); IP_OPTIONS LSRR/SSRR need CAP_NET_RAW on this
# kernel (6.18: EPERM for the sandbox user), which a container keeps by
# default (Docker's set), so they are tried as root in the pod too (root
# without SO_MARK meets the chain like anyone). The packet's
# destination is then the first hop, a.test's address, which the rules
# allow, and the denied one (b.test's) rides in the option. The filter
# chain now denies such packets before anything else: sendto gets EPERM
# and nothing with a route option reaches the internet namespace (counted
# there at prerouting). Before, they left the sandbox.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
tb_start_egressd --policy "$pol"
tb_net nft -f - <<'EOF' || tb_die "probe table in the internet namespace"
table inet srprobe {
	chain pre {
		type filter hook prerouting priority raw; policy accept;
		ip option lsrr exists counter
		ip option ssrr exists counter
		exthdr rt exists counter
	}
}
EOF
probe_count() {
	tb_net nft list chain inet srprobe pre |
	    awk '/counter packets/ {for (i = 1; i < NF; i++) if ($i == "packets") s += $(i + 1)} END {print s + 0}'
}

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
tb_expect_eq "a.test learned (IPv4)" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
tb_expect_eq "a.test learned (IPv6)" "$TB_ORIGIN_A6" "$(dig_s a.test AAAA)"

# SR A4 B4 A6 B6: per way of source routing, one line "NAME RESULT".
sr='
import errno, socket, struct, sys
a4, b4, a6, b6 = sys.argv[1:5]
def res(f):
    try:
        f()
        return "sent"
    except OSError as e:
        return "err " + errno.errorcode.get(e.errno, "?")
def v4(kind):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    opt = bytes([kind, 7, 4]) + socket.inet_aton(a4) + b"\0"
    r = res(lambda: s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opt))
    if r != "sent":
        return "setsockopt " + r
    return res(lambda: s.sendto(b"sr", (b4, 7)))
def v6(rh):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    r = res(lambda: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RTHDR, rh))
    if r != "sent":
        return "setsockopt " + r
    return res(lambda: s.sendto(b"sr", (b6, 7)))
A6, B6 = socket.inet_pton(socket.AF_INET6, a6), socket.inet_pton(socket.AF_INET6, b6)
rh0 = bytes([0, 2, 0, 1]) + b"\0" * 4 + A6
rh2 = bytes([0, 2, 2, 1]) + b"\0" * 4 + A6
# SRH: segments[0] = final (the kernel writes it), segments[1] = first hop
rh4 = bytes([0, 4, 4, 1, 1, 0, 0, 0]) + B6 + A6
print("lsrr", v4(131))
print("ssrr", v4(137))
print("rthdr0", v6(rh0))
print("rthdr2", v6(rh2))
print("rthdr4", v6(rh4))
'
out=$(tb_sandbox "$TB_PY" -c "$sr" "$TB_ORIGIN_A4" "$TB_ORIGIN_B4" "$TB_ORIGIN_A6" "$TB_ORIGIN_B6")
printf '%s\n' "$out" | sed 's/^/# sandbox user: /' >&2
rout=$(tb_sandbox_root "$TB_PY" -c "$sr" "$TB_ORIGIN_A4" "$TB_ORIGIN_B4" "$TB_ORIGIN_A6" "$TB_ORIGIN_B6")
printf '%s\n' "$rout" | sed 's/^/# root: /' >&2
get() { awk -v k="$1" '$1 == k {$1 = ""; sub(/^ /, ""); print}' <<<"$2"; }
for k in lsrr ssrr; do
	tb_expect_match "sandbox user: IPv4 $k via a.test to b.test refused" \
	    '^(setsockopt err EPERM|err EPERM)$' "$(get $k "$out")"
done
tb_expect_eq "CAP_NET_RAW (root): IPv4 LSRR via a.test to b.test refused at once" \
    "err EPERM" "$(get lsrr "$rout")"
# a strict route needs a first hop on the link: the route lookup fails
# before the chain sees it (a.test is not a neighbour here)
tb_expect_match "CAP_NET_RAW (root): IPv4 SSRR via a.test to b.test refused" \
    '^err (EPERM|ENETUNREACH)$' "$(get ssrr "$rout")"
for o in out rout; do
	who="sandbox user"
	[ "$o" = rout ] && who=root
	tb_expect_eq "$who: IPv6 SRv6 routing header (type 4) via a.test to b.test refused at once" \
	    "err EPERM" "$(get rthdr4 "${!o}")"
	# types 0 and 2: refused by the kernel itself (2 only without MIPv6);
	# if a kernel lets one out, the chain must refuse it like type 4
	for t in rthdr0 rthdr2; do
		tb_expect_match "$who: IPv6 routing header $t refused (kernel or chain)" \
		    '^(setsockopt err EINVAL|setsockopt err EPERM|err EPERM)$' \
		    "$(get "$t" "${!o}")"
	done
done
tb_expect_eq "no packet with a route option reached the internet namespace" \
    0 "$(probe_count)"
tb_assert_log "$TB_EGRESSD_LOG" egressd.ready
# plain traffic is unaffected
tb_check "a TCP connection to a.test still works" tb_sandbox "$TB_PY" -c '
import socket, sys
s = socket.socket(); s.settimeout(3)
s.connect((sys.argv[1], 7)); s.sendall(b"hi\n"); assert s.recv(8)
' "$TB_ORIGIN_A4"
tb_finish
