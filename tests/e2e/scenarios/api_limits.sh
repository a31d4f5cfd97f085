#!/bin/bash
# api_limits: the control API's limits hold against hostile clients on the
# node, and say so in the API's own text format: an oversized body is 413
# and an oversized head 431 (text/plain, not libevent's HTML); clients
# that drip bytes into every connection slot are cut at the head deadline
# (408) and a real client is served; wrong tokens back off per peer (429
# with Retry-After, even for the right token), and every try is counted.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TOKEN="lim-$TB_ID-$RANDOM$RANDOM"
API_BODY="$TB_DIR/api.body"
API_HEAD="$TB_DIR/api.head"
TB_EGRESSD_HTTP=":18080"
TB_EGRESSD_ENV=(OPENSANDBOX_EGRESS_TOKEN="$TOKEN"
    'OPENSANDBOX_EGRESS_RULES={"egress":[{"action":"allow","target":"a.test"}]}')
tb_start_egressd
URL="http://$TB_SBX_HOST_IP4:18080"

# call TOKEN METHOD PATH [CURL-ARGS...]: status; head and body in files.
call()
{
	local tok=$1 m=$2 p=$3
	shift 3
	tb_host curl -sS --max-time 15 -D "$API_HEAD" -o "$API_BODY" \
	    -w '%{http_code}' -H "OPENSANDBOX-EGRESS-AUTH: $tok" -X "$m" \
	    "$@" "$URL$p" 2>/dev/null
}
ctype()
{
	sed -n 's/^[Cc]ontent-[Tt]ype: *\([^\r]*\).*/\1/p' "$API_HEAD"
}

# --- 413: a body over 1 MiB ------------------------------------------------
head -c $((2 << 20)) /dev/zero | tr '\0' ' ' >"$TB_DIR/big"
tb_expect_eq "POST of 2 MiB: 413" 413 \
    "$(call "$TOKEN" POST /policy --data-binary "@$TB_DIR/big")"
tb_expect_eq "text/plain" "text/plain; charset=utf-8" "$(ctype)"
tb_expect_eq "the API's words" "request body too large" "$(cat "$API_BODY")"
tb_assert_log "$TB_EGRESSD_LOG" api.refused status=413 reason="body too large"
tb_expect_eq "chunked, 2 MiB: 413" 413 "$(call "$TOKEN" POST /policy \
    -H 'Transfer-Encoding: chunked' --data-binary "@$TB_DIR/big")"
tb_expect_eq "text/plain" "text/plain; charset=utf-8" "$(ctype)"

# --- 431: a head over 16 KiB -------------------------------------------------
big=$(head -c 20000 /dev/zero | tr '\0' a)
tb_expect_eq "GET with a 20 KB header: 431" 431 \
    "$(call "$TOKEN" GET /policy -H "X-Big: $big")"
tb_expect_eq "text/plain" "text/plain; charset=utf-8" "$(ctype)"
tb_expect_eq "the API's words" "request header fields too large" \
    "$(cat "$API_BODY")"
tb_expect_eq "and the API still answers" 200 "$(call "$TOKEN" GET /policy)"

# --- drips: 64 slowloris clients, every slot ---------------------------------
# Each sends a request line, then one header byte every 500 ms (each byte
# restarts libevent's 10 s idle timer), for at most 20 s. The head
# deadline (5 s) must cut them all, with a 408.
cat >"$TB_DIR/drip.py" <<'EOF'
import selectors, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sel = selectors.DefaultSelector()
socks = []
for i in range(n):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(b"GET /policy HTTP/1.1\r\nHost: x\r\n")
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    socks.append(s)
print("connected", n, flush=True)
got, t0, nxt = {}, time.time(), time.time()
while len(got) < n and time.time() - t0 < 20:
    if time.time() >= nxt:
        for s in socks:
            if s not in got:
                try:
                    s.send(b"a")
                except OSError:
                    got[s] = b"reset"
        nxt += 0.5
    for key, _ in sel.select(timeout=0.1):
        s = key.fileobj
        try:
            d = s.recv(4096)
        except OSError:
            d = b""
        got[s] = d
        sel.unregister(s)
status = [g.split(b"\r\n", 1)[0].decode("latin1", "replace") for g in got.values()]
print("answered", len(got), "in %.1f s" % (time.time() - t0))
print("408s", sum(1 for x in status if x.startswith("HTTP/1.1 408")))
print("text", sum(1 for g in got.values() if g.endswith(b"\r\n\r\nrequest timeout\n")))
EOF
# in host-<id>, in the background, recorded for teardown (as tb_net_bg)
ip netns exec "$TB_HOST" "$TB_PY" "$TB_DIR/drip.py" "$TB_SBX_HOST_IP4" \
    18080 64 >"$TB_DIR/drip.out" 2>&1 &
TB_PIDS+=("$!")
tb_check "the drippers are connected" tb_wait_line "$TB_DIR/drip.out" \
    '^connected 64' 10
tb_wait_log_line --timeout 10 "$TB_EGRESSD_LOG" api.pause >/dev/null
tb_expect_eq "while they drip, a real client is served (after the deadline)" \
    200 "$(tb_host curl -sS --max-time 15 -o /dev/null -w '%{http_code}' \
    "$URL/healthz")"
tb_check "every dripper was answered" tb_wait_line "$TB_DIR/drip.out" \
    '^answered 64 ' 25
tb_expect_match "all by the head deadline" '^408s 64$' \
    "$(grep '^408s' "$TB_DIR/drip.out")"
tb_expect_match "in text" '^text 64$' "$(grep '^text' "$TB_DIR/drip.out")"
tb_assert_log --min 64 "$TB_EGRESSD_LOG" api.refused status=408 \
    reason="head deadline"

# --- wrong tokens back off, per peer ----------------------------------------
# The first backoff is 1 s: the four wrong tries and the right one go in
# one curl process, back to back (--next), so a loaded machine cannot let
# the backoff run out between them.
codes=$(tb_host curl -sS --max-time 15 -w '%{http_code}\n' \
    -o /dev/null -H "OPENSANDBOX-EGRESS-AUTH: wrong" "$URL/policy" \
    --next -o /dev/null -w '%{http_code}\n' \
    -H "OPENSANDBOX-EGRESS-AUTH: wrong" "$URL/policy" \
    --next -o /dev/null -w '%{http_code}\n' \
    -H "OPENSANDBOX-EGRESS-AUTH: wrong" "$URL/policy" \
    --next -o /dev/null -w '%{http_code}\n' \
    -H "OPENSANDBOX-EGRESS-AUTH: wrong" "$URL/policy" \
    --next -D "$API_HEAD" -o "$API_BODY" -w '%{http_code}\n' \
    -H "OPENSANDBOX-EGRESS-AUTH: $TOKEN" "$URL/policy" 2>/dev/null |
    tr '\n' ' ')
tb_expect_eq "four wrong tokens: 401 each; backing off: even the right" \
    "401 401 401 401 429 " "$codes"
tb_assert_log "$TB_EGRESSD_LOG" api.auth_backoff \
    peer~"(^|:)${TB_HOST_IP4//./\\.}:[0-9]+\$" failures=4
tb_expect_eq "429 in text" "too many failed authentication attempts" \
    "$(cat "$API_BODY")"
ra=$(sed -n 's/^[Rr]etry-[Aa]fter: *\([0-9]*\).*/\1/p' "$API_HEAD")
tb_expect_match "with Retry-After" '^[1-9][0-9]*$' "$ra"
# Per peer: another address of the node (IPv4, as every IPv4 peer of the
# dual-stack listener is ::ffff:a.b.c.d, and IPv6) is not held back.
ip -n "$TB_HOST" addr add 192.0.2.3/24 dev vhost0
tb_expect_eq "another IPv4 peer: 200" 200 "$(call "$TOKEN" GET /policy \
    --interface 192.0.2.3)"
tb_expect_eq "an IPv6 peer: 200" 200 "$(tb_host curl -sS --max-time 5 \
    -o /dev/null -w '%{http_code}' -H "OPENSANDBOX-EGRESS-AUTH: $TOKEN" \
    "http://[$TB_SBX_HOST_IP6]:18080/policy")"
tb_expect_eq "the probes are not affected" 200 \
    "$(tb_host curl -sS --max-time 5 -o /dev/null -w '%{http_code}' \
        "$URL/healthz")"
# After the backoff the right token works again (and clears the record).
# A sleep, not a poll: every try inside the backoff counts and extends it.
tb_check "wait Retry-After ($ra s)" sleep "$((ra + 1))"
tb_expect_eq "after it: 200" 200 "$(call "$TOKEN" GET /metrics)"
tb_expect_match "every try counted (4 wrong, 1 refused)" \
    'egressd_api_unauthorized_total 5$' "$(cat "$API_BODY")"
tb_expect_eq "a wrong token is a plain 401 again" 401 \
    "$(call wrong GET /policy)"
tb_finish
