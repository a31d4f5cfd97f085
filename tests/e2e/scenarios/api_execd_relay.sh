#!/bin/bash
# api_execd_relay: the OpenSandbox server's own path to the Credential
# Vault (issue 39): from outside the pod to execd, whose /proxy/18080/
# relay connects to 127.0.0.1:18080 from inside it. A relay playing execd
# (tools/execd_relay.py, as a uid of its own) in the sandbox's namespace;
# the real JS SDK's egress stack (sdk/vault_relay.mjs: createEgressStack,
# nothing of the SDK replaced) in the node's namespace.
#   - Without --api-loopback-uid (today's default): the relay gets no
#     connection (502 to the SDK), egressd sees nothing.
#   - With --api-loopback-uid EXECD_UID: the SDK creates a vault through the
#     relay and the sandbox's next request carries the credential; the same
#     relay as another uid still gets nothing; EXECD_UID reaches the API on
#     127.0.0.1 and ::1 only, and still needs the token; the sandbox user
#     (direct, on every address, or through execd's port, which
#     --protect-port keeps from it) and root in the pod get nothing.
#   - --api-loopback-uid 0: said at start as a warning, and root in the pod
#     then reaches the API (what docs/security.md says it does); without a
#     --protect-port for execd's port, a second warning says so.
#   - Refused at start when the API does not listen on loopback.
# Fails without node 20 or the SDK: `./run deps`.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"

SDK_DIR=$(cd "$(dirname "$0")/../sdk" && pwd)
RELAY=$(cd "$(dirname "$0")/../tools" && pwd)/execd_relay.py
NODE=${EGRESSD_TEST_NODE:-$(command -v node)}
[ -x "$NODE" ] || tb_die "no node (${NODE:-none}): run ./run deps"
[ -d "$SDK_DIR/node_modules/@alibaba-group/opensandbox" ] ||
    tb_die "$SDK_DIR/node_modules missing: run ./run deps (npm ci there)"

tb_setup
tb_host_setup
# execd's uid and another one; neither is the sandbox user's.
EXECD_UID=64771
OTHER_UID=64772
EXECD_PORT=44772 # execd's default port
OTHER_PORT=44773
TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
STATE=$TB_DIR/state
EGRESSD_ARGS=(--policy "$pol" --proxy --trust-dir "$TB_DIR/trust"
    --state-dir "$STATE" --http-addr ":18080" --api-token-file "$TB_DIR/token")
S1=relay-secret-$RANDOM$RANDOM$RANDOM
tok=$TB_EGRESSD_TOKEN

# as_uid UID CMD...: CMD in the sandbox's namespace as UID (no
# capabilities), the way tb_sandbox runs the sandbox user.
as_uid()
{
	local uid=$1
	shift
	ip netns exec "$TB_SBX" setpriv --reuid="$uid" --regid="$uid" \
	    --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs \
	    -- env -i -C / PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"
}
# relay_start UID PORT: execd_relay.py as UID on 0.0.0.0:PORT; its JSON
# lines in $TB_DIR/relay-PORT.log.
relay_start()
{
	local log=$TB_DIR/relay-$2.log
	: >"$log"
	as_uid "$1" "$TB_PY" "$RELAY" 0.0.0.0 "$2" >"$log" 2>&1 &
	TB_PIDS+=("$!")
	tb_wait_line "$log" '"relay.ready"' ||
	    tb_die "relay on $2 not ready: $(cat "$log")"
}
# sdk PORT PHASE: vault_relay.mjs in the node's namespace against execd's
# relay on the pod IP; its output in $out (shown with '# '), rc in $rc.
sdk()
{
	local n=$TB_DIR/sdk-$1-$2.$SECONDS.out
	rc=0
	tb_host env -i PATH=/usr/bin:/bin VAULT_SDK_TOKEN="$tok" \
	    VAULT_SDK_VALUE="$S1" timeout 30 "$NODE" "$SDK_DIR/vault_relay.mjs" \
	    "http://$TB_SBX_HOST_IP4:$1/proxy/18080" a.test "$2" >"$n" 2>&1 ||
	    rc=$?
	out=$(cat "$n")
	sed 's/^/# /' "$n"
}
# api_code UID URL [CURL ARGS]: the HTTP status UID's curl got, 000 for
# no connection.
api_code()
{
	local uid=$1 url=$2
	shift 2
	as_uid "$uid" curl -sS -o /dev/null -w '%{http_code}' --max-time 3 \
	    "$@" "$url" 2>/dev/null
}

relay_start "$EXECD_UID" "$EXECD_PORT"
relay_start "$OTHER_UID" "$OTHER_PORT"

# --- without the flag: the relay gets nothing (contract §5.10) --------------
tb_start_egressd "${EGRESSD_ARGS[@]}"
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
rmark=$(tb_log_mark "$TB_DIR/relay-$EXECD_PORT.log")
sdk "$EXECD_PORT" get
tb_expect_match "off: the SDK gets execd's 502 through the relay" \
    '^get: SandboxApiException 502 ' "$out"
tb_assert_log --since "$rmark" "$TB_DIR/relay-$EXECD_PORT.log" relay.error \
    "uid=$EXECD_UID" error=ECONNREFUSED
tb_expect_eq "off: execd's uid gets no connection on 127.0.0.1" 000 \
    "$(api_code "$EXECD_UID" http://127.0.0.1:18080/healthz)"
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" api.request
tb_assert_no_log "$TB_EGRESSD_LOG" api.loopback_uid
tb_check_fails "off: no skuid rule in the ruleset" \
    sh -c "ip netns exec '$TB_SBX' nft list chain inet egressd filter_out |
        grep -q skuid"
tb_stop_egressd

# --- refused where execd's relay could not connect anyway -------------------
rc=0
timeout 20 ip netns exec "$TB_SBX" env -i "$EGRESSD_BIN" \
    --http-addr "$TB_SBX_HOST_IP4:18080" --api-loopback-uid "$EXECD_UID" \
    --api-token-file "$TB_DIR/token" --rules-dir "$TB_DIR/egressd/rules" \
    --dns-upstream "$TB_DNS1_IP4" >"$TB_DIR/refused.out" 2>&1 || rc=$?
tb_expect_eq "API on the pod IP only: egressd refuses to start" 1 "$rc"
tb_expect_match "and says why" \
    'api-loopback-uid: the TCP API .* does not take connections to 127\.0\.0\.1' \
    "$(cat "$TB_DIR/refused.out")"

# --- with --api-loopback-uid EXECD_UID -----------------------------------------
# execd's port protected too: the sandbox may not use execd's relay from
# inside the pod; the server reaches execd from outside (docs/security.md).
smark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_start_egressd "${EGRESSD_ARGS[@]}" --api-loopback-uid "$EXECD_UID" \
    --protect-port "$EXECD_PORT"
tb_assert_log --since "$smark" "$TB_EGRESSD_LOG" api.loopback_uid lvl=info \
    "uid=$EXECD_UID" port=18080
tb_assert_no_log --since "$smark" "$TB_EGRESSD_LOG" api.loopback_uid_unguarded
tb_expect_eq "two skuid rules (127.0.0.1 and ::1, the API port, tcp)" 2 \
    "$(tb_sandbox_root nft list chain inet egressd filter_out |
        grep -c "tcp dport 18080 meta skuid $EXECD_UID .*\"api_uid\" accept")"
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
sdk "$EXECD_PORT" create
tb_expect_eq "on: the SDK creates the vault through execd's relay" 0 "$rc"
tb_expect_match "revision 1, the credential" \
    '^ok   create: \{"revision":1,"credentials":\[\{"name":"relay-key","sourceType":"inline","revision":1\}\]' \
    "$out"
tb_expect_match "getBinding through the relay" \
    '^ok   getBinding: \{"name":"relay-bearer","revision":1,' "$out"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" api.request method=POST \
    path=/credential-vault status=201 'peer~^(::ffff:)?127\.0\.0\.1:'
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" vault.updated op=create \
    revision=1
omark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox curl -sS --max-time 8 -o /dev/null \
    --cacert "$STATE/ca-bundle.crt" -H 'Authorization: Bearer fake-key' \
    https://a.test/v1/relayed
tb_assert_log --since "$omark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/relayed "h.authorization=Bearer $S1"

# The same relay as another uid: no connection.
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
rmark=$(tb_log_mark "$TB_DIR/relay-$OTHER_PORT.log")
sdk "$OTHER_PORT" get
tb_expect_match "on: the relay as another uid still gets nothing (502)" \
    '^get: SandboxApiException 502 ' "$out"
tb_assert_log --since "$rmark" "$TB_DIR/relay-$OTHER_PORT.log" relay.error \
    "uid=$OTHER_UID" error=ECONNREFUSED
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" api.request

# EXECD_UID itself: loopback v4 and v6, the token still needed; not the
# pod's own address.
for a in 127.0.0.1 '[::1]'; do
	tb_expect_eq "execd's uid reaches /healthz on $a" 200 \
	    "$(api_code "$EXECD_UID" "http://$a:18080/healthz")"
	tb_expect_eq "and the vault on $a with the token" 200 \
	    "$(api_code "$EXECD_UID" "http://$a:18080/credential-vault" \
	        -H "OPENSANDBOX-EGRESS-AUTH: $tok")"
	tb_expect_eq "but not without it ($a)" 401 \
	    "$(api_code "$EXECD_UID" "http://$a:18080/credential-vault")"
	tb_expect_eq "another uid gets no connection on $a" 000 \
	    "$(api_code "$OTHER_UID" "http://$a:18080/healthz")"
done
tb_expect_eq "execd's uid gets none on the pod's address" 000 \
    "$(api_code "$EXECD_UID" "http://$TB_SBX_HOST_IP4:18080/healthz")"

# The sandbox user: not directly, not through execd's port, on no address.
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
rmark=$(tb_log_mark "$TB_DIR/relay-$EXECD_PORT.log")
for a in 127.0.0.1 '[::1]' "$TB_SBX_IP4" "$TB_SBX_HOST_IP4" \
    "[$TB_SBX_HOST_IP6]"; do
	tb_check_fails "sandbox user: no API at $a" \
	    tb_sandbox curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $tok" \
	    "http://$a:18080/credential-vault"
	tb_check_fails "sandbox user: no execd relay at $a" \
	    tb_sandbox curl -sS --max-time 3 -H "OPENSANDBOX-EGRESS-AUTH: $tok" \
	    "http://$a:$EXECD_PORT/proxy/18080/credential-vault"
done
tb_check_fails "root in the pod (uid 0, not named): no API on loopback" \
    tb_sandbox_root curl -sS --max-time 3 http://127.0.0.1:18080/healthz
tb_assert_no_log --since "$mark" "$TB_EGRESSD_LOG" api.request
tb_assert_no_log --since "$rmark" "$TB_DIR/relay-$EXECD_PORT.log" \
    relay.request
tb_expect_match "the api_uid counter counted execd's packets" \
    'packets [1-9]' \
    "$(tb_sandbox_root nft list counter inet egressd api_uid)"
tb_stop_egressd

# --- uid 0 only when named, and loudly -----------------------------------------
smark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_start_egressd "${EGRESSD_ARGS[@]}" --api-loopback-uid 0
tb_assert_log --since "$smark" "$TB_EGRESSD_LOG" api.loopback_uid lvl=warn \
    uid=0
tb_assert_log --since "$smark" "$TB_EGRESSD_LOG" api.loopback_uid_unguarded \
    lvl=warn
tb_expect_eq "with 0 named, root in the pod reaches the API on loopback" \
    200 "$(tb_sandbox_root curl -sS -o /dev/null -w '%{http_code}' \
        --max-time 3 http://127.0.0.1:18080/healthz)"
tb_check_fails "the sandbox user still does not" \
    tb_sandbox curl -sS --max-time 3 http://127.0.0.1:18080/healthz

# --- no value anywhere egressd writes or the SDK and the relays printed -----
for f in "$TB_EGRESSD_LOG" "$TB_DIR/egressd/stderr" "$TB_DIR/egressd/stdout" \
    "$pol" "$TB_DIR"/sdk-*.out "$TB_DIR"/relay-*.log; do
	tb_check_fails "no value in ${f##*/}" grep -qF -e "$S1" "$f"
done
tb_finish
