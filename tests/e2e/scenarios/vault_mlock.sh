#!/bin/bash
# vault_mlock: the credential vault's memory, which egressd locks so its
# values are never swapped out. Where the kernel refuses (no CAP_IPC_LOCK,
# RLIMIT_MEMLOCK 0) egressd says so once at start (vault.mlock_failed,
# with the limit) and runs on; with --vault-require-mlock it does not
# start: exit 1, the reason on stderr. Where mlock works the flag changes
# nothing.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
# ASan intercepts mlock and returns 0 without locking anything, whatever
# the limit: the refusal cannot happen there (checked in the plain run).
# A here-string, not a pipe (pipefail and grep -q's early exit).
grep -q libasan <<<"$(ldd "$EGRESSD_BIN")" &&
    tb_skip "ASan build: its mlock never fails (checked in the plain run)"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: inline, value: mlock-secret-value-1}}
bindings:
  - name: a-api
    match: {hosts: [a.test]}
    auth: {type: bearer, credential: k}
EOF2
)
LOG=$TB_DIR/egressd/egressd.log
mkdir -p "$TB_DIR/egressd/rules"
touch "$LOG"
ARGS=(--log-file "$LOG" --dns-upstream "$TB_DNS1_IP4"
    --rules-dir "$TB_DIR/egressd/rules" --state-dir "$TB_DIR/egressd/state"
    --http-addr 127.0.0.1:18080 --policy "$pol" --proxy --teardown-on-exit)
# UNLOCKED CMD...: CMD in the sandbox's namespace as root, but without
# CAP_IPC_LOCK (dropped from the bounding set, so gone after exec) and
# with a memlock limit of 0: mlock fails as in a default Kubernetes pod.
# Every step execs the next, so $! of a background run is egressd's.
UNLOCKED=(ip netns exec "$TB_SBX" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
    "${TB_EGRESSD_ENV[@]}" prlimit --memlock=0:0
    setpriv --bounding-set -ipc_lock --)

# --- the flag: fatal at start ----------------------------------------------------------
m=$(tb_log_mark "$LOG")
"${UNLOCKED[@]}" timeout 20 "$EGRESSD_BIN" "${ARGS[@]}" --vault-require-mlock \
    >"$TB_DIR/fatal.out" 2>&1
tb_expect_eq "--vault-require-mlock without mlock: exit 1" 1 "$?"
tb_expect_match "the reason on stderr" \
    '^egressd: credential vault: mlock refused \(RLIMIT_MEMLOCK 0 bytes\) and --vault-require-mlock is set' \
    "$(cat "$TB_DIR/fatal.out")"
tb_assert_log --since "$m" "$LOG" vault.mlock_failed fatal=true \
    memlock_limit=0
tb_assert_no_log --since "$m" "$LOG" egressd.ready

# --- without it: said once, egressd runs -----------------------------------------------
m=$(tb_log_mark "$LOG")
"${UNLOCKED[@]}" "$EGRESSD_BIN" "${ARGS[@]}" >>"$TB_DIR/egressd/stdout" \
    2>>"$TB_DIR/egressd/stderr" &
pid=$!
TB_PIDS+=("$pid")
tb_check "egressd starts all the same" tb_wait_log_line --since "$m" \
    --timeout 20 --pid "$pid" "$LOG" egressd.ready
tb_assert_log --since "$m" --min 1 --max 1 "$LOG" vault.mlock_failed \
    fatal=false memlock_limit=0 'effect~swapped'
kill -TERM "$pid"
wait "$pid"
tb_expect_eq "and stops cleanly" 0 "$?"

# --- mlock allowed: the flag changes nothing -------------------------------------------
m=$(tb_log_mark "$LOG")
tb_start_egressd --policy "$pol" --proxy --vault-require-mlock
tb_assert_no_log --since "$m" "$LOG" vault.mlock_failed
tb_check_fails "the secret is not in the log" grep -qF mlock-secret-value-1 "$LOG"
tb_finish
