#!/usr/bin/python3
"""Match, count and wait for JSON log lines (egressd's log, origin/echo logs).

Usage:
  jsonlog.py match FILE [--since OFFSET] [--min N] [--max N] EV [COND...]
  jsonlog.py wait  FILE [--since OFFSET] [--timeout S] [--pid PID] EV [COND...]
  jsonlog.py show  FILE [--since OFFSET] EV [COND...]

EV is the value of "ev" ("*" matches any). A COND is one of
  key=value   field equals value (strings compare as text, numbers/bools by
              their JSON text, so port=443 and ok=true work)
  key!=value  field missing or different
  key~regex   field (as text) matches the Python regex (re.search)
  key         field present
  !key        field absent
Keys may be dotted for nested objects ("h.authorization", "server.port").

match exits 0 when the number of matching lines is within [min, max]
(default min 1, no max), 1 otherwise, printing the count. wait polls
(bounded) until a matching line appears, or the timeout passes, or PID dies.
Lines that are not JSON objects are ignored, never fatal: a test asserting
on a log must not be fooled by a torn last line, and must not crash on one.
"""

import json
import re
import sys
import time

POLL_S = 0.02
TIMEOUT_MAX_S = 120.0
MISSING = object()


def usage():
    sys.stderr.write(__doc__)
    sys.exit(2)


def get(obj, dotted):
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return MISSING
        obj = obj[part]
    return obj


def as_text(v):
    if isinstance(v, str):
        return v
    return json.dumps(v)


def parse_cond(c):
    if c.startswith("!") and "=" not in c and "~" not in c:
        return ("absent", c[1:], None)
    for op, kind in (("!=", "ne"), ("=", "eq"), ("~", "re")):
        i = c.find(op)
        if i > 0:
            val = c[i + len(op):]
            if kind == "re":
                val = re.compile(val)
            return (kind, c[:i], val)
    return ("present", c, None)


def cond_ok(obj, cond):
    kind, key, val = cond
    v = get(obj, key)
    if kind == "absent":
        return v is MISSING
    if kind == "present":
        return v is not MISSING
    if kind == "ne":
        return v is MISSING or as_text(v) != val
    if v is MISSING:
        return False
    if kind == "eq":
        return as_text(v) == val
    return val.search(as_text(v)) is not None


def line_matches(line, ev, conds):
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if ev != "*" and obj.get("ev") != ev:
        return None
    for c in conds:
        if not cond_ok(obj, c):
            return None
    return obj


class Reader:
    """Reads complete lines from FILE starting at a byte offset."""

    def __init__(self, path, since):
        self.path = path
        self.off = since
        self.partial = b""

    def new_lines(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except FileNotFoundError:
            return []
        self.off += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return [ln.decode("utf-8", "replace") for ln in lines]


def alive(pid):
    """False when pid is gone or a zombie (exited, not yet reaped)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rfind(")") + 2:][:1] not in ("Z", "X")


def main(argv):
    if len(argv) < 3:
        usage()
    cmd, path = argv[1], argv[2]
    args = argv[3:]
    since, timeout, pid, mn, mx = 0, 5.0, None, 1, None
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if not args:
            usage()
        val = args.pop(0)
        if opt == "--since":
            since = int(val)
        elif opt == "--timeout":
            timeout = min(float(val), TIMEOUT_MAX_S)
        elif opt == "--pid":
            pid = int(val)
        elif opt == "--min":
            mn = int(val)
        elif opt == "--max":
            mx = int(val)
        else:
            usage()
    if not args:
        usage()
    ev = args[0]
    conds = [parse_cond(c) for c in args[1:]]
    rd = Reader(path, since)

    if cmd in ("match", "show"):
        found = [ln for ln in rd.new_lines() if line_matches(ln, ev, conds)]
        if cmd == "show":
            for ln in found:
                print(ln)
            return 0
        n = len(found)
        ok = n >= mn and (mx is None or n <= mx)
        print(n)
        return 0 if ok else 1

    if cmd == "wait":
        deadline = time.monotonic() + timeout
        while True:
            for ln in rd.new_lines():
                if line_matches(ln, ev, conds):
                    print(ln)
                    return 0
            if time.monotonic() >= deadline:
                sys.stderr.write("timeout after %.1fs waiting for %s in %s\n"
                                 % (timeout, " ".join(args), path))
                return 1
            if pid is not None:
                if not alive(pid):
                    # one last read: the line may have been written just
                    # before the process exited
                    for ln in rd.new_lines():
                        if line_matches(ln, ev, conds):
                            print(ln)
                            return 0
                    sys.stderr.write("process %d exited while waiting for "
                                     "%s\n" % (pid, " ".join(args)))
                    return 3
            time.sleep(POLL_S)
    usage()
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
