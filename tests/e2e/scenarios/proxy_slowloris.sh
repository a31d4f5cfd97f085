#!/bin/bash
# proxy_slowloris (issue 17: "slowloris ... cut by deadlines"): the
# sandbox opens 200 connections through egressd's proxy that drip a
# request head (plain HTTP, port 80) one byte a second, and 100 that drip
# a TLS ClientHello (443) the same way, never finishing. Every one is cut
# by the first-bytes deadline (10 s, PROXY_HELLO_MS: hello_timeout), not
# before 9 s and not after 13 s, while an ordinary request on a new
# connection is answered at once; nothing of them reaches the origin.
# With in-flight judging (the default where the kernel can queue) the
# TLS ones never meet the proxy: the queue's hello bound cuts them after
# 5 s (docs/proxy.md); run with TB_PT_JUDGE=proxy for the proxy's.
# (Oversized heads: threat_14_smuggling.)
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
TB_EGRESSD_TOKEN="sl-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080" # the operator, from the node's namespace
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
tb_start_egressd --policy "$pol" --proxy
mark=$(tb_log_mark "$TB_ORIGIN_LOG")

out=$(tb_sandbox "$TB_PY" - <<'EOF'
import os, select, socket, struct, subprocess, sys, time

socket.getaddrinfo("a.test", 80, socket.AF_INET)  # learned by egressd
head = b"GET /slowloris HTTP/1.1\r\nHost: a.test\r\nX-Drip: " + b"x" * 64
# a ClientHello record header promising more than will ever come
hello = bytes([22, 3, 1, 2, 0, 1, 0, 1, 252, 3, 3]) + b"\x00" * 64
conns = []  # [sock, payload, sent, opened, cut]
for port, payload, n in ((80, head, 200), (443, hello, 100)):
    for _ in range(n):
        s = socket.create_connection(("a.test", port), timeout=3)
        s.setblocking(False)
        conns.append([s, payload, 0, time.monotonic(), None])
ok_ms = None
start = time.monotonic()
while time.monotonic() - start < 16 and any(c[4] is None for c in conns):
    now = time.monotonic()
    for c in conns:
        if c[4] is not None:
            continue
        try:
            if c[0].recv(4096) == b"":
                c[4] = now - c[3]
                continue
        except BlockingIOError:
            pass
        except OSError:
            c[4] = now - c[3]
            continue
        # one byte a second
        if c[2] < len(c[1]) and now - c[3] >= c[2]:
            try:
                c[0].send(c[1][c[2]:c[2] + 1])
                c[2] += 1
            except OSError:
                c[4] = now - c[3]
    if ok_ms is None and now - start > 3:
        # an ordinary request, while all of them drip
        t = time.monotonic()
        r = subprocess.run(["curl", "-sS", "--max-time", "3",
                            "http://a.test/ordinary"], capture_output=True)
        if b'"/ordinary"' in r.stdout:
            ok_ms = int((time.monotonic() - t) * 1000)
        else:
            ok_ms = -1
    time.sleep(0.05)
cut = [c[4] for c in conns if c[4] is not None]
# per port: plain HTTP (80) meets the proxy, TLS (443) the proxy or, with
# in-flight judging, the queue's hello bound
c80 = [c[4] for c in conns[:200] if c[4] is not None]
c443 = [c[4] for c in conns[200:] if c[4] is not None]
print(len(conns), len(cut), round(min(c80 or [0]), 1),
      round(max(c80 or [0]), 1), round(min(c443 or [0]), 1),
      round(max(c443 or [0]), 1), max(c[2] for c in conns), ok_ms)
EOF
)
read -r n ncut lo hi tlo thi sent ok_ms <<<"$out"
tb_log "$n dripping connections: $ncut cut, plain after $lo..$hi s, TLS after $tlo..$thi s, at most $sent bytes each; ordinary request ${ok_ms} ms"
tb_expect_eq "300 dripping connections opened" 300 "${n:-0}"
tb_expect_eq "every one cut" 300 "${ncut:-0}"
within() { "$TB_PY" -c "import sys; sys.exit(not $2 <= $1 <= $3)"; }
tb_check "plain HTTP: none before 9 s ($lo)" within "$lo" 9 99
tb_check "plain HTTP: none after 13 s ($hi)" within "$hi" 0 13
if tb_pt_in_flight; then
	# judged in flight: the queue's hello bound (5 s, docs/proxy.md)
	tb_check "TLS (in flight): none before 4.5 s ($tlo)" within "$tlo" 4.5 99
	tb_check "TLS (in flight): none after 8 s ($thi)" within "$thi" 0 8
	tb_assert_log --min 200 "$TB_EGRESSD_LOG" proxy.closed reason=hello_timeout
	tb_expect_eq "GET /v1/status: 200" 200 \
	    "$(tb_host_api GET "http://$TB_SBX_HOST_IP4:18080/v1/status")"
	tb_expect_match "TLS (in flight): 100 hello timeouts in /v1/status" \
	    '^(1[0-9][0-9]|[2-9][0-9][0-9])$' \
	    "$("$TB_PY" -c 'import json, sys
print(json.load(open(sys.argv[1]))["passthrough"]["helloTimeouts"])' "$TB_DIR/api.out")"
else
	tb_check "TLS: none before 9 s ($tlo)" within "$tlo" 9 99
	tb_check "TLS: none after 13 s ($thi)" within "$thi" 0 13
	tb_assert_log --min 300 "$TB_EGRESSD_LOG" proxy.closed reason=hello_timeout
fi
tb_check "an ordinary request meanwhile answered within 1 s (${ok_ms} ms)" \
    test "${ok_ms:--1}" -ge 0 -a "${ok_ms:--1}" -lt 1000
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/slowloris
tb_finish
