#!/bin/bash
# threat_15_reconfig (THREATS §15): the workload tries to reconfigure
# egressd. It cannot touch the files egressd reads (policy file, rules
# directory, token file) even where it can reach their directory, and
# egressd's own rewrite of the policy file after an API change keeps it
# root-only; guessed tokens from the node are refused (then held back per
# peer), counted in the metrics and change nothing; concurrent PATCHes from the operator are
# serialized: none is lost. (The API port itself is closed to the sandbox
# on every address: api_unreachable.)
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN=tok-$TB_ID-$RANDOM$RANDOM$RANDOM
tokf=$TB_DIR/egressd/token
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$tokf"
chmod 600 "$tokf"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
rules=$TB_DIR/egressd/rules
tb_start_egressd --policy "$pol" --api-token-file "$tokf" --http-addr ":18080"
# Only the files' own modes keep the sandbox out from here on.
chmod 711 "$TB_DIR/egressd"
URL="http://$TB_SBX_HOST_IP4:18080"

# api TOKEN METHOD PATH [BODY]: from the node; prints the status. With
# FROM set, from that address of the node (another peer).
api() {
	tb_host curl -sS --max-time 5 -o "$TB_DIR/api.out" -w '%{http_code}' \
	    ${FROM:+--interface "$FROM"} \
	    -H "OPENSANDBOX-EGRESS-AUTH: $1" -X "$2" ${4:+--data-binary "$4"} \
	    "$URL$3" 2>/dev/null
}
metric() { # NAME-ERE -> value
	api "$TB_EGRESSD_TOKEN" GET /metrics >/dev/null
	sed -n "s/^$1 \([0-9]*\)$/\1/p" "$TB_DIR/api.out"
}
resolves() { [ -n "$(tb_sandbox dig +short +time=2 +tries=1 "$1" A)" ]; }

# --- files egressd reads ----------------------------------------------------------------
tb_check_fails "sandbox cannot write the policy file" \
    tb_sandbox sh -c "printf 'defaultAction: allow\n' >'$pol'"
tb_check_fails "nor replace it (directory not writable)" \
    tb_sandbox sh -c "printf 'defaultAction: allow\n' >'$pol.x' && mv '$pol.x' '$pol'"
tb_check_fails "nor add an always-rule" \
    tb_sandbox sh -c "echo 0.0.0.0/0 >'$rules/allow.always'"
tb_check_fails "nor read the token file" tb_sandbox cat "$tokf"
tb_check_fails "b.test is still denied" resolves b.test

# egressd's own rewrite after an API change keeps the file root-only.
tb_expect_eq "PATCH from the node" 200 \
    "$(api "$TB_EGRESSD_TOKEN" PATCH /policy '[{"action":"allow","target":"c.test"}]')"
tb_check "the policy file was rewritten" grep -q c.test "$pol"
tb_expect_match "rewritten file is root-owned, no access for others" \
    '^0:0 -rw-r-----$|^0:0 -rw-------$' "$(stat -c '%u:%g %A' "$pol")"
tb_check_fails "the sandbox cannot read the rewritten file" tb_sandbox cat "$pol"
# The bed creates the log file; the one egressd creates itself (after a
# rotation, on SIGUSR1) is not for others either.
mv "$TB_EGRESSD_LOG" "$TB_EGRESSD_LOG.1"
kill -USR1 "$TB_EGRESSD_PID"
tb_check "SIGUSR1: egressd creates a new log" tb_wait_file "$TB_EGRESSD_LOG" 2
tb_expect_match "egressd's new log file: no access for others" \
    '^0 -rw-r-----$|^0 -rw-------$' "$(stat -c '%u %A' "$TB_EGRESSD_LOG")"
tb_check_fails "the sandbox cannot read it" tb_sandbox cat "$TB_EGRESSD_LOG"

# --- guessing the token -----------------------------------------------------------------
unauth0=$(metric egressd_api_unauthorized_total)
rev0=$(metric egressd_policy_revision)
tok=$TB_EGRESSD_TOKEN
# (Spaces around the value are HTTP's optional whitespace, not part of
# the token, so they are no guesses.)
guesses=("" x "${tok:0:${#tok}-1}" "${tok}x" "${tok^^}" "Bearer $tok" \
    "${tok:1}" "$(printf '%s' "$tok" | rev)" "$tok$tok")
for i in $(seq 1 30); do guesses+=("tok-$TB_ID-$RANDOM$RANDOM$RANDOM"); done
# The guesser is another address of the node: wrong tokens back off per
# peer (401s; from the 4th failure on, 429 without the token even being
# compared), and
# the operator's own address below is not held back.
ip -n "$TB_HOST" addr add 192.0.2.3/24 dev vhost0
codes=""
for g in "${guesses[@]}"; do
	codes+="$(FROM=192.0.2.3 api "$g" POST /policy '{"defaultAction":"allow"}') "
done
tb_expect_eq "${#guesses[@]} guessed tokens (near misses included): 4 x 401, then 429" \
    "401 401 401 401 $(printf '429 %.0s' "${guesses[@]:4}")" "$codes"
tb_expect_eq "the right token from the guesser is held back too" 429 \
    "$(FROM=192.0.2.3 api "$tok" POST /policy '{"defaultAction":"allow"}')"
guesses+=("(the right one, held back)")
tb_expect_eq "each one counted in egressd_api_unauthorized_total" \
    $((unauth0 + ${#guesses[@]})) "$(metric egressd_api_unauthorized_total)"
tb_expect_eq "the policy revision did not move" "$rev0" \
    "$(metric egressd_policy_revision)"
tb_check_fails "b.test still denied after the guesses" resolves b.test
tb_assert_log "$TB_EGRESSD_LOG" api.request method=POST path=/policy status=401
tb_check_fails "the real token never appears in the logs" \
    grep -qF -- "$tok" "$TB_EGRESSD_LOG" "$TB_EGRESSD_LOG.1"

# --- racing updates -------------------------------------------------------------------------
N=16
rev0=$(metric egressd_policy_revision)
tb_host bash -c '
for i in $(seq 1 '"$N"'); do
	curl -sS --max-time 10 -o /dev/null -w "%{http_code}\n" -X PATCH \
	    -H "OPENSANDBOX-EGRESS-AUTH: '"$tok"'" \
	    --data-binary "[{\"action\":\"allow\",\"target\":\"race$i.a.test\"}]" \
	    "'"$URL"'/policy" &
done
wait' >"$TB_DIR/race.codes" 2>&1
tb_expect_eq "$N concurrent PATCHes: all 200" "$N" \
    "$(grep -c '^200$' "$TB_DIR/race.codes")"
api "$tok" GET /policy >/dev/null
tb_expect_eq "every one of them is in the policy" "$N" \
    "$(grep -o '"race[0-9]*\.a\.test"' "$TB_DIR/api.out" | sort -u | wc -l)"
tb_expect_eq "and the revision moved by exactly $N" $((rev0 + N)) \
    "$(metric egressd_policy_revision)"
tb_check "and the file holds them all" \
    test "$(grep -o 'race[0-9]*\.a\.test' "$pol" | sort -u | wc -l)" -eq "$N"
tb_check "c.test (an earlier PATCH) survived the race" resolves c.test
tb_finish
