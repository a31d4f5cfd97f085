#!/usr/bin/python3
"""dns_trickle: a DNS client that asks one question every few milliseconds,
each from a fresh connected UDP socket (a new source port, a new conntrack
flow, as a stub resolver does), and accounts for every query: answered
(by rcode), refused (ICMP port unreachable reported on the socket), or
unanswered within the timeout (silently lost).

Used by the start-up scenario (tests/e2e/scenarios/daemon_startup_no_query_lost.sh)
and the start-up benchmark (bench/bench_startup.sh). Every load is bounded:
at most --max-queries queries and --max-seconds seconds of sending, at
most --max-open sockets at once.

    dns_trickle.py --server 198.51.100.1 [--port 53] --name a.test
        [--qtype A] [--interval-ms 3] [--timeout-ms 5000]
        [--stop-file F] [--max-queries 5000] [--max-seconds 20]
        [--progress F] [--exec-after-ms N -- CMD ARGS...]

With --exec-after-ms, CMD is started N ms after the first query (the clock
of "exec") and stopped (SIGTERM, then SIGKILL) when the client is done.
Prints one JSON object: counts, and times relative to exec when there is
one (first_answer_ms: the first answer to a query; first_rcode_ms: the
first answer per rcode).
"""
import argparse
import errno
import json
import os
import random
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import time

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN",
          4: "NOTIMP", 5: "REFUSED"}
QTYPES = {"A": 1, "AAAA": 28, "TXT": 16}


def query(qid, name, qtype):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", QTYPES[qtype], 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--name", required=True)
    ap.add_argument("--qtype", default="A", choices=sorted(QTYPES))
    ap.add_argument("--interval-ms", type=float, default=3.0)
    ap.add_argument("--timeout-ms", type=float, default=5000.0)
    ap.add_argument("--stop-file")
    ap.add_argument("--progress", help="file rewritten with the counts")
    ap.add_argument("--max-queries", type=int, default=5000)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    ap.add_argument("--max-open", type=int, default=800)
    ap.add_argument("--exec-after-ms", type=float)
    ap.add_argument("cmd", nargs="*")
    a = ap.parse_args()
    if (a.exec_after_ms is None) != (not a.cmd):
        ap.error("--exec-after-ms and a command go together")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, a.max_open + 64)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    fam = socket.AF_INET6 if ":" in a.server else socket.AF_INET
    interval = a.interval_ms / 1000.0
    timeout = a.timeout_ms / 1000.0

    pending = {}  # fd -> (socket, id, sent_at)
    counts = {"sent": 0, "answered": 0, "refused": 0, "unanswered": 0,
              "send_failed": 0, "capped": 0}
    rcodes = {}
    first_rcode = {}  # rcode -> send/answer times of its first answer
    first_answer = None
    lost_at = []  # send times of unanswered queries
    send_errors = []  # (send time, errno name, local port) of failed sends
    t0 = time.monotonic()
    t_exec = None
    child = None
    next_send = t0
    sending = True
    last_progress = 0.0
    ids = random.Random(os.getpid())

    def progress(force=False):
        nonlocal last_progress
        if not a.progress:
            return
        now = time.monotonic()
        if not force and now - last_progress < 0.05:
            return
        last_progress = now
        tmp = a.progress + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dict(counts, rcodes=rcodes), f)
        os.replace(tmp, a.progress)

    def finish(fd, status, rcode=None):
        nonlocal first_answer
        s, qid, sent = pending.pop(fd)
        s.close()
        now = time.monotonic()
        if status == "answered":
            counts["answered"] += 1
            rcodes[rcode] = rcodes.get(rcode, 0) + 1
            if first_answer is None:
                first_answer = (sent, now)
            first_rcode.setdefault(rcode, (sent, now))
        else:
            counts[status] += 1
            if status == "unanswered":
                lost_at.append(sent)

    while True:
        now = time.monotonic()
        if child is None and a.cmd and now - t0 >= a.exec_after_ms / 1000.0:
            t_exec = time.monotonic()
            t_exec_wall = time.time()
            child = subprocess.Popen(a.cmd, stdin=subprocess.DEVNULL)
        if sending:
            if (counts["sent"] >= a.max_queries or
                    now - t0 >= a.max_seconds or
                    (a.stop_file and os.path.exists(a.stop_file))):
                sending = False
        if sending and now >= next_send:
            next_send += interval
            if next_send < now:  # a loaded machine: no bursts to catch up
                next_send = now + interval
            if len(pending) >= a.max_open:
                counts["capped"] += 1
            else:
                s = socket.socket(fam, socket.SOCK_DGRAM)
                s.setblocking(False)
                qid = ids.randrange(65536)
                try:
                    s.connect((a.server, a.port))
                    s.send(query(qid, a.name, a.qtype))
                except OSError as e:
                    if e.errno != errno.ECONNREFUSED and len(send_errors) < 20:
                        try:
                            lport = s.getsockname()[1]
                        except OSError:
                            lport = 0
                        send_errors.append(
                            [round((time.monotonic() - t0) * 1000.0, 1),
                             errno.errorcode.get(e.errno, str(e.errno)),
                             lport])
                    s.close()
                    counts["send_failed" if e.errno != errno.ECONNREFUSED
                           else "refused"] += 1
                else:
                    counts["sent"] += 1
                    pending[s.fileno()] = (s, qid, time.monotonic())
        if not sending and not pending and (child is not None or
                                            not a.cmd):
            break
        for fd, (s, qid, sent) in list(pending.items()):
            if time.monotonic() - sent > timeout:
                finish(fd, "unanswered")
        wait = max(0.0, min(next_send - time.monotonic(), 0.05)) \
            if sending else 0.05
        if pending:
            r, _, _ = select.select(list(pending), [], [], wait)
        else:
            r = []
            time.sleep(wait)
        for fd in r:
            s, qid, sent = pending[fd]
            try:
                msg = s.recv(4096)
            except BlockingIOError:
                continue
            except ConnectionRefusedError:
                finish(fd, "refused")
                continue
            except OSError:
                finish(fd, "refused")
                continue
            if len(msg) < 12 or struct.unpack(">H", msg[:2])[0] != qid:
                continue  # not our answer: keep waiting
            finish(fd, "answered", RCODES.get(msg[3] & 15, str(msg[3] & 15)))
        progress()
    progress(True)

    if child is not None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def rel(t):
        base = t_exec if t_exec is not None else t0
        return round((t - base) * 1000.0, 1)

    out = dict(counts, rcodes=rcodes,
               interval_ms=a.interval_ms, timeout_ms=a.timeout_ms,
               lost_sent_ms=[rel(t) for t in lost_at[:20]],
               send_errors=send_errors)
    if first_answer is not None:
        out["first_answer_sent_ms"] = rel(first_answer[0])
        out["first_answer_ms"] = rel(first_answer[1])
    out["first_rcode_ms"] = {k: rel(v[1]) for k, v in first_rcode.items()}
    if child is not None:
        out["exec_after_ms"] = round((t_exec - t0) * 1000.0, 1)
        out["exec_unix_ms"] = round(t_exec_wall * 1000.0, 1)
        out["child_status"] = child.returncode
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
