#!/bin/bash
# nft_cut_on_tighten (THREATS §9, established flows): the sandbox holds two
# long-lived TCP connections, to a.test's and b.test's echo servers. The
# operator, from the node's namespace, PATCHes b.test to deny: the
# connection to b.test breaks within ~1-2 s (egressd deletes its conntrack
# entry, the next packet is NEW and the deny chain resets it), the one to
# a.test keeps working, the operator's own keep-alive API connection keeps
# working, and egressd's upstream DNS still answers. egressd logs
# nft.flows_cut with cut=1: not the operator's inbound connection, not the
# redirected DNS flows, not egressd's own (ct-marked) upstream flows.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN="cut-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: "*.a.test"}
dns: {ttlMin: 60, ttlMax: 300}
EOF
)
tb_start_egressd --policy "$pol"

# HOLD HOST SECONDS: tests/e2e/tools/tcp_hold.py (up, then ok or err).
hold=$ND_TOOLS/tcp_hold.py
# The operator: one keep-alive HTTP/1.1 connection from host-<id> to the
# pod's API: GET, PATCH b.test to deny, wait 2 s, GET again on the SAME
# connection. Prints the statuses, the epoch right after the PATCH answer
# and whether the socket stayed the same.
operator='
import http.client, sys, time
host, tok = sys.argv[1], sys.argv[2]
h = {"OPENSANDBOX-EGRESS-AUTH": tok, "Content-Type": "application/json"}
c = http.client.HTTPConnection(host, 18080, timeout=5)
out = []
c.request("GET", "/policy", headers=h); r = c.getresponse(); r.read()
out.append(r.status)
sock = c.sock
try:
    c.request("PATCH", "/policy", body=b"[{\"action\":\"deny\",\"target\":\"b.test\"}]", headers=h)
    r = c.getresponse(); r.read(); out.append(r.status)
except Exception as e:
    out.append(type(e).__name__)
t = time.time()
time.sleep(2)
try:
    c.request("GET", "/policy", headers=h); r = c.getresponse(); r.read()
    out.append(r.status)
except Exception as e:
    out.append(type(e).__name__)
print(" ".join(str(x) for x in out), "%.3f" % t, "same" if c.sock is sock else "reconnected")
'

dig_s() { tb_sandbox dig +short +time=2 +tries=1 "$@"; }
tb_expect_eq "a.test resolves through egressd" "$TB_ORIGIN_A4" "$(dig_s a.test A)"
tb_expect_eq "b.test resolves through egressd" "$TB_ORIGIN_B4" "$(dig_s b.test A)"

ha=$TB_DIR/hold_a.out
hb=$TB_DIR/hold_b.out
tb_sandbox_bg "$ha" "$TB_PY" "$hold" "$TB_ORIGIN_A4" 8
pa=$TB_LAST_PID
tb_sandbox_bg "$hb" "$TB_PY" "$hold" "$TB_ORIGIN_B4" 8
pb=$TB_LAST_PID
tb_check "the connection to a.test is up" tb_wait_line "$ha" '^up ' 3
tb_check "the connection to b.test is up" tb_wait_line "$hb" '^up ' 3
sleep 1
tb_expect_match "b.test's connection is alive before the update" '^up ' \
    "$(cat "$hb")"

m=$(tb_log_mark "$TB_EGRESSD_LOG")
op=$(tb_host "$TB_PY" -c "$operator" "$TB_SBX_HOST_IP4" "$TB_EGRESSD_TOKEN")
read -r st_get st_patch st_after t_patch same <<<"$op"
tb_expect_eq "operator: GET before" 200 "$st_get"
tb_expect_eq "operator: PATCH b.test to deny" 200 "$st_patch"
tb_expect_eq "operator: GET 2 s after, same connection" "200 same" \
    "${st_after:-} ${same:-}"

wait "$pb"
rb=$(cat "$hb")
tb_expect_match "b.test's connection broke with a reset ($(grep '^err' "$hb"))" \
    '^err (ECONNRESET|EPIPE) ' \
    "$(grep '^err' "$hb" || echo "$rb")"
t_err=$(awk '/^err/ {print $3}' "$hb")
dt=$(awk -v a="${t_err:-0}" -v b="${t_patch:-0}" 'BEGIN {printf "%.2f", a - b}')
tb_check "within 2 s of the PATCH answer (${dt} s)" \
    awk -v d="$dt" -v e="${t_err:-}" 'BEGIN {exit !(e != "" && d < 2.0)}'
wait "$pa"
ra=$(tail -n 1 "$ha")
tb_check "a.test's connection kept working all 8 s ($ra)" \
    awk -v l="$ra" 'BEGIN {split(l, f, " "); exit !(f[1] == "ok" && f[2] >= 30)}'


tb_assert_log --since "$m" --min 1 --max 1 "$TB_EGRESSD_LOG" nft.flows_cut cut=1
tb_assert_no_log --since "$m" "$TB_EGRESSD_LOG" nft.flows_cut_failed
nd_fails_fast "new connections to b.test are refused" tcp "$TB_ORIGIN_B4" 7
nd_works "new connections to a.test are not" tcp "$TB_ORIGIN_A4" 7
# upstream DNS after the update: a name not asked before goes upstream
tb_expect_eq "egressd's upstream DNS still answers (deep.sub.a.test)" \
    "$TB_ORIGIN_A4" "$(dig_s deep.sub.a.test A)"
tb_assert_dns_query dns1 'deep\.sub\.a\.test' A
tb_finish
