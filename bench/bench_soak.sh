#!/bin/bash
# bench_soak.sh: a mixed soak of egressd with the proxy and the vault
# (issue 34): every load at once for BENCH_SECONDS, egressd's RSS and open
# descriptors sampled every second, and everything the clients received
# scanned for the secret.
#
# Usage (root): EGRESSD_BIN=build/egressd/egressd bench/bench_soak.sh
#   BENCH_SECONDS       length of the soak (default 600)
#   BENCH_FLOOD_PERIOD  seconds between floods (default 60; the first at
#                       one period)
#   BENCH_WARMUP        warm-up (default 60, at most a third of the soak):
#                       the baseline is the median of the window after it,
#                       "last" the median of the soak's last window of
#                       that length
#   BENCH_DNS_QPS       the DNS load's rate (default 200)
#   BENCH_DL_MB         size of one pass-through download (default 4)
#   BENCH_TERM_PAUSE    seconds between rounds of terminated requests
#                       (default 0.5; a round is 20 keep-alive requests
#                       on one connection and 5 on new ones)
#   BENCH_FLOOD_SECONDS how long each flood part lasts (default 12)
#   BENCH_FLOOD_CONNS   slow connections per flood (default 100)
#   BENCH_FLOOD_MB      the junk body per flood connection (default 64)
#   BENCH_FLOOD_PARTS   the flood's parts (default "slow junk-plain
#                       junk-tls noread-plain noread-tls")
#   BENCH_KEEP=1        keep the run's directory (client outputs, CSV)
#
# Two throwaway namespaces joined by one veth (bench_lib.sh). The
# "internet" ($UP, 203.0.113.7) runs dnsmasq (*.bench.test: A 203.0.113.7,
# AAAA 2001:db8::7; *.shared.bench.test: A 203.0.113.9, an address
# nothing listens on; h-2001-db8-1000--N.uniq.bench.test synthesized to
# 2001:db8:1000::N; TTL 30) and soak_origin.py (HTTPS on 443, plain HTTP
# on 80). The sandbox ($SBX) runs egressd --proxy with a vault: the
# credential k (a random value, new every run) bound as a bearer token to
# term.bench.test; pass.bench.test has no binding. The loads, at once, as
# an unprivileged user in the sandbox, each bounded in rate and time:
#   dns       dnsperf at BENCH_DNS_QPS through egressd's resolver (the
#             sandbox's nameserver, redirected): every query a new name,
#             alternately on one shared address (not the origin's) and on
#             a new IPv6 address (a new element to learn), one in 20
#             outside the policy;
#   download  curl fetching BENCH_DL_MB MiB from pass.bench.test (spliced
#             pass-through), one after another with a 1 s pause; each
#             download's sha256 compared with the served file's;
#   term      curl to term.bench.test with a fake key: egressd injects the
#             real one and the origin echoes it back in headers and body
#             (raw, base64 and base64url at three alignments, base64 of
#             the header line, MIME-wrapped, hex lower and upper;
#             Content-Length and 37-byte chunks); 20 requests on one
#             keep-alive connection then 5 new connections, every round;
#   flood     every BENCH_FLOOD_PERIOD s, for BENCH_FLOOD_SECONDS
#             (soak_flood.py): BENCH_FLOOD_CONNS slow connections (head
#             and ClientHello dripped), a pipelined flood on plain HTTP
#             and one inside terminated TLS (16 slow requests, then a
#             BENCH_FLOOD_MB MiB POST pushed as fast as egressd takes it),
#             and 4 + 4 clients that ask for 32 MiB and never read.
# A sampler writes t,rss_kb,fds (VmRSS and /proc/PID/fd) every second.
# Printed: what each load did, egressd's log warnings and close
# reasons, RSS and descriptors (start, baseline,
# peak, last, growth, slope), the memory bound of docs/proxy.md at the
# peak's connection count, and the secret scan: every byte every client
# received (headers, bodies, dnsperf's output, the flood's reads; a
# download only by its hash against the served file, which is scanned
# once) searched for any 12-character run of the secret raw, in base64
# and base64url at all three alignments, and in hex lower and upper, as
# received and with CR/LF removed (MIME wrapping). Exit 1 when there is a
# hit, 2 when RSS or descriptors grow or the peak is over the bound, 3
# when a load did not run. Needs dnsperf, dnsmasq, curl, openssl, nft,
# python3.
set -u -o pipefail

EGRESSD_BIN=${EGRESSD_BIN:-build/egressd/egressd}
DUR=${BENCH_SECONDS:-600}
PERIOD=${BENCH_FLOOD_PERIOD:-60}
WARM=${BENCH_WARMUP:-60}
[ "$WARM" -gt $((DUR / 3)) ] && WARM=$((DUR / 3))
DNS_QPS=${BENCH_DNS_QPS:-200}
DL_MB=${BENCH_DL_MB:-4}
TERM_PAUSE=${BENCH_TERM_PAUSE:-0.5}
FLOOD_S=${BENCH_FLOOD_SECONDS:-12}
FLOOD_CONNS=${BENCH_FLOOD_CONNS:-100}
FLOOD_MB=${BENCH_FLOOD_MB:-64}
FLOOD_PARTS=" ${BENCH_FLOOD_PARTS:-slow junk-plain junk-tls noread-plain noread-tls} "
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_lib.sh"
bench_init bench_soak bk
bench_need_root
for t in dnsperf dnsmasq curl openssl nft "$PY"; do
	command -v "$t" >/dev/null || die "needs $t (apt-get install dnsperf dnsmasq-base curl openssl nftables python3)"
done
[ "$WARM" -ge 10 ] || die "BENCH_SECONDS too short (the warm-up would be ${WARM}s)"
ORIGIN=203.0.113.7
# the DNS load's shared address: not the origin's, for egressd remembers
# 8 names an address was learned for (NFT_NAMES_PER_ADDR), and a stream
# of new names on the origin's address would push term.bench.test and
# pass.bench.test out (their connections then refused, addr_mismatch)
SHARED=203.0.113.9
USR=nobody
bench_pair
ip -n "$UP" addr add "$ORIGIN/24" dev vb1
ip -n "$SBX" route add default via "$UP_IP"
trap 'rm -rf "/etc/netns/$SBX"; umount "$DIR/www" 2>/dev/null; [ -n "${BENCH_KEEP:-}" ] && DIR=/nonexistent; bench_cleanup' EXIT INT TERM
chmod 755 "$DIR"
OUT=$DIR/out # everything the clients receive
mkdir -p "$OUT" "$DIR/www" "$DIR/rules" "$DIR/trust"
chmod 777 "$OUT"

# --- PKI, the secret, the origin ----------------------------------------------
bench_pki "soak CA"
# the secret: 40 random characters of the base64url alphabet, new every run
SECRET=sk-soak-$(head -c 60 /dev/urandom | base64 -w0 | tr -d '+/=' | head -c 32)
printf '%s\n' "$SECRET" >"$DIR/key"
chmod 600 "$DIR/key"
mount -t tmpfs -o size=$((DL_MB + 8))m tmpfs "$DIR/www" || die "tmpfs"
head -c $((DL_MB << 20)) /dev/urandom >"$DIR/www/dl"
DL_SUM=$(sha256sum <"$DIR/www/dl" | cut -d' ' -f1)
cp "$HERE/soak_origin.py" "$HERE/soak_flood.py" "$DIR/"
chmod 644 "$DIR"/*.py
ip netns exec "$UP" "$PY" "$DIR/soak_origin.py" "$ORIGIN" "$DIR/o.crt" \
    "$DIR/o.key" "$DIR/www/dl" "$DIR/key" "$DIR/origin.stats" \
    >"$DIR/origin.err" 2>&1 &
PIDS+=($!)
ip netns exec "$UP" dnsmasq --keep-in-foreground --no-daemon --no-resolv \
    --no-hosts --no-poll --user=root --group=root --pid-file= \
    --bind-interfaces --listen-address="$UP_IP" --port=53 \
    --address=/bench.test/$ORIGIN --address=/bench.test/2001:db8::7 \
    --address=/shared.bench.test/$SHARED \
    --synth-domain=uniq.bench.test,2001:db8:1000::/64,h- \
    --local-ttl=30 --cache-size=0 --dns-forward-max=10000 \
    --log-facility=/dev/null >"$DIR/up.err" 2>&1 &
PIDS+=($!)
mkdir -p "/etc/netns/$SBX"
echo "nameserver $UP_IP" >"/etc/netns/$SBX/resolv.conf"

# --- egressd ----------------------------------------------------------------------
cat >"$DIR/policy.yaml" <<EOF
defaultAction: deny
egress:
  - {action: allow, target: "*.bench.test"}
credentials:
  - {name: k, source: {type: file, path: $DIR/key}}
bindings:
  - name: term
    match: {hosts: [term.bench.test], paths: ["/*"]}
    auth: {type: bearer, credential: k}
EOF
chmod 600 "$DIR/policy.yaml"
ip netns exec "$SBX" "$EGRESSD_BIN" --policy "$DIR/policy.yaml" \
    --rules-dir "$DIR/rules" --dns-upstream "$UP_IP" --http-addr "" \
    --log-file "$DIR/egressd.log" --proxy \
    --state-dir "$DIR/state" --trust-dir "$DIR/trust" --teardown-on-exit \
    >"$DIR/egressd.out" 2>&1 &
EPID=$!
bench_wait_ready "$EPID"
chmod 755 "$DIR/state"
cat "$DIR/state/ca.crt" "$DIR/ca.crt" >"$DIR/both.crt"
chmod 644 "$DIR/both.crt"

# sbx CMD...: CMD in the sandbox as the unprivileged user, trusting
# egressd's CA and the origin's
sbx()
{
	ip netns exec "$SBX" setpriv --reuid="$USR" --regid=nogroup --clear-groups \
	    env SSL_CERT_FILE="$DIR/both.crt" "$@"
}
CURL=(curl -4 -sS --max-time 30 --cacert "$DIR/both.crt")
ok=
for i in $(seq 100); do
	sbx "${CURL[@]}" -o /dev/null "https://pass.bench.test/echo" 2>/dev/null &&
	    sbx "${CURL[@]}" -o /dev/null "https://term.bench.test/echo" 2>/dev/null &&
	    { ok=1; break; }
	sleep 0.1
done
[ -n "$ok" ] || die "the origin is not reachable through egressd: $(tail -3 "$DIR/origin.err" "$DIR/egressd.out")"
sleep 1
rss_of() { awk '/^VmRSS:/ {print $2}' "/proc/$EPID/status"; }
fds_of() { local f=(/proc/"$EPID"/fd/*); echo "${#f[@]}"; }
RSS0=$(rss_of)
FDS0=$(fds_of)

# --- the loads ----------------------------------------------------------------------
T0=$EPOCHSECONDS
END=$((T0 + DUR))
# DNS: every query a new name (shared address, new address, denied)
n=$((DNS_QPS * DUR + 1000))
"$PY" - "$DIR/dns.txt" "$n" <<'EOF'
import random, sys
r = random.Random()
with open(sys.argv[1], "w") as f:
    for i in range(1, int(sys.argv[2]) + 1):
        if i % 20 == 0:
            f.write("d%d-%x.denied.test A\n" % (i, r.getrandbits(32)))
        elif i % 2:
            f.write("u%d-%x.shared.bench.test A\n" % (i, r.getrandbits(32)))
        else:
            f.write("h-2001-db8-1000--%x-%x.uniq.bench.test AAAA\n" % (i >> 16, i & 0xffff))
EOF
chmod 644 "$DIR/dns.txt"
sbx dnsperf -s "$UP_IP" -p 53 -d "$DIR/dns.txt" -l "$DUR" -Q "$DNS_QPS" \
    -c 2 -q 100 >"$OUT/dns.out" 2>&1 &
DNSPID=$!
PIDS+=("$DNSPID")

download_loop()
{
	while [ "$EPOCHSECONDS" -lt "$END" ]; do
		s=$(sbx "${CURL[@]}" -D "$OUT/dl.$BASHPID.hdr.tmp" --max-time 60 \
		    "https://pass.bench.test/dl" 2>>"$DIR/dl.err" | sha256sum | cut -d' ' -f1)
		cat "$OUT/dl.$BASHPID.hdr.tmp" >>"$OUT/dl.hdr" 2>/dev/null
		echo "$s" >>"$DIR/dl.sums"
		sleep 1
	done
	rm -f "$OUT/dl.$BASHPID.hdr.tmp"
}
download_loop &
PIDS+=($!)
LOOPS=($!)

# terminated: 20 keep-alive requests on one connection, then 5 new ones
for i in $(seq 20); do
	printf 'url = "https://term.bench.test/echo?ka=%d%s"\n' "$i" \
	    "$([ $((i % 2)) -eq 0 ] && echo '&chunked=1')"
done >"$DIR/ka.curl"
chmod 644 "$DIR/ka.curl"
term_loop()
{
	local j
	while [ "$EPOCHSECONDS" -lt "$END" ]; do
		sbx "${CURL[@]}" -i -H 'Authorization: Bearer fake-key' \
		    -K "$DIR/ka.curl" >>"$OUT/term-ka.out" 2>>"$DIR/term.err"
		for j in 1 2 3 4 5; do
			sbx "${CURL[@]}" -i -H 'Authorization: Bearer fake-key' \
			    "https://term.bench.test/echo?new=$j$([ $j -gt 3 ] && echo '&chunked=1')" \
			    >>"$OUT/term-new.out" 2>>"$DIR/term.err"
		done
		sleep "$TERM_PAUSE"
	done
}
term_loop &
PIDS+=($!)
LOOPS+=($!)

# the flood: every PERIOD, each part at most FLOOD_S seconds
flood_loop()
{
	local k=0 at fp=()
	at=$((T0 + PERIOD))
	while [ $((at + FLOOD_S)) -le "$END" ]; do
		while [ "$EPOCHSECONDS" -lt "$at" ]; do sleep 0.2; done
		k=$((k + 1))
		echo "flood $k at t=$((EPOCHSECONDS - T0))s" >>"$DIR/flood.log"
		fl() { sbx "$PY" "$DIR/soak_flood.py" "$1" "$OUT/flood$k-$1$2.out" \
		    "$DIR/both.crt" "$ORIGIN" "$FLOOD_S" "${@:3}" >>"$DIR/flood.log" 2>&1 & }
		fp=()
		part() { [[ $FLOOD_PARTS == *" $1 "* ]]; }
		part slow && { fl slow "" "$FLOOD_CONNS"; fp+=($!); }
		part junk-plain && { fl junk -plain plain "$FLOOD_MB"; fp+=($!); }
		part junk-tls && { fl junk -tls tls "$FLOOD_MB"; fp+=($!); }
		part noread-plain && { fl noread -plain plain 4 32; fp+=($!); }
		part noread-tls && { fl noread -tls tls 4 32; fp+=($!); }
		wait "${fp[@]}"
		at=$((at + PERIOD))
	done
	echo "$k" >"$DIR/floods"
}
flood_loop &
PIDS+=($!)
LOOPS+=($!)

# the sampler: t,rss_kb,fds every second until the end
CSV=$DIR/samples.csv
echo "t_s,rss_kb,fds" >"$CSV"
t0us=${EPOCHREALTIME/./}
for ((s = 0; s <= DUR; s++)); do
	[ -r "/proc/$EPID/status" ] || break
	echo "$s,$(rss_of),$(fds_of)" >>"$CSV"
	d=$((t0us + (s + 1) * 1000000 - ${EPOCHREALTIME/./}))
	[ "$d" -gt 0 ] && sleep "$(printf '%d.%06d' $((d / 1000000)) $((d % 1000000)))"
done
kill -0 "$EPID" 2>/dev/null || die "egressd died during the soak: $(tail -3 "$DIR/egressd.out")"
HWM=$(awk '/^VmHWM:/ {print $2}' "/proc/$EPID/status")
for p in "${LOOPS[@]}" "$DNSPID"; do
	wait "$p"
	bench_forget_pid "$p"
done
sleep 1
ostats=$(cat "$DIR/origin.stats" 2>/dev/null)

# --- report -------------------------------------------------------------------------
echo
printf 'bench_soak: %d s, flood every %d s (%d floods of %d s), warm-up %d s, %d CPUs, load average %s\n' \
    "$DUR" "$PERIOD" "$(cat "$DIR/floods" 2>/dev/null || echo 0)" "$FLOOD_S" "$WARM" \
    "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
dns=$(awk '/Queries sent:/ {s=$3} /Queries completed:/ {c=$3} /Queries lost:/ {l=$3}
    /Response codes:/ {sub(/.*Response codes: */, ""); r=$0}
    END {printf "%s sent, %s completed, %s lost; %s", s, c, l, r}' "$OUT/dns.out")
learned6=$(ip netns exec "$SBX" nft list set inet egressd learned6 2>/dev/null |
    grep -o '2001:db8:1000::[0-9a-f:]*' | wc -l)
echo "dns:       $dns; learned6 now holds $learned6 of the synthesized addresses"
ndl=$(wc -l <"$DIR/dl.sums" 2>/dev/null || echo 0)
okdl=$(grep -c "^$DL_SUM\$" "$DIR/dl.sums" 2>/dev/null)
echo "download:  $ndl downloads of $DL_MB MiB, ${okdl:-0} byte-identical to the served file"
t200=$(cat "$OUT"/term-*.out | grep -ac '^HTTP/1.1 200')
tall=$(cat "$OUT"/term-*.out | grep -ac '^HTTP/1.1 ')
terr=$(grep -c . "$DIR/term.err" 2>/dev/null)
tred=$(cat "$OUT"/term-*.out | grep -aci '^X-Echo-Authorization: \[REDACTED\]')
echo "term:      $tall responses ($t200 of them 200, ${terr:-0} curl errors), $tred with the echoed header [REDACTED]; origin: $ostats"
echo "flood:"
sed 's/^/  /' "$DIR/flood.log"
# tally EXPR: "name count, ..." of what EXPR picks out of egressd's log
tally()
{
	grep -o "$1" "$DIR/egressd.log" | sed 's/.*":"//; s/"$//' | sort | uniq -c |
	    sort -rn | awk '{printf "%s%s %d", (NR > 1 ? ", " : ""), $2, $1}'
}
w=$(tally '"lvl":"\(warn\|error\)","ev":"[a-z_.]*"')
echo "egressd:   log warnings and errors: ${w:-none}; proxy.closed reasons (the log aggregates): $(tally '"ev":"proxy.closed","decision":"[a-z_]*","reason":"[a-z_]*"')"
awk -F, -v warm="$WARM" -v dur="$DUR" -v rss0="$RSS0" -v fds0="$FDS0" -v hwm="${HWM:-0}" '
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR > 1 { t[++n] = $1; r[n] = $2; f[n] = $3; last_t = $1 }
END {
	for (i = 1; i <= n; i++) {
		if (t[i] >= warm && t[i] < 2 * warm) { br[++nb] = r[i]; bf[nb] = f[i] }
		if (t[i] > last_t - warm) { lr[++nl] = r[i]; lf[nl] = f[i] }
		if (r[i] > pr) { pr = r[i]; prt = t[i] }
		if (f[i] > pf) { pf = f[i]; pft = t[i] }
		if (t[i] >= warm) { m++; sx += t[i]; sy += r[i]; sxx += t[i] * t[i]; sxy += t[i] * r[i]; sz += f[i]; sxz += t[i] * f[i] }
	}
	b_r = median(br, nb); b_f = median(bf, nb); l_r = median(lr, nl); l_f = median(lf, nl)
	den = m * sxx - sx * sx
	sl_r = den ? (m * sxy - sx * sy) / den * 60 : 0
	sl_f = den ? (m * sxz - sx * sz) / den * 60 : 0
	g_r = l_r - b_r; g_f = l_f - b_f
	lim_r = b_r * 0.10; if (lim_r < 4096) lim_r = 4096
	lim_f = b_f * 0.20; if (lim_f < 16) lim_f = 16
	v_r = g_r <= lim_r ? "flat" : "GROWING"; v_f = g_f <= lim_f ? "flat" : "GROWING"
	peak = pr > hwm ? pr : hwm
	conns = (pf - fds0) / 2; if (conns < 0) conns = 0
	bound = rss0 + 16384 + 60 * conns
	printf "samples:   %d (one a second)\n", n
	printf "rss_kb:    start %d, baseline %d (median of t=%d-%d s), peak %d at t=%d s (VmHWM %d), last %d (median of the last %d s): growth %+d KiB (flat up to %d), slope %+.0f KiB/min -> %s\n",
	    rss0, b_r, warm, 2 * warm - 1, pr, prt, hwm, l_r, warm, g_r, lim_r, sl_r, v_r
	printf "fds:       start %d, baseline %d, peak %d at t=%d s, last %d: growth %+d (flat up to %d), slope %+.1f /min -> %s\n",
	    fds0, b_f, pf, pft, l_f, g_f, lim_f, sl_f, v_f
	printf "bound:     start %d KiB + 16 MiB + 60 KiB x %d connections (peak descriptors over start, two a connection) = %d KiB; peak %d KiB -> %s\n",
	    rss0, conns, bound, peak, peak <= bound ? "under" : "OVER"
	print (v_r == "flat" && v_f == "flat" && peak <= bound) ? "memok" : "membad" > "/dev/stderr"
}' "$CSV" 2>"$DIR/memverdict"
grep -q memok "$DIR/memverdict" || rc=2

# --- the secret scan ----------------------------------------------------------------
# the 12-character runs of every form, one file per form in $DIR/pats.d,
# all of them in $DIR/pats
mkdir -p "$DIR/pats.d"
"$PY" - "$SECRET" "$DIR/pats.d" <<'EOF'
import base64, sys
v, d = sys.argv[1].encode(), sys.argv[2]
forms = {"raw": v, "hex": v.hex().encode(), "HEX": v.hex().upper().encode()}
for a in range(3):
    core = v[a:a + 3 * ((len(v) - a) // 3)]  # v[a] starts a base64 group
    forms["b64.%d" % a] = base64.b64encode(core)
    forms["b64url.%d" % a] = base64.urlsafe_b64encode(core)
for name, f in forms.items():
    with open("%s/%s" % (d, name), "w") as out:
        out.write("".join(f[i:i + 12].decode() + "\n" for i in range(len(f) - 11)))
EOF
sort -u "$DIR"/pats.d/* >"$DIR/pats"
npats=$(wc -l <"$DIR/pats")
files=("$OUT"/* "$DIR/www/dl")
bytes=$(cat "${files[@]}" | wc -c)
# count PATS FILE: matches of PATS in FILE as received plus with CR/LF
# removed
count()
{
	echo $(($(LC_ALL=C grep -aoF -f "$1" "$2" | wc -l) +
	    $(tr -d '\r\n' <"$2" | LC_ALL=C grep -aoF -f "$1" | wc -l)))
}
hits=0
for f in "${files[@]}"; do
	h=$(count "$DIR/pats" "$f")
	[ "$h" -gt 0 ] && echo "  hits: $h in ${f#"$DIR"/}"
	hits=$((hits + h))
done
byform=
if [ "$hits" -gt 0 ]; then
	for p in "$DIR"/pats.d/*; do
		h=0
		for f in "${files[@]}"; do
			h=$((h + $(count "$p" "$f")))
		done
		byform+=" ${p##*/} $h,"
	done
fi
loghits=$(LC_ALL=C grep -aoF -f "$DIR/pats" "$DIR/egressd.log" "$DIR/egressd.out" | wc -l)
echo "secret:    ${#SECRET} characters; $npats 12-character runs of it (raw, base64 and base64url at 3 alignments, hex lower/upper)"
echo "scan:      ${#files[@]} files, $bytes bytes the clients received (downloads by hash), as received and with CR/LF removed: $hits hits; egressd's log: $loghits hits"
[ -n "$byform" ] && echo "by form:  ${byform%,} (a run may belong to two forms)"
[ "$hits" -gt 0 ] && rc=1
# a load that did not run proves nothing
wsec=$(sed -n 's/.*"with_secret": *\([0-9]*\).*/\1/p' <<<"$ostats")
if [ "${wsec:-0}" -eq 0 ] || [ "$t200" -eq 0 ] || [ "${okdl:-0}" -eq 0 ] ||
    ! grep -q 'Queries completed' "$OUT/dns.out"; then
	echo "a load did not run (origin saw the secret ${wsec:-0} times, $t200 echoes, ${okdl:-0} downloads)"
	[ "$rc" -eq 0 ] && rc=3
fi
[ -n "${BENCH_KEEP:-}" ] && echo "kept: $DIR (samples.csv, out/)"
echo "result:    $([ "$rc" -eq 0 ] && echo ok || echo "FAILED (exit $rc)")"
exit "$rc"
