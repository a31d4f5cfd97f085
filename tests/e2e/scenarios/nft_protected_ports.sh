#!/bin/bash
# nft_protected_ports: other services on the pod's loopback (a sidecar's
# admin port, say) are closed to the sandbox when the operator lists them
# with --protect-port, on every local address; unlisted loopback services
# (the sandbox's own dev servers) keep working. The positive control: the
# protected port answers the sandbox on each of those addresses before
# egressd starts, and the unlisted one still does after, on each.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress: []
EOF
)
# Two "sidecar" listeners in the pod, started by root like another container.
for p in 9901 9902; do
	tb_sandbox_root "$TB_PY" -c "
import socket, threading
def serve(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6: s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((addr, $p)); s.listen(16)
    while True:
        c, _ = s.accept(); c.sendall(b'hello\n'); c.close()
threading.Thread(target=serve, args=(socket.AF_INET6, '::'), daemon=True).start()
serve(socket.AF_INET, '0.0.0.0')
" >/dev/null 2>&1 &
	TB_PIDS+=("$!")
	{ tb_wait_port "$TB_SBX" tcp 0.0.0.0 "$p" 5 ||
	    tb_wait_port "$TB_SBX" tcp '*' "$p" 5; } ||
	    tb_die "the sidecar on port $p did not start"
done
ADDRS=(127.0.0.1 ::1 "$TB_SBX_IP4" "$TB_SBX_IP6")

get() { # ADDR PORT
	tb_sandbox "$TB_PY" -c "
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
print(s.recv(16).decode().strip())" "$1" "$2"
}
for a in "${ADDRS[@]}"; do
	tb_expect_eq "before egressd: port 9901 answers the sandbox on $a" \
	    hello "$(get "$a" 9901)"
done

tb_start_egressd --policy "$pol" --protect-port 9901
for a in "${ADDRS[@]}"; do
	tb_check_fails "protected port 9901 is closed on $a" get "$a" 9901
	tb_expect_eq "... while unlisted 9902 still answers there" hello \
	    "$(get "$a" 9902)"
done
tb_expect_match "the ruleset lists the port" "9901" \
    "$(tb_sandbox_root nft list set inet egressd protected_ports)"
tb_finish
