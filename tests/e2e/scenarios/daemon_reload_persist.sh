#!/bin/bash
# daemon_reload_persist: the operator edits the policy file and the
# always-rules directory while egressd runs; API changes are written back
# and survive a restart; a crash at any step of an update leaves the old or
# the new policy in force after restart, never a mix, and no temp file
# of the rewrite (which may hold inline credential values) behind.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
tok=$TB_DIR/token
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$tok"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
rules=$TB_DIR/egressd/rules
args=(--policy "$pol" --api-token-file "$tok" --http-addr ":18080")
api="http://$TB_SBX_HOST_IP4:18080/policy"

resolves() { tb_resolve_a "$1"; }
host_api() { tb_host_api "$1" "$api" "${2-}"; } # METHOD [BODY]
# Atomic replace, as editors and config management do.
write_policy() {
	cat >"$pol.new" && mv -f "$pol.new" "$pol"
}

tb_start_egressd "${args[@]}"
tb_expect_eq "b.test is denied at start" "NXDOMAIN" "$(resolves b.test)"

# --- a file edit takes effect within 1 s, without restart
m=$(tb_log_mark "$TB_EGRESSD_LOG")
write_policy <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
EOF
tb_check "the edit is loaded within 1 s" tb_wait_log_line --since "$m" \
    --timeout 1 "$TB_EGRESSD_LOG" policy.loaded trigger=inotify
tb_expect_eq "b.test resolves after the edit" "203.0.113.11" "$(resolves b.test)"
tb_check "and connects" tb_sandbox curl -sS --max-time 5 -o /dev/null https://b.test/

# --- a broken edit keeps the old policy and names every error
m=$(tb_log_mark "$TB_EGRESSD_LOG")
write_policy <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: c.test, color: blue}
  - {action: perhaps, target: a.test}
EOF
tb_check "the broken edit is refused" tb_wait_log_line --since "$m" \
    --timeout 2 "$TB_EGRESSD_LOG" policy.reload_failed 'error~policy.yaml:3:'
tb_assert_log --since "$m" "$TB_EGRESSD_LOG" policy.reload_failed \
    'error~policy.yaml:4:[0-9]+:'
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" policy.loaded
tb_expect_eq "b.test still resolves (old policy kept)" "203.0.113.11" \
    "$(resolves b.test)"
tb_expect_eq "c.test still denied" "NXDOMAIN" "$(resolves c.test)"

# --- the always-rules directory wins over the policy
m=$(tb_log_mark "$TB_EGRESSD_LOG")
printf 'defaultAction: deny\negress:\n  - {action: allow, target: a.test}\n  - {action: allow, target: b.test}\n' | write_policy
tb_wait_log_line --since "$m" --timeout 2 "$TB_EGRESSD_LOG" policy.loaded \
    trigger=inotify >/dev/null
m=$(tb_log_mark "$TB_EGRESSD_LOG")
printf '# operator override\nb.test\n' >"$rules/deny.always"
tb_check "deny.always is loaded" tb_wait_log_line --since "$m" --timeout 1 \
    "$TB_EGRESSD_LOG" policy.loaded trigger=inotify
tb_expect_eq "b.test denied by deny.always" "NXDOMAIN" "$(resolves b.test)"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
rm -f "$rules/deny.always"
tb_wait_log_line --since "$m" --timeout 1 "$TB_EGRESSD_LOG" policy.loaded \
    trigger=inotify >/dev/null
tb_expect_eq "b.test allowed again once removed" "203.0.113.11" \
    "$(resolves b.test)"

# --- SIGHUP reloads too
write_policy <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
m=$(tb_log_mark "$TB_EGRESSD_LOG")
kill -HUP "$TB_EGRESSD_PID"
tb_check "SIGHUP reloads" tb_wait_log_line --since "$m" --timeout 2 \
    "$TB_EGRESSD_LOG" policy.loaded trigger=sighup
tb_expect_eq "b.test denied again" "NXDOMAIN" "$(resolves b.test)"

# --- API changes are persisted and survive a restart
m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "PATCH from the host" "200" \
    "$(host_api PATCH '[{"action":"allow","target":"c.test"}]')"
tb_expect_eq "c.test resolves after PATCH" "203.0.113.12" "$(resolves c.test)"
tb_check "the file was rewritten with c.test" grep -q 'c.test' "$pol"
tb_check "and it passes --check" "$EGRESSD_BIN" --check --policy "$pol" \
    --rules-dir "$rules"
tb_check_fails "egressd does not reload its own rewrite" \
    tb_wait_log_line --since "$m" --timeout 0.5 "$TB_EGRESSD_LOG" \
    policy.loaded trigger=inotify
m=$(tb_log_mark "$TB_EGRESSD_LOG")
touch "$pol"
tb_check_fails "a touch with unchanged bytes is no new policy" \
    tb_wait_log_line --since "$m" --timeout 0.5 "$TB_EGRESSD_LOG" policy.loaded
tb_stop_egressd
tb_start_egressd "${args[@]}"
tb_expect_eq "c.test still resolves after restart" "203.0.113.12" \
    "$(resolves c.test)"
tb_expect_eq "GET /policy after restart" "200" "$(host_api GET)"
tb_check "and shows c.test" grep -q '"c.test"' "$TB_DIR/api.out"
tb_stop_egressd

# --- kill -9 at every step of an update: old or new, never a mix
for fp in commit.before_nft commit.after_nft commit.after_swap \
    persist.before_rename commit.after_persist; do
	write_policy <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
	TB_EGRESSD_ENV=(EGRESSD_TEST_FAILPOINT=$fp)
	tb_start_egressd "${args[@]}"
	pid=$TB_EGRESSD_PID
	host_api PATCH '[{"action":"allow","target":"c.test"}]' >/dev/null
	end=$((SECONDS + 5))
	while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do
		sleep 0.05
	done
	wait "$pid" 2>/dev/null
	st=$?
	TB_EGRESSD_PID=
	tb_expect_eq "$fp: egressd was killed there" "137" "$st"
	tb_expect_eq "$fp: no DNS answer at all while egressd is down" \
	    "no answer" "$(tb_sandbox dig +time=1 +tries=1 +short c.test A \
		>/dev/null 2>&1 && echo answered || echo 'no answer')"
	TB_EGRESSD_ENV=()
	left=$(ls "$pol".tmp.* 2>/dev/null)
	m=$(tb_log_mark "$TB_EGRESSD_LOG")
	tb_start_egressd "${args[@]}"
	if [ "$fp" = persist.before_rename ]; then
		# the killed rewrite's temp file, inline values and all
		tb_expect_eq "$fp: it left its temp file" "$pol.tmp.$pid" "$left"
		tb_assert_log --since "$m" "$TB_EGRESSD_LOG" \
		    policy.stale_tmp_removed path="$pol.tmp.$pid"
	fi
	tb_expect_eq "$fp: no temp file beside the policy after the restart" \
	    "" "$(ls "$pol".tmp.* 2>/dev/null)"
	got=$(resolves c.test)
	host_api GET >/dev/null
	if grep -q '"c.test"' "$TB_DIR/api.out"; then
		tb_expect_eq "$fp: new policy, and c.test resolves" \
		    "203.0.113.12" "$got"
	else
		tb_expect_eq "$fp: old policy, and c.test is denied" \
		    "NXDOMAIN" "$got"
	fi
	tb_expect_eq "$fp: a.test unaffected" "203.0.113.10" "$(resolves a.test)"
	tb_stop_egressd
done
tb_finish
