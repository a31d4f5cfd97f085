#!/bin/bash
# daemon_deny_webhook: every denied name is reported to the operator's webhook,
# once per name, from egressd's own (marked) socket, while the sandbox
# itself still cannot reach the webhook's host; names in log_skip.always
# are neither logged nor reported. Delivery is one at a time, in order: a
# last denied name, asked after everything else, is the barrier; the
# "never reported" and "only once" checks run after it arrived, when a
# report they look for would have arrived before it.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
mkdir -p "$TB_DIR/egressd/rules"
printf 'noisy.test\n' >"$TB_DIR/egressd/rules/log_skip.always"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_DENY_WEBHOOK="http://$TB_ORIGIN_C4/deny-hook?k=1"
    OPENSANDBOX_EGRESS_SANDBOX_ID=sbx-webhook-test)
tb_start_egressd --policy "$pol"

for i in 1 2 3; do
	tb_sandbox dig +short +time=2 +tries=1 evil.test A >/dev/null
done
tb_sandbox dig +short +time=2 +tries=1 other.evil.test A >/dev/null
tb_sandbox dig +short +time=2 +tries=1 noisy.test A >/dev/null
tb_sandbox dig +short +time=2 +tries=1 last.evil.test A >/dev/null
tb_expect_eq "allowed names still resolve" "203.0.113.10" \
    "$(tb_sandbox dig +short +time=2 +tries=1 a.test A)"

tb_check "the webhook receives the denied name" tb_wait_log_line \
    --timeout 5 "$TB_ORIGIN_LOG" origin.request method=POST path=/deny-hook \
    'body~"hostname":"evil.test"'
tb_check "and the second one" tb_wait_log_line --timeout 5 "$TB_ORIGIN_LOG" \
    origin.request path=/deny-hook 'body~"hostname":"other.evil.test"'
tb_check "and the last one (the barrier)" tb_wait_log_line --timeout 5 \
    "$TB_ORIGIN_LOG" origin.request path=/deny-hook \
    'body~"hostname":"last.evil.test"'
tb_expect_eq "reported in the order they were denied, each once" \
    "evil.test other.evil.test last.evil.test " \
    "$(grep '"path":"/deny-hook"' "$TB_ORIGIN_LOG" |
        grep -oE '\\"hostname\\": ?\\"[^\\]*' | sed 's/.*\\"//' | tr '\n' ' ')"
tb_assert_log --min 1 --max 1 "$TB_ORIGIN_LOG" origin.request \
    path=/deny-hook 'body~"hostname":"evil.test"'
tb_assert_log "$TB_ORIGIN_LOG" origin.request path=/deny-hook \
    'body~"sandboxId":"sbx-webhook-test"' 'body~"reason":"policy"' \
    h.content-type=application/json query=k=1
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request path=/deny-hook \
    'body~noisy'
tb_assert_no_log "$TB_EGRESSD_LOG" dns.deny name=noisy.test
tb_assert_log "$TB_EGRESSD_LOG" dns.deny name=evil.test
tb_check_fails "the sandbox itself cannot reach the webhook host" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null "http://$TB_ORIGIN_C4/deny-hook"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request method=GET path=/deny-hook
tb_finish
