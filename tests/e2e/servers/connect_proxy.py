#!/usr/bin/python3
"""A corporate-style HTTP CONNECT proxy for the test bed (stdlib only).

  connect_proxy.py --listen ADDR:PORT --source ADDR --auth-file FILE
                   --log FILE --ready FILE [--map NAME=ADDR ...]

Every CONNECT is answered only with the Proxy-Authorization value that
--auth-file holds at that moment (re-read per request, so a test can make
egressd's credential wrong without restarting anything): 407 otherwise.
A target name is looked up in --map (the proxy's own "DNS"); an IP
literal is dialled as it is; the outgoing connection is bound to --source
so the origins see the proxy's address as their peer. Each request is one
JSON line to --log:
  {"ev":"proxy.connect","client":{"addr","port"},"target":"h:p",
   "auth":"ok"|"bad"|"none","status":200|400|405|407|502}
Bounded: heads of 8 KiB, 64 connections at once, 30 s idle per tunnel.
"""
import argparse
import json
import select
import socket
import socketserver
import sys
import threading

HEAD_MAX = 8192
IDLE_S = 30
CONNS_MAX = 64


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--auth-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--map", action="append", default=[])
    a = ap.parse_args()
    names = dict(m.split("=", 1) for m in a.map)
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(CONNS_MAX)
    logf = open(a.log, "a", buffering=1)

    def log(rec):
        with lock:
            logf.write(json.dumps(rec, sort_keys=True) + "\n")

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            if not slots.acquire(blocking=False):
                return
            try:
                self.tunnel()
            finally:
                slots.release()

        def reply(self, status, text):
            self.request.sendall(
                ("HTTP/1.1 %d %s\r\nProxy-Authenticate: Basic realm=\"tb\"\r\n"
                 "Content-Length: 0\r\nConnection: close\r\n\r\n"
                 % (status, text)).encode())

        def tunnel(self):
            c = self.request
            c.settimeout(IDLE_S)
            buf = b""
            while b"\r\n\r\n" not in buf and len(buf) < HEAD_MAX:
                d = c.recv(HEAD_MAX - len(buf))
                if not d:
                    return
                buf += d
            head, _, rest = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            hdrs = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                hdrs[k.strip().lower()] = v.strip()
            rec = {"ev": "proxy.connect",
                   "client": {"addr": self.client_address[0],
                              "port": self.client_address[1]},
                   "target": parts[1] if len(parts) == 3 else "",
                   "method": parts[0]}
            try:
                with open(a.auth_file) as f:
                    want = f.read().strip()
            except OSError:
                want = None
            got = hdrs.get("proxy-authorization")
            rec["auth"] = "none" if got is None else (
                "ok" if got == want else "bad")
            if len(parts) != 3 or parts[0] != "CONNECT":
                rec["status"] = 405
                log(rec)
                return self.reply(405, "Method Not Allowed")
            if rec["auth"] != "ok":
                rec["status"] = 407
                log(rec)
                return self.reply(407, "Proxy Authentication Required")
            host, _, port = parts[1].rpartition(":")
            host = host.strip("[]")
            addr = names.get(host, host)
            try:
                fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
                src = a.source if fam == socket.AF_INET else "::"
                u = socket.create_connection((addr, int(port)), timeout=5,
                                             source_address=(src, 0))
            except (OSError, ValueError):
                rec["status"] = 502
                log(rec)
                return self.reply(502, "Bad Gateway")
            rec["status"] = 200
            rec["upstream"] = addr
            log(rec)
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                u.sendall(rest)
            self.pump(c, u)

        def pump(self, c, u):
            socks = [c, u]
            try:
                while socks:
                    r, _, _ = select.select(socks, [], [], IDLE_S)
                    if not r:
                        break
                    for s in r:
                        d = s.recv(65536)
                        o = u if s is c else c
                        if not d:
                            socks.remove(s)
                            try:
                                o.shutdown(socket.SHUT_WR)
                            except OSError:
                                pass
                        else:
                            o.sendall(d)
            except OSError:
                pass
            finally:
                u.close()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    host, _, port = a.listen.rpartition(":")
    srv = Server((host, int(port)), Handler)
    open(a.ready, "w").close()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
