#!/bin/bash
# vault_forms (issue 34 item 4, THREATS 13a): an origin that quotes the
# injected credential back in another form. a.test's binding injects a
# bearer key, b.test's a basic one (the value is base64 of
# "alice:<password>"); every request below is injected, so its response
# is redacted as today's egressd redacts: what is tested is the forms.
# The origin (echo_form=) answers "hello " and the Authorization header
# as base64 of the whole line "Authorization: Bearer <v>" (the key not on
# a 3-byte boundary), the same wrapped at 76 columns (MIME), the key in
# hex lower and upper case, and for basic the decoded "user:password" and
# the password alone ("hello alice:pw"). No form of the secret, nor 12
# characters in a row of one, may reach the client (lib/secret_scan.py).
# On 9cc226d every form here but the controls leaks.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

rnd() {
	"$TB_PY" -c 'import secrets, string, sys
a = string.ascii_letters + string.digits
print(sys.argv[1] + "".join(secrets.choice(a) for _ in range(38)))' "$1"
}
SECRET=$(rnd sk)
PW=$(rnd pw)
KEY=$TB_DIR/egressd/key-k
KEYB=$TB_DIR/egressd/key-b
tb_vault_files "$SECRET"
printf 'alice:%s' "$PW" | base64 -w0 >"$KEYB"
echo >>"$KEYB"
chmod 600 "$KEYB"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
credentials:
  - {name: k, source: {type: file, path: $KEY}}
  - {name: kb, source: {type: file, path: $KEYB}}
bindings:
  - name: a-bearer
    match: {hosts: [a.test], paths: ["/v1/*"]}
    auth: {type: bearer, credential: k}
  - name: b-basic
    match: {hosts: [b.test], paths: ["/v1/*"]}
    auth: {type: basic, credential: kb}
EOF2
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE"
CA=$STATE/ca-bundle.crt
OUT=$TB_SBX_HOME
# form HOST FORM: the sandbox asks HOST's origin to quote its
# Authorization as FORM; the answer in $OUT/FORM
form() {
	tb_sandbox curl -sS --max-time 8 --cacert "$CA" -o "$OUT/$2" \
	    -w '%{http_code}' -H 'Authorization: Bearer fake' \
	    "https://$1/v1/f?echo_form=$2"
}

mark=$(tb_log_mark "$TB_ORIGIN_LOG")
for f in b64line b64wrap hexlower hexupper; do
	tb_expect_eq "bearer, $f: answered" 200 "$(form a.test $f)"
done
tb_assert_log --min 4 --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.sni=a.test "h.authorization=Bearer $SECRET"
tb_expect_match "... each a quote of it ('hello ...')" '^hello [0-9A-Za-z+/=]{20}' \
    "$(cat "$OUT/b64line")"
tb_expect_no_secret "base64 of the line 'Authorization: Bearer <v>' (not on a 3-byte boundary)" \
    "$KEY" "$OUT/b64line"
tb_expect_no_secret "the same base64 wrapped at 76 columns" "$KEY" "$OUT/b64wrap"
tb_expect_no_secret "hex, lower case" "$KEY" "$OUT/hexlower"
tb_expect_no_secret "hex, upper case" "$KEY" "$OUT/hexupper"

mark=$(tb_log_mark "$TB_ORIGIN_LOG")
for f in basicdec basicpw; do
	tb_expect_eq "basic, $f: answered" 200 "$(form b.test $f)"
done
tb_assert_log --min 2 --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    server.sni=b.test "h.authorization=Basic $(cat "$KEYB")"
# 'user:password' is one form: the user name is masked with the password
tb_expect_match "... the greeting arrives, masked" '^hello \*{12,}' \
    "$(cat "$OUT/basicdec")"
tb_expect_no_secret "basic: the decoded 'user:password' ('hello alice:pw')" \
    --basic "$KEYB" "$OUT/basicdec"
tb_expect_no_secret "basic: the password alone" --basic "$KEYB" "$OUT/basicpw"

# the controls: the forms today's redactor knows are masked
out=$(tb_sandbox curl -sS --max-time 8 --cacert "$CA" -D - \
    'https://a.test/v1/echo?echo=Authorization&forms=Authorization' |
    tee "$OUT/known")
tb_expect_match "control: the echo and its base64, base64url and percent forms arrive" \
    '"b64url"' "$out"
tb_expect_no_secret "... masked" "$KEY" "$OUT/known"
tb_finish
