#!/usr/bin/python3
"""soak_flood.py: one part of bench_soak.sh's flood, run in the sandbox.

Usage: soak_flood.py MODE OUT CA ORIGIN SECONDS [ARGS]
  slow N        N connections (half plain HTTP on 80, half TLS on 443),
                each dripping one byte every 0.5 s (a request head; a real
                ClientHello for term.bench.test)
  junk KIND MB  one connection (KIND tls: term.bench.test, terminated and
                injected; plain: pass.bench.test on 80): 16 pipelined slow
                requests, then a POST of MB MiB sent as fast as egressd
                takes it
  noread KIND N MB  N connections each asking for MB MiB (/big) and not
                reading for SECONDS; then what arrives in 1 s (at most
                1 MiB a connection) is read and kept
Every part stops after SECONDS. Every byte received is appended to OUT
(bench_soak.sh scans it for the secret); one summary line goes to stdout.
"""
import os
import selectors
import socket
import ssl
import sys
import time

MODE, OUT, CA, ORIGIN = sys.argv[1:5]
SECS = float(sys.argv[5])
ARGS = sys.argv[6:]
T_END = time.monotonic() + SECS
TERM, PASS = "term.bench.test", "pass.bench.test"
CTX = ssl.create_default_context(cafile=CA)
received = 0


def keep(data):
    global received
    if data:
        received += len(data)
        with open(OUT, "ab") as f:
            f.write(data)


def connect(kind, blocking_tls=True):
    s = socket.create_connection((ORIGIN, 443 if kind == "tls" else 80), timeout=10)
    if kind == "tls" and blocking_tls:
        s = CTX.wrap_socket(s, server_hostname=TERM)
    return s


def head(kind, method, path, extra=""):
    host = TERM if kind == "tls" else PASS
    return ("%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer fake-key\r\n%s\r\n"
            % (method, path, host, extra)).encode()


def drain(s, limit=1 << 20):
    """Read what is there without blocking; False once the peer closed."""
    got = 0
    while got < limit:
        try:
            d = s.recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            return True
        except (ssl.SSLError, OSError):
            return False
        if not d:
            return False
        keep(d)
        got += len(d)
    return True


def slow(n):
    hello = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = CTX.wrap_bio(hello[0], hello[1], server_hostname=TERM)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    ch = hello[1].read()
    http = head("plain", "GET", "/slowloris", "X-Pad: " + "p" * 200 + "\r\n")
    conns, failed = [], 0
    for i in range(n):
        kind = "tls" if i % 2 else "plain"
        try:
            s = connect(kind, blocking_tls=False)
        except OSError:
            failed += 1
            continue
        s.setblocking(False)
        conns.append([s, ch if kind == "tls" else http, 0])
    opened = len(conns)
    closed = 0
    while time.monotonic() < T_END and conns:
        for c in list(conns):
            s, data, off = c
            ok = drain(s)
            if ok and off < len(data):
                try:
                    s.send(data[off:off + 1])
                    c[2] += 1
                except BlockingIOError:
                    pass
                except OSError:
                    ok = False
            if not ok:
                closed += 1
                s.close()
                conns.remove(c)
        time.sleep(0.5)
    for c in conns:
        c[0].close()
    print("slow: %d opened (%d failed), %d closed by egressd within %.0f s, %d bytes received"
          % (opened, failed, closed, SECS, received))


def junk(kind, mb):
    s = connect(kind)
    reqs = b"".join(head(kind, "GET", "/slow?ms=1500&n=%d" % i) for i in range(16))
    total = mb << 20
    post = head(kind, "POST", "/sink", "Content-Length: %d\r\n" % total)
    s.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    pending, sent, alive = reqs + post, 0, True
    chunk = b"J" * 16384
    while alive and time.monotonic() < T_END:
        sel.select(0.1)
        alive = drain(s)
        while alive and (pending or sent < total):
            if not pending:
                pending = chunk[:total - sent]
                sent += len(pending)
            try:
                n = s.send(pending)
                pending = pending[n:]
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                break
            except OSError:
                alive = False
        if not pending and sent >= total:
            sel.modify(s, selectors.EVENT_READ)
    s.close()
    print("junk %s: %d of %d MiB of body offered, %s, %d bytes received"
          % (kind, (sent - len(pending)) >> 20, mb,
             "open at the end" if alive else "closed by egressd", received))


def noread(kind, n, mb):
    conns, failed = [], 0
    for _ in range(n):
        try:
            s = connect(kind)
            s.sendall(head(kind, "GET", "/big?mb=%d" % mb))
            conns.append(s)
        except OSError:
            failed += 1
    while time.monotonic() < T_END:
        time.sleep(0.2)
    # then at most 1 MiB a connection, within 1 s
    t = time.monotonic() + 1
    left = {s: 1 << 20 for s in conns}
    for s in conns:
        s.setblocking(False)
    while time.monotonic() < t and any(left.values()):
        for s in conns:
            if left[s] > 0:
                before = received
                if not drain(s, left[s]):
                    left[s] = 0
                left[s] = max(0, left[s] - (received - before))
        time.sleep(0.05)
    for s in conns:
        s.close()
    print("noread %s: %d connections asked %d MiB each (%d failed), unread for %.0f s, %d bytes read after"
          % (kind, len(conns), mb, failed, SECS, received))


open(OUT, "ab").close()
try:
    if MODE == "slow":
        slow(int(ARGS[0]))
    elif MODE == "junk":
        junk(ARGS[0], int(ARGS[1]))
    elif MODE == "noread":
        noread(ARGS[0], int(ARGS[1]), int(ARGS[2]))
    else:
        sys.exit("soak_flood: unknown mode " + MODE)
except OSError as e:
    print("%s: failed: %s (%d bytes received)" % (MODE, e, received))
os.chmod(OUT, 0o644)
