#!/bin/bash
# bench_proxy.sh: HTTPS through egressd's transparent proxy against a
# direct connection and two peers, in one run (issue 17).
#
# Usage (root): EGRESSD_BIN=build/egressd/egressd bench/bench_proxy.sh
#   BENCH_SECONDS  seconds per measurement (default 3)
#   BENCH_CONC     concurrencies (default "1 16 64")
#   BENCH_CONNS    "keep", "close" or both (default "keep close")
#   BENCH_BULK_MB  size of the bulk download (default 256)
#   BENCH_BULK_PATHS  the bulk rounds' paths (default "direct
#                  passthrough terminating"; direct_fw too)
#   BENCH_BULK_ROUNDS  bulk downloads per path (default 5): each round
#                  runs direct, passthrough, terminating and (with the
#                  nginx peer) nginx_stream back to back, the order
#                  rotated every round; the report gives every round's
#                  MB/s and the median and range of the ratios
#   BENCH_AB_ROUNDS  rounds (default 0) of direct, terminating and nginx
#                  measured back to back at every concurrency and kind,
#                  the order rotated each round, direct and nginx from
#                  the twin while egressd runs; the report gives the
#                  median and range of the req/s and p99 ratios
#   BENCH_AB_PATHS  the A/B rounds' paths (default "direct terminating",
#                  nginx added with the peer wanted); passthrough and
#                  direct_fw too (without terminating: its binding holds
#                  the one origin address, pass-through then takes the
#                  proxy); term_nt: terminating with egressd's upstream
#                  packets untracked (a table of the bench's own, loaded
#                  around each of its rounds)
#   BENCH_ONLY     the cases to run (default all): direct passthrough
#                  direct_fw (the sandbox to an IP-rule address: egressd's
#                  ruleset without queue or proxy, the firewall's own cost)
#                  terminating term_plain term_bare inject_1m term_plain_1m bulk
#                  mitmdump nginx nginx_fw rules0 rules100 hello_gap conn_pair
#                  term_pair (conn_pair's pairing: the nginx peer in the
#                  twin against termination, new connections)
#                  queue_floor (only when named: it kills egressd)
#                  fw_split (only when named: it changes the twin's
#                  ruleset);
#                  nginx_fw (A/B rounds only): the nginx peer in the
#                  sandbox behind egressd's firewall; nginx_nat (with
#                  nginx_fw): the same peer reached through a REDIRECT,
#                  as egressd's terminated connections are; "vault" = the four
#                  vault cases, "rules" = the two request-rule cases
#   BENCH_GAP_CONNS  connections per round of hello_gap (default 200):
#                  the in-flight judging's own latency, per new connection
#                  the time from the handshake's last ACK to the
#                  ClientHello as tcpdump sees them on the origin's link,
#                  pass.bench.test (queued) against direct_fw (not), one
#                  Python client, 3 rounds each, the order alternated
#   BENCH_PAIR_ROUNDS  rounds of conn_pair (default 1000): one new
#                  connection (TLS, one GET, close) by each of direct
#                  (the twin), direct_fw and passthrough in turn, timed
#                  by one Python worker per path; the median per-round
#                  difference is what a path adds to a connection
#   BENCH_FLOOR_BLOCKS  blocks of queue_floor and of fw_split (default
#                  2, order reversed every other block). queue_floor:
#                  conn_pair (direct_fw, passthrough to the learned
#                  address) with egressd reading the queue (as started,
#                  at --log-level warn, and BENCH_FLOOR_B, another egressd
#                  binary, if set), and with nfq_floor in its place
#                  (every packet OK, nothing judged): blocking, with 20 us
#                  of work after each verdict, spinning; what of the
#                  queue's trip is egressd's own work.
#                  BENCH_PAIR_UNIQUE=1: queue_floor's pass-through
#                  connections each to a name of its own (resolved
#                  through egressd, untimed), not pass.bench.test's
#                  address.
#                  BENCH_FLOOR_SET: the variants instead, e.g.
#                  "egressd kjoff floor" (the in-kernel judge against
#                  the queue alone and the queue's floor; "floor_spin"
#                  for "floor spin"). fw_split: the
#                  sandbox's direct_fw over the twin's direct path with
#                  the twin given no ruleset, conntrack alone, egressd's
#                  ruleset: what of the firewall is conntrack
#   BENCH_RULES    request rules of the rules100 case (default 100)
#   BENCH_ROUNDS   rounds of the vault cases (default 1), each pair run
#                  back to back, the order swapped every round; the
#                  report gives every round's ratio, the median and range
#   BENCH_CALLGRIND=1  instead of wrk: egressd under valgrind
#                  --tool=callgrind, each vault case a fixed number of
#                  keep-alive requests (BENCH_REQS at 1 KiB, default 2000;
#                  BENCH_REQS_1M at 1 MiB, default 40) from one curl, its
#                  instructions (Ir) per request from a zero/dump pair of
#                  callgrind_control; the dumps stay in BENCH_OUT
#                  (default /tmp/bench_proxy.callgrind) for
#                  callgrind_annotate
#   BENCH_CREDS    credentials in the vault (default 1: the injected one;
#                  more are random values of 20-100 bytes, bound to
#                  nothing, that every injected response is redacted
#                  against too)
#   BENCH_BODY     x (default: the letter x) or b64 (base64 text of random
#                  bytes: the secrets' alphabet) for the 1 KiB and 1 MiB
#                  bodies
#   BENCH_PT_JUDGE  egressd's --passthrough-judge (default auto, as
#                  egressd's: pass.bench.test judged in flight where the
#                  kernel can queue; term.bench.test stays on the proxy,
#                  its binding holds its address); proxy for the proxy
#                  path; the report says how many flows egressd judged in
#                  flight and how many connections the proxy accepted
#   BENCH_HOLD     a file: when egressd is up, the namespaces' names and
#                  egressd's PID are written to it and the bench waits
#                  until it is removed (for measuring by hand)
#   BENCH_PERF     a file: perf record egressd while it is measured (and
#                  each A/B nginx peer's worker into FILE.nginx,
#                  FILE.nginx_fw)
#   BENCH_PERF_OPTS  perf record's options (default -g; "--call-graph
#                  dwarf,16384" sees through libc and OpenSSL frames)
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
#                not cover: terminated, not injected, redacted), term_bare
#                (bare.bench.test, terminated by a request rule of its
#                own and bound to nothing: termination without the vault)
#                and inject_1m/term_plain_1m
#                (the same with 1 MiB bodies), for the vault's own cost;
#   rules0/rules100  egressd --proxy, term.bench.test/plain/small
#                (terminated by the binding, not injected) with no
#                request rules, then with BENCH_RULES request rules of
#                that host in front of the plain allow (issue 37: unique
#                paths, the one that matches last), swapped by SIGHUP on
#                the same egressd, back to back each round (BENCH_ROUNDS),
#                the order swapped every round: what judging each
#                request against the rules costs (with
#                BENCH_CALLGRIND=1, in instructions per request);
#   mitmdump     mitmproxy 8 in transparent mode (nft redirect of the
#                client's uid), an addon setting the same header: the
#                reference's own proxy;
#   nginx        nginx (one worker) in the sandbox as a terminating
#                injector for one host (upstream keep-alive, session
#                reuse): the practical ceiling of a C proxy.
# Printed: req/s, p50 and p99 per mode and concurrency with the ratio to
# direct, bulk MB/s of one download (direct vs passthrough vs
# terminating, rounds), egressd's idle RSS. The bulk rounds' direct
# download runs from a twin of the sandbox ($TWN: its own veth to the
# origin, no egressd, no nftables), so that it alternates with the
# proxied ones while egressd runs: the machine's drift between a
# direct run and a proxied one a minute later was as large as the
# difference measured. nginx_stream, the pass-through peer, is nginx's
# stream module in the twin, routing by SNI (ssl_preread). Needs wrk,
# nginx (+ libnginx-mod-stream), mitmdump, dnsmasq.
set -u -o pipefail

EGRESSD_BIN=${EGRESSD_BIN:-build/egressd/egressd}
DUR=${BENCH_SECONDS:-3}
CONCS=${BENCH_CONC:-1 16 64}
BULK_MB=${BENCH_BULK_MB:-256}
BULK_ROUNDS=${BENCH_BULK_ROUNDS:-5}
CONNS=${BENCH_CONNS:-keep close}
PERF=${BENCH_PERF:-} # a file: perf record egressd while it is measured
ONLY=" ${BENCH_ONLY:-all} "
ONLY=${ONLY/ vault / terminating term_plain term_bare inject_1m term_plain_1m }
ONLY=${ONLY/ rules / rules0 rules100 }
NRULES=${BENCH_RULES:-100}
ROUNDS=${BENCH_ROUNDS:-1}
CALLGRIND=${BENCH_CALLGRIND:-}
REQS=${BENCH_REQS:-2000}
REQS_1M=${BENCH_REQS_1M:-40}
CG_OUT=${BENCH_OUT:-/tmp/bench_proxy.callgrind}
CREDS=${BENCH_CREDS:-1}
# the TLS versions of the origin and of the nginx peer: nginx 1.22
# (Debian 12) offers no TLS 1.3 unless told, so a "direct" client would
# resume TLS 1.2 sessions with no key exchange at all, which no modern
# origin does
ORIGIN_TLS=${BENCH_ORIGIN_TLS:-TLSv1.2 TLSv1.3}
BODY=${BENCH_BODY:-x}
PT_JUDGE=${BENCH_PT_JUDGE:-auto}
# want CASE: is CASE among BENCH_ONLY?
want() { [ "$ONLY" = " all " ] || [[ "$ONLY" == *" $1 "* ]]; }
. "$(dirname "$0")/bench_lib.sh"
bench_init bench_proxy bp
bench_need_root
tools="wrk nginx dnsmasq openssl curl"
want mitmdump && tools+=" mitmdump"
want hello_gap && tools+=" tcpdump"
[ -n "$CALLGRIND" ] && tools+=" valgrind callgrind_control"
for t in $tools; do
	command -v "$t" >/dev/null || die "needs $t (apt-get install wrk nginx-light libnginx-mod-stream mitmproxy dnsmasq-base curl valgrind)"
done
ORIGIN=203.0.113.7
# direct_fw: the same origin on an address no name resolves to, which an
# IP rule allows: the sandbox reaches it through egressd's ruleset
# (conntrack, the hooks) but neither queue nor proxy
ORIGIN_FW=203.0.113.8
# nginx_nat: an address no one has, on the sandbox's default route;
# a nat rule turns connections to its port 443 into the peer's
NAT_IP=203.0.113.9
USR=nobody
bench_pair
ip -n "$UP" addr add "$ORIGIN/24" dev vb1
ip -n "$UP" addr add "$ORIGIN_FW/32" dev vb1
ip -n "$SBX" route add default via "$UP_IP"
# the twin: the sandbox's path to the origin without egressd (a /32 on
# its own veth, so the two links' routes do not overlap)
TWN=bpt-$$
TWN_IP=198.51.100.3
ip netns add "$TWN" || die "ip netns add"
ip -n "$TWN" link add vt0 type veth peer name vt1 netns "$UP" || die "veth"
ip -n "$TWN" addr add "$TWN_IP/32" dev vt0
ip -n "$TWN" link set lo up
ip -n "$TWN" link set vt0 up
ip -n "$UP" link set vt1 up
ip -n "$TWN" route add default dev vt0
ip -n "$UP" route add "$TWN_IP/32" dev vt1
trap 'ip netns del "$TWN"; bench_cleanup' EXIT INT TERM
chmod 755 "$DIR"

# --- PKI ------------------------------------------------------------------------
bench_pki "bench CA"
chmod 644 "$DIR/ca.crt"

# rotate "A B C" R: the words rotated left by R - 1 (round R's order)
rotate()
{
	local w=$1 i
	for i in $(seq $((($2 - 1) % $(wc -w <<<"$1")))); do
		w="${w#* } ${w%% *}"
	done
	echo "$w"
}
# wait_listen NS ADDR:PORT [S]: up to S (5) s for a TCP listener there
wait_listen()
{
	local i
	for i in $(seq $((${3:-5} * 10))); do
		grep -q "$2" <<<"$(ip netns exec "$1" ss -ltn)" && return 0
		sleep 0.1
	done
}
# ng_head D: the lines every nginx of the bench starts with (one worker,
# in the foreground, pid and error log in $DIR/D)
ng_head()
{
	printf 'worker_processes 1;\ndaemon off;\npid %s/pid;\nerror_log %s/error.log;\nevents { worker_connections 4096; }\n' \
	    "$DIR/$1" "$DIR/$1"
}
# --- origin ----------------------------------------------------------------------
mkdir -p "$DIR/www" "$DIR/ng-up"
# body N: N bytes of BENCH_BODY (x: the letter x; b64: base64 lines of
# random bytes, the secrets' own alphabet, where the redactor's skip
# filter can rarely skip)
body()
{
	if [ "$BODY" = b64 ]; then
		head -c "$1" /dev/urandom | base64 -w 76 | head -c "$1"
	else
		head -c "$1" /dev/zero | tr '\0' x
	fi
}
mount -t tmpfs -o size=$((BULK_MB + 16))m tmpfs "$DIR/www" 2>/dev/null
body 1024 >"$DIR/www/small"
want bulk && head -c $((BULK_MB << 20)) /dev/zero >"$DIR/www/bulk"
# the vault's cost: the same bodies (1 KiB, 1 MiB) on paths the binding
# covers (/small, /inj/*: injected, response redacted) and on one it does
# not (/plain/*: terminated only)
mkdir -p "$DIR/www/plain" "$DIR/www/inj"
body $((1 << 20)) >"$DIR/www/plain/mid"
cp "$DIR/www/small" "$DIR/www/plain/small"
cp "$DIR/www/plain/mid" "$DIR/www/inj/mid"
{
	ng_head ng-up
	cat <<EOF
http {
	access_log off;
	keepalive_requests 1000000;
	server {
		listen $ORIGIN:443 ssl reuseport backlog=4096;
		listen $ORIGIN_FW:443 ssl reuseport backlog=4096;
		ssl_certificate $DIR/o.crt;
		ssl_certificate_key $DIR/o.key;
		ssl_session_cache shared:S:1m;
		ssl_protocols $ORIGIN_TLS;
		root $DIR/www;
		location / { }
	}
}
EOF
} >"$DIR/ng-up/nginx.conf"
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
trap 'rm -rf "/etc/netns/$SBX" "/etc/netns/$TWN"; umount "$DIR/www" 2>/dev/null; ip netns del "$TWN"; bench_cleanup' EXIT INT TERM
for i in $(seq 50); do
	ip netns exec "$SBX" curl -s -o /dev/null --cacert "$DIR/ca.crt" \
	    "https://pass.bench.test/small" && break
	sleep 0.1
done

# --- the client ------------------------------------------------------------------
# wrk_run LABEL URL CONC CLOSE [CA] [NS]: one measurement from namespace
# NS (default the sandbox); prints "rps p50 p99
# requests syscalls cpu_us sys_us" (milliseconds; when SYSPID is set,
# egressd's read and write calls per request from /proc/PID/io, its CPU
# time per request in microseconds from schedstat, which the machine's
# load moves far less than req/s, and the system-time part of it from
# /proc/PID/stat's ticks) into $DIR/res/LABEL-CONC-CLOSE.
mkdir -p "$DIR/res"
chmod 777 "$DIR/res"
SYSPID=
CLK_TCK=$(getconf CLK_TCK)
# sysc: egressd's read + write system calls, its CPU nanoseconds and
# its system-time ticks so far ("0 0 0" without SYSPID)
sysc()
{
	[ -n "$SYSPID" ] || { echo 0 0 0; return; }
	awk '/^sysc[rw]:/ {n += $2} END {printf "%d ", n}' "/proc/$SYSPID/io"
	cat "/proc/$SYSPID"/task/*/schedstat | awk '{ns += $1} END {printf "%.0f ", ns}'
	# stime, field 15: the 13th after the ") " that ends the name
	sed 's/.*) //' "/proc/$SYSPID/stat" | awk '{printf "%d\n", $13}'
}
wrk_run()
{
	local label=$1 url=$2 c=$3 close=$4 hdr=() t s0 s1 ns0 ns1 st0 st1
	[ "$close" = close ] && hdr=(-H "Connection: close")
	t=$c
	[ "$t" -gt 2 ] && t=2
	read -r s0 ns0 st0 <<<"$(sysc)"
	ip netns exec "${6:-$SBX}" setpriv --reuid="$USR" --regid=nogroup --clear-groups \
	    env SSL_CERT_FILE="${5:-$DIR/ca.crt}" \
	    wrk -t"$t" -c"$c" -d"${DUR}s" --latency "${hdr[@]}" "$url" \
	    >"$DIR/res/$label-$c-$close.out" 2>&1
	read -r s1 ns1 st1 <<<"$(sysc)"
	awk -v sys=$((s1 - s0)) -v ns=$((ns1 - ns0)) -v st=$((st1 - st0)) -v hz="$CLK_TCK" '
	    /Requests\/sec/ {rps=$2}
	    / requests in / {n=$1}
	    /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
	    function ms(v) { if (v ~ /us$/) return v/1000; if (v ~ /ms$/) return v+0;
	        if (v ~ /s$/) return v*1000; return v }
	    END { printf "%s %.3f %.3f %d %.2f %.1f %.1f\n", rps, ms(p50), ms(p99), n,
	        (n > 0 ? sys / n : 0), (n > 0 ? ns / n / 1000 : 0),
	        (n > 0 ? st * 1e6 / hz / n : 0) }' \
	    "$DIR/res/$label-$c-$close.out" >"$DIR/res/$label-$c-$close"
}
# wrk verifies nothing (it takes any certificate); the TLS path is the
# same work: a full handshake per new connection, resumption not used.

# bulk LABEL NS URL [CA] [RESOLVE]: MB/s of one download from namespace
# NS (the twin has no resolver: RESOLVE, default the origin's :443)
bulk()
{
	local t res=()
	if [ "$2" = "$TWN" ] || [ -n "${5:-}" ]; then
		res=(--resolve "${5:-pass.bench.test:443:$ORIGIN}")
	fi
	t=$(ip netns exec "$2" setpriv --reuid="$USR" --regid=nogroup --clear-groups \
	    curl -s -o /dev/null -w '%{time_total} %{size_download} %{exitcode}' \
	    "${res[@]}" --cacert "${4:-$DIR/ca.crt}" "$3")
	# a download cut short is a failure, never a fast round
	set -- "$1" $t
	if [ "${3:-0}" != $((BULK_MB << 20)) ]; then
		echo "bench_proxy: bulk $1: $3 of $((BULK_MB << 20)) bytes (curl exit ${4:-?}, ${2:-?} s)" >&2
		grep -E '"(nfq\.judged|proxy\.refused|proxy\.closed)"' "$DIR/egressd.log" |
		    grep -v '"decision":"passthrough"' | tail -n 3 >&2
		echo "FAIL" >"$DIR/res/bulk-$1"
		return 0
	fi
	awk -v t="$2" -v mb="$BULK_MB" 'BEGIN { printf "%.1f\n", mb / t }' \
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

# nginx_peer_conf: the nginx peer's certificate (term.bench.test, from
# the bench CA) and configuration in $DIR/ng-sbx, once
nginx_peer_conf()
{
	[ -f "$DIR/ng-sbx/nginx.conf" ] && return 0
	mkdir -p "$DIR/ng-sbx"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$DIR/t.key" -out "$DIR/t.csr" -subj "/CN=term.bench.test" 2>/dev/null
	printf 'subjectAltName=DNS:term.bench.test\n' >"$DIR/t.ext"
	openssl x509 -req -in "$DIR/t.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" \
	    -set_serial 8 -days 2 -extfile "$DIR/t.ext" -out "$DIR/t.crt" 2>/dev/null
	{
		ng_head ng-sbx
		cat <<EOF
http {
	access_log off;
	keepalive_requests 1000000;
	upstream origin { server $ORIGIN:443; keepalive 128; }
	server {
		listen 127.0.0.1:8443 ssl backlog=4096;
		ssl_certificate $DIR/t.crt;
		ssl_certificate_key $DIR/t.key;
		ssl_protocols $ORIGIN_TLS;
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
	} >"$DIR/ng-sbx/nginx.conf"
}

# --- direct ---------------------------------------------------------------------------
want direct && measure direct "https://pass.bench.test/small"

# --- egressd --------------------------------------------------------------------------
# BENCH_CREDS - 1 more credentials (random, bound to nothing) beside the
# injected one: every response to an injected request is redacted
# against all of them
CRED_LINES=$(for i in $(seq 2 "$CREDS"); do
	printf '  - {name: x%d, source: {type: inline, value: "%s"}}\n' "$i" \
	    "$(head -c 80 /dev/urandom | base64 -w0 | head -c $((20 + i * 37 % 81)))"
done)
[ -n "$CRED_LINES" ] && CRED_LINES+=$'\n'
# write_policy N: the policy file with N request rules of term.bench.test
# (0: none; the bound host is terminated by its binding either way)
write_policy()
{
	{
	cat <<EOF
defaultAction: deny
egress:
  - {action: allow, target: $ORIGIN_FW}
EOF
	# issue 37: in front of the plain allow, which matches every
	# request and would decide first: a deny of DELETE (what proves the
	# rules in force), allows of one unique path each, a star in its
	# middle as in the issue's git rules, and last the only one that
	# takes GET /plain/*
	[ "$1" -gt 1 ] &&
	    echo '  - {action: deny, target: term.bench.test, methods: [DELETE]}'
	for i in $(seq 3 "$1"); do
		printf '  - {action: allow, target: term.bench.test, methods: [GET, HEAD], paths: ["/org%d/*/info/refs"]}\n' \
		    "$i"
	done
	[ "$1" -gt 0 ] &&
	    echo '  - {action: allow, target: term.bench.test, methods: [GET], paths: ["/plain/*"]}'
	# term_bare: a host terminated by a request rule of its own, bound
	# to nothing (no vault on its path at all)
	want term_bare &&
	    echo '  - {action: allow, target: bare.bench.test, methods: [GET], paths: ["/plain/*"]}'
	echo '  - {action: allow, target: "*.bench.test"}'
	# in flight or not, term.bench.test's addresses stay on the proxy
	# (its binding holds them); pass.bench.test's are judged in flight
	cat <<EOF
credentials:
  - {name: k, source: {type: file, path: $DIR/key}}
EOF
	printf '%s' "$CRED_LINES"
	cat <<EOF
bindings:
  - name: term
    match: {hosts: [term.bench.test], paths: ["/small", "/bulk", "/inj/*"]}
    auth: {type: bearer, credential: k}
EOF
	} >"$DIR/policy.yaml.new"
	chmod 600 "$DIR/policy.yaml.new"
	mv "$DIR/policy.yaml.new" "$DIR/policy.yaml"
}
write_policy 0
printf 'bench-secret\n' >"$DIR/key"
chmod 600 "$DIR/key"
mkdir -p "$DIR/rules"
run=("$EGRESSD_BIN")
wait_s=10
if [ -n "$CALLGRIND" ]; then
	rm -rf "$CG_OUT"
	mkdir -p "$CG_OUT"
	run=(valgrind --tool=callgrind --callgrind-out-file="$CG_OUT/cg.%p"
	    --compress-strings=no
	    "$EGRESSD_BIN")
	wait_s=120
fi
# egressd_bg CMD... -- ARGS...: egressd (CMD: the binary, or valgrind
# and it) in the background in the sandbox, with the bench's policy,
# rules, upstream, state and trust directories, --proxy and no HTTP API,
# then ARGS; its output in $DIR/egressd.out, its PID in $!
egressd_bg()
{
	local cmd=()
	while [ "$1" != -- ]; do
		cmd+=("$1")
		shift
	done
	shift
	ip netns exec "$SBX" "${cmd[@]}" --policy "$DIR/policy.yaml" \
	    --rules-dir "$DIR/rules" --dns-upstream "$UP_IP" --http-addr "" \
	    --proxy --state-dir "$DIR/state" --trust-dir "$DIR/trust" "$@" \
	    >"$DIR/egressd.out" 2>&1 &
}
# egressd_start: egressd in the sandbox, waited for; EPID, and READY_MS:
# ms from just before the exec to the egressd.ready line's timestamp
# (listeners, redirects and CA in place)
egressd_start()
{
	local t0 ts
	: >"$DIR/egressd.log"
	t0=$(date +%s%N)
	egressd_bg "${run[@]}" -- --log-file "$DIR/egressd.log" \
	    --passthrough-judge "$PT_JUDGE" --teardown-on-exit
	EPID=$!
	bench_wait_ready "$EPID" "$wait_s"
	ts=$(sed -n 's/^{"ts":"\([^"]*\)".*"ev":"egressd.ready".*/\1/p' \
	    "$DIR/egressd.log")
	READY_MS=$((($(date -d "$ts" +%s%N) - t0) / 1000000))
}
# exec -> ready: the first start generates the CA in the empty state
# directory; the restarts (median of BENCH_RESTARTS, default 5) load it
egressd_start
ready_first=$READY_MS
ready_re=()
if [ -z "$CALLGRIND" ]; then
	for i in $(seq "${BENCH_RESTARTS:-5}"); do
		kill "$EPID"
		wait "$EPID" 2>/dev/null
		bench_forget_pid "$EPID" # never signal a reused PID later
		egressd_start
		ready_re+=("$READY_MS")
	done
fi
sleep 0.5
[ -z "$CALLGRIND" ] && SYSPID=$EPID
rss_idle=$(awk '/VmRSS/ {print $2}' "/proc/$EPID/status")
if [ -n "$PERF" ]; then
	perf record ${BENCH_PERF_OPTS:--g} -o "$PERF" -p "$EPID" >/dev/null 2>&1 &
	PERFPID=$!
fi
chmod 755 "$DIR/state"
cat "$DIR/state/ca.crt" "$DIR/ca.crt" >"$DIR/both.crt"
# hello_gap: the latency the queue adds to a new connection, as the
# origin's link sees it (BENCH_GAP_CONNS)
if want hello_gap && [ -z "$CALLGRIND" ]; then
	cat >"$DIR/gap_client.py" <<'EOF'
import socket, ssl, sys, time
host, addr, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
for i in range(n):
    s = socket.create_connection((addr, 443), timeout=3)
    ctx.wrap_socket(s, server_hostname=host).close()
    time.sleep(0.01)
EOF
	chmod 644 "$DIR/gap_client.py"
	ip netns exec "$UP" tcpdump -i vb1 -n -tt -s 128 -w "$DIR/gap.pcap" \
	    "tcp port 443" >/dev/null 2>&1 &
	gap_pid=$!
	PIDS+=("$gap_pid")
	sleep 1
	# the name resolved through egressd for each connection (its
	# address learned, queued), the IP-rule address as a literal; what
	# is timed starts after both (the ACK)
	for r in 1 2 3; do
		for a in $(rotate "pass.bench.test $ORIGIN_FW" "$r"); do
			ip netns exec "$SBX" setpriv --reuid="$USR" --regid=nogroup \
			    --clear-groups /usr/bin/python3 "$DIR/gap_client.py" \
			    pass.bench.test "$a" "${BENCH_GAP_CONNS:-200}" ||
			    echo "bench_proxy: hello_gap client to $a failed" >&2
		done
	done
	sleep 0.5
	kill -INT "$gap_pid"
	wait "$gap_pid" 2>/dev/null
	bench_forget_pid "$gap_pid"
	tcpdump -r "$DIR/gap.pcap" -n -tt 2>/dev/null |
	    python3 "$(dirname "$0")/hello_gap.py" "$ORIGIN" "$ORIGIN_FW" \
	    >"$DIR/res/hello_gap"
fi
# BENCH_HOLD=FILE: the bench's names written to FILE, then everything
# waits (egressd running, origin and twin up) until FILE is removed
if [ -n "${BENCH_HOLD:-}" ]; then
	printf 'SBX=%s\nTWN=%s\nUP=%s\nORIGIN=%s\nORIGIN_FW=%s\nEPID=%s\nDIR=%s\n' \
	    "$SBX" "$TWN" "$UP" "$ORIGIN" "$ORIGIN_FW" "$EPID" "$DIR" >"$BENCH_HOLD"
	while [ -e "$BENCH_HOLD" ]; do sleep 1; done
fi
# conn_pair.py (bench/conn_pair.py), readable by its workers (nobody);
# PAIR_WORKER a worker's command line (pass.bench.test's SNI, the
# address or name to follow); pair_run NAME=ARGV...: BENCH_PAIR_ROUNDS
# rounds of it; abba BLOCK N: the indices 0..N-1, reversed in even blocks
# (the order of a stage's variants: a drift falls on each alike)
cp "$(dirname "$0")/conn_pair.py" "$DIR/conn_pair.py"
chmod 644 "$DIR/conn_pair.py"
PAIR_PY="setpriv --reuid=$USR --regid=nogroup --clear-groups /usr/bin/python3 $DIR/conn_pair.py worker"
PAIR_WORKER="$PAIR_PY pass.bench.test"
# ... a name of its own each connection (u<n>-<pid>.bench.test, learned
# then judged): what egressd learned or judged for one cannot serve the
# next
PAIR_UNIQUE="$PAIR_PY u%d.bench.test u%d.bench.test"
pair_run() { python3 "$DIR/conn_pair.py" run "${BENCH_PAIR_ROUNDS:-1000}" "$@"; }
abba()
{
	if [ $(($1 % 2)) = 1 ]; then
		seq 0 $(($2 - 1))
	else
		seq $(($2 - 1)) -1 0
	fi
}
# conn_pair: what the firewall and the queue add to one new connection,
# direct (the twin), direct_fw and passthrough asked in turn, one
# connection each (BENCH_PAIR_ROUNDS)
if want conn_pair && [ -z "$CALLGRIND" ]; then
	pair_run \
	    "direct=ip netns exec $TWN $PAIR_WORKER $ORIGIN" \
	    "direct_fw=ip netns exec $SBX $PAIR_WORKER $ORIGIN_FW" \
	    "passthrough=ip netns exec $SBX $PAIR_WORKER pass.bench.test" \
	    >"$DIR/res/conn_pair" || echo "bench_proxy: conn_pair failed" >&2
fi
# ng_start NS CONF: the nginx peer started in NS from CONF, listening
# (127.0.0.1:8443); its PID in NG_PID
ng_start()
{
	ip netns exec "$1" nginx -c "$2" >"${2%/*}/out" 2>&1 &
	NG_PID=$!
	PIDS+=("$NG_PID")
	wait_listen "$1" 127.0.0.1:8443
}
# term_pair: termination against the nginx peer, one new connection
# each in turn (BENCH_PAIR_ROUNDS): the peer in the twin (no firewall,
# no interception), egressd terminating term.bench.test (its binding,
# injected) in the sandbox; what the wrk rows' noise hides at new
# connections
if want term_pair && [ -z "$CALLGRIND" ]; then
	nginx_peer_conf
	ng_start "$TWN" "$DIR/ng-sbx/nginx.conf"
	tp_ng=$NG_PID
	pair_run \
	    "nginx=ip netns exec $TWN $PAIR_PY term.bench.test 127.0.0.1:8443" \
	    "terminating=ip netns exec $SBX $PAIR_PY term.bench.test term.bench.test" \
	    >"$DIR/res/term_pair" || echo "bench_proxy: term_pair failed" >&2
	kill "$tp_ng"
	wait "$tp_ng" 2>/dev/null
	bench_forget_pid "$tp_ng"
fi
# fw_split: what of the firewall's cost to a new connection is conntrack
# and what egressd's rules. conn_pair, the sandbox's direct_fw against
# the twin's direct path to the same address, with the twin given in
# turn no ruleset, a table that only turns conntrack on (one accept of
# ct established a hook), and a copy of egressd's ruleset (nft list
# ruleset of the sandbox); the variants' order reversed every other
# block. The pair's difference is what the sandbox pays over the twin
# as it stands. Named alone (it changes the twin); the twin has no
# ruleset after.
if [[ "$ONLY" == *" fw_split "* ]] && [ -z "$CALLGRIND" ]; then
	ip netns exec "$SBX" nft list ruleset >"$DIR/fw_full.nft" 2>/dev/null
	cat >"$DIR/fw_ct.nft" <<'EOF'
table inet ctonly {
	chain out { type filter hook output priority 0; policy accept; ct state established,related accept; }
	chain in { type filter hook input priority 0; policy accept; ct state established,related accept; }
}
EOF
	: >"$DIR/res/fw_split"
	fvars=(none ct egressd)
	for b in $(seq "${BENCH_FLOOR_BLOCKS:-2}"); do
		for i in $(abba "$b" ${#fvars[@]}); do
			v=${fvars[$i]}
			ip netns exec "$TWN" nft flush ruleset
			case $v in
			ct) ip netns exec "$TWN" nft -f "$DIR/fw_ct.nft" ;;
			egressd) ip netns exec "$TWN" nft -f "$DIR/fw_full.nft" ;;
			esac || die "fw_split: loading $v"
			echo "== twin with $v" >>"$DIR/res/fw_split"
			pair_run \
			    "twin=ip netns exec $TWN $PAIR_WORKER $ORIGIN_FW" \
			    "sandbox=ip netns exec $SBX $PAIR_WORKER $ORIGIN_FW" \
			    >>"$DIR/res/fw_split" ||
			    echo "bench_proxy: fw_split ($v) failed" >&2
		done
	done
	ip netns exec "$TWN" nft flush ruleset
fi
# queue_floor: what of the queue's trip is egressd's own work. conn_pair
# (direct_fw, and pass-through to the learned address as a literal) with
# egressd judging, and with egressd gone (kill -9: the ruleset stays) and
# nfq_floor bound in its place (every packet OK, nothing judged); the
# pair's difference in each block is what that queue reader costs a
# connection. BENCH_FLOOR_BLOCKS blocks of BENCH_PAIR_ROUNDS each, the
# variants' order reversed every other block (ABBA: a drift, or what a
# restart leaves behind, falls on each alike). egressd is started again
# after.
if [[ "$ONLY" == *" queue_floor "* ]] && [ -z "$CALLGRIND" ] && [ -z "$PERF" ]; then
	floor_bin=$(dirname "$EGRESSD_BIN")/../bench/nfq_floor
	# the queue egressd said it reads (passthrough.judge)
	qnum=$(sed -n 's/.*"ev":"passthrough.judge".*"queue":\([0-9]*\).*/\1/p' \
	    "$DIR/egressd.log" | tail -1)
	: >"$DIR/res/queue_floor"
	[ -n "$qnum" ] || echo "bench_proxy: queue_floor: egressd reads no queue" >&2
	# floor_run VARIANT: egressd's queue reader replaced by VARIANT
	# ("egressd", "egressd_b": BENCH_FLOOR_B, "warn": egressd at
	# --log-level warn, "kjoff": egressd with --kernel-judge off, "floor",
	# "floor after=20", "floor spin"), then
	# one block of conn_pair; FPID is the reader, killed (-9) by the
	# next call. egressd is started by hand: at --log-level warn there
	# is no egressd.ready line to wait for, so every variant is given
	# the same 2 s, and the name resolved (learned) after.
	FPID=$EPID
	floor_run()
	{
		local v=$1 bin=$EGRESSD_BIN extra=()
		kill -9 "$FPID"
		wait "$FPID" 2>/dev/null
		bench_forget_pid "$FPID"
		case $v in
		floor*)
			# shellcheck disable=SC2086 # the mode: none or one word
			ip netns exec "$SBX" "$floor_bin" "$qnum" 600 ${v#floor} \
			    2>>"$DIR/res/queue_floor.log" &
			FPID=$!
			PIDS+=("$FPID")
			sleep 0.5
			;;
		*)
			[ "$v" = egressd_b ] && bin=$BENCH_FLOOR_B
			[ "$v" = warn ] && extra=(--log-level warn)
			[ "$v" = kjoff ] && extra=(--kernel-judge off)
			egressd_bg "$bin" -- --passthrough-judge queue \
			    --log-file "$DIR/egressd.floor.log" "${extra[@]}"
			FPID=$!
			PIDS+=("$FPID")
			sleep 2
			kill -0 "$FPID" ||
			    die "egressd ($v) exited: $(tail -3 "$DIR/egressd.out")"
			ip netns exec "$SBX" getent ahostsv4 pass.bench.test >/dev/null
			;;
		esac
		echo "== $v" >>"$DIR/res/queue_floor"
		local m
		m=$(stat -c %s "$DIR/egressd.floor.log" 2>/dev/null || echo 0)
		pair_run \
		    "direct_fw=ip netns exec $SBX $PAIR_WORKER $ORIGIN_FW" \
		    "passthrough=ip netns exec $SBX $pass_worker" \
		    >>"$DIR/res/queue_floor" ||
		    echo "bench_proxy: queue_floor ($v) failed" >&2
		# an egressd's: the hellos its queue judged (the rest it
		# passed in the kernel, logged by=kernel, or never saw)
		[ "${v#floor}" = "$v" ] &&
		    echo "(hellos judged from the queue: $(tail -c +$((m + 1)) \
		        "$DIR/egressd.floor.log" | grep '"ev":"nfq.judged"' |
		        grep -vc '"by":"kernel"'))" \
		        >>"$DIR/res/queue_floor"
	}
	pass_ip=$(ip netns exec "$SBX" getent ahostsv4 pass.bench.test |
	    awk 'NR == 1 {print $1}')
	pass_worker="$PAIR_WORKER $pass_ip"
	[ -n "${BENCH_PAIR_UNIQUE:-}" ] && pass_worker=$PAIR_UNIQUE
	variants=(egressd)
	[ -n "${BENCH_FLOOR_B:-}" ] && variants+=(egressd_b)
	variants+=(warn floor "floor after=20" "floor spin")
	if [ -n "${BENCH_FLOOR_SET:-}" ]; then
		# shellcheck disable=SC2206 # one word per variant
		variants=(${BENCH_FLOOR_SET//_/ })
	fi
	for b in $([ -n "$qnum" ] && seq "${BENCH_FLOOR_BLOCKS:-2}"); do
		for i in $(abba "$b" ${#variants[@]}); do
			floor_run "${variants[$i]}"
		done
	done
	if [ -n "$qnum" ]; then
		kill -9 "$FPID"
		wait "$FPID" 2>/dev/null
		bench_forget_pid "$FPID"
		egressd_start
		SYSPID=$EPID
		sleep 0.5
	fi
fi
chmod 644 "$DIR/both.crt"
want passthrough && measure passthrough "https://pass.bench.test/small"
# the same requests behind egressd's firewall alone (wrk takes any
# certificate): what the ruleset costs, without egressd's own work
want direct_fw && measure direct_fw "https://$ORIGIN_FW/small"

# The vault's cost: an injected request against a terminated-only one to
# the same host, same body size; per round the two run back to back,
# plain first every other round (drift on the loaded machine falls on
# both sides).
vault_path()
{
	case $1 in
	terminating) echo /small ;;
	term_plain | term_bare) echo /plain/small ;;
	inject_1m) echo /inj/mid ;;
	term_plain_1m) echo /plain/mid ;;
	rules0 | rules100) echo /plain/small ;;
	esac
}
# cg_case LABEL [URL PID]: BENCH_REQS (BENCH_REQS_1M) keep-alive requests
# of one curl to LABEL's path (or URL), after one warm-up request (the
# leaf minted, an origin session to resume); egressd's (or PID's)
# instructions for them per request into $DIR/res/cg-LABEL, its dump into
# $CG_OUT/LABEL.callgrind.
cg_case()
{
	local label=$1 url=${2:-} pid=${3:-$EPID} n i f
	[ -n "$url" ] || url="https://term.bench.test$(vault_path "${1%.r*}")"
	n=$REQS
	[[ $label == *_1m* ]] && n=$REQS_1M
	for i in $(seq "$n"); do
		printf 'url = "%s"\noutput = "/dev/null"\n' "$url"
	done >"$DIR/res/$label.curl"
	chmod 644 "$DIR/res/$label.curl"
	cl() {
		ip netns exec "$SBX" setpriv --reuid="$USR" --regid=nogroup \
		    --clear-groups curl -sf --cacert "$DIR/both.crt" "$@"
	}
	cl -o /dev/null "$url" || die "$label: warm-up request failed"
	callgrind_control -z "$pid" >/dev/null 2>&1 || die "callgrind_control -z"
	# BENCH_CONNS=close: a new connection per request (curl resumes
	# its TLS session; BENCH_CG_FULL=1: --no-sessionid, a full
	# handshake each)
	if [ "$CONNS" = close ]; then
		cl -H "Connection: close" ${BENCH_CG_FULL:+--no-sessionid} \
		    -K "$DIR/res/$label.curl" ||
		    die "$label: a request failed"
	else
		cl -K "$DIR/res/$label.curl" || die "$label: a request failed"
	fi
	callgrind_control -d "$label" "$pid" >/dev/null 2>&1 ||
	    die "callgrind_control -d"
	f=$(ls "$CG_OUT/cg.$pid".[0-9]* 2>/dev/null | head -1)
	[ -n "$f" ] || die "$label: no callgrind dump"
	mv "$f" "$CG_OUT/$label.callgrind"
	awk -v n="$n" '/^(summary|totals):/ {ir = $2}
	    END {printf "%.0f %d\n", ir / n, n}' "$CG_OUT/$label.callgrind" \
	    >"$DIR/res/cg-$label"
}
for r in $(seq "$ROUNDS"); do
	order="terminating term_plain term_bare inject_1m term_plain_1m"
	[ $((r % 2)) -eq 0 ] && order="term_bare term_plain terminating term_plain_1m inject_1m"
	for k in $order; do
		want "$k" || continue
		host=term.bench.test
		[ "$k" = term_bare ] && host=bare.bench.test
		if [ -n "$CALLGRIND" ]; then
			cg_case "$k.r$r" "https://$host$(vault_path "$k")"
		else
			measure "$k.r$r" "https://$host$(vault_path "$k")" \
			    "$DIR/both.crt"
		fi
	done
done
for c in $CONCS; do
	for k in $CONNS; do
		[ -f "$DIR/res/terminating.r1-$c-$k" ] &&
		    cp "$DIR/res/terminating.r1-$c-$k" "$DIR/res/terminating-$c-$k"
	done
done
# request rules (issue 37): the same egressd, host, path and binding with
# no request rules and with NRULES, swapped by SIGHUP; per round the two
# back to back, the order swapped every round
POLICY_N=0
# policy_swap N: write the policy with N request rules, SIGHUP, and wait
# (bounded) for the reload's policy.loaded line
policy_swap()
{
	local m i
	[ "$POLICY_N" = "$1" ] && return 0
	m=$(stat -c %s "$DIR/egressd.log")
	write_policy "$1"
	kill -HUP "$EPID"
	for i in $(seq $((wait_s * 20))); do
		tail -c +$((m + 1)) "$DIR/egressd.log" |
		    grep -q '"ev":"policy.loaded"' && break
		tail -c +$((m + 1)) "$DIR/egressd.log" |
		    grep -q '"ev":"policy\.\(load\|reload\)_failed"' &&
		    die "the policy with $1 request rules was refused: $(tail -n 3 "$DIR/egressd.log")"
		sleep 0.05
	done
	[ "$i" -lt $((wait_s * 20)) ] ||
	    die "no policy.loaded within $wait_s s of SIGHUP ($1 rules)"
	POLICY_N=$1
}
# rules_probe: the status of a DELETE to the rules' host: 403 from egressd
# while the rules are in force, nginx's own 405 without them
rules_probe()
{
	ip netns exec "$SBX" setpriv --reuid="$USR" --regid=nogroup \
	    --clear-groups curl -s -o /dev/null -w '%{http_code}' \
	    --cacert "$DIR/both.crt" -X DELETE "https://term.bench.test/plain/small"
}
if want rules0 && want rules100; then
	for r in $(seq "$ROUNDS"); do
		order="rules0 rules100"
		[ $((r % 2)) -eq 0 ] && order="rules100 rules0"
		for k in $order; do
			n=0
			[ "$k" = rules100 ] && n=$NRULES
			policy_swap "$n"
			p=$(rules_probe)
			if [ "$n" -gt 1 ]; then
				[ "$p" = 403 ] || die "$k: the rules are not in force (DELETE: $p)"
			else
				[ "$p" != 403 ] || die "$k: DELETE refused with no rules"
			fi
			if [ -n "$CALLGRIND" ]; then
				cg_case "$k.r$r"
			else
				measure "$k.r$r" "https://term.bench.test/plain/small" \
				    "$DIR/both.crt"
			fi
		done
	done
	policy_swap 0
fi
cpu() { awk '{print $14 + $15}' "/proc/$EPID/stat"; }
# bulk rounds: direct (the twin), passthrough, terminating and, with
# the nginx peer wanted, nginx_stream (nginx's stream module in the twin:
# a pass-through peer that routes by the ClientHello's SNI, as egressd
# judges it, and relays with read/write); the order rotated each round;
# egressd's CPU (user + system ticks) per download
# every bench name resolves to the one origin address: once a terminating
# round has learned term.bench.test, that address is held (docs/proxy.md)
# and pass.bench.test goes through the proxy too; BENCH_BULK_PATHS="direct
# passthrough" keeps pass-through in flight
BULK_PATHS=${BENCH_BULK_PATHS:-direct passthrough terminating}
NGS=/usr/lib/nginx/modules/ngx_stream_module.so
if want bulk && want nginx; then
	[ -f "$NGS" ] || die "needs $NGS (apt-get install libnginx-mod-stream)"
	mkdir -p "$DIR/ng-st"
	{
		echo "load_module $NGS;"
		ng_head ng-st
		cat <<EOF
stream {
	map \$ssl_preread_server_name \$up {
		pass.bench.test $ORIGIN:443;
		default 127.0.0.1:9;
	}
	server {
		listen 127.0.0.1:8444 backlog=4096;
		ssl_preread on;
		proxy_pass \$up;
	}
}
EOF
	} >"$DIR/ng-st/nginx.conf"
	ip netns exec "$TWN" nginx -c "$DIR/ng-st/nginx.conf" >"$DIR/ng-st/out" 2>&1 &
	PIDS+=($!)
	wait_listen "$TWN" 127.0.0.1:8444
	BULK_PATHS+=" nginx_stream"
fi
if want bulk; then
	for r in $(seq "$BULK_ROUNDS"); do
		for k in $(rotate "$BULK_PATHS" "$r"); do
			c0=$(cpu)
			case $k in
			direct) bulk "$k.r$r" "$TWN" "https://pass.bench.test/bulk" ;;
			passthrough) bulk "$k.r$r" "$SBX" "https://pass.bench.test/bulk" ;;
			direct_fw) bulk "$k.r$r" "$SBX" "https://pass.bench.test/bulk" \
			    "" "pass.bench.test:443:$ORIGIN_FW" ;;
			terminating) bulk "$k.r$r" "$SBX" "https://term.bench.test/bulk" \
			    "$DIR/both.crt" ;;
			nginx_stream) bulk "$k.r$r" "$TWN" "https://pass.bench.test:8444/bulk" \
			    "" pass.bench.test:8444:127.0.0.1 ;;
			esac
			echo $(($(cpu) - c0)) >"$DIR/res/bulkcpu-$k.r$r"
		done
	done
fi
# A/B rounds (BENCH_AB_ROUNDS, default 0): every concurrency and
# connection kind of wrk measured again as direct (the twin), terminating
# and, with the nginx peer wanted, nginx (the peer in the twin), back to
# back, the order rotated each round, while egressd runs: the ratios then
# compare runs seconds apart, not minutes
# ab_peer NAME NS CONF: the nginx peer NAME, started in NS from CONF, in
# the A/B rounds; its worker's CPU and calls are counted as egressd's are
# (AB_WORKER[NAME]), and with BENCH_PERF it is recorded into $PERF.NAME
declare -A AB_PID=() AB_WORKER=() AB_PERF=()
ab_peer()
{
	ng_start "$2" "$3"
	AB_PID[$1]=$NG_PID
	AB_WORKER[$1]=$(pgrep -P "${AB_PID[$1]}" | head -1)
	if [ -n "$PERF" ]; then
		perf record ${BENCH_PERF_OPTS:--g} -o "$PERF.$1" \
		    -p "${AB_WORKER[$1]}" >/dev/null 2>&1 &
		AB_PERF[$1]=$!
	fi
	AB_PATHS+=" $1"
}
if [ "${BENCH_AB_ROUNDS:-0}" -gt 0 ] && [ -z "$CALLGRIND" ]; then
	mkdir -p "/etc/netns/$TWN"
	printf '%s pass.bench.test\n127.0.0.1 term.bench.test\n' "$ORIGIN" \
	    >"/etc/netns/$TWN/hosts"
	AB_PATHS=${BENCH_AB_PATHS:-direct terminating}
	if want nginx; then
		nginx_peer_conf
		ab_peer nginx "$TWN" "$DIR/ng-sbx/nginx.conf"
	fi
	# nginx_fw: the same peer in the sandbox, behind egressd's firewall
	# as egressd's own connections are (wrk's to it on lo, its upstream
	# to the IP-rule address): conntrack and the hooks on both sides
	if want nginx_fw; then
		nginx_peer_conf
		mkdir -p "$DIR/ng-fw"
		sed -e "s#$DIR/ng-sbx/#$DIR/ng-fw/#g" \
		    -e "s#server $ORIGIN:443;#server $ORIGIN_FW:443;#" \
		    "$DIR/ng-sbx/nginx.conf" >"$DIR/ng-fw/nginx.conf"
		grep -q "server $ORIGIN_FW:443;" "$DIR/ng-fw/nginx.conf" ||
		    die "nginx_fw: upstream not rewritten"
		ab_peer nginx_fw "$SBX" "$DIR/ng-fw/nginx.conf"
	fi
	# nginx_nat: the nginx_fw peer reached as egressd's terminated
	# connections are, through a REDIRECT: wrk to port 443 of an address
	# no one has (NAT_IP, on the sandbox's route to the origin), turned
	# by a nat rule of the bench's own into 127.0.0.1:8443, so the peer
	# pays the NAT that egressd's interception pays on every client
	# packet. egressd's ruleset accepts a redirected connection only to
	# its own ports (the output hook's oif is still the route's before
	# the redirect, so the loopback row does not see it): the bench's
	# packets carry egressd's own mark (1), which its rules accept
	if want nginx_nat; then
		want nginx_fw || die "nginx_nat needs nginx_fw (the same peer)"
		ip netns exec "$SBX" nft -f - <<EOF || die "nginx_nat: nat rule"
table inet bench_nat {
	chain bmark {
		type filter hook output priority -150;
		ip daddr $NAT_IP tcp dport 443 meta mark set 1
	}
	chain bnat {
		type nat hook output priority -100;
		ip daddr $NAT_IP tcp dport 443 redirect to :8443
	}
}
EOF
		AB_WORKER[nginx_nat]=${AB_WORKER[nginx_fw]}
		AB_PATHS+=" nginx_nat"
	fi
	cat >"$DIR/nt.nft" <<'EOF'
table inet bench_nt {
	chain nt_out {
		type filter hook output priority raw;
		meta mark 0x00000001 notrack
	}
	chain nt_pre {
		type filter hook prerouting priority raw;
		iif != "lo" socket mark 0x00000001 notrack
	}
}
EOF
	for r in $(seq "$BENCH_AB_ROUNDS"); do
		order=$(rotate "$AB_PATHS" "$r")
		for c in $CONCS; do
			for k in $CONNS; do
				for m in $order; do
					case $m in
					direct) wrk_run "ab-direct.r$r" \
					    "https://pass.bench.test/small" "$c" "$k" "" "$TWN" ;;
					terminating) wrk_run "ab-terminating.r$r" \
					    "https://term.bench.test/small" "$c" "$k" \
					    "$DIR/both.crt" ;;
					term_nt) ip netns exec "$SBX" nft -f "$DIR/nt.nft" ||
					    die "term_nt: notrack table"
					    wrk_run "ab-term_nt.r$r" \
					    "https://term.bench.test/small" "$c" "$k" \
					    "$DIR/both.crt"
					    ip netns exec "$SBX" nft delete table inet bench_nt ;;
					nginx) SYSPID=${AB_WORKER[nginx]} wrk_run "ab-nginx.r$r" \
					    "https://term.bench.test:8443/small" "$c" "$k" "" "$TWN" ;;
					nginx_fw) SYSPID=${AB_WORKER[nginx_fw]} wrk_run "ab-nginx_fw.r$r" \
					    "https://127.0.0.1:8443/small" "$c" "$k" ;;
					nginx_nat) SYSPID=${AB_WORKER[nginx_nat]} wrk_run "ab-nginx_nat.r$r" \
					    "https://$NAT_IP/small" "$c" "$k" ;;
					passthrough) wrk_run "ab-passthrough.r$r" \
					    "https://pass.bench.test/small" "$c" "$k" ;;
					direct_fw) wrk_run "ab-direct_fw.r$r" \
					    "https://$ORIGIN_FW/small" "$c" "$k" ;;
					*) die "BENCH_AB_PATHS: unknown path $m" ;;
					esac
				done
			done
		done
	done
	for m in "${!AB_PID[@]}"; do
		if [ -n "${AB_PERF[$m]:-}" ]; then
			kill -INT "${AB_PERF[$m]}"
			wait "${AB_PERF[$m]}"
		fi
		kill "${AB_PID[$m]}"
		wait "${AB_PID[$m]}" 2>/dev/null
		bench_forget_pid "${AB_PID[$m]}"
	done
	rm -rf "/etc/netns/$TWN"
	want nginx_nat && ip netns exec "$SBX" nft delete table inet bench_nat
fi
rss_busy=$(awk '/VmHWM/ {print $2}' "/proc/$EPID/status")
[ -n "$PERF" ] && { kill -INT "$PERFPID"; wait "$PERFPID"; }
SYSPID=
kill "$EPID"
wait "$EPID" 2>/dev/null

# --- mitmdump (transparent, injecting addon) --------------------------------------------
if want mitmdump; then
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
		    grep -q 127.0.0.1:8080 <<<"$(ip netns exec "$SBX" ss -ltn)" && break
		sleep 0.1
	done
	cat "$DIR/mitm/mitmproxy-ca-cert.pem" "$DIR/ca.crt" >"$DIR/mitm.crt"
	chmod 644 "$DIR/mitm.crt"
	measure mitmdump "https://term.bench.test/small" "$DIR/mitm.crt"
	kill "$MPID"
	ip netns exec "$SBX" nft delete table ip benchmitm
fi

# --- nginx as a terminating injector -------------------------------------------------
if want nginx; then
	nginx_peer_conf
	if [ -n "$CALLGRIND" ]; then
		# the peer's own instructions per request, counted as egressd's
		# are: one process (no master), the same curl requests
		sed 's/^worker_processes 1;/master_process off;/' \
		    "$DIR/ng-sbx/nginx.conf" >"$DIR/ng-sbx/cg.conf"
		ip netns exec "$SBX" valgrind --tool=callgrind \
		    --callgrind-out-file="$CG_OUT/cg.%p" --compress-strings=no \
		    nginx -c "$DIR/ng-sbx/cg.conf" >"$DIR/ng-sbx/out" 2>&1 &
	else
		ip netns exec "$SBX" nginx -c "$DIR/ng-sbx/nginx.conf" >"$DIR/ng-sbx/out" 2>&1 &
	fi
	NPID=$!
	PIDS+=("$NPID")
	wait_listen "$SBX" 127.0.0.1:8443 "$wait_s"
	echo "127.0.0.1 term.bench.test" >"/etc/netns/$SBX/hosts"
	if [ -n "$CALLGRIND" ]; then
		cg_case nginx "https://term.bench.test:8443/small" "$NPID"
	else
		measure nginx "https://term.bench.test:8443/small"
	fi
	kill "$NPID"
fi

# --- report ---------------------------------------------------------------------------
r() { cat "$DIR/res/$1" 2>/dev/null || echo "0 0 0 0 0 0 0"; }
if [ -z "$CALLGRIND" ]; then
	printf '\n%-12s %-5s %4s %10s %8s %8s %9s %8s\n' mode conn c 'req/s' \
	    'p50 ms' 'p99 ms' 'x direct' 'p99 x'
	for close in $CONNS; do
		for c in $CONCS; do
			read -r drps _ dp99 _ <<<"$(r "direct-$c-$close")"
			for m in direct direct_fw passthrough terminating mitmdump nginx; do
				[ -f "$DIR/res/$m-$c-$close" ] || continue
				read -r rps p50 p99 _ <<<"$(r "$m-$c-$close")"
				awk -v m="$m" -v k="$close" -v c="$c" -v rps="$rps" \
				    -v p50="$p50" -v p99="$p99" -v d="$drps" -v dp="$dp99" 'BEGIN {
				    printf "%-12s %-5s %4s %10.0f %8.2f %8.2f %8.2fx %7.1fx\n",
				    m, k, c, rps, p50, p99, (d > 0 ? rps / d : 0),
				    (dp > 0 ? p99 / dp : 0) }'
			done
		done
	done
fi
# stats "v1 v2 ...": "median [min-max]"
stats()
{
	echo "$1" | tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1}
	    END { if (NR == 0) { print "-"; exit }
	        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	        printf "%.3f [%.3f-%.3f]", m, v[1], v[NR] }'
}
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.3f", (y > 0 ? x / y : 0) }'; }
# vault_report A B SIZE: per round A (injected) against B (terminated
# only): req/s, or instructions per request
vault_report()
{
	local a=$1 b=$2 size=$3 close c rr x y n xs ys xc yc ratios cpus
	if [ -n "$CALLGRIND" ]; then
		ratios=
		for rr in $(seq "$ROUNDS"); do
			[ -f "$DIR/res/cg-$a.r$rr" ] && [ -f "$DIR/res/cg-$b.r$rr" ] ||
			    continue
			read -r x n <<<"$(r "cg-$a.r$rr")"
			read -r y _ <<<"$(r "cg-$b.r$rr")"
			printf '  %-6s round %d: injected %d Ir/req, terminated only %d Ir/req: +%d, plain/injected %sx (%d requests)\n' \
			    "$size" "$rr" "$x" "$y" $((x - y)) "$(ratio "$y" "$x")" "$n"
			ratios+=" $(ratio "$y" "$x")"
		done
		[ -n "$ratios" ] &&
		    printf '  %-6s plain/injected instructions: median [range] %s\n' \
		    "$size" "$(stats "$ratios")"
		return
	fi
	for close in $CONNS; do
		for c in $CONCS; do
			ratios="" cpus=""
			for rr in $(seq "$ROUNDS"); do
				[ -f "$DIR/res/$a.r$rr-$c-$close" ] &&
				    [ -f "$DIR/res/$b.r$rr-$c-$close" ] || continue
				read -r x _ _ _ xs xc <<<"$(r "$a.r$rr-$c-$close")"
				read -r y _ _ _ ys yc <<<"$(r "$b.r$rr-$c-$close")"
				printf '  %-6s %-5s c=%-3s round %d: %.0f vs %.0f req/s (%sx); egressd CPU %s vs %s us/req (%sx); syscalls/req %s vs %s\n' \
				    "$size" "$close" "$c" "$rr" "$x" "$y" \
				    "$(ratio "$x" "$y")" "$xc" "$yc" "$(ratio "$yc" "$xc")" \
				    "$xs" "$ys"
				ratios+=" $(ratio "$x" "$y")"
				cpus+=" $(ratio "$yc" "$xc")"
			done
			[ -n "$ratios" ] &&
			    printf '  %-6s %-5s c=%-3s injected/plain: req/s median [range] %s; CPU per request plain/injected %s\n' \
			    "$size" "$close" "$c" "$(stats "$ratios")" "$(stats "$cpus")"
		done
	done
}
if [ -n "$CALLGRIND" ] && [ -f "$DIR/res/cg-nginx" ]; then
	read -r x n <<<"$(r cg-nginx)"
	printf '\nthe nginx peer (terminating injector, one process): %d Ir/req (%d requests)\n' \
	    "$x" "$n"
fi
printf '\nthe vault (injection + response redaction) against termination alone, %d credential(s):\n' "$CREDS"
vault_report terminating term_plain "1 KiB"
# wrk: injected against termination alone (term_bare), "bare" lines
[ -z "$CALLGRIND" ] && want term_bare && vault_report terminating term_bare bare
if [ -n "$CALLGRIND" ] && [ -f "$DIR/res/cg-term_bare.r1" ]; then
	printf 'termination alone (bare.bench.test: a request rule terminates it, no binding, no vault), 1 KiB:\n'
	for rr in $(seq "$ROUNDS"); do
		read -r x n <<<"$(r "cg-term_bare.r$rr")"
		read -r y _ <<<"$(r "cg-terminating.r$rr")"
		read -r z _ <<<"$(r "cg-term_plain.r$rr")"
		printf '  round %d: %d Ir/req; injected %sx of it, terminated and redacted %sx\n' \
		    "$rr" "$x" "$(ratio "$y" "$x")" "$(ratio "$z" "$x")"
	done
fi
vault_report inject_1m term_plain_1m "1 MiB"
# rules_report: per round rules100 against rules0: req/s and egressd's
# CPU per request, then the median and range of the ratios against the
# floor (issue 37: <= 5 % fewer req/s, by the median)
rules_report()
{
	local close c rr x y xc yc xs ys ratios cpus med n
	printf '\nrequest rules (issue 37): term.bench.test/plain/small (terminated by its binding, not injected), %d request rules against none, same egressd, swapped by SIGHUP:\n' "$NRULES"
	if [ -n "$CALLGRIND" ]; then
		ratios=
		for rr in $(seq "$ROUNDS"); do
			[ -f "$DIR/res/cg-rules100.r$rr" ] &&
			    [ -f "$DIR/res/cg-rules0.r$rr" ] || continue
			read -r x n <<<"$(r "cg-rules100.r$rr")"
			read -r y _ <<<"$(r "cg-rules0.r$rr")"
			printf '  round %d: %d rules %d Ir/req, none %d Ir/req: +%d (%s %%), none/rules %sx (%d requests)\n' \
			    "$rr" "$NRULES" "$x" "$y" $((x - y)) \
			    "$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.1f", (y > 0 ? (x - y) * 100 / y : 0) }')" \
			    "$(ratio "$y" "$x")" "$n"
			ratios+=" $(ratio "$y" "$x")"
		done
		[ -n "$ratios" ] &&
		    printf '  none/rules instructions: median [range] %s\n' "$(stats "$ratios")"
		return
	fi
	for close in $CONNS; do
		for c in $CONCS; do
			ratios="" cpus=""
			for rr in $(seq "$ROUNDS"); do
				[ -f "$DIR/res/rules100.r$rr-$c-$close" ] &&
				    [ -f "$DIR/res/rules0.r$rr-$c-$close" ] || continue
				read -r x _ _ _ xs xc <<<"$(r "rules100.r$rr-$c-$close")"
				read -r y _ _ _ ys yc <<<"$(r "rules0.r$rr-$c-$close")"
				printf '  %-5s c=%-3s round %d: %.0f vs %.0f req/s (%sx); egressd CPU %s vs %s us/req (%sx)\n' \
				    "$close" "$c" "$rr" "$x" "$y" "$(ratio "$x" "$y")" \
				    "$xc" "$yc" "$(ratio "$yc" "$xc")"
				ratios+=" $(ratio "$x" "$y")"
				cpus+=" $(ratio "$yc" "$xc")"
			done
			[ -n "$ratios" ] || continue
			med=$(stats "$ratios")
			printf '  %-5s c=%-3s %d rules / none: req/s median [range] %s (floor 0.95: %s); CPU per request none/rules %s\n' \
			    "$close" "$c" "$NRULES" "$med" \
			    "$(awk -v m="${med%% *}" 'BEGIN { print (m >= 0.95 ? "met" : "NOT met") }')" \
			    "$(stats "$cpus")"
		done
	done
}
want rules0 && want rules100 && rules_report
if want bulk; then
	hz=$(getconf CLK_TCK)
	printf '\nbulk %s MiB, one download per path and round (MB/s, ratio to direct; egressd CPU s):\n' "$BULK_MB"
	declare -A bulk_r=() bulk_fail=()
	for r in $(seq "$BULK_ROUNDS"); do
		d=$(cat "$DIR/res/bulk-direct.r$r")
		line="  round $r: direct $d"
		for k in $BULK_PATHS; do
			[ "$k" = direct ] && continue
			v=$(cat "$DIR/res/bulk-$k.r$r")
			if [ "$v" = FAIL ] || [ "$d" = FAIL ]; then
				line+=", $k $v (a download failed: not counted)"
				bulk_fail[$k]=$((${bulk_fail[$k]:-0} + 1))
				continue
			fi
			line+=", $k $v ($(ratio "$v" "$d")x"
			[ "$k" = nginx_stream ] || line+="; $(awk -v t="$(cat "$DIR/res/bulkcpu-$k.r$r")" \
			    -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }') s"
			line+=")"
			bulk_r[$k]+=" $(ratio "$v" "$d")"
		done
		echo "$line"
	done
	for k in $BULK_PATHS; do
		[ "$k" = direct ] && continue
		printf '  bulk %s / direct, median [range]: %s\n' "$k" "$(stats "${bulk_r[$k]}")"
		[ -z "${bulk_fail[$k]:-}" ] ||
			printf '  bulk %s: %s FAILED download(s) (rounds not counted)\n' "$k" "${bulk_fail[$k]}"
	done
fi
if [ "${BENCH_AB_ROUNDS:-0}" -gt 0 ] && [ -z "$CALLGRIND" ]; then
	printf '\nA/B rounds (%d; %s back to back, order rotated), ratio to direct:\n' \
	    "$BENCH_AB_ROUNDS" "$AB_PATHS"
	for close in $CONNS; do
		for c in $CONCS; do
			for m in $AB_PATHS; do
				[ "$m" = direct ] && continue
				rr="" pr=""
				for r in $(seq "$BENCH_AB_ROUNDS"); do
					read -r drps _ dp99 _ <<<"$(r "ab-direct.r$r-$c-$close")"
					read -r rps _ p99 _ <<<"$(r "ab-$m.r$r-$c-$close")"
					rr+=" $(ratio "$rps" "$drps")"
					pr+=" $(ratio "$p99" "$dp99")"
				done
				printf '  %-12s %-5s c=%-3s req/s %s  p99 %s\n' "$m" "$close" "$c" \
				    "$(stats "$rr")" "$(stats "$pr")"
			done
			# terminating against each peer, round by round
			for m in nginx nginx_fw nginx_nat; do
				for tm in terminating term_nt; do
					[[ " $AB_PATHS " == *" $tm "* && " $AB_PATHS " == *" $m "* ]] ||
					    continue
					rr="" cr="" ncpu="" tcpu="" nsys="" tsys=""
					for r in $(seq "$BENCH_AB_ROUNDS"); do
						read -r drps _ _ _ _ dcpu dsys <<<"$(r "ab-$m.r$r-$c-$close")"
						read -r rps _ _ _ _ cpu sys <<<"$(r "ab-$tm.r$r-$c-$close")"
						rr+=" $(ratio "$rps" "$drps")"
						cr+=" $(ratio "$cpu" "$dcpu")"
						ncpu+=" $dcpu" tcpu+=" $cpu" nsys+=" ${dsys:-0}" tsys+=" ${sys:-0}"
					done
					printf '  %-12s %-5s c=%-3s %s / %s: req/s %s; CPU us/req %s\n' \
					    "" "$close" "$c" "$tm" "$m" "$(stats "$rr")" "$(stats "$cr")"
					printf '  %-12s %-5s c=%-3s   CPU us/req egressd %s (system %s), %s %s (system %s)\n' \
					    "" "$close" "$c" "$(stats "$tcpu")" "$(stats "$tsys")" \
					    "$m" "$(stats "$ncpu")" "$(stats "$nsys")"
				done
			done
		done
	done
fi
if [ -s "$DIR/res/conn_pair" ]; then
	printf '\nconn_pair: one new connection (TLS, one GET, close), paths asked in turn:\n'
	sed 's/^/  /' "$DIR/res/conn_pair"
fi
if [ -s "$DIR/res/term_pair" ]; then
	printf '\nterm_pair: one new connection (TLS, one GET, close), the nginx peer and termination in turn:\n'
	sed 's/^/  /' "$DIR/res/term_pair"
fi
# blocks FILE: per variant (a "== NAME" line, then conn_pair's output),
# each block's median difference, and their median
blocks()
{
	python3 - "$1" <<'EOF'
import statistics, sys
blocks, v = {}, None
for ln in open(sys.argv[1]):
    if ln.startswith("== "):
        v = ln[3:].strip()
    elif " over " in ln and v is not None:
        blocks.setdefault(v, []).append(float(ln.split()[4]))
for v, d in blocks.items():
    print("%-16s median of blocks %+5.0f us  blocks: %s" % (
        v, statistics.median(d), " ".join("%+.0f" % x for x in d)))
EOF
}
if [ -s "$DIR/res/queue_floor" ]; then
	printf '\nqueue_floor: conn_pair with egressd reading the queue, then nfq_floor (nothing judged):\n'
	sed 's/^/  /' "$DIR/res/queue_floor"
	printf '  passthrough over direct_fw, per queue reader:\n'
	blocks "$DIR/res/queue_floor" | sed 's/^/    /'
fi
if [ -s "$DIR/res/fw_split" ]; then
	printf '\nfw_split: the sandbox behind egressd'"'"'s firewall over the twin given in turn:\n'
	sed 's/^/  /' "$DIR/res/fw_split"
	printf '  sandbox over twin, per twin ruleset:\n'
	blocks "$DIR/res/fw_split" | sed 's/^/    /'
fi
if [ -s "$DIR/res/hello_gap" ]; then
	printf '\nhello_gap: the handshake'"'"'s last ACK to the ClientHello at the origin (us):\n'
	sed 's/^/  /' "$DIR/res/hello_gap"
fi
printf 'egressd RSS: idle %s KiB, peak %s KiB\n' "$rss_idle" "$rss_busy"
# the path pass-through took: the start line, and what egressd logged of
# the flows (the last egressd run's log)
printf 'pass-through: %s; %s flows judged in flight, %s proxy connections\n' \
    "$(grep -o '"ev":"passthrough.judge"[^}]*' "$DIR/egressd.log" | tail -n 1)" \
    "$(grep -c '"ev":"nfq.judged","decision":"passthrough"' "$DIR/egressd.log")" \
    "$(grep -c '"ev":"proxy.closed"' "$DIR/egressd.log")"
printf 'egressd exec -> ready: first start (CA generated) %s ms; restarts %s ms (median %s)\n' \
    "$ready_first" "${ready_re[*]:-none}" \
    "$(printf '%s\n' "${ready_re[@]:-0}" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')"
[ -n "$CALLGRIND" ] && printf 'callgrind dumps: %s (callgrind_annotate FILE)\n' "$CG_OUT"
rm -f "/etc/netns/$SBX/hosts"
