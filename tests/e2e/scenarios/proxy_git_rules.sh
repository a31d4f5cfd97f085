#!/bin/bash
# proxy_git_rules: "clone but never push" (issue 37) with real git as the
# sandbox user. A git smart-HTTP origin (git http-backend behind
# servers/git_http.py, HTTPS) serves github.test, whose repositories take
# pushes from anyone (http.receivepack true). The policy is the issue's
# two github rules: GET /*/*/info/refs and POST /*/*/git-upload-pack.
# git clone works through egressd's termination; git push of a new commit
# fails showing the 403 and its reason, and the origin never receives a
# git-receive-pack POST (the GET of info/refs?service=git-receive-pack
# before it is allowed: the query is not part of the path). The control:
# a third rule allows pushes under /scratch/, and a push there lands, so
# it is the rules, not the origin, that refuse.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

# github.test lives on an address of its own in the internet namespace,
# answered by a second resolver (the shared zone file stays as it is).
GH4=203.0.113.20
GH6=2001:db8:2::20
tb_net ip addr add "$GH4/32" dev lo || tb_die "address $GH4"
tb_net ip addr add "$GH6/128" dev lo nodad || tb_die "address $GH6"
tb_dns_start dns2 "$TB_DNS2_IP4" "$TB_DNS2_IP6" -- \
    "--host-record=github.test,$GH4,$GH6"
tb_pki_leaf github "DNS:github.test,IP:$GH4,IP:$GH6" >/dev/null

# The repositories (root-only: the sandbox sees them through git alone).
GROOT=$TB_DIR/net/git
GLOG=$TB_DIR/net/git.log
G=(git -c user.name=origin -c user.email=origin@github.test
    -c init.defaultBranch=main -c safe.directory='*')
mkdir -p "$GROOT/acme" "$GROOT/scratch" "$TB_DIR/root/seed"
{
	"${G[@]}" init -q "$TB_DIR/root/seed" &&
	    echo "widget v1" >"$TB_DIR/root/seed/README" &&
	    "${G[@]}" -C "$TB_DIR/root/seed" add README &&
	    "${G[@]}" -C "$TB_DIR/root/seed" commit -qm v1 &&
	    for r in acme/widget scratch/pad; do
		"${G[@]}" clone -q --bare "$TB_DIR/root/seed" "$GROOT/$r.git" &&
		    "${G[@]}" -C "$GROOT/$r.git" config http.receivepack true ||
		    exit 1
	    done
} >"$TB_OUT" 2>&1 || tb_die "git repositories: $(cat "$TB_OUT")"
HEAD0=$("${G[@]}" -C "$GROOT/acme/widget.git" rev-parse main)
: >"$GLOG"
tb_net_bg "$TB_DIR/net/git.err" "$TB_PY" "$TB_SERVERS_DIR/git_http.py" \
    --root "$GROOT" --log "$GLOG" --ready "$TB_DIR/net/git.ready" \
    --cert "$TB_DIR/pki/github.crt" --key "$TB_DIR/pki/github.key" \
    --listen "$GH4:443" --listen "[$GH6]:443"
tb_wait_file "$TB_DIR/net/git.ready" "$TB_SETUP_WAIT" ||
    tb_die "git origin not ready: $(tail -n 5 "$TB_DIR/net/git.err")"

mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: github.test, methods: [GET], paths: ["/*/*/info/refs"]}
  - {action: allow, target: github.test, methods: [POST], paths: ["/*/*/git-upload-pack"]}
  - {action: allow, target: github.test, methods: [POST], paths: ["/scratch/*/git-receive-pack"]}
EOF
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --dns-upstream "$TB_DNS2_IP4"
# gitx ARGS...: git as the sandbox user, trusting egressd's bundle only,
# never prompting, bounded; GIT_TRACE_CURL shows the response heads
gitx()
{
	tb_sandbox env GIT_SSL_CAINFO="$STATE/ca-bundle.crt" \
	    GIT_TERMINAL_PROMPT=0 GIT_CONFIG_NOSYSTEM=1 \
	    timeout 20 git -c user.name=agent -c user.email=agent@sbx.test \
	    -c init.defaultBranch=main "$@"
}

# --- clone: allowed --------------------------------------------------------------
tb_check "git clone https://github.test/acme/widget.git works" \
    gitx clone -q https://github.test/acme/widget.git widget
tb_expect_eq "... with the origin's content" "widget v1" \
    "$(tb_sandbox cat widget/README)"
tb_assert_log "$GLOG" git.request method=GET path=/acme/widget.git/info/refs \
    service=git-upload-pack
tb_assert_log "$GLOG" git.request method=POST \
    path=/acme/widget.git/git-upload-pack
tb_assert_log "$GLOG" git.request sni=github.test

# --- push: refused by the rules ------------------------------------------------------
mark=$(tb_log_mark "$GLOG")
emark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_check "a new commit in the clone" tb_sandbox sh -c \
    'echo "exfiltrated" >widget/LOOT && cd widget && git add LOOT &&
    git -c user.name=agent -c user.email=agent@sbx.test commit -qm loot'
tb_sandbox env GIT_TRACE_CURL=1 GIT_TRACE_CURL_NO_DATA=1 \
    GIT_SSL_CAINFO="$STATE/ca-bundle.crt" GIT_TERMINAL_PROMPT=0 \
    timeout 20 git -C widget push origin main >"$TB_DIR/root/push.out" 2>&1
rc=$?
tb_expect_match "git push is refused (exit $rc)" '^[1-9]' "$rc"
tb_expect_match "git shows the 403" '(HTTP|error:) 403' \
    "$(cat "$TB_DIR/root/push.out")"
tb_expect_match "... and the reason egressd gave (X-Egress-Denied: path)" \
    '<= Recv header: X-Egress-Denied: path' "$(tr -d '\r' <"$TB_DIR/root/push.out")"
tb_assert_log --since "$mark" "$GLOG" git.request method=GET \
    path=/acme/widget.git/info/refs service=git-receive-pack
tb_assert_no_log "$GLOG" git.request method=POST 'path~^/acme/.*receive-pack'
tb_expect_eq "the origin's branch did not move" "$HEAD0" \
    "$("${G[@]}" -C "$GROOT/acme/widget.git" rev-parse main)"
tb_assert_log --since "$emark" "$TB_EGRESSD_LOG" proxy.denied reason=path \
    host=github.test method=POST path=/acme/widget.git/git-receive-pack
tb_assert_no_log --since "$emark" "$TB_EGRESSD_LOG" proxy.denied \
    method=GET host=github.test

# --- the control: the same origin takes a push where the rules allow it ------------
tb_check "git clone of scratch/pad" \
    gitx clone -q https://github.test/scratch/pad.git pad
tb_check "a commit there" tb_sandbox sh -c \
    'echo note >pad/NOTE && cd pad && git add NOTE &&
    git -c user.name=agent -c user.email=agent@sbx.test commit -qm note'
tb_check "git push to scratch/pad lands (the origin takes pushes)" \
    gitx -C pad push -q origin main
tb_assert_log "$GLOG" git.request method=POST \
    path=/scratch/pad.git/git-receive-pack
tb_expect_eq "... the origin's branch moved to the pushed commit" \
    "$(tb_sandbox git -C pad rev-parse HEAD)" \
    "$("${G[@]}" -C "$GROOT/scratch/pad.git" rev-parse main)"

# the denied push again, after the allowed one (no state carried over)
mark=$(tb_log_mark "$GLOG")
tb_check_fails "git push to acme/widget is still refused" \
    gitx -C widget push -q origin main
tb_assert_no_log --since "$mark" "$GLOG" git.request method=POST \
    'path~receive-pack'
tb_finish
