#!/bin/bash
# daemon_smoke: the first story. An allowed name resolves and connects at
# once; a denied name gets NXDOMAIN and its address stays closed; a direct
# IP and the metadata address fail fast.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
EOF
)
tb_start_egressd --policy "$pol"

tb_expect_eq "allowed name resolves through egressd" "203.0.113.10" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"
tb_check "and connects over HTTPS at once" \
    tb_sandbox curl -sS --max-time 5 -o /dev/null https://a.test/
tb_check "wildcard subdomain connects over IPv6" \
    tb_sandbox curl -6 -sS --max-time 5 -o /dev/null https://www.a.test/
tb_expect_match "denied name gets NXDOMAIN" "status: NXDOMAIN" \
    "$(tb_sandbox dig +time=2 +tries=1 b.test A)"
tb_check_fails "a direct connection to a denied origin fails" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "https://$TB_ORIGIN_B4/"
tb_check_fails "metadata address fails" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_META4/"

# Other real clients: node (its own resolver path through libuv/c-ares
# for dns.resolve, getaddrinfo for https) and git (libcurl).
node_get='const https = require("https");
https.get(process.argv[1], r => { console.log(r.statusCode); r.resume(); })
  .on("error", e => { console.log(e.code); process.exitCode = 1; });'
tb_expect_eq "node fetches the allowed name" "200" \
    "$(tb_sandbox env NODE_EXTRA_CA_CERTS="$TB_CA_CERT" node -e "$node_get" https://www.a.test/)"
tb_expect_eq "node cannot resolve the denied name" "ENOTFOUND" \
    "$(tb_sandbox env NODE_EXTRA_CA_CERTS="$TB_CA_CERT" node -e "$node_get" https://b.test/)"
tb_expect_eq "node dns.resolve4 is filtered too" "ENOTFOUND" \
    "$(tb_sandbox node -e 'require("dns").resolve4("b.test", (e, a) => console.log(e ? e.code : a.join()))')"
tb_sandbox env GIT_SSL_CAINFO="$TB_CA_CERT" GIT_TERMINAL_PROMPT=0 \
    git ls-remote https://a.test/repo.git >/dev/null 2>&1
tb_check "git reaches the allowed origin (smart-HTTP request seen there)" \
    tb_wait_log_line --timeout 3 "$TB_ORIGIN_LOG" origin.request \
    'target~^/repo.git/info/refs'
tb_expect_match "git cannot resolve the denied name" "Could not resolve host" \
    "$(tb_sandbox env GIT_TERMINAL_PROMPT=0 git ls-remote https://b.test/repo.git 2>&1)"
tb_assert_log "$TB_EGRESSD_LOG" dns.deny
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_B4"
tb_finish
