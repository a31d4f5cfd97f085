#!/bin/bash
# threat_16_flood (THREATS §16, bounded): the sandbox floods the resolver
# with 3000 queries in bursts (unique denied names, unique allowed names
# that go upstream, cached names), then holds 500 TCP connections to it;
# the node holds 200 connections to the control API. Through and after
# each flood allowed names keep their prompt answers (asked while the
# flood is on, not only once it is over), the log stays within its rate
# limit, memory stays bounded, egressd holds TCP clients only up to its
# cap (seen from the client side: which of the 500 it closed), and the
# API serves again once its flood is gone. egressd ends with a clean exit
# (tb_finish).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: "*.a.test"}
EOF
)
TB_EGRESSD_TOKEN=tok-$TB_ID-$RANDOM$RANDOM
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
tb_start_egressd --policy "$pol" --http-addr ":18080"
pid=$TB_EGRESSD_PID
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status"; }
prompt() { # one UDP query for a.test answered within 1 s
	tb_sandbox "$TB_PY" - <<'EOF'
import socket, struct, sys, time
m = struct.pack(">HHHHHH", 0x6161, 0x0100, 1, 0, 0, 0) + b"\x01a\x04test\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
t = time.time()
s.sendto(m, ("198.51.100.1", 53))
r = s.recv(4096)
sys.exit(0 if r[:2] == b"\x61\x61" and (r[3] & 15) == 0 and time.time() - t < 1 else 1)
EOF
}
tb_check "before: a.test is answered promptly" prompt
rss0=$(rss)
mark=$(tb_log_mark "$TB_EGRESSD_LOG")

# --- 3000 queries in bursts of 100, at most 10 s ----------------------------------
flood=$(tb_sandbox "$TB_PY" - <<'EOF'
import os, socket, struct, time
def q(qid, name):
    return (struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
            + b"".join(bytes([len(l)]) + l.encode() for l in name.split("."))
            + b"\0\0\x01\0\x01")
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
for s in socks:
    s.settimeout(0.05)
sent = got = 0
# one probe for a.test in the middle of every burst, on its own socket:
# answered within 1 s of being sent, while the flood is on
probes = prompt = 0
end = time.time() + 10
i = 0
while i < 3000 and time.time() < end:
    for j in range(100):
        k = i + j
        r = os.urandom(6).hex()
        name = ("x%s.flood.evil.test" % r, "y%s.a.test" % r, "a.test")[k % 3]
        socks[k % 4].sendto(q(k & 0xffff, name), ("198.51.100.1", 53))
        sent += 1
        if j == 50:
            p = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            p.setblocking(False)
            p.sendto(q(0x7000 + probes, "a.test"), ("198.51.100.1", 53))
            pt, pid, probes = time.time(), 0x7000 + probes, probes + 1
    i += 100
    deadline = time.time() + 0.5
    while time.time() < deadline:
        try:
            for s in socks:
                s.recv(4096)
                got += 1
        except socket.timeout:
            if got >= sent:
                break
    p.settimeout(max(0.0, pt + 1 - time.time()))
    try:
        r = p.recv(4096)
        prompt += r[:2] == struct.pack(">H", pid) and time.time() - pt < 1
    except OSError:
        pass
    p.close()
print(sent, got, round(10 - (end - time.time()), 1), probes, prompt)
EOF
)
read -r sent got secs probes prompt <<<"$flood"
echo "# flood: sent $sent, answers $got, ${secs}s; a.test probes $prompt/$probes within 1 s"
tb_expect_eq "3000 queries sent" 3000 "$sent"
tb_check "most were answered (${got:-0}/3000)" test "${got:-0}" -ge 2700
tb_check "during the flood: a.test answered within 1 s (${prompt:-0} of ${probes:-0} probes, one a burst)" \
    test "${probes:-0}" -eq 30 -a "${prompt:-0}" -ge 28
tb_check "after the query flood: a.test still prompt" prompt
tb_check "egressd is alive" kill -0 "$pid"
deny_lines=$(grep -c '"ev":"dns.deny"' <(tail -c +$((mark + 1)) "$TB_EGRESSD_LOG"))
tb_check "1000 distinct denied names: log lines rate-limited ($deny_lines <= $((100 + 20 * 11)))" \
    test "$deny_lines" -le $((100 + 20 * 11))
tb_check "but some are logged ($deny_lines)" test "$deny_lines" -ge 20
rss1=$(rss)
echo "# RSS before ${rss0} kB, after ${rss1} kB"
tb_check "RSS grew by less than 64 MiB ($(((rss1 - rss0) / 1024)) MiB)" \
    test $((rss1 - rss0)) -lt 65536
tb_assert_no_dns_query dns1 '.*flood\.evil\.test'

# --- 500 TCP connections held to the resolver --------------------------------------
out=$(tb_sandbox "$TB_PY" - <<'EOF'
import socket, struct, subprocess, sys, time
held = []
refused = 0
for i in range(500):
    try:
        held.append(socket.create_connection(("127.0.0.1", 15353), timeout=1))
    except OSError:
        refused += 1
def udp_ok():
    m = struct.pack(">HHHHHH", 0x6262, 0x0100, 1, 0, 0, 0) + b"\x01a\x04test\x00\x00\x01\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    s.sendto(m, ("127.0.0.1", 15353))
    try:
        return s.recv(4096)[:2] == b"\x62\x62"
    except OSError:
        return False
during = udp_ok()
# which of them egressd still holds: a closed one reads EOF (or a reset)
time.sleep(0.3)
kept = shut = 0
for s in held:
    s.setblocking(False)
    try:
        shut += s.recv(1) == b""
    except BlockingIOError:
        kept += 1
    except OSError:
        shut += 1
for s in held:
    s.close()
time.sleep(0.3)
def tcp_ok():
    m = struct.pack(">HHHHHH", 0x6363, 0x0100, 1, 0, 0, 0) + b"\x01a\x04test\x00\x00\x01\x00\x01"
    try:
        s = socket.create_connection(("127.0.0.1", 15353), timeout=2)
        s.settimeout(2)
        s.sendall(struct.pack(">H", len(m)) + m)
        return len(s.recv(2)) == 2 and s.recv(4096)[:2] == b"\x63\x63"
    except OSError:
        return False
print(len(held), refused, during, tcp_ok(), kept, shut)
EOF
)
read -r nheld refused during after kept shut <<<"$out"
echo "# tcp flood: $nheld connected, $refused failed; egressd kept $kept, closed $shut"
# The kernel completes every handshake; egressd then keeps at most
# DNS_TCP_CONNS_MAX (256) of them and closes the rest at once.
tb_check "the flood went well past the cap (${nheld:-0} connected)" \
    test "${nheld:-0}" -ge 400
tb_check "egressd kept at most its cap of 256 (${kept:-?}; closed ${shut:-?})" \
    test "${kept:-999}" -le 256
tb_check "... and held the clients up to it (${kept:-?} >= 250)" \
    test "${kept:-0}" -ge 250
tb_expect_eq "UDP answered while they were held" True "$during"
tb_expect_eq "a TCP client is served once they are gone" True "$after"
tb_assert_log "$TB_EGRESSD_LOG" dns.tcp.refused

# --- 200 connections held to the control API, from the node -------------------------
# The node holds them until the scenario has asked DNS (during), then
# lets go (HELD and GO are the handshake files).
HELD=$TB_DIR/api.held GO=$TB_DIR/api.go
tb_host "$TB_PY" - "$TB_SBX_HOST_IP4" "$TB_EGRESSD_TOKEN" "$HELD" "$GO" \
    >"$TB_DIR/api.flood" 2>&1 <<'EOF' &
import os, socket, sys, time
addr, tok, held_f, go_f = sys.argv[1:5]
held = []
for i in range(200):
    try:
        s = socket.create_connection((addr, 18080), timeout=1)
        s.sendall(b"GET /healthz HTTP/1.1\r\n")   # and never finish
        held.append(s)
    except OSError:
        pass
n = len(held)
open(held_f, "w").close()
end = time.time() + 30
while not os.path.exists(go_f) and time.time() < end:
    time.sleep(0.05)
for s in held:
    s.close()
time.sleep(0.3)
def ok():
    s = socket.create_connection((addr, 18080), timeout=3)
    s.settimeout(3)
    s.sendall(("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Connection: close\r\n\r\n" % tok).encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    return data.startswith(b"HTTP/1.1 200")
print(n, ok())
EOF
flood_pid=$!
tb_wait_file "$HELD" 30 || tb_fail "the API flood never held its connections"
tb_check "DNS unaffected while the API flood is held" prompt
touch "$GO"
wait "$flood_pid"
read -r napi api_after <"$TB_DIR/api.flood"
echo "# api flood: $napi connections held"
tb_check "the node opened 200 API connections ($napi)" test "${napi:-0}" -ge 64
tb_expect_eq "the API serves again once they are gone" True "$api_after"
rss2=$(rss)
tb_check "RSS still within 64 MiB of the start ($(((rss2 - rss0) / 1024)) MiB)" \
    test $((rss2 - rss0)) -lt 65536
tb_finish
