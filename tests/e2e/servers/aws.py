#!/usr/bin/python3
"""A fake AWS endpoint (S3 and a Bedrock-style runtime) that verifies SigV4.

  aws.py --log FILE --ready FILE --cert CRT --key KEY --listen ADDR:PORT
         --key-id ID --secret-file FILE [--token-file FILE]

Every request's Authorization is checked the way AWS does, with the REAL
key (read from --secret-file, never logged): the key id must be --key-id,
X-Amz-Security-Token must be the --token-file value when one is given, the
signature is recomputed with botocore's own signer (S3SigV4Auth for the
s3 service: the path as sent; SigV4Auth otherwise: the path encoded
again) over the headers SignedHeaders names, and a payload hash other
than UNSIGNED-PAYLOAD must be the body's SHA-256 (UNSIGNED-PAYLOAD is
accepted for s3 only). A request that fails gets 403 (S3's
SignatureDoesNotMatch XML, or a JSON message) and nothing else happens.

Each request is logged as {"ev":"aws.request", "method", "path", "query",
"host", "authorization", "x-amz-date", "x-amz-security-token",
"x-amz-content-sha256", "body_len", "verdict": "ok" | a reason}: the
proof of what reached the origin (the sandbox's fake key id must never
appear there).

S3: PUT stores the body under host + path, GET returns it (404 NoSuchKey
otherwise). POST /model/ID/invoke answers {"completion": ..., "model": ID,
"prompt_len": N, "key_id": the key id it verified} (an origin that echoes
the key id, which egressd must redact). Bounds: 8 MiB per body, 1000
objects, 30 s idle.
"""

import argparse
import hashlib
import json
import re
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

BODY_MAX = 8 << 20
OBJECTS_MAX = 1000
AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([a-z0-9-]+)/([a-z0-9-]+)"
    r"/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


class Conf:
    pass


CONF = Conf()
STORE = {}
LOCK = threading.Lock()


def log(obj):
    obj = dict(ts=time.time(), **obj)
    with LOCK:
        with open(CONF.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")


def verify(method, host, target, headers, body):
    """"ok" or why not."""
    auth = headers.get("authorization", "")
    m = AUTH_RE.match(auth)
    if not m:
        return "no SigV4 Authorization"
    key_id, day, region, service, signed, sig = m.groups()
    if key_id != CONF.key_id:
        return "unknown key id"
    date = headers.get("x-amz-date", "")
    if not date.startswith(day):
        return "x-amz-date does not match the scope"
    if CONF.token is not None and \
            headers.get("x-amz-security-token") != CONF.token:
        return "security token missing or wrong"
    phash = headers.get("x-amz-content-sha256", "")
    if phash == "UNSIGNED-PAYLOAD":
        if service != "s3":
            return "UNSIGNED-PAYLOAD outside s3"
    elif phash != hashlib.sha256(body).hexdigest():
        return "payload hash does not match the body"
    req = AWSRequest(method=method, url="https://" + host + target, data=body)
    names = signed.split(";")
    for n in names:
        if n not in headers:
            return "signed header %s missing" % n
        for v in headers.get_all(n):
            req.headers.add_header(n, v)
    req.context["timestamp"] = date
    # botocore's own signers, at the request's X-Amz-Date: S3's signs the
    # path as sent, the other one encodes it again
    cls = S3SigV4Auth if service == "s3" else SigV4Auth
    signer = cls(Credentials(CONF.key_id, CONF.secret, CONF.token),
                 service, region)
    want = signer.signature(
        signer.string_to_sign(req, signer.canonical_request(req)), req)
    if want != sig:
        return "SignatureDoesNotMatch"
    return "ok"


class Headers:
    """Lowercase multi-map of the request's headers."""

    def __init__(self, msg):
        self.d = {}
        for k, v in msg.items():
            self.d.setdefault(k.lower(), []).append(v)

    def get(self, k, dflt=None):
        v = self.d.get(k)
        return ",".join(v) if v else dflt

    def get_all(self, k):
        return self.d.get(k, [])

    def __contains__(self, k):
        return k in self.d


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.connection.settimeout(30)

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
                if len(out) > BODY_MAX:
                    raise ValueError("body too large")
        n = int(self.headers.get("Content-Length", "0"))
        if n > BODY_MAX:
            raise ValueError("body too large")
        return self.rfile.read(n)

    def reply(self, status, body, ctype, extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        body = self.read_body()
        h = Headers(self.headers)
        host = h.get("host", "")
        path, _, query = self.path.partition("?")
        verdict = verify(self.command, host, self.path, h, body)
        log(dict(ev="aws.request", method=self.command, path=path,
                 query=query, host=host,
                 authorization=h.get("authorization", ""),
                 **{k: h.get(k, "") for k in (
                     "x-amz-date", "x-amz-security-token",
                     "x-amz-content-sha256")},
                 body_len=len(body), verdict=verdict))
        s3 = ".s3." in "." + host or host.startswith("s3.")
        if verdict != "ok":
            if s3:
                x = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>"
                     "<Code>SignatureDoesNotMatch</Code><Message>%s"
                     "</Message></Error>" % verdict).encode()
                return self.reply(403, x, "application/xml")
            x = json.dumps({"message": verdict}).encode()
            return self.reply(403, x, "application/json")
        if s3:
            return self.s3(host, path, body)
        m = re.match(r"^/model/([^/]+)/invoke$", path)
        if self.command == "POST" and m:
            x = json.dumps({"completion": "Hello from the fake Bedrock",
                            "model": unquote(m.group(1)), "prompt_len": len(body),
                            "key_id": CONF.key_id}).encode()
            return self.reply(200, x, "application/json")
        self.reply(404, b'{"message":"no such route"}', "application/json")

    def s3(self, host, path, body):
        key = host + path
        if self.command == "PUT":
            with LOCK:
                if len(STORE) >= OBJECTS_MAX and key not in STORE:
                    return self.reply(507, b"", "text/plain")
                STORE[key] = body
            etag = '"%s"' % hashlib.md5(body).hexdigest()
            return self.reply(200, b"", "text/plain", {"ETag": etag})
        if self.command in ("GET", "HEAD"):
            with LOCK:
                obj = STORE.get(key)
            if obj is None:
                x = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>"
                     b"<Code>NoSuchKey</Code></Error>")
                return self.reply(404, x, "application/xml")
            return self.reply(200, obj, "binary/octet-stream")
        self.reply(405, b"", "text/plain")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, port, ctx):
        self.address_family = socket.AF_INET6 if ":" in addr \
            else socket.AF_INET
        self.ctx = ctx
        super().__init__((addr, port), Handler)

    def get_request(self):
        sock, peer = super().get_request()
        sock.settimeout(10)  # the handshake, in the accept loop
        return self.ctx.wrap_socket(sock, server_side=True), peer

    def handle_error(self, request, client_address):
        pass


def main():
    ap = argparse.ArgumentParser()
    for k in ("log", "ready", "cert", "key", "listen", "key-id",
              "secret-file"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--token-file")
    a = ap.parse_args()
    CONF.log = a.log
    CONF.key_id = a.key_id
    with open(a.secret_file, encoding="utf-8") as f:
        CONF.secret = f.read().strip()
    CONF.token = None
    if a.token_file:
        with open(a.token_file, encoding="utf-8") as f:
            CONF.token = f.read().strip()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(a.cert, a.key)
    addr, _, port = a.listen.rpartition(":")
    srv = Server(addr.strip("[]"), int(port), ctx)
    with open(a.ready, "w", encoding="utf-8") as f:
        f.write("ready\n")
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
