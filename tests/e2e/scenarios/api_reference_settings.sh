#!/bin/bash
# api_reference_settings: the settings OpenSandbox's sidecar grew after our
# contract (issue 39 item 2), each honoured end to end or refused at start
# with a message naming it (docs/compat.md, "Newer reference settings").
# Refused at start: REQUIRE_TLS=false, REDIRECT_BACKEND=iptables, a regex
# in IGNORE_HOSTS, EXTRA_PORTS without the proxy, and a policy file whose
# binding covers an ignored host or (SCOPED_MATCH) names no methods.
# Honoured on a running egressd: TRUSTED_PROXY_CIDRS (the host's write
# with X-Forwarded-Proto: https gets past the transport check; without
# the header, or from elsewhere, 426), REQUIRE_SCOPED_MATCH (an unscoped
# binding 400, a scoped one 200), IGNORE_HOSTS (a binding on the host
# 400; the sandbox reaches it with the origin's own certificate),
# EXTRA_PORTS (a connection to 8443 goes through the proxy, one to 8080
# does not), and the reference's two failure metrics.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
# SCOPED_MATCH refuses host-wide bindings: the canaries name a method and path.
export TB_CANARY_SCOPED=1
tb_setup
tb_host_setup # the operator's host: a non-loopback API peer

TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
E=OPENSANDBOX_EGRESS
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
EOF
)
STATE=$TB_DIR/state
SOCK=$TB_DIR/egressd/api.sock

# --- refused at start, each with its name and why ----------------------------
# check ENV... -- FLAGS...: egressd --check's exit status and stderr.
check()
{
	local env=()
	while [ "$1" != -- ]; do env+=("$1"); shift; done
	shift
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${env[@]}" \
	    "$EGRESSD_BIN" --check "$@" 2>"$TB_DIR/check.err" >/dev/null
}
refused()
{
	local desc=$1 want=$2
	shift 2
	if check "$@"; then
		tb_fail "$desc: accepted"
	elif grep -qF -- "$want" "$TB_DIR/check.err"; then
		tb_pass "$desc: refused, naming $want"
	else
		tb_fail "$desc: refused without \"$want\": $(cat "$TB_DIR/check.err")"
	fi
}
refused "REQUIRE_TLS=false" "${E}_CREDENTIAL_VAULT_REQUIRE_TLS" \
    "${E}_CREDENTIAL_VAULT_REQUIRE_TLS=false" -- --policy "$pol"
refused "REDIRECT_BACKEND=iptables" "no iptables backend" \
    "${E}_REDIRECT_BACKEND=iptables" -- --policy "$pol"
refused "a regex in IGNORE_HOSTS" "regular expressions" \
    "${E}_MITMPROXY_IGNORE_HOSTS=^b\.test$" -- --policy "$pol" --proxy
refused "EXTRA_PORTS without the proxy" "${E}_MITMPROXY_EXTRA_PORTS" \
    "${E}_MITMPROXY_EXTRA_PORTS=8443" -- --policy "$pol"
refused "TRUSTED_PROXY_CIDRS 0.0.0.0/0" "trusts every peer" \
    "${E}_CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS=0.0.0.0/0" -- --policy "$pol"
bad=$(tb_policy_file bad-ignored.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: b.test}
credentials:
  - {name: k, source: {type: inline, value: not-a-real-secret}}
bindings:
  - name: pinned
    match: {hosts: [b.test], methods: [GET], paths: ['/v1/*']}
    auth: {type: bearer, credential: k}
EOF
)
refused "a file binding on an ignored host" "never intercepted" \
    "${E}_MITMPROXY_IGNORE_HOSTS=b.test" -- --policy "$bad" --proxy
# Request rules (issue 37) need their host terminated: not on one the
# operator keeps out of the proxy.
refused "request rules on an ignored host" "IGNORE_HOSTS" \
    "${E}_MITMPROXY_IGNORE_HOSTS=*.b.test" -- --proxy \
    --policy "$(tb_policy_file bad-rules.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: x.b.test, methods: [GET]}
EOF
)"
refused "a file binding without methods under SCOPED_MATCH" \
    "names no match.methods" \
    "${E}_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH=true" -- \
    --policy "$(tb_policy_file bad-scoped.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: inline, value: not-a-real-secret}}
bindings:
  - name: wide
    match: {hosts: [a.test], paths: ['/v1/*']}
    auth: {type: bearer, credential: k}
EOF
)"
# The same settings with values egressd honours pass --check.
if check "${E}_CREDENTIAL_VAULT_REQUIRE_TLS=true" \
    "${E}_REDIRECT_BACKEND=nft" "${E}_MITMPROXY_IGNORE_HOSTS=b.test" \
    "${E}_MITMPROXY_EXTRA_PORTS=8443" -- --policy "$pol" --proxy; then
	tb_pass "honoured values pass --check"
else
	tb_fail "honoured values refused: $(cat "$TB_DIR/check.err")"
fi

# --- a running egressd with all six ------------------------------------------
TB_EGRESSD_ENV=(
    "${E}_CREDENTIAL_VAULT_REQUIRE_TLS=true"
    "${E}_CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS=$TB_HOST_IP4/32"
    "${E}_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH=true"
    "${E}_MITMPROXY_EXTRA_PORTS=8443"
    "${E}_MITMPROXY_IGNORE_HOSTS=b.test"
    "${E}_REDIRECT_BACKEND=auto"
)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --http-addr ":18080" --api-socket "$SOCK" \
    --api-token-file "$TB_DIR/token"

# host_write PROTO BODY: a vault POST from the host (a TLS-terminating
# proxy's address), with X-Forwarded-Proto: PROTO unless PROTO is "-".
host_write()
{
	local h=()
	[ "$1" != - ] && h=(-H "X-Forwarded-Proto: $1")
	tb_host curl -sS --max-time 5 -o "$TB_DIR/api.out" -w '%{http_code}' \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" "${h[@]}" \
	    -H "Content-Type: application/json" -X POST --data-binary "$2" \
	    "http://$TB_SBX_HOST_IP4:18080/credential-vault" 2>/dev/null
	tb__keep_answer "$TB_DIR/api.out"
}
S1=real-vault-secret-$RANDOM$RANDOM
cred='{"name":"k","source":{"type":"inline","value":"'$S1'"}}'
vault() { printf '{"credentials":[%s],"bindings":[%s]}' "$cred" "$1"; }
bind() { printf '{"name":"%s","match":%s,"auth":{"type":"bearer","credential":"k"}}' "$@"; }
wide=$(vault "$(bind wide '{"hosts":["a.test"],"paths":["/v1/*"]}')")
scoped=$(vault "$(bind api '{"hosts":["a.test"],"methods":["GET"],"paths":["/v1/*"]}')")
pinned=$(vault "$(bind pinned '{"hosts":["b.test"],"methods":["GET"],"paths":["/v1/*"]}')")

# TRUSTED_PROXY_CIDRS: the host's header counts; nothing else does.
tb_expect_eq "host write without X-Forwarded-Proto: 426" 426 "$(host_write - "$scoped")"
tb_expect_eq "host write with X-Forwarded-Proto: http: 426" 426 "$(host_write http "$scoped")"
# REQUIRE_SCOPED_MATCH: 400 comes after the transport check (426), so
# this answer also proves the forwarded TLS was taken.
tb_expect_eq "trusted proxy, https, unscoped binding: 400" 400 \
    "$(host_write https "$wide")"
tb_expect_match "... naming the binding and the setting" \
    'binding "wide" names no match.methods.*REQUIRE_SCOPED_MATCH' \
    "$(cat "$TB_DIR/api.out")"
tb_expect_eq "IGNORE_HOSTS: a binding on b.test: 400" 400 \
    "$(host_write https "$pinned")"
tb_expect_match "... never intercepted" \
    'binding "pinned" host "b.test" is never intercepted' "$(cat "$TB_DIR/api.out")"
tb_expect_eq "trusted proxy, https, scoped binding: 201" 201 \
    "$(host_write https "$scoped")"

# The sandbox: a.test is bound (terminated), b.test ignored, c.test not.
for n in a.test b.test c.test; do
	tb_sandbox dig +short +time=2 +tries=1 "$n" A >/dev/null
done
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/trust-all.pem"
chmod 644 "$TB_DIR/trust-all.pem" "$TB_DIR/trust/test-ca.pem"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_check "the bound host is served with the secret" \
    tb_sandbox curl -sS --max-time 8 --cacert "$TB_DIR/trust-all.pem" \
    -o /dev/null -H 'Authorization: Bearer fake' https://a.test/v1/x
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/x \
    "h.authorization=Bearer $S1"
# Only the origin's CA trusted: the bound host fails (egressd's leaf), the
# ignored one is reached with its own certificate.
tb_check_fails "a.test with the origin's CA only: egressd's certificate" \
    tb_sandbox curl -sS --max-time 8 --cacert "$TB_DIR/trust/test-ca.pem" \
    -o /dev/null https://a.test/v1/x
tb_check "b.test (ignored) with the origin's CA only: its own certificate" \
    tb_sandbox curl -sS --max-time 8 --cacert "$TB_DIR/trust/test-ca.pem" \
    -o /dev/null https://b.test/v1/x

# EXTRA_PORTS: 8443 goes through the proxy, 8080 (not listed) does not.
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_check "c.test:8443 reached" tb_sandbox curl -4 -sS --max-time 8 \
    --cacert "$TB_DIR/trust/test-ca.pem" -o /dev/null https://c.test:8443/x
if tb_wait_log_line --since "$mark" --timeout 5 "$TB_EGRESSD_LOG" \
    proxy.closed decision=passthrough "dst=$TB_ORIGIN_C4:8443" >/dev/null; then
	tb_pass "c.test:8443 went through the proxy (proxy.closed)"
else
	tb_fail "c.test:8443: no proxy.closed line"
fi
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
omark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_check "c.test:8080 reached" tb_sandbox curl -4 -sS --max-time 8 \
    -o /dev/null http://c.test:8080/y
tb_assert_log --since "$omark" "$TB_ORIGIN_LOG" origin.request path=/y
sleep 0.5
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" proxy.closed \
    "dst=$TB_ORIGIN_C4:8080"

# The reference's failure metrics, by its names and label values.
tb_sandbox_root curl -sS --max-time 5 --unix-socket "$SOCK" \
    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" -o "$TB_DIR/metrics" \
    http://egressd/metrics
for l in 'egress_dns_query_failed_total{reason="no_upstreams"}' \
    'egress_dns_query_failed_total{reason="upstream_error"}' \
    'egress_dns_query_failed_total{reason="empty_response"}' \
    'egress_dns_query_failed_total{reason="rcode"}' \
    'egress_nftables_updates_failed_total{operation="static_apply"}' \
    'egress_nftables_updates_failed_total{operation="dynamic_add"}' \
    'egress_nftables_updates_failed_total{operation="remove"}' \
    'egress_nftables_updates_failed_total{operation="refresh"}'; do
	if grep -qF "$l " "$TB_DIR/metrics"; then
		tb_pass "metric $l"
	else
		tb_fail "metric $l missing"
	fi
done
tb_finish
