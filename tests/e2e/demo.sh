#!/bin/bash
# ./run demo: egressd in a throwaway sandbox namespace, a fake internet in
# another, and a narrated tour of what the sandbox can and cannot do.
# Everything is torn down on exit.
set -u -o pipefail
export EGRESSD_BIN=${1:-${EGRESSD_BIN:-build/egressd/egressd}}
. "$(dirname "$0")/lib/testbed.sh"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {
	printf '$ %s\n' "$*"
	"$@" 2>&1 | sed 's/^/    /' | head -n 15
	printf '    (exit %s)\n' "${PIPESTATUS[0]}"
}

tb_setup
TB_EGRESSD_TOKEN=demo-token-$RANDOM
tb_host_setup
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
  - {action: allow, target: cname-bad.test}
  - {action: allow, target: rebind.test}
EOF
)
tokfile=$TB_DIR/token
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$tokfile"
TB_EGRESSD_HTTP="[::]:18080"
tb_start_egressd --policy "$pol" --api-token-file "$tokfile"

say "The policy egressd enforces"
cat "$pol" | sed 's/^/    /'

say "Inside the sandbox (uid $TB_SBX_USER): an allowed name"
show tb_sandbox dig +short a.test A
show tb_sandbox curl -sS -o /dev/null -w '%{http_code} from %{remote_ip}\n' https://a.test/

say "A denied name: NXDOMAIN, and nothing reaches the upstream"
show tb_sandbox dig +noall +comments b.test A
say "A hard-coded resolver is answered by egressd all the same"
show tb_sandbox dig +short @203.0.113.53 b.test A
show tb_sandbox dig +short @203.0.113.53 a.test A

say "Going around DNS: direct IPs, metadata, DoT, QUIC all fail fast"
show tb_sandbox curl -sS --max-time 3 -o /dev/null https://203.0.113.11/
show tb_sandbox curl -sS --max-time 3 -o /dev/null http://169.254.169.254/
show tb_sandbox curl -6 -sS --max-time 3 -o /dev/null "https://[2001:db8:2::11]/"

say "An allowed alias of a denied name, and a rebinding answer"
show tb_sandbox dig +noall +comments +answer cname-bad.test A
show tb_sandbox dig +noall +comments +answer rebind.test A

say "The sandbox cannot reach the control API, even with the token"
show tb_sandbox curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" http://127.0.0.1:18080/policy

say "The operator, from the host side, opens b.test at run time"
show tb_host curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
    -X PATCH --data '[{"action":"allow","target":"b.test"}]' "http://$TB_SBX_HOST_IP4:18080/policy"
show tb_sandbox curl -sS -o /dev/null -w '%{http_code} from %{remote_ip}\n' https://b.test/

say "What egressd logged (last lines)"
tail -n 8 "$TB_EGRESSD_LOG" | sed 's/^/    /'

say "The filter chain of the nftables table it owns (inet egressd)"
tb_sandbox_root nft list chain inet egressd filter_out | sed 's/^/    /'

say "The demo checks itself"
tb_check "allowed name connects" tb_sandbox curl -sS --max-time 5 -o /dev/null https://a.test/
tb_check_fails "direct IP is refused" tb_sandbox curl -sS --max-time 3 -o /dev/null https://203.0.113.12/
say "Done; egressd stops and the namespaces are removed."
tb_finish
