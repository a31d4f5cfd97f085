#!/usr/bin/python3
"""soak_origin.py: bench_soak.sh's origin (the "internet" namespace).

Usage: soak_origin.py ADDR CERT KEY DL_FILE SECRET_FILE STATS_FILE

HTTPS on ADDR:443 (CERT for *.bench.test) and plain HTTP on ADDR:80, one
thread per connection, HTTP/1.1 keep-alive:
  /dl           the file DL_FILE (the pass-through downloads)
  /big?mb=N     N MiB of 'x' (the flood's client that never reads)
  /sink         POST: the body read and dropped, then an echo
  /slow?ms=N    an echo after N ms (the flood's pipelined requests)
  anything else an echo: the request's Authorization header as a hostile
                origin would hand it back: in headers, raw in the body,
                base64 (standard and URL-safe, the value at all three
                alignments), base64 of the whole header line, the same
                wrapped at 76 columns (MIME), hex lower and upper;
                ?chunked=1 sends it in 37-byte chunks (every form split
                across chunk boundaries)
Every second STATS_FILE gets {"requests": N, "with_secret": M}: M
requests carried the real credential (egressd injected it), so the echo
load did hand the secret back M times.
"""
import base64
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ADDR, CERT, KEY, DL, SECRET_FILE, STATS = sys.argv[1:7]
with open(SECRET_FILE) as f:
    SECRET = f.read().strip()
stats = {"requests": 0, "with_secret": 0}
lock = threading.Lock()


def forms(auth):
    b = auth.encode()
    d = {"authorization": auth}
    for k, pre in enumerate((b"", b"a", b"ab")):
        d["b64_%d" % k] = base64.b64encode(pre + b).decode()
        d["b64url_%d" % k] = base64.urlsafe_b64encode(pre + b).decode()
    line = b"Authorization: " + b
    d["b64_line"] = base64.b64encode(line).decode()
    d["hex"] = b.hex()
    d["HEX"] = b.hex().upper()
    return d, base64.encodebytes(line * 3)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.answer()

    def do_HEAD(self):
        self.answer()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        while n > 0:
            got = self.rfile.read(min(n, 65536))
            if not got:
                return
            n -= len(got)
        self.answer()

    def answer(self):
        u = urlsplit(self.path)
        q = parse_qs(u.query)
        auth = self.headers.get("Authorization", "")
        with lock:
            stats["requests"] += 1
            if SECRET and SECRET in auth:
                stats["with_secret"] += 1
        if u.path == "/dl":
            with open(DL, "rb") as f:
                data = f.read()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if u.path == "/big":
            n = int(q.get("mb", ["32"])[0]) << 20
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[:n])
                n -= len(chunk)
            return
        if u.path == "/slow":
            time.sleep(int(q.get("ms", ["1000"])[0]) / 1000)
        d, mime = forms(auth)
        body = (json.dumps(d, indent=1) + "\nraw: " + auth + "\nmime:\n").encode() + mime
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo-Authorization", auth)
        self.send_header("X-Echo-B64", d["b64_1"])
        self.send_header("X-Echo-Hex", d["HEX"])
        if q.get("chunked") == ["1"]:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 37):
                piece = body[i:i + 37]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(self, addr, ctx):
        self.ctx = ctx
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        # the TLS handshake in the connection's thread, not in accept
        request.settimeout(30)
        if self.ctx:
            request = self.ctx.wrap_socket(request, server_side=True)
        try:
            super().finish_request(request, client_address)
        finally:
            request.close()

    def handle_error(self, request, client_address):
        pass


def stats_writer():
    while True:
        with lock:
            s = json.dumps(stats)
        with open(STATS + ".tmp", "w") as f:
            f.write(s + "\n")
        os.replace(STATS + ".tmp", STATS)
        time.sleep(1)


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
servers = [Server((ADDR, 443), ctx), Server((ADDR, 80), None)]
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
threading.Thread(target=stats_writer, daemon=True).start()
while True:
    time.sleep(3600)
