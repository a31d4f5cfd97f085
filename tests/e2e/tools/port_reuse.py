#!/usr/bin/python3
"""A TLS connection from a fixed local port, ended a chosen way, so that
the next one from the same port reuses its 5-tuple (stdlib only).

  port_reuse.py HOST PORT LPORT SNI END [--wait S]

Connects from LPORT (SO_REUSEADDR) to HOST:PORT, does a TLS handshake
naming SNI (certificate not checked: the point is whether the handshake
gets through), then ends the connection:

  none   print the outcome of the handshake and close (client FIN)
  sfin   GET /?close=1, read to the server's FIN, then close: the server
         closed first, the client keeps no TIME_WAIT
  crst   client reset (SO_LINGER 0) right after the handshake
  srst   POST /?noread=1&close=1 with a body the origin never reads: it
         answers and closes with unread bytes, i.e. the server resets
  gone   client reset right after connect, before any hello (a flow
         still waiting for its verdict)

Prints the handshake's outcome (handshake, reset, refused, closed,
timeout, tls:REASON) and, for sfin/srst, how the end went. Bounded:
--wait S (default 5 s) for every step.
"""

import argparse
import os
import socket
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tls_hello  # noqa: E402


def rst_close(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("lport", type=int)
    p.add_argument("sni")
    p.add_argument("end", choices=["none", "sfin", "crst", "srst", "gone"])
    p.add_argument("--wait", type=float, default=5.0)
    a = p.parse_args()
    fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    raw = socket.socket(fam, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    raw.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", a.lport))
    raw.settimeout(a.wait)
    try:
        raw.connect((a.host, a.port))
    except OSError as e:
        print("connect:" + tls_hello.outcome(e))
        return 0
    if a.end == "gone":
        rst_close(raw)
        print("gone")
        return 0
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        s = ctx.wrap_socket(raw, server_hostname=a.sni)
    except (OSError, ssl.SSLError) as e:
        print(tls_hello.outcome(e))
        raw.close()
        return 0
    res = "handshake"
    try:
        if a.end == "crst":
            rst_close(s)
            print(res)
            return 0
        if a.end == "sfin":
            s.sendall(b"GET /?close=1 HTTP/1.1\r\nHost: %s\r\n\r\n"
                      % a.sni.encode())
        elif a.end == "srst":
            n = 1 << 20
            s.sendall(b"POST /?noread=1&close=1 HTTP/1.1\r\nHost: %s\r\n"
                      b"Content-Length: %d\r\n\r\n" % (a.sni.encode(), n))
            s.sendall(b"x" * (256 << 10))
        if a.end in ("sfin", "srst"):
            got = 0
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += len(d)
            res += " end=eof(%d)" % got
    except (OSError, ssl.SSLError) as e:
        res += " end=" + tls_hello.outcome(e)
    try:
        s.close()
    except OSError:
        pass
    print(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
