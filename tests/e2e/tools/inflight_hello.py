#!/usr/bin/python3
"""ClientHellos in awkward shapes, for in-flight judging (stdlib only).

  inflight_hello.py real HOST PORT SNI PATH [--split N] [--gap-ms G]
  inflight_hello.py raw HOST PORT [--sni NAME] [--pad N] [--split N]
                    [--gap-ms G] [--drip-ms G] [--lport P] [--wait S]

real: a real TLS handshake by this Python's OpenSSL (ssl.MemoryBIO, the
CA of SSL_CERT_FILE, the certificate checked against SNI), its
ClientHello sent in two TCP segments (the first N bytes, G ms, the rest;
TCP_NODELAY), then GET PATH. Prints "ok STATUS BODYBYTES", or what went
wrong (reset, timeout, closed, tls:REASON).

raw: tls_hello.py's hand-made hello (beside this file), optionally with a
padding extension (0x0015) of N bytes, sent whole, in two pieces (--split,
--gap-ms), or one byte every G ms (--drip-ms: the rest is abandoned at
the first error), from local port P when given. Prints the outcome
(handshake, alert:CODE, reset, closed, timeout, connect_failed:ERR) and
the milliseconds from the first byte sent to it: "reset 5103".

Every wait is bounded (--wait S, default 8 s; connect 5 s).
"""

import argparse
import errno
import os
import socket
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tls_hello  # noqa: E402

CONNECT_TIMEOUT_S = 5.0


def padded(hello, n):
    """hello with a padding extension of n zero bytes at the end."""
    if n <= 0:
        return hello
    body = bytearray(hello[9:])
    off = 2 + 32
    off += 1 + body[off]                                   # session id
    off += 2 + struct.unpack("!H", body[off:off + 2])[0]   # suites
    off += 1 + body[off]                                   # compression
    exts = body[off + 2:] + tls_hello.ext(0x0015, bytes(n))
    body = body[:off] + struct.pack("!H", len(exts)) + exts
    hs = b"\x01" + struct.pack("!I", len(body))[1:] + bytes(body)
    return b"\x16\x03\x01" + struct.pack("!H", len(hs)) + hs


def connect(host, port, lport=0):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if lport:
        s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", lport))
    s.settimeout(CONNECT_TIMEOUT_S)
    s.connect((host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def pump(s, obj, inc, out, fn, end):
    """Run fn on the SSLObject until it stops wanting to read."""
    while True:
        try:
            r = fn()
            data = out.read()
            if data:
                s.sendall(data)
            return r
        except ssl.SSLWantReadError:
            data = out.read()
            if data:
                s.sendall(data)
            s.settimeout(max(0.01, end - time.monotonic()))
            d = s.recv(65536)
            if not d:
                raise ConnectionResetError(errno.ECONNRESET, "closed")
            inc.write(d)


def cmd_real(a):
    end = time.monotonic() + a.wait
    ctx = ssl.create_default_context()
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=a.sni)
    try:
        s = connect(a.host, a.port)
        try:
            obj.do_handshake()
        except ssl.SSLWantReadError:
            pass
        hello = out.read()
        s.sendall(hello[:a.split])
        time.sleep(a.gap_ms / 1000.0)
        s.sendall(hello[a.split:])
        pump(s, obj, inc, out, obj.do_handshake, end)
        req = ("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
               % (a.path, a.sni)).encode()
        pump(s, obj, inc, out, lambda: obj.write(req), end)
        got = b""
        while time.monotonic() < end:
            try:
                d = pump(s, obj, inc, out, lambda: obj.read(65536), end)
            except (ssl.SSLZeroReturnError, ConnectionResetError):
                break
            if not d:
                break
            got += d
        head, _, body = got.partition(b"\r\n\r\n")
        status = head.split(b" ", 2)[1].decode() if head else "none"
        print("ok %s %d hello=%d" % (status, len(body), len(hello)))
    except Exception as e:  # noqa: BLE001 (the outcome is the answer)
        print(tls_hello.outcome(e))
    return 0


def cmd_raw(a):
    hello = padded(tls_hello.client_hello(a.sni, False, False), a.pad)
    try:
        s = connect(a.host, a.port, a.lport)
    except OSError as e:
        print("connect_failed:%s" % tls_hello.outcome(e))
        return 0
    t0 = time.monotonic()
    end = t0 + a.wait
    res = None
    try:
        if a.drip_ms > 0:
            for i in range(len(hello)):
                s.sendall(hello[i:i + 1])
                time.sleep(a.drip_ms / 1000.0)
                if time.monotonic() > end:
                    raise socket.timeout()
        elif a.split > 0:
            s.sendall(hello[:a.split])
            time.sleep(a.gap_ms / 1000.0)
            s.sendall(hello[a.split:])
        else:
            s.sendall(hello)
        buf = b""
        while res is None:
            s.settimeout(max(0.01, end - time.monotonic()))
            d = s.recv(4096)
            if not d:
                res = "closed"
                break
            buf += d
            res = tls_hello.verdict(buf)
    except Exception as e:  # noqa: BLE001
        res = tls_hello.outcome(e)
    print("%s %d" % (res, int((time.monotonic() - t0) * 1000)))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("real")
    for p in (r, sub.add_parser("raw")):
        p.add_argument("host")
        p.add_argument("port", type=int)
        p.add_argument("--split", type=int, default=0)
        p.add_argument("--gap-ms", type=int, default=50)
        p.add_argument("--wait", type=float, default=8.0)
    r.add_argument("sni")
    r.add_argument("path")
    w = sub.choices["raw"]
    w.add_argument("--sni")
    w.add_argument("--pad", type=int, default=0)
    w.add_argument("--drip-ms", type=int, default=0)
    w.add_argument("--lport", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "real" and a.split <= 0:
        a.split = 100
    return cmd_real(a) if a.cmd == "real" else cmd_raw(a)


if __name__ == "__main__":
    sys.exit(main())
