#!/bin/bash
# daemon_startup_no_query_lost: a sidecar gates its pod, so the workload asks for
# names while egressd starts. A client sends a query to its resolver every
# 3 ms, each from a new socket, from before egressd's exec until well after
# it is ready. Every one is answered: by the upstream itself before the
# ruleset is in force (a.test: NOERROR), by egressd once the redirect is
# (a.test is denied: NXDOMAIN). None is refused (port closed) and none is
# silently lost (read and dropped, or never read). No timing is asserted:
# the client waits up to 5 s for each answer.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: c.test}
EOF
)
tb_sbx_tool dns_trickle.py
stop=$TB_SBX_HOME/stop
progress=$TB_SBX_HOME/progress
result=$TB_DIR/root/trickle.json

# count RCODE: answers with that rcode so far (0 before the first report)
count() {
	"$TB_PY" -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["rcodes"].get(sys.argv[2], 0))
except (OSError, ValueError): print(0)' "$progress" "$1"
}
# wait_count RCODE N SECONDS
wait_count() {
	local end
	end=$(tb__deadline "$3")
	until [ "$(count "$1")" -ge "$2" ]; do
		tb__expired "$end" && return 1
		sleep "$TB_POLL"
	done
}

tb_sandbox_bg "$result" "$TB_PY" "$TB_DIR/sbx-bin/dns_trickle.py" \
    --server "$TB_DNS1_IP4" --name a.test --interval-ms 3 \
    --timeout-ms 5000 --stop-file "$stop" --progress "$progress" \
    --max-seconds 60 --max-queries 8000
client=$TB_LAST_PID
tb_check "the client gets answers from the upstream before egressd runs" \
    wait_count NOERROR 5 10

tb_start_egressd --policy "$pol"
tb_check "then from egressd (a.test denied)" wait_count NXDOMAIN 100 20
touch "$stop"
end=$(tb__deadline 15)
while tb__alive "$client" && ! tb__expired "$end"; do
	sleep "$TB_POLL"
done
tb_check_fails "the client finished" tb__alive "$client"
wait "$client" 2>/dev/null
echo "# client: $(cat "$result")"

field() {
	"$TB_PY" -c 'import json,sys
d = json.load(open(sys.argv[1]))
v = d
for k in sys.argv[2].split("."): v = v.get(k, 0) if isinstance(v, dict) else 0
print(v)' "$result" "$1" 2>/dev/null || echo "?"
}
sent=$(field sent)
tb_expect_eq "no query silently lost (no answer within 5 s)" 0 "$(field unanswered)"
tb_expect_eq "no query refused (port closed during start-up)" 0 "$(field refused)"
tb_expect_eq "no send failed" 0 "$(field send_failed)"
tb_expect_eq "the client never hit its open-socket cap" 0 "$(field capped)"
tb_expect_eq "every query sent was answered" "$sent" "$(field answered)"
tb_expect_eq "each answer is the upstream's or egressd's" "$sent" \
    "$(($(field rcodes.NOERROR) + $(field rcodes.NXDOMAIN)))"
tb_assert_log "$TB_EGRESSD_LOG" nft.selfcheck_passed
tb_finish
