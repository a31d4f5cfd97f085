#!/bin/bash
# bench_startup.sh: how soon a freshly exec'd resolver answers, and whether
# queries sent while it starts are answered, refused or silently lost:
# egressd against dnsmasq --nftset doing the same job, in one run. A
# benchmark, not a test: it prints numbers and compares them with the
# targets (exec -> first answer < 100 ms; no query sent during start-up
# silently lost).
#
# Usage (root): EGRESSD_BIN=build/egressd/egressd bench/bench_startup.sh
#   BENCH_ROUNDS    starts per target (default 5)
#   BENCH_INTERVAL  ms between queries (default 5)
#   BENCH_DEFAULT_ROUTE=1  give the sandbox a default route (builds before
#                   the loopback self-check could not start without one)
#
# Layout (throwaway namespaces joined by one veth, nothing else):
#   bsu-<id>: the upstream, dnsmasq answering *.bench.test (A 203.0.113.7).
#   bss-<id>: the sandbox side, where each round starts one resolver and a
#             client (tests/e2e/tools/dns_trickle.py) that sends a query
#             every BENCH_INTERVAL ms from 20 ms before the exec, each from
#             a fresh socket, for 1.5 s, and waits up to 2 s per answer.
# Targets, one row per round:
#   dnsmasq      dnsmasq on 127.0.0.1:5300 (cache, --nftset), asked there
#   egressd      egressd (nft on), asked on its port, 127.0.0.1:15353
#   egressd-redir  egressd, asked at the upstream's address for a denied
#                name: the upstream answers (REFUSED) until the redirect is
#                in force, egressd (NXDOMAIN) after; "first" is egressd's
#                first NXDOMAIN, as a pod's stub resolver sees it
# "refused" queries met a closed port (ICMP, reported at once to the
# client); "lost" ones got nothing at all (the client waits for its retry
# timer: that is what must never happen).
set -u -o pipefail

EGRESSD_BIN=${EGRESSD_BIN:-build/egressd/egressd}
ROUNDS=${BENCH_ROUNDS:-5}
INTERVAL=${BENCH_INTERVAL:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
TRICKLE=$HERE/../tests/e2e/tools/dns_trickle.py
. "$(dirname "$0")/bench_lib.sh"
bench_init bench_startup bs
bench_need_root
command -v dnsmasq >/dev/null || die "dnsmasq not installed"
[ -r "$TRICKLE" ] || die "missing $TRICKLE"
bench_pair
[ "${BENCH_DEFAULT_ROUTE:-0}" = 1 ] &&
    ip -n "$SBX" route add default via "$UP_IP"

bench_upstream
for i in $(seq 100); do
	grep -q 203.0.113.7 <<<"$(ip netns exec "$SBX" dig +short +time=1 +tries=1 \
	    "@$UP_IP" probe.bench.test A 2>/dev/null)" && break
	[ "$i" -eq 100 ] && die "upstream dnsmasq did not start"
	sleep 0.1
done
# The veth is active: the first exchange above went through.

bench_policy_file
ip netns exec "$SBX" nft -f - <<'EOF' || die "nft for dnsmasq"
table inet dnsmasqbench {
	set learned4 { type ipv4_addr; flags timeout; timeout 300s; }
}
EOF

# round TARGET N: one start; the client's JSON in $DIR/TARGET.N.json
round()
{
	local target=$1 n=$2 server port name cmd=()
	case $target in
	dnsmasq)
		server=127.0.0.1 port=5300 name=w$n.bench.test
		cmd=(dnsmasq --keep-in-foreground --no-daemon --no-resolv
		    --no-hosts --no-poll --user=root --group=root --pid-file=
		    --bind-interfaces --listen-address=127.0.0.1 --port=5300
		    --server=/bench.test/"$UP_IP" --address=/#/
		    --nftset=/bench.test/4#inet#dnsmasqbench#learned4
		    --cache-size=10000 --log-facility=/dev/null)
		;;
	egressd|egressd-redir)
		server=127.0.0.1 port=15353 name=w$n.bench.test
		[ "$target" = egressd-redir ] &&
		    server=$UP_IP port=53 name=x$n.denied.test
		cmd=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$EGRESSD_BIN"
		    --policy "$DIR/policy.yaml" --log-file "$DIR/egressd.log"
		    --dns-upstream "$UP_IP" --http-addr 127.0.0.1:18080
		    --rules-dir "$DIR/rules" --teardown-on-exit)
		;;
	esac
	ip netns exec "$SBX" python3 "$TRICKLE" --server "$server" \
	    --port "$port" --name "$name" --interval-ms "$INTERVAL" \
	    --timeout-ms 2000 --max-seconds 1.5 --max-queries 2000 \
	    --exec-after-ms 20 -- "${cmd[@]}" \
	    >"$DIR/$target.$n.json" 2>"$DIR/$target.$n.err" ||
	    die "client failed: $(tail -3 "$DIR/$target.$n.err")"
	# a table left behind would redirect dnsmasq's upstream queries
	ip netns exec "$SBX" nft delete table inet egressd 2>/dev/null
}

for n in $(seq "$ROUNDS"); do
	for target in dnsmasq egressd egressd-redir; do
		round "$target" "$n"
	done
done

echo
echo "bench_startup: $ROUNDS starts per target, a query every ${INTERVAL} ms" \
    "from 20 ms before exec for 1.5 s, $(nproc) CPUs"
python3 - "$DIR" "$ROUNDS" <<'EOF'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
print("%-14s %9s %9s %9s %7s %8s %6s" % ("target", "first_ms", "median",
      "max", "sent", "refused", "lost"))
worst = {}
for t in ("dnsmasq", "egressd", "egressd-redir"):
    firsts, sent, refused, lost = [], 0, 0, 0
    for n in range(1, rounds + 1):
        r = json.load(open("%s/%s.%d.json" % (d, t, n)))
        if t == "egressd-redir":
            f = r["first_rcode_ms"].get("NXDOMAIN")
        else:
            f = r["first_rcode_ms"].get("NOERROR")
        firsts.append(f if f is not None else float("inf"))
        sent += r["sent"]
        refused += r["refused"]
        lost += r["unanswered"] + r["send_failed"] + r["capped"]
    print("%-14s %9s %9.1f %9.1f %7d %8d %6d" % (
        t, " ".join("%.0f" % f for f in firsts),
        statistics.median(firsts), max(firsts), sent, refused, lost))
    worst[t] = (max(firsts), lost)
# Where egressd's start goes: its log lines, ms after exec (median).
import datetime
evs = ("policy.loaded", "dns.start", "nft.applied", "nft.selfcheck_passed",
       "egressd.ready")
log = []
for line in open(d + "/egressd.log"):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    ts = datetime.datetime.strptime(j["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    ts = ts.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000.0
    log.append((ts, j["ev"]))
phase = {e: [] for e in evs}
for t in ("egressd", "egressd-redir"):
    for n in range(1, rounds + 1):
        x = json.load(open("%s/%s.%d.json" % (d, t, n)))["exec_unix_ms"]
        for e in evs:
            ts = [a for a, b in log if b == e and a >= x - 1]
            if ts:
                phase[e].append(min(ts) - x)
print("egressd log, ms after exec (median of %d starts, 1 ms log "
      "resolution): %s" % (2 * rounds, ", ".join(
          "%s %.0f" % (e, statistics.median(v)) for e, v in phase.items()
          if v)))
for t in ("egressd", "egressd-redir"):
    f, l = worst[t]
    print("%-14s exec -> first answer, worst %.1f ms (target < 100): %s;"
          " lost %d (target 0): %s" % (t, f, "ok" if f < 100 else "MISSED",
                                        l, "ok" if l == 0 else "MISSED"))
EOF
