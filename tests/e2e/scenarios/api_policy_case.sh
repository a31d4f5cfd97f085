#!/bin/bash
# api_policy_case: actions in any case, with blanks around them, as the
# reference reads them (trimmed, lowercased), in the policy file (YAML) and
# in API bodies (POST and PATCH); GET /policy and the rewritten file show
# the normal form, and the wire does what the words say.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TOKEN="case-$TB_ID-$RANDOM$RANDOM"
API_BODY="$TB_DIR/api.body"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TOKEN")
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: DENY
egress:
  - {action: ALLOW, target: a.test}
  - {action: Deny, target: b.test}
  - {action: " allow ", target: www.b.test}
EOF
)
tb_start_egressd --policy "$pol"
URL="http://$TB_SBX_HOST_IP4:18080"

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
connects()
{
	tb_sandbox curl -sS --max-time 3 -o /dev/null \
	    --resolve "$1:443:$2" "https://$1/"
}

# --- the file: upper case and blanks load, and mean what they say ----------
tb_assert_log "$TB_EGRESSD_LOG" policy.loaded trigger=start rules=3
tb_check "ALLOW a.test: resolves" resolves a.test
tb_check "and connects" connects a.test "$TB_ORIGIN_A4"
tb_check_fails "Deny b.test: does not resolve" resolves b.test
tb_check "' allow ' www.b.test: resolves" resolves www.b.test
tb_check_fails "DENY default: c.test does not resolve" resolves c.test
tb_expect_eq "GET /policy" 200 "$(call GET /policy)"
tb_expect_eq "shows the normal form" \
    '{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft","policy":{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"},{"action":"deny","target":"b.test"},{"action":"allow","target":"www.b.test"}]}}' \
    "$(cat "$API_BODY")"

# --- PATCH with the reference's users' JSON --------------------------------
tb_expect_eq "PATCH ALLOW c.test" 200 \
    "$(call PATCH /policy '[{"action":"ALLOW","target":"c.test"}]')"
tb_check "c.test resolves now" resolves c.test
tb_check "and connects" connects c.test "$TB_ORIGIN_C4"
tb_expect_eq "GET after PATCH" 200 "$(call GET /policy)"
tb_expect_match "c.test is an allow rule, lower case" \
    '"egress":\[\{"action":"allow","target":"c.test"\},' "$(cat "$API_BODY")"

# --- POST: defaultAction and actions in any case ---------------------------
tb_expect_eq "POST DENY / Allow" 200 "$(call POST /policy \
    '{"defaultAction":"DENY","egress":[{"action":" Allow\t","target":"b.test"},{"action":"DENY","target":"a.test"}]}')"
tb_check "b.test resolves now" resolves b.test
tb_check "and connects" connects b.test "$TB_ORIGIN_B4"
tb_check_fails "a.test does not resolve" resolves a.test
tb_check_fails "nor connect" connects a.test "$TB_ORIGIN_A4"
tb_expect_eq "GET after POST" 200 "$(call GET /policy)"
tb_expect_eq "normal form again" \
    '{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft","policy":{"defaultAction":"deny","egress":[{"action":"allow","target":"b.test"},{"action":"deny","target":"a.test"}]}}' \
    "$(cat "$API_BODY")"
tb_expect_eq "POST defaultAction Allow" 200 \
    "$(call POST /policy '{"defaultAction":"Allow"}')"
tb_expect_match "is allow_all" '"mode":"allow_all"' "$(cat "$API_BODY")"

# --- still an error: a word that is not an action --------------------------
tb_expect_eq "POST action ALLOWED" 400 "$(call POST /policy \
    '{"egress":[{"action":"ALLOWED","target":"b.test"}]}')"
tb_expect_match "names it" '^invalid policy: .*unknown action "ALLOWED"' \
    "$(cat "$API_BODY")"

# --- the rewritten file is in the normal form and loads back ---------------
tb_check "file says defaultAction allow" \
    grep -qx 'defaultAction: "allow"' "$pol"
tb_check_fails "no upper-case action left in it" \
    grep -Eq 'ALLOW|DENY|Allow|Deny' "$pol"
tb_finish
