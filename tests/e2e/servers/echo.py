#!/usr/bin/python3
"""Plain TCP and UDP echo listeners of the test bed's fake internet.

  echo.py --log FILE --ready FILE --listen tcp:ADDR:PORT --listen udp:ADDR:PORT

TCP: every accepted connection is logged as {"ev":"echo.tcp.accept",
"server":{addr,port}, "client":{addr,port}}, whatever arrives is sent back,
and {"ev":"echo.tcp.close", ..., "bytes":N, "data": first 256 bytes} is
logged at the end. UDP: every datagram is echoed and logged as
{"ev":"echo.udp", "server", "client", "bytes", "data"}. data is latin-1.
Bounds: 16 MiB echoed per connection, 30 s idle, 64 KiB per datagram,
512 connections per listener.
A test that wants to prove "nothing reached the internet" asserts that no
echo.* line (and no origin.request line) names the destination.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time

MAX_CONN_BYTES = 16 << 20
IDLE_TIMEOUT_S = 30
DGRAM_MAX = 65535
DATA_LOGGED = 256
MAX_CONNS = 512  # per listener; more are closed at once


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


def family(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def ep(sa):
    return {"addr": sa[0], "port": sa[1]}


def tcp_conn(log, conn, peer, server, slots):
    try:
        tcp_echo(log, conn, peer, server)
    finally:
        slots.release()


def tcp_echo(log, conn, peer, server):
    conn.settimeout(IDLE_TIMEOUT_S)
    log.write(dict(ev="echo.tcp.accept", server=server, client=ep(peer)))
    total = 0
    head = b""
    try:
        while total < MAX_CONN_BYTES:
            data = conn.recv(65536)
            if not data:
                break
            if len(head) < DATA_LOGGED:
                head += data[:DATA_LOGGED - len(head)]
            total += len(data)
            conn.sendall(data)
    except OSError:
        pass
    finally:
        conn.close()
    log.write(dict(ev="echo.tcp.close", server=server, client=ep(peer),
                   bytes=total, data=head.decode("latin-1")))


def tcp_loop(log, s):
    server = ep(s.getsockname())
    slots = threading.BoundedSemaphore(MAX_CONNS)
    while True:
        conn, peer = s.accept()
        if not slots.acquire(blocking=False):
            conn.close()
            continue
        threading.Thread(target=tcp_conn,
                         args=(log, conn, peer, server, slots),
                         daemon=True).start()


def udp_loop(log, s):
    server = ep(s.getsockname())
    while True:
        data, peer = s.recvfrom(DGRAM_MAX)
        log.write(dict(ev="echo.udp", server=server, client=ep(peer),
                       bytes=len(data),
                       data=data[:DATA_LOGGED].decode("latin-1")))
        try:
            s.sendto(data, peer)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--listen", action="append", default=[])
    a = ap.parse_args()
    log = JsonLog(a.log)
    loops = []
    for spec in a.listen:
        proto, rest = spec.split(":", 1)
        addr, port = rest.rsplit(":", 1)
        addr = addr.strip("[]")
        kind = {"tcp": socket.SOCK_STREAM, "udp": socket.SOCK_DGRAM}.get(proto)
        if kind is None:
            sys.exit("bad protocol in --listen " + spec)
        s = socket.socket(family(addr), kind)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family(addr) == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, int(port)))
        if proto == "tcp":
            s.listen(128)
            loops.append((tcp_loop, s))
        else:
            loops.append((udp_loop, s))
    for fn, s in loops:
        threading.Thread(target=fn, args=(log, s), daemon=True).start()
    with open(a.ready + ".tmp", "w") as f:
        json.dump([ep(s.getsockname()) for _, s in loops], f)
    os.rename(a.ready + ".tmp", a.ready)
    threading.Event().wait()


if __name__ == "__main__":
    main()
