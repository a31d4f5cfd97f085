#!/usr/bin/python3
"""A git smart-HTTP origin for the test bed (stdlib and git only).

  git_http.py --root DIR --log FILE --ready FILE --cert CRT --key KEY
              --listen ADDR:PORT [--listen ADDR:PORT ...]

HTTPS (HTTP/1.1, keep-alive) in front of `git http-backend` run as a CGI
for each request, with GIT_PROJECT_ROOT=DIR and every repository exported.
Whether a push is accepted is the repository's own config
(http.receivepack true: accepted without authentication), so a control
push proves that only egressd stands between the client and a write.

Every request is logged, before the backend runs, as one JSON line
{"ev":"git.request","method","target","path","query","service"} and
again when answered {"ev":"git.response","method","path","status"}, so a
test can assert that a git-receive-pack POST never arrived at all.

Bounds: request bodies up to MAX_BODY bytes (413 beyond), a backend run
up to BACKEND_TIMEOUT_S, at most MAX_CONNS connections, an idle
connection closed after IDLE_TIMEOUT_S.
"""

import argparse
import http.server
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

MAX_BODY = 16 << 20
BACKEND_TIMEOUT_S = 20
MAX_CONNS = 32
IDLE_TIMEOUT_S = 15
BACKEND = os.path.join(
    subprocess.run(["git", "--exec-path"], capture_output=True, text=True,
                   check=True).stdout.strip(), "git-http-backend")


class Log:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, **obj):
        line = json.dumps(dict(ts=time.time(), **obj),
                          separators=(",", ":")) + "\n"
        with self.lock:
            self.f.write(line)
            self.f.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "git-http-test/1"
    timeout = IDLE_TIMEOUT_S

    def log_message(self, fmt, *args):
        pass

    def body(self):
        te = self.headers.get("Transfer-Encoding", "").lower()
        if te == "chunked":
            out = bytearray()
            while True:
                ln = self.rfile.readline(1024)
                size = int(ln.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n",
                                                            b""):
                        pass
                    return bytes(out)
                if len(out) + size > MAX_BODY:
                    return None
                out += self.rfile.read(size)
                self.rfile.readline(8)
        n = int(self.headers.get("Content-Length", "0") or "0")
        if n > MAX_BODY:
            return None
        return self.rfile.read(n) if n else b""

    def answer(self, status, text):
        data = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        log = self.server.log
        log.write(ev="git.request", method=self.command, target=self.path,
                  path=u.path, query=u.query,
                  service=q.get("service", [""])[0],
                  sni=getattr(self.connection, "tb_sni", None))
        body = self.body()
        if body is None:
            self.close_connection = True
            self.answer(413, "too large")
            log.write(ev="git.response", method=self.command, path=u.path,
                      status=413)
            return
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.server.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": urllib.parse.unquote(u.path),
            "QUERY_STRING": u.query,
            "REMOTE_ADDR": self.client_address[0],
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        for h in ("Content-Encoding", "Git-Protocol"):
            if self.headers.get(h) is not None:
                env["HTTP_" + h.upper().replace("-", "_")] = self.headers[h]
        try:
            p = subprocess.run([BACKEND], input=body, env=env,
                               capture_output=True,
                               timeout=BACKEND_TIMEOUT_S)
            out = p.stdout
        except subprocess.TimeoutExpired:
            out = b"Status: 504 backend timeout\r\n\r\n"
        head, _, data = out.partition(b"\r\n\r\n")
        if not _:
            head, _, data = out.partition(b"\n\n")
        status, headers = 200, []
        for ln in head.decode("latin-1").splitlines():
            name, _, val = ln.partition(":")
            val = val.strip()
            if name.lower() == "status":
                status = int(val.split()[0])
            elif name:
                headers.append((name, val))
        self.send_response(status)
        for name, val in headers:
            if name.lower() not in ("content-length", "transfer-encoding",
                                    "connection"):
                self.send_header(name, val)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        log.write(ev="git.response", method=self.command, path=u.path,
                  status=status)

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, port, ctx, log, root):
        self.slots = threading.BoundedSemaphore(MAX_CONNS)
        self.address_family = socket.AF_INET6 if ":" in addr else \
            socket.AF_INET
        self.ctx, self.log, self.root = ctx, log, root
        super().__init__((addr, port), Handler)

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY,
                                   1)
        socketserver.TCPServer.server_bind(self)

    def get_request(self):
        sock, addr = self.socket.accept()
        sock.settimeout(IDLE_TIMEOUT_S)
        return sock, addr

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            # the handshake in the connection's own thread: a client
            # that stalls it holds one slot, not the server
            tls = self.ctx.wrap_socket(request, server_side=True)
            super().process_request_thread(tls, client_address)
        except (OSError, ssl.SSLError):
            self.shutdown_request(request)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address):
        pass


def record_sni(sslsock, name, ctx):
    sslsock.tb_sni = name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--listen", action="append", required=True)
    a = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.set_alpn_protocols(["http/1.1"])
    ctx.sni_callback = record_sni
    log = Log(a.log)
    servers = []
    for spec in a.listen:
        addr, port = spec.rsplit(":", 1)
        servers.append(Server(addr.strip("[]"), int(port), ctx, log,
                              os.path.abspath(a.root)))
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    with open(a.ready + ".tmp", "w") as f:
        f.write("ready\n")
    os.rename(a.ready + ".tmp", a.ready)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
