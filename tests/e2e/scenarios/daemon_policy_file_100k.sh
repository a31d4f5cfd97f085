#!/bin/bash
# daemon_policy_file_100k: an operator's 100,000-rule policy file (block YAML,
# names of real length, ~6 MiB: over the old 4 MiB limit) loads, at start
# and in --check, and its last rules are in force; the file limit is the
# operator's (--policy-file-max, refused with a message naming it), while
# API bodies keep their 1 MiB bound (413).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TOKEN="big-$TB_ID-$RANDOM$RANDOM"
API_BODY="$TB_DIR/api.body"
TB_EGRESSD_HTTP=":18080"
URL="http://$TB_SBX_HOST_IP4:18080"
pol="$TB_DIR/egressd/policy.yaml"
# 99,998 rules that never match the bed's names, then the two that do.
$TB_PY - "$pol" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("# 100000 rules, as an operator writes them\n")
    f.write("defaultAction: deny\negress:\n")
    for i in range(99998):
        k = i % 3
        if k == 0:
            f.write("  - action: allow\n    target: api-%06d.services.example.com\n" % i)
        elif k == 1:
            f.write("  - action: allow\n    target: \"*.tenant-%06d.cdn.example.net\"\n" % i)
        else:
            f.write("  - action: deny\n    target: tracker-%06d.ads.example.org\n" % i)
    f.write("  - action: deny\n    target: b.test\n")
    f.write("  - action: allow\n    target: a.test\n")
EOF
chmod 600 "$pol"
size=$(stat -c %s "$pol")
tb_check "the file is over 4 MiB ($size bytes)" test "$size" -gt $((4 << 20))

# --- --check and start load it ---------------------------------------------
tb_check "--check accepts it" "$EGRESSD_BIN" --check --policy "$pol" \
    --rules-dir "$TB_DIR/egressd/rules"
tb_expect_match "with every rule" '^ok: 100000 rules' "$(cat "$TB_OUT")"
TB_EGRESSD_READY_TIMEOUT=90
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TOKEN")
tb_start_egressd --policy "$pol"
tb_assert_log "$TB_EGRESSD_LOG" policy.loaded trigger=start rules=100000
resolves()
{
	[ -n "$(tb_sandbox dig +short +time=2 +tries=1 "$1" A)" ]
}
tb_check "the last rule is in force: a.test resolves" resolves a.test
tb_check "and connects" tb_sandbox curl -sS --max-time 3 -o /dev/null \
    --resolve "a.test:443:$TB_ORIGIN_A4" https://a.test/
tb_check_fails "the one before: b.test does not resolve" resolves b.test
tb_expect_eq "/v1/status" 200 "$(tb_host curl -sS --max-time 10 \
    -o "$API_BODY" -w '%{http_code}' \
    -H "OPENSANDBOX-EGRESS-AUTH: $TOKEN" "$URL/v1/status")"
tb_expect_match "counts 100000 rules" '"rules":100000' "$(cat "$API_BODY")"

# --- API bodies keep the hostile-input bound --------------------------------
big="$TB_DIR/body.json"
$TB_PY -c 'import sys
sys.stdout.write("{\"egress\":[" + ",".join(["{\"target\":\"x%06d.example.com\"}" % i for i in range(40000)]) + "]}")' >"$big"
tb_check "the body is over 1 MiB" test "$(stat -c %s "$big")" -gt $((1 << 20))
tb_expect_eq "POST of it: 413" 413 "$(tb_host curl -sS --max-time 10 \
    -o "$API_BODY" -w '%{http_code}' -H "OPENSANDBOX-EGRESS-AUTH: $TOKEN" \
    -X POST --data-binary "@$big" "$URL/policy")"
tb_check "a.test still resolves (nothing changed)" resolves a.test

# --- the operator's limit, with a message that says how to raise it -------
tb_check_fails "--check with --policy-file-max 1048576 refuses it" \
    "$EGRESSD_BIN" --check --policy "$pol" --policy-file-max 1048576 \
    --rules-dir "$TB_DIR/egressd/rules"
tb_expect_match "naming the limit and the flag" \
    "larger than 1048576 bytes .*--policy-file-max" "$(cat "$TB_OUT")"
tb_finish
