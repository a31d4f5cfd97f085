#!/bin/bash
# proxy_slow_head: a request head after the proxy's decision has a
# deadline of its own (--proxy-head-timeout, here 2 s), counted from its
# first byte; the idle timeout, which dripped bytes would otherwise stretch
# to minutes, no longer bounds it alone. On a plain keep-alive connection
# (port 80) and inside a terminated TLS connection (443, a host with a
# binding), the sandbox sends a first request normally, waits idle past the
# deadline (no head begun: the idle timeout's, the connection stays open)
# and sends a second one normally, then drips a third head one byte every
# 0.5 s: the connection is cut about 2 s after the first dripped byte
# (proxy.closed reason=head_timeout), and the origin saw the first two
# requests and nothing of the third. (First bytes to a decision:
# proxy_slowloris.)
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

tb_vault_files real-slow-head-secret-$RANDOM
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/api/*"]}
    auth: {type: bearer, credential: k}
EOF2
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --proxy-head-timeout 2
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
emark=$(tb_log_mark "$TB_EGRESSD_LOG")

# one connection per kind, one after the other; every wait is bounded
out=$(tb_sandbox "$TB_PY" - "$STATE/ca-bundle.crt" <<'EOF'
import socket, ssl, sys, time

DRIP_S, DRIP_MAX_S, IDLE_S = 0.5, 15.0, 5.0

def response(s):
    """One response (Content-Length framed): its status, or None."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return None
        buf += d
    head, body = buf.split(b"\r\n\r\n", 1)
    n = 0
    for ln in head.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(body) < n:
        d = s.recv(65536)
        if not d:
            return None
        body += d
    return int(head.split()[1])

def run(kind, port, cafile):
    s = socket.create_connection(("a.test", port), timeout=5)
    if kind == "term":
        ctx = ssl.create_default_context(cafile=cafile)
        s = ctx.wrap_socket(s, server_hostname="a.test")
    req = "GET /%s-%s HTTP/1.1\r\nHost: a.test\r\n\r\n"
    s.sendall((req % ("first", kind)).encode())
    first = response(s)
    # idle, no head begun, for more than twice the head deadline
    time.sleep(IDLE_S)
    s.sendall((req % ("again", kind)).encode())
    again = response(s)
    drip = ("GET /drip-%s HTTP/1.1\r\nHost: a.test\r\nX-Drip: %s\r\n\r\n"
            % (kind, "x" * 64)).encode()
    s.settimeout(DRIP_S)
    t0 = time.monotonic()
    sent, cut = 0, None
    while time.monotonic() - t0 < DRIP_MAX_S and sent < len(drip):
        try:
            s.send(drip[sent:sent + 1])
            sent += 1
        except OSError:
            cut = time.monotonic() - t0
            break
        try:
            if s.recv(4096) == b"":
                cut = time.monotonic() - t0
                break
        except socket.timeout:
            pass  # nothing yet: the next byte
        except (ssl.SSLError, OSError):
            cut = time.monotonic() - t0
            break
    s.close()
    print(kind, first, again, sent, "%.2f" % cut if cut is not None else "none")

run("plain", 80, sys.argv[1])
run("term", 443, sys.argv[1])
EOF
)
tb_log "$(tr '\n' ';' <<<"$out")"
for kind in plain term; do
	read -r _ first again sent cut < <(grep "^$kind " <<<"$out")
	tb_expect_eq "$kind: the first request answered" 200 "${first:-}"
	tb_expect_eq "$kind: after 5 s idle (no head begun), the next one answered" \
	    200 "${again:-}"
	tb_check "$kind: the dripped head is cut ($cut s after its first byte, $sent bytes)" \
	    test "${cut:-none}" != none
	tb_check "$kind: ... not before 1.5 s" "$TB_PY" -c \
	    "import sys; sys.exit(not float('${cut:-0}'.replace('none', '0')) >= 1.5)"
	tb_check "$kind: ... nor after 6 s" "$TB_PY" -c \
	    "import sys; sys.exit(not float('${cut:-99}'.replace('none', '99')) <= 6)"
	tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
	    "path=/first-$kind"
	tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
	    "path=/again-$kind"
	tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request \
	    "path=/drip-$kind"
done
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.bad_request
tb_assert_log --since "$emark" --min 1 --max 1 "$TB_EGRESSD_LOG" proxy.closed \
    reason=head_timeout proto=http name=a.test
tb_assert_log --since "$emark" --min 1 --max 1 "$TB_EGRESSD_LOG" proxy.closed \
    reason=head_timeout decision=terminated name=a.test
tb_finish
