#!/usr/bin/python3
"""slowdns: a tiny authoritative DNS server that answers late.

    slowdns.py ADDR PORT ZONE IP DELAY_MS LOG [GATE]

Names under ZONE (and ZONE itself) get "A IP" (TTL 30) and NODATA for
other types; anything else NXDOMAIN. Every answer leaves DELAY_MS after
its query arrived and, with GATE, not before the file GATE exists (the
scenario opens the gate when it is ready; at most MAX_DELAY_MS in all),
over UDP and TCP, without holding up other queries
(one thread per query, at most MAX_INFLIGHT at once; more are dropped).
Each query is logged to LOG as a JSON line
{"ev":"slowdns.query","qname":…,"qtype":…,"proto":…,"t":…} when it
arrives, and {"ev":"slowdns.answer",…} when the answer leaves.
Used by e2e scenarios that need an answer in flight (e.g. across a policy
update). python3 stdlib only.
"""
import json
import os
import socket
import struct
import sys
import threading
import time

MAX_INFLIGHT = 64
MAX_DELAY_MS = 10000


def parse_question(msg):
    if len(msg) < 12:
        return None
    off, labels = 12, []
    while off < len(msg):
        n = msg[off]
        off += 1
        if n == 0:
            break
        if n > 63 or off + n > len(msg):
            return None
        labels.append(msg[off:off + n].decode("ascii", "replace").lower())
        off += n
    if off + 4 > len(msg):
        return None
    qtype, qclass = struct.unpack("!HH", msg[off:off + 4])
    return ".".join(labels), qtype, qclass, msg[12:off + 4]


def answer(msg, zone, ip):
    q = parse_question(msg)
    if q is None:
        return None
    qname, qtype, _qclass, qbytes = q
    (qid,) = struct.unpack("!H", msg[:2])
    rd = msg[2] & 0x01
    inzone = qname == zone or qname.endswith("." + zone)
    rcode = 0 if inzone else 3
    an = b""
    ancount = 0
    if inzone and qtype == 1:
        an = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 30, 4) + \
            socket.inet_aton(ip)
        ancount = 1
    flags = 0x8400 | (rd << 8) | rcode  # QR AA RD rcode
    hdr = struct.pack("!HHHHHH", qid, flags, 1, ancount, 0, 0)
    return hdr + qbytes + an, qname, qtype


class Server:
    def __init__(self, addr, port, zone, ip, delay_ms, log, gate):
        self.zone, self.ip, self.gate = zone.lower().rstrip("."), ip, gate
        self.delay = min(delay_ms, MAX_DELAY_MS) / 1000.0
        self.log = open(log, "a", buffering=1)
        self.lock = threading.Lock()
        self.sem = threading.BoundedSemaphore(MAX_INFLIGHT)
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self.udp = socket.socket(fam, socket.SOCK_DGRAM)
        self.udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.udp.bind((addr, port))
        self.tcp = socket.socket(fam, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((addr, port))
        self.tcp.listen(16)

    def note(self, ev, qname, qtype, proto):
        with self.lock:
            self.log.write(json.dumps({"ev": ev, "qname": qname,
                                       "qtype": qtype, "proto": proto,
                                       "t": round(time.time(), 3)}) + "\n")

    def late(self, msg, reply):
        try:
            got = answer(msg, self.zone, self.ip)
            if got is None:
                return
            out, qname, qtype = got
            proto = "udp" if reply[0] == "udp" else "tcp"
            self.note("slowdns.query", qname, qtype, proto)
            t0 = time.monotonic()
            time.sleep(self.delay)
            while self.gate and not os.path.exists(self.gate) and \
                    time.monotonic() - t0 < MAX_DELAY_MS / 1000.0:
                time.sleep(0.02)
            if reply[0] == "udp":
                self.udp.sendto(out, reply[1])
            else:
                reply[1].sendall(struct.pack("!H", len(out)) + out)
            self.note("slowdns.answer", qname, qtype, proto)
        except OSError:
            pass
        finally:
            self.sem.release()

    def spawn(self, msg, reply):
        if not self.sem.acquire(blocking=False):
            return  # overloaded: drop, as a busy resolver would
        threading.Thread(target=self.late, args=(msg, reply),
                         daemon=True).start()

    def serve_udp(self):
        while True:
            msg, peer = self.udp.recvfrom(4096)
            self.spawn(msg, ("udp", peer))

    def serve_conn(self, c):
        c.settimeout(15)
        try:
            while True:
                hdr = c.recv(2, socket.MSG_WAITALL)
                if len(hdr) < 2:
                    break
                (n,) = struct.unpack("!H", hdr)
                msg = c.recv(n, socket.MSG_WAITALL)
                if len(msg) < n:
                    break
                self.spawn(msg, ("tcp", c))
        except OSError:
            pass

    def serve_tcp(self):
        while True:
            c, _ = self.tcp.accept()
            threading.Thread(target=self.serve_conn, args=(c,),
                             daemon=True).start()


def main():
    if len(sys.argv) not in (7, 8):
        sys.exit("usage: slowdns.py ADDR PORT ZONE IP DELAY_MS LOG [GATE]")
    s = Server(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4],
               int(sys.argv[5]), sys.argv[6],
               sys.argv[7] if len(sys.argv) == 8 else None)
    threading.Thread(target=s.serve_tcp, daemon=True).start()
    s.serve_udp()


if __name__ == "__main__":
    main()
