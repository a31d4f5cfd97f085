"""hello_gap (bench_proxy.sh): from `tcpdump -n -tt` lines of the origin's
link on stdin, per connection to port 443 the time from the client's
handshake-completing ACK (no payload) to its first payload segment (the
ClientHello), in microseconds; a summary line per destination address
given as an argument. A tuple that comes again restarts at its SYN."""
import re
import statistics
import sys

LINE = re.compile(r'(\d+\.\d+) IP6? (\S+)\.(\d+) > (\S+)\.(\d+): '
                  r'Flags \[([^\]]*)\].*length (\d+)')


def gaps_of(lines):
    syn, ack, gaps = set(), {}, {}
    for line in lines:
        m = LINE.match(line)
        if m is None or m[5] != "443":
            continue
        t, dst, flags, n = float(m[1]), m[4], m[6], int(m[7])
        k = (dst, m[3])
        if flags == "S":
            syn.add(k)
            ack.pop(k, None)
        elif k in syn and k not in ack and n == 0 and flags == ".":
            ack[k] = t
        elif k in syn and k in ack and n > 0:
            syn.discard(k)
            gaps.setdefault(dst, []).append((t - ack[k]) * 1e6)
    return gaps


def main():
    gaps = gaps_of(sys.stdin)
    for dst in sys.argv[1:]:
        g = sorted(gaps.get(dst, []))
        if not g:
            print("%s: no connection seen" % dst)
            continue
        print("%-15s %4d connections: median %4.0f  p90 %4.0f  p99 %4.0f"
              % (dst, len(g), statistics.median(g), g[int(len(g) * 0.9)],
                 g[min(len(g) - 1, int(len(g) * 0.99))]))


if __name__ == "__main__":
    main()
