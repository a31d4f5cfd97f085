#!/bin/bash
# bench_dns_burst.sh: how long the sandbox's next real query waits after it
# (or anything sharing its namespace) sprayed the resolver with junk. A
# benchmark, not a test: it prints latencies and compares them with the
# target (a legitimate query right after a 1,500-datagram burst answered
# within 100 ms), for egressd and for dnsmasq doing the filtering job in
# the same run, on the same test bed as the end-to-end tests.
#
# Usage (root): bench/bench_dns_burst.sh BUILD_DIR
#   BENCH_ROUNDS  bursts per resolver (default 20)
#   BENCH_BURST   junk datagrams per burst (default 1500)
#
# Each round: BENCH_BURST datagrams (random bytes of every length up to
# 600, half of them with a query-like header, the mix of the e2e scenario
# dns_malformed), sent as fast as one process can, then at once one query
# for a name the policy allows (cached after the first round) and the
# time to its answer. "lost" counts rounds whose query had no answer
# within 2 s (the kernel dropped it: the client would wait a retry timer).
# Two workloads: "live", the resolver running while the burst arrives
# (one sender rarely outpaces it), and "queued", the resolver stopped
# (SIGSTOP) during the burst and continued just before the query, so the
# query waits behind the whole burst in the socket buffer: the worst case.
set -u -o pipefail
BUILD=${1:-build}
export EGRESSD_BIN=${EGRESSD_BIN:-$BUILD/egressd/egressd}
ROUNDS=${BENCH_ROUNDS:-20}
BURST=${BENCH_BURST:-1500}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/tests/e2e/lib/testbed.sh"
tb_setup

pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF
)
tb_start_egressd --policy "$pol"
# The peer: dnsmasq filtering the same way (forward only a.test, NXDOMAIN
# for everything else), in the sandbox on 127.0.0.2:5300.
tb_sandbox_root dnsmasq --keep-in-foreground --no-resolv --no-hosts \
    --no-poll --user=root --group=root --pid-file= --bind-interfaces \
    --listen-address=127.0.0.2 --port=5300 --cache-size=1000 \
    --server=/a.test/"$TB_DNS1_IP4" --address=/#/ \
    >"$TB_DIR/root/dnsmasq.err" 2>&1 &
dnsmasq_pid=$!
TB_PIDS+=("$dnsmasq_pid")
tb_wait_port "$TB_SBX" udp 127.0.0.2 5300 5 || tb_die "dnsmasq did not start"

# As root in the sandbox: the queued workload stops and continues the
# resolver it measures (only the two processes this script started).
tb_sandbox_root "$TB_PY" - "$ROUNDS" "$BURST" "$TB_EGRESSD_PID" \
    "$dnsmasq_pid" <<'EOF'
import os, random, signal, socket, struct, sys, time
rounds, burst = int(sys.argv[1]), int(sys.argv[2])
pids = {"egressd": int(sys.argv[3]), "dnsmasq": int(sys.argv[4])}
random.seed(20261203)

def q(name, qid):
    wire = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + wire + b"\0\1\0\1"

def ask(dst, qid, wait=2.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(wait)
    t = time.perf_counter()
    s.sendto(q("a.test", qid), dst)
    try:
        while True:
            r = s.recv(4096)
            if r[:2] == struct.pack(">H", qid):
                return (time.perf_counter() - t) * 1000
    except socket.timeout:
        return None
    finally:
        s.close()

def spray(dst, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(n):
        k = random.randrange(0, 600)
        b = bytearray(os.urandom(k))
        if k > 4 and i % 2:
            b[2] &= 0x7f
            b[4:6] = b"\x00\x01"
        s.sendto(bytes(b), dst)
    s.close()

def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]

for mode in ("live", "queued"):
  for label, dst in (("egressd", ("127.0.0.1", 15353)),
                     ("dnsmasq", ("127.0.0.2", 5300))):
    ask(dst, 1)  # warm the cache
    quiet, after, lost = [], [], 0
    for i in range(rounds):
        v = ask(dst, 2)
        if v is not None:
            quiet.append(v)
        time.sleep(0.05)
        if mode == "queued":
            os.kill(pids[label], signal.SIGSTOP)
        try:
            spray(dst, burst)
        finally:
            if mode == "queued":
                os.kill(pids[label], signal.SIGCONT)
        v = ask(dst, 3)
        if v is None:
            lost += 1
        else:
            after.append(v)
        time.sleep(0.3)  # let the resolver drain before the next round
    if not after:
        print("%-6s %-8s after burst: every query lost (%d rounds)"
              % (mode, label, rounds))
        continue
    print("%-6s %-8s quiet p50 %6.2f ms | after %d junk: p50 %6.2f ms"
          "  p99 %6.2f ms  max %6.2f ms  lost %d/%d"
          % (mode, label, pct(quiet, 50), burst, pct(after, 50),
             pct(after, 99), max(after), lost, rounds))
print("target: egressd answers < 100 ms after the burst, none lost")
EOF
tb_stop_egressd
TB_FINISHED=1
exit 0
