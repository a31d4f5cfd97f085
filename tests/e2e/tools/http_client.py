#!/usr/bin/python3
"""Small HTTP clients for the proxy's end-to-end tests (stdlib only).

  http_client.py sse URL CAFILE          prints "K SECONDS" per event, the
                                         time since the request was sent
  http_client.py ws URL CAFILE MSG...    WebSocket: sends each MSG as a text
                                         frame, prints each echo
  http_client.py trailers URL CAFILE [HEADER]...
                                         GET with the headers ("Name: value"),
                                         the chunked response decoded by hand:
                                         prints "STATUS N", "H name: value"
                                         per header, "BODY N" (its length),
                                         "T name: value" per trailer field,
                                         "END" after the final CRLF
  http_client.py raw HOST PORT FILE      sends FILE's bytes over plain TCP,
                                         prints what comes back (5 s cap)
  http_client.py rawtls HOST PORT CAFILE FILE
                                         the same inside TLS to HOST (SNI,
                                         verified against CAFILE)
Every socket has a 10 s timeout; output is bounded.
"""
import base64
import os
import socket
import ssl
import sys
import time
import urllib.parse


def tls_conn(url, cafile):
    u = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context(cafile=cafile)
    s = socket.create_connection((u.hostname, u.port or 443), timeout=10)
    s = ctx.wrap_socket(s, server_hostname=u.hostname)
    path = u.path + ("?" + u.query if u.query else "")
    return s, u.hostname, path


def sse(url, cafile):
    s, host, path = tls_conn(url, cafile)
    t0 = time.monotonic()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n"
               "Connection: close\r\n\r\n" % (path, host)).encode())
    f = s.makefile("rb")
    chunked = False
    while True:
        ln = f.readline(65536)
        if ln in (b"\r\n", b""):
            break
        chunked |= ln.lower() == b"transfer-encoding: chunked\r\n"
    buf = b""
    k = 0
    while k < 100:
        if chunked:
            # the framing (a redacted stream's chunks need not follow
            # the events) is not part of the events
            size = f.readline(4096)
            if not size.endswith(b"\r\n") or int(size, 16) == 0:
                break
            d = f.read(int(size, 16))
            f.read(2)
        else:
            d = f.read1(4096)
        if not d:
            break
        buf += d
        while b"data: event " in buf:
            i = buf.index(b"data: event ")
            j = buf.find(b"\n\n", i)
            if j < 0:
                break
            print("%s %.3f" % (buf[i + 12:j].decode(), time.monotonic() - t0),
                  flush=True)
            buf = buf[j + 2:]
            k += 1


def ws(url, cafile, msgs):
    s, host, path = tls_conn(url, cafile)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n" % (path, host, key)).encode())
    f = s.makefile("rb")
    status = f.readline().decode().strip()
    print(status)
    while f.readline() not in (b"\r\n", b""):
        pass
    if " 101 " not in status + " ":
        return
    for m in msgs:
        data = m.encode()
        mask = os.urandom(4)
        s.sendall(bytes([0x81, 0x80 | len(data)]) + mask +
                  bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        hdr = f.read(2)
        print(f.read(hdr[1] & 0x7f).decode())
    mask = os.urandom(4)
    s.sendall(b"\x88\x80" + mask)
    f.read(2)


def trailers(url, cafile, headers):
    s, host, path = tls_conn(url, cafile)
    # keep-alive: the response is framed; an origin closing after it
    # without close_notify must not race its own tail
    s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n"
               % (path, host, "".join(h + "\r\n" for h in headers)))
              .encode())
    f = s.makefile("rb")
    print("STATUS", f.readline().decode("latin-1").split()[1])
    while True:
        ln = f.readline(65536).decode("latin-1").rstrip("\r\n")
        if not ln:
            break
        print("H", ln)
    body = 0
    while body < (64 << 20):
        size = f.readline(4096)
        if not size.endswith(b"\r\n"):
            print("BAD chunk size line %r" % size[:64])
            return
        n = int(size.split(b";")[0], 16)
        if n == 0:
            break
        body += len(f.read(n))
        if f.read(2) != b"\r\n":
            print("BAD chunk end")
            return
    print("BODY", body)
    for _ in range(1000):
        ln = f.readline(65536)
        if ln == b"\r\n":
            print("END")
            return
        if not ln.endswith(b"\r\n"):
            print("BAD trailer line %r" % ln[:64])
            return
        print("T", ln.decode("latin-1").rstrip("\r\n"))


def raw(host, port, path, cafile=None):
    data = open(path, "rb").read()
    s = socket.create_connection((host, int(port)), timeout=5)
    if cafile is not None:
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(s, server_hostname=host)
    s.sendall(data)
    out = b""
    try:
        while len(out) < 65536:
            d = s.recv(4096)
            if not d:
                break
            out += d
    except (socket.timeout, ssl.SSLError, ConnectionResetError):
        pass
    sys.stdout.write(out.decode("latin-1"))


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) >= 3 and a[0] == "sse":
        sse(a[1], a[2])
    elif len(a) >= 3 and a[0] == "ws":
        ws(a[1], a[2], a[3:])
    elif len(a) >= 3 and a[0] == "trailers":
        trailers(a[1], a[2], a[3:])
    elif len(a) == 4 and a[0] == "raw":
        raw(a[1], a[2], a[3])
    elif len(a) == 5 and a[0] == "rawtls":
        raw(a[1], a[2], a[4], a[3])
    else:
        sys.exit(__doc__)
