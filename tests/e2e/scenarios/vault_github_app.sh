#!/bin/bash
# vault_github_app: auth type githubApp (issue 38 item 3). A fake GitHub
# (servers/github.py: the REST API with the App installation-token
# endpoint, and git smart HTTP over git http-backend) verifies the App's
# JWT with the public half of a key pair made for this run; egressd holds
# the private key, signs the JWT, exchanges it for an installation token
# (narrowed to a repository and a permission) and injects it: Bearer for
# the REST API, Basic x-access-token for git. As the sandbox user, curl
# and `git clone` both succeed with a fake or no credential; the key, the
# JWTs and the tokens never reach the sandbox (nor the log); after
# expiry, 100 concurrent requests cause exactly one token request; the
# token endpoint failing answers 502 with the reason.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator reads /metrics; the API is closed to the sandbox

API=203.0.113.24
GIT=203.0.113.25
D=$TB_DIR/net/github
mkdir -p "$D/git/o"
tb_net ip addr add "$API/32" dev lo || tb_die "address $API"
tb_net ip addr add "$GIT/32" dev lo || tb_die "address $GIT"
tb_dns_start dns2 "$TB_DNS2_IP4" "$TB_DNS2_IP6" -- \
    "--host-record=api.gh.test,$API" "--host-record=gh.test,$GIT"
tb_vault_files unused
KEY=$TB_DIR/egressd/app.pem
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$KEY" \
    2>"$D/err" && chmod 600 "$KEY" &&
    openssl pkey -in "$KEY" -pubout -out "$D/app.pub" 2>"$D/err" ||
    tb_die "App key: $(cat "$D/err")"
cert=$(tb_pki_leaf github "DNS:api.gh.test,DNS:gh.test")

# one repository, root's (the sandbox sees it through git alone)
G=(git -c user.name=origin -c user.email=origin@gh.test
    -c init.defaultBranch=main -c safe.directory='*')
{
	"${G[@]}" init -q "$TB_DIR/root/seed" &&
	    echo "hello from the fake github" >"$TB_DIR/root/seed/README" &&
	    "${G[@]}" -C "$TB_DIR/root/seed" add README &&
	    "${G[@]}" -C "$TB_DIR/root/seed" commit -qm v1 &&
	    "${G[@]}" clone -q --bare "$TB_DIR/root/seed" "$D/git/o/r.git"
} >"$D/err" 2>&1 || tb_die "git repository: $(cat "$D/err")"

tb_net_bg "$D/server.err" "$TB_PY" "$TB_SERVERS_DIR/github.py" \
    --api "$API" --git "$GIT" --cert "$cert" --key "${cert%.crt}.key" \
    --pubkey "$D/app.pub" --app-id 4242 --installation 99 \
    --root "$D/git" --expires 4 --dir "$D" --ready "$D/ready"
tb_wait_file "$D/ready" "$TB_SETUP_WAIT" ||
    tb_die "github server not ready: $(tail -n 5 "$D/server.err")"

# positive controls: the fake refuses what egressd must supply
tb_expect_match "control: git without a token is refused by the fake" '^401$' \
    "$(tb_net curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
        --cacert "$TB_CA_CERT" --resolve "gh.test:443:$GIT" \
        'https://gh.test/o/r.git/info/refs?service=git-upload-pack')"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
    -out "$D/other.pem" 2>/dev/null
forged=$("$TB_PY" - "$D/other.pem" <<'PY'
import base64, json, subprocess, sys, time
b = lambda x: base64.urlsafe_b64encode(x).rstrip(b"=").decode()
now = int(time.time())
si = b(b'{"alg":"RS256","typ":"JWT"}') + "." + b(json.dumps(
    {"iat": now - 60, "exp": now + 540, "iss": "4242"}).encode())
sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", sys.argv[1]],
                     input=si.encode(), capture_output=True).stdout
print(si + "." + b(sig))
PY
)
tb_expect_match "control: a JWT signed with another key is refused" '^401$' \
    "$(tb_net curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
        --cacert "$TB_CA_CERT" --resolve "api.gh.test:443:$API" \
        -X POST -H "Authorization: Bearer $forged" \
        https://api.gh.test/app/installations/99/access_tokens)"

git0=$(wc -l <"$D/git.log")
jwt0=$(grep -c '"status": 401' "$D/token.log")

pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: api.gh.test}
  - {action: allow, target: gh.test}
credentials:
  - {name: app-key, source: {type: file, path: $KEY}}
bindings:
  - name: gh
    match: {hosts: [api.gh.test, gh.test], methods: [GET, POST]}
    auth:
      type: githubApp
      appId: 4242
      installationId: 99
      privateKey: app-key
      apiUrl: https://api.gh.test
      repositories: [r]
      permissions: {contents: read}
EOF2
)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$TB_DIR/state" --http-addr ":18080" \
    --dns-upstream "$TB_DNS2_IP4"
CA=$TB_DIR/state/ca-bundle.crt
SEEN=$TB_DIR/root/seen # everything the sandbox received
C=(curl -sS --max-time 15 --cacert "$CA" -H 'Authorization: Bearer fake')
ntok() { grep -c "\"status\": $1" "$D/token.log" 2>/dev/null || echo 0; }
get() { tb_sandbox "${C[@]}" -D - -w '\n%{http_code}\n' "$1" | tee -a "$SEEN"; }

# --- the REST API: a token minted, injected as Bearer -----------------------
out=$(get https://api.gh.test/installation/repositories)
tb_expect_match "REST: the API accepts egressd's installation token" \
    '^200$' "$(tail -1 <<<"$out")"
tb_expect_match "... the echoed Authorization is masked" \
    '"seen": "\*+"' "$out"
tb_expect_eq "... one token request, the JWT accepted" "1 0" \
    "$(ntok 201) $(($(ntok 401) - jwt0))"
tb_check "... narrowed to the repository and the permission, GitHub's Accept" \
    grep -q '"accept": "application/vnd.github+json", "repositories": \["r"\], "permissions": {"contents": "read"}' \
    "$D/token.log"
tb_assert_log "$TB_EGRESSD_LOG" vault.github_token binding=gh \
    grant=githubApp outcome=minted
get https://api.gh.test/user >/dev/null
tb_expect_eq "... cached: no second token request" 1 "$(ntok 201)"

# --- git clone: the same token in git's Basic form ---------------------------
tb_check "git clone https://gh.test/o/r.git works (no credential in the sandbox)" \
    tb_sandbox env GIT_SSL_CAINFO="$CA" GIT_TERMINAL_PROMPT=0 \
    GIT_CONFIG_NOSYSTEM=1 GIT_TRACE_CURL="$TB_SBX_HOME/git.trace" \
    GIT_TRACE_REDACT=0 timeout 20 git clone -q https://gh.test/o/r.git \
    "$TB_SBX_HOME/r"
cat "$TB_SBX_HOME/git.trace" >>"$SEEN" 2>/dev/null
tb_expect_eq "... the working tree is the origin's" \
    "hello from the fake github" "$(cat "$TB_SBX_HOME/r/README" 2>/dev/null)"
tb_check "... every git request carried Basic, none was refused" \
    "$TB_PY" -c 'import json, sys
l = [json.loads(x) for x in open(sys.argv[1])][int(sys.argv[2]):]
sys.exit(not (len(l) >= 2 and all(r["auth"] == "Basic" and r["status"] == 0
                                  for r in l)))' "$D/git.log" "$git0"

# --- 100 concurrent requests after expiry: one token request -----------------
tb_sbx_tool oauth_burst.py
burst=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/oauth_burst.py" api.gh.test \
    /burst 100 4.5 "$CA" "$TB_SBX_HOME/burst.out")
cat "$TB_SBX_HOME/burst.out" >>"$SEEN"
t0=$(sed -n 's/^burst_t0 //p' <<<"$burst")
tb_expect_eq "100 concurrent requests after expiry: all 200" "200 100" \
    "$(grep -v burst_t0 <<<"$burst")"
n=$("$TB_PY" -c 'import json, sys
print(sum(1 for l in open(sys.argv[1])
          if json.loads(l)["t"] >= float(sys.argv[2])))' "$D/token.log" "$t0")
tb_expect_eq "... exactly one token request for them" 1 "$n"
tb_assert_log "$TB_EGRESSD_LOG" vault.github_token binding=gh outcome=refreshed

# --- the token endpoint failing: 502 with the reason, nothing sent -----------
sleep 4.2
api_before=$(grep -c '"path": "/down' "$D/api.log")
echo 503 >"$D/mode"
out=$(get https://api.gh.test/down)
tb_expect_match "token endpoint answering 503: the sandbox gets 502" \
    '^502$' "$(tail -1 <<<"$out")"
tb_expect_match "... saying why" \
    '^egressd: vault_token: token endpoint answered 503' "$out"
echo close >"$D/mode"
out=$(get https://api.gh.test/down2)
tb_expect_match "token endpoint dropping the connection: 502 with the reason" \
    '^egressd: vault_token: token endpoint: ' "$out"
tb_expect_eq "... the API never saw those requests" "$api_before" \
    "$(grep -c '"path": "/down' "$D/api.log")"
tb_assert_log --min 2 --max 2 "$TB_EGRESSD_LOG" vault.github_failed \
    binding=gh grant=githubApp
echo ok >"$D/mode"
out=$(get https://api.gh.test/back)
tb_expect_match "... back up: served again" '^200$' "$(tail -1 <<<"$out")"

# --- nothing secret reached the sandbox or the log ----------------------------
# the key: each line of its PEM body (64 base64 characters), every form
grep -v -- '-----' "$KEY" | sed -n '1p;5p;10p;15p;20p;$p' >"$D/keylines"
i=0
while IFS= read -r v; do
	i=$((i + 1))
	printf '%s\n' "$v" >"$D/one"
	"$TB_PY" "$TB_LIB_DIR/secret_scan.py" "$D/one" "$SEEN" \
	    "$TB_EGRESSD_LOG" >/dev/null ||
	    tb_fail "private key line $i found in what the sandbox received or in the log"
done <"$D/keylines"
tb_check "the private key ($i lines sampled) is absent from what the sandbox got and the log" \
    test "$i" -ge 6
for f in issued jwts; do
	i=0
	while IFS= read -r v; do
		i=$((i + 1))
		printf '%s\n' "$v" >"$D/one"
		"$TB_PY" "$TB_LIB_DIR/secret_scan.py" "$D/one" "$SEEN" \
		    "$TB_EGRESSD_LOG" >/dev/null ||
		    tb_fail "$f value $i found in what the sandbox received or in the log"
	done <"$D/$f"
	tb_check "every one of the $f ($i) is absent from what the sandbox got and the log" \
	    test "$i" -ge 3
done
m=$(tb_host curl -sS --max-time 5 "http://$TB_SBX_HOST_IP4:18080/metrics")
tb_expect_match "metrics: installation tokens by binding and outcome" \
    'egressd_vault_oauth2_tokens_total\{binding="gh",outcome="failed"\} 2' "$m"
tb_expect_match "... refreshed ones too" \
    'egressd_vault_oauth2_tokens_total\{binding="gh",outcome="refreshed"\} [2-9]' \
    "$m"
tb_finish
