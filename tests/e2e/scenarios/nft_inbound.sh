#!/bin/bash
# nft_inbound (issue 16 item 13): flows a peer starts. host-<id> (192.0.2.1,
# 2001:db8:3::1) reaches the pod IP; policy: deny by default, a.test only.
#   - UDP: the peer sends one datagram to the sandbox's UDP server, which
#     answers it (and keeps answering): the answers are the reply direction
#     of a flow the peer started and used to leave as "established" for
#     ever. Now they meet the policy (192.0.2.1 is not allowed): sendto
#     gets EPERM, the peer gets nothing. IPv4 and IPv6.
#   - TCP: a sandbox service reached on the pod IP (as the OpenSandbox
#     server reaches execd) keeps working, and so does a ping of the pod.
#   - Pinned (EGRESSD_INBOUND_PORTS=7000,7002; --inbound-port is the flag,
#     unit-tested in test_config): connections to 7000 and 7002 and to the
#     API port work, a listener on 7001 cannot answer (its SYN-ACK is
#     dropped), and UDP stays closed.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_HTTP=":18080"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
tb_start_egressd --policy "$pol"

# UDPSRV PORT OUT: answers every datagram 3 times (0.2 s apart) on an IPv6
# dual-stack socket; writes "sent" or "err ERRNO" per answer to OUT.
udpsrv='
import errno, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1])))
out = open(sys.argv[2], "a", buffering=1)
out.write("listening\n")
while True:
    data, peer = s.recvfrom(512)
    for i in range(3):
        try:
            s.sendto(b"answer " + data, peer)
            out.write("sent\n")
        except OSError as e:
            out.write("err %s\n" % errno.errorcode.get(e.errno, "?"))
        time.sleep(0.2)
'
# TCPSRV PORT...: accepts on each port (dual stack), echoes one line.
tcpsrv='
import select, socket, sys
ls = []
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", int(p)))
    s.listen(16)
    ls.append(s)
print("listening", flush=True)
while True:
    r, _, _ = select.select(ls, [], [])
    for s in r:
        c, _ = s.accept()
        c.settimeout(2)
        try:
            c.sendall(b"hello from the sandbox " + c.recv(64))
        except OSError:
            pass
        c.close()
'
# PEER_UDP HOST PORT: one datagram, then prints every answer for 2 s.
peer_udp='
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.3)
s.sendto(b"knock", (host, port))
n, end = 0, time.monotonic() + 2
while time.monotonic() < end:
    try:
        s.recv(512); n += 1
    except socket.timeout:
        pass
print("answers %d" % n)
'
# PEER_TCP HOST PORT: "ok <reply>" or "err <what>" (3 s connect timeout).
peer_tcp='
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    c.sendall(b"hi"); print("ok", c.recv(64).decode())
except OSError as e:
    print("err", type(e).__name__)
'

us=$TB_SBX_HOME/udp.out
tb_sandbox_bg "$TB_DIR/udpsrv.log" "$TB_PY" -c "$udpsrv" 6000 "$us"
tb_check "the sandbox's UDP server listens" tb_wait_line "$us" '^listening' 5
tb_sandbox_bg "$TB_DIR/tcpsrv.log" "$TB_PY" -c "$tcpsrv" 7000 7001 7002
tb_check "the sandbox's TCP servers listen" tb_wait_line "$TB_DIR/tcpsrv.log" '^listening' 5

for a in "$TB_SBX_HOST_IP4" "$TB_SBX_HOST_IP6"; do
	tb_expect_eq "UDP: a peer's datagram to [$a]:6000 gets no answer out" \
	    "answers 0" "$(tb_host "$TB_PY" -c "$peer_udp" "$a" 6000)"
done
tb_check "the sandbox's answers were refused at once (EPERM)" \
    tb_wait_line "$us" '^err EPERM' 3
tb_check_fails "no answer of the sandbox left" grep -q '^sent' "$us"
for a in "$TB_SBX_HOST_IP4" "$TB_SBX_HOST_IP6"; do
	tb_expect_match "TCP: a peer reaches the sandbox's service on [$a]:7000" \
	    '^ok hello from the sandbox hi' "$(tb_host "$TB_PY" -c "$peer_tcp" "$a" 7000)"
	tb_expect_match "TCP: and on [$a]:7001 (no ports pinned)" \
	    '^ok hello' "$(tb_host "$TB_PY" -c "$peer_tcp" "$a" 7001)"
done
tb_check "a peer's ping of the pod is answered (IPv4)" \
    tb_host ping -c 1 -W 2 "$TB_SBX_HOST_IP4"
tb_check "a peer's ping of the pod is answered (IPv6)" \
    tb_host ping -6 -c 1 -W 2 "$TB_SBX_HOST_IP6"
ip=$(tb_sandbox dig +short +time=2 +tries=1 a.test A)
tb_check "the sandbox's own connections work (a.test)" \
    tb_sandbox curl -sS -o /dev/null --max-time 3 "http://$ip/"

# --- pinned inbound ports -------------------------------------------------
tb_stop_egressd TERM
TB_EGRESSD_ENV=(EGRESSD_INBOUND_PORTS=7000,7002)
tb_start_egressd --policy "$pol"
tb_check "inbound_ports set: 7000, 7002 and the API's 18080" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd inbound_ports | tr -d '\n' | grep -Eq 'elements = \{ ?7000, 7002, 18080 ?\}'"
for a in "$TB_SBX_HOST_IP4" "$TB_SBX_HOST_IP6"; do
	tb_expect_match "pinned: [$a]:7000 works" '^ok hello' \
	    "$(tb_host "$TB_PY" -c "$peer_tcp" "$a" 7000)"
	tb_expect_match "pinned: [$a]:7002 works" '^ok hello' \
	    "$(tb_host "$TB_PY" -c "$peer_tcp" "$a" 7002)"
	tb_expect_match "pinned: [$a]:7001 cannot answer" \
	    '^err (TimeoutError|timeout)' \
	    "$(tb_host "$TB_PY" -c "$peer_tcp" "$a" 7001)"
done
tb_expect_match "pinned: the API port answers a peer" '^[1-5][0-9][0-9]$' \
    "$(tb_host curl -sS -o /dev/null -w '%{http_code}' --max-time 3 \
        "http://$TB_SBX_HOST_IP4:18080/policy")"
tb_expect_eq "pinned: UDP stays closed" "answers 0" \
    "$(tb_host "$TB_PY" -c "$peer_udp" "$TB_SBX_HOST_IP4" 6000)"
tb_finish
