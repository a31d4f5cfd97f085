#!/bin/bash
# threat_05_internal (THREATS §5, §6): under default allow the cloud
# metadata service stays closed: by address, through an IPv6 socket, over
# UDP and ICMP, and through an allowed name that resolves to it (the
# answer is stripped). Then the user's policy allows every address
# (0.0.0.0/0, ::/0, the metadata address as a /32) and it is still closed. The ruleset proves the ranges no packet may
# be sent to (CGNAT, Azure's 168.63.129.16, fd00:ec2::254, link-local,
# the node and cluster networks 10/8, 172.16/12, 192.168/16, fc00::/7,
# their NAT64/6to4/mapped/compatible spellings) sit in the internal sets, judged
# before every user rule. Only the operator (allow.always) can open it,
# and taking that away closes it again.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: allow
egress:
  - {action: allow, target: rebind-meta.test}
  - {action: allow, target: rebind-cgnat.test}
EOF
)
tb_start_egressd --policy "$pol"
rules=$TB_DIR/egressd/rules
dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }

# --- default allow does not reach metadata ---------------------------------------------
nd_works "default allow: an origin is open" tcp "$TB_ORIGIN_B4" 80
tb_check_fails "curl http://$TB_META4/ fails" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_META4/"
nd_fails_fast "metadata, TCP 80" tcp "$TB_META4" 80
nd_fails_fast "metadata through an IPv6 socket (::ffff:$TB_META4)" \
    tcp "::ffff:$TB_META4" 80
nd_fails_fast "metadata, UDP" udpsend "$TB_META4" 7
nd_fails_fast "metadata, ICMP" icmp "$TB_META4" 0
tb_expect_eq "rebind-meta.test: the metadata A is stripped" "" \
    "$(dig_s rebind-meta.test A)"
tb_expect_eq "and fd00:ec2::254 too" "" "$(dig_s rebind-meta.test AAAA)"
tb_expect_eq "rebind-cgnat.test: 100.64.0.1 stripped" "" \
    "$(dig_s rebind-cgnat.test A)"
tb_check_fails "curl http://rebind-meta.test/ fails" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null http://rebind-meta.test/
tb_assert_log "$TB_EGRESSD_LOG" dns.strip name=rebind-meta.test
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_META4"
tb_check "the kernel counted the internal drops" bash -c \
    "ip netns exec $TB_SBX nft list counter inet egressd internal |
    grep -Eq 'packets [1-9]'"

# --- the user allows every address: still closed ---------------------------------------
m=$(tb_log_mark "$TB_EGRESSD_LOG")
cat >"$pol.new" <<EOF
defaultAction: allow
egress:
  - {action: allow, target: 0.0.0.0/0}
  - {action: allow, target: "::/0"}
  - {action: allow, target: $TB_META4}
  - {action: allow, target: rebind-meta.test}
EOF
mv -f "$pol.new" "$pol"
tb_check "the wider policy is loaded" tb_wait_log_line --since "$m" \
    --timeout 2 "$TB_EGRESSD_LOG" policy.loaded trigger=inotify
nd_fails_fast "user allows 0.0.0.0/0 and $TB_META4: metadata still closed" \
    tcp "$TB_META4" 80
nd_fails_fast "through an IPv6 socket too" tcp "::ffff:$TB_META4" 80
tb_check_fails "and by name" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null http://rebind-meta.test/
tb_expect_eq "and the user's 0.0.0.0/0 does not exempt the A answer (F6)" \
    "" "$(dig_s rebind-meta.test A)"
tb_expect_eq "nor ::/0 the AAAA answer" "" "$(dig_s rebind-meta.test AAAA)"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_META4"

# --- the ruleset: what may never be probed with packets ------------------------------
i4=$(ip netns exec "$TB_SBX" nft list set inet egressd internal4)
i6=$(ip netns exec "$TB_SBX" nft list set inet egressd internal6)
# (node and cluster networks: RFC 1918 and ULA, F4)
for p in 169.254.0.0/16 100.64.0.0/10 168.63.129.16 10.0.0.0/8 \
    172.16.0.0/12 192.168.0.0/16; do
	tb_expect_match "internal4 holds $p" "[ {]${p//./\\.}[,} ]" "$i4"
done
for p in "fc00::/7" "::ffff:169.254.0.0/112" \
    "64:ff9b::a9fe:0/112" "2002:a9fe::/32" "64:ff9b::6440:0/106" \
    "::ffff:100.64.0.0/106" "2001::/32" "::ffff:10.0.0.0/104" \
    "::10.0.0.0/104" "64:ff9b::a00:0/104" "2002:a00::/24" \
    "64:ff9b::ac10:0/108" "2002:ac10::/28" "::ffff:192.168.0.0/112" \
    "64:ff9b::c0a8:0/112" "2002:c0a8::/32"; do
	tb_expect_match "internal6 holds $p" "[ {]${p//./\\.}[,} ]" "$i6"
done
# fe80::/10, fec0::/10 and ff00::/8 merge into one interval up to the top,
# so these (and the rest of egressd/proto/special_ranges.c) are looked up rather
# than matched in the listing: the kernel answers, no packet is sent
in_set() { ip netns exec "$TB_SBX" nft get element inet egressd "$1" "{ $2 }"; }
tb_check "internal6 holds fe80::/10, fec0::/10, ff00::/8" \
    in_set internal6 "fe80::1, febf:ffff::1, fec0::1, ff02::1"
tb_check "internal4 holds 0/8, 127/8, 192.0.0/24, 198.18/15, 224/4, 240/4" \
    in_set internal4 "0.0.0.1, 127.0.0.1, 192.0.0.9, 198.19.0.1, 224.0.0.1, 255.255.255.255"
tb_check "internal6 holds local-use NAT64 outside its /96 form" \
    in_set internal6 "64:ff9b:1:1::1"
tb_check_fails "internal4 does not hold the documentation ranges" \
    in_set internal4 "$TB_ORIGIN_A4"
chain=$(ip netns exec "$TB_SBX" nft list chain inet egressd filter_out)
order=$(echo "$chain" | grep -oE 'counter name "(internal|user_allow|default_allow)"' |
    sed 's/.*"\(.*\)"/\1/' | uniq | paste -sd' ')
tb_expect_eq "internal is judged before the user's rules and the default" \
    "internal user_allow default_allow" "$order"

# --- the operator opens it explicitly, and closes it again -----------------------------
m=$(tb_log_mark "$TB_EGRESSD_LOG")
printf '# metadata for this sandbox\n%s\n' "$TB_META4" >"$rules/allow.always"
tb_check "allow.always is loaded" tb_wait_log_line --since "$m" --timeout 2 \
    "$TB_EGRESSD_LOG" policy.loaded trigger=inotify
tb_check "with the operator's rule metadata answers" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_META4/"
tb_assert_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_META4"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
rm -f "$rules/allow.always"
tb_check "its removal is loaded" tb_wait_log_line --since "$m" --timeout 2 \
    "$TB_EGRESSD_LOG" policy.loaded trigger=inotify
nd_fails_fast "and metadata is closed again" tcp "$TB_META4" 80
tb_finish
