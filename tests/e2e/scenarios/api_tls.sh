#!/bin/bash
# api_tls: the control API's TCP listener with TLS (--api-tls-cert,
# --api-tls-key): the node reaches it over HTTPS, and a Credential Vault
# write from off the pod is accepted over TLS (contract §4: TLS or
# loopback, else 426); egressd's own refusals (431, 413) come inside TLS;
# plain HTTP on that port gets no answer; the Unix socket stays plain.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/token"
chmod 600 "$TB_DIR/token"
# the API's certificate: the pod's address, a throwaway self-signed one
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$TB_DIR/egressd/api.key" -out "$TB_DIR/api.crt" -days 1 \
    -subj "/CN=egressd-api" -addext "subjectAltName=IP:$TB_SBX_HOST_IP4" \
    2>/dev/null || tb_die "openssl"
chmod 600 "$TB_DIR/egressd/api.key"
mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF2
)
SOCK=$TB_DIR/egressd/api.sock
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$TB_DIR/state" --http-addr ":18080" --api-socket "$SOCK" \
    --api-token-file "$TB_DIR/token" --api-tls-cert "$TB_DIR/api.crt" \
    --api-tls-key "$TB_DIR/egressd/api.key"
tb_assert_log "$TB_EGRESSD_LOG" api.listen tls=true
url="https://$TB_SBX_HOST_IP4:18080"
hapi() { # METHOD PATH [BODY]: the node, over TLS
	tb_host curl -sS --max-time 5 --cacert "$TB_DIR/api.crt" \
	    -o "$TB_DIR/api.out" -w '%{http_code}' -X "$1" \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
	    ${3:+--data-binary "$3"} "$url$2" 2>/dev/null
	return 0
}
tb_expect_eq "readyz over TLS" 200 "$(hapi GET /readyz)"
tb_expect_eq "GET /policy over TLS" 200 "$(hapi GET /policy)"
tb_expect_eq "a vault write from the node over TLS: 201 (not 426)" 201 \
    "$(hapi POST /credential-vault '{"credentials":[],"bindings":[]}')"
tb_expect_eq "... the state" '{"revision":1,"credentials":[],"bindings":[]}' \
    "$(cat "$TB_DIR/api.out")"
tb_expect_eq "a wrong token over TLS: 401" 401 \
    "$(tb_host curl -sS --max-time 5 --cacert "$TB_DIR/api.crt" -o /dev/null \
        -w '%{http_code}' -H 'OPENSANDBOX-EGRESS-AUTH: nope' "$url/policy")"
# egressd's own refusals before evhttp (head too large, body too large)
# go inside TLS too, not as plaintext on the TLS connection
big=$(head -c 20000 /dev/zero | tr '\0' a)
tb_expect_eq "a head over 16 KiB over TLS: 431" 431 \
    "$(tb_host curl -sS --max-time 5 --cacert "$TB_DIR/api.crt" -o /dev/null \
        -w '%{http_code}' -H "X-Big: $big" "$url/readyz" 2>&1)"
tb_expect_eq "a body over 1 MiB over TLS: 413" 413 \
    "$(head -c 1100000 /dev/zero | tb_host curl -sS --max-time 5 \
        --cacert "$TB_DIR/api.crt" -o /dev/null -w '%{http_code}' \
        -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
        --data-binary @- "$url/policy" 2>&1)"
tb_check_fails "plain HTTP on the TLS port gets no HTTP answer" \
    tb_host curl -sS --max-time 3 -o /dev/null \
    "http://$TB_SBX_HOST_IP4:18080/readyz"
tb_expect_eq "the Unix socket stays plain" 200 \
    "$(tb_sandbox_root curl -sS --max-time 5 --unix-socket "$SOCK" \
        -o /dev/null -w '%{http_code}' \
        -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" http://egressd/credential-vault)"
tb_check_fails "the sandbox still cannot reach the API, TLS or not" \
    tb_sandbox curl -sS --max-time 3 -k -o /dev/null "https://127.0.0.1:18080/readyz"
tb_finish
