# bench_lib.sh: what the namespace benchmarks share. bench_init NAME TAG
# sets NAME (for messages), UP, SBX (namespace names TAGu-PID, TAGs-PID),
# UP_IP, SBX_IP and DIR (a fresh /tmp/egressd-NAME.XXXXXX); a benchmark may
# instead set them itself before sourcing this file.
# bench_pair builds the two throwaway namespaces joined by one veth (and
# nothing else); bench_cleanup, trapped on exit, kills what the benchmark
# started (PIDS, by PID) and removes both namespaces and DIR.
PIDS=()

die() { echo "$NAME: $*" >&2; exit 1; }

bench_init()
{
	NAME=$1
	UP=$2u-$$
	SBX=$2s-$$
	UP_IP=198.51.100.1
	SBX_IP=198.51.100.2
	DIR=$(mktemp -d "/tmp/egressd-${NAME//_/-}.XXXXXX") ||
	    die "mktemp"
}

# bench_pki CN: a throwaway CA ($DIR/ca.{key,crt}, subject CN) and the
# origin's leaf for *.bench.test from it ($DIR/o.{key,crt}); the CA also
# in $DIR/trust/ (egressd's --trust-dir).
bench_pki()
{
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$DIR/ca.key" -out "$DIR/ca.crt" -days 2 -subj "/CN=$1" \
	    -addext "basicConstraints=critical,CA:TRUE" \
	    -addext "keyUsage=critical,keyCertSign" 2>/dev/null || die "CA"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$DIR/o.key" -out "$DIR/o.csr" -subj "/CN=bench.test" \
	    2>/dev/null
	printf 'subjectAltName=DNS:*.bench.test\nbasicConstraints=CA:FALSE\n' \
	    >"$DIR/o.ext"
	openssl x509 -req -in "$DIR/o.csr" -CA "$DIR/ca.crt" \
	    -CAkey "$DIR/ca.key" -set_serial 7 -days 2 -extfile "$DIR/o.ext" \
	    -out "$DIR/o.crt" 2>/dev/null || die "origin cert"
	mkdir -p "$DIR/trust" && cp "$DIR/ca.crt" "$DIR/trust/"
}

bench_need_root()
{
	[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces)"
	[ -x "$EGRESSD_BIN" ] || die "EGRESSD_BIN not executable: $EGRESSD_BIN"
}

# The policy both resolver benchmarks run egressd with (allow
# *.bench.test, deny the rest) in $DIR/policy.yaml, and $DIR/rules.
bench_policy_file()
{
	mkdir -p "$DIR/rules"
	cat >"$DIR/policy.yaml" <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: "*.bench.test"}
EOF
	chmod 600 "$DIR/policy.yaml"
}

# The upstream of the resolver benchmarks: dnsmasq in $UP answering
# *.bench.test with 203.0.113.7 (TTL 300, no cache), in PIDS.
bench_upstream()
{
	ip netns exec "$UP" dnsmasq --keep-in-foreground --no-daemon --no-resolv \
	    --no-hosts --no-poll --user=root --group=root --pid-file= \
	    --bind-interfaces --listen-address="$UP_IP" --port=53 \
	    --address=/bench.test/203.0.113.7 --local-ttl=300 --cache-size=0 \
	    --log-facility=/dev/null >"$DIR/up.err" 2>&1 &
	PIDS+=($!)
}

# bench_wait_ready PID [SECONDS]: egressd (PID, started in the background
# with --log-file $DIR/egressd.log, output in $DIR/egressd.out) is ready
# within SECONDS (default 10), or the benchmark dies saying why; PID goes
# into PIDS.
bench_wait_ready()
{
	local i
	PIDS+=("$1")
	for i in $(seq $((${2:-10} * 10))); do
		grep -q '"ev":"egressd.ready"' "$DIR/egressd.log" 2>/dev/null &&
		    return 0
		kill -0 "$1" 2>/dev/null ||
		    die "egressd exited: $(tail -3 "$DIR/egressd.out")"
		sleep 0.1
	done
	die "egressd not ready: $(tail -3 "$DIR/egressd.out" "$DIR/egressd.log" 2>/dev/null)"
}

# bench_forget_pid PID: PID (waited for) leaves PIDS, so the cleanup never
# signals whatever process reuses the number.
bench_forget_pid()
{
	local p keep=()
	for p in "${PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}

bench_cleanup()
{
	local p
	for p in "${PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	ip netns del "$SBX" 2>/dev/null
	ip netns del "$UP" 2>/dev/null
	rm -rf "$DIR"
}

bench_pair()
{
	trap bench_cleanup EXIT INT TERM
	ip netns add "$UP" || die "ip netns add"
	ip netns add "$SBX" || die "ip netns add"
	ip -n "$SBX" link add vb0 type veth peer name vb1 netns "$UP" ||
	    die "veth"
	ip -n "$SBX" addr add "$SBX_IP/24" dev vb0
	ip -n "$UP" addr add "$UP_IP/24" dev vb1
	local ns
	for ns in "$SBX" "$UP"; do
		ip -n "$ns" link set lo up
	done
	ip -n "$SBX" link set vb0 up
	ip -n "$UP" link set vb1 up
}
