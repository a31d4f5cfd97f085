#!/bin/bash
# daemon_commit_queue: policy changes wait their turn in one queue (FIFO) while
# the slow part of each (the decide, the file's write and fsync) runs off
# the event loop. A big PATCH (4,000 rules) with small PATCHes and a
# SIGHUP reload behind it: every one answered 200 once in force, none
# lost, none interleaved (each decided against what the one before put in
# force), the revision moved once per change. A client that leaves while
# its change is in progress or queued: the change still goes through and
# the daemon carries on (its answer goes nowhere; ASan would see a freed
# connection used). SIGTERM with a change in flight (sent the moment the
# big change's bytes are in the temp file the commit renames into place,
# so it really is in flight, never "stopped before any request"):
# egressd stops in time with status 0, and the file holds the change
# whole or not at all; the ones queued behind it are cancelled or done,
# never half.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

TB_EGRESSD_TOKEN=tok-$RANDOM$RANDOM
tok=$TB_DIR/token
printf '%s\n' "$TB_EGRESSD_TOKEN" >"$tok"
pol=$(tb_policy_file policy.yaml <<'EOF2'
defaultAction: deny
egress:
  - {action: allow, target: a.test}
EOF2
)
URL="http://$TB_SBX_HOST_IP4:18080"
api() { tb_host_api "$1" "$URL$2" "${3-}"; } # METHOD PATH [BODY]
metric() { # NAME -> value
	api GET /metrics >/dev/null
	sed -n "s/^$1 \([0-9]*\)$/\1/p" "$TB_DIR/api.out"
}
# big N FILE: a PATCH body of 4,000 /128 deny rules in 2001:db8:N::/48.
big() {
	{
		printf '['
		for i in $(seq 1 4000); do
			[ "$i" -gt 1 ] && printf ','
			printf '{"action":"deny","target":"2001:db8:%s::%x/128"}' \
			    "$1" "$i"
		done
		printf ']'
	} >"$2"
}
in_policy() { api GET /policy >/dev/null && grep -qF -- "$1" "$TB_DIR/api.out"; }
wait_in_policy() { tb_wait_cmd 10 in_policy "$1"; } # TEXT: up to 10 s

# Three big changes of 4,000 rules each: no cap on rules.
tb_start_egressd --policy "$pol" --api-token-file "$tok" --http-addr ":18080" \
    --max-rules 0
big 1 "$TB_DIR/big1.json"
big 2 "$TB_DIR/big2.json"
big 3 "$TB_DIR/big3.json"

# --- FIFO: a big PATCH, eight small ones and a SIGHUP behind it ----------
N=8
rev0=$(metric egressd_policy_revision)
m=$(tb_log_mark "$TB_EGRESSD_LOG")
tb_host bash -c '
patch() { curl -sS --max-time 20 -o /dev/null -w "%{http_code}\n" -X PATCH \
    -H "OPENSANDBOX-EGRESS-AUTH: '"$TB_EGRESSD_TOKEN"'" --data-binary "$1" \
    "'"$URL"'/policy"; }
patch @'"$TB_DIR"'/big1.json &
sleep 0.02
for i in $(seq 1 '"$N"'); do
	patch "[{\"action\":\"allow\",\"target\":\"q$i.a.test\"}]" &
done
wait' >"$TB_DIR/fifo.codes" 2>&1 &
fifo=$!
sleep 0.05
kill -HUP "$TB_EGRESSD_PID"
wait "$fifo"
tb_expect_eq "the big PATCH and $N small ones: all 200" "$((N + 1))" \
    "$(grep -c '^200$' "$TB_DIR/fifo.codes")"
tb_check "the SIGHUP reload went through too" tb_wait_log_line --since "$m" \
    --timeout 10 "$TB_EGRESSD_LOG" policy.loaded trigger=sighup
missing=0
api GET /policy >/dev/null
for i in $(seq 1 "$N"); do
	grep -qF "q$i.a.test" "$TB_DIR/api.out" || missing=$((missing + 1))
done
tb_expect_eq "every small PATCH is in force (none lost to a stale base)" \
    0 "$missing"
tb_expect_eq "and the big one, whole" 4000 \
    "$(grep -o '2001:db8:1::[0-9a-f]*/128' "$TB_DIR/api.out" | sort -u |
        wc -l)"
tb_expect_eq "the revision moved once per change ($N + 1 PATCHes, 1 reload)" \
    "$((rev0 + N + 2))" "$(metric egressd_policy_revision)"
tb_expect_eq "the file holds every PATCH" "$((N + 4000))" \
    "$(grep -cE 'q[0-9]+\.a\.test|2001:db8:1::' "$pol")"
tb_expect_eq "revisions put in force in order, each once" \
    "$(seq -s ' ' $((rev0 + 1)) $((rev0 + N + 2))) " \
    "$(tail -c +"$((m + 1))" "$TB_EGRESSD_LOG" |
        grep -oE '"ev":"policy\.(updated|loaded)".*' |
        grep -oE '"revision":[0-9]+' | sed 's/.*://' | tr '\n' ' ')"

# --- clients that leave --------------------------------------------------
# Each sends its whole request and closes at once: the big one leaves
# while its change is decided, the small one while it waits behind it.
m=$(tb_log_mark "$TB_EGRESSD_LOG")
leave() { # BODY-FILE
	tb_host python3 - "$TB_SBX_HOST_IP4" "$TB_EGRESSD_TOKEN" "$1" <<'PY'
import socket, sys
host, tok, path = sys.argv[1], sys.argv[2], sys.argv[3]
body = open(path, 'rb').read()
head = ('PATCH /policy HTTP/1.1\r\nHost: x\r\n'
        'OPENSANDBOX-EGRESS-AUTH: %s\r\nContent-Length: %d\r\n\r\n'
        % (tok, len(body))).encode()
s = socket.create_connection((host, 18080))
s.sendall(head + body)
s.close()
PY
}
printf '[{"action":"allow","target":"gone.a.test"}]' >"$TB_DIR/small.json"
leave "$TB_DIR/big2.json"
leave "$TB_DIR/small.json"
tb_check "the change of the client that left mid-decide is in force" \
    wait_in_policy "2001:db8:2::fa0/128"
tb_check "and the one queued behind it" wait_in_policy gone.a.test
tb_assert_log --since "$m" --min 2 --max 2 "$TB_EGRESSD_LOG" api.request \
    method=PATCH path=/policy status=200
tb_expect_eq "the API still answers" 200 "$(api GET /healthz)"
tb_expect_eq "a.test still resolves" "$TB_ORIGIN_A4" "$(tb_resolve_a a.test)"

# --- SIGTERM with a change in flight and more queued -----------------------
# Each client's status in a file of its own (000: no answer at all).
tb_host bash -c '
patch() { curl -s --max-time 20 -o /dev/null -w "%{http_code}" -X PATCH \
    -H "OPENSANDBOX-EGRESS-AUTH: '"$TB_EGRESSD_TOKEN"'" --data-binary "$1" \
    "'"$URL"'/policy" >"'"$TB_DIR"'/term.$2" 2>/dev/null; }
patch @'"$TB_DIR"'/big3.json 0 &
sleep 0.01
for i in 1 2 3; do
	patch "[{\"action\":\"allow\",\"target\":\"t$i.a.test\"}]" $i &
done
wait' &
cl=$!
pid=$TB_EGRESSD_PID
# The worker prepares the new file as $pol.tmp.<pid>; the commit renames
# it into place: while it holds big3's rules, big3 is in flight.
if tb_check "SIGTERM lands while the big change is in flight" \
    "$TB_PY" - "$pol.tmp.$pid" "$pid" <<'PY'
import os, signal, sys, time
tmp, pid = sys.argv[1], int(sys.argv[2])
end = time.time() + 15
while time.time() < end:
    try:
        with open(tmp, "rb") as f:
            if b"2001:db8:3::" in f.read():
                os.kill(pid, signal.SIGTERM)
                print("SIGTERM with big3 in", tmp)
                sys.exit(0)
    except FileNotFoundError:
        pass
    time.sleep(0.001)
print("big3 never seen in", tmp)
sys.exit(1)
PY
then
	tb_stop_egressd 0	# signalled already: wait for it
else
	tb_stop_egressd TERM
fi
wait "$cl"
tb_expect_eq "egressd stopped on SIGTERM with status 0" 0 "$TB_EGRESSD_STATUS"
tb_check_fails "no sanitizer report" grep -qE \
    'ERROR: (Address|Leak)Sanitizer|runtime error:' "$TB_DIR/egressd/stderr"
n3=$(grep -c '2001:db8:3::' "$pol")
tb_check "the file holds the change in flight whole or not at all ($n3)" \
    test "$n3" -eq 0 -o "$n3" -eq 4000
# The small ones may have arrived before the big one (its body takes
# longer): which of them made it is the arrival order's, not ours.
tb_check "the file is a whole policy egressd loads" \
    "$EGRESSD_BIN" --check --max-rules 0 --policy "$pol" \
    --rules-dir "$TB_DIR/egressd/rules"
codes=$(for i in 0 1 2 3; do printf '%s ' "$(cat "$TB_DIR/term.$i")"; done)
tb_check "each client got 200, 500 or no answer ($codes)" \
    test -z "$(printf '%s\n' $codes | grep -vxE '200|500|000')"
b=$(cat "$TB_DIR/term.0")
tb_check "the big one's answer (${b:-none}) says what the file holds ($n3)" \
    test "$b" = 000 -o "$b:$n3" = 200:4000 -o "$b:$n3" = 500:0
tb_check_fails "no temp file left behind" \
    compgen -G "$pol.tmp.$pid"
tb_finish
