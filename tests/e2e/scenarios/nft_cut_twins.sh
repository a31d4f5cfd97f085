#!/bin/bash
# nft_cut_twins (issue 16, notes): the flow cut judges an IPv6 address
# that spells an IPv4 one (NAT64 64:ff9b::/96, 6to4, mapped, compatible) as
# the filter chain does. The sandbox holds a TCP connection to
# [64:ff9b::cb00:710b]:7 (NAT64 spelling of 203.0.113.11, allowed by a user
# rule for 64:ff9b::/96); the operator PATCHes a deny of 203.0.113.11: the
# chain denies its twin 64:ff9b::cb00:710b/128 (it beats the /96 allow),
# and the live connection breaks within 2 s, like one to 203.0.113.11
# itself. Before, the cut judged the IPv6 address by IPv6 rules only (the
# /96 allow) and the connection lived on.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup
tb_host_setup

TWIN=64:ff9b::cb00:710b
TWIN2=64:ff9b::cb00:710c # 203.0.113.12, stays allowed
for a in "$TWIN" "$TWIN2"; do
	tb_net ip addr add "$a/128" dev lo || tb_die "address $a"
done
# a TCP echo on both NAT64 spellings, in the internet namespace
echo_srv='
import select, socket, sys
ls = []
for a in sys.argv[1:]:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a, 7)); s.listen(8); ls.append(s)
print("listening", flush=True)
cs = []
while True:
    r, _, _ = select.select(ls + cs, [], [])
    for s in r:
        if s in ls:
            c, _ = s.accept(); cs.append(c)
            continue
        try:
            d = s.recv(512)
        except OSError:
            d = b""
        if not d:
            cs.remove(s); s.close()
        else:
            s.sendall(d)
'
tb_net_bg "$TB_DIR/echo6.log" "$TB_PY" -c "$echo_srv" "$TWIN" "$TWIN2"
tb_check "NAT64 echo listening" tb_wait_line "$TB_DIR/echo6.log" '^listening' 5

TB_EGRESSD_TOKEN="twin-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: "64:ff9b::/96"}
EOF
)
tb_start_egressd --policy "$pol"

# HOLD HOST SECS: tests/e2e/tools/tcp_hold.py, over IPv6.
hold=$ND_TOOLS/tcp_hold.py
h1=$TB_DIR/hold1.out
h2=$TB_DIR/hold2.out
# Long enough to outlast a slow commit (an ASan build on a loaded machine
# took over 6 s to answer the PATCH, and a 7 s hold ended on its own
# first): the cut ends the first early; the second must live past it.
tb_sandbox_bg "$h1" "$TB_PY" "$hold" "$TWIN" 30
p1=$TB_LAST_PID
tb_sandbox_bg "$h2" "$TB_PY" "$hold" "$TWIN2" 12
p2=$TB_LAST_PID
tb_check "connection to $TWIN up" tb_wait_line "$h1" '^up ' 5
tb_check "connection to $TWIN2 up" tb_wait_line "$h2" '^up ' 5
sleep 1

m=$(tb_log_mark "$TB_EGRESSD_LOG")
st=$(tb_host curl -sS -o /dev/null -w '%{http_code}' --max-time 10 \
    -X PATCH -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
    -H "Content-Type: application/json" \
    --data-binary '[{"action":"deny","target":"203.0.113.11"}]' \
    "http://$TB_SBX_HOST_IP4:18080/policy")
t_patch=$(date +%s.%N)
tb_expect_eq "PATCH deny 203.0.113.11" 200 "$st"
wait "$p1"
tb_expect_match "the connection to its NAT64 spelling broke with a reset" \
    '^err (ECONNRESET|EPIPE) ' "$(grep '^err' "$h1" || tail -n 1 "$h1")"
t_err=$(awk '/^err/ {print $3}' "$h1")
dt=$(awk -v a="${t_err:-0}" -v b="$t_patch" 'BEGIN {printf "%.2f", a - b}')
tb_check "within 2 s of the PATCH answer (${dt} s)" \
    awk -v d="$dt" -v e="${t_err:-}" 'BEGIN {exit !(e != "" && d < 2.0)}'
wait "$p2"
tb_expect_match "the connection to $TWIN2 (203.0.113.12) kept working" \
    '^ok ([3-9][0-9]|[1-9][0-9][0-9])$' "$(tail -n 1 "$h2")"
tb_assert_log --since "$m" --min 1 --max 1 "$TB_EGRESSD_LOG" nft.flows_cut cut=1
nd_fails_fast "a new connection to $TWIN is refused" tcp "$TWIN" 7
tb_finish
