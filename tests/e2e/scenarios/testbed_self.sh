#!/bin/bash
# testbed_self: the test bed itself, no egressd. Every later scenario trusts
# what this one proves: the sandbox uid resolves test names against the
# fake upstream (A, AAAA, CNAME chains, internal answers, HTTPS RR, a large
# answer that needs TCP), fetches from HTTPS origins signed by the run's CA
# over IPv4 and IPv6, gets headers echoed back, reaches TCP/UDP echo and
# ICMP, has no capabilities; the host namespace reaches the pod; the
# egressd start/stop helpers honour their contract (against a stand-in);
# and every exit path (normal, failure, SIGTERM) leaves no namespace,
# process or file behind.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"

t0=$(date +%s%N)
tb_setup
t1=$(date +%s%N)
setup_ms=$(((t1 - t0) / 1000000))
echo "# tb_setup took ${setup_ms} ms"
tb_check "tb_setup under 10 s (took ${setup_ms} ms)" test "$setup_ms" -lt 10000

# --- topology: one veth, one default route, nothing else --------------------
tb_expect_eq "sbx has only lo and the veth" "lo vsbx0" \
    "$(ip -n "$TB_SBX" -o link show | awk -F': ' '{sub(/@.*/, "", $2);
    print $2}' | sort | xargs)"
tb_expect_eq "sbx IPv4 default route via the veth peer" \
    "default via $TB_NET_IP4 dev vsbx0" \
    "$(ip -n "$TB_SBX" -4 route show default | awk '{$1=$1; print}')"
tb_expect_match "sbx IPv6 default route via the veth peer" \
    "^default via $TB_NET_IP6 dev vsbx0" \
    "$(ip -n "$TB_SBX" -6 route show default)"
tb_check_fails "net has no route beyond its own addresses" \
    tb_net ip route get 192.168.1.1
tb_check_fails "net has no IPv6 route out either" \
    tb_net ip -6 route get 2001:db8:ff::1

# --- the sandbox identity ---------------------------------------------------
uid=$(tb_sandbox id -u)
tb_expect_eq "tb_sandbox runs as the sandbox uid" "$TB_SBX_UID" "$uid"
tb_check "sandbox uid is not root" test "$uid" -ne 0
tb_expect_eq "sandbox has no effective capabilities" "0000000000000000" \
    "$(tb_sandbox awk '/^CapEff/ {print $2}' /proc/self/status)"
tb_expect_eq "sandbox has an empty bounding set" "0000000000000000" \
    "$(tb_sandbox awk '/^CapBnd/ {print $2}' /proc/self/status)"
tb_check_fails "sandbox cannot open a raw socket" tb_sandbox "$TB_PY" -c '
import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'
tb_check_fails "sandbox cannot read the CA key" \
    tb_sandbox cat "$TB_DIR/pki/ca.key"
tb_check_fails "sandbox cannot look into egressd's directory" \
    tb_sandbox ls "$TB_DIR/egressd"
tb_check_fails "sandbox cannot read the upstream's query log" \
    tb_sandbox cat "$TB_DIR/dns/dns1.log"
tb_check "sandbox can write its home" tb_sandbox touch "$TB_SBX_HOME/x"

# --- DNS from the sandbox straight to the fake upstream ---------------------
d() { tb_sandbox dig +time=2 +tries=1 "$@"; }
tb_expect_eq "dig A a.test" "$TB_ORIGIN_A4" \
    "$(d +short @"$TB_DNS1_IP4" a.test A)"
tb_expect_eq "dig AAAA a.test over IPv6" "$TB_ORIGIN_A6" \
    "$(d +short @"$TB_DNS1_IP6" a.test AAAA)"
tb_expect_eq "dig CNAME chain cname-chain.test -> cname-ok.test -> a.test" \
    "cname-ok.test. a.test. $TB_ORIGIN_A4" \
    "$(d +short @"$TB_DNS1_IP4" cname-chain.test A | xargs)"
tb_expect_eq "dig cname-bad.test -> b.test" "b.test. $TB_ORIGIN_B4" \
    "$(d +short @"$TB_DNS1_IP4" cname-bad.test A | xargs)"
tb_expect_eq "rebind.test answers internal addresses (answer only)" \
    "10.1.2.3 fd00::1" \
    "$( (d +short @"$TB_DNS1_IP4" rebind.test A;
    d +short @"$TB_DNS1_IP4" rebind.test AAAA) | xargs)"
tb_expect_eq "rebind-meta.test answers the metadata address" \
    "$TB_META4" "$(d +short @"$TB_DNS1_IP4" rebind-meta.test A)"
tb_expect_match "svc.test has an HTTPS record with alpn and hints" \
    'alpn="?h2"? ipv4hint=203\.0\.113\.10 ipv6hint=2001:db8:2::10' \
    "$(d +short @"$TB_DNS1_IP4" svc.test HTTPS)"
tb_expect_eq "short.test has TTL 2" "2" \
    "$(d +noall +answer @"$TB_DNS1_IP4" short.test A | awk '{print $2}')"
tb_expect_eq "a.test has the zone TTL" "$TB_DNS_TTL" \
    "$(d +noall +answer @"$TB_DNS1_IP4" a.test A | awk '{print $2}')"
tb_expect_match "unknown name under test. is NXDOMAIN" "status: NXDOMAIN" \
    "$(d @"$TB_DNS1_IP4" no-such-name.test A)"

out=$(d +notcp +noedns +ignore @"$TB_DNS1_IP4" big.test A)
tb_expect_match "big.test over UDP without EDNS is truncated (TC)" \
    'flags: qr aa tc' "$out"
out=$(d +notcp +ignore @"$TB_DNS1_IP4" big.test A)
tb_expect_match "big.test fits UDP with EDNS 1232" \
    'flags: qr aa rd ra; QUERY: 1, ANSWER: 60' "$out"
out=$(d +notcp +ignore +bufsize=1232 @"$TB_DNS1_IP4" huge.test A)
tb_expect_match "huge.test over UDP with EDNS 1232 is truncated (TC)" \
    'flags: qr aa tc' "$out"
tb_expect_eq "huge.test over TCP has all 100 A records" 100 \
    "$(d +tcp +short @"$TB_DNS1_IP4" huge.test A | wc -l)"
tb_expect_eq "big.test over TCP (IPv6) has all 60 A records" 60 \
    "$(d +tcp +short @"$TB_DNS1_IP6" big.test A | wc -l)"

tb_assert_dns_query dns1 'a\.test' AAAA
tb_assert_dns_query dns1 'huge\.test' A
tb_assert_no_dns_query dns1 'never-asked\.test'
tb_expect_eq "the system resolver of the sandbox uses the fake upstream" \
    "$TB_ORIGIN_B4" "$(tb_sandbox getent ahostsv4 b.test | awk 'NR==1 {print $1}')"

# --- a second resolver, stopped, and blackholed -----------------------------
tb_dns_start dns2 "$TB_DNS2_IP4" "$TB_DNS2_IP6"
tb_expect_eq "dns2 answers too" "$TB_ORIGIN_C4" \
    "$(d +short @"$TB_DNS2_IP4" c.test A)"
tb_assert_dns_query dns2 'c\.test' A
tb_assert_no_dns_query dns1 'c\.test'
tb_dns_blackhole dns2 on
tb_check_fails "blackholed dns2 does not answer" \
    tb_sandbox dig +time=1 +tries=1 +short @"$TB_DNS2_IP4" c.test A
tb_dns_blackhole dns2 off
tb_check "dns2 answers again" d +short @"$TB_DNS2_IP6" c.test A
tb_dns_stop dns2
tb_expect_match "stopped dns2 is unreachable" "connection refused|timed out" \
    "$(d @"$TB_DNS2_IP4" c.test A 2>&1)"

# --- HTTPS origins trusting the run's CA ------------------------------------
c() { tb_sandbox curl -sS --fail --max-time 5 "$@"; }
out=$(c --resolve "a.test:443:$TB_ORIGIN_A4" https://a.test/hello)
tb_expect_match "curl https://a.test/ over IPv4 (--resolve)" \
    '"sni": "a.test"' "$out"
out=$(c --resolve "a.test:443:[$TB_ORIGIN_A6]" https://a.test/)
tb_expect_match "curl https://a.test/ over IPv6 (--resolve)" \
    "\"addr\": \"$TB_ORIGIN_A6\"" "$out"
out=$(c -4 https://b.test:8443/via-resolver)
tb_expect_match "curl https://b.test:8443/ resolved by the system resolver" \
    "\"addr\": \"$TB_ORIGIN_B4\"" "$out"
out=$(c -6 "https://[$TB_ORIGIN_C6]/")
tb_expect_match "curl to an IPv6 literal (IP SAN)" '"path": "/"' "$out"
tb_check_fails "curl without the test CA fails verification" \
    tb_sandbox env -u CURL_CA_BUNDLE -u SSL_CERT_FILE curl -sS --fail \
    --max-time 5 --cacert /etc/ssl/certs/ca-certificates.crt \
    --resolve "a.test:443:$TB_ORIGIN_A4" https://a.test/
tb_expect_match "that failure is a certificate error" \
    "certificate|SSL" "$(cat "$TB_OUT")"
out=$(c "http://a.test:8080/plain?x=1")
tb_expect_match "plain HTTP on 8080" '"query": "x=1"' "$out"
out=$(c "http://$TB_META4/latest/meta-data/")
tb_expect_match "the metadata address answers inside net-<id>" \
    "\"addr\": \"$TB_META4\"" "$out"

out=$(c -D - -H "Authorization: Bearer tb-secret-1" \
    --resolve "a.test:443:$TB_ORIGIN_A4" \
    "https://a.test/echo?echo=Authorization")
tb_expect_match "origin reflects Authorization in a response header" \
    $'X-Echo-Authorization: Bearer tb-secret-1' "$out"
tb_expect_match "origin reflects Authorization in the body" \
    '"authorization": "Bearer tb-secret-1"' "$out"
out=$(c --raw -H "X-Key: k2" --resolve "a.test:443:$TB_ORIGIN_A4" \
    "https://a.test/t?echo=X-Key&trailer=1")
tb_expect_match "origin reflects a header in chunked trailers" \
    $'0\r\nX-Echo-X-Key: k2' "$out"
out=$(c -o /dev/null -w '%{http_code} %{redirect_url}' \
    --resolve "a.test:443:$TB_ORIGIN_A4" \
    "https://a.test/r?status=302&location=https://b.test/next")
tb_expect_eq "origin redirects on demand" "302 https://b.test/next" "$out"
tb_expect_eq "origin sends N bytes on demand" 100000 \
    "$(c --resolve "a.test:443:$TB_ORIGIN_A4" \
    'https://a.test/b?bytes=100000' | wc -c)"
tb_assert_log "$TB_ORIGIN_LOG" origin.request server.sni=a.test \
    "h.authorization=Bearer tb-secret-1" path=/echo
tb_assert_log "$TB_ORIGIN_LOG" origin.request server.addr="$TB_ORIGIN_A6"
tb_assert_no_log "$TB_ORIGIN_LOG" origin.request server.addr=203.0.113.99

# --- a python3 client as the sandbox uid ------------------------------------
out=$(tb_sandbox "$TB_PY" - "$TB_CA_CERT" "$TB_ORIGIN_A4" "$TB_ORIGIN_B6" \
    "$TB_ORIGIN_C4" <<'EOF'
import json, os, socket, ssl, sys, urllib.request
ca, a4, b6, c4 = sys.argv[1:5]
ctx = ssl.create_default_context(cafile=ca)
req = urllib.request.Request("https://c.test/py?echo=X-Py",
                             headers={"X-Py": "from-python"})
with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
    body = json.load(r)
    print("uid", os.getuid(), "echo", r.headers["X-Echo-X-Py"],
          "sni", body["server"]["sni"])
s = socket.create_connection((a4, 9000), timeout=5)
s.sendall(b"tcp-echo-test")
print("tcp", s.recv(100).decode())
s.close()
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
u.settimeout(5)
u.sendto(b"udp-echo-test", (b6, 443))
print("udp", u.recvfrom(100)[0].decode())
EOF
)
tb_expect_eq "python3 client: HTTPS, TCP echo, UDP echo as the sandbox uid" \
    "uid $TB_SBX_UID echo from-python sni c.test tcp tcp-echo-test udp udp-echo-test" \
    "$(echo "$out" | xargs)"
tb_assert_log "$TB_ECHO_LOG" echo.tcp.accept server.addr="$TB_ORIGIN_A4" \
    server.port=9000 client.addr="$TB_SBX_IP4"
tb_assert_log "$TB_ECHO_LOG" echo.udp server.addr="$TB_ORIGIN_B6" \
    server.port=443 data=udp-echo-test

tb_sandbox "$TB_PY" -c '
import socket, sys
s = socket.create_connection((sys.argv[1], 80), timeout=5)
s.sendall(b"BOGUS-LINE\r\n\r\n")
s.recv(1000)' "$TB_ORIGIN_C4" >/dev/null 2>&1
tb_assert_log "$TB_ORIGIN_LOG" origin.bad_request status=400 \
    server.addr="$TB_ORIGIN_C4" "raw_head~^BOGUS-LINE"

# --- ICMP ---------------------------------------------------------------------
tb_check "ping 203.0.113.10 as the sandbox uid (ICMP socket)" \
    tb_sandbox ping -n -c 1 -W 2 "$TB_ORIGIN_A4"
tb_check "ping -6 2001:db8:2::11 as the sandbox uid" \
    tb_sandbox ping -6 -n -c 1 -W 2 "$TB_ORIGIN_B6"

# --- the host namespace reaches the pod --------------------------------------
tb_host_setup
tb_sandbox_bg "$TB_DIR/sbx/pod-http.out" "$TB_PY" -m http.server \
    --bind "$TB_SBX_HOST_IP4" 8000
tb_wait_port "$TB_SBX" tcp "$TB_SBX_HOST_IP4" 8000 ||
    tb_fail "pod listener did not come up"
tb_check "host reaches a listener of the sandbox uid on the pod IP" \
    tb_host curl -sS --fail --max-time 5 -o /dev/null \
    "http://$TB_SBX_HOST_IP4:8000/"
tb_check "host pings the pod over IPv6" \
    tb_host ping -6 -n -c 1 -W 2 "$TB_SBX_HOST_IP6"
tb_check_fails "host has no route to the internet namespace" \
    tb_host ip route get "$TB_ORIGIN_A4"

# --- tb_start_egressd / tb_stop_egressd against a stand-in daemon ------------
# A few lines of python that honour the readiness contract of
# docs/testing.md, so the helper is proven before egressd exists.
fake="$TB_DIR/egressd/fake-egressd"
cat >"$fake" <<EOF
#!$TB_PY
import json, os, signal, sys, time
a = sys.argv[1:]
opt = {a[i]: a[i + 1] for i in range(0, len(a) - 1, 2)}
if os.environ.get("FAKE_DIE"):
    sys.exit(3)
log = open(opt["--log-file"], "a")
def line(ev, **kw):
    log.write(json.dumps(dict(ts=time.time(), lvl="info", ev=ev, **kw)) + "\n")
    log.flush()
signal.signal(signal.SIGTERM, lambda *x: (line("egressd.stop"), sys.exit(0)))
line("egressd.start", uid=os.getuid(), policy=opt.get("--policy"),
     rules_dir=opt.get("--rules-dir"))
import http.server, threading
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        ok = self.headers.get("OPENSANDBOX-EGRESS-AUTH") == "tok"
        body = b'{"status":"ok"}' if ok else b"unauthorized"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
host, port = opt["--http-addr"].rsplit(":", 1)
srv = http.server.HTTPServer((host, int(port)), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
line("egressd.ready", dns_upstream=opt.get("--dns-upstream"),
     http_addr=opt.get("--http-addr"))
while True:
    time.sleep(1)
EOF
chmod 700 "$fake"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - action: allow
    target: a.test
EOF
)
EGRESSD_BIN=$fake tb_start_egressd --policy "$pol"
tb_check "tb_start_egressd returned with the stand-in running" \
    tb__alive "$TB_EGRESSD_PID"
tb_assert_log "$TB_EGRESSD_LOG" egressd.ready dns_upstream="$TB_DNS1_IP4" \
    http_addr=127.0.0.1:18080
tb_assert_log "$TB_EGRESSD_LOG" egressd.start uid=0 policy="$pol" \
    rules_dir="$TB_DIR/egressd/rules"
tb_assert_no_log "$TB_EGRESSD_LOG" egressd.ready http_addr=0.0.0.0:1
tb_expect_eq "tb_api without a token" 401 "$(tb_api GET /policy)"
TB_EGRESSD_TOKEN=tok
tb_expect_eq "tb_api with the token" 200 "$(tb_api GET /policy)"
tb_expect_eq "tb_api body" '{"status":"ok"}' "$(cat "$TB_API_BODY")"
TB_EGRESSD_TOKEN=
mark=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_stop_egressd TERM
tb_expect_eq "stand-in exits 0 on SIGTERM" 0 "$TB_EGRESSD_STATUS"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" egressd.stop
tb_assert_log --min 1 --max 1 "$TB_EGRESSD_LOG" egressd.ready
EGRESSD_BIN=$fake tb_start_egressd --dns-upstream "$TB_DNS2_IP4:53"
tb_assert_log --since "$mark" "$TB_EGRESSD_LOG" egressd.ready \
    dns_upstream="$TB_DNS2_IP4:53"
tb_stop_egressd TERM
out=$( (EGRESSD_BIN=$fake; TB_EGRESSD_ENV=(FAKE_DIE=1)
    TB_EGRESSD_READY_TIMEOUT=5; tb_start_egressd) 2>&1)
tb_expect_match "tb_start_egressd fails fast when the daemon dies" \
    "did not log egressd.ready" "$out"

# --- the canary sweep finds what it looks for ----------------------------------
# (the stand-in takes no canaries: it is not egressd; these are planted)
tb_canary_init
CY=("$TB_PY" "$TB_LIB_DIR/canary.py")
# sweep_with LABEL FORM FILE: plant that form in FILE, sweep (in a
# subshell: its failed checks are the output, not this scenario's), then
# take it out again. Prints the sweep's lines.
sweep_with() {
	local size
	size=$(tb_log_mark "$3")
	"${CY[@]}" plant "$TB_CANARY_DIR" "$1" "$2" "$3"
	(tb_canary_sweep) 2>&1
	truncate -s "$size" "$3"
}
# found DESC LABEL FORM FILE [SHOWN-FORM]: the sweep fails on it, naming
# the canary, the form and the file, and prints no form of the value.
found() {
	out=$(sweep_with "$2" "$3" "$4")
	tb_expect_match "$1" \
	    "^not ok [0-9]+ - canary $2 \(${5:-$3}\) found in $4\$" "$out"
	tb_check_fails "... and the sweep prints no form of the value" \
	    grep -qF -f "$TB_CANARY_DIR/needles" <<<"$out"
}
CLEAN='^ok [0-9]+ - canary sweep: no canary loaded[^;]*; [0-9]+ files'
found "a raw value in egressd's log fails the sweep" \
    canary-file raw "$TB_EGRESSD_LOG"
found "its base64" canary-inline base64 "$TB_EGRESSD_LOG"
found "the base64 of tb:value (another alignment)" \
    canary-inline userpass "$TB_EGRESSD_LOG" base64
found "a value cut short (48 bits of it)" canary-file part "$TB_EGRESSD_LOG"
found "a JSON-escaped value in a file of the sandbox's" \
    canary-api json "$TB_SBX_HOME/client.out"
found "a percent-encoded value in a saved API answer" \
    canary-file percent "$TB_API_LOG"
tb_expect_match "the file credential's own source is no leak" "$CLEAN" \
    "$(sweep_with canary-file raw "$TB_CANARY_SRC")"
chmod 640 "$TB_CANARY_SRC"
out=$( (tb_canary_sweep) 2>&1)
chmod 600 "$TB_CANARY_SRC"
tb_expect_match "... unless others may read it" \
    "^not ok [0-9]+ - canary canary-file \(mode-0640\) found in $TB_CANARY_SRC\$" "$out"
out=$( (tb_canary_sweep) 2>&1)
tb_expect_match "with every planted value gone the sweep passes" "$CLEAN" "$out"
tb_check_fails "... with nothing failed" grep -q '^not ok' <<<"$out"
# /proc: a process with a canary in its environment
"${CY[@]}" exec-with "$TB_CANARY_DIR" canary-file sleep 30 &
leaky=$!
tb_wait_line "/proc/$leaky/comm" '^sleep$' || tb_fail "the leaky process did not start"
out=$( (tb__canary_proc "$leaky") 2>&1)
kill "$leaky"
wait "$leaky" 2>/dev/null
tb_expect_match "a value in egressd's environment is found in /proc" \
    "^not ok [0-9]+ - canary canary-file found in egressd's /proc/$leaky/environ\$" "$out"
out=$( (tb__canary_proc "$TB_ORIGIN_PID") 2>&1)
tb_expect_eq "... and none where there is none" "" "$out"

# --- teardown, on every exit path --------------------------------------------
# inner_bed MODE: a whole bed in a subshell, recording what it created.
inner_bed()
{
	local mode=$1 rec="$TB_DIR/inner.$1"
	(
		tb_setup
		tb_host_setup
		echo "$TB_SBX $TB_NET $TB_HOST $TB_DIR" >"$rec"
		echo "${TB_PIDS[*]}" >>"$rec"
		# empty: a bed whose only passing check is the canary sweep's
		[ "$mode" = empty ] && { tb_canary_init; tb_finish; }
		tb_pass "inner bed up"
		case $mode in
		finish) tb_finish ;;
		die) tb_die "deliberate failure" ;;
		term) echo "$BASHPID" >"$rec.pid"; tb_wait_file "$rec.never" 30 ;;
		esac
	) >"$TB_DIR/inner.$mode.out" 2>&1
}

check_gone()
{
	local mode=$1 rec="$TB_DIR/inner.$1" ns left="" pid
	for ns in $(head -n 1 "$rec" | cut -d' ' -f1-3); do
		grep -qw "$ns" <<<"$(ip netns list)" && left="$left ns:$ns"
		[ -e "/etc/netns/$ns" ] && left="$left /etc/netns/$ns"
	done
	[ -e "$(head -n 1 "$rec" | cut -d' ' -f4)" ] && left="$left dir"
	for pid in $(sed -n 2p "$rec"); do
		tb__alive "$pid" && left="$left pid:$pid"
	done
	tb_expect_eq "after $mode: namespaces, files and processes are gone" \
	    "" "$left"
}

inner_bed finish
tb_expect_eq "inner bed (tb_finish) exits 0" 0 "$?"
check_gone finish
inner_bed die
tb_expect_eq "inner bed (tb_die) exits 1" 1 "$?"
check_gone die
inner_bed empty
tb_expect_eq "inner bed that checked nothing exits 1" 1 "$?"
tb_check "... though its canary sweep passed" \
    grep -q '^ok 1 - canary sweep: ' "$TB_DIR/inner.empty.out"
tb_check "... saying why" \
    grep -q 'checked nothing of its own' "$TB_DIR/inner.empty.out"
check_gone empty
inner_bed term &
inner=$!
# a whole tb_setup + tb_host_setup: seconds on a loaded machine
tb_wait_file "$TB_DIR/inner.term.pid" 60 || tb_fail "inner bed did not come up"
kill -TERM "$(cat "$TB_DIR/inner.term.pid")"
wait "$inner"
tb_expect_eq "inner bed (SIGTERM) exits 143" 143 "$?"
check_gone term

tb_finish
