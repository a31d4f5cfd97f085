#!/bin/bash
# proxy_request_rules: request rules (issue 37) judged by the proxy, with
# curl and python as the sandbox user. On a host with request rules each
# request is judged on its own (first matching rule in policy order,
# defaultAction when none): GET allowed, DELETE refused with 403,
# X-Egress-Denied and a JSON body saying why, nothing sent upstream; over
# TLS (terminated) and plain HTTP; pipelined requests each judged and
# nothing after a denial forwarded; keep-alive; a wildcard deny before a
# wildcard allow wins while the name still resolves; path tricks (dot
# segments, %2e, //, %2F, an encoded letter) never reach a denied path;
# on a host that is also bound, a denied request never carries the
# credential; a /policy PUT applies to the next request of an open
# connection; GET /policy, the proxy.denied log line, the metric, and
# --check's file:line:col for bad request rules.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup # the operator: the control API is closed to the sandbox

SECRET=$(tb_random_key)
tb_vault_files "$SECRET"
TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$TB_DIR/egressd/token"
chmod 600 "$TB_DIR/egressd/token"
# Rule indexes (the JSON body's "rule") are the list positions below.
RULES_JSON='[
 {"action": "deny", "target": "a.test", "paths": ["/pub/private/*"]},
 {"action": "allow", "target": "a.test", "methods": ["GET", "HEAD"], "paths": ["/pub/*"]},
 {"action": "allow", "target": "b.test", "methods": ["GET"]},
 {"action": "deny", "target": "*.a.test", "methods": ["POST"]},
 {"action": "allow", "target": "*.a.test"},
 {"action": "allow", "target": "c.test", "methods": ["GET"], "paths": ["/v1/*"]}]'
# YAML is a superset of JSON: the same rules, one flow mapping a line
pol=$(tb_policy_file policy.yaml <<EOF
defaultAction: deny
egress:
$(sed -n 's/^ *\({.*}\)[],]*$/  - \1/p' <<<"$RULES_JSON")
credentials:
  - {name: k, source: {type: file, path: $TB_DIR/egressd/key-k}}
bindings:
  - name: c-api
    match: {hosts: [c.test], paths: ["/v1/*"]}
    auth: {type: bearer, credential: k}
EOF
)
STATE=$TB_DIR/state
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --http-addr ":18080" \
    --api-token-file "$TB_DIR/egressd/token"
CA=$STATE/ca-bundle.crt
API="http://$TB_SBX_HOST_IP4:18080"
C=(curl -sS --max-time 8 --cacert "$CA")
H=$TB_DIR/root/head
B=$TB_DIR/root/body
# req ARGS...: curl as the sandbox; the status on stdout, the response
# head in $H and its body in $B (both root-only, CR removed)
req()
{
	tb_sandbox "${C[@]}" -D - -w '\n%{http_code}' "$@" \
	    >"$TB_DIR/root/resp" 2>&1
	tr -d '\r' <"$TB_DIR/root/resp" | awk -v h="$H" -v b="$B" '
	    BEGIN { inh = 1; printf "" >h; printf "" >b }
	    { line[NR] = $0 }
	    END {
		for (i = 1; i < NR; i++) {
			if (inh && line[i] == "" && line[i + 1] !~ /^HTTP\//) {
				inh = 0; continue
			}
			if (inh) print line[i] >>h; else print line[i] >>b
		}
		print line[NR]
	    }'
}
hdr() { sed -n "s/^$1: //Ip" "$H" | tail -n 1; }
# denial_ok REASON HOST METHOD PATH RULE: the body of $B is the contract's
# JSON (RULE -1: the default decided, "rule" absent or -1)
denial_ok()
{
	"$TB_PY" - "$B" "$@" <<'PY'
import json, sys
f, reason, host, method, path, rule = sys.argv[1:7]
d = json.load(open(f))
want = {"error": "egress_denied", "reason": reason, "host": host,
        "method": method, "path": path}
bad = {k: d.get(k) for k, v in want.items() if d.get(k) != v}
r = d.get("rule", -1)
if r != int(rule):
    bad["rule"] = r
if bad:
    sys.exit("body %s: unexpected %s" % (json.dumps(d), bad))
PY
}

# --- GET allowed, DELETE refused (TLS, terminated) -------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
emark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "GET https://a.test/pub/x: 200" 200 "$(req https://a.test/pub/x)"
tb_expect_eq "DELETE https://a.test/pub/x: 403" 403 \
    "$(req -X DELETE https://a.test/pub/x)"
tb_expect_eq "... X-Egress-Denied: method" method "$(hdr X-Egress-Denied)"
tb_expect_eq "... Connection: close" close "$(hdr Connection)"
tb_check "... the JSON body says why (the default decided)" \
    denial_ok method a.test DELETE /pub/x -1
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=GET \
    path=/pub/x server.scheme=https
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=DELETE
tb_assert_log --since "$emark" "$TB_EGRESSD_LOG" proxy.denied reason=method \
    host=a.test method=DELETE path=/pub/x
tb_expect_eq "GET /pub/private/k (deny rule 0): 403" 403 \
    "$(req 'https://a.test/pub/private/k?q=1')"
tb_expect_eq "... X-Egress-Denied: path" path "$(hdr X-Egress-Denied)"
tb_check "... body names rule 0, the path without its query" \
    denial_ok path a.test GET /pub/private/k 0
tb_assert_log --since "$emark" "$TB_EGRESSD_LOG" proxy.denied reason=path \
    host=a.test method=GET path=/pub/private/k rule=0
tb_expect_eq "GET /admin (no rule takes the path): 403" 403 \
    "$(req https://a.test/admin)"
tb_expect_eq "... X-Egress-Denied: path" path "$(hdr X-Egress-Denied)"
tb_check "... body" denial_ok path a.test GET /admin -1
tb_expect_eq "HEAD /pub/x (listed): 200" 200 "$(req -I https://a.test/pub/x)"

# --- plain HTTP: judged the same way ------------------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "plain GET http://b.test/x: 200" 200 "$(req -4 http://b.test/x)"
tb_expect_eq "plain DELETE http://b.test/x: 403" 403 \
    "$(req -4 -X DELETE http://b.test/x)"
tb_expect_eq "... X-Egress-Denied: method" method "$(hdr X-Egress-Denied)"
tb_check "... the JSON body (the default decided)" \
    denial_ok method b.test DELETE /x -1
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=GET \
    path=/x server.scheme=http
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=DELETE

# --- pipelined: each request judged, nothing after a denial forwarded ----------------
cat >"$TB_DIR/sbx-bin/rr_pipe.py" <<'PY'
"""rr_pipe.py HOST PORT tls|plain CAFILE "METHOD PATH"...: every request
in one write on one connection; prints per response "STATUS n", the
X-Egress-Denied and Connection headers, and then EOF or TIMEOUT."""
import socket, ssl, sys
host, port, mode, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.create_connection((host, port), timeout=5)
if mode == "tls":
    ctx = ssl.create_default_context(cafile=ca)
    s = ctx.wrap_socket(s, server_hostname=host)
s.sendall(b"".join(("%s %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (
    *r.split(" ", 1), host)).encode() for r in sys.argv[5:]))
buf, eof = b"", False
def fill():
    global buf, eof
    try:
        d = s.recv(65536)
    except socket.timeout:
        print("TIMEOUT"); sys.exit(0)
    except (ssl.SSLError, ConnectionResetError):
        d = b""
    if not d:
        eof = True
    buf += d
while True:
    while b"\r\n\r\n" not in buf and not eof:
        fill()
    if b"\r\n\r\n" not in buf:
        print("EOF" if not buf else "TORN %r" % buf[:80]); break
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    print("STATUS", lines[0].split()[1])
    h = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        h[k.strip().lower()] = v.strip()
    for k in ("x-egress-denied", "connection"):
        if k in h:
            print("H %s: %s" % (k, h[k]))
    n = int(h.get("content-length", "0"))
    while len(buf) < n and not eof:
        fill()
    buf = buf[n:]
PY
chmod 755 "$TB_DIR/sbx-bin/rr_pipe.py"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/rr_pipe.py" a.test 443 tls "$CA" \
    "GET /pub/p1" "DELETE /pub/p2" "GET /pub/p3")
tb_expect_eq "TLS pipelined GET, DELETE, GET: 200, 403 (method, close), then EOF" \
    "STATUS 200
STATUS 403
H x-egress-denied: method
H connection: close
EOF" "$(grep -v '^H connection: keep-alive' <<<"$out")"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/pub/p1
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'path~^/pub/p[23]'
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
out=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/rr_pipe.py" b.test 80 plain "$CA" \
    "GET /q1" "DELETE /q2" "GET /q3")
tb_expect_eq "plain pipelined GET, DELETE, GET: 200, 403, then EOF" \
    "STATUS 200
STATUS 403
H x-egress-denied: method
H connection: close
EOF" "$(grep -v '^H connection: keep-alive' <<<"$out")"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/q1
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'path~^/q[23]'

# --- keep-alive: allowed then denied on one connection, then a new one ---------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
n=$(tb_sandbox "${C[@]}" -o /dev/null -o /dev/null -o /dev/null \
    -w '%{num_connects} %{http_code}\n' https://a.test/pub/k1 \
    https://a.test/admin/k2 https://a.test/pub/k3 | tr '\n' ' ')
tb_expect_eq "curl keep-alive: 200 then 403 on one connection, a new one after" \
    "1 200 0 403 1 200 " "$n"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/pub/k3
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/admin/k2

# --- a wildcard deny before a wildcard allow --------------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_expect_eq "www.a.test still resolves (deny request rules deny no name)" \
    "$TB_ORIGIN_A4" "$(tb_resolve_a www.a.test)"
# -4: proxy.denied is logged once a second per destination address, port
# and reason; www.a.test shares a.test's addresses, whose IPv6 one had
# method denials just now
tb_expect_eq "POST https://www.a.test/x: 403 (rule 3 beats rule 4)" 403 \
    "$(req -4 -d x=1 https://www.a.test/x)"
tb_expect_eq "... X-Egress-Denied: method" method "$(hdr X-Egress-Denied)"
tb_check "... body names rule 3" denial_ok method www.a.test POST /x 3
tb_expect_eq "GET https://www.a.test/x: 200" 200 "$(req https://www.a.test/x)"
tb_expect_eq "PUT https://deep.sub.a.test/y: 200 (only POST is denied)" 200 \
    "$(req -X PUT -d y https://deep.sub.a.test/y)"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request method=POST

# --- path tricks never reach a denied path ------------------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
for p in /pub/../admin /pub/%2e%2e/admin /pub/%2E%2E/admin /pub/x/../private/k \
    /pub/x/%2e%2e/private/k /pub/./private/k /pub//private/k \
    /pub%2Fprivate/k /pub/x/..%2Fprivate/k /pub/%70rivate/k \
    /pub/private%2Fk '/pub/x/%2e%2e%2fprivate/k' /pub/x/.%2e/private/k \
    '/admin?/pub/x' '/pub/x;/../../admin' /pub/x/%252e%252e/private/k; do
	code=$(req --path-as-is "https://a.test$p")
	tb_expect_match "GET $p: 403 or 400 (got $code)" '^(403|400)$' "$code"
done
# what curl cannot send: a method token in lower case (methods are
# case-sensitive: "get" is not GET), the absolute form, "OPTIONS *"
for r in "get /pub/lc" "GET https://a.test/pub/private/abs" \
    "GET https://a.test/admin/abs" "OPTIONS *"; do
	out=$(tb_sandbox "$TB_PY" "$TB_DIR/sbx-bin/rr_pipe.py" a.test 443 tls \
	    "$CA" "$r" | head -n 1)
	tb_expect_match "raw \"$r\": 403 or 400 ($out)" '^STATUS (403|400)$' "$out"
done
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request 'path~^/pub/lc'
tb_check "the origin never saw /admin or /pub/private in any spelling" \
    "$TB_PY" - "$TB_ORIGIN_LOG" "$mark" <<'PY'
import json, posixpath, sys, urllib.parse
f = open(sys.argv[1], "rb")
f.seek(int(sys.argv[2]))
bad = []
for ln in f:
    try:
        r = json.loads(ln)
    except ValueError:
        continue
    t = r.get("target", "").split("?")[0]
    if "://" in t:
        t = "/" + t.split("://", 1)[1].partition("/")[2]
    p = urllib.parse.unquote(urllib.parse.unquote(t))
    while "//" in p:
        p = p.replace("//", "/")
    p = posixpath.normpath(p)
    if p.startswith("/admin") or p.startswith("/pub/private"):
        bad.append(r.get("target"))
sys.exit("origin saw: %s" % bad if bad else 0)
PY

# --- a bound host: the rules come before the binding --------------------------------------
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
emark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "GET https://c.test/v1/me (allowed, bound): 200" 200 \
    "$(req -H 'Authorization: Bearer fake-key' https://c.test/v1/me)"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/v1/me \
    "h.authorization=Bearer $SECRET"
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
emark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_expect_eq "DELETE https://c.test/v1/me (the binding covers it, the rules do not): 403" \
    403 "$(req -X DELETE -H 'Authorization: Bearer fake-key' https://c.test/v1/me)"
tb_expect_eq "... X-Egress-Denied: method" method "$(hdr X-Egress-Denied)"
tb_check_fails "... no secret in what the sandbox got" \
    grep -qF "$SECRET" "$H" "$B"
tb_expect_eq "POST https://c.test/v1/me: 403" 403 \
    "$(req -d x -H 'Authorization: Bearer fake-key' https://c.test/v1/me)"
tb_expect_eq "GET https://c.test/other (no rule takes the path): 403" 403 \
    "$(req -H 'Authorization: Bearer fake-key' https://c.test/other)"
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request
tb_assert_no_log --since "$emark" "$TB_EGRESSD_LOG" vault.inject decision=injected

# --- GET /policy echoes methods and paths --------------------------------------------------
tb_expect_eq "GET /policy: 200" 200 "$(tb_host_api GET "$API/policy")"
pj=$(cat "$TB_DIR/api.out")
tb_expect_match "... methods of rule 1" \
    '"target": ?"a\.test", ?"methods": ?\[ ?"GET", ?"HEAD" ?\], ?"paths": ?\[ ?"/pub/\*" ?\]' "$pj"
tb_expect_match "... the deny with paths only" \
    '\{ ?"action": ?"deny", ?"target": ?"a\.test", ?"paths": ?\[ ?"/pub/private/\*" ?\] ?\}' "$pj"
tb_expect_match "... plain rules stay plain" \
    '\{ ?"action": ?"allow", ?"target": ?"\*\.a\.test" ?\}' "$pj"

# the API validates them like --check, and a refused body changes nothing
tb_expect_eq "PUT /policy with methods on an address rule: 400" 400 \
    "$(tb_host_api PUT "$API/policy" '{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test"},{"action":"allow","target":"203.0.113.0/24","methods":["GET"]}]}')"
tb_expect_match "... invalid policy: body:LINE:COL" '^invalid policy: body:1:[0-9]+: ' \
    "$(cat "$TB_DIR/api.out")"
tb_expect_eq "PUT /policy with a path pattern not in normal form: 400" 400 \
    "$(tb_host_api PUT "$API/policy" '{"defaultAction":"deny","egress":[{"action":"allow","target":"a.test","paths":["/pub/./x"]}]}')"
tb_expect_eq "... nothing changed: DELETE /pub/x still 403" 403 \
    "$(req -X DELETE https://a.test/pub/x)"

# --- a /policy PUT takes effect on an open connection ----------------------------------------
cat >"$TB_DIR/sbx-bin/rr_keep.py" <<'PY'
"""rr_keep.py HOST CAFILE PATH1 PATH2 STEP1 STEP2: GET PATH1, create
STEP1, wait (bounded) for STEP2, GET PATH2 on the same connection."""
import http.client, os, ssl, sys, time
host, ca, p1, p2, s1, s2 = sys.argv[1:7]
c = http.client.HTTPSConnection(host, 443, timeout=8,
                                context=ssl.create_default_context(cafile=ca))
c.request("GET", p1)
r = c.getresponse()
r.read()
sock = c.sock
print("1", r.status)
open(s1, "w").close()
end = time.time() + 10
while not os.path.exists(s2):
    if time.time() > end:
        sys.exit("no step 2")
    time.sleep(0.02)
# http.client reconnects on its own when the first connection was closed
same = sock is not None and c.sock is sock
try:
    c.request("GET", p2)
    same = same and c.sock is sock
    r = c.getresponse()
    r.read()
    print("2", r.status, r.getheader("X-Egress-Denied"),
          "same-connection" if same else "new-connection")
except (OSError, http.client.HTTPException) as e:
    print("2 error", type(e).__name__, e)
PY
chmod 755 "$TB_DIR/sbx-bin/rr_keep.py"
S1=$TB_SBX_HOME/step1
S2=$TB_SBX_HOME/step2
mark=$(tb_log_mark "$TB_ORIGIN_LOG")
tb_sandbox_bg "$TB_DIR/root/keep.out" "$TB_PY" "$TB_DIR/sbx-bin/rr_keep.py" \
    a.test "$CA" /pub/rt1 /pub/rt2 "$S1" "$S2"
kpid=$TB_LAST_PID
tb_check "python: the first request answered" tb_wait_file "$S1" 10
tb_expect_eq "GET /policy for the change" 200 "$(tb_host_api GET "$API/policy")"
# the scenario's rules as written, not as GET /policy echoed them (that
# is checked above, not relied on), and the bed's own (its canaries) after
newpol=$("$TB_PY" -c 'import json, sys
mine = json.loads(sys.argv[2])
ours = {r["target"] for r in mine}
got = json.load(open(sys.argv[1]))["policy"]["egress"]
print(json.dumps({"defaultAction": "deny", "egress":
    [{"action": "deny", "target": "a.test", "paths": ["/pub/rt2"]}] + mine +
    [r for r in got if r["target"] not in ours]}))' "$TB_DIR/api.out" "$RULES_JSON")
tb_expect_eq "PUT /policy: a deny for /pub/rt2 in front" 200 \
    "$(tb_host_api PUT "$API/policy" "$newpol")"
touch "$S2"
wait "$kpid"
tb_expect_eq "the same connection's next request: 403 path" \
    "1 200
2 403 path same-connection" "$(cat "$TB_DIR/root/keep.out")"
tb_assert_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/pub/rt1
tb_assert_no_log --since "$mark" "$TB_ORIGIN_LOG" origin.request path=/pub/rt2
tb_expect_eq "a new request to /pub/rt2: 403, rule 0 now" 403 \
    "$(req https://a.test/pub/rt2)"
tb_check "... body names rule 0" denial_ok path a.test GET /pub/rt2 0
tb_expect_eq "... /pub/x still 200" 200 "$(req https://a.test/pub/x)"
# the PUT was persisted to the policy file: a reload of it keeps every
# rule's methods and paths (a file that lost them would turn the deny of
# /pub/rt2 into a deny of the host, and the allows into whole-host ones)
m=$(tb_log_mark "$TB_EGRESSD_LOG")
kill -HUP "$TB_EGRESSD_PID"
tb_check "SIGHUP reloads the persisted file" tb_wait_log_line --since "$m" \
    --timeout 3 "$TB_EGRESSD_LOG" policy.loaded trigger=sighup
tb_expect_eq "... GET /pub/x: 200" 200 "$(req https://a.test/pub/x)"
tb_expect_eq "... DELETE /pub/x: still 403" 403 "$(req -X DELETE https://a.test/pub/x)"
tb_expect_eq "... GET /pub/rt2: still 403" 403 "$(req https://a.test/pub/rt2)"
tb_expect_eq "... GET /admin: still 403" 403 "$(req https://a.test/admin)"

# --- the log line and the metric ------------------------------------------------------------
tb_assert_log "$TB_EGRESSD_LOG" proxy.denied reason=method host=www.a.test \
    method=POST path=/x rule=3
tb_assert_log "$TB_EGRESSD_LOG" proxy.denied reason=method host=b.test \
    method=DELETE path=/x
tb_assert_log "$TB_EGRESSD_LOG" proxy.denied reason=method host=c.test \
    method=DELETE path=/v1/me
tb_expect_eq "GET /metrics" 200 "$(tb_host_api GET "$API/metrics")"
met=$(cat "$TB_DIR/api.out")
tb_expect_match "egressd_proxy_denied_total{reason=\"method\"} counts" \
    '^egressd_proxy_denied_total\{reason="method"\} ([6-9]|[1-9][0-9]+)$' "$met"
tb_expect_match "egressd_proxy_denied_total{reason=\"path\"} counts" \
    '^egressd_proxy_denied_total\{reason="path"\} ([4-9]|[1-9][0-9]+)$' "$met"
tb_check_fails "the secret is nowhere in egressd's log" \
    grep -qF "$SECRET" "$TB_EGRESSD_LOG"

# --- --check: bad request rules with file:line:col ---------------------------------------------
bad=$(tb_policy_file bad.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test, methods: [GET]}
  - {action: allow, target: 203.0.113.0/24, methods: [GET]}
  - {action: allow, target: b.test, paths: ["pub/*"]}
  - {action: allow, target: c.test, methods: [get]}
  - {action: allow, target: a.test, paths: ["/a/../b"]}
EOF
)
mkdir -p "$TB_DIR/egressd/norules"
out=$("$EGRESSD_BIN" --check --proxy --policy "$bad" \
    --rules-dir "$TB_DIR/egressd/norules" 2>&1)
rc=$?
tb_expect_eq "--check on bad request rules fails" 1 "$rc"
tb_expect_match "... methods on a CIDR rule: bad.yaml:4:col" 'bad\.yaml:4:[0-9]+: ' "$out"
tb_expect_match "... a path pattern without its leading /: bad.yaml:5:col" \
    'bad\.yaml:5:[0-9]+: ' "$out"
tb_expect_match "... a lower-case method token: bad.yaml:6:col" 'bad\.yaml:6:[0-9]+: ' "$out"
tb_expect_match "... a pattern not in normal form: bad.yaml:7:col" 'bad\.yaml:7:[0-9]+: ' "$out"
tb_check_fails "... and line 3 is fine" grep -q 'bad\.yaml:3:' <<<"$out"
# request rules need the proxy: refused without it rather than half kept
good=$(tb_policy_file good.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: a.test, methods: [GET], paths: ["/*/*/info/refs"]}
  - {action: allow, target: b.test}
EOF
)
out=$("$EGRESSD_BIN" --check --policy "$good" \
    --rules-dir "$TB_DIR/egressd/norules" 2>&1)
rc=$?
tb_expect_match "--check without --proxy refuses request rules (exit $rc)" \
    '^[1-9]' "$rc"
tb_expect_match "... saying where or why" 'good\.yaml:3:[0-9]+: |--proxy' "$out"
tb_expect_eq "--check --proxy: ok" "ok: 2 rules, 0 bindings" \
    "$("$EGRESSD_BIN" --check --proxy --policy "$good" \
    --rules-dir "$TB_DIR/egressd/norules" 2>&1)"
tb_finish
