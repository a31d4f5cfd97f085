#!/bin/bash
# threat_11_secrets (THREATS §11, the parts without the credential proxy):
# the workload goes looking for egressd's secrets, the API token (given on
# the command line and in the environment) and a credential (a file source
# in the policy). /proc of egressd shows it no environment, memory, fds or
# maps, and neither the command line nor the environment still holds the
# token (root's view included); the credential and token files are
# root-only. From the node, with the token, neither secret appears in GET
# /policy, /v1/status, /metrics, error answers or egressd's log.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

tok=tok-$TB_ID-$RANDOM$RANDOM$RANDOM
secret=ghp_SeCrEt$RANDOM$RANDOM$RANDOM$RANDOM
credf=$TB_DIR/egressd/gh.cred
printf '%s' "$secret" >"$credf"
chmod 600 "$credf"
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: www.a.test}
credentials:
  - name: gh
    source: {type: file, path: $credf}
bindings:
  - name: gh-api
    match: {hosts: [www.a.test]}
    auth: {type: bearer, credential: gh}
EOF
)
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$tok")
# egressd inherits a core limit it must lower itself (F7 below)
ulimit -c unlimited || tb_die "cannot raise the core size limit"
tb_start_egressd --policy "$pol" --api-token "$tok" --http-addr ":18080"
pid=$TB_EGRESSD_PID
# Only the files' own modes keep the sandbox out from here on.
chmod 711 "$TB_DIR/egressd"
URL="http://$TB_SBX_HOST_IP4:18080"
out=$TB_DIR/api.out
api() { # [TOKEN] METHOD PATH [BODY] -> status; body in $out
	local t=$1
	shift
	tb_host curl -sS --max-time 5 -o "$out" -w '%{http_code}' \
	    ${t:+-H "OPENSANDBOX-EGRESS-AUTH: $t"} -X "$1" \
	    ${3:+--data-binary "$3"} "$URL$2" 2>/dev/null
}
# leaks FILE...: the token or the credential appears in one of them.
leaks() { grep -qF -e "$tok" -e "$secret" "$@"; }

# --- /proc of egressd, as the sandbox uid ---------------------------------------------
tb_check "the sandbox sees egressd's process" tb_sandbox test -d "/proc/$pid"
tb_check "and may read its command line" \
    tb_sandbox sh -c "tr '\\0' ' ' </proc/$pid/cmdline >'$TB_SBX_HOME/cmdline'"
tb_check "which shows the --api-token flag" grep -q -- --api-token \
    "$TB_SBX_HOME/cmdline"
tb_check_fails "but not the token (wiped)" leaks "$TB_SBX_HOME/cmdline"
# the variable is in egressd's environment (so the checks below are of
# a file that named the token once), its value wiped when egressd read
# it: not even root finds the token there
tb_check "root sees OPENSANDBOX_EGRESS_TOKEN in egressd's environment" \
    grep -qaF -- OPENSANDBOX_EGRESS_TOKEN= "/proc/$pid/environ"
tb_check_fails "but not the token (wiped once copied)" \
    grep -qaF -- "$tok" "/proc/$pid/environ"
for f in environ mem maps auxv; do
	tb_check_fails "sandbox cannot read /proc/<egressd>/$f" \
	    tb_sandbox sh -c "head -c 4096 /proc/$pid/$f >/dev/null"
done
tb_check_fails "nor list its open files" tb_sandbox ls "/proc/$pid/fd"
# F7: no core dump can carry a secret (PR_SET_DUMPABLE 0 beside it is
# not observable from a root shell; this limit is)
tb_check "egressd's core size limit is 0, soft and hard" \
    grep -qE '^Max core file size +0 +0 ' "/proc/$pid/limits"
tb_check_fails "nor read the credential file" tb_sandbox cat "$credf"

# --- the control API and the log ---------------------------------------------------------
tb_expect_eq "GET /policy" 200 "$(api "$tok" GET /policy)"
tb_check_fails "no secret in the policy answer" leaks "$out"
tb_expect_eq "GET /v1/status" 200 "$(api "$tok" GET /v1/status)"
tb_check_fails "no secret in the status" leaks "$out"
tb_expect_eq "GET /metrics" 200 "$(api "$tok" GET /metrics)"
tb_check_fails "no secret in the metrics" leaks "$out"
tb_expect_eq "a bad PATCH is 400" 400 \
    "$(api "$tok" PATCH /policy '[{"action":"allow","target":"bad..name"}]')"
tb_check_fails "its message holds no secret" leaks "$out"
tb_expect_eq "a bad POST is 400" 400 \
    "$(api "$tok" POST /policy '{"defaultAction":"allow","credentials":[{"name":"gh"}]}')"
tb_check_fails "its message holds no secret" leaks "$out"
tb_expect_eq "a wrong token is 401" 401 "$(api "${tok}x" GET /policy)"
tb_check_fails "its answer does not echo the token" leaks "$out"
tb_expect_eq "an accepted PATCH" 200 \
    "$(api "$tok" PATCH /policy '[{"action":"allow","target":"c.test"}]')"
tb_check_fails "the rewritten policy file names the credential file, not the secret" \
    grep -qF -- "$secret" "$pol"
tb_check "(and still references it)" grep -qF -- "$credf" "$pol"
tb_stop_egressd
tb_check_fails "after all that, no secret in egressd's log" \
    leaks "$TB_EGRESSD_LOG"
tb_check_fails "nor on its stdout/stderr" \
    leaks "$TB_DIR/egressd/stdout" "$TB_DIR/egressd/stderr"
tb_assert_log "$TB_EGRESSD_LOG" api.request method=GET path=/policy status=200
tb_finish
