#!/usr/bin/python3
"""HTTP/HTTPS origin of the test bed's fake internet (stdlib only).

  origin.py --log FILE --ready FILE [--cert CRT --key KEY]
            --listen http:ADDR:PORT --listen https:ADDR:PORT ...

Every request, on any path and method, is answered with a JSON echo of what
arrived, and logged as one JSON line {"ev":"origin.request",...} to --log:

  {"ev":"origin.request", "server":{"addr","port","scheme","sni","alpn"},
   "client":{"addr","port"}, "method", "target", "path", "query", "version",
   "headers":[[name,value],...], "h":{lowercase name: value (dups joined
   with ", ")}, "raw_head": the request line and header lines as received
   (latin-1), "body_len", "body" (first 64 KiB, latin-1)}

Query parameters shape the response (all bounded):
  echo=Name1,Name2   reflect those request headers into response headers
                     "X-Echo-Name1: value" (the JSON body always carries all)
  echo_prev=Name1,.. the values those headers had on the previous request
                     of the same connection (a /whoami that remembers, an
                     error page quoting what it saw): response headers
                     "X-Echo-Prev-Name1: value" and "prev" in the JSON body
  chunked=1          send the body with Transfer-Encoding: chunked
  trailer=1          chunked, plus the echo= headers again as trailers
  trailer_extra=1    with trailer=1, also trailers a trailer may not carry
                     (Content-Length, Set-Cookie, Transfer-Encoding) and one
                     it may (Server-Timing)
  enc=CODING         the body compressed: gzip, deflate (zlib-wrapped),
                     rawdeflate (sent as "deflate"); br and zstd are sent
                     as labelled but uncompressed (the stdlib has neither)
  bomb=N             a gzip body of N MiB of zeros (at most 256; about
                     1 KiB compressed per MiB)
  split=N            chunked: chunks of N bytes (1..16384)
  forms=Name         the JSON echo also carries that header's value (after
                     "Bearer ") rendered: "forms": {"b64", "b64url", "pct"}
  status=NNN         response status (default 200)
  location=URL       Location header (use with status=302 for redirects)
  reason=Name        that request header's value as the status line's
                     reason phrase
  hname=Name         a response header named after that request header's
                     value (its last space-separated word), value "1"
  bytes=N            body of N 'x' bytes instead of the JSON echo
  text=N             body of N bytes of text that compresses about 2:1: the
                     lines "%d %s\n" % (i, sha256(str(i)).hexdigest()),
                     cut at N (at most 16 MiB)
  delay_ms=N         wait before answering
  close=1            Connection: close
  idle_ms=N          after this response, close the connection if no
                     request arrives within N ms (a short keep-alive
                     timeout; without a close_notify, as many servers)
  ce=NAME            a Content-Encoding: NAME header (the body is not encoded)
  sse=N              text/event-stream, chunked: N events ("data: event K"),
                     one chunk each, gap_ms apart (default 300, at most 2000);
                     with enc=gzip one gzip stream, flushed after each event
                     (the echo= headers' values ride along in each event)
  ws=1               with "Upgrade: websocket": 101, then every text or
                     binary frame echoed until a close frame (64 KiB per
                     frame, 100 frames)
  store=KEY          keep this request as received (its head, then its
                     body) under KEY ([A-Za-z0-9._-], 1..64), as a request
                     log or a notes API would; kept before any delay_ms, so
                     a slow request is readable while it is still answered
  load=KEY           the body is what KEY keeps (404 if nothing), as
                     application/octet-stream; part=head or part=body for
                     one of the two; off=N&len=M a slice of it (a substring
                     or pagination API); a "Range: bytes=A-B" (or "A-")
                     header a 206 with Content-Range (head and body in
                     one write, as for echo_form)
  echo_form=FORM     the body is "hello " + the request's Authorization
                     header (form_of=Name for another) rendered as FORM,
                     then "\n": b64line (base64 of the whole line
                     "Name: value"), b64wrap (the same, MIME-wrapped at 76
                     columns with CRLF), hexlower, hexupper (the value
                     after its scheme word), basicdec (a Basic value
                     decoded: "user:password"), basicpw (its password)
  noread=1           answer without reading the request's body (an origin
                     that ignores a body it does not expect, "CL.0"): the
                     body's bytes are read as the connection's next request
Methods are case-sensitive: a lowercase "head" is answered like GET, with
a body (as Go and hyper do); only "HEAD" gets the head alone.
Bounds: request body 1 MiB, bytes 1 GiB, delay 10 s, idle 30 s, 512
connections per listener, stored requests 64 of 64 KiB each (the oldest
goes first; a longer request is kept cut at the bound). A head the stdlib parser rejects (400, 431, ...)
is logged as {"ev":"origin.bad_request", "status", "raw_head", ...}.

The TLS handshake runs on the connection's own thread so a client that
never finishes it cannot stall the accept loop.
"""

import argparse
import http.server
import json
import os
import re
import socket
import socketserver
import ssl
import sys
import threading
import time
import urllib.parse
import zlib

MAX_BODY = 1 << 20
MAX_BODY_LOGGED = 64 << 10
MAX_RAW_HEAD = 64 << 10
MAX_BYTES = 1 << 30  # bytes=N: 'x' bytes written as they go
MAX_TEXT = 16 << 20  # text=N: built in memory first
MAX_BOMB_MIB = 256
MAX_DELAY_MS = 10000
MAX_CONNS = 512  # per listener; more are closed at once
IDLE_TIMEOUT_S = 30
CHUNK = 16 << 10
STORE_KEYS_MAX = 64
STORE_BYTES_MAX = 64 << 10
STORE_KEY_MAX = 64


class JsonLog:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, obj):
        obj = dict(ts=time.time(), **obj)
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        with self.lock:
            self.f.write(line)
            self.f.flush()


class TeeReader:
    """Wraps rfile to keep the raw bytes of the request head."""

    def __init__(self, f):
        self.f = f
        self.buf = bytearray()

    def readline(self, *a):
        ln = self.f.readline(*a)
        if len(self.buf) < MAX_RAW_HEAD:
            self.buf += ln
        return ln

    def take(self):
        b = bytes(self.buf)
        self.buf.clear()
        return b

    def __getattr__(self, name):
        return getattr(self.f, name)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tb-origin/1"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S

    def setup(self):
        self.sni = None
        self.alpn = None
        self.prev = {}  # the previous request's headers, lowercase names
        if self.server.tls_ctx is not None:
            self.request.settimeout(IDLE_TIMEOUT_S)
            try:
                self.request = self.server.tls_ctx.wrap_socket(
                    self.request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                self.server.log.write(dict(
                    ev="origin.tls_error", server=self.server.info(None),
                    client=self.client(), reason=type(e).__name__,
                    detail=str(e)[:200]))
                raise
            self.sni = getattr(self.request, "tb_sni", None)
            self.alpn = self.request.selected_alpn_protocol()
        super().setup()
        self.rfile = TeeReader(self.rfile)

    def finish(self):
        try:
            super().finish()
        finally:
            if self.server.tls_ctx is not None:
                self.request.close()

    def client(self):
        a = self.client_address
        return {"addr": a[0], "port": a[1]}

    def log_message(self, fmt, *args):
        pass

    def send_error(self, code, message=None, explain=None):
        # The head was rejected before handle_any: still record what came.
        if isinstance(self.rfile, TeeReader):
            self.server.log.write(dict(
                ev="origin.bad_request", server=self.server.info(self),
                client=self.client(), status=code,
                raw_head=self.rfile.take().decode("latin-1")))
        super().send_error(code, message, explain)

    def handle_one_request(self):
        if isinstance(self.rfile, TeeReader):
            self.rfile.take()
        super().handle_one_request()

    def read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        body = bytearray()
        if "chunked" in te.lower():
            while True:
                ln = self.rfile.readline(1024)
                try:
                    n = int(ln.split(b";")[0].strip(), 16)
                except ValueError:
                    self.close_connection = True
                    return bytes(body)
                if n == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b"\n",
                                                            b""):
                        pass
                    return bytes(body)
                if len(body) + n > MAX_BODY:
                    self.close_connection = True
                    return bytes(body)
                body += self.rfile.read(n)
                self.rfile.readline(8)
        cl = self.headers.get("Content-Length")
        if cl is not None:
            try:
                n = int(cl)
            except ValueError:
                n = 0
                self.close_connection = True
            if n > MAX_BODY:
                # the rest stays unread: this connection cannot go on
                self.close_connection = True
            n = max(0, min(n, MAX_BODY))
            body += self.rfile.read(n)
        return bytes(body)

    def handle_any(self):
        raw_head = self.rfile.take()
        noread = "noread=1" in urllib.parse.urlsplit(self.path).query.split(
            "&")
        body = b"" if noread else self.read_body()
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)

        def qget(k, dflt=None):
            v = q.get(k)
            return v[0] if v else dflt

        def qint(k, dflt, hi):
            try:
                return max(0, min(int(qget(k, dflt)), hi))
            except ValueError:
                return dflt

        headers = [[k, v] for k, v in self.headers.items()]
        h = {}
        for k, v in headers:
            lk = k.lower()
            h[lk] = v if lk not in h else h[lk] + ", " + v
        rec = dict(
            ev="origin.request", server=self.server.info(self),
            client=self.client(), method=self.command, target=self.path,
            path=u.path, query=u.query, version=self.request_version,
            headers=headers, h=h, raw_head=raw_head.decode("latin-1"),
            body_len=len(body),
            body=body[:MAX_BODY_LOGGED].decode("latin-1"))
        self.server.log.write(rec)

        key = qget("store")
        if key is not None and store_key_ok(key):
            store_put(key, raw_head, body)

        prev, self.prev = self.prev, h
        echo_prev = [(n.strip(), prev[n.strip().lower()])
                     for n in qget("echo_prev", "").split(",")
                     if n.strip().lower() in prev]
        if qget("ws") == "1" and h.get("upgrade", "").lower() == "websocket":
            return self.websocket_echo(h)
        enc = qget("enc")
        echo = [n.strip() for n in qget("echo", "").split(",") if n.strip()]
        echoed = [(n, self.headers.get(n)) for n in echo
                  if self.headers.get(n) is not None]
        if qget("sse") is not None:
            return self.sse(qint("sse", 1, 100), qint("gap_ms", 300, 2000),
                            enc, echoed)

        delay = qint("delay_ms", 0, MAX_DELAY_MS)
        if delay:
            time.sleep(delay / 1000.0)
        status = qint("status", 200, 599)
        if status < 100:
            status = 200
        trailer = qget("trailer") == "1"
        chunked = trailer or qget("chunked") == "1"

        extra = []
        if qget("load") is not None:
            payload, status, extra = self.load(qget, qint)
            n = len(payload)
            ctype = "application/octet-stream"
        elif qget("echo_form") is not None:
            payload = b"hello " + echo_form(
                qget("echo_form"), qget("form_of", "Authorization"),
                self.headers.get(qget("form_of", "Authorization"))) + b"\n"
            n = len(payload)
            ctype = "text/plain"
        elif qget("bomb") is not None:
            payload = bomb(qint("bomb", 1, MAX_BOMB_MIB))
            n = len(payload)
            ctype = "application/octet-stream"
            enc = "gzip"
        elif qget("text") is not None:
            payload = text(qint("text", 0, MAX_TEXT))
            if enc in ENCODERS:
                payload = ENCODERS[enc](payload)
            n = len(payload)
            ctype = "text/plain"
        elif qget("bytes") is not None:
            n = qint("bytes", 0, MAX_BYTES)
            payload = None
            ctype = "application/octet-stream"
        else:
            fv = self.headers.get(qget("forms", ""))
            if fv is not None:
                rec = dict(rec, forms=rendered(fv))
            if echo_prev:
                rec = dict(rec, prev=dict(echo_prev))
            payload = (json.dumps(rec, indent=1) + "\n").encode()
            if enc in ENCODERS:
                payload = ENCODERS[enc](payload)
            n = len(payload)
            ctype = "application/json"
        if payload is None and enc in ENCODERS:
            payload = ENCODERS[enc](b"x" * n)
            n = len(payload)

        self.send_response(status, self.headers.get(qget("reason", "")))
        self.send_header("Content-Type", ctype)
        for name, val in extra:
            self.send_header(name, val)
        hname = self.headers.get(qget("hname", ""))
        if hname is not None and hname.split():
            self.send_header(hname.split()[-1], "1")
        for name, val in echoed:
            self.send_header("X-Echo-" + name, val)
        for name, val in echo_prev:
            self.send_header("X-Echo-Prev-" + name, val)
        loc = qget("location")
        if loc is not None:
            self.send_header("Location", loc)
        ce = qget("ce")
        if ce is not None and ce.isalnum() and len(ce) <= 16:
            self.send_header("Content-Encoding", ce)
        elif enc in CODING_LABEL:
            self.send_header("Content-Encoding", CODING_LABEL[enc])
        if qget("close") == "1" or self.close_connection:
            # said, as a well-behaved server does, so that no client
            # (or proxy pool) reuses a connection about to close
            self.send_header("Connection", "close")
            self.close_connection = True
        idle = qint("idle_ms", 0, IDLE_TIMEOUT_S * 1000)
        if idle:
            self.connection.settimeout(idle / 1000.0)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            if trailer and echoed:
                self.send_header("Trailer", ", ".join(
                    "X-Echo-" + nm for nm, _ in echoed))
        else:
            self.send_header("Content-Length", str(n))
        if self.command == "HEAD":
            self.end_headers()
            return
        if not chunked and (qget("load") is not None or
                            qget("echo_form") is not None):
            # head and body in one write: a keep-alive client reading
            # many of these waits for no delayed ACK between the two
            self._headers_buffer.append(b"\r\n" + payload)
            self.flush_headers()
            return
        self.end_headers()
        tr = echoed if trailer else []
        if trailer and qget("trailer_extra") == "1":
            tr = tr + [("Content-Length", "99999"), ("Set-Cookie", "sid=1"),
                       ("Transfer-Encoding", "gzip"),
                       ("Server-Timing", "app;dur=1")]
        self.write_body(payload, n, chunked, tr,
                        qint("split", CHUNK, CHUNK) or CHUNK)

    def load(self, qget, qint):
        """The stored request of load=KEY, or a part or a slice of it:
        (payload, status, extra headers)."""
        got = store_get(qget("load"))
        if got is None:
            return b"no such key\n", 404, []
        head, body = got
        part = qget("part", "all")
        data = head if part == "head" else body if part == "body" else \
            head + body
        if qget("off") is not None or qget("len") is not None:
            off = qint("off", 0, len(data))
            data = data[off:off + qint("len", len(data), len(data))]
        rng = self.headers.get("Range", "")
        m = re.fullmatch(r"bytes=(\d{1,9})-(\d{0,9})", rng.strip())
        if m is None:
            return data, 200, []
        a = int(m.group(1))
        b = min(int(m.group(2)) if m.group(2) else len(data) - 1,
                len(data) - 1)
        if a > b:
            return b"", 416, [("Content-Range", "bytes */%d" % len(data))]
        return data[a:b + 1], 206, [
            ("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))]

    def sse(self, n, gap_ms, enc, echoed):
        z = zlib.compressobj(6, zlib.DEFLATED, 31) if enc == "gzip" else None
        extra = "".join(" %s=%s" % nv for nv in echoed)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if z is not None:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for k in range(n):
            if k:
                time.sleep(gap_ms / 1000.0)
            ev = ("data: event %d%s\n\n" % (k, extra)).encode()
            if z is not None:
                ev = z.compress(ev) + z.flush(zlib.Z_SYNC_FLUSH)
            self.wfile.write(b"%x\r\n" % len(ev) + ev + b"\r\n")
            self.wfile.flush()
        if z is not None:
            ev = z.flush()
            self.wfile.write(b"%x\r\n" % len(ev) + ev + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def websocket_echo(self, h):
        import base64
        import hashlib
        key = h.get("sec-websocket-key", "")
        acc = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", acc.decode())
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        r = self.rfile
        for _ in range(100):
            hdr = r.read(2)
            if len(hdr) < 2:
                return
            op, ln = hdr[0] & 0x0f, hdr[1] & 0x7f
            if ln == 126:
                ln = int.from_bytes(r.read(2), "big")
            elif ln == 127:
                return
            if ln > 65536:
                return
            mask = r.read(4) if hdr[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(ln)))
            if op == 8:
                self.wfile.write(b"\x88\x00")
                self.wfile.flush()
                return
            if op in (1, 2):
                out = bytes([0x80 | op])
                out += bytes([len(data)]) if len(data) < 126 else \
                    b"\x7e" + len(data).to_bytes(2, "big")
                self.wfile.write(out + data)
                self.wfile.flush()

    def write_body(self, payload, n, chunked, trailers, size=CHUNK):
        sent = 0
        while sent < n:
            k = min(size if chunked else CHUNK, n - sent)
            part = payload[sent:sent + k] if payload is not None else b"x" * k
            if chunked:
                self.wfile.write(b"%x\r\n" % k + part + b"\r\n")
            else:
                self.wfile.write(part)
            sent += k
        if chunked:
            tail = b"0\r\n"
            for name, val in trailers:
                if name not in EXTRA_TRAILERS:
                    name = "X-Echo-" + name
                tail += ("%s: %s\r\n" % (name, val)).encode("latin-1")
            self.wfile.write(tail + b"\r\n")
        self.wfile.flush()


def text(n):
    import hashlib
    out, i, size = [], 0, 0
    while size < n:
        ln = b"%d %s\n" % (i, hashlib.sha256(b"%d" % i).hexdigest().encode())
        out.append(ln)
        size += len(ln)
        i += 1
    return b"".join(out)[:n]


def rendered(value):
    import base64
    v = value[7:] if value.startswith("Bearer ") else value
    b = v.encode("latin-1")
    return {"b64": base64.b64encode(b).decode(),
            "b64url": base64.urlsafe_b64encode(b).decode().rstrip("="),
            "pct": urllib.parse.quote(v, safe="")}


def echo_form(form, name, value):
    """A header's value (value; None when absent) rendered as an origin
    might quote it back (echo_form=)."""
    import base64
    if value is None:
        return b"(no " + name.encode("latin-1") + b")"
    v = value.encode("latin-1")
    cred = v.split(b" ", 1)[1] if b" " in v else v
    if form == "b64line":
        return base64.b64encode(name.encode("latin-1") + b": " + v)
    if form == "b64wrap":
        e = base64.b64encode(name.encode("latin-1") + b": " + v)
        return b"\r\n".join(e[i:i + 76] for i in range(0, len(e), 76))
    if form == "hexlower":
        return cred.hex().encode()
    if form == "hexupper":
        return cred.hex().upper().encode()
    if form in ("basicdec", "basicpw"):
        try:
            dec = base64.b64decode(cred, validate=True)
        except ValueError:
            return b"(not basic)"
        return dec if form == "basicdec" else dec.split(b":", 1)[-1]
    return b"(unknown form)"


_store = {}  # key: (head, body), oldest first (dicts keep insertion order)
_store_lock = threading.Lock()


def store_key_ok(key):
    return 0 < len(key) <= STORE_KEY_MAX and \
        re.fullmatch(r"[A-Za-z0-9._-]+", key) is not None


def store_put(key, head, body):
    head = head[:STORE_BYTES_MAX]
    body = body[:STORE_BYTES_MAX - len(head)]
    with _store_lock:
        _store.pop(key, None)
        while len(_store) >= STORE_KEYS_MAX:
            _store.pop(next(iter(_store)))
        _store[key] = (head, body)


def store_get(key):
    with _store_lock:
        return _store.get(key)


def zcompress(wbits):
    def f(data):
        c = zlib.compressobj(6, zlib.DEFLATED, wbits)
        return c.compress(data) + c.flush()
    return f


ENCODERS = {"gzip": zcompress(31), "deflate": zcompress(15),
            "rawdeflate": zcompress(-15), "br": bytes, "zstd": bytes}
CODING_LABEL = {"gzip": "gzip", "deflate": "deflate",
                "rawdeflate": "deflate", "br": "br", "zstd": "zstd"}
EXTRA_TRAILERS = ("Content-Length", "Set-Cookie", "Transfer-Encoding",
                  "Server-Timing")
_bombs = {}
_bombs_lock = threading.Lock()


def bomb(mib):
    with _bombs_lock:
        if mib not in _bombs:
            c = zlib.compressobj(9, zlib.DEFLATED, 31)
            zero = bytes(1 << 20)
            _bombs[mib] = b"".join(c.compress(zero) for _ in range(mib)) + \
                c.flush()
        return _bombs[mib]


for _m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS",
           "TRACE", "CONNECT", "PROPFIND", "head"):
    setattr(Handler, "do_" + _m, Handler.handle_any)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def __init__(self, addr, port, tls_ctx, log):
        self.slots = threading.BoundedSemaphore(MAX_CONNS)
        self.address_family = socket.AF_INET6 if ":" in addr else \
            socket.AF_INET
        self.tls_ctx = tls_ctx
        self.log = log
        self.scheme = "https" if tls_ctx else "http"
        super().__init__((addr, port), Handler)

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY,
                                   1)
        socketserver.TCPServer.server_bind(self)
        self.server_name = self.server_address[0]
        self.server_port = self.server_address[1]

    def info(self, handler):
        d = {"addr": self.server_address[0], "port": self.server_address[1],
             "scheme": self.scheme}
        if handler is not None and self.tls_ctx is not None:
            d["sni"] = handler.sni
            d["alpn"] = handler.alpn
        return d

    def handle_error(self, request, client_address):
        pass  # TLS failures are logged in setup; nothing else is expected


def record_sni(sslsock, name, ctx):
    sslsock.tb_sni = name  # read back by Handler.setup after the handshake


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--listen", action="append", default=[])
    a = ap.parse_args()
    log = JsonLog(a.log)
    servers = []
    for spec in a.listen:
        scheme, rest = spec.split(":", 1)
        addr, port = rest.rsplit(":", 1)
        addr = addr.strip("[]")
        ctx = None
        if scheme == "https":
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(a.cert, a.key)
            ctx.set_alpn_protocols(["http/1.1"])
            ctx.sni_callback = record_sni
        elif scheme != "http":
            sys.exit("bad scheme in --listen " + spec)
        servers.append(Server(addr, int(port), ctx, log))
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    with open(a.ready + ".tmp", "w") as f:
        json.dump([s.info(None) for s in servers], f)
    os.rename(a.ready + ".tmp", a.ready)
    threading.Event().wait()


if __name__ == "__main__":
    main()
