#!/bin/bash
# proxy_vault_override: a binding scoped to GET cannot be run as another
# method, nor steered by paths a second decoder would resolve. On an
# injected request egressd drops X-HTTP-Method-Override, X-HTTP-Method
# and X-Method-Override, and refuses (400) a query naming _method in any
# spelling a framework reads; a path holding a dot segment with a ';'
# parameter or a double-encoded dot is refused (400). The origin sees
# none of the refused requests; requests egressd injects nothing into
# are forwarded as they came.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

SECRET=override-secret-value-1
tb_vault_files "$SECRET"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-get
    match: {hosts: [a.test], paths: ["/v1/*"], methods: [GET]}
    auth: {type: bearer, credential: k}
EOF2
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE"
C=(curl -sS --max-time 8 --cacert "$STATE/ca-bundle.crt" -o /dev/null
    -w '%{http_code}')

# --- override headers: dropped from an injected request ----------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
code=$(tb_sandbox "${C[@]}" -H 'X-HTTP-Method-Override: DELETE' \
    -H 'X-HTTP-Method: DELETE' -H 'x-method-override: PUT' \
    https://a.test/v1/items)
tb_expect_eq "GET with override headers: injected, 200" 200 "$code"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/items \
    method=GET "h.authorization=Bearer $SECRET" '!h.x-http-method-override' \
    '!h.x-http-method' '!h.x-method-override'
code=$(tb_sandbox "${C[@]}" -H 'X-HTTP-Method-Override: DELETE' \
    https://a.test/other)
tb_expect_eq "outside the binding: forwarded as it came" 200 "$code"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/other \
    h.x-http-method-override=DELETE '!h.authorization'

# --- _method in the query: refused ---------------------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
m=$(tb_log_mark "$TB_EGRESSD_LOG")
for q in '_method=DELETE' 'a=1&_METHOD=post' '%5Fmethod=DELETE' \
    'a=1;%5f%6Dethod=PUT' '.method=DELETE'; do
	code=$(tb_sandbox "${C[@]}" "https://a.test/v1/items?$q")
	tb_expect_eq "?$q: 400" 400 "$code"
done
tb_assert_log --since "$m" --min 5 --max 5 "$TB_EGRESSD_LOG" vault.inject \
    decision=refused binding=a-get \
    'reason=method override in the query of a credential request'
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request
code=$(tb_sandbox "${C[@]}" 'https://a.test/v1/items?method=card&x=_method')
tb_expect_eq "other names and values: injected, 200" 200 "$code"
code=$(tb_sandbox "${C[@]}" 'https://a.test/other?_method=DELETE')
tb_expect_eq "_method where nothing is injected: forwarded" 200 "$code"

# --- paths a second decoder or a parameter-stripper would resolve ------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
for p in '/v1/..%3B/admin' '/v1/.%3b/admin' '/v1/..;x/admin' '/v1/%2e;/admin' \
    '/v1/%252e%252e/admin' '/v1/%25%32%65%25%32%65/admin' '/v1/x%252fy'; do
	code=$(tb_sandbox "${C[@]}" --path-as-is "https://a.test$p")
	tb_expect_eq "$p: 400" 400 "$code"
done
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request
code=$(tb_sandbox "${C[@]}" --path-as-is 'https://a.test/v1/100%25/x')
tb_expect_eq "a plain %25: injected, 200" 200 "$code"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    path=/v1/100%25/x "h.authorization=Bearer $SECRET"
tb_check_fails "the secret is not in egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
