#!/bin/bash
# proxy_smoke: the transparent proxy's pass-through in a few lines (the
# thorough checks are proxy_passthrough.sh).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: c.test}
EOF2
)
tb_start_egressd --policy "$pol" --proxy

tb_check "https a.test through the proxy" tb_sandbox curl -sS -f -o /dev/null --max-time 5 https://a.test/
tb_check "http a.test through the proxy" tb_sandbox curl -sS -f -o /dev/null --max-time 5 http://a.test/
tb_check_fails "denied SNI b.test on a.test's address" tb_sandbox curl -sS -f -o /dev/null --max-time 5 --resolve b.test:443:203.0.113.10 https://b.test/
tb_check_fails "c.test on a.test's address" tb_sandbox curl -sS -f -o /dev/null --max-time 5 --resolve c.test:443:203.0.113.10 https://c.test/
tb_check_fails "Host b.test on a.test's address" tb_sandbox curl -sS -f -o /dev/null --max-time 5 --resolve b.test:80:203.0.113.10 http://b.test/
tb_check "https a.test over IPv6" tb_sandbox curl -6 -sS -f -o /dev/null --max-time 5 https://a.test/
tb_assert_log "$TB_EGRESSD_LOG" proxy.refused
tb_finish
