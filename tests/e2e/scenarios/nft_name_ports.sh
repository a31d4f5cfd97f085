#!/bin/bash
# nft_name_ports (issue 16 item 7): ports and protocols on name rules.
# "a.test, only 443": real clients (curl by name, over IPv4 and IPv6, and
# the echo origins) reach the listed ports of the name's learned addresses
# and nothing else; a name without limits still opens every port; names
# sharing an address add up (a wildcard with its own port, an alias
# without limits); a tightening through the API prunes the ports at once,
# cuts a live connection on a port no longer listed, and GET /policy shows
# the limits; after kill -9 and a restart the limited elements are
# adopted with their names, and a later tightening still prunes them;
# an element kept for one name after another sharing the address is
# denied is re-added under the name still allowed.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
. "$(dirname "$0")/../tools/nft_driver.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN="np-$TB_ID-$RANDOM$RANDOM"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TB_EGRESSD_TOKEN")
API_BODY=$TB_DIR/api.body
# API METHOD [BODY]: the operator, from the node's namespace, on /policy.
api() {
	local args=()
	[ $# -ge 2 ] && args+=(-H "Content-Type: application/json" \
	    --data-binary "$2")
	tb_host curl -sS --max-time 5 -o "$API_BODY" -w '%{http_code}' \
	    -X "$1" -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" \
	    "${args[@]}" "http://$TB_SBX_HOST_IP4:18080/policy" 2>/dev/null
	return 0
}
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test, ports: [443]}
  - {action: allow, target: "*.a.test", ports: [8080], protocols: [tcp]}
  - {action: allow, target: b.test}
  - {action: allow, target: c.test, ports: [7], protocols: [udp]}
  - {action: allow, target: shared-a.test}
dns: {ttlMin: 60, ttlMax: 300}
EOF
)
tb_start_egressd --policy "$pol"

# CURL FAMILY URL: the HTTP status ("000" when the connection failed).
http() {
	tb_sandbox curl "-$1" -sS -o /dev/null -w '%{http_code}' \
	    --max-time 3 "$2" 2>/dev/null
	return 0
}
opens() { tb_expect_eq "$1" 200 "$(http "$2" "$3")"; }
closed() { tb_expect_eq "$1" 000 "$(http "$2" "$3")"; }
# HOLD HOST PORT SECONDS: one TCP connection to an echo port, a byte
# every 200 ms; "up" once connected, then "ok N" or "err ERRNO after N".
hold='
import errno, socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
print("up", flush=True)
n, end = 0, time.monotonic() + float(sys.argv[3])
try:
    while time.monotonic() < end:
        s.sendall(b"x")
        if s.recv(4) != b"x":
            raise OSError(errno.EPIPE, "EOF")
        n += 1
        time.sleep(0.2)
except OSError as e:
    print("err %s after %d" % (errno.errorcode.get(e.errno, "?"), n), flush=True)
    sys.exit(1)
print("ok %d" % n, flush=True)
'

# --- a.test: only 443 (tcp and udp, no protocols given) ----------------
for f in 4 6; do
	opens "a.test https 443 opens (IPv$f)" $f https://a.test/
	closed "a.test http 80 stays closed (IPv$f)" $f http://a.test/
	closed "a.test https 8443 stays closed (IPv$f)" $f https://a.test:8443/
	closed "a.test http 8080 stays closed (IPv$f)" $f http://a.test:8080/
done
nd_fails_fast "a.test's address: tcp echo 9000 refused at once" \
    tcp "$TB_ORIGIN_A4" 9000
nd_fails_fast "a.test's address: udp echo 7 refused at once" \
    udpsend "$TB_ORIGIN_A4" 7
tb_check "limited4 holds a.test's address . tcp . 443, with its name" \
    bash -c "ip netns exec $TB_SBX nft list set inet egressd limited4 |
        grep -q '$TB_ORIGIN_A4 . tcp . 443 .*comment \"a.test\"'"
tb_check "limited6 holds its IPv6 address . udp . 443" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd limited6 |
        grep -q '$TB_ORIGIN_A6 . udp . 443 '"
tb_check_fails "and the plain learned4 does not" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd learned4 |
        grep -q '$TB_ORIGIN_A4'"

# --- b.test: no limit, every port as before ----------------------------
for f in 4 6; do
	opens "b.test http 80 (IPv$f)" $f http://b.test/
	opens "b.test http 8080 (IPv$f)" $f http://b.test:8080/
	opens "b.test https 443 (IPv$f)" $f https://b.test/
	opens "b.test https 8443 (IPv$f)" $f https://b.test:8443/
done
nd_works "b.test's address: tcp echo 9000" tcp "$TB_ORIGIN_B4" 9000
nd_works "b.test's address: udp echo 7" udp "$TB_ORIGIN_B4" 7
nd_works "b.test's IPv6 address: udp echo 7" udp "$TB_ORIGIN_B6" 7

# --- c.test: udp 7 only; shared-a.test (same address, no limit) adds up -
tb_expect_eq "c.test resolves" "$TB_ORIGIN_C4" \
    "$(tb_sandbox dig +short +time=2 +tries=1 c.test A)"
nd_works "c.test's address: udp echo 7 (listed)" udp "$TB_ORIGIN_C4" 7
nd_fails_fast "c.test's address: tcp echo 7 refused (protocol not listed)" \
    tcp "$TB_ORIGIN_C4" 7
closed "c.test http 80 refused" 4 http://c.test/
opens "shared-a.test (same address, no limit) opens http 80" 4 \
    http://shared-a.test/
opens "and so c.test's too: one address, the union of its names" 4 \
    http://c.test/

# --- www.a.test (same address as a.test) adds tcp 8080 ------------------
opens "www.a.test http 8080 (wildcard with its own port)" 4 \
    http://www.a.test:8080/
opens "a.test https 443 still opens" 4 https://a.test/
closed "a.test's address http 80 still closed" 4 http://a.test/

# --- a tightening through the API --------------------------------------
# b.test: tcp 9000 held open across it, then only 443-8443 (minus 8443).
hb=$TB_DIR/hold_b.out
tb_sandbox_bg "$hb" "$TB_PY" -c "$hold" "$TB_ORIGIN_B4" 9000 6
ph=$TB_LAST_PID
tb_check "a connection to b.test's tcp echo 9000 is up" \
    tb_wait_line "$hb" '^up' 3
m=$(tb_log_mark "$TB_EGRESSD_LOG")
p2='{"defaultAction":"deny","egress":[
 {"action":"deny","target":"b.test","ports":[8443],"protocols":["tcp"]},
 {"action":"allow","target":"b.test","ports":["443-8443"],"protocols":["tcp"]},
 {"action":"allow","target":"a.test","ports":[443]},
 {"action":"allow","target":"c.test","ports":[7],"protocols":["udp"]}]}'
tb_expect_eq "POST the tighter policy" 200 "$(api POST "$p2")"
tb_expect_eq "GET /policy" 200 "$(api GET)"
tb_check "GET /policy shows b.test's deny with port and protocol" \
    grep -q '{"action":"deny","target":"b.test","ports":\[8443\],"protocols":\["tcp"\]}' \
    "$API_BODY"
tb_check "and a.test's port" \
    grep -q '{"action":"allow","target":"a.test","ports":\[443\]}' \
    "$API_BODY"
wait "$ph"
tb_expect_match "the live connection on tcp 9000 was cut" '^err ' \
    "$(tail -n 1 "$hb")"
tb_assert_log --since "$m" --min 1 "$TB_EGRESSD_LOG" nft.flows_cut
# no new DNS answer needed: the learned address was re-judged
nd_fails_fast "b.test's address: tcp 80 refused at once" \
    tcp "$TB_ORIGIN_B4" 80
nd_fails_fast "b.test's IPv6 address: tcp 80 refused at once" \
    tcp "$TB_ORIGIN_B6" 80
nd_fails_fast "b.test's address: tcp echo 9000 refused now" \
    tcp "$TB_ORIGIN_B4" 9000
nd_fails_fast "b.test's address: udp echo 7 refused now" \
    udpsend "$TB_ORIGIN_B4" 7
nd_works "b.test's address: tcp 8080 still open (listed)" \
    tcp "$TB_ORIGIN_B4" 8080
nd_fails_fast "b.test's address: tcp 8443 refused (the deny rule)" \
    tcp "$TB_ORIGIN_B4" 8443
nd_works "b.test's IPv6 address: tcp 443 still open" tcp "$TB_ORIGIN_B6" 443
nd_fails_fast "c.test's address: tcp 80 refused (shared-a.test gone)" \
    tcp "$TB_ORIGIN_C4" 80
nd_works "c.test's address: udp echo 7 still open" udp "$TB_ORIGIN_C4" 7
nd_fails_fast "a.test's address: tcp 8080 refused (*.a.test gone)" \
    tcp "$TB_ORIGIN_A4" 8080
# The element was last learned for www.a.test, which is denied now: it is
# kept for a.test and must say so, or a restart would adopt it under the
# denied name and prune what the policy allows.
tb_check "limited4 now names a.test for its address, not www.a.test" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd limited4 |
        grep -q '$TB_ORIGIN_A4 . tcp . 443 .*comment \"a.test\"'"
opens "b.test https 443 by name (a new answer, into the limited set)" 6 \
    https://b.test/
closed "b.test http 80 by name stays closed" 6 http://b.test/

# --- restart: the limited elements come back with their names ----------
tb_stop_egressd KILL
pol2=$(tb_policy_file policy2.json <<<"$p2")
tb_start_egressd --policy "$pol2"
nd_works "after kill -9 and restart: a.test's tcp 443 open, no new answer" \
    tcp "$TB_ORIGIN_A4" 443
nd_fails_fast "and its tcp 80 still refused" tcp "$TB_ORIGIN_A4" 80
tb_check "limited4 still names a.test" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd limited4 |
        grep -q '$TB_ORIGIN_A4 . tcp . 443 .*comment \"a.test\"'"
p3='{"defaultAction":"deny","egress":[{"action":"allow","target":"c.test","ports":[7],"protocols":["udp"]}]}'
tb_expect_eq "POST a policy without a.test and b.test" 200 \
    "$(api POST "$p3")"
nd_fails_fast "a.test's address pruned by name after the restart" \
    tcp "$TB_ORIGIN_A4" 443
nd_fails_fast "b.test's too" tcp "$TB_ORIGIN_B4" 8080
tb_check_fails "limited4 no longer holds a.test's address" bash -c \
    "ip netns exec $TB_SBX nft list set inet egressd limited4 |
        grep -q '$TB_ORIGIN_A4 '"
nd_works "c.test's address: udp echo 7 still open" udp "$TB_ORIGIN_C4" 7
tb_finish
