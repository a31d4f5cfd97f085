#!/bin/bash
# bench_proxy.sh: HTTPS through egressd's transparent proxy against a
# direct connection and two peers, in one run (issue 17).
#
# Usage (root): EGRESSD_BIN=build/egressd/egressd bench/bench_proxy.sh
#   BENCH_SECONDS  seconds per measurement (default 3)
#   BENCH_CONC     concurrencies (default "1 16 64")
#   BENCH_BULK_MB  size of the bulk download (default 256)
#
# Two throwaway namespaces joined by one veth (bench_lib.sh): the origin
# ($UP, 203.0.113.7) is nginx (one worker) serving HTTPS for *.bench.test
# with a throwaway CA, a 1 KiB response and a BENCH_BULK_MB file from
# tmpfs; dnsmasq answers *.bench.test there. The client is wrk (HTTP/1.1,
# keep-alive; "new connection" = Connection: close on every request) in
# the sandbox ($SBX), as an unprivileged user, through:
#   direct       no egressd: the sandbox's own route to the origin;
#   passthrough  egressd --proxy, pass.bench.test (no binding: SNI judged,
#                bytes spliced);
#   terminating  egressd --proxy, term.bench.test (a bearer binding: TLS
#                terminated with egressd's CA, origin verified, header
#                injected); also term_plain (a path the binding does
#                not cover: terminated only) and inject_1m/term_plain_1m
#                (the same with 1 MiB bodies), for the vault's own cost;
#   mitmdump     mitmproxy 8 in transparent mode (nft redirect of the
#                client's uid), an addon setting the same header: the
#                reference's own proxy;
#   nginx        nginx (one worker) in the sandbox as a terminating
#                injector for one host (upstream keep-alive, session
#                reuse): the practical ceiling of a C proxy.
# Printed: req/s, p50 and p99 per mode and concurrency with the ratio to
# direct, bulk MB/s of one download (direct vs passthrough vs
# terminating), egressd's idle RSS. Needs wrk, nginx, mitmdump, dnsmasq.
set -u -o pipefail

EGRESSD_BIN=${EGRESSD_BIN:-build/egressd/egressd}
DUR=${BENCH_SECONDS:-3}
CONCS=${BENCH_CONC:-1 16 64}
BULK_MB=${BENCH_BULK_MB:-256}
CONNS=${BENCH_CONNS:-keep close}
PERF=${BENCH_PERF:-} # a file: perf record egressd while it is measured
. "$(dirname "$0")/bench_lib.sh"
bench_init bench_proxy bp
bench_need_root
for t in wrk nginx mitmdump dnsmasq openssl; do
	command -v "$t" >/dev/null || die "needs $t (apt-get install wrk nginx-light mitmproxy dnsmasq-base)"
done
ORIGIN=203.0.113.7
USR=nobody
bench_pair
ip -n "$UP" addr add "$ORIGIN/24" dev vb1
ip -n "$SBX" route add default via "$UP_IP"
chmod 755 "$DIR"

# --- PKI ------------------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$DIR/ca.key" -out "$DIR/ca.crt" -days 2 -subj "/CN=bench CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign" 2>/dev/null || die "CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$DIR/o.key" -out "$DIR/o.csr" -subj "/CN=bench.test" 2>/dev/null
printf 'subjectAltName=DNS:*.bench.test\nbasicConstraints=CA:FALSE\n' >"$DIR/o.ext"
openssl x509 -req -in "$DIR/o.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" \
    -set_serial 7 -days 2 -extfile "$DIR/o.ext" -out "$DIR/o.crt" 2>/dev/null ||
    die "origin cert"
mkdir -p "$DIR/trust" && cp "$DIR/ca.crt" "$DIR/trust/"
chmod 644 "$DIR/ca.crt"

# --- origin ----------------------------------------------------------------------
mkdir -p "$DIR/www" "$DIR/ng-up"
head -c 1024 /dev/zero | tr '\0' x >"$DIR/www/small"
mount -t tmpfs -o size=$((BULK_MB + 16))m tmpfs "$DIR/www" 2>/dev/null &&
    head -c 1024 /dev/zero | tr '\0' x >"$DIR/www/small"
head -c $((BULK_MB << 20)) /dev/zero >"$DIR/www/bulk"
# the vault's cost: the same bodies (1 KiB, 1 MiB) on paths the binding
# covers (/small, /inj/*: injected, response redacted) and on one it does
# not (/plain/*: terminated only)
mkdir -p "$DIR/www/plain" "$DIR/www/inj"
head -c $((1 << 20)) /dev/zero | tr '\0' x >"$DIR/www/plain/mid"
cp "$DIR/www/small" "$DIR/www/plain/small"
cp "$DIR/www/plain/mid" "$DIR/www/inj/mid"
cat >"$DIR/ng-up/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $DIR/ng-up/pid;
error_log $DIR/ng-up/error.log;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	server {
		listen $ORIGIN:443 ssl reuseport backlog=4096;
		ssl_certificate $DIR/o.crt;
		ssl_certificate_key $DIR/o.key;
		ssl_session_cache shared:S:1m;
		root $DIR/www;
		location / { }
	}
}
EOF
ip netns exec "$UP" nginx -c "$DIR/ng-up/nginx.conf" >"$DIR/ng-up/out" 2>&1 &
PIDS+=($!)
ip netns exec "$UP" dnsmasq --keep-in-foreground --no-daemon --no-resolv \
    --no-hosts --no-poll --user=root --group=root --pid-file= \
    --bind-interfaces --listen-address="$UP_IP" --port=53 \
    --address=/bench.test/$ORIGIN --local-ttl=300 --cache-size=0 \
    --log-facility=/dev/null >"$DIR/up.err" 2>&1 &
PIDS+=($!)
mkdir -p "/etc/netns/$SBX"
echo "nameserver $UP_IP" >"/etc/netns/$SBX/resolv.conf"
trap 'rm -rf "/etc/netns/$SBX"; umount "$DIR/www" 2>/dev/null; bench_cleanup' EXIT INT TERM
for i in $(seq 50); do
	ip netns exec "$SBX" curl -s -o /dev/null --cacert "$DIR/ca.crt" \
	    "https://pass.bench.test/small" && break
	sleep 0.1
done

# --- the client ------------------------------------------------------------------
# wrk_run LABEL URL CONC CLOSE [CA]: one measurement; prints "rps p50 p99"
# (milliseconds) into $DIR/res/LABEL-CONC-CLOSE.
mkdir -p "$DIR/res"
chmod 777 "$DIR/res"
wrk_run()
{
	local label=$1 url=$2 c=$3 close=$4 hdr=() t
	[ "$close" = close ] && hdr=(-H "Connection: close")
	t=$c
	[ "$t" -gt 2 ] && t=2
	ip netns exec "$SBX" setpriv --reuid="$USR" --regid=nogroup --clear-groups \
	    env SSL_CERT_FILE="${5:-$DIR/ca.crt}" \
	    wrk -t"$t" -c"$c" -d"${DUR}s" --latency "${hdr[@]}" "$url" \
	    >"$DIR/res/$label-$c-$close.out" 2>&1
	awk '
	    /Requests\/sec/ {rps=$2}
	    /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
	    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0;
	        if (v ~ /s$/) return v*1000; return v }
	    END { printf "%s %.3f %.3f\n", rps, ms(p50), ms(p99) }' \
	    "$DIR/res/$label-$c-$close.out" >"$DIR/res/$label-$c-$close"
}
# wrk verifies nothing (it takes any certificate); the TLS path is the
# same work: a full handshake per new connection, resumption not used.

# bulk LABEL URL [CA]: MB/s of one download
bulk()
{
	local t
	t=$(ip netns exec "$SBX" setpriv --reuid="$USR" --regid=nogroup --clear-groups \
	    curl -s -o /dev/null -w '%{time_total}' --cacert "${3:-$DIR/ca.crt}" "$2")
	awk -v t="$t" -v mb="$BULK_MB" 'BEGIN { printf "%.1f\n", mb / t }' \
	    >"$DIR/res/bulk-$1"
}

measure()
{
	local label=$1 url=$2 ca=${3:-} c k
	for c in $CONCS; do
		for k in $CONNS; do
			wrk_run "$label" "$url" "$c" "$k" "$ca"
		done
	done
}

# --- direct ---------------------------------------------------------------------------
measure direct "https://pass.bench.test/small"
bulk direct "https://pass.bench.test/bulk"

# --- egressd --------------------------------------------------------------------------
cat >"$DIR/policy.yaml" <<EOF
defaultAction: deny
egress:
  - {action: allow, target: "*.bench.test"}
credentials:
  - {name: k, source: {type: file, path: $DIR/key}}
bindings:
  - name: term
    match: {hosts: [term.bench.test], paths: ["/small", "/bulk", "/inj/*"]}
    auth: {type: bearer, credential: k}
EOF
printf 'bench-secret\n' >"$DIR/key"
chmod 600 "$DIR/policy.yaml" "$DIR/key"
mkdir -p "$DIR/rules"
start_ns=$(date +%s%N)
ip netns exec "$SBX" "$EGRESSD_BIN" --policy "$DIR/policy.yaml" \
    --rules-dir "$DIR/rules" --dns-upstream "$UP_IP" --http-addr "" \
    --log-file "$DIR/egressd.log" --proxy \
    --state-dir "$DIR/state" --trust-dir "$DIR/trust" --teardown-on-exit \
    >"$DIR/egressd.out" 2>&1 &
EPID=$!
bench_wait_ready "$EPID"
sleep 0.5
rss_idle=$(awk '/VmRSS/ {print $2}' "/proc/$EPID/status")
if [ -n "$PERF" ]; then
	perf record -g -o "$PERF" -p "$EPID" >/dev/null 2>&1 &
	PERFPID=$!
fi
chmod 755 "$DIR/state"
cat "$DIR/state/ca.crt" "$DIR/ca.crt" >"$DIR/both.crt"
chmod 644 "$DIR/both.crt"
measure passthrough "https://pass.bench.test/small"
measure terminating "https://term.bench.test/small" "$DIR/both.crt"
measure term_plain "https://term.bench.test/plain/small" "$DIR/both.crt"
measure inject_1m "https://term.bench.test/inj/mid" "$DIR/both.crt"
measure term_plain_1m "https://term.bench.test/plain/mid" "$DIR/both.crt"
cpu() { awk '{print $14 + $15}' "/proc/$EPID/stat"; }
c0=$(cpu)
bulk passthrough "https://pass.bench.test/bulk"
c1=$(cpu)
bulk terminating "https://term.bench.test/bulk" "$DIR/both.crt"
c2=$(cpu)
hz=$(getconf CLK_TCK)
rss_busy=$(awk '/VmHWM/ {print $2}' "/proc/$EPID/status")
[ -n "$PERF" ] && { kill -INT "$PERFPID"; wait "$PERFPID"; }
kill "$EPID"
wait "$EPID" 2>/dev/null

# --- mitmdump (transparent, injecting addon) --------------------------------------------
cat >"$DIR/inject.py" <<'EOF'
def request(flow):
    if flow.request.pretty_host == "term.bench.test":
        flow.request.headers["Authorization"] = "Bearer bench-secret"
EOF
mkdir -p "$DIR/mitm"
ip netns exec "$SBX" nft -f - <<EOF
table ip benchmitm {
	chain out {
		type nat hook output priority -100;
		meta skuid $USR tcp dport 443 redirect to :8080
	}
}
EOF
ip netns exec "$SBX" env HOME="$DIR/mitm" mitmdump --mode transparent \
    --listen-host 127.0.0.1 --listen-port 8080 -q -s "$DIR/inject.py" \
    --set confdir="$DIR/mitm" --set ssl_verify_upstream_trusted_ca="$DIR/ca.crt" \
    --set connection_strategy=lazy >"$DIR/mitm/out" 2>&1 &
MPID=$!
PIDS+=("$MPID")
for i in $(seq 100); do
	[ -f "$DIR/mitm/mitmproxy-ca-cert.pem" ] &&
	    ip netns exec "$SBX" ss -ltn | grep -q 127.0.0.1:8080 && break
	sleep 0.1
done
cat "$DIR/mitm/mitmproxy-ca-cert.pem" "$DIR/ca.crt" >"$DIR/mitm.crt"
chmod 644 "$DIR/mitm.crt"
measure mitmdump "https://term.bench.test/small" "$DIR/mitm.crt"
kill "$MPID"
ip netns exec "$SBX" nft delete table ip benchmitm

# --- nginx as a terminating injector -------------------------------------------------
mkdir -p "$DIR/ng-sbx"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$DIR/t.key" -out "$DIR/t.csr" -subj "/CN=term.bench.test" 2>/dev/null
printf 'subjectAltName=DNS:term.bench.test\n' >"$DIR/t.ext"
openssl x509 -req -in "$DIR/t.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" \
    -set_serial 8 -days 2 -extfile "$DIR/t.ext" -out "$DIR/t.crt" 2>/dev/null
cat >"$DIR/ng-sbx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $DIR/ng-sbx/pid;
error_log $DIR/ng-sbx/error.log;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 1000000;
	upstream origin { server $ORIGIN:443; keepalive 128; }
	server {
		listen 127.0.0.1:8443 ssl backlog=4096;
		ssl_certificate $DIR/t.crt;
		ssl_certificate_key $DIR/t.key;
		location / {
			proxy_pass https://origin;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Host term.bench.test;
			proxy_set_header Authorization "Bearer bench-secret";
			proxy_ssl_server_name on;
			proxy_ssl_name term.bench.test;
			proxy_ssl_verify on;
			proxy_ssl_trusted_certificate $DIR/ca.crt;
			proxy_ssl_session_reuse on;
		}
	}
}
EOF
ip netns exec "$SBX" nginx -c "$DIR/ng-sbx/nginx.conf" >"$DIR/ng-sbx/out" 2>&1 &
NPID=$!
PIDS+=("$NPID")
for i in $(seq 50); do
	ip netns exec "$SBX" ss -ltn | grep -q 127.0.0.1:8443 && break
	sleep 0.1
done
echo "127.0.0.1 term.bench.test" >"/etc/netns/$SBX/hosts"
measure nginx "https://term.bench.test:8443/small"
kill "$NPID"

# --- report ---------------------------------------------------------------------------
r() { cat "$DIR/res/$1" 2>/dev/null || echo "0 0 0"; }
printf '\n%-12s %-5s %4s %10s %8s %8s %9s %8s\n' mode conn c 'req/s' 'p50 ms' \
    'p99 ms' 'x direct' 'p99 x'
for close in $CONNS; do
	for c in $CONCS; do
		read -r drps dp50 dp99 <<<"$(r "direct-$c-$close")"
		for m in direct passthrough terminating mitmdump nginx; do
			read -r rps p50 p99 <<<"$(r "$m-$c-$close")"
			awk -v m="$m" -v k="$close" -v c="$c" -v rps="$rps" -v p50="$p50" \
			    -v p99="$p99" -v d="$drps" -v dp="$dp99" 'BEGIN {
			    printf "%-12s %-5s %4s %10.0f %8.2f %8.2f %8.2fx %7.1fx\n",
			    m, k, c, rps, p50, p99, (d > 0 ? rps / d : 0),
			    (dp > 0 ? p99 / dp : 0) }'
		done
	done
done
printf '\nthe vault (injection + response redaction) against termination alone, req/s:\n'
for close in $CONNS; do
	for c in $CONCS; do
		read -r a _ <<<"$(r "terminating-$c-$close")"
		read -r b _ <<<"$(r "term_plain-$c-$close")"
		read -r x _ <<<"$(r "inject_1m-$c-$close")"
		read -r y _ <<<"$(r "term_plain_1m-$c-$close")"
		awk -v k="$close" -v c="$c" -v a="$a" -v b="$b" -v x="$x" -v y="$y" 'BEGIN {
		    printf "  %-5s c=%-3s 1 KiB: %.0f vs %.0f (%.2fx)   1 MiB: %.0f vs %.0f (%.2fx)\n",
		    k, c, a, b, (b > 0 ? a / b : 0), x, y, (y > 0 ? x / y : 0) }'
	done
done
printf '\nbulk %s MiB, one download: direct %s MB/s, passthrough %s MB/s, terminating %s MB/s\n' \
    "$BULK_MB" "$(cat "$DIR/res/bulk-direct")" "$(cat "$DIR/res/bulk-passthrough")" \
    "$(cat "$DIR/res/bulk-terminating")"
printf 'egressd CPU for the bulk download: passthrough %s s, terminating %s s\n' \
    "$(awk -v a="$c0" -v b="$c1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')" \
    "$(awk -v a="$c1" -v b="$c2" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')"
printf 'egressd RSS: idle %s KiB, peak %s KiB\n' "$rss_idle" "$rss_busy"
rm -f "/etc/netns/$SBX/hosts"
