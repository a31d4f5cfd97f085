#!/usr/bin/python3
"""TCP hold from the sandbox, for the flow-cut scenarios (nft_cut_*).

  tcp_hold.py HOST SECONDS

One TCP connection to HOST:7 (the bed's echo), a line every 200 ms, each
echoed back. Prints "up <epoch>" once connected, then "ok <n>" at the
end, or "err <errno name> <epoch> after <n>" when it breaks (exit 1).
"""
import errno, socket, sys, time
host, secs = sys.argv[1], float(sys.argv[2])
s = socket.create_connection((host, 7), timeout=3)
print("up %.3f" % time.time(), flush=True)
n, end = 0, time.monotonic() + secs
try:
    while time.monotonic() < end:
        s.sendall(b"ping %d\n" % n)
        got = b""
        while not got.endswith(b"\n"):
            c = s.recv(64)
            if not c:
                raise OSError(errno.EPIPE, "EOF")
            got += c
        n += 1
        time.sleep(0.2)
except OSError as e:
    name = errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__
    print("err %s %.3f after %d" % (name, time.time(), n), flush=True)
    sys.exit(1)
print("ok %d" % n, flush=True)
