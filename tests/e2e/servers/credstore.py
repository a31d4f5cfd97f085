#!/usr/bin/python3
"""A fake credential store and the API its credential opens (e2e
vault_http_source), HTTPS with the run's test CA, in net-<id>.

  credstore.py --store ADDR --api ADDR --cert C --key K --token-file F
               --ttl S --dir D --ready R

store: GET /v1/key needs "X-Store-Token: <the token in --token-file>"
(401 otherwise) and answers OpenSandbox's shape {"value": V, "ttl": S},
V the last line of D/values (the scenario appends a line to rotate);
GET /v1/raw answers V alone (text/plain); anything else is 404. D/mode
says how the store behaves now: ok (default), 503, close (drops the
connection unanswered), redirect (a 302 to /v1/key). Every store request
is a JSON line of D/store.log (t, path, status).

api: any GET needs "Authorization: Bearer <a value of D/values>" (401
otherwise) and answers JSON echoing that header ("seen"); /.../leak also
echoes every value the store ever served, as a careless API would. Every
API request is a JSON line of D/api.log (t, path, status, value: the
1-based line of D/values the token was, 0 for none).
"""
import argparse
import json
import os
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
ARGS = None


def log(name, rec):
    rec["t"] = time.time()
    with LOCK, open(os.path.join(ARGS.dir, name), "a") as f:
        f.write(json.dumps(rec) + "\n")


def values():
    with open(os.path.join(ARGS.dir, "values")) as f:
        return [l.strip() for l in f if l.strip()]


def mode():
    try:
        with open(os.path.join(ARGS.dir, "mode")) as f:
            return f.read().strip() or "ok"
    except OSError:
        return "ok"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def reply(self, status, body, ctype="application/json", extra=()):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def store(self):
        m = mode()
        if m == "close":
            log("store.log", {"path": self.path, "status": 0})
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if m == "503":
            log("store.log", {"path": self.path, "status": 503})
            return self.reply(503, {"error": "unavailable"})
        if m == "redirect":
            log("store.log", {"path": self.path, "status": 302})
            return self.reply(302, b"", "text/plain",
                              [("Location", "https://store.test/v1/key")])
        if self.headers.get("X-Store-Token", "") != TOKEN:
            log("store.log", {"path": self.path, "status": 401})
            return self.reply(401, {"error": "unauthorized"})
        v = values()[-1]
        if self.path == "/v1/key":
            log("store.log", {"path": self.path, "status": 200})
            return self.reply(200, {"value": v, "ttl": ARGS.ttl,
                                    "note": "opaque"})
        if self.path == "/v1/raw":
            log("store.log", {"path": self.path, "status": 200})
            return self.reply(200, (v + "\n").encode(), "text/plain")
        log("store.log", {"path": self.path, "status": 404})
        return self.reply(404, {"error": "not_found"})

    def api(self):
        h = self.headers.get("Authorization", "")
        vs = values()
        tok = h[7:] if h.startswith("Bearer ") else ""
        idx = vs.index(tok) + 1 if tok in vs else 0
        status = 200 if idx else 401
        log("api.log", {"path": self.path, "status": status, "value": idx})
        if not idx:
            return self.reply(401, {"error": "invalid_token"})
        obj = {"ok": True, "seen": h}
        if self.path.endswith("/leak"):
            obj["values"] = vs
        self.reply(200, obj)

    def do_GET(self):
        if self.server.role == "store":
            return self.store()
        return self.api()


class Server(ThreadingHTTPServer):
    daemon_threads = True


def serve(addr, role, ctx):
    srv = Server((addr, 443), Handler)
    srv.role = role
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def main():
    global ARGS, TOKEN
    ap = argparse.ArgumentParser()
    for k in ("--store", "--api", "--cert", "--key", "--token-file", "--dir",
              "--ready"):
        ap.add_argument(k, required=True)
    ap.add_argument("--ttl", type=int, default=2)
    ARGS = ap.parse_args()
    with open(ARGS.token_file) as f:
        TOKEN = f.read().strip()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    serve(ARGS.store, "store", ctx)
    serve(ARGS.api, "api", ctx)
    open(ARGS.ready, "w").close()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
