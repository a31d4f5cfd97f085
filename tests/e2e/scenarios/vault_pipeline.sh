#!/bin/bash
# vault_pipeline: requests to a bound origin go one at a time (issue 34):
# a client that pipelines still gets every answer, in order, on plain
# HTTP and over terminated TLS, also when it half-closes after its last
# request (the waiting heads go, then the FIN). An IP rule that lets a
# connection through to another host's address never carries a binding's
# credential there (421), for plain HTTP as for TLS.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

SECRET=pipeline-secret-value-7
tb_vault_files "$SECRET"
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test}
  - {action: allow, target: "$TB_ORIGIN_C4", ports: [80, 443]}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-tls
    match: {hosts: [a.test], paths: ["/v1/*"]}
    auth: {type: bearer, credential: k}
  - name: b-plain
    match: {schemes: [http], hosts: [b.test], paths: ["/v1/*"]}
    auth: {type: bearer, credential: k}
EOF
)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$TB_DIR/state" --http-addr ":18080"
CA=$TB_DIR/state/ca-bundle.crt

mkdir -p "$TB_DIR/sbx-bin"
cat >"$TB_DIR/sbx-bin/pipe.py" <<'PY'
# pipe.py tls|plain HOST PORT CAFILE PATH...: every request at once on one
# connection, then (plain) a FIN; prints each response's status line and
# the path its JSON echo names, in order.
import json, socket, ssl, sys
mode, host, port, ca, paths = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    sys.argv[4], sys.argv[5:]
s = socket.create_connection((host, port), timeout=8)
if mode == "tls":
    s = ssl.create_default_context(cafile=ca).wrap_socket(
        s, server_hostname=host)
s.sendall(b"".join(("GET %s HTTP/1.1\r\nHost: %s\r\n"
                    "Authorization: Bearer fake\r\n\r\n"
                    % (p, host)).encode() for p in paths))
if mode == "plain":
    s.shutdown(socket.SHUT_WR)
f = s.makefile("rb")
for _ in paths:
    status = f.readline().decode().strip()
    n = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        if k.lower() == "content-length":
            n = int(v)
    body = f.read(n)
    print(status, json.loads(body).get("path"))
PY
chmod 755 "$TB_DIR/sbx-bin" "$TB_DIR/sbx-bin/pipe.py"

want="HTTP/1.1 200 OK /v1/one
HTTP/1.1 200 OK /free
HTTP/1.1 200 OK /v1/three"
out=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/pipe.py" plain b.test 80 "$CA" \
    /v1/one /free /v1/three 2>&1)
tb_expect_eq "plain, pipelined then FIN: every answer, in order" "$want" "$out"
out=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/pipe.py" tls a.test 443 "$CA" \
    /v1/one /free /v1/three 2>&1)
tb_expect_eq "terminated, pipelined: every answer, in order" "$want" "$out"
tb_assert_log "$TB_ORIGIN_LOG" origin.request path=/v1/three \
    "h.authorization=Bearer $SECRET"

# --- the credential goes only where its host resolved ------------------------
tb_resolve_a c.test >/dev/null
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
code=$(tb_sandbox curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
    -H 'Host: b.test' "http://$TB_ORIGIN_C4/v1/x")
tb_expect_eq "plain: Host b.test to c.test's address (IP rule): 421" 421 "$code"
tls_to_c()
{
	tb_sandbox curl -sS -o /dev/null -w '%{http_code}' --max-time 5 \
	    --cacert "$CA" --resolve "a.test:443:$TB_ORIGIN_C4" \
	    https://a.test/v1/x
}
if tb_pt_in_flight; then
	# judged in flight: c.test's address is not held (no binding names
	# c.test), so the hello of bound a.test meets the queue, which cannot
	# read it: refused, and the address held from then on
	me=$(tb_log_mark "$TB_EGRESSD_LOG")
	tb_expect_eq "TLS in flight: SNI a.test to c.test's address: reset" 000 \
	    "$(tls_to_c)"
	tb_assert_log --since "$me" "$TB_EGRESSD_LOG" nfq.judged \
	    decision=refused reason=held name=a.test "dst=$TB_ORIGIN_C4:443"
fi
tb_expect_eq "TLS: SNI a.test to c.test's address (IP rule): 421" 421 \
    "$(tls_to_c)"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
    "h.authorization=Bearer $SECRET"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=refused host=b.test
tb_check_fails "the secret never reaches egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"
tb_finish
