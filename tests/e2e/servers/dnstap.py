#!/usr/bin/python3
"""dnstap: a DNS relay that records every query byte for byte.

    dnstap.py ADDR PORT UPSTREAM_ADDR LOG READY

Listens on ADDR:PORT (UDP and TCP), appends each query it receives to LOG
as a JSON line {"proto": "udp"|"tcp", "msg": HEX} (the whole message, as
it arrived) before anything else looks at it, then relays it to
UPSTREAM_ADDR:53 over the same protocol and the answer back. dnsmasq
drops a question whose labels hold a dot or a NUL before its query log
sees it, so a scenario that must know what egressd forwarded (threat_10)
puts this in front of it. Touches READY once both sockets listen.
python3 stdlib only; one thread per query, at most MAX_INFLIGHT.
"""
import json
import socket
import struct
import sys
import threading

MAX_INFLIGHT = 64
UPSTREAM_TIMEOUT = 3.0


def main():
    addr, port, up, logpath, ready = sys.argv[1:6]
    port = int(port)
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(MAX_INFLIGHT)
    log = open(logpath, "a", encoding="ascii")

    def record(proto, msg):
        with lock:
            log.write(json.dumps({"proto": proto, "msg": msg.hex()}) + "\n")
            log.flush()

    def udp_one(us, msg, peer):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.settimeout(UPSTREAM_TIMEOUT)
                s.sendto(msg, (up, 53))
                us.sendto(s.recv(65535), peer)
        except OSError:
            pass
        finally:
            slots.release()

    def recv_exact(s, n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                raise OSError("short read")
            b += c
        return b

    def tcp_one(c):
        try:
            with c:
                c.settimeout(UPSTREAM_TIMEOUT)
                while True:
                    (n,) = struct.unpack(">H", recv_exact(c, 2))
                    msg = recv_exact(c, n)
                    record("tcp", msg)
                    with socket.create_connection(
                            (up, 53), timeout=UPSTREAM_TIMEOUT) as s:
                        s.sendall(struct.pack(">H", n) + msg)
                        (m,) = struct.unpack(">H", recv_exact(s, 2))
                        c.sendall(struct.pack(">H", m) + recv_exact(s, m))
        except OSError:
            pass
        finally:
            slots.release()

    us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    us.bind((addr, port))
    ts = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ts.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ts.bind((addr, port))
    ts.listen(64)

    def tcp_loop():
        while True:
            c, _ = ts.accept()
            if slots.acquire(blocking=False):
                threading.Thread(target=tcp_one, args=(c,),
                                 daemon=True).start()
            else:
                c.close()

    threading.Thread(target=tcp_loop, daemon=True).start()
    open(ready, "w").close()
    while True:
        msg, peer = us.recvfrom(65535)
        record("udp", msg)
        if slots.acquire(blocking=False):
            threading.Thread(target=udp_one, args=(us, msg, peer),
                             daemon=True).start()


if __name__ == "__main__":
    main()
