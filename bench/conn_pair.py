"""conn_pair (bench_proxy.sh): what each path adds to one new connection,
with the machine's drift cancelled. One worker per path, each in its own
namespace as its own user; the coordinator asks them in turn, one
connection at a time, the order rotated each round, so the paths' n-th
connections are made within milliseconds of each other. A connection is
timed from connect() to the end of the response (TLS handshake, one
GET, Connection: close). Printed per path: median and p90 in us; per pair
of paths: the median of the per-round differences, which is what the
second path costs a connection over the first.

  conn_pair.py run ROUNDS NAME=ARGV... (ARGV: the worker's command line,
      separated by spaces; the first path is the baseline)
  conn_pair.py worker HOST ADDR|NAME[:PORT]  (reads "go" lines, writes
      ns; PORT 443 unless given)
      HOST "u%d.x" (and NAME the same): a name of its own every
      connection (u<n>-<run>.x), resolved and sent as the SNI: what
      egressd learned or judged for one connection cannot serve the next
"""
import os
import shlex
import socket
import ssl
import statistics
import subprocess
import sys
import time

REQ = b"GET /small HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"


def worker(host, where):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    pattern, n = (host if "%d" in host else None), 0
    port = 443
    if ":" in where:
        where, _, p = where.rpartition(":")
        port = int(p)
    req = REQ % host.encode()
    for line in sys.stdin:
        if line.strip() != "go":
            break
        if pattern is not None:
            n += 1
            host = where = pattern.replace("%d", "%d-%d" % (n, os.getpid()))
            req = REQ % host.encode()
        # a name is resolved before the clock starts (through egressd in
        # the sandbox: the lease stays fresh, the lookup is not timed)
        addr = socket.getaddrinfo(where, port, socket.AF_INET,
                                  socket.SOCK_STREAM)[0][4][0]
        t0 = time.perf_counter_ns()
        try:
            s = socket.create_connection((addr, port), timeout=3)
            ss = ctx.wrap_socket(s, server_hostname=host)
            ss.sendall(req)
            while ss.recv(65536):
                pass
            ss.close()
            dt = time.perf_counter_ns() - t0
        except OSError:
            dt = -1
        sys.stdout.write("%d\n" % dt)
        sys.stdout.flush()


def pctl(v, q):
    return v[min(len(v) - 1, int(len(v) * q))]


def run(rounds, paths):
    names = [p[0] for p in paths]
    procs = {n: subprocess.Popen(argv, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
             for n, argv in paths}
    us = {n: [] for n in names}
    failed = {n: 0 for n in names}
    try:
        for r in range(rounds):
            k = r % len(names)
            got = {}
            for n in names[k:] + names[:k]:
                p = procs[n]
                p.stdin.write("go\n")
                p.stdin.flush()
                line = p.stdout.readline()
                if not line:
                    raise SystemExit("conn_pair: worker %s ended" % n)
                got[n] = int(line) / 1000.0
            if min(got.values()) < 0:
                for n in names:
                    failed[n] += got[n] < 0
                continue
            for n in names:
                us[n].append(got[n])
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
    for n in names:
        v = sorted(us[n])
        if not v:
            print("%-12s no connection completed" % n)
            continue
        print("%-12s %5d connections (%d failed): median %6.0f us  p90 %6.0f"
              % (n, len(v), failed[n], statistics.median(v), pctl(v, 0.9)))
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            d = sorted(y - x for x, y in zip(us[a], us[b]))
            if not d:
                continue
            print("%-12s over %-12s median %+5.0f us  (req/s ratio %.3f)"
                  % (b, a, statistics.median(d),
                     statistics.median(us[a]) / statistics.median(us[b])))


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 4 and sys.argv[1] == "run":
        paths = []
        for arg in sys.argv[3:]:
            name, _, cmd = arg.partition("=")
            paths.append((name, shlex.split(cmd)))
        run(int(sys.argv[2]), paths)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
