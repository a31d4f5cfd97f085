#!/bin/bash
# threat_09_stale (THREATS §9): the sandbox keeps using addresses after
# they stopped being allowed. A learned address closes for new
# connections once its lease (short.test: TTL 2 s, dns.ttlMin 1) is over,
# and a fresh answer opens it again. An operator tightening through the
# always-rules directory (deny.always) or a policy file edit closes a
# learned address at once, without waiting for its lease, and the cached
# answer does not bring it back, and a connection already open to it is
# cut. A connection opened before a lease merely runs out lives on.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
  - {action: allow, target: short.test}
dns: {ttlMin: 1, ttlMax: 300}
EOF
)
rules=$TB_DIR/egressd/rules
tb_start_egressd --policy "$pol"
dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
in_set() { # ADDR SET: the address is an element of the learned set
	# not "| grep -q": an early exit would SIGPIPE nft (see tb_expect_match)
	grep -qF "$1" <<<"$(ip netns exec "$TB_SBX" nft list set inet egressd "$2")"
}
# wait_closed ADDR SECONDS: poll until a TCP connect to ADDR:80 fails.
wait_closed() {
	local end=$((SECONDS + $2))
	while nd_probe tcp "$1" 80 1 >/dev/null; do
		[ $SECONDS -lt "$end" ] || return 1
		sleep 0.2
	done
}

# --- a lease runs out ---------------------------------------------------------------
t0=$SECONDS
tb_expect_eq "short.test resolves (TTL 2 s)" "$TB_ORIGIN_B4" "$(dig_s short.test A)"
nd_works "its address is open" tcp "$TB_ORIGIN_B4" 80
tb_sandbox_bg "$TB_DIR/hold_b.out" "$TB_PY" "$ND_PROBE" hold "$TB_ORIGIN_B4" 7 7
hold_b=$TB_LAST_PID
tb_check "after the lease (<= 8 s) new connections fail" \
    wait_closed "$TB_ORIGIN_B4" 8
tb_check "not before the TTL ($((SECONDS - t0)) s)" test $((SECONDS - t0)) -ge 2
nd_fails_fast "the stale address is closed" tcp "$TB_ORIGIN_B4" 80
tb_check_fails "and gone from learned4" in_set "$TB_ORIGIN_B4" learned4
wait "$hold_b"
tb_expect_match "a connection opened before the expiry kept working" \
    '^ok [0-9]+ round trips' "$(cat "$TB_DIR/hold_b.out")"
tb_expect_eq "a fresh answer" "$TB_ORIGIN_B4" "$(dig_s short.test A)"
nd_works "opens it again" tcp "$TB_ORIGIN_B4" 80

# --- the operator tightens: deny.always ----------------------------------------------
tb_expect_eq "c.test resolves (lease 30 s)" "$TB_ORIGIN_C4" "$(dig_s c.test A)"
tb_expect_eq "and its IPv6 address" "$TB_ORIGIN_C6" "$(dig_s c.test AAAA)"
nd_works "c.test's address is open" tcp "$TB_ORIGIN_C4" 80
tb_sandbox_bg "$TB_DIR/hold_c.out" "$TB_PY" "$ND_PROBE" hold "$TB_ORIGIN_C4" 7 4
hold_c=$TB_LAST_PID
tb_wait_log_line --timeout 3 "$TB_ECHO_LOG" echo.tcp.accept \
    server.addr="$TB_ORIGIN_C4" server.port=7 >/dev/null
m=$(tb_log_mark "$TB_EGRESSD_LOG")
echo c.test >"$rules/deny.always"
tb_check "deny.always is loaded" tb_wait_log_line --since "$m" --timeout 2 \
    "$TB_EGRESSD_LOG" policy.loaded trigger=inotify
nd_fails_fast "c.test's learned address closes at once" tcp "$TB_ORIGIN_C4" 80
nd_fails_fast "so does its IPv6 address" tcp "$TB_ORIGIN_C6" 80
tb_check_fails "it left learned4" in_set "$TB_ORIGIN_C4" learned4
tb_check_fails "and learned6" in_set "$TB_ORIGIN_C6" learned6
wait "$hold_c"
tb_expect_match "the connection open to it was cut (reset)" \
    'ConnectionResetError|BrokenPipeError|^err ' "$(cat "$TB_DIR/hold_c.out")"
tb_expect_match "the cached answer does not come back" "status: NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 c.test A)"
nd_fails_fast "nor does the address" tcp "$TB_ORIGIN_C4" 80

# --- the operator tightens: the policy file ---------------------------------------------
tb_expect_eq "a.test resolves" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
nd_works "a.test's address is open" tcp "$TB_ORIGIN_A4" 80
m=$(tb_log_mark "$TB_EGRESSD_LOG")
cat >"$pol.new" <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: b.test}
  - {action: allow, target: short.test}
dns: {ttlMin: 1, ttlMax: 300}
EOF
mv -f "$pol.new" "$pol"
tb_check "the edit is loaded" tb_wait_log_line --since "$m" --timeout 2 \
    "$TB_EGRESSD_LOG" policy.loaded trigger=inotify
nd_fails_fast "a.test's learned address closes at once" tcp "$TB_ORIGIN_A4" 80
tb_check_fails "it left learned4" in_set "$TB_ORIGIN_A4" learned4
tb_expect_match "a.test is denied, cache or not" "status: NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 a.test A)"
tb_expect_eq "b.test (still allowed) resolves" "$TB_ORIGIN_B4" "$(dig_s b.test A)"
nd_works "and stays open" tcp "$TB_ORIGIN_B4" 80
tb_finish
