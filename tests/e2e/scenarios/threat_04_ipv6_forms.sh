#!/bin/bash
# threat_04_ipv6_forms (THREATS §1, §4): the sandbox spells an IPv4
# destination in IPv6. Under default deny, an IPv6 literal, the
# IPv4-mapped form (which the kernel sends as IPv4) and the NAT64 form of
# an unlearned address fail at once, and the NAT64 form of a *learned*
# IPv4 address is not opened by learning it. Under default allow with an
# operator always-deny of one IPv4 address, its mapped and NAT64 spellings
# are rejected too (without the synthetic IPv6 rules they would be allowed
# and vanish into a network with no route: a timeout, not a reject), and
# the ruleset carries the NAT64, 6to4, mapped and compatible forms plus
# Teredo as a whole. The same holds for a *user* deny of an IPv4 address
# under default allow: its NAT64 spelling is refused at once (F9). (6to4 and Teredo are proved through the ruleset only: no packet
# goes to non-documentation addresses.) Nothing reaches the origins.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

# NAT64 (64:ff9b::/96) spellings of the bed's IPv4 origins.
nat64() { # a.b.c.d -> 64:ff9b::xxxx:xxxx
	local IFS=.
	set -- $1
	printf '64:ff9b::%x:%x\n' $(($1 * 256 + $2)) $(($3 * 256 + $4))
}
NAT64_A=$(nat64 "$TB_ORIGIN_A4")   # 64:ff9b::cb00:710a
NAT64_B=$(nat64 "$TB_ORIGIN_B4")   # 64:ff9b::cb00:710b
# rejected ADDR: a TCP connect to ADDR:80 is reset by egressd's reject
# (ECONNREFUSED) in under 1 s; a network without a route answers
# otherwise (a timeout, or ENETUNREACH after neighbour discovery).
rejected() {
	local out
	out=$(nd_probe tcp "$1" 80 2)
	echo "$out"
	case $out in
	"err ECONNREFUSED "*) [ "${out##* }" -lt 1000 ] ;;
	*) return 1 ;;
	esac
}

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
tb_start_egressd --policy "$pol"

tb_expect_eq "a.test resolves (learned)" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
nd_works "its address is open" tcp "$TB_ORIGIN_A4" 80
nd_works "and through an IPv6 socket as ::ffff:$TB_ORIGIN_A4" \
    tcp "::ffff:$TB_ORIGIN_A4" 80
# --- never resolved ---------------------------------------------------------------
nd_fails_fast "IPv6 literal of an unlearned origin" tcp "$TB_ORIGIN_B6" 80
nd_fails_fast "IPv4-mapped ::ffff:$TB_ORIGIN_B4" tcp "::ffff:$TB_ORIGIN_B4" 80
nd_fails_fast "IPv4-mapped, UDP" udpsend "::ffff:$TB_ORIGIN_B4" 7
tb_check "NAT64 $NAT64_B: rejected" rejected "$NAT64_B"
tb_check "NAT64 form of the *learned* $TB_ORIGIN_A4 ($NAT64_A): rejected" \
    rejected "$NAT64_A"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B4"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B6"
tb_assert_no_log "$TB_ECHO_LOG" '*' server.addr="$TB_ORIGIN_B4"
tb_stop_egressd

# --- default allow, one IPv4 address always denied by the operator ------------------
pol2=$(tb_policy_file allow.yaml <<EOF
defaultAction: allow
alwaysDeny: [$TB_ORIGIN_B4]
EOF
)
tb_start_egressd --policy "$pol2"
nd_works "default allow: another origin is open" tcp "$TB_ORIGIN_A4" 80
nd_fails_fast "always-denied $TB_ORIGIN_B4" tcp "$TB_ORIGIN_B4" 80
nd_fails_fast "its IPv4-mapped form" tcp "::ffff:$TB_ORIGIN_B4" 80
tb_check "its NAT64 form $NAT64_B: rejected" rejected "$NAT64_B"
nd_fails_fast "its NAT64 form, UDP" udpsend "$NAT64_B" 7
# The same probe to a NAT64 address nobody denied is let out (default
# allow) and, having no route past the bed's "internet", never connects:
# so the fast reject above is the always-deny rule, not the network.
tb_check_fails "NAT64 form of a non-denied origin is let out (not rejected)" \
    rejected "$NAT64_A"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B4"

rs=$(ip netns exec "$TB_SBX" nft list table inet egressd)
b_hex=${NAT64_B#64:ff9b::}
tb_expect_match "ruleset: mapped form in an always-deny IPv6 set" \
    "::ffff:$TB_ORIGIN_B4" "$rs"
tb_expect_match "ruleset: NAT64 form" "64:ff9b::$b_hex" "$rs"
tb_expect_match "ruleset: IPv4-compatible form ::$TB_ORIGIN_B4" \
    "(^|[ {	])::${TB_ORIGIN_B4//./\\.}([,} ]|\$)" "$rs"
tb_expect_match "ruleset: 6to4 form 2002:${b_hex}::/48" \
    "2002:${b_hex}::/48" "$rs"
tb_expect_match "ruleset: Teredo (2001::/32) is internal as a whole" \
    "2001::/32" "$rs"
tb_expect_match "ruleset: the IPv6 sets are consulted for ip6 daddr" \
    'ip6 daddr @g[0-9]+_deny6 counter name "always_deny"' "$rs"
tb_check "the always_deny counter counted the rejects" bash -c \
    "ip netns exec $TB_SBX nft list counter inet egressd always_deny |
    grep -Eq 'packets [1-9]'"
tb_stop_egressd

# --- default allow, the *user* denies one IPv4 address (F9) ---------------------------
pol3=$(tb_policy_file user_deny.yaml <<EOF
defaultAction: allow
egress:
  - {action: deny, target: $TB_ORIGIN_B4}
EOF
)
tb_start_egressd --policy "$pol3"
m=$(tb_log_mark "$TB_ORIGIN_LOG")
nd_works "default allow: another origin is open" tcp "$TB_ORIGIN_A4" 80
nd_fails_fast "user-denied $TB_ORIGIN_B4" tcp "$TB_ORIGIN_B4" 80
tb_check "its NAT64 form $NAT64_B: rejected at once" rejected "$NAT64_B"
nd_fails_fast "its NAT64 form, UDP" udpsend "$NAT64_B" 7
curl_nat64() {
	local rc=0 t0 ms
	t0=$(date +%s%N)
	tb_sandbox curl -sS -g --max-time 3 -o /dev/null "http://[$NAT64_B]/" ||
	    rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "curl exit $rc after $ms ms"
	[ "$rc" -eq 7 ] && [ "$ms" -lt 1000 ]
}
tb_check "curl http://[$NAT64_B]/: exit 7 (refused) within 1 s" curl_nat64
# control: the NAT64 form of an address nobody denied is let out (and,
# with no NAT64 gateway in the bed, not refused)
tb_check_fails "NAT64 form of a non-denied origin is not rejected" \
    rejected "$NAT64_A"
tb_assert_no_log --since "$m" "$TB_ORIGIN_LOG" origin.request \
    server.addr="$TB_ORIGIN_B4"
rs=$(ip netns exec "$TB_SBX" nft list table inet egressd)
tb_expect_match "ruleset: a user_deny IPv6 set holds the NAT64 form" \
    "64:ff9b::$b_hex[,} ]" \
    "$(echo "$rs" | sed -n '/set g[0-9]*_deny6 {/,/}/p')"
tb_expect_match "ruleset: and 6to4 2002:${b_hex}::/48" "2002:${b_hex}::/48" \
    "$rs"
tb_expect_match "ruleset: consulted under the user_deny counter" \
    'ip6 daddr @g[0-9]+_deny6 counter name "user_deny"' "$rs"
tb_finish
