#!/usr/bin/python3
"""A fake GitHub for e2e vault_github_app: the REST API with its App
installation-token endpoint, and git smart HTTP, HTTPS with the run's
test CA, in net-<id>.

  github.py --api ADDR --git ADDR --cert C --key K --pubkey PEM
            --app-id ID --installation ID --root DIR --expires S --dir D
            --ready F

api (ADDR:443, Host api.gh.test):
  POST /app/installations/ID/access_tokens needs "Authorization: Bearer
  <JWT>": RS256 verified with --pubkey (openssl dgst), iss == --app-id,
  exp - iat <= 660 and now within [iat - 30, exp] (GitHub's rules, with
  its 10 minutes); answers 201 {token, expires_at} with a fresh token
  living --expires seconds (the permissions and repositories asked for
  are echoed, as GitHub does). Every request is a JSON line of
  D/token.log (t, status, why, repositories, permissions); every token
  issued a line of D/issued and every JWT seen a line of D/jwts (for the
  secret scan; the directory is root's). D/mode: ok (default), 503 (an
  answer 503), close (the connection dropped unanswered).
  GET anything else needs "Authorization: Bearer <live token>" (401
  otherwise) and echoes that header back ("seen"). D/api.log lines
  (path, status).
git (ADDR:443, Host gh.test): git smart HTTP over `git http-backend`
  (servers/git_http.py's handler) behind "Authorization: Basic
  base64(x-access-token:<live token>)"; 401 with WWW-Authenticate
  otherwise. D/git.log lines (path, status, auth).
"""
import argparse
import base64
import json
import os
import secrets
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import git_http  # noqa: E402

LOCK = threading.Lock()
LIVE = {}  # token -> monotonic expiry
ARGS = None


def log(name, rec):
    rec["t"] = time.time()
    with LOCK, open(os.path.join(ARGS.dir, name), "a") as f:
        f.write(json.dumps(rec) + "\n")


def mode():
    try:
        with open(os.path.join(ARGS.dir, "mode")) as f:
            return f.read().strip() or "ok"
    except OSError:
        return "ok"


def b64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def jwt_why(jwt):
    """None when jwt is the App's valid JWT, else why not."""
    parts = jwt.split(".")
    if len(parts) != 3:
        return "not a JWT"
    try:
        hdr = json.loads(b64url(parts[0]))
        claims = json.loads(b64url(parts[1]))
        sig = b64url(parts[2])
    except ValueError:
        return "undecodable"
    if hdr.get("alg") != "RS256":
        return "alg"
    with tempfile.NamedTemporaryFile(dir=ARGS.dir) as f:
        f.write(sig)
        f.flush()
        p = subprocess.run(["openssl", "dgst", "-sha256", "-verify",
                            ARGS.pubkey, "-signature", f.name],
                           input=(parts[0] + "." + parts[1]).encode(),
                           capture_output=True, timeout=10)
    if p.returncode != 0:
        return "signature"
    now = time.time()
    iat, exp = claims.get("iat"), claims.get("exp")
    if str(claims.get("iss")) != ARGS.app_id:
        return "iss"
    if not isinstance(iat, int) or not isinstance(exp, int) or \
            exp - iat > 660 or now < iat - 30 or now > exp:
        return "times"
    return None


class Api(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def reply(self, status, obj, close=False):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0") or "0")
        raw = self.rfile.read(n) if n else b""
        want = "/app/installations/%s/access_tokens" % ARGS.installation
        if self.path != want:
            log("api.log", {"path": self.path, "status": 404})
            return self.reply(404, {"message": "Not Found"})
        m = mode()
        if m == "close":
            log("token.log", {"status": 0})
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if m == "503":
            log("token.log", {"status": 503})
            return self.reply(503, {"message": "unavailable"}, close=True)
        h = self.headers.get("Authorization", "")
        jwt = h[7:] if h.startswith("Bearer ") else ""
        with open(os.path.join(ARGS.dir, "jwts"), "a") as f:
            f.write(jwt + "\n")
        why = jwt_why(jwt) if jwt else "no bearer"
        try:
            asked = json.loads(raw) if raw else {}
        except ValueError:
            asked, why = {}, why or "body"
        rec = {"why": why, "accept": self.headers.get("Accept"),
               "repositories": asked.get("repositories"),
               "permissions": asked.get("permissions")}
        if why is not None:
            log("token.log", dict(rec, status=401))
            return self.reply(401, {"message": "A JSON web token could "
                                    "not be decoded"}, close=True)
        tok = "ghs_" + secrets.token_urlsafe(27)
        with LOCK:
            LIVE[tok] = time.monotonic() + ARGS.expires
        with open(os.path.join(ARGS.dir, "issued"), "a") as f:
            f.write(tok + "\n")
        exp = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                            time.gmtime(time.time() + ARGS.expires))
        log("token.log", dict(rec, status=201))
        self.reply(201, {"token": tok, "expires_at": exp,
                         "permissions": asked.get("permissions",
                                                  {"contents": "read"}),
                         "repository_selection": "selected",
                         "repositories": [{"id": 1, "name": r}
                                          for r in
                                          asked.get("repositories", [])]},
                   close=True)

    def do_GET(self):
        h = self.headers.get("Authorization", "")
        tok = h[7:] if h.startswith("Bearer ") else ""
        with LOCK:
            live = LIVE.get(tok, 0) > time.monotonic()
        status = 200 if live else 401
        log("api.log", {"path": self.path, "status": status})
        if not live:
            return self.reply(401, {"message": "Bad credentials"})
        self.reply(200, {"total_count": 1, "seen": h,
                         "repositories": [{"name": "r"}]})


class Git(git_http.Handler):
    def handle_any(self):
        h = self.headers.get("Authorization", "")
        ok = False
        if h.startswith("Basic "):
            try:
                user, _, tok = base64.b64decode(
                    h[6:], validate=True).decode().partition(":")
            except ValueError:
                user, tok = "", ""
            with LOCK:
                ok = user == "x-access-token" and \
                    LIVE.get(tok, 0) > time.monotonic()
        log("git.log", {"path": self.path, "status": 0 if ok else 401,
                        "auth": h.split(" ")[0] if h else ""})
        if ok:
            return super().handle_any()
        self.body()
        data = b"auth needed\n"
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = handle_any


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # a burst's connections at once


class GitServer(git_http.Server):
    def __init__(self, addr, port, ctx, log_, root):
        self.slots = threading.BoundedSemaphore(git_http.MAX_CONNS)
        self.address_family = socket.AF_INET
        self.ctx, self.log, self.root = ctx, log_, root
        ThreadingHTTPServer.__init__(self, (addr, port), Git)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    for k in ("--api", "--git", "--cert", "--key", "--pubkey", "--app-id",
              "--installation", "--root", "--dir", "--ready"):
        ap.add_argument(k, required=True)
    ap.add_argument("--expires", type=int, default=4)
    ARGS = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    api = ApiServer((ARGS.api, 443), Api)
    api.socket = ctx.wrap_socket(api.socket, server_side=True)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    git = GitServer(ARGS.git, 443, ctx,
                    git_http.Log(os.path.join(ARGS.dir, "git_http.log")),
                    os.path.abspath(ARGS.root))
    threading.Thread(target=git.serve_forever, daemon=True).start()
    open(ARGS.ready, "w").close()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
