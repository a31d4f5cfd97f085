#!/bin/bash
# bench_dns.sh: egressd's filtering resolver against dnsmasq --nftset doing
# the same job, and against the upstream alone, in one run. A benchmark,
# not a test: it prints numbers and compares them with the targets
# (issue 36: cached and denied >= 1.2x dnsmasq, shared-address >= 1.5x,
# unique-address >= 2.5x).
#
# Usage (root): EGRESSD_BIN=build/egressd/egressd bench/bench_dns.sh
#   BENCH_SECONDS  seconds per measurement (default 5)
#   BENCH_CLIENTS  dnsperf clients (default 4)
#   BENCH_OUTSTANDING  queries in flight (default 200)
#   BENCH_LOADS    loads to measure (default "cached uncached unique denied")
#   BENCH_DNSMASQ_FW  (default 1; 0 leaves them out) also measure dnsmasq
#                  (cached and denied) behind egressd's own ruleset: after
#                  egressd's cells, with egressd still running idle, its
#                  table in place (its port-53 redirect makes egressd
#                  dnsmasq's upstream for the warm-up), conntrack on every
#                  packet as in egressd's cells. The "dnsmasq_fw" rows:
#                  dnsmasq --nftset with the default-deny firewall a
#                  deployment of it needs (without one, its allowed set
#                  guards nothing), so egressd/dnsmasq_fw compares the two
#                  resolvers on the same kernel path; the "dnsmasq" rows
#                  (no firewall at all) stay, and the floors are printed
#                  against both.
#   BENCH_CALLGRIND=1  instead of dnsperf's timed cells: dnsmasq and egressd
#                  each under valgrind --tool=callgrind, instructions per
#                  answered query for a fixed query count (BENCH_CG_NAMES,
#                  default 4000, below both caches' sizes): "cached" asks
#                  that many distinct names once to fill the cache, then
#                  counts the same names again (every one a hit, none the
#                  previous query's name); "denied" counts as many distinct
#                  denied names; "cached0x20" the cached names again, each
#                  letter's case random (as 0x20-randomizing resolvers
#                  ask: the cached answer's spelling no longer matches).
#                  BENCH_STRACE=1 does the same under strace -c -f
#                  (system calls per query) instead. BENCH_CG_QPS caps
#                  dnsperf's rate (-Q): at a low rate each wakeup reads one
#                  query, which no batching helps.
#                  Dumps stay in BENCH_OUT (default /tmp/bench_dns.callgrind)
#
# Layout (throwaway namespaces joined by one veth, nothing else):
#   bdu-<id>: the upstream, dnsmasq answering *.bench.test (A 203.0.113.7,
#             AAAA 2001:db8::7, TTL 300) and NXDOMAIN/REFUSED otherwise.
#   bds-<id>: the sandbox side: first dnsmasq (127.0.0.1:5300, cache
#             10000, forwards only bench.test, NXDOMAIN for everything
#             else, --nftset into an inet table), then egressd (the real
#             daemon, nft on, policy "allow *.bench.test, deny the rest").
# dnsperf runs in bds-<id> and reports qps; latency percentiles come from
# its per-query verbose output.
#
# Loads: cached = 1000 names asked over and over (after a warm-up);
# uncached = every query a new name, every name on one address (each one
# forwarded; egressd's learn memo and dnsmasq's set see one element);
# unique = every query a new name on its own IPv6 address (AAAA of
# h-2001-db8-1000--N.uniq.bench.test, synthesized by the upstream: every
# answer is a new element to learn); denied = every query a new name
# outside the allowed domain (answered locally, never forwarded).
set -u -o pipefail

EGRESSD_BIN=${EGRESSD_BIN:-build/egressd/egressd}
DUR=${BENCH_SECONDS:-5}
CLIENTS=${BENCH_CLIENTS:-4}
OUTST=${BENCH_OUTSTANDING:-200}
LOADS=${BENCH_LOADS:-cached uncached unique denied}
CALLGRIND=${BENCH_CALLGRIND:-}
STRACE=${BENCH_STRACE:-}
CG_NAMES=${BENCH_CG_NAMES:-4000}
CG_OUT=${BENCH_OUT:-/tmp/bench_dns.callgrind}
. "$(dirname "$0")/bench_lib.sh"
bench_init bench_dns bd
bench_need_root
command -v dnsperf >/dev/null || die "dnsperf not installed"
command -v dnsmasq >/dev/null || die "dnsmasq not installed"
[ -z "$CALLGRIND" ] || command -v callgrind_control >/dev/null ||
    die "valgrind not installed"
[ -z "$STRACE" ] || command -v strace >/dev/null || die "strace not installed"
bench_pair
# A default route (to the upstream namespace, which routes nowhere), as a
# pod has one; egressd's start-up self-check itself needs none.
ip -n "$SBX" route add default via "$UP_IP"

wait_udp()
{
	local ns=$1 addr=$2 port=$3 i
	for i in $(seq 100); do
		ip netns exec "$ns" dig +short +time=1 +tries=1 -p "$port" \
		    "@$addr" probe.bench.test A >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# --- the upstream ---
ip netns exec "$UP" dnsmasq --keep-in-foreground --no-daemon --no-resolv \
    --no-hosts --no-poll --user=root --group=root --pid-file= \
    --bind-interfaces --listen-address="$UP_IP" --port=53 \
    --address=/bench.test/203.0.113.7 --address=/bench.test/2001:db8::7 \
    --synth-domain=uniq.bench.test,2001:db8:1000::/64,h- \
    --local-ttl=300 --cache-size=0 --dns-forward-max=10000 \
    --log-facility=/dev/null >"$DIR/up.err" 2>&1 &
PIDS+=($!)
wait_udp "$UP" "$UP_IP" 53 || die "upstream dnsmasq did not start"

# --- query files ---
python3 - "$DIR" "$DUR" "$CG_NAMES" <<'EOF'
import sys, random
d, dur, cgn = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = max(200000, dur * 120000)
r = random.Random(1)
with open(d + "/cached.txt", "w") as f:
    for i in range(1000):
        f.write("c%d.bench.test A\n" % i)
with open(d + "/unique.txt", "w") as f:
    for i in range(1, n + 1):
        hi, lo = i >> 16, i & 0xffff
        tail = "%x-%x" % (hi, lo) if hi else "%x" % lo
        f.write("h-2001-db8-1000--%s.uniq.bench.test AAAA\n" % tail)
with open(d + "/uncached.txt", "w") as f:
    for i in range(n):
        f.write("u%d-%x.bench.test A\n" % (i, r.getrandbits(32)))
with open(d + "/denied.txt", "w") as f:
    for i in range(n):
        f.write("d%d-%x.denied.test A\n" % (i, r.getrandbits(32)))
# The instruction counts' loads: distinct names, each cached one asked
# once to fill the cache and once counted.
with open(d + "/cgcached.txt", "w") as f:
    for i in range(cgn):
        f.write("k%d-%x.bench.test A\n" % (i, r.getrandbits(32)))
with open(d + "/cgdenied.txt", "w") as f:
    for i in range(cgn):
        f.write("x%d-%x.denied.test A\n" % (i, r.getrandbits(32)))
with open(d + "/cgcached.txt") as f, open(d + "/cgcached0x20.txt", "w") as g:
    for line in f:
        name, t = line.split()
        g.write("%s %s\n" % ("".join(c.upper() if r.getrandbits(1) else c
                                      for c in name), t))
EOF

# cpu_ticks PID: the CPU time PID (all its threads) has used, user and
# system, in clock ticks.
cpu_ticks()
{
	awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# run_perf LABEL LOAD ADDR PORT PID: one measurement; prints "qps p50 p99
# cpu_us codes", cpu_us the resolver's (PID's) CPU time per answered
# query: what its throughput is on an idle machine where it has a core
# of its own, and less at the mercy of the other load than qps is.
run_perf()
{
	local label=$1 load=$2 addr=$3 port=$4 pid=$5 out="$DIR/$1-$2.out" t0 t1
	t0=$(cpu_ticks "$pid")
	ip netns exec "$SBX" dnsperf -s "$addr" -p "$port" \
	    -d "$DIR/$load.txt" -l "$DUR" -c "$CLIENTS" -q "$OUTST" -v \
	    >"$out" 2>&1
	t1=$(cpu_ticks "$pid")
	python3 - "$out" "$((t1 - t0))" "$(getconf CLK_TCK)" <<'EOF'
import re, sys
qps, lat, codes, done = None, [], {}, 0
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s*Queries per second:\s+([0-9.]+)", line)
    if m:
        qps = float(m.group(1))
    m = re.match(r"\s*Queries completed:\s+([0-9]+)", line)
    if m:
        done = int(m.group(1))
    # verbose: "> NOERROR name A 0.000123" (status, name, type, seconds)
    m = re.match(r"> (\S+) \S+ \S+ ([0-9.]+)$", line.strip())
    if m:
        codes[m.group(1)] = codes.get(m.group(1), 0) + 1
        lat.append(float(m.group(2)))
lat.sort()
def pct(p):
    return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
top = ",".join("%s:%d" % kv for kv in sorted(codes.items(), key=lambda kv: -kv[1])[:2])
cpu = int(sys.argv[2]) * 1e6 / int(sys.argv[3]) / done if done else 0
print("%.0f %.3f %.3f %.1f %s" % (qps or 0, pct(0.50), pct(0.99), cpu,
    top or "-"))
EOF
}

declare -A R

measure()
{
	local label=$1 addr=$2 port=$3 pid=$4 load
	# warm the cache for the cached load
	ip netns exec "$SBX" dnsperf -s "$addr" -p "$port" -d "$DIR/cached.txt" \
	    -n 2 -c 1 >/dev/null 2>&1
	for load in $LOADS; do
		R[$label,$load]=$(run_perf "$label" "$load" "$addr" "$port" \
		    "$pid")
	done
}

# --- instruction (or system call) counts instead of timed cells ---
# prof_start LABEL CMD...: CMD in the sandbox, under valgrind when
# BENCH_CALLGRIND (PPID; ip netns exec execs, so $! is CMD's PID).
prof_start()
{
	local label=$1
	shift
	if [ -n "$CALLGRIND" ]; then
		set -- valgrind --tool=callgrind --compress-strings=no \
		    --trace-children=yes \
		    --callgrind-out-file="$CG_OUT/cg.%p" "$@"
	fi
	ip netns exec "$SBX" "$@" >"$DIR/$label.out" 2>&1 &
	PPID_=$!
	PIDS+=("$PPID_")
}

# prof_count LABEL LOAD PORT: one pass over $DIR/LOAD.txt against the
# resolver PPID_, counted; prints "instructions-or-syscalls/query answered".
prof_count()
{
	local label=$1 load=$2 port=$3 out="$DIR/$1-$2.prof" n tot sp
	if [ -n "$CALLGRIND" ]; then
		callgrind_control -z "$PPID_" >/dev/null 2>&1 ||
		    die "callgrind_control -z"
	else
		strace -c -f -q -p "$PPID_" -o "$DIR/$label-$load.strace" &
		sp=$!
		sleep 1
	fi
	ip netns exec "$SBX" dnsperf -s 127.0.0.1 -p "$port" \
	    -d "$DIR/$load.txt" -n 1 -c 1 -q 20 -t 10 \
	    ${BENCH_CG_QPS:+-Q "$BENCH_CG_QPS"} >"$out" 2>&1
	n=$(sed -n 's/^ *Queries completed: *\([0-9]*\).*/\1/p' "$out")
	if [ -n "$CALLGRIND" ]; then
		callgrind_control -d "$label-$load" "$PPID_" >/dev/null 2>&1 ||
		    die "callgrind_control -d"
		sleep 1
		f=$(ls "$CG_OUT/cg.$PPID_".[0-9]* 2>/dev/null | head -1)
		[ -n "$f" ] || die "$label: no callgrind dump"
		mv "$f" "$CG_OUT/$label-$load.callgrind"
		tot=$(awk '/^(summary|totals):/ {print $2}' \
		    "$CG_OUT/$label-$load.callgrind" | tail -1)
	else
		kill -INT "$sp"
		wait "$sp" 2>/dev/null
		tot=$(awk '$NF == "total" {print $4}' \
		    "$DIR/$label-$load.strace")
		cp "$DIR/$label-$load.strace" "$CG_OUT/"
	fi
	python3 -c "import sys; t,n=int(sys.argv[1] or 0),int(sys.argv[2] or 0); print('%.2f %d' % (t/n if n else 0, n) if t < 100 * n else '%.0f %d' % (t/n if n else 0, n))" "$tot" "$n"
}

prof_stop()
{
	kill "$PPID_"
	wait "$PPID_" 2>/dev/null
	bench_forget_pid "$PPID_"
}

if [ -n "$CALLGRIND$STRACE" ]; then
	rm -rf "$CG_OUT"
	mkdir -p "$CG_OUT"
	wait_s=1
	[ -n "$CALLGRIND" ] && wait_s=60
	declare -A P
	ip netns exec "$SBX" nft -f - <<'EOF' || die "nft for dnsmasq"
table inet dnsmasqbench {
	set learned4 { type ipv4_addr; flags timeout; timeout 300s; }
	set learned6 { type ipv6_addr; flags timeout; timeout 300s; }
}
EOF
	prof_start dnsmasq dnsmasq --keep-in-foreground --no-daemon \
	    --no-resolv --no-hosts --no-poll --user=root --group=root \
	    --pid-file= --bind-interfaces --listen-address=127.0.0.1 \
	    --port=5300 --server=/bench.test/"$UP_IP" --address=/#/ \
	    --nftset=/bench.test/4#inet#dnsmasqbench#learned4,6#inet#dnsmasqbench#learned6 \
	    --cache-size=10000 --dns-forward-max=10000 \
	    --log-facility=/dev/null
	wait_udp "$SBX" 127.0.0.1 5300 || die "filter dnsmasq did not start"
	ip netns exec "$SBX" dnsperf -s 127.0.0.1 -p 5300 \
	    -d "$DIR/cgcached.txt" -n 1 -c 1 -q 20 -t 10 >/dev/null 2>&1
	P[dnsmasq,cached]=$(prof_count dnsmasq cgcached 5300)
	P[dnsmasq,denied]=$(prof_count dnsmasq cgdenied 5300)
	P[dnsmasq,cached0x20]=$(prof_count dnsmasq cgcached0x20 5300)
	prof_stop
	bench_policy_file
	prof_start egressd env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	    "$EGRESSD_BIN" --policy "$DIR/policy.yaml" \
	    --log-file "$DIR/egressd.log" --dns-upstream "$UP_IP" \
	    --http-addr 127.0.0.1:18080 --rules-dir "$DIR/rules"
	bench_wait_ready "$PPID_" "$wait_s"
	ip netns exec "$SBX" dnsperf -s 127.0.0.1 -p 15353 \
	    -d "$DIR/cgcached.txt" -n 1 -c 1 -q 20 -t 10 >/dev/null 2>&1
	P[egressd,cached]=$(prof_count egressd cgcached 15353)
	P[egressd,denied]=$(prof_count egressd cgdenied 15353)
	P[egressd,cached0x20]=$(prof_count egressd cgcached0x20 15353)
	prof_stop
	unit=instructions
	[ -n "$CALLGRIND" ] || unit=syscalls
	echo
	echo "bench_dns: $unit per answered query, $CG_NAMES distinct names, dnsperf -c 1 -q 20${BENCH_CG_QPS:+ -Q $BENCH_CG_QPS}"
	printf '%-10s %-10s %12s %9s\n' target load "$unit/q" answered
	for label in dnsmasq egressd; do
		for load in cached denied cached0x20; do
			read -r per n <<<"${P[$label,$load]}"
			printf '%-10s %-10s %12s %9s\n' "$label" "$load" "$per" "$n"
		done
	done
	echo "dumps: $CG_OUT"
	exit 0
fi

# --- (a) the upstream alone ---
measure upstream "$UP_IP" 53 "${PIDS[0]}"

# --- (b) dnsmasq --nftset doing egressd's job ---
ip netns exec "$SBX" nft -f - <<'EOF' || die "nft for dnsmasq"
table inet dnsmasqbench {
	set learned4 { type ipv4_addr; flags timeout; timeout 300s; }
	set learned6 { type ipv6_addr; flags timeout; timeout 300s; }
}
EOF
# start_dnsmasq: the filtering dnsmasq on 127.0.0.1:5300; DMQ its PID.
start_dnsmasq()
{
	ip netns exec "$SBX" dnsmasq --keep-in-foreground --no-daemon \
	    --no-resolv --no-hosts --no-poll --user=root --group=root \
	    --pid-file= --bind-interfaces --listen-address=127.0.0.1 \
	    --port=5300 --server=/bench.test/"$UP_IP" --address=/#/ \
	    --nftset=/bench.test/4#inet#dnsmasqbench#learned4,6#inet#dnsmasqbench#learned6 \
	    --cache-size=10000 --dns-forward-max=10000 \
	    --log-facility=/dev/null >>"$DIR/dnsmasq.err" 2>&1 &
	DMQ=$!
}
start_dnsmasq
PIDS+=($DMQ)
wait_udp "$SBX" 127.0.0.1 5300 || die "filter dnsmasq did not start"
measure dnsmasq 127.0.0.1 5300 "$DMQ"
learned_dmq=$(ip netns exec "$SBX" nft list set inet dnsmasqbench learned4 |
    grep -c 203.0.113.7)
uniq_dmq=$(ip netns exec "$SBX" nft -j list set inet dnsmasqbench learned6 |
    grep -o '2001:db8:1000::[0-9a-f:]*' | wc -l)
kill "$DMQ"
wait "$DMQ" 2>/dev/null
ip netns exec "$SBX" nft delete table inet dnsmasqbench

# --- (c) egressd ---
bench_policy_file
ip netns exec "$SBX" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    "$EGRESSD_BIN" --policy "$DIR/policy.yaml" --log-file "$DIR/egressd.log" \
    --dns-upstream "$UP_IP" --http-addr 127.0.0.1:18080 \
    --rules-dir "$DIR/rules" >"$DIR/egressd.out" 2>&1 &
EGD=$!
bench_wait_ready "$EGD"
measure egressd 127.0.0.1 15353 "$EGD"
learned_egd=$(ip netns exec "$SBX" nft list set inet egressd learned4 2>/dev/null |
    grep -c 203.0.113.7)
uniq_egd=$(ip netns exec "$SBX" nft -j list set inet egressd learned6 |
    grep -o '2001:db8:1000::[0-9a-f:]*' | wc -l)
fw_labels=
if [ "${BENCH_DNSMASQ_FW:-1}" != 0 ]; then
	ip netns exec "$SBX" nft -f - <<'EOF' || die "nft for dnsmasq"
table inet dnsmasqbench {
	set learned4 { type ipv4_addr; flags timeout; timeout 300s; }
	set learned6 { type ipv6_addr; flags timeout; timeout 300s; }
}
EOF
	start_dnsmasq
	PIDS+=($DMQ)
	wait_udp "$SBX" 127.0.0.1 5300 || die "dnsmasq (fw) did not start"
	LOADS_ALL=$LOADS
	LOADS=$(for l in $LOADS_ALL; do
		[ "$l" = cached ] || [ "$l" = denied ] && echo "$l"; done)
	measure dnsmasq_fw 127.0.0.1 5300 "$DMQ"
	LOADS=$LOADS_ALL
	fw_labels=dnsmasq_fw
fi

# --- report ---
echo
echo "bench_dns: ${DUR}s per cell, dnsperf -c $CLIENTS -q $OUTST, $(nproc) CPUs"
printf '%-10s %-9s %10s %9s %9s %8s  %s\n' target load qps p50_ms p99_ms \
    cpu_us/q rcodes
for label in upstream dnsmasq egressd $fw_labels; do
	for load in $LOADS; do
		[ -n "${R[$label,$load]:-}" ] || continue
		read -r q p50 p99 cpu codes <<<"${R[$label,$load]:-0}"
		printf '%-10s %-9s %10s %9s %9s %8s  %s\n' "$label" "$load" \
		    "$q" "$p50" "$p99" "$cpu" "$codes"
	done
done
echo "learned into nft: dnsmasq=$learned_dmq egressd=$learned_egd (203.0.113.7 present)"
echo "unique addresses in learned6: dnsmasq=$uniq_dmq egressd=$uniq_egd"

ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print('%.2f' % (a/b if b else 0))" "$1" "$2"; }
declare -A RATIO
for load in cached uncached unique denied; do
	read -r eq _ <<<"${R[egressd,$load]:-0}"
	read -r dq _ <<<"${R[dnsmasq,$load]:-0}"
	RATIO[$load]=$(ratio "$eq" "$dq")
done
# The floors of issue 36 (one run, an idle machine).
echo "cached   egressd/dnsmasq = ${RATIO[cached]} (target >= 1.20)"
echo "uncached egressd/dnsmasq = ${RATIO[uncached]} (shared address; target >= 1.50)"
echo "unique   egressd/dnsmasq = ${RATIO[unique]} (target >= 2.50)"
echo "denied   egressd/dnsmasq = ${RATIO[denied]} (target >= 1.20)"
if [ -n "$fw_labels" ]; then
	for load in cached denied; do
		read -r eq _ <<<"${R[egressd,$load]:-0}"
		read -r dq _ <<<"${R[dnsmasq_fw,$load]:-0}"
		printf '%-8s egressd/dnsmasq_fw = %s (both behind egressd'"'"'s ruleset)\n' \
		    "$load" "$(ratio "$eq" "$dq")"
	done
fi
