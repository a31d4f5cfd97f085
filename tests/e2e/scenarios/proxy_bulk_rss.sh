#!/bin/bash
# proxy_bulk_rss: a 1 GiB download through egressd keeps its memory flat
# (issue 17: "a 1 GiB download with flat RSS"), on the two paths that
# move bulk bytes: pass-through (splice through a pipe) and a terminated
# connection whose request was injected (TLS both ways, every byte through
# the vault's streaming redactor). egressd's VmRSS is sampled every 50 ms
# during each download; the bound is the proxy's per-connection queues
# (PROXY_HIGH_WM each way) plus allocator slack: 16 MiB over the RSS
# before. Under ASan (whose quarantine keeps freed memory on purpose) the
# downloads are 64 MiB and only their bytes are checked.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup

mkdir -p "$TB_DIR/trust"
cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem"
printf 'real-bulk-secret-%s\n' "$RANDOM$RANDOM" >"$TB_DIR/egressd/key-k"
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
    match: {hosts: [a.test], paths: ["/api/*"]}
    auth: {type: bearer, credential: k}
EOF2
)
STATE=$TB_DIR/state
# the proxy's splice path is the subject: pass-through judged in flight
# never reaches egressd's memory (proxy_inflight_judge)
tb_start_egressd --policy "$pol" --proxy --trust-dir "$TB_DIR/trust" \
    --state-dir "$STATE" --passthrough-judge proxy
cat "$STATE/ca-bundle.crt" "$TB_CA_CERT" >"$TB_DIR/both.pem"
chmod 644 "$TB_DIR/both.pem"

SIZE=$((1 << 30))
CHECK_RSS=1
if [ -n "${ASAN_OPTIONS:-}" ]; then
	SIZE=$((64 << 20))
	CHECK_RSS=0
fi
BOUND_KB=$((16 << 10))
rss() { awk '/^VmRSS/ {print $2}' "/proc/$TB_EGRESSD_PID/status"; }

# bulk LABEL URL: downloads URL in the sandbox while sampling egressd's
# RSS; prints "bytes rss_before_kb rss_max_kb"
bulk() {
	local label=$1 url=$2 pid before max r
	before=$(rss)
	tb_sandbox curl -sS --max-time 150 --cacert "$TB_DIR/both.pem" \
	    -H 'Authorization: Bearer fake-key' -o /dev/null \
	    -w '%{size_download}' "$url" >"$TB_DIR/$label.size" 2>"$TB_DIR/$label.err" &
	pid=$!
	max=$before
	while kill -0 "$pid" 2>/dev/null; do
		r=$(rss)
		[ -n "$r" ] && [ "$r" -gt "$max" ] && max=$r
		sleep 0.05
	done
	wait "$pid"
	echo "$(cat "$TB_DIR/$label.size") $before $max"
}

# warm both paths first (TLS contexts, leaf cache, pool, allocator)
tb_sandbox curl -sS -o /dev/null --max-time 10 --cacert "$TB_DIR/both.pem" \
    "https://b.test/warm?bytes=4194304"
tb_sandbox curl -sS -o /dev/null --max-time 10 --cacert "$TB_DIR/both.pem" \
    -H 'Authorization: Bearer fake-key' "https://a.test/api/warm?bytes=4194304"

for path in pass:https://b.test/bulk inject:https://a.test/api/bulk; do
	label=${path%%:*}
	read -r got before max <<<"$(bulk "$label" "${path#*:}?bytes=$SIZE")"
	tb_expect_eq "$label: every byte of $SIZE" "$SIZE" "$got"
	tb_log "$label: egressd RSS ${before} KiB before, at most ${max} KiB during"
	if [ "$CHECK_RSS" = 1 ]; then
		tb_check "$label: RSS flat (at most $BOUND_KB KiB over the start)" \
		    test "$((max - before))" -le "$BOUND_KB"
	fi
done
tb_assert_log "$TB_EGRESSD_LOG" vault.inject decision=injected path=/api/bulk
tb_assert_log "$TB_EGRESSD_LOG" proxy.closed decision=passthrough name=b.test
tb_finish
