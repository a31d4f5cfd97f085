#!/bin/bash
# threat_02_alt_resolvers (THREATS §2): the sandbox tries every resolver
# but egressd's. Port 53 to a hard-coded resolver, UDP and TCP, IPv4 and
# IPv6, is answered by egressd with the same policy; DNS over TLS (tcp 853)
# and DNS over QUIC (udp 853) stay closed even to an address egressd has
# learned for an allowed name; DNS over HTTPS to an IP literal that was
# never resolved, or to a denied name, never connects; and an allowed
# host the operator lists as a DoH resolver is closed on 443 only.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
EOF
)
# c.test's addresses play a DoH resolver the operator knows about.
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_BLOCK_DOH_443=true
    "OPENSANDBOX_EGRESS_DOH_BLOCKLIST=$TB_ORIGIN_C4,$TB_ORIGIN_C6")
tb_start_egressd --policy "$pol"

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }

# The bed's dnsmasq serves TCP inside its main process (--no-daemon), so
# while egressd holds a TCP upstream connection open, dnsmasq answers no
# UDP. Every name is asked over UDP first; the TCP queries below are then
# answered from egressd's cache (which is what they test: egressd answers).
tb_expect_eq "a.test resolves over UDP" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
tb_expect_eq "a.test AAAA too" "$TB_ORIGIN_A6" "$(dig_s a.test AAAA)"
tb_expect_eq "c.test resolves (learned)" "$TB_ORIGIN_C4" "$(dig_s c.test A)"
tb_expect_eq "over IPv6 too" "$TB_ORIGIN_C6" "$(dig_s c.test AAAA)"

# --- port 53 to a resolver of the sandbox's choosing -------------------------
tb_expect_eq "hard-coded resolver, UDP: egressd answers" "$TB_ORIGIN_A4" \
    "$(dig_s @"$TB_RESOLVER_X4" a.test A)"
tb_expect_eq "hard-coded resolver, TCP: egressd answers" "$TB_ORIGIN_A4" \
    "$(dig_s +tcp @"$TB_RESOLVER_X4" a.test A)"
tb_expect_eq "hard-coded IPv6 resolver, TCP: egressd answers" "$TB_ORIGIN_A6" \
    "$(dig_s +tcp @"$TB_RESOLVER_X6" a.test AAAA)"
tb_expect_match "and applies the policy (denied name over TCP)" \
    "status: NXDOMAIN" \
    "$(tb_sandbox dig +tcp +time=2 +tries=1 @"$TB_RESOLVER_X4" b.test A)"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X4" server.port=53
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_RESOLVER_X6" server.port=53

# --- DoT / DoQ to an address egressd has learned -------------------------------
# a.test is allowed on every port: its learned addresses are open...
nd_works "a.test's learned IPv4 address is open (tcp 7)" tcp "$TB_ORIGIN_A4" 7
nd_works "a.test's learned IPv6 address is open (tcp 7)" tcp "$TB_ORIGIN_A6" 7
# ...but not for encrypted DNS egressd cannot see into.
nd_fails_fast "DoT (tcp 853) to the learned IPv4 address" tcp "$TB_ORIGIN_A4" 853
nd_fails_fast "DoT (tcp 853) to the learned IPv6 address" tcp "$TB_ORIGIN_A6" 853
nd_fails_fast "DoQ (udp 853) to the learned IPv4 address" udpsend "$TB_ORIGIN_A4" 853
nd_fails_fast "DoQ (udp 853) to the learned IPv6 address" udpsend "$TB_ORIGIN_A6" 853
nd_fails_fast "DoT to the public resolver" tcp "$TB_RESOLVER_X4" 853
tb_assert_no_log "$TB_ECHO_LOG" '*' server.port=853

# --- DoH -----------------------------------------------------------------------
# To an IP literal never resolved through an allowed name (b.test's address
# serves HTTPS, so without the default deny this would reach it).
tb_check_fails "DoH to an IP literal (https://$TB_ORIGIN_B4/dns-query)" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null \
    --doh-url "https://$TB_ORIGIN_B4/dns-query" https://a.test/
tb_check_fails "DoH to an IPv6 literal" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null \
    --doh-url "https://[$TB_ORIGIN_B6]/dns-query" https://a.test/
# To a denied name: its name does not resolve, and its address stays closed.
tb_check_fails "DoH to a denied name (https://b.test/dns-query)" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null \
    --doh-url https://b.test/dns-query https://a.test/
tb_check_fails "DoH to a denied name pinned to its address" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null \
    --resolve "b.test:443:$TB_ORIGIN_B4" https://b.test/dns-query
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B4"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B6"

# To an allowed host on the operator's DoH blocklist: learned, open on
# other ports, closed on tcp 443.
tb_check "its HTTP port is open" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null http://c.test/
nd_fails_fast "but DoH (tcp 443) to the blocklisted IPv4 is closed" \
    tcp "$TB_ORIGIN_C4" 443
nd_fails_fast "and to the blocklisted IPv6" tcp "$TB_ORIGIN_C6" 443
tb_check_fails "curl --doh-url https://c.test/dns-query fails" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null \
    --doh-url https://c.test/dns-query https://a.test/
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request \
    "server.addr~^($TB_ORIGIN_C4|$TB_ORIGIN_C6)$" server.port=443
tb_assert_log "$TB_ORIGIN_LOG" origin.request \
    "server.addr~^($TB_ORIGIN_C4|$TB_ORIGIN_C6)$" \
    server.port=80
tb_check "the kernel counted DoH drops" bash -c \
    "ip netns exec $TB_SBX nft list counter inet egressd doh |
    grep -Eq 'packets [1-9]'"
tb_finish
