#!/bin/bash
# threat_17_policy_input (THREATS §17, §16 "many policy rules"): hostile
# policy input through both doors. From the node: JSON nested 100000
# deep, a body over 1 MiB, NUL and invalid UTF-8 in a target, 4097 rules
# (over the cap); from the operator's file: a YAML alias bomb and binary
# garbage. Each is refused with the documented answer and one log line,
# nothing changes (revision, DNS answers, the file), egressd stays up and
# its memory bounded. A big valid policy (4000 CIDR rules) is applied in
# one go and enforced.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup
tb_host_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
TB_EGRESSD_TOKEN=tok-$TB_ID-$RANDOM$RANDOM
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
tb_start_egressd --policy "$pol" --http-addr ":18080"
pid=$TB_EGRESSD_PID
URL="http://$TB_SBX_HOST_IP4:18080"
body=$TB_DIR/body
# api METHOD PATH [BODY-FILE] -> status; answer in $TB_DIR/api.out
api() {
	tb_host curl -sS --max-time 10 -o "$TB_DIR/api.out" -w '%{http_code}' \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" -X "$1" \
	    ${3:+--data-binary "@$3"} "$URL$2" 2>/dev/null
}
answer() { cat "$TB_DIR/api.out"; }
revision() {
	api GET /metrics >/dev/null
	sed -n 's/^egressd_policy_revision \([0-9]*\)$/\1/p' "$TB_DIR/api.out"
}
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status"; }
st() { tb_sandbox dig +time=2 +tries=1 "$1" A | sed -n 's/.*status: \([A-Z]*\).*/\1/p'; }

tb_expect_eq "a.test allowed at start" NOERROR "$(st a.test)"
rev0=$(revision)
rss0=$(rss)
file0=$(md5sum <"$pol")

# --- the API ----------------------------------------------------------------------
python3 -c 'import sys; sys.stdout.write("[" * 100000 + "]" * 100000)' >"$body"
tb_expect_eq "JSON nested 100000 deep: 400" 400 "$(api POST /policy "$body")"
tb_expect_match "an 'invalid policy' answer" '^invalid policy: ' "$(answer)"
python3 -c 'import sys; sys.stdout.write("{\"defaultAction\":\"allow\",\"x\":\"" + "a" * (1100 << 10) + "\"}")' >"$body"
tb_expect_eq "a body over 1 MiB: 413" 413 "$(api POST /policy "$body")"
printf '{"defaultAction":"deny","egress":[{"action":"allow","target":"a\\u0000.b.test"}]}' >"$body"
tb_expect_eq "NUL in a target: 400" 400 "$(api POST /policy "$body")"
printf '{"defaultAction":"deny","egress":[{"action":"allow","target":"\xff\xfe.b.test"}]}' >"$body"
tb_expect_eq "invalid UTF-8 in a target: 400" 400 "$(api POST /policy "$body")"
printf '[{"action":"allow","target":"b.test"},' >"$body"
tb_expect_eq "a truncated PATCH: 400" 400 "$(api PATCH /policy "$body")"
python3 - "$body" 4097 <<'EOF'
import json, sys
n = int(sys.argv[2])
rules = [{"action": "allow", "target": "198.51.%d.%d" % (i // 250, i % 250 + 1)} for i in range(n)]
open(sys.argv[1], "w").write(json.dumps({"defaultAction": "deny", "egress": rules}))
EOF
tb_expect_eq "4097 rules (cap 4096): 413" 413 "$(api POST /policy "$body")"
tb_expect_eq "the revision did not move" "$rev0" "$(revision)"
tb_expect_eq "b.test still denied" NXDOMAIN "$(st b.test)"
tb_expect_eq "a.test still allowed" NOERROR "$(st a.test)"
tb_expect_eq "the policy file untouched" "$file0" "$(md5sum <"$pol")"
tb_assert_log "$TB_EGRESSD_LOG" policy.update_failed reason="invalid policy"

# --- the file ----------------------------------------------------------------------
m=$(tb_log_mark "$TB_EGRESSD_LOG")
{
	echo 'a: &a ["x","x","x","x","x","x","x","x","x","x"]'
	prev=a
	for l in b c d e f g h i j k l m n o p q r s t u; do
		printf '%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n' \
		    "$l" "$l" $prev $prev $prev $prev $prev $prev $prev $prev $prev $prev
		prev=$l
	done
	echo 'defaultAction: allow'
	echo 'egress: *u'
} >"$pol.new"
mv -f "$pol.new" "$pol"
tb_check "a YAML alias bomb is refused" tb_wait_log_line --since "$m" \
    --timeout 3 "$TB_EGRESSD_LOG" policy.reload_failed \
    'error~policy.yaml:1:[0-9]+: anchors and aliases are not allowed' 
tb_check "egressd is alive" kill -0 "$pid"
tb_expect_eq "b.test still denied (old policy)" NXDOMAIN "$(st b.test)"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
head -c 65536 /dev/urandom >"$pol.new"
mv -f "$pol.new" "$pol"
tb_check "binary garbage is refused" tb_wait_log_line --since "$m" \
    --timeout 3 "$TB_EGRESSD_LOG" policy.reload_failed
tb_expect_eq "a.test still allowed (old policy)" NOERROR "$(st a.test)"
tb_expect_eq "the revision did not move" "$rev0" "$(revision)"
rss1=$(rss)
tb_check "RSS grew by less than 64 MiB ($(((rss1 - rss0) / 1024)) MiB)" \
    test $((rss1 - rss0)) -lt 65536

# --- a big valid policy ------------------------------------------------------------------
python3 - "$body" 4000 <<'EOF'
import json, sys
n = int(sys.argv[2])
rules = [{"action": "allow", "target": "198.51.%d.%d/32" % (200 + i // 250, i % 250 + 1)} for i in range(n)]
rules.append({"action": "allow", "target": "203.0.113.12", "ports": [80], "protocols": ["tcp"]})
rules.append({"action": "allow", "target": "a.test"})
open(sys.argv[1], "w").write(json.dumps({"defaultAction": "deny", "egress": rules}))
EOF
t0=$(date +%s%N)
tb_expect_eq "4002 rules: 200" 200 "$(api POST /policy "$body")"
ms=$((($(date +%s%N) - t0) / 1000000))
tb_check "applied in under 5 s (${ms} ms)" test "$ms" -lt 5000
nd_works "its last address rule is enforced" tcp "$TB_ORIGIN_C4" 80
nd_fails_fast "with its port limit" tcp "$TB_ORIGIN_C4" 7
tb_expect_eq "DNS unaffected" NOERROR "$(st a.test)"
tb_expect_eq "revision moved once" $((rev0 + 1)) "$(revision)"
tb_finish
