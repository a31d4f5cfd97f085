#!/bin/bash
# daemon_k8s_volume_files (issue 19 item 1, first part): the API token and the
# policy from a Kubernetes Secret/ConfigMap volume, built exactly as the
# kubelet's atomic writer lays it out: a 1777 volume root, a timestamped
# data directory, "..data" linking to it, and every file a link through
# "..data". egressd starts (it used to exit 2: "Too many levels of symbolic
# links"), and an update (a new data directory, "..data" swapped by
# rename) reloads the policy and rotates the token without a signal (an
# unreadable token keeps the one in force). Links into a directory
# others may rewrite, or dangling ones, are refused with a clear error.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TOKEN="k8s-$TB_ID-$RANDOM$RANDOM"
VOL=$TB_DIR/vol
API_BODY=$TB_DIR/api.body
mkdir -p "$VOL" && chmod 1777 "$VOL"
# PUBLISH NAME POLICY-TARGET [TOKEN]: a new data directory, "..data"
# swapped to it
publish() {
	local d="..2026_12_03_$1"
	mkdir "$VOL/$d" && chmod 0755 "$VOL/$d"
	printf '%s\n' "${3:-$TOKEN}" >"$VOL/$d/token"
	printf 'defaultAction: deny\negress:\n  - {action: allow, target: %s}\n' \
	    "$2" >"$VOL/$d/policy.yaml"
	chmod 0644 "$VOL/$d/token" "$VOL/$d/policy.yaml"
	ln -s "$d" "$VOL/..data_tmp"
	mv -T "$VOL/..data_tmp" "$VOL/..data"
}
publish v1 a.test
ln -s ..data/token "$VOL/token"
ln -s ..data/policy.yaml "$VOL/policy.yaml"

TB_EGRESSD_HTTP=":18080"
tb_start_egressd --api-token-file "$VOL/token" --policy "$VOL/policy.yaml"
api_get() {
	tb_host curl -sS --max-time 5 -o "$API_BODY" -w '%{http_code}' \
	    -H "OPENSANDBOX-EGRESS-AUTH: $1" \
	    "http://$TB_SBX_HOST_IP4:18080/policy" 2>/dev/null
	return 0
}
tb_expect_eq "started through the links: the Secret's token works" 200 \
    "$(api_get "$TOKEN")"
tb_expect_eq "and another token does not" 401 "$(api_get "x$TOKEN")"
tb_expect_eq "the ConfigMap's policy is in force: a.test resolves" \
    "$TB_ORIGIN_A4" "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"

# --- an update: ..data swapped by rename, as the kubelet does ------------
m=$(tb_log_mark "$TB_EGRESSD_LOG")
publish v2 b.test
tb_check "the swap reloads the policy within 2 s (no signal, no write to the link)" \
    tb_wait_log_line --since "$m" --timeout 2 "$TB_EGRESSD_LOG" \
    policy.loaded
tb_expect_eq "b.test resolves now" "$TB_ORIGIN_B4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 b.test A)"
tb_expect_match "a.test is denied now" 'status: NXDOMAIN' \
    "$(tb_sandbox dig +time=2 +tries=1 a.test A)"
api_get "$TOKEN" >/dev/null
tb_check "GET /policy shows the new rule" grep -q '"target":"b.test"' \
    "$API_BODY"

# --- a Secret update rotates the token -----------------------------------
NEW="k8s2-$TB_ID-$RANDOM$RANDOM"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
publish v3 b.test "$NEW"
tb_check "the swap rotates the token within 2 s" tb_wait_log_line --since "$m" \
    --timeout 2 "$TB_EGRESSD_LOG" api.token_rotated
tb_expect_eq "the new token works" 200 "$(api_get "$NEW")"
tb_expect_eq "the old one no longer does" 401 "$(api_get "$TOKEN")"
tb_check_fails "neither token is in the log" grep -qF -e "$NEW" -e "$TOKEN" \
    "$TB_EGRESSD_LOG"

# --- API changes over a ConfigMap policy: in force, kept in memory -------
tb_assert_log "$TB_EGRESSD_LOG" policy.persist_off path="$VOL/policy.yaml" \
    'reason=a Kubernetes ConfigMap or Secret volume'
code=$(tb_host curl -sS --max-time 5 -o "$API_BODY" -w '%{http_code}' \
    -X PATCH -H "OPENSANDBOX-EGRESS-AUTH: $NEW" \
    --data-binary '[{"action":"allow","target":"a.test"}]' \
    "http://$TB_SBX_HOST_IP4:18080/policy" 2>/dev/null)
tb_expect_eq "a /policy PATCH over the ConfigMap's file: 200 (it was 500)" \
    200 "$code"
tb_expect_eq "... in force: a.test resolves again" "$TB_ORIGIN_A4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
tb_check_fails "... the kubelet's file is not rewritten" \
    grep -q a.test "$VOL/..2026_12_03_v3/policy.yaml"
tb_check "... the link is still the kubelet's" test -L "$VOL/policy.yaml"
code=$(tb_host curl -sS --max-time 5 -o "$API_BODY" -w '%{http_code}' \
    -H "OPENSANDBOX-EGRESS-AUTH: $NEW" \
    "http://$TB_SBX_HOST_IP4:18080/v1/status" 2>/dev/null)
tb_expect_match "/v1/status says changes are not written back" \
    '"persist":\{"enabled":false,"reason":"a Kubernetes ConfigMap' \
    "$(cat "$API_BODY")"
# a broken update (an empty token file) keeps the token in force
m=$(tb_log_mark "$TB_EGRESSD_LOG")
publish v4 b.test " "
sed -i 's/.*//' "$VOL/..2026_12_03_v4/token"
touch "$VOL/..2026_12_03_v4/token"
kill -HUP "$TB_EGRESSD_PID"
tb_check "an empty token file is refused on reload" tb_wait_log_line \
    --since "$m" --timeout 10 "$TB_EGRESSD_LOG" api.token_reload_failed
tb_expect_eq "and the token in force still works (auth never turns off)" \
    200 "$(api_get "$NEW")"
tb_expect_eq "while no token is let through" 401 "$(api_get "")"

# --- refused: links that another user could redirect ---------------------
bad=$TB_DIR/bad
mkdir -p "$bad/data" && chmod 0777 "$bad" && chmod 0755 "$bad/data"
printf '%s\n' "$TOKEN" >"$bad/data/token" && chmod 0644 "$bad/data/token"
ln -s data/token "$bad/token"
out=$("$EGRESSD_BIN" --check --policy "$VOL/policy.yaml" \
    --api-token-file "$bad/token" 2>&1)
tb_expect_eq "a link in a world-writable, non-sticky directory: exit 2" 2 \
    "$(
	"$EGRESSD_BIN" --check --policy "$VOL/policy.yaml" \
	    --api-token-file "$bad/token" >/dev/null 2>&1
	echo $?
    )"
tb_expect_match "saying why" 'writable by group or others .* not sticky' \
    "$out"
chmod 0755 "$bad" && chmod 0777 "$bad/data"
tb_expect_match "a link into such a directory: refused too" \
    "$bad/data: directory writable by group or others" \
    "$("$EGRESSD_BIN" --check --policy "$VOL/policy.yaml" \
        --api-token-file "$bad/token" 2>&1)"
ln -s data/missing "$bad/dangling"
tb_expect_match "a dangling link: refused, naming it" \
    "$bad/dangling: token file: No such file or directory" \
    "$("$EGRESSD_BIN" --check --policy "$VOL/policy.yaml" \
        --api-token-file "$bad/dangling" 2>&1)"
tb_finish
