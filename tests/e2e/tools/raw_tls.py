#!/usr/bin/python3
"""A raw TLS (or TCP) client for the hostile sandbox: bytes curl will not
send (a lowercase method, requests pipelined in one write, a body that is
a request) and everything that comes back, unparsed.

  raw_tls.py [--plain] [--idle S] [--max S] HOST PORT CA REQFILE OUTFILE

Connects to HOST:PORT (TLS with SNI HOST, verified against the CA file
CA, unless --plain), writes REQFILE's bytes in one write, then reads until
the peer closes, nothing arrives for --idle seconds (default 3) or --max
seconds (default 10) have passed, at most 4 MiB; writes what it read to
OUTFILE and prints one line: "read N bytes, ended by eof|idle|max|limit|
error:NAME". Bounded in time, bytes and connections (one).
"""

import socket
import ssl
import sys
import time

READ_MAX = 4 << 20


def main(argv):
    args = argv[1:]
    plain, idle, most = False, 3.0, 10.0
    while args and args[0].startswith("--"):
        if args[0] == "--plain":
            plain, args = True, args[1:]
        elif args[0] == "--idle" and len(args) > 1:
            idle, args = min(float(args[1]), 30.0), args[2:]
        elif args[0] == "--max" and len(args) > 1:
            most, args = min(float(args[1]), 60.0), args[2:]
        else:
            break
    if len(args) != 5:
        sys.stderr.write("usage: see the source\n")
        return 2
    host, port, ca, reqfile, outfile = args
    with open(reqfile, "rb") as f:
        req = f.read()
    s = socket.create_connection((host, int(port)), timeout=most)
    if not plain:
        ctx = ssl.create_default_context(cafile=ca)
        s = ctx.wrap_socket(s, server_hostname=host)
    s.sendall(req)
    got, why = bytearray(), "eof"
    end = time.monotonic() + most
    while True:
        left = end - time.monotonic()
        if left <= 0:
            why = "max"
            break
        s.settimeout(min(idle, left))
        try:
            b = s.recv(65536)
        except socket.timeout:
            why = "idle" if left > idle else "max"
            break
        except (OSError, ssl.SSLError) as e:
            why = "error:" + type(e).__name__
            break
        if not b:
            break
        got += b
        if len(got) >= READ_MAX:
            why = "limit"
            break
    s.close()
    with open(outfile, "wb") as f:
        f.write(got)
    print("read %d bytes, ended by %s" % (len(got), why))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
