#!/usr/bin/python3
"""An origin that holds many connections at once (stdlib only): e2e
proxy_c10k's fake internet side. One thread, one selectors loop
(epoll), non-blocking sockets and non-blocking TLS, so 10,000 and more
connections cost a few KiB each, unlike origin.py's thread per
connection (512 a listener).

  c10k_origin.py --ready FILE --stats FILE --cert CRT --key KEY
                 --listen http:ADDR:PORT --listen https:ADDR:PORT ...
                 [--max-conns N] [--max-seconds S]

Every request head (GET or HEAD, no body) gets a keep-alive answer:
"HTTP/1.1 200 OK", Content-Length, and the body "c10k <path>\\n".
A request with a body is not supported (the connection is closed).
On SIGUSR1, and at exit, --stats gets one JSON line: open connections,
accepted, requests answered, TLS handshakes done, closes by the peer,
errors. Bounds: --max-conns open connections at once (further accepts
are closed at once and counted), a head of 16 KiB, --max-seconds of
life (default 300), then it exits.
"""

import argparse
import errno
import json
import os
import selectors
import signal
import socket
import ssl
import sys
import time

HEAD_MAX = 16 << 10


class Conn:
    __slots__ = ("sock", "tls", "hs", "inb", "outb", "mask")

    def __init__(self, sock, tls):
        self.sock = sock
        self.tls = tls
        self.hs = tls
        self.inb = b""
        self.outb = b""
        self.mask = selectors.EVENT_READ


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ready", required=True)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--listen", action="append", required=True)
    ap.add_argument("--max-conns", type=int, default=20000)
    ap.add_argument("--max-seconds", type=float, default=300)
    a = ap.parse_args()

    ctx = None
    if a.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        ctx.set_alpn_protocols(["http/1.1"])
    sel = selectors.DefaultSelector()
    st = {"open": 0, "accepted": 0, "requests": 0, "handshakes": 0,
          "peer_closed": 0, "errors": 0, "over_cap": 0}
    conns = {}

    for spec in a.listen:
        scheme, rest = spec.split(":", 1)
        host, port = rest.rsplit(":", 1)
        host = host.strip("[]")
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        ls = socket.socket(fam, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, int(port)))
        ls.listen(4096)
        ls.setblocking(False)
        sel.register(ls, selectors.EVENT_READ, ("listen", scheme == "https"))

    def dump():
        with open(a.stats + ".tmp", "w") as f:
            f.write(json.dumps(st) + "\n")
        os.replace(a.stats + ".tmp", a.stats)

    want_dump = [False]
    signal.signal(signal.SIGUSR1, lambda s, f: want_dump.__setitem__(0, True))
    stop = [False]
    signal.signal(signal.SIGTERM, lambda s, f: stop.__setitem__(0, True))

    def close(c, how):
        if c.sock.fileno() in conns:
            del conns[c.sock.fileno()]
            sel.unregister(c.sock)
            st["open"] -= 1
            if how:
                st[how] += 1
        c.sock.close()

    def remask(c):
        m = selectors.EVENT_READ
        if c.outb:
            m |= selectors.EVENT_WRITE
        if m != c.mask:
            c.mask = m
            sel.modify(c.sock, m, c)

    def flush(c):
        while c.outb:
            try:
                n = c.sock.send(c.outb)
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError,
                    BlockingIOError):
                break
            c.outb = c.outb[n:]
        remask(c)

    def serve(c):
        while True:
            i = c.inb.find(b"\r\n\r\n")
            if i < 0:
                if len(c.inb) > HEAD_MAX:
                    raise ValueError("head too long")
                return
            head, c.inb = c.inb[:i], c.inb[i + 4:]
            line = head.split(b"\r\n", 1)[0].split(b" ")
            if len(line) != 3 or b"content-length:" in head.lower():
                raise ValueError("bad request")
            body = b"c10k " + line[1] + b"\n"
            c.outb += (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                       b"Content-Length: %d\r\n\r\n" % len(body))
            if line[0] != b"HEAD":
                c.outb += body
            st["requests"] += 1

    def readable(c):
        if c.hs:
            try:
                c.sock.do_handshake()
            except ssl.SSLWantReadError:
                return
            except ssl.SSLWantWriteError:
                return
            c.hs = False
            st["handshakes"] += 1
        while True:
            try:
                d = c.sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            except ssl.SSLWantWriteError:
                break
            if not d:
                close(c, "peer_closed")
                return
            c.inb += d
            if not c.tls or c.sock.pending() == 0:
                break
        serve(c)
        flush(c)

    open(a.ready, "w").close()
    end = time.monotonic() + a.max_seconds
    while not stop[0] and time.monotonic() < end:
        if want_dump[0]:
            want_dump[0] = False
            dump()
        for key, ev in sel.select(0.5):
            if isinstance(key.data, tuple):
                tls = key.data[1]
                for _ in range(256):
                    try:
                        s, _peer = key.fileobj.accept()
                    except BlockingIOError:
                        break
                    except OSError as e:
                        if e.errno in (errno.EMFILE, errno.ENFILE):
                            st["errors"] += 1
                            break
                        raise
                    st["accepted"] += 1
                    if st["open"] >= a.max_conns:
                        st["over_cap"] += 1
                        s.close()
                        continue
                    s.setblocking(False)
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    if tls:
                        s = ctx.wrap_socket(s, server_side=True,
                                            do_handshake_on_connect=False)
                    c = Conn(s, tls)
                    conns[s.fileno()] = c
                    st["open"] += 1
                    sel.register(s, selectors.EVENT_READ, c)
                    if tls:
                        readable(c)
                continue
            c = key.data
            try:
                if ev & selectors.EVENT_READ:
                    readable(c)
                if ev & selectors.EVENT_WRITE and c.sock.fileno() in conns:
                    flush(c)
            except (OSError, ValueError, ssl.SSLError):
                close(c, "errors")
    dump()
    return 0


if __name__ == "__main__":
    sys.exit(main())
