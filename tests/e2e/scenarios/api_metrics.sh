#!/bin/bash
# api_metrics: every counter of /metrics moves when its event happens, as
# an operator scraping from the host would see it.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

tok=tok-$RANDOM$RANDOM
printf '%s\n' "$tok" >"$TB_DIR/token"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: cname-bad.test}
  - {action: allow, target: rebind.test}
  - {action: allow, target: c.test}
  - {action: allow, target: huge.test}
EOF
)
tb_start_egressd --policy "$pol" --api-token-file "$TB_DIR/token" \
    --http-addr ":18080" --dns-timeout 2
api=http://$TB_SBX_HOST_IP4:18080

scrape() { # -> $TB_DIR/m.<n>
	tb_host curl -sS --max-time 5 -H "Authorization: Bearer $tok" \
	    "$api/metrics" >"$TB_DIR/m.$1"
}
# val FILE SERIES: the sample of one series ("name" or 'name{l="v"}').
val() {
	awk -v s="$2" '$1 == s { print $2; found = 1 } END { if (!found) print "absent" }' "$1"
}
# moved DESC SERIES MIN: the series grew by at least MIN between scrapes.
moved() {
	local a b
	a=$(val "$TB_DIR/m.before" "$2")
	b=$(val "$TB_DIR/m.after" "$2")
	if [ "$a" = absent ] || [ "$b" = absent ]; then
		tb_fail "$1: $2 absent (before $a, after $b)"
	elif awk -v a="$a" -v b="$b" -v m="$3" 'BEGIN { exit !(b - a >= m) }'; then
		tb_pass "$1: $2 $a -> $b"
	else
		tb_fail "$1: $2 $a -> $b, wanted +$3"
	fi
}
q() { tb_sandbox dig +time=3 +tries=1 "$@" >/dev/null 2>&1; }

scrape before
tb_check "the scrape passes promtool" sh -c "promtool check metrics <'$TB_DIR/m.before'"
tb_expect_eq "build info" 1 "$(val "$TB_DIR/m.before" 'egressd_build_info{version="0.1.0"}')"
tb_expect_eq "enforcement info" 1 "$(val "$TB_DIR/m.before" 'egressd_enforcement_info{mode="dns+nft"}')"

q a.test A                      # allowed, upstream, learned
q a.test A                      # cache hit, its learn skipped (memo)
q huge.test A                   # upstream TC=1 over UDP: retried over TCP
q b.test A                      # denied
q cname-bad.test A              # CNAME into a denied name
q rebind.test A                 # private answer stripped
q localhost A                   # answered locally
"$TB_PY" - "$TB_SBX" <<'EOF' # a query with two questions: FORMERR
import socket, subprocess, sys
pkt = bytes.fromhex("1234 0100 0002 0000 0000 0000".replace(" ", ""))
pkt += b"\x01a\x04test\x00\x00\x01\x00\x01" * 2
subprocess.run(["ip", "netns", "exec", sys.argv[1], "/usr/bin/python3", "-c",
    "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM);"
    "s.settimeout(2); s.sendto(bytes.fromhex(sys.argv[1]), ('127.0.0.1', 15353));"
    "s.recv(512)", pkt.hex()], check=True)
EOF
tb_dns_blackhole dns1 on
q c.test A                      # upstream silent: SERVFAIL, failure
tb_dns_blackhole dns1 off
tb_host curl -sS --max-time 5 -o /dev/null -H "Authorization: Bearer wrong" \
    "$api/policy"
tb_host curl -sS --max-time 5 -o /dev/null -H "Authorization: Bearer $tok" \
    -X PATCH --data '[{"action":"allow","target":"b.test"}]' "$api/policy"
tb_host curl -sS --max-time 5 -o /dev/null -H "Authorization: Bearer $tok" \
    -X PATCH --data '[{"action":"sometimes","target":"b.test"}]' "$api/policy"
tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_ORIGIN_B4/" # rejected
tb_sandbox curl -4 -sS --max-time 5 -o /dev/null https://a.test/      # learned
m=$(tb_log_mark "$TB_EGRESSD_LOG")
printf 'defaultAction: deny\negress:\n  - {action: allow, target: a.test}\n' \
    >"$pol.new" && mv -f "$pol.new" "$pol"
tb_wait_log_line --since "$m" --timeout 2 "$TB_EGRESSD_LOG" policy.loaded >/dev/null
m=$(tb_log_mark "$TB_EGRESSD_LOG")
printf 'defaultAction: never\n' >"$pol.new" && mv -f "$pol.new" "$pol"
tb_wait_log_line --since "$m" --timeout 2 "$TB_EGRESSD_LOG" policy.reload_failed >/dev/null
scrape after

moved "every query counted" egressd_dns_queries_received_total 8
moved "allowed" 'egressd_dns_queries_total{decision="allowed"}' 2
moved "denied" 'egressd_dns_queries_total{decision="denied"}' 1
moved "CNAME into denied" 'egressd_dns_queries_total{decision="cname_denied"}' 1
moved "local answer" 'egressd_dns_queries_total{decision="local"}' 1
moved "FORMERR" 'egressd_dns_queries_total{decision="formerr"}' 1
moved "SERVFAIL" 'egressd_dns_queries_total{decision="servfail"}' 1
moved "rebinding strip" egressd_dns_private_answers_stripped_total 1
moved "cache hit" egressd_dns_cache_hits_total 1
moved "cache miss" egressd_dns_cache_misses_total 1
moved "upstream failure" egressd_dns_upstream_failures_total 1
moved "upstream TC retry over TCP" egressd_dns_upstream_tc_retries_total 1
moved "learn skipped by the cache memo" egressd_dns_learn_memo_skips_total 1
tb_expect_eq "no overload" 0 "$(val "$TB_DIR/m.after" egressd_dns_overload_total)"
moved "upstream latency observed" egressd_dns_upstream_duration_seconds_count 1
moved "nft batches (learn, PATCH, reload)" egressd_nft_batches_total 3
moved "addresses learned" egressd_nft_learned_total 1
moved "learned addresses gauge" egressd_nft_learned_addresses 1
moved "policy revision (PATCH + reload)" egressd_policy_revision 2
moved "API update ok" 'egressd_policy_updates_total{result="ok"}' 1
moved "API update failed" 'egressd_policy_updates_total{result="failed"}' 1
moved "reload ok" 'egressd_policy_reloads_total{result="ok"}' 1
moved "reload failed" 'egressd_policy_reloads_total{result="failed"}' 1
moved "API requests" egressd_api_requests_total 3
moved "API 401" egressd_api_unauthorized_total 1
moved "log lines" egressd_log_lines_total 5
moved "nft default deny (direct IP)" 'egressd_nft_packets_total{decision="default_deny"}' 1
moved "nft learned accept (HTTPS to a.test)" 'egressd_nft_packets_total{decision="learned"}' 1
moved "nft dns redirect accepted" 'egressd_nft_packets_total{decision="dns"}' 8
moved "nft bytes too" 'egressd_nft_bytes_total{decision="default_deny"}' 40
tb_finish
