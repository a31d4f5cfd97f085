#!/bin/bash
# nft_learn: addresses learned from DNS answers (nft_learn, as the resolver
# will call it) open at once, close when their TTL runs out, are refreshed
# by a re-learn and by live connections (nft_renew_live); a connection
# outlives its address's TTL; a policy update keeps learned addresses it
# still allows and removes the ones it now denies.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
dns: {ttlMin: 1, ttlMax: 60}
EOF2
)
nd_start --policy "$pol"

# wait_fails KIND HOST PORT SECONDS: poll until the probe fails (bounded).
wait_fails()
{
	local end=$(( $(date +%s) + $4 ))
	while nd_probe "$1" "$2" "$3" 1 >/dev/null; do
		[ "$(date +%s)" -le "$end" ] || return 1
		sleep 0.1
	done
}

# --- learn -> open at once ---------------------------------------------------------
nd_fails_fast "before learning: closed" tcp "$TB_ORIGIN_A4" 80
tb_check "learn a.test's IPv4 (ttl 3)" nd_cmd learn "$TB_ORIGIN_A4" 3 a.test
nd_works "right after the ack: open" tcp "$TB_ORIGIN_A4" 80
tb_check "learn a.test's IPv6 (ttl 3)" nd_cmd learn "$TB_ORIGIN_A6" 3 a.test
nd_works "IPv6 too" tcp "$TB_ORIGIN_A6" 80
nd_fails_fast "other ports of a learned address follow it (not QUIC)" \
    udpsend "$TB_ORIGIN_A4" 443

# --- TTL runs out -> closed ---------------------------------------------------------
t0=$(date +%s)
tb_check "after the TTL the IPv4 address closes (<= 6 s)" \
    wait_fails tcp "$TB_ORIGIN_A4" 80 6
tb_check "so does the IPv6 one" wait_fails tcp "$TB_ORIGIN_A6" 80 6
el=$(( $(date +%s) - t0 ))
tb_check "not before its TTL (closed after ${el}s)" test "$el" -ge 1

# --- re-learn refreshes --------------------------------------------------------------
tb_check "learn b.test (ttl 2)" nd_cmd learn "$TB_ORIGIN_B4" 2 b.test
sleep 1.2
tb_check "re-learn b.test (ttl 5) before it expires" \
    nd_cmd learn "$TB_ORIGIN_B4" 5 b.test
sleep 1.5
nd_works "past the first TTL, the refreshed address is open" \
    tcp "$TB_ORIGIN_B4" 80

# --- a long-running connection outlives the TTL ----------------------------------
tb_check "learn c.test (ttl 1)" nd_cmd learn "$TB_ORIGIN_C4" 1 c.test
hold=$TB_DIR/hold.out
tb_sandbox_bg "$hold" "$TB_PY" "$ND_PROBE" hold "$TB_ORIGIN_C4" 7 4
hold_pid=$TB_LAST_PID
tb_check "the new connections close after the TTL" \
    wait_fails tcp "$TB_ORIGIN_C4" 7 5
wait "$hold_pid"
tb_expect_match "the connection opened before kept working 4 s" \
    "^ok [0-9]+ round trips" "$(cat "$hold")"

# --- live connections renew their address (conntrack) -----------------------------
tb_check "learn c.test again (ttl 2)" nd_cmd learn "$TB_ORIGIN_C4" 2 c.test
tb_sandbox_bg "$hold" "$TB_PY" "$ND_PROBE" hold "$TB_ORIGIN_C4" 7 4
hold_pid=$TB_LAST_PID
sleep 0.5
tb_check "renew addresses expiring within 10 s that have live flows" \
    nd_cmd renew 10
tb_assert_log "$TB_EGRESSD_LOG" driver.renew renewed=1
sleep 2
nd_works "past its TTL, the renewed address still takes new connections" \
    tcp "$TB_ORIGIN_C4" 7
wait "$hold_pid"

# --- policy update: keep what is still allowed, drop what is not ------------------
tb_check "learn a.test (ttl 60)" nd_cmd learn "$TB_ORIGIN_A4" 60 a.test
tb_check "learn b.test (ttl 60)" nd_cmd learn "$TB_ORIGIN_B4" 60 b.test
tb_check "learn c.test (ttl 60)" nd_cmd learn "$TB_ORIGIN_C4" 60 c.test
pol2=$(tb_policy_file policy2.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
  - {action: deny, target: $TB_ORIGIN_C4}
dns: {ttlMin: 1, ttlMax: 60}
EOF2
)
tb_check "apply a policy without b.test and denying c.test's IP" \
    nd_cmd apply "$pol2"
nd_works "a.test's learned address survived the update" tcp "$TB_ORIGIN_A4" 80
nd_fails_fast "b.test's (name no longer allowed) is gone" tcp "$TB_ORIGIN_B4" 80
nd_fails_fast "c.test's (now a deny CIDR) is gone" tcp "$TB_ORIGIN_C4" 7
tb_check_fails "b.test's address is not in learned4" \
    bash -c "ip netns exec $TB_SBX nft list set inet egressd learned4 | grep -q '$TB_ORIGIN_B4'"
tb_check "a.test's address is" \
    bash -c "ip netns exec $TB_SBX nft list set inet egressd learned4 | grep -q '$TB_ORIGIN_A4'"
tb_finish
