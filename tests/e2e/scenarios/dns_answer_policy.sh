#!/bin/bash
# dns_answer_policy: what comes back from the upstream is checked before the
# sandbox sees it. An allowed alias of a denied name is NXDOMAIN; internal
# answers (RFC 1918, ULA, metadata, loopback, CGNAT and their IPv6-embedded
# forms) of allowed names are stripped, while public addresses of the same
# RRset survive; a user CIDR, even 0.0.0.0/0, exempts none of them, only
# an operator CIDR (allow.always) lets a private address through; HTTPS
# hints pass the same filter; big answers travel over TCP.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: cname-ok.test}
  - {action: allow, target: cname-chain.test}
  - {action: allow, target: cname-bad.test}
  - {action: allow, target: cname-rebind.test}
  - {action: allow, target: rebind.test}
  - {action: allow, target: rebind-meta.test}
  - {action: allow, target: rebind-lo.test}
  - {action: allow, target: rebind-cgnat.test}
  - {action: allow, target: rebind-mapped.test}
  - {action: allow, target: rebind-nat64.test}
  - {action: allow, target: rebind-6to4.test}
  - {action: allow, target: rebind-mixed.test}
  - {action: allow, target: svc.test}
  - {action: allow, target: big.test}
  - {action: allow, target: huge.test}
EOF
)
tb_start_egressd --policy "$pol"

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
status() { tb_sandbox dig +time=2 +tries=1 "$@" | sed -n 's/.*status: \([A-Z]*\).*/\1/p'; }

# --- CNAME chains ---
tb_expect_eq "alias of an allowed name resolves" \
    "$(printf 'a.test.\n203.0.113.10')" "$(dig_s cname-ok.test A)"
tb_expect_eq "two hops through allowed names resolve" \
    "$(printf 'cname-ok.test.\na.test.\n203.0.113.10')" \
    "$(dig_s cname-chain.test A)"
tb_expect_eq "allowed alias of a denied name: NXDOMAIN" "NXDOMAIN" \
    "$(status cname-bad.test A)"
tb_expect_eq "and no address of the denied target leaks" "" \
    "$(dig_s cname-bad.test A)"
tb_check_fails "b.test's address stays closed" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null https://b.test/
tb_assert_log "$TB_EGRESSD_LOG" dns.deny name=cname-bad.test reason=cname \
    denied=b.test

# --- rebinding ---
for n in rebind.test rebind-meta.test rebind-lo.test rebind-cgnat.test; do
	tb_expect_eq "$n: internal A stripped" "" "$(dig_s "$n" A)"
	tb_expect_eq "$n: answer is NOERROR (empty), not an error" "NOERROR" \
	    "$(status "$n" A)"
done
for n in rebind.test rebind-meta.test rebind-lo.test rebind-mapped.test \
    rebind-nat64.test rebind-6to4.test; do
	tb_expect_eq "$n: internal AAAA stripped" "" "$(dig_s "$n" AAAA)"
done
tb_expect_eq "mixed RRset: the public address survives alone" \
    "203.0.113.10" "$(dig_s rebind-mixed.test A)"
tb_expect_eq "alias to a rebinding name: only the CNAME survives" \
    "rebind.test." "$(dig_s cname-rebind.test A)"
tb_check_fails "the metadata service stays closed" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_META4/"
tb_assert_log "$TB_EGRESSD_LOG" dns.strip name=rebind-meta.test
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request "server.addr=$TB_META4"

# --- HTTPS records: hints go through the same filter ---
tb_expect_match "HTTPS record with public hints is kept" \
    "ipv4hint=203\.0\.113\.10" "$(dig_s svc.test HTTPS)"

# --- size: TC over UDP, TCP carries it ---
out=$(tb_sandbox dig +time=2 +tries=1 +ignore +noedns big.test A)
tb_expect_match "60 records without EDNS: truncated over UDP" \
    "flags:[a-z ]* tc" "$out"
tb_expect_eq "and complete over TCP" "60" \
    "$(dig_s +tcp big.test A | wc -l)"
tb_expect_eq "EDNS 1232 takes them over UDP" "60" \
    "$(dig_s +ignore +bufsize=1232 big.test A | wc -l)"
tb_expect_match "100 records: truncated even with EDNS 1232" \
    "flags:[a-z ]* tc" \
    "$(tb_sandbox dig +time=2 +tries=1 +ignore +bufsize=1232 huge.test A)"
tb_expect_eq "dig's own fallback to TCP gets all 100" "100" \
    "$(dig_s +bufsize=1232 huge.test A | wc -l)"
tb_expect_eq "glibc gets them too" "100" \
    "$(tb_sandbox getent ahostsv4 huge.test | awk '$2 == "STREAM"' | wc -l)"

# A user rule allowing every address exempts no internal answer: only
# the operator can (F6).
tb_stop_egressd
pol=$(tb_policy_file policy2.yaml <<'EOF'
defaultAction: allow
egress:
  - {action: allow, target: 0.0.0.0/0}
  - {action: allow, target: "::/0"}
  - {action: allow, target: 10.1.2.3}
  - {action: allow, target: 169.254.169.254}
  - {action: allow, target: rebind.test}
  - {action: allow, target: rebind-meta.test}
EOF
)
m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_start_egressd --policy "$pol"
for n in rebind.test rebind-meta.test; do
	tb_expect_eq "user allows 0.0.0.0/0 and the address: $n A stripped" \
	    "" "$(dig_s "$n" A)"
	tb_expect_eq "user allows ::/0: $n AAAA stripped" "" \
	    "$(dig_s "$n" AAAA)"
done
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" dns.strip name=rebind.test
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" dns.strip \
    name=rebind-meta.test

# The fixture really answers internal addresses (so the checks above can
# fail): the operator's allow.always lets one range back through.
tb_stop_egressd
mkdir -p "$TB_DIR/egressd/rules"
printf '# node network this sandbox may reach\n10.1.2.0/24\n' \
    >"$TB_DIR/egressd/rules/allow.always"
pol=$(tb_policy_file policy3.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: rebind.test}
  - {action: allow, target: rebind-meta.test}
  - {action: allow, target: rebind-mixed.test}
EOF
)
tb_start_egressd --policy "$pol"
tb_expect_eq "an operator allow.always CIDR lets that private address through" \
    "10.1.2.3" "$(dig_s rebind.test A)"
tb_expect_eq "and only that range: fd00::1 stays stripped" "" \
    "$(dig_s rebind.test AAAA)"
tb_expect_eq "mixed RRset: public and operator-allowed both kept" \
    "$(printf '10.1.2.3\n203.0.113.10')" \
    "$(dig_s rebind-mixed.test A | sort)"
tb_expect_eq "metadata, outside the operator's range, stays stripped" "" \
    "$(dig_s rebind-meta.test A)"
tb_finish
