#!/usr/bin/python3
"""Many connections through egressd at once, from the sandbox (stdlib
only): e2e proxy_c10k's client. One thread, one selectors loop.

  c10k_client.py --addr IP --cafile PEM --ready FILE --release FILE
                 --plain NAME:IDLE:ACTIVE --pass NAME:IDLE:ACTIVE
                 --term NAME:IDLE:ACTIVE [--concurrency N]
                 [--max-seconds S]

Each kind of connection goes to --addr (the names must resolve to it,
which is checked first and teaches egressd the address): plain HTTP on
port 80 (Host NAME), TLS on 443 with SNI NAME (pass-through or
terminated: which is egressd's business; the CA file must hold the
origin's CA and egressd's). Every connection is opened (at most
--concurrency being set up at once) and does one request. Then:
 1. idle ones sit still; active ones send request after request (one
    outstanding each), and --ready is written with the counts;
 2. once --release exists, the active loop stops, every idle connection
    sends one more request (it must still be there and answered), and
    every connection is closed.
One JSON line on stdout: connections opened per kind, set-up failures,
active requests and failures, idle connections that answered after the
hold, the ones that did not, seconds per phase. Every request must get
"200" and the body "c10k PATH"; anything else is a failure. Bounds:
--max-seconds in all (default 120); past it the client stops where it
is and reports.
"""

import argparse
import errno
import json
import random
import selectors
import socket
import ssl
import sys
import time

EV_R, EV_W = selectors.EVENT_READ, selectors.EVENT_WRITE


class Conn:
    __slots__ = ("kind", "name", "active", "sock", "st", "outb", "inb",
                 "want", "path", "mask", "idx")

    def __init__(self, kind, name, active, idx):
        self.kind, self.name, self.active, self.idx = kind, name, active, idx
        self.sock = None
        self.st = "new"
        self.outb = b""
        self.inb = b""
        self.want = None
        self.path = b""
        self.mask = 0


def parse_response(buf):
    """(consumed, status, body) once whole, else None."""
    i = buf.find(b"\r\n\r\n")
    if i < 0:
        return None
    head = buf[:i].split(b"\r\n")
    status = head[0].split(b" ")[1] if len(head[0].split(b" ")) > 1 else b""
    n = None
    for h in head[1:]:
        k, _, v = h.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    if n is None:
        raise ValueError("no content-length")
    if len(buf) < i + 4 + n:
        return None
    return i + 4 + n, status, buf[i + 4:i + 4 + n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--cafile", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--release", required=True)
    ap.add_argument("--plain", default="")
    ap.add_argument("--pass", dest="pas", default="")
    ap.add_argument("--term", default="")
    ap.add_argument("--concurrency", type=int, default=200)
    ap.add_argument("--max-seconds", type=float, default=120)
    a = ap.parse_args()
    t0 = time.monotonic()
    deadline = t0 + a.max_seconds

    ctx = ssl.create_default_context(cafile=a.cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    plan = []
    for kind, spec in (("plain", a.plain), ("pass", a.pas),
                       ("term", a.term)):
        if not spec:
            continue
        name, idle, active = spec.split(":")
        addrs = {ai[4][0] for ai in socket.getaddrinfo(
            name, 80, socket.AF_INET, socket.SOCK_STREAM)}
        if a.addr not in addrs:
            print(json.dumps({"error": "%s resolves to %s" % (name, addrs)}))
            return 1
        plan += [(kind, name, False)] * int(idle)
        plan += [(kind, name, True)] * int(active)
    # interleave the kinds, so each sees the load of the others
    random.Random(17).shuffle(plan)

    sel = selectors.DefaultSelector()
    r = {"opened": {"plain": 0, "pass": 0, "term": 0}, "setup_failed": 0,
         "setup_errors": {}, "active_requests": 0, "active_failed": 0,
         "idle_answered": 0, "idle_failed": 0, "idle_errors": {},
         "active_errors": {}}
    conns = []
    inflight = [0]
    phase = ["setup"]

    def note(key, err):
        d = r[key]
        k = type(err).__name__ + ":" + str(err)[:60]
        d[k] = d.get(k, 0) + 1

    def setmask(c, m):
        if m == c.mask:
            return
        if c.mask == 0:
            sel.register(c.sock, m, c)
        elif m == 0:
            sel.unregister(c.sock)
        else:
            sel.modify(c.sock, m, c)
        c.mask = m

    def fail(c, err):
        if c.st in ("connect", "hs", "req") and c.path == b"/setup":
            r["setup_failed"] += 1
            note("setup_errors", err)
            inflight[0] -= 1
        elif c.path == b"/after":
            r["idle_failed"] += 1
            note("idle_errors", err)
        elif c.active:
            r["active_failed"] += 1
            note("active_errors", err)
        setmask(c, 0)
        c.sock.close()
        c.st = "dead"

    def request(c, path):
        c.path = path
        host = c.name.encode() + (b":80" if c.kind == "plain" else b"")
        c.outb = b"GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: c10k\r\n\r\n" % (
            path, host)
        c.st = "req"
        pump(c)

    def start(c):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sock = s
        c.st = "connect"
        c.path = b"/setup"
        inflight[0] += 1
        rc = s.connect_ex((a.addr, 80 if c.kind == "plain" else 443))
        if rc not in (0, errno.EINPROGRESS):
            fail(c, OSError(rc, "connect"))
            return
        setmask(c, EV_W)

    def done_response(c, status, body):
        if status != b"200" or body != b"c10k " + c.path + b"\n":
            fail(c, ValueError("answer %r %r" % (status, body[:40])))
            return
        if c.path == b"/setup":
            inflight[0] -= 1
            r["opened"][c.kind] += 1
            c.st = "held"
            setmask(c, EV_R)  # a close by egressd shows as a read
            return
        if c.path == b"/after":
            r["idle_answered"] += 1
            c.st = "held"
            setmask(c, EV_R)
            return
        r["active_requests"] += 1
        c.st = "held"
        setmask(c, EV_R)
        if phase[0] == "hold":
            request(c, b"/active")

    def pump(c):
        """Moves c along as far as it goes without blocking."""
        try:
            if c.st == "connect":
                e = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if e:
                    raise OSError(e, "connect")
                if c.kind == "plain":
                    request(c, b"/setup")
                    return
                c.sock = ctx.wrap_socket(c.sock, server_hostname=c.name,
                                         do_handshake_on_connect=False)
                c.st = "hs"
            if c.st == "hs":
                try:
                    c.sock.do_handshake()
                except ssl.SSLWantReadError:
                    setmask(c, EV_R)
                    return
                except ssl.SSLWantWriteError:
                    setmask(c, EV_W)
                    return
                request(c, b"/setup")
                return
            if c.st == "req":
                while c.outb:
                    try:
                        n = c.sock.send(c.outb)
                    except (BlockingIOError, ssl.SSLWantWriteError):
                        setmask(c, EV_W | EV_R)
                        return
                    c.outb = c.outb[n:]
                while True:
                    try:
                        d = c.sock.recv(65536)
                    except (BlockingIOError, ssl.SSLWantReadError):
                        break
                    if not d:
                        raise ConnectionError("closed by peer")
                    c.inb += d
                    if c.kind == "plain" or c.sock.pending() == 0:
                        break
                got = parse_response(c.inb)
                if got is None:
                    setmask(c, EV_R)
                    return
                n, status, body = got
                c.inb = c.inb[n:]
                if c.inb:
                    raise ValueError("bytes past the response")
                done_response(c, status, body)
                return
            if c.st == "held":
                # nothing is expected on a held connection
                d = c.sock.recv(65536)
                if not d:
                    raise ConnectionError("closed while held")
                raise ValueError("unexpected bytes while held")
        except (ssl.SSLWantReadError, BlockingIOError):
            return
        except (OSError, ValueError, ssl.SSLError) as err:
            fail(c, err)

    # --- set-up ---------------------------------------------------------
    for i, p in enumerate(plan):
        conns.append(Conn(p[0], p[1], p[2], i))
    todo = list(reversed(conns))
    while time.monotonic() < deadline:
        while todo and inflight[0] < a.concurrency:
            start(todo.pop())
        if not todo and inflight[0] == 0:
            break
        for key, _ev in sel.select(0.2):
            pump(key.data)
    r["setup_s"] = round(time.monotonic() - t0, 2)

    # --- hold: idle ones still, active ones busy ------------------------
    phase[0] = "hold"
    t1 = time.monotonic()
    for c in conns:
        if c.active and c.st == "held":
            request(c, b"/active")
    with open(a.ready, "w") as f:
        f.write(json.dumps(r) + "\n")
    released = False
    while time.monotonic() < deadline:
        for key, _ev in sel.select(0.1):
            pump(key.data)
        if not released:
            try:
                open(a.release).close()
                released = True
                break
            except FileNotFoundError:
                pass
    r["hold_s"] = round(time.monotonic() - t1, 2)

    # --- after: active ones finish, idle ones answer once more ----------
    phase[0] = "after"
    t2 = time.monotonic()
    for c in conns:
        if not c.active and c.st == "held":
            request(c, b"/after")
    while time.monotonic() < deadline:
        busy = [c for c in conns if c.st not in ("held", "dead")]
        if not busy:
            break
        for key, _ev in sel.select(0.2):
            pump(key.data)
    r["after_s"] = round(time.monotonic() - t2, 2)
    r["unfinished"] = sum(1 for c in conns if c.st not in ("held", "dead"))
    for c in conns:
        if c.st != "dead":
            setmask(c, 0)
            c.sock.close()
    r["total_s"] = round(time.monotonic() - t0, 2)
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
