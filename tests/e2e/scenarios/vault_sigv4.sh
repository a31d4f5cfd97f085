#!/bin/bash
# vault_sigv4 (issue 38 item 1): auth.type awsSigV4. boto3 and botocore in
# the sandbox hold a FAKE key pair and call AWS by its real host names,
# which the test DNS maps to a fake AWS endpoint (servers/aws.py, on a
# documentation address) that verifies SigV4 with the REAL key through
# botocore's own signer. egressd holds the real key id, secret key and
# session token (file sources) and re-signs:
# - S3 PUT and GET of an object (virtual-host style, a key with a space
#   and parentheses: S3's canonical path), a Bedrock-style JSON POST (a
#   model id with an escaped ':': signed as AWS encodes it twice):
#   accepted, every request the origin got carries the real key id and
#   token and a payload hash of the body;
# - a body over the 1 MiB signing bound: UNSIGNED-PAYLOAD to S3 over TLS,
#   refused (413) to Bedrock rather than sent unsigned;
# - the sandbox's fake key id and fake token never reach the origin;
# - a presigned URL the sandbox made is refused by egressd (403), and
#   the origin never sees it;
# - the origin echoing the real key id: redacted;
# - the binding removed (SIGHUP): the origin sees the sandbox's own
#   signature and refuses it (SignatureDoesNotMatch).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
/usr/bin/python3 -c 'import boto3' 2>/dev/null ||
    tb_die "python3-boto3 missing: ./run deps installs it"
tb_setup

AWS_IP=203.0.113.40 # the fake AWS endpoint, on net's loopback
BUCKET=egressd-e2e-bucket
REAL_ID=AKIA$("$TB_PY" -c 'import secrets; print(secrets.token_hex(8).upper())')
REAL_SECRET=$(tb_random_key)/$(tb_random_key)
REAL_TOKEN=tok$(tb_random_key)+$(tb_random_key)==
for f in aws-id:"$REAL_ID" aws-secret:"$REAL_SECRET" aws-token:"$REAL_TOKEN"; do
	printf '%s\n' "${f#*:}" >"$TB_DIR/egressd/${f%%:*}"
	cp "$TB_DIR/egressd/${f%%:*}" "$TB_DIR/net/${f%%:*}"
	chmod 600 "$TB_DIR/egressd/${f%%:*}" "$TB_DIR/net/${f%%:*}"
done
tb_vault_files unused

# --- the fake AWS endpoint and its names ------------------------------------
ip -n "$TB_NET" addr add "$AWS_IP/32" dev lo || tb_die "address $AWS_IP"
NAMES="s3.us-east-1.amazonaws.com $BUCKET.s3.us-east-1.amazonaws.com"
NAMES="$NAMES bedrock-runtime.us-east-1.amazonaws.com"
san=$(printf 'DNS:%s,' $NAMES)
tb_pki_leaf aws "${san%,}" >/dev/null
AWS_LOG=$TB_DIR/net/aws.log
: >"$AWS_LOG"
ip netns exec "$TB_NET" "$TB_PY" "$TB_SERVERS_DIR/aws.py" --log "$AWS_LOG" \
    --ready "$TB_DIR/net/aws.ready" --cert "$TB_DIR/pki/aws.crt" \
    --key "$TB_DIR/pki/aws.key" --listen "$AWS_IP:443" \
    --key-id "$REAL_ID" --secret-file "$TB_DIR/net/aws-secret" \
    --token-file "$TB_DIR/net/aws-token" >"$TB_DIR/net/aws.err" 2>&1 &
TB_PIDS+=("$!")
records=()
for n in $NAMES; do records+=("--host-record=$n,$AWS_IP"); done
tb_dns_stop dns1
tb_dns_start dns1 "$TB_DNS1_IP4" "$TB_DNS1_IP6" -- "${records[@]}"
tb_wait_file "$TB_DIR/net/aws.ready" "$TB_SETUP_WAIT" ||
    tb_die "aws.py not ready: $(tail -n 5 "$TB_DIR/net/aws.err")"

# policy NAME [with-bindings]: the policy file; the bindings only when asked
policy()
{
	{
		cat <<EOF
defaultAction: deny
egress:
  - {action: allow, target: s3.us-east-1.amazonaws.com}
  - {action: allow, target: '*.s3.us-east-1.amazonaws.com'}
  - {action: allow, target: bedrock-runtime.us-east-1.amazonaws.com}
credentials:
  - {name: aws-id, source: {type: file, path: $TB_DIR/egressd/aws-id}}
  - {name: aws-secret, source: {type: file, path: $TB_DIR/egressd/aws-secret}}
  - {name: aws-token, source: {type: file, path: $TB_DIR/egressd/aws-token}}
EOF
		[ "${1:-}" = with-bindings ] && cat <<'EOF'
bindings:
  - name: s3
    match: {hosts: [s3.us-east-1.amazonaws.com, '*.s3.us-east-1.amazonaws.com']}
    auth: {type: awsSigV4, accessKeyId: aws-id, secretAccessKey: aws-secret,
           sessionToken: aws-token}
  - name: bedrock
    match: {hosts: [bedrock-runtime.us-east-1.amazonaws.com], methods: [POST]}
    auth: {type: awsSigV4, accessKeyId: aws-id, secretAccessKey: aws-secret,
           sessionToken: aws-token}
EOF
	} | tb_policy_file policy.yaml
}
pol=$(policy with-bindings)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust"
cat "$TB_DIR/egressd/state/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/trust-all.pem"
chmod 644 "$TB_DIR/trust-all.pem"

# client PHASE: aws_client.py as the sandbox user; its lines in $out
client()
{
	local rc=0
	tb_sandbox env AWS_EC2_METADATA_DISABLED=true timeout 60 \
	    /usr/bin/python3 "$TB_LIB_DIR/../tools/aws_client.py" "$1" \
	    "$BUCKET" "$TB_DIR/trust-all.pem" >"$TB_DIR/client-$1.out" \
	    2>"$TB_DIR/client-$1.err" || rc=$?
	out=$(cat "$TB_DIR/client-$1.out")
	sed 's/^/# /' "$TB_DIR/client-$1.out"
	[ "$rc" -eq 0 ] || sed 's/^/# err: /' "$TB_DIR/client-$1.err" | tail -n 5
}
step() { grep -F "\"step\": \"$1\"" <<<"$out"; }

# --- signed by egressd: accepted ------------------------------------------
mark=$(tb_log_mark "$AWS_LOG")
client bound
tb_expect_match "S3 PUT accepted" '"ok": true' "$(step s3_put)"
tb_expect_match "S3 GET returns the object" '"ok": true, "status": 200' \
    "$(step s3_get)"
tb_expect_match "the Bedrock-style POST is accepted" \
    '"ok": true, "status": 200.*"model": "anthropic.claude-v2:1"' \
    "$(step bedrock)"
tb_expect_match "the presigned URL is refused by egressd" \
    '"ok": true, "status": 403, "body": "egressd: vault_refused' \
    "$(step presigned)"
tb_expect_match "a body over 1 MiB goes to S3 UNSIGNED-PAYLOAD" '"ok": true' \
    "$(step s3_put_big)"
tb_expect_match "... and is refused to Bedrock (413), not sent unsigned" \
    '"ok": false, "status": 413' "$(step bedrock_big)"
tb_assert_log --since "$mark" "$AWS_LOG" aws.request method=PUT verdict=ok \
    path=/big x-amz-content-sha256=UNSIGNED-PAYLOAD
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=refused binding=bedrock \
    "reason=request body too large to sign"
tb_assert_log --since "$mark" "$AWS_LOG" aws.request method=PUT verdict=ok \
    "host=$BUCKET.s3.us-east-1.amazonaws.com" \
    "path=/dir/hello%20world%20%281%29.txt" \
    "x-amz-security-token=$REAL_TOKEN"
tb_assert_log --since "$mark" "$AWS_LOG" aws.request method=GET verdict=ok \
    "x-amz-content-sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
tb_assert_log --since "$mark" "$AWS_LOG" aws.request method=POST verdict=ok \
    path=/model/anthropic.claude-v2%3A1/invoke
tb_check "every request the origin got was signed with the real key" \
    "$TB_PY" - "$AWS_LOG" "$REAL_ID" <<'EOF'
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    n += 1
    if r["verdict"] != "ok" or "Credential=%s/" % sys.argv[2] not in r["authorization"]:
        sys.exit("not signed with the real key: %r" % r)
    if r["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD" and r["body_len"] <= 1 << 20:
        sys.exit("a small body went unsigned: %r" % r)
sys.exit(0 if n == 4 else "expected 4 requests, got %d" % n)
EOF
tb_check_fails "the sandbox's fake key id never reached the origin" \
    grep -qF -e AKIAFAKESANDBOXKEY00 -e fake-sandbox-session-token "$AWS_LOG"
tb_check_fails "nor its presigned URL" grep -qiF x-amz-signature "$AWS_LOG"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=refused \
    "reason=presigned AWS query refused" binding=s3
tb_check_fails "the real key id the origin echoed is redacted" \
    grep -qF "$REAL_ID" "$TB_DIR/client-bound.out"
tb_expect_match "... as asterisks" '"key_id": "\*{8,}' "$(step bedrock)"

# --- the binding removed: the sandbox's own signature goes, and fails -------
pol=$(policy)
m=$(tb_log_mark "$TB_EGRESSD_LOG")
kill -HUP "$TB_EGRESSD_PID"
tb_check "the policy without bindings is in force" tb_wait_log_line \
    --since "$m" --timeout 10 "$TB_EGRESSD_LOG" policy.loaded
mark=$(tb_log_mark "$AWS_LOG")
client unbound
tb_expect_match "unbound: the origin refuses the sandbox's signature" \
    '"ok": false, "status": 403, "code": "SignatureDoesNotMatch"' \
    "$(step s3_get)"
tb_assert_log --since "$mark" "$AWS_LOG" aws.request method=GET \
    "verdict=unknown key id"

# --- no real value where the sandbox or a log could read it -----------------
for f in "$TB_EGRESSD_LOG" "$TB_DIR/egressd/stderr" "$TB_DIR/egressd/stdout" \
    "$TB_DIR"/client-*.out "$TB_DIR"/client-*.err; do
	tb_check_fails "no real key, secret or token in ${f##*/}" \
	    grep -qF -e "$REAL_SECRET" -e "$REAL_TOKEN" -e "$REAL_ID" "$f"
done
tb_finish
