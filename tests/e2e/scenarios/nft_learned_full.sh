#!/bin/bash
# nft_learned_full: a learned set that is full evicts its least recently
# learned elements instead of failing DNS. With a size of 16
# (EGRESSD_LEARNED_MAX; --learned-max is the flag) and 40
# allowed names, each on its own IPv4 and IPv6 address, every answer is
# NOERROR (no SERVFAIL once the sets are full), the newest addresses are
# open, the oldest are evicted (closed until asked again), and /metrics
# shows the fill level.
set -u -o pipefail
. "$(dirname "$0")/../lib/testbed.sh"
tb_setup
tb_host_setup

N=40
CAP=16
# Names n1..n40.many.test, each on 203.0.113.(200+i) and 2001:db8:2::2:i,
# served by dns2; the addresses live on the internet side's loopback so a
# ping from the sandbox proves a learned address is open.
conf=$TB_DIR/many.conf
for i in $(seq "$N"); do
	echo "host-record=n$i.many.test,203.0.113.$((200 + i)),2001:db8:2::2:$i"
	tb_net ip addr add "203.0.113.$((200 + i))/32" dev lo
	tb_net ip addr add "2001:db8:2::2:$i/128" dev lo nodad
done >"$conf"
tb_dns_start dns2 "$TB_DNS2_IP4" -- --conf-file="$conf" --local-ttl=300

tok=tok-$RANDOM$RANDOM
printf '%s\n' "$tok" >"$TB_DIR/token"
pol=$(tb_policy_file policy.yaml <<'EOF'
defaultAction: deny
egress:
  - {action: allow, target: "*.many.test"}
EOF
)
# The size knob by its environment variable (--learned-max is the flag).
TB_EGRESSD_ENV=(EGRESSD_LEARNED_MAX=$CAP)
tb_start_egressd --policy "$pol" --dns-upstream "$TB_DNS2_IP4" \
    --api-token-file "$TB_DIR/token" --http-addr ":18080"
api=http://$TB_SBX_HOST_IP4:18080

# resolve NAME TYPE: the answer's status and addresses, one line.
resolve()
{
	tb_sandbox dig +time=3 +tries=1 "$1" "$2" |
	    awk '/status:/ { sub(",", "", $6); st = $6 }
	         $4 == "'"$2"'" { a = a " " $5 }
	         END { print st a }'
}
opens() # FAMILY ADDR: a ping from the sandbox gets an answer
{
	tb_sandbox ping -n "-$1" -c 1 -W 2 "$2" >/dev/null 2>&1
}
closed() # FAMILY ADDR: no answer (the deny chain rejects it)
{
	! tb_sandbox ping -n "-$1" -c 1 -W 1 "$2" >/dev/null 2>&1
}

# --- learning past the size: every answer still comes -----------------------------
bad=0
for i in $(seq "$N"); do
	got4=$(resolve "n$i.many.test" A)
	got6=$(resolve "n$i.many.test" AAAA)
	[ "$got4" = "NOERROR 203.0.113.$((200 + i))" ] || {
		bad=$((bad + 1))
		echo "n$i A: $got4"
	}
	[ "$got6" = "NOERROR 2001:db8:2::2:$i" ] || {
		bad=$((bad + 1))
		echo "n$i AAAA: $got6"
	}
done >"$TB_DIR/answers"
tb_expect_eq "all $((2 * N)) answers NOERROR with their address (no SERVFAIL)" \
    0 "$bad"
[ "$bad" = 0 ] || cat "$TB_DIR/answers"
tb_assert_no_log "$TB_EGRESSD_LOG" dns.learn_failed

# --- the newest are open, the oldest evicted ---------------------------------------
for i in $N $((N - 1)) $((N - CAP + 1)); do
	tb_check "n$i (among the newest $CAP) is open over IPv4" \
	    opens 4 "203.0.113.$((200 + i))"
	tb_check "and over IPv6" opens 6 "2001:db8:2::2:$i"
done
tb_check "n1 (least recently learned) was evicted: IPv4 closed" \
    closed 4 203.0.113.201
tb_check "IPv6 closed" closed 6 2001:db8:2::2:1
tb_check "learned4 holds at most $CAP elements" bash -c \
    "test \$(ip netns exec $TB_SBX nft -j list set inet egressd learned4 |
      grep -o '203\\.0\\.113\\.2[0-9][0-9]' | wc -l) -le $CAP"

# --- asked again, an evicted name is learned again --------------------------------
tb_expect_eq "n1 resolves again" "NOERROR 203.0.113.201" \
    "$(resolve n1.many.test A)"
tb_check "and its address is open again" opens 4 203.0.113.201

# --- the fill level in /metrics -----------------------------------------------------
tb_host curl -sS --max-time 5 -H "Authorization: Bearer $tok" \
    "$api/metrics" >"$TB_DIR/metrics"
val() { awk -v s="$1" '$1 == s { print $2 }' "$TB_DIR/metrics"; }
tb_expect_eq "learned4 fill level is the cap" "$CAP" \
    "$(val 'egressd_nft_learned_set_elements{set="learned4"}')"
tb_expect_eq "learned6 too" "$CAP" \
    "$(val 'egressd_nft_learned_set_elements{set="learned6"}')"
tb_expect_eq "the capacity is --learned-max" "$CAP" \
    "$(val egressd_nft_learned_set_capacity)"
tb_check "evictions counted (>= $((2 * (N - CAP))))" test \
    "$(val egressd_nft_learned_evicted_total)" -ge $((2 * (N - CAP)))
tb_check "transactions counted" test \
    "$(val egressd_nft_learn_transactions_total)" -ge 1
tb_finish
