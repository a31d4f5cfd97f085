#!/usr/bin/env python3
"""execd_relay: plays OpenSandbox execd's reverse proxy in the sandbox
namespace (e2e api_execd_relay, issue 39).

    execd_relay.py ADDR PORT

Listens on ADDR:PORT (all addresses with 0.0.0.0, as execd does) and
relays `/proxy/<port>/<rest>?<query>` to http://127.0.0.1:<port>/<rest>
the way execd's ProxyMiddleware does (components/execd/pkg/web/proxy.go of
the reference): the Host header kept, X-Forwarded-For set to the client's
address, X-Forwarded-Proto: http, X-Forwarded-Host removed; a failed
connection answers 502 "Bad Gateway". Run it as the uid execd runs as.

One JSON line per request on stdout: {"ev": "relay.request", "uid",
"method", "path", "status"} or {"ev": "relay.error", "uid", "method",
"path", "error"} (the errno name of the failed connection), after one
{"ev": "relay.ready", "uid"} once listening. Bounded: bodies up to 1 MiB,
5 s per upstream operation, 10 s per client socket operation; stops after
30 requests or 120 s, whichever comes first (a test's relay never
outlives its test).
"""
import errno
import http.client
import http.server
import json
import os
import re
import sys
import threading

BODY_MAX = 1 << 20
UPSTREAM_TIMEOUT = 5
CLIENT_TIMEOUT = 10
REQUESTS_MAX = 30
LIFETIME_S = 120
HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
       "proxy-authorization", "te", "trailer", "transfer-encoding",
       "upgrade"}
PROXY_PATH = re.compile(r"^/proxy/([0-9]{1,5})(/[^?]*)?(\?.*)?$")


def log(**kv):
    print(json.dumps(kv), flush=True)


class Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = CLIENT_TIMEOUT

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, headers, body):
        self.send_response_only(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def relay(self):
        self.server.count += 1
        if self.server.count >= REQUESTS_MAX:
            threading.Thread(target=self.server.shutdown).start()
        m = PROXY_PATH.match(self.path)
        if m is None or int(m.group(1)) > 65535:
            self.answer(400, [("Content-Type", "text/plain")],
                        b"port is required\n")
            return
        port = int(m.group(1))
        path = (m.group(2) or "/") + (m.group(3) or "")
        n = int(self.headers.get("Content-Length") or 0)
        if n > BODY_MAX or self.headers.get("Transfer-Encoding"):
            self.answer(413, [], b"")
            return
        body = self.rfile.read(n) if n else None
        headers = {}
        for k, v in self.headers.items():
            if k.lower() not in HOP and k.lower() not in (
                    "content-length", "x-forwarded-host"):
                headers[k] = v
        xff = self.headers.get("X-Forwarded-For")
        headers["X-Forwarded-For"] = (xff.split(",")[0] if xff
                                      else self.client_address[0])
        headers["X-Forwarded-Proto"] = "http"
        conn = http.client.HTTPConnection("127.0.0.1", port,
                                          timeout=UPSTREAM_TIMEOUT)
        try:
            conn.request(self.command, path, body=body, headers=headers)
            resp = conn.getresponse()
            rbody = resp.read(BODY_MAX + 1)
        except OSError as e:
            log(ev="relay.error", uid=os.getuid(), method=self.command,
                path=self.path,
                error=errno.errorcode.get(e.errno, type(e).__name__)
                if e.errno else type(e).__name__)
            self.answer(502, [("Content-Type", "text/plain; charset=utf-8")],
                        b"Bad Gateway\n")
            return
        finally:
            conn.close()
        log(ev="relay.request", uid=os.getuid(), method=self.command,
            path=self.path, status=resp.status)
        out = [(k, v) for k, v in resp.getheaders()
               if k.lower() not in HOP and k.lower() != "content-length"]
        self.answer(resp.status, out, rbody[:BODY_MAX])

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = relay


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    count = 0


def main():
    if len(sys.argv) != 3:
        print("usage: execd_relay.py ADDR PORT", file=sys.stderr)
        return 2
    srv = Server((sys.argv[1], int(sys.argv[2])), Relay)
    timer = threading.Timer(LIFETIME_S, srv.shutdown)
    timer.daemon = True
    timer.start()
    log(ev="relay.ready", uid=os.getuid())
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
