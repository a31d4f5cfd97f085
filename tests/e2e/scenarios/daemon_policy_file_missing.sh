#!/bin/bash
# daemon_policy_file_missing: --policy naming a file that does not exist keeps the
# reference's fallback (OPENSANDBOX_EGRESS_RULES, else deny-all), but says
# so: a warning naming the path at start, --check on stderr, and
# /v1/status until the file exists (the first API change writes it).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TOKEN="miss-$TB_ID-$RANDOM$RANDOM"
API_BODY="$TB_DIR/api.body"
TB_EGRESSD_HTTP=":18080"
URL="http://$TB_SBX_HOST_IP4:18080"
missing="$TB_DIR/egressd/polcy.yaml" # the typo
call()
{
	local m=$1 p=$2 args=(-H "OPENSANDBOX-EGRESS-AUTH: $TOKEN")
	[ $# -ge 3 ] && args+=(--data-binary "$3")
	tb_host curl -sS --max-time 5 -o "$API_BODY" -w '%{http_code}' \
	    -X "$m" "${args[@]}" "$URL$p" 2>/dev/null
}
resolves()
{
	[ -n "$(tb_sandbox dig +short +time=2 +tries=1 "$1" A)" ]
}
jget()
{
	$TB_PY -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v=v.get(k) if isinstance(v,dict) else None
print("" if v is None else json.dumps(v) if not isinstance(v,str) else v)' \
	    "$API_BODY" "$1"
}

# --- --check says it too ----------------------------------------------------
tb_check "--check still passes (the fallback is valid)" \
    "$EGRESSD_BIN" --check --policy "$missing"
tb_expect_match "and warns, naming the file" \
    "warning: policy file $missing does not exist.*deny-all" "$(cat "$TB_OUT")"

# --- no RULES: deny-all, with a warning that names the path -----------------
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TOKEN")
TB_CANARY=0 # no file, no RULES: nothing this egressd reads can hold a canary
tb_start_egressd --policy "$missing"
TB_CANARY=1
tb_assert_log "$TB_EGRESSD_LOG" policy.file_missing lvl=warn \
    path="$missing" trigger=start fallback=deny-all
tb_check_fails "deny-all is in force: a.test does not resolve" resolves a.test
tb_expect_eq "/v1/status" 200 "$(call GET /v1/status)"
tb_expect_eq "status: fileMissing" true "$(jget policy.fileMissing)"
tb_expect_eq "status: the file" "$missing" "$(jget policy.file)"
tb_expect_eq "status: the warning names it" \
    "policy file $missing does not exist; in force: deny-all" \
    "$(jget policy.warning)"

# --- the first change writes the file: the warning goes away ----------------
tb_expect_eq "PATCH allow a.test" 200 \
    "$(call PATCH /policy '[{"action":"allow","target":"a.test"}]')"
tb_check "a.test resolves" resolves a.test
tb_check "the file exists now" test -s "$missing"
tb_expect_eq "/v1/status again" 200 "$(call GET /v1/status)"
tb_expect_eq "no fileMissing" "" "$(jget policy.fileMissing)"
tb_expect_eq "no warning" "" "$(jget policy.warning)"
tb_stop_egressd
tb_expect_eq "egressd stopped cleanly" 0 "$TB_EGRESSD_STATUS"

# --- RULES is the fallback when set; the warning says so --------------------
rm -f "$missing"
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TOKEN"
    'OPENSANDBOX_EGRESS_RULES={"egress":[{"action":"allow","target":"b.test"}]}')
tb_start_egressd --policy "$missing"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" policy.file_missing \
    path="$missing" fallback=OPENSANDBOX_EGRESS_RULES
tb_check "RULES is in force: b.test resolves" resolves b.test
tb_expect_eq "/v1/status" 200 "$(call GET /v1/status)"
tb_expect_eq "status: the warning" \
    "policy file $missing does not exist; in force: OPENSANDBOX_EGRESS_RULES" \
    "$(jget policy.warning)"

# --- a file that exists gives no warning -----------------------------------
tb_stop_egressd
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
pol=$(tb_policy_file policy.yaml <<'EOF'
egress:
  - {action: allow, target: c.test}
EOF
)
tb_start_egressd --policy "$pol"
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" policy.file_missing
tb_expect_eq "/v1/status" 200 "$(call GET /v1/status)"
tb_expect_eq "no fileMissing" "" "$(jget policy.fileMissing)"
tb_finish
