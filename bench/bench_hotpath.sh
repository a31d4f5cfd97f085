#!/bin/bash
# bench_hotpath.sh: does netlink work delay DNS answers? (#15 item 5)
#
# Usage (root): EGRESSD_BIN=build/egressd/egressd bench/bench_hotpath.sh
#   BENCH_FLOWS   conntrack entries loaded in the sandbox (default 100000)
#   BENCH_RULES   CIDR rules of the big commit (default 4000)
#   BENCH_SECONDS seconds of each measured window (default 4)
#
# Layout as bench_dns.sh (two throwaway namespaces joined by one veth,
# nothing else): an upstream dnsmasq answering *.bench.test, and the
# sandbox with egressd (policy: allow *.bench.test and the upstream's
# 198.51.100.0/24). A probe in the sandbox sends a query for one of 50
# cached names every 2 ms on a fixed schedule (latency counted from the
# scheduled send, so a stall also counts against the queries queued
# behind it) and reports p50/p99/max per window:
#   idle       nothing else happens;
#   commit     a PATCH of BENCH_RULES /128 deny rules (one big batch),
#              before any conntrack load;
#   flows      BENCH_FLOWS UDP flows to 198.51.100.1 sit in conntrack
#              (nf_conntrack_udp_timeout raised in the sandbox namespace;
#              the upstream drops them), nothing else happens: the renew
#              timer's dump (every 10 s) reads them all;
#   cut        with those flows, a PATCH that adds one unrelated deny: the
#              daemon re-judges every conntrack entry (the cut pass);
#   both       with those flows, a PATCH of BENCH_RULES other rules: the
#              big apply, then a cut pass over every entry.
# Target (#15): p99 of every window within 2x of idle's.
# The API call's own duration is printed too: an answer may wait for
# netlink, the resolver should not. Cached names never touch nft (learn
# memo), so what they wait for is the loop.
set -u -o pipefail

EGRESSD_BIN=${EGRESSD_BIN:-build/egressd/egressd}
FLOWS=${BENCH_FLOWS:-100000}
RULES=${BENCH_RULES:-4000}
DUR=${BENCH_SECONDS:-4}
TOKEN=bench-$$-$RANDOM
. "$(dirname "$0")/bench_lib.sh"
bench_init bench_hotpath bh
bench_need_root
command -v dnsmasq >/dev/null || die "dnsmasq not installed"
bench_pair
ip -n "$SBX" route add default via "$UP_IP"
ip netns exec "$SBX" sysctl -qw net.netfilter.nf_conntrack_udp_timeout=600 \
    2>/dev/null || true

ip netns exec "$UP" nft -f - <<'EOF' || die "nft in the upstream"
table inet sink {
	chain in {
		type filter hook input priority 0; policy accept;
		udp dport 20000-65000 drop
	}
}
EOF
bench_upstream

mkdir -p "$DIR/rules"
cat >"$DIR/policy.yaml" <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: "*.bench.test"}
  - {action: allow, target: "198.51.100.0/24"}
EOF
printf '%s\n' "$TOKEN" >"$DIR/token"
chmod 0600 "$DIR/token"
ip netns exec "$SBX" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    "$EGRESSD_BIN" --policy "$DIR/policy.yaml" --log-file "$DIR/egressd.log" \
    --dns-upstream "$UP_IP" --http-addr "$SBX_IP:18080" \
    --api-token-file "$DIR/token" --max-rules 0 \
    --rules-dir "$DIR/rules" >"$DIR/egressd.out" 2>&1 &
EGD=$!
bench_wait_ready "$EGD"

# probe SECONDS [ACTION...]: queries every 2 ms for SECONDS; ACTION (a
# command) starts 0.5 s in. Prints "p50 p99 max lost action_s".
cat >"$DIR/probe.py" <<'EOF'
import os, select, socket, struct, subprocess, sys, time
dur = float(sys.argv[1]); action = sys.argv[2:]
names = [b"c%d.bench.test" % i for i in range(50)]
def q(qid, name):
    wire = b"".join(bytes([len(l)]) + l for l in name.split(b".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + wire + b"\0\1\0\1"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", 15353)); s.setblocking(False)
for n in names:  # warm the cache
    s.send(q(0, n))
time.sleep(0.3)
try:
    while True: s.recv(4096)
except BlockingIOError:
    pass
sent, lat, proc, t_act = {}, [], None, None
t0 = time.monotonic(); k = 0
while True:
    now = time.monotonic()
    if action and proc is None and now - t0 >= 0.5:
        ta = now; proc = subprocess.Popen(action, stdout=subprocess.DEVNULL)
    if proc is not None and t_act is None and proc.poll() is not None:
        t_act = time.monotonic() - ta
    due = t0 + k * 0.002
    if due <= now and now - t0 < dur:
        qid = (k % 65535) + 1
        try:
            s.send(q(qid, names[k % len(names)])); sent[qid] = due
        except BlockingIOError:
            pass
        k += 1
        continue
    if now - t0 >= dur + 2 and (proc is None or t_act is not None):
        break
    r, _, _ = select.select([s], [], [], max(0.0, min(due - now, 0.05)))
    if r:
        try:
            while True:
                m = s.recv(4096)
                qid = struct.unpack(">H", m[:2])[0]
                if qid in sent:
                    lat.append(time.monotonic() - sent.pop(qid))
        except BlockingIOError:
            pass
lat.sort()
p = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))] * 1000 if lat else float("nan")
print("%.3f %.3f %.3f %d %s" % (p(0.5), p(0.99), lat[-1] * 1000 if lat else float("nan"),
      len(sent), "%.3f" % t_act if t_act is not None else "-"))
EOF

# the operator's side: the API port is closed to the sandbox itself
patch_cmd() {
	PATCH=(ip netns exec "$UP" curl -sS -o /dev/null --max-time 60
	    -X PATCH -H "OPENSANDBOX-EGRESS-AUTH: $TOKEN"
	    --data-binary "@$1" "http://$SBX_IP:18080/policy")
}
probe() { ip netns exec "$SBX" python3 "$DIR/probe.py" "$@"; }

declare -A R
R[idle]=$(probe "$DUR")

python3 - "$RULES" >"$DIR/big.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
print(json.dumps([{"action": "deny", "target": "2001:db8:ff::%x/128" % i}
                  for i in range(n)]))
EOF
patch_cmd "$DIR/big.json"
R[commit]=$(probe "$DUR" "${PATCH[@]}")

# conntrack load: FLOWS distinct UDP tuples to the upstream (dropped there)
ip netns exec "$SBX" python3 - "$UP_IP" "$FLOWS" <<'EOF' || die "flows"
import socket, sys
dst, n = sys.argv[1], int(sys.argv[2])
per = 2000
socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range((n + per - 1) // per)]
i = 0
for s in socks:
    for p in range(per):
        if i == n: break
        s.sendto(b"x", (dst, 20000 + p)); i += 1
EOF
ct=$(ip netns exec "$SBX" sh -c 'cat /proc/net/nf_conntrack 2>/dev/null | wc -l' ||
    echo "?")
ct=$(ip netns exec "$SBX" conntrack -C 2>/dev/null || echo "$ct")
R[flows]=$(probe "$DUR")

printf '[{"action":"deny","target":"203.0.113.99/32"}]' >"$DIR/one.json"
patch_cmd "$DIR/one.json"
R[cut]=$(probe "$DUR" "${PATCH[@]}")

# both at once: another 4,000 rules while the 100k entries sit there (the
# apply, then a cut pass over them; the renew timer's dumps meanwhile)
python3 - "$RULES" >"$DIR/big2.json" <<'EOF2'
import json, sys
print(json.dumps([{"action": "deny", "target": "2001:db8:fe::%x/128" % i}
                  for i in range(int(sys.argv[1]))]))
EOF2
patch_cmd "$DIR/big2.json"
R[both]=$(probe "$DUR" "${PATCH[@]}")

cut_logged=$(grep -c '"ev":"nft.flows_cut"' "$DIR/egressd.log")
applied=$(grep -c '"ev":"nft.applied"' "$DIR/egressd.log")

echo
echo "bench_hotpath: cached queries every 2 ms, ${DUR}s windows, $(nproc) CPUs, conntrack entries ${ct}"
printf '%-8s %9s %9s %9s %6s %9s %9s\n' window p50_ms p99_ms max_ms lost api_s \
    p99/idle
read -r _ idle99 _ <<<"${R[idle]}"
for w in idle commit flows cut both; do
	read -r p50 p99 mx lost act <<<"${R[$w]}"
	printf '%-8s %9s %9s %9s %6s %9s %9s\n' "$w" "$p50" "$p99" "$mx" "$lost" \
	    "$act" "$(awk -v a="$p99" -v b="$idle99" 'BEGIN {printf "%.2f", a / b}')"
done
echo "nft.applied lines: $applied (start + 3 PATCHes = 4); nft.flows_cut lines: $cut_logged; rules in the big commit: $RULES"
