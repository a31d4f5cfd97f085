#!/bin/bash
# proxy_vault_sdk: the OpenSandbox JS SDK's Credential Vault adapter
# (EgressAdapter of @alibaba-group/opensandbox 0.1.11, tests/e2e/sdk) drives
# create, get, list, patch and delete against egressd unchanged (issue 18).
# Its one option set is rawHttp.fetch: a fetch over egressd's Unix API
# socket, the pod's write path (nft keeps root's unmarked sockets off the
# TCP port too). Between the SDK's phases the sandbox user fetches through
# the proxy: the origin sees the fake key before, the value the SDK added,
# the value it replaced, and the fake key once it deleted the vault. No
# value in anything egressd writes or the SDK printed. Fails without node
# 20 or later or without the SDK: `./run deps` installs both (the node in
# tests/.tools/node, which the build passes as EGRESSD_TEST_NODE).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"

SDK_DIR=$(cd "$(dirname "$0")/../sdk" && pwd)
NODE=${EGRESSD_TEST_NODE:-$(command -v node)}
[ -x "$NODE" ] || tb_die "no node (${NODE:-none}): run ./run deps"
node_major=$("$NODE" -p 'process.versions.node.split(".")[0]') ||
    tb_die "$NODE does not run"
[ "$node_major" -ge 20 ] ||
    tb_die "$NODE is $("$NODE" --version), older than 20 (the SDK's engines): run ./run deps"
[ -d "$SDK_DIR/node_modules/@alibaba-group/opensandbox" ] ||
    tb_die "$SDK_DIR/node_modules missing: run ./run deps (npm ci there)"

tb_setup
TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
EOF
)
STATE=$TB_DIR/state
SOCK=$TB_DIR/egressd/api.sock
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --http-addr ":18080" --api-socket "$SOCK" \
    --api-token-file "$TB_DIR/token"
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/trust-all.pem"
chmod 644 "$TB_DIR/trust-all.pem"
C=(curl -sS --max-time 8 --cacert "$TB_DIR/trust-all.pem")
S1=real-sdk-secret-one-$RANDOM$RANDOM
S2=real-sdk-secret-two-$RANDOM$RANDOM

# sdk PHASE [VALUE]: one phase of vault_sdk.mjs as root in the sandbox's
# namespace, the value in its environment (never argv); its output in
# $TB_DIR/sdk-PHASE.out and $out, shown with '# '; passes on exit 0.
sdk()
{
	local phase=$1 rc=0
	VAULT_SDK_VALUE=${2:-} tb_sandbox_root timeout 60 "$NODE" \
	    "$SDK_DIR/vault_sdk.mjs" "$SOCK" "$TB_EGRESSD_TOKEN" a.test "$phase" \
	    >"$TB_DIR/sdk-$phase.out" 2>&1 || rc=$?
	out=$(cat "$TB_DIR/sdk-$phase.out")
	sed 's/^/# /' "$TB_DIR/sdk-$phase.out"
	tb_expect_eq "the SDK's $phase phase exits 0" 0 "$rc"
}
# fetch PATH: the sandbox user's request to a.test with the fake key.
fetch()
{
	tb_sandbox "${C[@]}" -o /dev/null -H 'Authorization: Bearer fake-key' \
	    "https://a.test$1"
}
# origin_saw PATH AUTH: fetch PATH; the origin got Authorization: AUTH.
origin_saw()
{
	local mark
	mark=$(tb_log_mark "$TB_ORIGIN_LOG")
	fetch "$1"
	tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
	    "path=$1" "h.authorization=$2"
}
O='ok   ' # vault_sdk.mjs's prefix of a step as expected
B='"match":{"hosts":["a.test"],"schemes":["https"],"methods":["GET","POST","PUT","PATCH","DELETE"],"paths":["/v1/*"]},"auth":{"type":"bearer"}}'

origin_saw /v1/before 'Bearer fake-key'

# --- create empty, add a credential and a binding, read back -----------------
sdk add "$S1"
tb_expect_eq "create: revision 1, empty lists" \
    "$O"'create (empty): {"revision":1,"credentials":[],"bindings":[]}' \
    "$(grep -F 'create (empty)' <<<"$out")"
tb_expect_eq "listCredentials: none" "${O}listCredentials: []" \
    "$(grep -F 'listCredentials' <<<"$out")"
tb_expect_eq "patch add: revision 2, the credential and the binding at 2" \
    "$O"'patch add (inline credential, bearer binding): {"revision":2,"credentials":[{"name":"sdk-key","sourceType":"inline","revision":2}],"bindings":[{"name":"sdk-bearer","revision":2,'"$B"']}' \
    "$(grep -F 'patch add' <<<"$out")"
tb_expect_match "get: revision 2" '^ok   get: \{"revision":2,' "$out"
tb_expect_eq "getCredential: the metadata, no value" \
    "$O"'getCredential sdk-key: {"name":"sdk-key","sourceType":"inline","revision":2}' \
    "$(grep -F 'getCredential' <<<"$out")"
tb_expect_eq "getBinding: the defaults filled in" \
    "$O"'getBinding sdk-bearer: {"name":"sdk-bearer","revision":2,'"$B" \
    "$(grep -F 'getBinding' <<<"$out")"
tb_expect_eq "listBindings: the one binding" \
    "$O"'listBindings: [{"name":"sdk-bearer","revision":2,'"$B"']' \
    "$(grep -F 'listBindings' <<<"$out")"
origin_saw /v1/added "Bearer $S1"
origin_saw /other 'Bearer fake-key'

# --- a stale revision, then replace: the old value is gone at once ------------
sdk replace "$S2"
tb_expect_eq "patch with a stale expectedRevision: SandboxApiException 409" \
    "${O}patch with a stale expectedRevision: SandboxApiException 409 \"expectedRevision 1 does not match current revision 2\"" \
    "$(grep -F 'stale' <<<"$out")"
tb_expect_match "patch replace: revision 3, the credential at 3, the binding at 2" \
    '^ok   patch replace the value: \{"revision":3,"credentials":\[\{"name":"sdk-key","sourceType":"inline","revision":3\}\],"bindings":\[\{"name":"sdk-bearer","revision":2,' \
    "$out"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
origin_saw /v1/replaced "Bearer $S2"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    "h.authorization=Bearer $S1"

# --- delete: the vault is gone, the fake key goes through ------------------------
sdk delete
tb_expect_eq "delete: the SDK returns nothing" "${O}delete: undefined" \
    "$(grep -F 'ok   delete' <<<"$out")"
tb_expect_eq "get after delete: SandboxApiException 404" \
    "${O}get after delete: SandboxApiException 404 \"credential vault not found\"" \
    "$(grep -F 'get after' <<<"$out")"
tb_expect_match "getCredential after delete: 404 too" \
    '^ok   getCredential sdk-key after delete: SandboxApiException 404 ' "$out"
origin_saw /v1/deleted 'Bearer fake-key'
tb_assert_log "$TB_EGRESSD_LOG" vault.updated op=create revision=1
tb_assert_log "$TB_EGRESSD_LOG" vault.updated op=patch revision=3
tb_assert_log "$TB_EGRESSD_LOG" vault.updated op=delete

# --- no value anywhere egressd writes or the SDK printed ---------------------------
for f in "$TB_EGRESSD_LOG" "$TB_DIR/egressd/stderr" "$TB_DIR/egressd/stdout" \
    "$pol" "$TB_DIR"/sdk-*.out; do
	tb_check_fails "no value in ${f##*/}" grep -qF -e "$S1" -e "$S2" "$f"
done
tb_check_fails "no value in the state dir" grep -rqF -e "$S1" -e "$S2" "$STATE"
tb_finish
