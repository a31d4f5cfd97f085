#!/usr/bin/python3
"""Send one hand-made TLS ClientHello and say what came back (stdlib only).

  tls_hello.py [--sni NAME | --no-sni] [--ech] [--esni] [--split N]
               HOST PORT

The hello is TLS 1.3-shaped (record version 0x0301, legacy_version 0x0303,
supported_versions 1.3 and 1.2, an X25519 key share, TLS 1.3 and ECDHE
TLS 1.2 suites, ALPN http/1.1) so a real server (the bed's origin.py,
OpenSSL) answers it with a ServerHello.

  --sni NAME   server_name carries NAME byte for byte (mixed case, a
               trailing dot, an IP literal: whatever is given)
  --no-sni     no server_name extension at all (the default is --sni
               HOST when HOST is not an IP literal, else no SNI)
  --ech        add an encrypted_client_hello extension (0xfe0d, outer,
               random payload: what a GREASE ECH client sends)
  --esni       add the draft encrypted_server_name extension (0xffce)
  --split N    send the hello in pieces of N bytes (TCP_NODELAY, 5 ms
               apart), so a peer must reassemble it across segments

HOST is an IPv4 or IPv6 literal (or a name). Prints one word:
  alert:CODE          the first record back is an alert (content type 21);
                      CODE is its description (40 handshake_failure, ...)
  handshake           the first record back is a handshake record (22):
                      a ServerHello, the hello got through
  other:TYPE          some other record type
  partial             fewer than 5 bytes, then EOF
  closed              EOF with nothing received
  reset               connection reset with nothing received
  timeout             nothing within 5 s
  connect_failed:ERR  the TCP connection did not open (5 s bound)
Exit 0 in every case but a usage error (2). Reads at most 64 KiB.
"""

import argparse
import errno
import os
import socket
import ssl
import struct
import sys
import time

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 5.0
READ_CAP = 64 << 10


def u8(n):
    return struct.pack("!B", n)


def u16(n):
    return struct.pack("!H", n)


def u24(n):
    return struct.pack("!I", n)[1:]


def vec8(b):
    return u8(len(b)) + b


def vec16(b):
    return u16(len(b)) + b


def ext(typ, body):
    return u16(typ) + vec16(body)


def is_ip_literal(s):
    for fam in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(fam, s)
            return True
        except OSError:
            pass
    return False


def client_hello(sni, ech, esni):
    suites = [0x1301, 0x1302, 0x1303, 0xc02b, 0xc02c, 0xc02f, 0xc030,
              0xcca9, 0xcca8]
    exts = b""
    if sni is not None:
        name = sni.encode("latin-1") if isinstance(sni, str) else sni
        exts += ext(0x0000, vec16(u8(0) + vec16(name)))
    exts += ext(0x0017, b"")                                # ems
    exts += ext(0xff01, u8(0))                              # reneg info
    exts += ext(0x000a, vec16(u16(0x001d) + u16(0x0017) + u16(0x0018)))
    exts += ext(0x000b, vec8(u8(0)))                        # uncompressed
    exts += ext(0x0010, vec16(vec8(b"http/1.1")))           # ALPN
    sigs = [0x0403, 0x0503, 0x0603, 0x0804, 0x0805, 0x0806, 0x0401,
            0x0501, 0x0601]
    exts += ext(0x000d, vec16(b"".join(u16(s) for s in sigs)))
    exts += ext(0x002b, vec8(u16(0x0304) + u16(0x0303)))    # versions
    exts += ext(0x002d, vec8(u8(1)))                        # psk_dhe_ke
    exts += ext(0x0033, vec16(u16(0x001d) + vec16(os.urandom(32))))
    if ech:
        # ECHClientHello, outer: type 0, HpkeSymmetricCipherSuite
        # (HKDF-SHA256, AES-128-GCM), config_id, enc, payload.
        exts += ext(0xfe0d, u8(0) + u16(0x0001) + u16(0x0001) +
                    os.urandom(1) + vec16(os.urandom(32)) +
                    vec16(os.urandom(144)))
    if esni:
        # draft-ietf-tls-esni-02: suite, key_share, record_digest,
        # encrypted_sni.
        exts += ext(0xffce, u16(0x1301) + u16(0x001d) +
                    vec16(os.urandom(32)) + vec16(os.urandom(32)) +
                    vec16(os.urandom(260)))
    body = (u16(0x0303) + os.urandom(32) + vec8(os.urandom(32)) +
            vec16(b"".join(u16(s) for s in suites)) + vec8(u8(0)) +
            vec16(exts))
    hs = u8(1) + u24(len(body)) + body
    return u8(22) + u16(0x0301) + vec16(hs)


def connect(host, port, lport=0):
    infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC,
                               socket.SOCK_STREAM)
    err = None
    for fam, typ, proto, _, addr in infos:
        s = socket.socket(fam, typ, proto)
        s.settimeout(CONNECT_TIMEOUT_S)
        try:
            if lport:
                s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0",
                        lport))
            s.connect(addr)
            return s
        except OSError as e:
            err = e
            s.close()
    raise err if err else OSError(errno.EHOSTUNREACH, "no address")


def errname(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    if e.errno:
        return errno.errorcode.get(e.errno, str(e.errno))
    return type(e).__name__


def outcome(e):
    """A failed socket or TLS call in one word (inflight_hello.py,
    port_reuse.py): timeout, tls:REASON, reset, refused or the errno's
    name."""
    if isinstance(e, ssl.SSLError):
        return "tls:%s" % (e.reason or type(e).__name__)
    if isinstance(e, OSError) and e.errno in (errno.ECONNRESET, errno.EPIPE):
        return "reset"
    if isinstance(e, OSError) and e.errno == errno.ECONNREFUSED:
        return "refused"
    if isinstance(e, OSError):
        return errname(e)
    return type(e).__name__


def verdict(buf):
    if len(buf) < 5:
        return None
    typ = buf[0]
    if typ == 21:
        if len(buf) < 7:
            return None
        return "alert:%d" % buf[6]
    if typ == 22:
        return "handshake"
    return "other:%d" % typ


def main():
    ap = argparse.ArgumentParser(
        description="send a crafted TLS ClientHello, report the reply")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--sni")
    g.add_argument("--no-sni", action="store_true")
    ap.add_argument("--ech", action="store_true")
    ap.add_argument("--esni", action="store_true")
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--lport", type=int, default=0,
                    help="the local port (to find the origin's socket)")
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    a = ap.parse_args()
    if a.split < 0 or not 0 < a.port < 65536:
        ap.error("bad --split or port")
    sni = a.sni
    if sni is None and not a.no_sni and not is_ip_literal(a.host):
        sni = a.host
    hello = client_hello(sni, a.ech, a.esni)

    try:
        s = connect(a.host, a.port, a.lport)
    except OSError as e:
        print("connect_failed:%s" % errname(e))
        return 0
    buf = b""
    try:
        if a.split > 0:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(0, len(hello), a.split):
                s.sendall(hello[i:i + a.split])
                time.sleep(0.005)
        else:
            s.sendall(hello)
        end = time.monotonic() + READ_TIMEOUT_S
        while len(buf) < READ_CAP:
            left = end - time.monotonic()
            if left <= 0:
                raise socket.timeout()
            s.settimeout(left)
            d = s.recv(READ_CAP - len(buf))
            if not d:
                break
            buf += d
            v = verdict(buf)
            if v is not None:
                print(v)
                return 0
    except socket.timeout:
        v = verdict(buf)
        print(v if v is not None else ("partial" if buf else "timeout"))
        return 0
    except OSError as e:
        v = verdict(buf)
        if v is None:
            v = "partial" if buf else (
                "reset" if e.errno in (errno.ECONNRESET, errno.EPIPE)
                else "error:%s" % errname(e))
        print(v)
        return 0
    finally:
        s.close()
    v = verdict(buf)
    print(v if v is not None else ("partial" if buf else "closed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
