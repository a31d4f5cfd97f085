#!/bin/bash
# vault_oauth2: auth type oauth2 (issue 38 item 2). egressd requests the
# access token itself from a fake OAuth2 server (client credentials and
# refresh token grants, 3 s tokens, refresh tokens rotated on every use)
# and injects it as Bearer; the sandbox sends a fake header and never
# holds the client secret, the refresh token or an access token. After
# expiry, 200 concurrent requests cause exactly one token request; a
# rotated refresh token is used next (the old one is refused by the
# server) and the operator is told it rotated; what the API echoes back
# (the token, the secret, the refresh token) is masked; the token
# endpoint failing answers 502 with the reason, never an unauthenticated
# request.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator reads /metrics; the API is closed to the sandbox

IDP=203.0.113.20
API=203.0.113.21
D=$TB_DIR/net/oauth2
mkdir -p "$D"
ip -n "$TB_NET" addr add "$IDP/32" dev lo
ip -n "$TB_NET" addr add "$API/32" dev lo
tb_vault_files unused
SECRET=$(tb_random_key)
REFRESH=rt0-$(tb_random_key)
printf '%s\n' "$SECRET" >"$TB_DIR/egressd/client-secret"
printf '%s\n' "$REFRESH" >"$TB_DIR/egressd/refresh-token"
chmod 600 "$TB_DIR/egressd/client-secret" "$TB_DIR/egressd/refresh-token"
cert=$(tb_pki_leaf oauth2 "DNS:idp.test,DNS:rs.test")
# a certificate for idp.test that no trusted CA issued (mode badcert)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$D/bad.key" -out "$D/bad.crt" -days 2 -subj /CN=idp.test \
    -addext subjectAltName=DNS:idp.test 2>"$D/err" || tb_die "bad cert"
ip netns exec "$TB_NET" "$TB_PY" "$TB_SERVERS_DIR/oauth2.py" --idp "$IDP" \
    --api "$API" --cert "$cert" --key "${cert%.crt}.key" \
    --client-id "agent client" --secret-file "$TB_DIR/egressd/client-secret" \
    --refresh-file "$TB_DIR/egressd/refresh-token" --expires 3 --dir "$D" \
    --bad-cert "$D/bad.crt" --bad-key "$D/bad.key" \
    --ready "$D/ready" >"$D/err" 2>&1 &
TB_PIDS+=("$!")
tb_wait_file "$D/ready" "$TB_SETUP_WAIT" ||
    tb_die "oauth2 server not ready: $(tail -n 5 "$D/err")"

pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: rs.test}
  - {action: allow, target: idp.test}
credentials:
  - {name: cs, source: {type: file, path: $TB_DIR/egressd/client-secret}}
  - {name: rt, source: {type: file, path: $TB_DIR/egressd/refresh-token}}
bindings:
  - name: cc
    match: {hosts: [rs.test], paths: ["/cc/*"], methods: [GET]}
    auth:
      type: oauth2
      grant: client_credentials
      tokenUrl: https://idp.test/token
      clientId: agent client
      clientSecret: cs
      scopes: [read, write]
  - name: rf
    match: {hosts: [rs.test], paths: ["/rf/*"], methods: [GET]}
    auth:
      type: oauth2
      grant: refresh_token
      tokenUrl: https://idp.test/token
      clientId: agent client
      clientSecret: cs
      refreshToken: rt
EOF2
)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$TB_DIR/state" --http-addr ":18080"
CA=$TB_DIR/state/ca-bundle.crt
SEEN=$TB_DIR/root/seen # everything the sandbox received
C=(curl -sS --max-time 15 --cacert "$CA" -H 'Authorization: Bearer fake')
ntok() { grep -c "\"grant\": \"$1\"" "$D/token.log" 2>/dev/null || echo 0; }
get() { tb_sandbox "${C[@]}" -D - -w '\n%{http_code}\n' "$1" | tee -a "$SEEN"; }

# --- client credentials: minted on the first request, injected --------------
out=$(get https://rs.test/cc/hello)
tb_expect_match "client_credentials: the API accepts egressd's token" \
    '^200$' "$(tail -1 <<<"$out")"
tb_expect_match "... the echoed Authorization is masked" \
    '"seen": "\*+"' "$out"
tb_expect_eq "... one token request" 1 "$(ntok client_credentials)"
tb_check "... with the scopes, client authenticated by Basic" \
    grep -q '"scope": "read write"' "$D/token.log"
tb_assert_log "$TB_EGRESSD_LOG" vault.oauth2_token binding=cc \
    grant=client_credentials outcome=minted expires_in=3
get https://rs.test/cc/again >/dev/null
tb_expect_eq "... cached: no second token request" 1 "$(ntok client_credentials)"
out=$(get https://rs.test/cc/leak)
tb_expect_match "an API echoing the secret, the token and the refresh token: 200" \
    '^200$' "$(tail -1 <<<"$out")"
tb_expect_match "... the client secret masked" '"secret": "\*{40}"' "$out"

# --- refresh token: the rotated one is used next, the operator told ----------
out=$(get https://rs.test/rf/one)
tb_expect_match "refresh_token grant: accepted" '^200$' "$(tail -1 <<<"$out")"
tb_assert_log "$TB_EGRESSD_LOG" vault.oauth2_refresh_rotated binding=rf \
    credential_name=rt
sleep 3.2 # past the 3 s token
out=$(get https://rs.test/rf/two)
tb_expect_match "... refreshed with the rotated token (the old one is refused)" \
    '^200$' "$(tail -1 <<<"$out")"
tb_expect_eq "... two refresh_token requests, none refused" \
    "2 0" "$(ntok refresh_token) $(grep -c '"status": 400' "$D/token.log")"
tb_assert_log "$TB_EGRESSD_LOG" vault.oauth2_token binding=rf \
    grant=refresh_token outcome=refreshed rotated=true
out=$(get https://rs.test/rf/leak)
tb_expect_match "an API echoing the rotated refresh token: masked" \
    '"refresh": "\*{35}"' "$out"

# --- 200 concurrent requests after expiry: one token request -----------------
tb_sbx_tool oauth_burst.py
burst=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/oauth_burst.py" rs.test /cc/burst \
    200 3.5 "$CA" "$TB_SBX_HOME/burst.out")
cat "$TB_SBX_HOME/burst.out" >>"$SEEN"
t0=$(sed -n 's/^burst_t0 //p' <<<"$burst")
tb_expect_eq "200 concurrent requests after expiry: all 200" "200 200" \
    "$(grep -v burst_t0 <<<"$burst")"
n=$("$TB_PY" -c 'import json, sys
print(sum(1 for l in open(sys.argv[1])
          if json.loads(l)["t"] >= float(sys.argv[2])))' "$D/token.log" "$t0")
tb_expect_eq "... exactly one token request for them" 1 "$n"
tb_assert_log "$TB_EGRESSD_LOG" vault.oauth2_token binding=cc outcome=refreshed

# --- the token endpoint failing: 502 with the reason, nothing sent -----------
sleep 3.2
api_before=$(wc -l <"$D/api.log")
echo 503 >"$D/mode"
out=$(get https://rs.test/cc/down)
tb_expect_match "token endpoint answering 503: the sandbox gets 502" \
    '^502$' "$(tail -1 <<<"$out")"
tb_expect_match "... saying why" \
    '^egressd: vault_token: token endpoint answered 503' "$out"
echo close >"$D/mode"
out=$(get https://rs.test/cc/down2)
tb_expect_match "token endpoint dropping the connection: 502 with the reason" \
    '^egressd: vault_token: token endpoint: ' "$out"
echo badjson >"$D/mode"
out=$(get https://rs.test/cc/down3)
tb_expect_match "token endpoint answering 200 with no JSON: 502 with the reason" \
    '^egressd: vault_token: token response: not one JSON object' "$out"
echo badcert >"$D/mode"
out=$(get https://rs.test/cc/down4)
tb_expect_match "token endpoint with a certificate no trusted CA issued: 502" \
    '^egressd: vault_token: token endpoint: certificate not verified' "$out"
tb_expect_eq "... the API never saw a request meanwhile" "$api_before" \
    "$(wc -l <"$D/api.log")"
tb_assert_log --min 4 --max 4 "$TB_EGRESSD_LOG" vault.oauth2_failed binding=cc \
    grant=client_credentials
echo ok >"$D/mode"
out=$(get https://rs.test/cc/back)
tb_expect_match "... back up: served again" '^200$' "$(tail -1 <<<"$out")"

# --- nothing secret reached the sandbox or the log ----------------------------
tb_expect_no_secret "the client secret is in nothing the sandbox received" \
    "$TB_DIR/egressd/client-secret" "$SEEN"
tb_expect_no_secret "... nor the operator's refresh token" \
    "$TB_DIR/egressd/refresh-token" "$SEEN"
i=0
while IFS= read -r v; do
	i=$((i + 1))
	printf '%s\n' "$v" >"$D/one"
	"$TB_PY" "$TB_LIB_DIR/secret_scan.py" "$D/one" "$SEEN" \
	    "$TB_EGRESSD_LOG" >/dev/null ||
	    tb_fail "issued token $i found in what the sandbox received or in the log"
done <"$D/issued"
tb_check "every token issued ($i) is absent from what the sandbox got and the log" \
    test "$i" -ge 4
m=$(tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics")
tb_expect_match "metrics: tokens by binding and outcome" \
    'egressd_vault_oauth2_tokens_total\{binding="cc",outcome="failed"\} 4' "$m"
tb_expect_match "... refreshed ones too" \
    'egressd_vault_oauth2_tokens_total\{binding="rf",outcome="refreshed"\} 1' \
    "$m"
tb_finish
