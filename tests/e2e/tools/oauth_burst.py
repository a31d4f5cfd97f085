#!/usr/bin/python3
"""N concurrent requests over N keep-alive HTTPS connections (e2e
vault_oauth2), run as the sandbox user.

  oauth_burst.py HOST PATH N WAIT_S CAFILE OUT

Each of N threads opens its connection and makes one request (warm-up:
the handshakes are done before the burst), then all wait WAIT_S seconds
together and send one request each at once (a barrier). Prints
"burst_t0 <time.time()>", then "<status> <count>" lines of the burst's
answers; every response (head and body) is appended to OUT for the
secret scan. Bounded: N <= 256, each request 20 s at most.
"""
import http.client
import ssl
import sys
import threading
import time


def main():
    host, path, n, wait_s, ca, out = sys.argv[1:7]
    n, wait_s = min(int(n), 256), float(wait_s)
    ctx = ssl.create_default_context(cafile=ca)
    conns = [None] * n
    res = [None] * n
    bodies = [b""] * n
    lock = threading.Lock()
    warm = threading.Barrier(n + 1, timeout=60)
    go = threading.Barrier(n + 1, timeout=60)

    def one(i, c):
        c.request("GET", path, headers={"Authorization": "Bearer fake"})
        r = c.getresponse()
        b = r.read()
        head = "HTTP %d\n%s\n" % (r.status, "".join(
            "%s: %s\n" % kv for kv in r.getheaders()))
        with lock:
            bodies[i] += head.encode() + b + b"\n"
        return r.status

    def worker(i):
        try:
            c = http.client.HTTPSConnection(host, 443, context=ctx,
                                            timeout=20)
            conns[i] = c
            one(i, c)
        except Exception as e:  # noqa: BLE001
            res[i] = "warm-" + type(e).__name__
        warm.wait()
        go.wait()
        if res[i] is None:
            try:
                res[i] = one(i, conns[i])
            except Exception as e:  # noqa: BLE001
                res[i] = type(e).__name__

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    warm.wait()
    time.sleep(wait_s)
    print("burst_t0 %.3f" % time.time(), flush=True)
    go.wait()
    for t in ts:
        t.join(30)
    counts = {}
    for r in res:
        counts[r] = counts.get(r, 0) + 1
    for k, v in sorted(counts.items(), key=str):
        print(k, v)
    with open(out, "ab") as f:
        f.write(b"".join(bodies))
    for c in conns:
        if c is not None:
            c.close()


if __name__ == "__main__":
    main()
