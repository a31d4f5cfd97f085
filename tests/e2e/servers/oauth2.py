#!/usr/bin/python3
"""A fake OAuth2 authorization server and the API it guards (e2e
vault_oauth2), HTTPS with the run's test CA, in net-<id>.

  oauth2.py --idp ADDR --api ADDR --cert C --key K --client-id ID
            --secret-file F --refresh-file F --expires S --dir D

idp: POST /token (RFC 6749 4.4 client_credentials, 6 refresh_token),
client authentication by HTTP Basic only (client_secret_basic, each part
form-decoded), refresh tokens rotated on every use (the old one is then
invalid: a client that keeps using it gets invalid_grant), access tokens
living --expires seconds. Every token request is a JSON line of
D/token.log (t, grant, status); every token issued a line of D/issued
(for the secret scan; the directory is root's). D/mode says how the
token endpoint behaves now: ok (default), 503 (answers 503 with an
OAuth2 error body), close (drops the connection unanswered), badjson
(200 with a body that is not JSON), badcert (the handshake presents
--bad-cert, which the run's CA did not issue).

api: any GET needs "Authorization: Bearer <live token>" (401 otherwise)
and answers JSON echoing that header back ("seen"); /.../leak also
echoes the client secret and the current refresh token, as a careless
API would. Every API request is a JSON line of D/api.log (path, status).
"""
import argparse
import base64
import json
import os
import secrets
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"access": {}, "refresh": None}
ARGS = None


def log(name, rec):
    rec["t"] = time.time()
    with LOCK, open(os.path.join(ARGS.dir, name), "a") as f:
        f.write(json.dumps(rec) + "\n")


def issue(kind):
    v = "%s-%s" % (kind, secrets.token_urlsafe(24))
    with open(os.path.join(ARGS.dir, "issued"), "a") as f:
        f.write(v + "\n")
    return v


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

    def reply(self, status, obj, close=False):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def client_ok(self):
        h = self.headers.get("Authorization", "")
        if not h.startswith("Basic "):
            return False
        try:
            pair = base64.b64decode(h[6:], validate=True).decode()
        except ValueError:
            return False
        cid, _, sec = pair.partition(":")
        return (urllib.parse.unquote_plus(cid) == ARGS.client_id and
                urllib.parse.unquote_plus(sec) == SECRET)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(self.rfile.read(n).decode(),
                                     keep_blank_values=True)
        grant = form.get("grant_type", [""])[0]
        m = mode()
        if self.server.role != "idp" or self.path != "/token":
            return self.reply(404, {"error": "not_found"})
        if m == "close":
            log("token.log", {"grant": grant, "status": 0})
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if m == "badjson":
            log("token.log", {"grant": grant, "status": 200})
            body = b"<html>not json</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            return
        if m == "503":
            log("token.log", {"grant": grant, "status": 503})
            return self.reply(503, {"error": "temporarily_unavailable"},
                              close=True)
        status, obj = self.token(grant, form)
        log("token.log", {"grant": grant, "status": status,
                          "scope": form.get("scope", [""])[0]})
        self.reply(status, obj, close=True)

    def token(self, grant, form):
        if not self.client_ok():
            return 401, {"error": "invalid_client"}
        out = {"token_type": "Bearer", "expires_in": ARGS.expires}
        with LOCK:
            if grant == "refresh_token":
                if form.get("refresh_token", [""])[0] != STATE["refresh"]:
                    return 400, {"error": "invalid_grant"}
                STATE["refresh"] = out["refresh_token"] = issue("rt")
            elif grant != "client_credentials":
                return 400, {"error": "unsupported_grant_type"}
            out["access_token"] = tok = issue("at")
            STATE["access"][tok] = time.monotonic() + ARGS.expires
        out["scope"] = form.get("scope", [""])[0]
        return 200, out

    def do_GET(self):
        if self.server.role != "api":
            return self.reply(404, {"error": "not_found"})
        h = self.headers.get("Authorization", "")
        tok = h[7:] if h.startswith("Bearer ") else ""
        with LOCK:
            live = STATE["access"].get(tok, 0) > time.monotonic()
        status = 200 if live else 401
        log("api.log", {"path": self.path, "status": status})
        if not live:
            return self.reply(401, {"error": "invalid_token"})
        obj = {"ok": True, "seen": h}
        if self.path.endswith("/leak"):
            obj["secret"] = SECRET
            obj["refresh"] = STATE["refresh"]
        self.reply(200, obj)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the burst's 200 connections at once


def serve(addr, role, ctx):
    srv = Server((addr, 443), Handler)
    srv.role = role
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def main():
    global ARGS, SECRET
    ap = argparse.ArgumentParser()
    for k in ("--idp", "--api", "--cert", "--key", "--client-id",
              "--secret-file", "--refresh-file", "--dir", "--ready"):
        ap.add_argument(k, required=True)
    ap.add_argument("--expires", type=int, default=3)
    ap.add_argument("--bad-cert")
    ap.add_argument("--bad-key")
    ARGS = ap.parse_args()
    with open(ARGS.secret_file) as f:
        SECRET = f.read().strip()
    with open(ARGS.refresh_file) as f:
        STATE["refresh"] = f.read().strip()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    if ARGS.bad_cert:
        bad = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        bad.load_cert_chain(ARGS.bad_cert, ARGS.bad_key)

        def sni(sock, name, _ctx):
            if name == "idp.test" and mode() == "badcert":
                sock.context = bad
        ctx.sni_callback = sni
    serve(ARGS.idp, "idp", ctx)
    serve(ARGS.api, "api", ctx)
    open(ARGS.ready, "w").close()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
