#!/usr/bin/python3
"""One probe from the sandbox, for the nft_* scenarios.

  nft_probe.py tcp|tcpmark|udp|udpmark|udpsend|icmp HOST PORT [TIMEOUT_S]
  nft_probe.py hold HOST PORT SECONDS       (one TCP connection, echo every 0.2 s)
  nft_probe.py loop HOST PORT SECONDS       (TCP connects back to back)

Prints one line: "ok <ms>" or "err <errno name> <ms>"; exit 0 only on ok.
tcp: connect (+ one echo round trip when the port is 7); udp: send and
wait for the echo; udpsend: send only (sendto's own verdict).
loop: prints "<attempts> <successes>" at the end.
"""
import errno
import socket
import sys
import time


def fam(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def err_name(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__


def probe(kind, host, port, tmo):
    t0 = time.monotonic()
    try:
        if kind == "icmp":
            s = socket.socket(fam(host), socket.SOCK_DGRAM,
                              socket.IPPROTO_ICMPV6 if ":" in host else socket.IPPROTO_ICMP)
            s.settimeout(tmo)
            s.sendto(b"\x80\0\0\0\0\0\0\1" if ":" in host else b"\x08\0\0\0\0\0\0\1", (host, 0))
            s.recv(64)
        elif kind in ("tcp", "tcpmark"):
            s = socket.socket(fam(host), socket.SOCK_STREAM)
            s.settimeout(tmo)
            if kind == "tcpmark":  # egressd's own traffic (needs root)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, 1)
            s.connect((host, port))
            if port == 7:
                s.sendall(b"ping")
                if s.recv(16) != b"ping":
                    raise OSError(errno.EPROTO, "no echo")
        else:
            s = socket.socket(fam(host), socket.SOCK_DGRAM)
            s.settimeout(tmo)
            if kind == "udpmark":  # egressd's own traffic (needs root)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, 1)
            s.sendto(b"ping", (host, port))
            if kind in ("udp", "udpmark"):
                s.recv(64)
        s.close()
        return True, "ok %d" % ((time.monotonic() - t0) * 1000)
    except socket.timeout:
        return False, "err TIMEOUT %d" % ((time.monotonic() - t0) * 1000)
    except OSError as e:
        return False, "err %s %d" % (err_name(e), (time.monotonic() - t0) * 1000)


def main():
    kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "hold":
        secs = float(sys.argv[4])
        s = socket.socket(fam(host), socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect((host, port))
        end = time.monotonic() + secs
        n = 0
        while time.monotonic() < end:
            s.sendall(b"x")
            if s.recv(4) != b"x":
                print("err EOF after %d" % n)
                return 1
            n += 1
            time.sleep(0.2)
        print("ok %d round trips" % n)
        return 0
    if kind == "loop":
        secs = float(sys.argv[4])
        end = time.monotonic() + secs
        tries = oks = 0
        while time.monotonic() < end:
            ok, _ = probe("tcp", host, port, 0.5)
            tries += 1
            oks += ok
            time.sleep(0.005)
        print("%d %d" % (tries, oks))
        return 0
    tmo = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0
    ok, line = probe(kind, host, port, tmo)
    print(line)
    return 0 if ok else 1


sys.exit(main())
