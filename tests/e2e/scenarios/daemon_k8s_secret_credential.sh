#!/bin/bash
# daemon_k8s_secret_credential (issue 19 item 1, issue 18 item 2): a `file`
# credential from a Kubernetes Secret volume, laid out as the kubelet's
# atomic writer does (1777 root, timestamped data directory, "..data"
# link, the file a link through it). The origin receives the Secret's
# value; a Secret update (the "..data" swap) is injected within 2 s with
# no signal and no change to the policy file; an update egressd cannot
# read (an empty value) keeps the value in force, and the next good one
# is taken again.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

VOL=$TB_DIR/secret
mkdir -p "$VOL" && chmod 1777 "$VOL"
# publish NAME VALUE: a new data directory, "..data" swapped to it
publish() {
	local d="..2026_12_04_$1"
	mkdir "$VOL/$d" && chmod 0755 "$VOL/$d"
	printf '%s' "$2" >"$VOL/$d/api-key"
	chmod 0644 "$VOL/$d/api-key"
	ln -s "$d" "$VOL/..data_tmp"
	mv -T "$VOL/..data_tmp" "$VOL/..data"
}
V1=secret-from-k8s-one-$RANDOM
V2=secret-from-k8s-two-$RANDOM
publish v1 "$V1"
ln -s ..data/api-key "$VOL/api-key"

mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: file, path: $VOL/api-key}}
bindings:
  - name: a-api
    match: {hosts: [a.test]}
    auth: {type: bearer, credential: k}
EOF
)
STATE=$TB_DIR/state
# the bundle in a volume of its own, as the deployments have it
mkdir -p "$TB_DIR/ca-vol"
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --ca-bundle "$TB_DIR/ca-vol/ca-bundle.pem"
tb_check_fails "--ca-bundle: nothing in the state dir" test -e "$STATE/ca-bundle.crt"
C=(curl -sS --max-time 8 --cacert "$TB_DIR/ca-vol/ca-bundle.pem" -o /dev/null
    -H 'Authorization: Bearer fake-key')

mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" https://a.test/one
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/one \
    "h.authorization=Bearer $V1"

# --- the Secret is updated: in force within 2 s ------------------------------
m=$(tb_log_mark "$TB_EGRESSD_LOG")
publish v2 "$V2"
tb_check "the swap reloads within 2 s (no signal, policy file unchanged)" \
    tb_wait_log_line --since "$m" --timeout 2 "$TB_EGRESSD_LOG" policy.loaded
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" https://a.test/two
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/two \
    "h.authorization=Bearer $V2"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    "h.authorization=Bearer $V1"
# the origin echoes V1 back (standing in for one that returns the key it
# saw before the rotation): masked in the header and in the JSON body
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox curl -sS --max-time 8 --cacert "$TB_DIR/ca-vol/ca-bundle.pem" -D - \
    -H 'Authorization: Bearer fake-key' -H "X-Old: $V1" \
    'https://a.test/old?echo=X-Old')
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/old \
    "h.x-old=$V1" "h.authorization=Bearer $V2"
tb_expect_match "the replaced value is redacted in the echoed header" \
    '^X-Echo-X-Old: \[REDACTED\]' "$(tr -d '\r' <<<"$out")"
tb_expect_match "and in the JSON echo" '"x-old": *"\*{'"${#V1}"'}"' "$out"
tb_check_fails "the replaced value is nowhere in the response" \
    grep -qF "$V1" <<<"$out"

# --- an update that cannot be read keeps the value in force ------------------
m=$(tb_log_mark "$TB_EGRESSD_LOG")
publish v3 ""
tb_check "an empty value fails the reload" \
    tb_wait_log_line --since "$m" --timeout 2 "$TB_EGRESSD_LOG" \
    policy.reload_failed
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" https://a.test/three
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/three \
    "h.authorization=Bearer $V2"
m=$(tb_log_mark "$TB_EGRESSD_LOG")
publish v4 "$V1"
tb_check "the next good update is taken" \
    tb_wait_log_line --since "$m" --timeout 2 "$TB_EGRESSD_LOG" policy.loaded
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox "${C[@]}" https://a.test/four
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/four \
    "h.authorization=Bearer $V1"

for f in "$TB_EGRESSD_LOG" "$TB_DIR/egressd/stderr" "$pol"; do
	tb_check_fails "no value in ${f##*/}" grep -qF -e "$V1" -e "$V2" "$f"
done
tb_finish
