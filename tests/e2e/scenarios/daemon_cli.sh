#!/bin/bash
# daemon_cli: the command line an operator meets first. --check reports every
# error of a policy file with FILE:LINE:COL, or "ok: N rules, M bindings";
# bad flags and environment values are one clear line and a non-zero exit.
# Needs no privileges and no namespaces.
set -u -o pipefail
BIN=${EGRESSD_BIN:?EGRESSD_BIN not set}
umask 022 # egressd refuses group/world-writable policy files
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; printf '    %s\n' "${2:-}"; }
# expect DESC WANT_RC ERE -- CMD...: exit status and (stdout+stderr) match.
expect() {
	local desc=$1 want=$2 re=$3 out rc
	shift 4
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$want" ]; then
		bad "$desc" "exit $rc, want $want: $out"
	elif ! grep -qE -- "$re" <<<"$out"; then
		bad "$desc" "output lacks /$re/: $out"
	else
		ok "$desc"
	fi
}
# one_line DESC ERE CMD...: fails with exactly one line of output, which
# starts "egressd: " and names the culprit (matches ERE): no output at all
# is not one clear line.
one_line() {
	local desc=$1 re=$2 out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
	    grep -qE -- "^egressd: .*($re)" <<<"$out"; then
		ok "$desc"
	else
		bad "$desc" "exit $rc, want one line naming /$re/, output: '$out'"
	fi
}

cat >"$dir/good.yaml" <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: pypi.org}
  - {action: allow, target: "*.pythonhosted.org"}
  - {action: deny, target: 203.0.113.0/24}
EOF
cat >"$dir/bad.yaml" <<'EOF'
defaultAction: maybe
egress:
  - {action: allow, target: "exa mple.com"}
  - {action: allow, target: pypi.org, colour: red}
  - {action: allow, target: "a.*.com"}
EOF
printf '{"defaultAction":"deny","egress":[{"action":"allow","target":"x.test"}]}' \
    >"$dir/good.json"
printf '{"defaultAction":"deny","egress":[{"action":"allow","target":}]}' \
    >"$dir/broken.json"
mkdir -p "$dir/rules"

expect "--check on a good file" 0 '^ok: 3 rules, 0 bindings$' -- \
    "$BIN" --check --policy "$dir/good.yaml" --rules-dir "$dir/rules"
expect "--check on a JSON file" 0 '^ok: 1 rules, 0 bindings$' -- \
    "$BIN" --check --policy "$dir/good.json" --rules-dir "$dir/rules"
expect "--check reports the bad defaultAction with line and column" 1 \
    'bad.yaml:1:[0-9]+: .*maybe' -- \
    "$BIN" --check --policy "$dir/bad.yaml" --rules-dir "$dir/rules"
expect "... the bad name on line 3" 1 'bad.yaml:3:[0-9]+: ' -- \
    "$BIN" --check --policy "$dir/bad.yaml" --rules-dir "$dir/rules"
expect "... the unknown key on line 4" 1 'bad.yaml:4:[0-9]+: .*colour' -- \
    "$BIN" --check --policy "$dir/bad.yaml" --rules-dir "$dir/rules"
expect "... the inner wildcard on line 5" 1 'bad.yaml:5:[0-9]+: ' -- \
    "$BIN" --check --policy "$dir/bad.yaml" --rules-dir "$dir/rules"
expect "--check on broken JSON names line and column" 1 \
    'broken.json:1:[0-9]+: ' -- \
    "$BIN" --check --policy "$dir/broken.json" --rules-dir "$dir/rules"
printf 'pypi.org\n' >"$dir/rules/deny.always"
expect "--check counts always-rules" 0 '^ok: 4 rules, 0 bindings$' -- \
    "$BIN" --check --policy "$dir/good.yaml" --rules-dir "$dir/rules"
printf 'not a target!\n' >"$dir/rules/allow.always"
expect "--check reports a bad always-rule with its line" 1 \
    'allow.always:1:[0-9]+: ' -- \
    "$BIN" --check --policy "$dir/good.yaml" --rules-dir "$dir/rules"
rm -f "$dir/rules/allow.always"
expect "--check with OPENSANDBOX_EGRESS_RULES" 0 '^ok: 1 rules' -- \
    env OPENSANDBOX_EGRESS_RULES='{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"}]}' \
    "$BIN" --check --rules-dir "$dir/empty"
cat >"$dir/cred.yaml" <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: api.example.com}
credentials:
  - name: k
    source: {type: inline, value: "sk-live-not-for-logs"}
bindings:
  - name: b
    match: {hosts: [api.example.com]}
    auth: {type: bearer, credential: k}
EOF
expect "an operator's inline credential loads (+1 always-rule)" 0 \
    '^ok: 2 rules, 1 bindings$' -- \
    "$BIN" --check --policy "$dir/cred.yaml" --rules-dir "$dir/rules"
out=$("$BIN" --check --policy "$dir/cred.yaml" --rules-dir "$dir/rules" 2>&1)
if grep -q 'sk-live-not-for-logs' <<<"$out"; then
	bad "--check never shows the secret" "$out"
else
	ok "--check never shows the secret"
fi
sed -i 's|source: {type: inline, value: "sk-live-not-for-logs"}|source: {type: file, path: /run/secrets/k}|' \
    "$dir/cred.yaml"
expect "a file credential with a covered binding is fine (+1 always-rule)" 0 \
    '^ok: 2 rules, 1 bindings$' -- \
    "$BIN" --check --policy "$dir/cred.yaml" --rules-dir "$dir/rules"
chmod 0666 "$dir/good.yaml"
expect "a policy file others may write is refused" 1 \
    'good.yaml: writable by group or others \(mode 0666\)' -- \
    "$BIN" --check --policy "$dir/good.yaml" --rules-dir "$dir/rules"
chmod 0644 "$dir/good.yaml"
chmod 0664 "$dir/rules/deny.always"
expect "so is a group-writable always-rule" 1 \
    'deny.always: writable by group or others' -- \
    "$BIN" --check --policy "$dir/good.yaml" --rules-dir "$dir/rules"
chmod 0644 "$dir/rules/deny.always"
chown 65534 "$dir/good.yaml"
expect "and a policy file owned by another user" 1 \
    'good.yaml: owned by uid 65534' -- \
    "$BIN" --check --policy "$dir/good.yaml" --rules-dir "$dir/rules"
chown 0 "$dir/good.yaml"
expect "--version" 0 '^egressd [0-9]+\.[0-9]+\.[0-9]+$' -- "$BIN" --version
expect "--help" 0 'usage: egressd' -- "$BIN" --help

one_line "unknown flag" '--frobnicate' "$BIN" --frobnicate
one_line "flag without its value" '--dns-port' "$BIN" --dns-port
one_line "bad mode" '--mode.*nft-only' "$BIN" --mode nft-only --check
one_line "hostname as DNS upstream" 'DNS_UPSTREAM.*dns\.google' env \
    OPENSANDBOX_EGRESS_DNS_UPSTREAM=dns.google "$BIN" --check
one_line "timeout out of range" 'DNS_UPSTREAM_TIMEOUT.*500' env \
    OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT=500 "$BIN" --check
one_line "bad boolean" 'BLOCK_DOH_443.*perhaps' \
    env OPENSANDBOX_EGRESS_BLOCK_DOH_443=perhaps "$BIN" --check
one_line "bad API address" 'HTTP_ADDR.*somewhere' \
    env OPENSANDBOX_EGRESS_HTTP_ADDR=somewhere "$BIN" --check
one_line "missing token file" "$dir/nope" \
    "$BIN" --api-token-file "$dir/nope" --check
expect "bad values exit 2 and name the variable" 2 \
    'OPENSANDBOX_EGRESS_MAX_RULES' -- \
    env OPENSANDBOX_EGRESS_MAX_RULES=lots "$BIN" --check
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
