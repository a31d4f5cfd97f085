#!/bin/bash
# proxy_upstream_chain: a cluster whose only way out is a corporate CONNECT
# proxy (issue 39, item 3). The origins refuse egressd's pod outright (an
# nft rule in the "internet" resets every TCP connection from the pod's
# addresses to them); only the proxy, which requires Basic credentials,
# may reach them. With --upstream-proxy every origin connection egressd
# makes goes through one CONNECT tunnel, after the same policy checks:
# pass-through TLS (CONNECT to the SNI), terminated TLS with a credential
# injected (bound host), plain HTTP (CONNECT to the Host), the deny
# webhook (CONNECT to its IP literal) and egressd's own request to an
# oauth2 token endpoint (issue 38); the origins see the proxy as their
# peer. The sandbox cannot use the proxy itself even where the policy
# allows its address. Wrong proxy credentials and a stopped proxy fail
# the client closed with a reason; nothing reaches an origin directly.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

PROXY_IP=203.0.113.80
PORT=3128
IDP=203.0.113.20 # idp.test, rs.test: the oauth2 token endpoint and its API
API=203.0.113.21
USERPASS="corp-user:pw-$(tb_random_key)"
GOOD="Basic $(printf '%s' "$USERPASS" | base64 -w0)"
ip -n "$TB_NET" addr add "$PROXY_IP/32" dev lo
ip -n "$TB_NET" addr add "$IDP/32" dev lo
ip -n "$TB_NET" addr add "$API/32" dev lo
# The pod reaches nothing of the origins' but through the proxy.
tb_net nft -f - <<EOF || tb_die "nft in $TB_NET"
table inet tb_corp {
	counter direct {}
	chain input {
		type filter hook input priority 0; policy accept;
		ip saddr $TB_SBX_IP4 ip daddr { $TB_ORIGIN_A4, $TB_ORIGIN_B4, $TB_ORIGIN_C4, $IDP, $API } meta l4proto tcp counter name direct reject with tcp reset
		ip6 saddr $TB_SBX_IP6 ip6 daddr { $TB_ORIGIN_A6, $TB_ORIGIN_B6, $TB_ORIGIN_C6 } meta l4proto tcp counter name direct reject with tcp reset
	}
}
EOF
tb_check_fails "before egressd: the pod cannot reach an origin directly" \
    tb_sandbox_root curl -sS --max-time 3 -o /dev/null "http://$TB_ORIGIN_B4/"
tb_net nft reset counters table inet tb_corp >/dev/null

# The proxy's own credential store (what it accepts) and egressd's copy.
printf '%s\n' "$GOOD" >"$TB_DIR/net/proxy-accepts"
chmod 644 "$TB_DIR/net/proxy-accepts"
printf '%s\n' "$GOOD" >"$TB_DIR/egressd/proxy-auth"
chmod 600 "$TB_DIR/egressd/proxy-auth"
PROXY_LOG=$TB_DIR/net/proxy.log
: >"$PROXY_LOG"
chmod 644 "$PROXY_LOG"
# start_proxy [MAP...]: the names it resolves (default: every one here)
start_proxy() {
	local maps=("$@")
	[ ${#maps[@]} -gt 0 ] || maps=(a.test="$TB_ORIGIN_A4" \
	    b.test="$TB_ORIGIN_B4" c.test="$TB_ORIGIN_C4" idp.test="$IDP" \
	    rs.test="$API")
	rm -f "$TB_DIR/net/proxy.ready"
	ip netns exec "$TB_NET" "$TB_PY" "$TB_SERVERS_DIR/connect_proxy.py" \
	    --listen "$PROXY_IP:$PORT" --source "$PROXY_IP" \
	    --auth-file "$TB_DIR/net/proxy-accepts" --log "$PROXY_LOG" \
	    --ready "$TB_DIR/net/proxy.ready" \
	    "${maps[@]/#/--map=}" >>"$TB_DIR/net/proxy.err" 2>&1 &
	PROXY_PID=$!
	TB_PIDS+=("$PROXY_PID")
	tb_wait_file "$TB_DIR/net/proxy.ready" "$TB_SETUP_WAIT" ||
	    tb_die "proxy not ready: $(tail -n 5 "$TB_DIR/net/proxy.err")"
}
start_proxy

SECRET=real-secret-$(tb_random_key)
tb_vault_files "$SECRET"
D=$TB_DIR/net/oauth2
mkdir -p "$D"
printf '%s\n' "cs-$(tb_random_key)" >"$TB_DIR/egressd/client-secret"
printf 'rt0-%s\n' "$(tb_random_key)" >"$TB_DIR/egressd/refresh-token"
chmod 600 "$TB_DIR/egressd/client-secret" "$TB_DIR/egressd/refresh-token"
cert=$(tb_pki_leaf oauth2 "DNS:idp.test,DNS:rs.test")
ip netns exec "$TB_NET" "$TB_PY" "$TB_SERVERS_DIR/oauth2.py" --idp "$IDP" \
    --api "$API" --cert "$cert" --key "${cert%.crt}.key" \
    --client-id agent --secret-file "$TB_DIR/egressd/client-secret" \
    --refresh-file "$TB_DIR/egressd/refresh-token" --expires 60 \
    --dir "$D" --ready "$D/ready" >"$D/err" 2>&1 &
TB_PIDS+=("$!")
tb_wait_file "$D/ready" "$TB_SETUP_WAIT" ||
    tb_die "oauth2 server not ready: $(tail -n 5 "$D/err")"
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
  - {action: allow, target: $PROXY_IP}
  - {action: allow, target: idp.test}
  - {action: allow, target: rs.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
  - {name: cs, source: {type: file, path: $TB_DIR/egressd/client-secret}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/v1/*"]}
    auth: {type: bearer, credential: k}
  - name: c-api
    match: {hosts: [c.test], paths: ["/v1/*"]}
    auth: {type: bearer, credential: k}
  - name: rs-api
    match: {hosts: [rs.test], paths: ["/cc/*"], methods: [GET]}
    auth: {type: oauth2, grant: client_credentials,
           tokenUrl: "https://idp.test/token", clientId: agent,
           clientSecret: cs}
  - name: rs-late # its first token is asked for while idp.test is refused
    match: {hosts: [rs.test], paths: ["/late/*"], methods: [GET]}
    auth: {type: oauth2, grant: client_credentials,
           tokenUrl: "https://idp.test/token", clientId: agent,
           clientSecret: cs}
EOF
)
STATE=$TB_DIR/state
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_DENY_WEBHOOK="http://$TB_ORIGIN_C4/deny-hook")
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --upstream-proxy "http://$PROXY_IP:$PORT" \
    --upstream-proxy-auth-file "$TB_DIR/egressd/proxy-auth"
tb_assert_log "$TB_EGRESSD_LOG" uproxy.configured "via=$PROXY_IP:$PORT" \
    auth=true connect_by=name
C=(curl -sS --max-time 8 --cacert "$STATE/ca-bundle.crt")
# pass-through: the origin's own certificate (the test PKI's)
P=(curl -sS --max-time 8)

# --- every kind of origin connection, through the proxy -----------------------
pmark=$(tb_log_mark "$PROXY_LOG")
omark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_check "pass-through TLS (b.test has no binding)" \
    tb_sandbox "${P[@]}" -o /dev/null https://b.test/pass
tb_assert_log --since "$pmark" "$PROXY_LOG" proxy.connect target=b.test:443 \
    auth=ok status=200
tb_assert_log --since "$omark" "$TB_ORIGIN_LOG" origin.request path=/pass \
    server.sni=b.test "client.addr=$PROXY_IP"

out=$(tb_sandbox "${C[@]}" -H 'Authorization: Bearer fake-key' \
    'https://a.test/v1/me')
tb_expect_match "terminated TLS with injection answers" '"path"' "$out"
tb_assert_log --since "$pmark" "$PROXY_LOG" proxy.connect target=a.test:443 \
    auth=ok status=200
tb_assert_log --since "$omark" "$TB_ORIGIN_LOG" origin.request path=/v1/me \
    "h.authorization=Bearer $SECRET" "client.addr=$PROXY_IP"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject binding=a-api host=a.test

tb_check "plain HTTP" tb_sandbox "${C[@]}" -o /dev/null http://b.test/plain
tb_assert_log --since "$pmark" "$PROXY_LOG" proxy.connect target=b.test:80 \
    auth=ok status=200
tb_assert_log --since "$omark" "$TB_ORIGIN_LOG" origin.request path=/plain \
    "client.addr=$PROXY_IP"

tb_sandbox dig +short +time=2 +tries=1 evil.test A >/dev/null
tb_check "the deny webhook arrives, through the proxy" tb_wait_log_line \
    --timeout 5 "$TB_ORIGIN_LOG" origin.request method=POST path=/deny-hook \
    'body~"hostname":"evil.test"' "client.addr=$PROXY_IP"
tb_assert_log --since "$pmark" "$PROXY_LOG" proxy.connect \
    "target=$TB_ORIGIN_C4:80" auth=ok status=200
tb_assert_no_log --since "$omark" "$TB_ORIGIN_LOG" origin.request \
    "client.addr=$TB_SBX_IP4"

out=$(tb_sandbox "${C[@]}" -w '\n%{http_code}' -H 'Authorization: Bearer fake' \
    https://rs.test/cc/hello)
tb_expect_match "an oauth2 binding: egressd's token request and the API call" \
    '^200$' "$(tail -n 1 <<<"$out")"
tb_assert_log --since "$pmark" "$PROXY_LOG" proxy.connect target=idp.test:443 \
    auth=ok status=200
tb_assert_log --since "$pmark" "$PROXY_LOG" proxy.connect target=rs.test:443 \
    auth=ok status=200
tb_expect_eq "... one token request, through the proxy" 1 \
    "$(grep -c '"grant": "client_credentials"' "$D/token.log")"

# --- the sandbox cannot use the proxy, though the policy allows its address --
pmark=$(tb_log_mark "$PROXY_LOG")
tb_check_fails "the sandbox's own CONNECT to the proxy is refused by nft" \
    tb_sandbox curl -sS --max-time 3 -o /dev/null \
    -x "http://$PROXY_IP:$PORT" -U "$USERPASS" https://c.test/
tb_assert_no_log --since "$pmark" "$PROXY_LOG" proxy.connect

# --- wrong credentials: fail closed, with the reason --------------------------
# (terminated: c.test, which no pooled origin connection serves yet; a
# tunnel opened before the change would be reused for up to 4 s)
printf 'Basic %s\n' "$(printf 'someone:else' | base64 -w0)" \
    >"$TB_DIR/net/proxy-accepts"
omark=$(tb_log_mark "$TB_ORIGIN_LOG")
pmark=$(tb_log_mark "$PROXY_LOG")
out=$(tb_sandbox "${C[@]}" -w '\n%{http_code}' http://b.test/wrong)
tb_expect_match "plain: 502 naming the proxy's refusal" \
    '^egressd: upstream_proxy: auth_refused \(status 407\)' "$out"
tb_expect_match "... status 502" '^502$' "$(tail -n 1 <<<"$out")"
out=$(tb_sandbox "${C[@]}" -w '\n%{http_code}' https://c.test/v1/wrong)
tb_expect_match "terminated: 502 naming the proxy's refusal" \
    '^egressd: upstream_proxy: auth_refused \(status 407\)' "$out"
tb_check_fails "pass-through: the connection is closed" \
    tb_sandbox "${P[@]}" -o /dev/null https://b.test/wrong
tb_assert_log --since "$pmark" "$PROXY_LOG" proxy.connect target=b.test:443 \
    auth=bad status=407
tb_assert_log "$TB_EGRESSD_LOG" proxy.upstream_proxy_failed name=b.test \
    reason=auth_refused status=407
tb_assert_log "$TB_EGRESSD_LOG" proxy.closed reason=upstream_proxy
tb_assert_no_log --since "$omark" "$TB_ORIGIN_LOG" origin.request

# --- the proxy down: fail closed, nothing direct ------------------------------
printf '%s\n' "$GOOD" >"$TB_DIR/net/proxy-accepts"
tb__kill_wait "$PROXY_PID"
omark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "${C[@]}" -w '\n%{http_code}' http://b.test/down)
tb_expect_match "proxy stopped, plain: 502 unreachable" \
    '^egressd: upstream_proxy: unreachable' "$out"
out=$(tb_sandbox "${C[@]}" -w '\n%{http_code}' -H 'Authorization: Bearer x' \
    https://c.test/v1/down)
tb_expect_match "proxy stopped, terminated: 502 unreachable" \
    '^egressd: upstream_proxy: unreachable' "$out"
tb_check_fails "proxy stopped, pass-through fails" \
    tb_sandbox "${P[@]}" -o /dev/null https://b.test/down
tb_assert_no_log --since "$omark" "$TB_ORIGIN_LOG" origin.request
tb_expect_match "no direct attempt at all: the origins' reset counter is 0" \
    'packets 0 bytes 0' "$(tb_net nft list counter inet tb_corp direct)"
# back, but refusing the token endpoint: egressd's own fetch fails closed
# with the proxy's answer, and never goes direct
start_proxy a.test="$TB_ORIGIN_A4" b.test="$TB_ORIGIN_B4" rs.test="$API"
tb_check "the proxy back: requests pass again" \
    tb_sandbox "${C[@]}" -o /dev/null http://b.test/back
out=$(tb_sandbox "${C[@]}" -H 'Authorization: Bearer x' https://rs.test/late/x)
tb_expect_match "the proxy refusing idp.test: a new oauth2 token fails, 502" \
    '^egressd: vault_token: token endpoint: upstream proxy: refused' "$out"
tb_expect_match "... and nothing went direct" 'packets 0 bytes 0' \
    "$(tb_net nft list counter inet tb_corp direct)"

# --- the credential is a secret ------------------------------------------------
printf '%s\n' "$GOOD" >"$TB_DIR/root/proxy-cred"
tb_expect_no_secret "the proxy credential is in no log of egressd's" \
    "$TB_DIR/root/proxy-cred" "$TB_EGRESSD_LOG" \
    "$TB_DIR/egressd/stdout" "$TB_DIR/egressd/stderr"
tb_finish
