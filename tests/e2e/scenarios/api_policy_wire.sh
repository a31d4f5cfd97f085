#!/bin/bash
# api_policy_wire: every /policy mutation is visible on the wire at once,
# in both directions (a denied name resolves and connects after, an allowed
# one stops), with the exact answers of contract §3/§6, curl as the client.
# The operator calls from the node's namespace (host-<id>), as the
# lifecycle server does: inside the pod's namespace only egressd's own
# marked sockets reach the API port (api_unreachable proves that).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TOKEN="api-$TB_ID-$RANDOM$RANDOM"
API_TOKEN=$TOKEN
API_BODY="$TB_DIR/api.body"
TB_EGRESSD_HTTP=":18080"
# RULES, not a policy file: this story is about the API and the wire.
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TOKEN"
    'OPENSANDBOX_EGRESS_RULES={"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"}]}')
tb_start_egressd
URL="http://$TB_SBX_HOST_IP4:18080"

# call METHOD PATH [BODY] [CURL-ARGS...]: from host-<id>; prints the status,
# body in $API_BODY.
call()
{
	local m=$1 p=$2 args=()
	[ -n "$API_TOKEN" ] && args+=(-H "OPENSANDBOX-EGRESS-AUTH: $API_TOKEN")
	[ $# -ge 3 ] && args+=(--data-binary "$3")
	tb_host curl -sS --max-time 5 -o "$API_BODY" -w '%{http_code}' \
	    -X "$m" "${args[@]}" "${@:4}" "$URL$p" 2>/dev/null
}

ok='{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft"}'

resolves()
{
	[ -n "$(tb_sandbox dig +short +time=2 +tries=1 "$1" A)" ]
}
# Connects to NAME's origin address directly (no DNS): proves the nft side.
connects()
{
	tb_sandbox curl -sS --max-time 3 -o /dev/null \
	    --resolve "$1:443:$2" "https://$1/"
}
body()
{
	cat "$API_BODY"
}
# api METHOD PATH [BODY] WANT-STATUS WANT-BODY: exact status and body, and
# the body ends with a newline.
api()
{
	local want_status=${*: -2:1} want_body=${*: -1} st
	st=$(call "${@:1:$#-2}")
	tb_expect_eq "$1 $2 ${3:0:60}: status" "$want_status" "$st"
	tb_expect_eq "$1 $2 ${3:0:60}: body" "$want_body" "$(body)"
	tb_expect_eq "$1 $2: trailing newline" "0a" \
	    "$(tail -c1 "$API_BODY" | od -An -tx1 | tr -d ' ')"
}

# --- the start: a.test allowed, b.test and c.test denied -------------------
tb_check "a.test resolves" resolves a.test
tb_check "and connects" connects a.test "$TB_ORIGIN_A4"
tb_check_fails "b.test does not resolve" resolves b.test
tb_check_fails "nor connect by address" connects b.test "$TB_ORIGIN_B4"
api GET /policy 200 '{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft","policy":{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"}]}}'

# --- POST replaces: b.test opens, a.test closes ----------------------------
api POST /policy '{"defaultAction":"deny","egress":[{"action":"allow","target":"b.test"}]}' 200 "$ok"
tb_check "after POST b.test resolves" resolves b.test
tb_check "and connects" connects b.test "$TB_ORIGIN_B4"
tb_check_fails "a.test no longer resolves" resolves a.test
tb_check_fails "and its learned address is closed" \
    connects a.test "$TB_ORIGIN_A4"

# --- PATCH prepends, the first occurrence wins ------------------------------
api PATCH /policy '[{"action":"deny","target":"B.TEST"},{"action":"allow","target":"c.test"},{"action":"allow","target":"b.test"}]' 200 "$ok"
api GET /policy 200 '{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft","policy":{"defaultAction":"deny","egress":[{"action":"deny","target":"B.TEST"},{"action":"allow","target":"c.test"}]}}'
tb_check "after PATCH c.test resolves" resolves c.test
tb_check "and connects" connects c.test "$TB_ORIGIN_C4"
tb_check_fails "b.test is denied again" resolves b.test
tb_check_fails "and its address closed" connects b.test "$TB_ORIGIN_B4"

# --- DELETE removes by target, case-insensitively ----------------------------
api DELETE /policy '["nothing.test"]' 200 '{"status":"ok","mode":"enforcing","enforcementMode":"dns+nft","reason":"no matching targets found"}'
api DELETE /policy '["C.test"]' 200 "$ok"
tb_check_fails "after DELETE c.test is denied" resolves c.test
tb_check_fails "and its address closed" connects c.test "$TB_ORIGIN_C4"
# Removing the deny under a default allow opens b.test (the reverse way).
api POST /policy '{"defaultAction":"allow","egress":[{"action":"deny","target":"b.test"}]}' 200 "$ok"
tb_check_fails "deny rule under default allow holds" resolves b.test
api DELETE /policy '["b.test"]' 200 '{"status":"ok","mode":"allow_all","enforcementMode":"dns+nft"}'
tb_check "with the deny deleted b.test resolves" resolves b.test
tb_check "and connects" connects b.test "$TB_ORIGIN_B4"

# --- errors change nothing ---------------------------------------------------
tb_expect_eq "bad defaultAction is 400" 400 \
    "$(call POST /policy '{"defaultAction":"maybe"}')"
tb_expect_match "with the invalid policy prefix" '^invalid policy: .+' "$(body)"
api PATCH /policy '[]' 400 'invalid patch rules: empty array'
api PATCH /policy ' ' 400 'empty body'
api DELETE /policy '[]' 400 'invalid delete targets: empty array'
tb_expect_eq "a bad target in PATCH is 400" 400 \
    "$(call PATCH /policy '[{"action":"allow","target":"bad..name"}]')"
tb_expect_match "bad merged policy message" '^invalid merged policy: ' "$(body)"
tb_check "errors left b.test open" resolves b.test
api OPTIONS /policy 405 'method not allowed'
tb_expect_match "405 names the methods" \
    'Allow: GET, POST, PUT, PATCH, DELETE' \
    "$(call OPTIONS /policy '' -D - | tr -d '\r')"

# --- auth ---------------------------------------------------------------------
API_TOKEN=wrong
api POST /policy '' 401 unauthorized
API_TOKEN=
api GET /policy 401 unauthorized
tb_expect_eq "Authorization: Bearer is accepted" 200 \
    "$(call GET /policy '' -H "Authorization: Bearer $TOKEN")"
API_TOKEN=$TOKEN
tb_check "still open after refused calls" resolves b.test

# --- empty POST resets to deny-all --------------------------------------------
api POST /policy '' 200 '{"status":"ok","mode":"deny_all","reason":"policy reset to default deny-all"}'
tb_check_fails "after the reset b.test is denied" resolves b.test
tb_check_fails "and its address closed" connects b.test "$TB_ORIGIN_B4"
api GET /policy 200 '{"status":"ok","mode":"deny_all","enforcementMode":"dns+nft","policy":{"defaultAction":"deny","egress":[]}}'

# --- probes, metrics, status ----------------------------------------------------
API_TOKEN=
tb_expect_eq "/healthz needs no token" 200 "$(call GET /healthz)"
tb_expect_eq "and answers ok" ok "$(body)"
tb_expect_eq "/readyz needs no token" 200 "$(call GET /readyz)"
tb_expect_eq "and is ready" ok "$(body)"
tb_expect_eq "/metrics needs the token" 401 "$(call GET /metrics)"
API_TOKEN=$TOKEN
tb_expect_eq "/metrics with it" 200 "$(call GET /metrics)"
tb_expect_match "metrics count the updates" \
    'egressd_policy_updates_total\{result="ok"\} [1-9]' "$(body)"
tb_check "metrics pass promtool" sh -c "promtool check metrics < '$API_BODY'"
tb_expect_eq "/v1/status" 200 "$(call GET /v1/status)"
tb_expect_match "status says dns+nft" '"enforcementMode":"dns\+nft"' "$(body)"

# --- logs -------------------------------------------------------------------------
tb_assert_log "$TB_EGRESSD_LOG" policy.updated op=patch
tb_assert_log "$TB_EGRESSD_LOG" policy.updated op=delete
tb_assert_log "$TB_EGRESSD_LOG" policy.update_failed reason="invalid policy"
tb_assert_log "$TB_EGRESSD_LOG" api.request method=POST path=/policy status=401
tb_check_fails "the token is never logged" grep -q -- "$TOKEN" "$TB_EGRESSD_LOG"
tb_finish
