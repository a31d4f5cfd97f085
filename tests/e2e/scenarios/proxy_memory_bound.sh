#!/bin/bash
# proxy_memory_bound (issue 34 item 6, "Backpressure"): a sandbox that
# sends faster than egressd can forward, or never reads what it asked
# for, costs egressd a bounded amount of memory on every path: reads
# stop at the per-side bounds of docs/proxy.md ("Bounds"). One connection
# at a time floods one path while egressd's VmRSS is sampled every 50 ms:
#   plain      16 pipelined requests the origin answers after 4 s (the
#              pipeline full), then up to 512 MiB of junk (reproduction:
#              RSS 9 MB -> 558 MB on 9cc226d)
#   term_close inside terminated TLS, a Connection: close request the
#              origin answers after 4 s, then junk (626 MB there)
#   pass       pass-through TLS to an origin that does not read, then junk
#   hold       plain HTTP, a JSON body of 1 MiB held whole for placeholder
#              substitution (3.4 MiB rewritten; the origin answers after
#              4 s), then junk where the next head would be
#   queued     plain HTTP, an origin busy for 4 s, then 15 pipelined such
#              requests (on 9cc226d rewritten one after the other into the
#              origin's queue: +47 MiB; now they wait their turn, one
#              request at a time to a bound origin)
#   noread_*   a 1 GiB response the client never reads (plain, and a
#              terminated one through the redactor)
# Each load sends for at most 3 s (before the origin's first answer) and
# stops at 512 MiB (unbounded, egressd once took over 500 MB of it);
# egressd must then close its connection (within 15 s). The bound checked
# is a connection's worst case by
# the stated bounds (PROXY_CONN_BUF_MAX, 6.4 MiB: a held body, one
# rewritten request and the queues) plus TLS state and allocator slack:
# 16 MiB over the RSS before the load (on 9cc226d: +503 MiB plain, +497
# MiB terminated, +47 MiB queued).
# Afterwards egressd still answers. Under ASan (whose quarantine keeps
# freed memory on purpose) the loads run and only that is checked.
# MODES="plain hold" runs only those loads (their log checks may fail).
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
# 16 bytes for a 5-byte placeholder: a body of placeholders grows 3.2x
printf 'mem-bound-secret\n' >"$TB_DIR/egressd/key-k"
chmod 600 "$TB_DIR/egressd/key-k"
pol=$(tb_policy_file policy.yaml <<EOF2
defaultAction: deny
egress:
  - {action: allow, target: a.test}
  - {action: allow, target: b.test}
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: a-api
    match: {hosts: [a.test], paths: ["/v1/*"]}
    auth:
      type: passthrough
      substitutions:
        - {credential: k, placeholder: '{{K}}', in: [body]}
  - name: b-plain
    match: {schemes: [http], hosts: [b.test]}
    auth:
      type: passthrough
      substitutions:
        - {credential: k, placeholder: '{{K}}', in: [body]}
EOF2
)
STATE=$TB_DIR/state
# the proxy's bounds are the subject, its pass-through path included: a
# flow judged in flight never reaches egressd's memory
PTJ=(--passthrough-judge proxy)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" "${PTJ[@]}"
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/both.pem"
chmod 644 "$TB_DIR/both.pem"

CHECK_RSS=1
# the binary, not the environment, says whether ASan's quarantine is in
# (a here-string: pipefail and grep -q's early exit)
grep -q libasan <<<"$(ldd "$EGRESSD_BIN")" && CHECK_RSS=0
BOUND_KB=$((16 << 10))

cat >"$TB_DIR/flood.py" <<'EOF'
import itertools, socket, ssl, sys, time

mode, cafile = sys.argv[1], sys.argv[2]
LIMIT = 512 << 20   # bytes sent, at most
SECONDS = 3.0       # sending, at most (the origin answers after 4 s)
JUNK = b"x" * (64 << 10)

def conn(host, port, tls):
    s = socket.create_connection((host, port), timeout=5)
    if tls:
        ctx = ssl.create_default_context(cafile=cafile)
        s = ctx.wrap_socket(s, server_hostname=host)
    s.settimeout(0.2)
    return s

def send_for(s, chunks, t0):
    """Sends chunks (an iterator) until they end, LIMIT or SECONDS."""
    sent = 0
    buf = b""
    while sent < LIMIT and time.monotonic() - t0 < SECONDS:
        if not buf:
            buf = memoryview(next(chunks, b""))
            if not buf:
                break
        try:
            n = s.send(buf[:16384])
        except (socket.timeout, ssl.SSLWantWriteError):
            continue
        except OSError:
            break
        sent += n
        buf = buf[n:]
    return sent

def junk():
    while True:
        yield JUNK

def slow(host, path, extra="", ms=4000):
    return ("GET %s?delay_ms=%d HTTP/1.1\r\nHost: %s\r\n%s\r\n"
            % (path, ms, host, extra)).encode()

t0 = time.monotonic()
if mode == "plain":
    s = conn("a.test", 80, False)
    # the first answered after 4 s, the other 15 right after it
    s.sendall(slow("a.test", "/mem/plain") +
              slow("a.test", "/mem/plain", ms=0) * 15)
    sent = send_for(s, junk(), t0)
elif mode == "term_close":
    s = conn("a.test", 443, True)
    s.sendall(slow("a.test", "/mem/close", "Connection: close\r\n"))
    sent = send_for(s, junk(), t0)
elif mode == "pass":
    s = conn("b.test", 443, True)
    s.sendall(slow("b.test", "/mem/pass"))
    sent = send_for(s, junk(), t0)
elif mode in ("hold", "queued"):
    s = conn("b.test", 80, False)
    body = b'{"k":"' + b"{{K}}" * ((1 << 20) // 5 - 2) + b'"}'
    head = ("POST /v1/%s?delay_ms=4000 HTTP/1.1\r\nHost: b.test\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            % (mode, len(body))).encode()
    if mode == "hold":
        # held whole, rewritten; then junk where the next head would be
        sent = send_for(s, itertools.chain([head + body], junk()), t0)
    else:
        # behind a request the origin answers after 4 s
        s.sendall(slow("b.test", "/v1/busy"))
        sent = send_for(s, iter([head + body] * 15), t0)
elif mode in ("noread_plain", "noread_term"):
    tls = mode == "noread_term"
    s = conn("a.test", 443 if tls else 80, tls)
    s.sendall(("GET /v1/big?bytes=%d HTTP/1.1\r\nHost: a.test\r\n\r\n"
               % (1 << 30)).encode())
    time.sleep(3)   # never reads
    sent = 0
else:
    sys.exit("unknown mode " + mode)
print(sent, round(time.monotonic() - t0, 1))
s.close()
EOF
chmod 644 "$TB_DIR/flood.py"

rss() { awk '/^VmRSS/ {print $2}' "/proc/$TB_EGRESSD_PID/status"; }

# flood MODE: runs flood.py MODE in the sandbox while sampling egressd's
# RSS; prints "sent seconds rss_before_kb rss_max_kb"
flood() {
	local mode=$1 pid before max r
	before=$(rss)
	tb_sandbox timeout 20 "$TB_PY" "$TB_DIR/flood.py" "$mode" \
	    "$TB_DIR/both.pem" >"$TB_DIR/$mode.out" 2>"$TB_DIR/$mode.err" &
	pid=$!
	max=$before
	while kill -0 "$pid" 2>/dev/null; do
		r=$(rss)
		[ -n "$r" ] && [ "$r" -gt "$max" ] && max=$r
		sleep 0.05
	done
	wait "$pid"
	read -r sent secs <"$TB_DIR/$mode.out"
	echo "${sent:-?} ${secs:-?} $before $max"
}

# warm: the TLS contexts, the leaf cache and the allocator's first arenas
warm() {
	tb_sandbox curl -sS -o /dev/null --max-time 10 \
	    --cacert "$TB_DIR/both.pem" "https://b.test/warm?bytes=1048576"
	tb_sandbox curl -sS -o /dev/null --max-time 10 \
	    --cacert "$TB_DIR/both.pem" "https://a.test/v1/warm?bytes=1048576"
	tb_sandbox curl -sS -o /dev/null --max-time 10 \
	    "http://a.test/warm?bytes=1048576"
}

# One egressd per load: memory a load made egressd take stays in its
# RSS after it is freed (the allocator keeps it), which would hide the
# next load's.
first=1
for mode in ${MODES:-plain term_close pass hold queued noread_plain noread_term}; do
	if [ "$first" = 0 ]; then
		tb_stop_egressd
		tb_start_egressd --policy "$pol" --proxy \
		    --trust-dir "$TB_DIR/trust" --state-dir "$STATE" "${PTJ[@]}"
	fi
	first=0
	warm
	mark=$(tb_log_mark "$TB_EGRESSD_LOG")
	read -r sent secs before max <<<"$(flood "$mode")"
	tb_log "$mode: sent $sent bytes in $secs s; egressd RSS $before KiB before, at most $max KiB during (+$((max - before)) KiB)"
	tb_check "$mode: the load ran" test "$secs" != "?"
	# reads stopped, the client's FIN waits unread in the kernel: the
	# connection ends once the origin's answers let egressd read on
	tb_check "$mode: egressd closes the connection" tb_wait_log_line \
	    --since "$mark" --timeout 15 "$TB_EGRESSD_LOG" proxy.closed
	if [ "$CHECK_RSS" = 1 ]; then
		tb_check "$mode: RSS at most $BOUND_KB KiB over the start" \
		    test "$((max - before))" -le "$BOUND_KB"
	fi
done
tb_check "egressd still answers" tb_sandbox curl -sS -o /dev/null \
    --max-time 10 "http://a.test/after"
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected path=/v1/hold
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected path=/v1/big
tb_assert_log "$TB_EGRESSD_LOG" proxy.closed decision=passthrough name=b.test
tb_assert_log "$TB_EGRESSD_LOG" proxy.closed decision=terminated name=a.test
tb_finish
