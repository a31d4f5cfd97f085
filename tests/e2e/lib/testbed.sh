# shellcheck shell=bash
# testbed.sh: the end-to-end test bed of egressd. Sourced by every scenario
# in tests/e2e/scenarios/. See docs/testing.md for the story, the address
# plan and the readiness contract egressd must meet.
#
#   sbx-<id>   the sandbox: egressd (root) and the workload (an unprivileged
#              uid, no capabilities) share it, as in a pod
#   net-<id>   the "internet": upstream DNS (dnsmasq), HTTP/HTTPS origins,
#              TCP/UDP echo, ICMP; reachable from sbx over ONE veth pair
#   host-<id>  optional (tb_host_setup): the node/kubelet, a second veth
#              into sbx, for inbound probes to the pod
#
# None of them is connected to the root namespace; sbx's only default route
# is the veth peer in net-<id>, which has no route anywhere else.
#
# A scenario reads:
#   . "$(dirname "$0")/../lib/testbed.sh"
#   tb_setup
#   tb_check "curl a.test" tb_sandbox curl -sf https://a.test/
#   tb_finish
# tb_setup installs a trap that kills every process it started (by PID,
# only processes inside our own namespaces) and deletes the namespaces on
# every exit path. A scenario must not install its own EXIT/INT/TERM trap.

TB_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TB_SERVERS_DIR=$(cd "$TB_LIB_DIR/../servers" && pwd)
# The system interpreter, so the unprivileged sandbox uid can run it too.
TB_PY=/usr/bin/python3

# --- bounds (seconds) -------------------------------------------------------
TB_POLL=0.02			# polling interval of every wait
TB_WAIT_DEFAULT=5		# default bound of tb_wait_*
TB_SETUP_WAIT=5			# servers must be ready within this
TB_STOP_WAIT=3			# SIGTERM grace before SIGKILL at teardown
: "${TB_EGRESSD_READY_TIMEOUT:=10}"
: "${TB_EGRESSD_STOP_TIMEOUT:=5}"

# --- address plan (docs/testing.md) ----------------------------------------
TB_SBX_IP4=198.51.100.2
TB_SBX_IP6=2001:db8:1::2
TB_NET_IP4=198.51.100.1		# sbx's gateway; also dns1
TB_NET_IP6=2001:db8:1::1
TB_DNS1_IP4=198.51.100.1
TB_DNS1_IP6=2001:db8:1::1
TB_DNS2_IP4=198.51.100.3	# a second resolver (failover tests)
TB_DNS2_IP6=2001:db8:1::3
TB_ORIGIN_A4=203.0.113.10	# a.test
TB_ORIGIN_A6=2001:db8:2::10
TB_ORIGIN_B4=203.0.113.11	# b.test
TB_ORIGIN_B6=2001:db8:2::11
TB_ORIGIN_C4=203.0.113.12	# c.test, shared-a.test, shared-b.test
TB_ORIGIN_C6=2001:db8:2::12
TB_RESOLVER_X4=203.0.113.53	# a "public resolver" address: echo on 53
TB_RESOLVER_X6=2001:db8:2::53
TB_META4=169.254.169.254	# metadata service, inside net-<id> only
TB_HOST_IP4=192.0.2.1		# host-<id> side of the second veth
TB_HOST_IP6=2001:db8:3::1
TB_SBX_HOST_IP4=192.0.2.2	# sbx side of the second veth (the pod IP)
TB_SBX_HOST_IP6=2001:db8:3::2
TB_ORIGINS="$TB_ORIGIN_A4 $TB_ORIGIN_B4 $TB_ORIGIN_C4 $TB_ORIGIN_A6 \
$TB_ORIGIN_B6 $TB_ORIGIN_C6"
TB_HTTP_PORTS="80 8080"
TB_HTTPS_PORTS="443 8443"
TB_ECHO_TCP_PORTS="7 53 853 9000"
TB_ECHO_UDP_PORTS="7 53 443 853"
: "${TB_DNS_TTL:=30}"		# TTL of the test zone (short.test: 2 s)
: "${TB_SBX_USER:=egressd-sbx}"
: "${TB_SBX_IPV6_ONLY:=0}"	# 1: sbx has no IPv4 beyond loopback
# 0: tb_start_egressd adds no canary secrets (a scenario sets it, with a
# one-line reason, when its egressd cannot take them: docs/testing.md)
: "${TB_CANARY:=1}"

# --- results ----------------------------------------------------------------
TB_PASS=0
TB_FAIL=0
TB_FAILED=()
TB_PIDS=()
TB_UP=0
TB_FINISHED=0

tb_log() { printf '%s\n' "tb: $*" >&2; }

tb_pass()
{
	TB_PASS=$((TB_PASS + 1))
	printf 'ok %d - %s\n' "$((TB_PASS + TB_FAIL))" "$*"
}

tb_fail()
{
	TB_FAIL=$((TB_FAIL + 1))
	TB_FAILED+=("$*")
	printf 'not ok %d - %s\n' "$((TB_PASS + TB_FAIL))" "$*"
}

# Fatal error in the bed or the scenario itself: the trap tears down.
tb_die()
{
	printf 'tb: FATAL: %s\n' "$*" >&2
	TB_FAIL=$((TB_FAIL + 1))
	TB_FAILED+=("FATAL: $*")
	exit 1
}

# tb_sbx_tool NAME...: tests/e2e/tools/NAME into the sandbox's own bin
# directory ($TB_DIR/sbx-bin, first on its PATH), readable and runnable
# by the sandbox user; fatal when one cannot be copied.
tb_sbx_tool()
{
	local t
	mkdir -p "$TB_DIR/sbx-bin" && chmod 755 "$TB_DIR/sbx-bin" ||
	    tb_die "sbx-bin"
	for t in "$@"; do
		cp "$TB_LIB_DIR/../tools/$t" "$TB_DIR/sbx-bin/" &&
		    chmod 755 "$TB_DIR/sbx-bin/$t" ||
		    tb_die "cannot copy tool $t into the sandbox"
	done
}

tb_skip()
{
	printf 'SKIP: %s\n' "$*"
	exit 77
}

# tb_finish: print "N passed, M failed" and exit (1 on any failure, and 1
# when the scenario checked nothing: one that checks nothing cannot fail).
# Only the scenario's own checks count for that: the canary sweep and the
# clean stop below pass in every bed, whatever the scenario did.
tb_finish()
{
	local own=$TB_PASS
	TB_FINISHED=1
	tb_canary_sweep --live tb__stop_egressd_at_exit
	if [ "${TB_EGRESSD_PID:-}" ]; then
		tb__stop_egressd_at_exit
	fi
	[ "$own" -gt 0 ] || tb_fail "the scenario checked nothing of its own"
	tb__summary
	if [ "$TB_FAIL" -gt 0 ]; then
		exit 1
	fi
	exit 0
}

tb__summary()
{
	local f
	for f in "${TB_FAILED[@]}"; do
		printf 'FAILED: %s\n' "$f"
	done
	printf '%d passed, %d failed\n' "$TB_PASS" "$TB_FAIL"
}

# tb_check DESC CMD...: pass when CMD exits 0. Output goes to $TB_OUT (and
# is shown on failure).
tb_check()
{
	local desc=$1 rc=0
	shift
	"$@" >"$TB_OUT" 2>&1 || rc=$?
	if [ "$rc" -eq 0 ]; then
		tb_pass "$desc"
	else
		tb_fail "$desc (exit $rc: $*)"
		tb__show_out
	fi
	return "$rc"
}

# tb_check_fails DESC CMD...: pass when CMD exits non-zero.
tb_check_fails()
{
	local desc=$1 rc=0
	shift
	"$@" >"$TB_OUT" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		tb_pass "$desc (exit $rc)"
		return 0
	fi
	tb_fail "$desc (unexpectedly succeeded: $*)"
	tb__show_out
	return 1
}

# tb_expect_no_secret DESC [--basic] KEYFILE FILE...: pass when no form of
# the credential whose value KEYFILE holds, nor any run of 12 characters
# of one, is in any FILE (what a client received); lib/secret_scan.py
# lists the forms (--basic: also the decoded "user:password" and the
# password). Findings name the form and the offset, never the value.
tb_expect_no_secret()
{
	local desc=$1
	shift
	tb_check "$desc" "$TB_PY" "$TB_LIB_DIR/secret_scan.py" "$@"
}

tb__show_out()
{
	if [ -s "$TB_OUT" ]; then
		head -c 2000 "$TB_OUT" | sed 's/^/#   /'
		echo
	fi
}

# tb_expect_eq DESC EXPECTED ACTUAL
tb_expect_eq()
{
	if [ "$2" == "$3" ]; then
		tb_pass "$1"
		return 0
	fi
	tb_fail "$1 (expected '$2', got '$3')"
	return 1
}

# tb_expect_match DESC ERE STRING
tb_expect_match()
{
	# A here-string, not a pipe: bash's printf writes line by line, and
	# when grep -q exits at an early line the next write gets SIGPIPE,
	# which pipefail turns into a false "does not match".
	if grep -Eq -- "$2" <<<"$3"; then
		tb_pass "$1"
		return 0
	fi
	tb_fail "$1 ('$(printf '%s' "$3" | head -c 300)' does not match /$2/)"
	return 1
}

# --- waits (bounded polling, never a fixed sleep) ---------------------------

# tb_wait_file FILE [TIMEOUT]
tb_wait_file()
{
	local f=$1 t=${2:-$TB_WAIT_DEFAULT} end
	end=$(tb__deadline "$t")
	while [ ! -e "$f" ]; do
		tb__expired "$end" && return 1
		sleep "$TB_POLL"
	done
	return 0
}

# tb_wait_port NS tcp|udp ADDR PORT [TIMEOUT]: until something listens.
# NS is a namespace name ($TB_SBX, $TB_NET, $TB_HOST).
tb_wait_port()
{
	local ns=$1 proto=$2 addr=$3 port=$4 t=${5:-$TB_WAIT_DEFAULT} end opt
	case $proto in
	tcp) opt=-Hltn ;;
	udp) opt=-Hlun ;;
	*) tb_die "tb_wait_port: bad protocol $proto" ;;
	esac
	case $addr in
	*:*) addr="[$addr]" ;;
	esac
	end=$(tb__deadline "$t")
	while ! ip netns exec "$ns" ss "$opt" "src $addr:$port" 2>/dev/null |
	    grep -q .; do
		tb__expired "$end" && return 1
		sleep "$TB_POLL"
	done
	return 0
}

# tb_wait_line FILE ERE [TIMEOUT]: until a line of a text file matches.
tb_wait_line()
{
	local f=$1 re=$2 t=${3:-$TB_WAIT_DEFAULT} end
	end=$(tb__deadline "$t")
	while ! grep -Eq -- "$re" "$f" 2>/dev/null; do
		tb__expired "$end" && return 1
		sleep "$TB_POLL"
	done
	return 0
}

# tb_wait_cmd TIMEOUT CMD...: until CMD (a command or a function) exits 0.
tb_wait_cmd()
{
	local end
	end=$(tb__deadline "$1")
	shift
	until "$@"; do
		tb__expired "$end" && return 1
		sleep "$TB_POLL"
	done
	return 0
}

# tb_wait_log_line [--since OFF] [--timeout S] [--pid PID] FILE EV [COND...]
# Until a JSON line with "ev":EV and every COND appears (COND syntax in
# lib/jsonlog.py: key=value, key!=value, key~regex, key, !key; dotted keys).
# Prints the matching line.
tb_wait_log_line()
{
	local opts=()
	while [ "${1:-}" != "${1#--}" ]; do
		opts+=("$1" "$2")
		shift 2
	done
	local f=$1
	shift
	"$TB_PY" "$TB_LIB_DIR/jsonlog.py" wait "$f" \
	    --timeout "$TB_WAIT_DEFAULT" "${opts[@]}" "$@"
}

# tb_log_mark FILE: current size, for --since (assert only on what follows).
tb_log_mark() { stat -c %s "$1" 2>/dev/null || echo 0; }

# tb_assert_log [--since OFF] [--min N] [--max N] FILE EV [COND...]
# Passes when at least one (or N..M) JSON line of FILE matches.
tb_assert_log()
{
	local opts=() n rc=0
	while [ "${1:-}" != "${1#--}" ]; do
		opts+=("$1" "$2")
		shift 2
	done
	local f=$1
	shift
	n=$("$TB_PY" "$TB_LIB_DIR/jsonlog.py" match "$f" "${opts[@]}" "$@") ||
	    rc=$?
	if [ "$rc" -eq 0 ]; then
		tb_pass "log $(basename "$f"): $* ($n)"
		return 0
	fi
	tb_fail "log $(basename "$f"): $* (${n:-?} lines, want ${opts[*]:-at least 1})"
	return 1
}

# tb_assert_no_log [--since OFF] FILE EV [COND...]: no line matches.
tb_assert_no_log()
{
	local opts=() n rc=0
	while [ "${1:-}" != "${1#--}" ]; do
		opts+=("$1" "$2")
		shift 2
	done
	local f=$1
	shift
	n=$("$TB_PY" "$TB_LIB_DIR/jsonlog.py" match "$f" "${opts[@]}" \
	    --min 0 --max 0 "$@") || rc=$?
	if [ "$rc" -eq 0 ]; then
		tb_pass "log $(basename "$f"): no $*"
		return 0
	fi
	tb_fail "log $(basename "$f"): no $* (found $n)"
	"$TB_PY" "$TB_LIB_DIR/jsonlog.py" show "$f" "${opts[@]}" "$@" |
	    head -n 5 | sed 's/^/#   /'
	return 1
}

# tb__now: milliseconds since boot into TB__NOW, from /proc/uptime (10 ms
# steps). A 5 s setup wait once gave up after 0.6 s in CI; the wall clock
# and date(1) were the two ways that could happen: a clock stepped forward
# (NTP) expires every wait, and a fork of date that fails under load reads
# as time 0, which expires it at once. A monotonic clock read by a builtin
# has neither, and an unreadable one is fatal, not "expired".
tb__now()
{
	local up rest
	read -r up rest </proc/uptime && [[ $up =~ ^[0-9]+\.[0-9]{2}$ ]] ||
	    tb_die "cannot read the monotonic clock (/proc/uptime: '${up-}')"
	TB__NOW=$((10#${up/./} * 10))
}

# tb__deadline SECONDS (may be fractional: 0.5): the tb__now millisecond at
# which a wait gives up.
tb__deadline()
{
	local sec=${1%%.*} frac=000
	case $1 in
	*.*) frac="${1#*.}000" ;;
	esac
	tb__now
	echo $((TB__NOW + ${sec:-0} * 1000 + 10#${frac:0:3}))
}

tb__expired()
{
	[[ $1 =~ ^[0-9]+$ ]] || tb_die "tb__expired: bad deadline '$1'"
	tb__now
	[ "$TB__NOW" -ge "$1" ]
}

# --- running things ---------------------------------------------------------

# tb_sandbox CMD...: run CMD in sbx as the unprivileged sandbox uid, with no
# capabilities (bounding set empty, no_new_privs so file capabilities such
# as ping's cap_net_raw are not granted either), a clean environment and
# $TB_SBX_HOME as working directory. The test CA is trusted through
# SSL_CERT_FILE / CURL_CA_BUNDLE; add variables with `tb_sandbox env K=V cmd`.
tb_sandbox() { "${TB_SBX_EXEC[@]}" "$@"; }

# tb_sandbox_bg OUTFILE CMD...: same, in the background; PID in TB_LAST_PID
# (killed at teardown).
tb_sandbox_bg()
{
	local out=$1
	shift
	"${TB_SBX_EXEC[@]}" "$@" >"$out" 2>&1 &
	TB_LAST_PID=$!
	TB_PIDS+=("$TB_LAST_PID")
}

# tb_sandbox_root CMD...: run CMD in sbx as root (inspection: nft list ...).
tb_sandbox_root() { ip netns exec "$TB_SBX" "$@"; }

# tb_net CMD...: run CMD in the internet namespace as root.
tb_net() { ip netns exec "$TB_NET" "$@"; }

# tb_net_bg OUTFILE CMD...: same, in the background; PID in TB_LAST_PID.
tb_net_bg()
{
	local out=$1
	shift
	ip netns exec "$TB_NET" "$@" >"$out" 2>&1 &
	TB_LAST_PID=$!
	TB_PIDS+=("$TB_LAST_PID")
}

# tb_host CMD...: run CMD in host-<id> as root (after tb_host_setup).
tb_host()
{
	[ "${TB_HOST:-}" ] || tb_die "tb_host before tb_host_setup"
	ip netns exec "$TB_HOST" "$@"
}

# tb_host_api METHOD URL [BODY]: the control API from the host namespace
# with TB_EGRESSD_TOKEN; prints the HTTP status, the body goes to
# $TB_DIR/api.out.
tb_host_api()
{
	local m=$1 url=$2
	shift 2
	tb_host curl -sS --max-time 5 -o "$TB_DIR/api.out" -w '%{http_code}' \
	    -H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN" -X "$m" \
	    ${1:+--data-binary "$1"} "$url" 2>/dev/null
	tb__keep_answer "$TB_DIR/api.out"
}

# Every answer tb_api and tb_host_api got stays for the canary sweep (the
# file each writes holds only the last one).
tb__keep_answer()
{
	[ -f "$1" ] && cat "$1" >>"$TB_API_LOG" 2>/dev/null
	return 0
}

# tb_resolve_a NAME: the first A record the sandbox's resolver gives for
# NAME, or the rcode (NXDOMAIN, SERVFAIL, ...).
tb_resolve_a()
{
	tb_sandbox dig +time=2 +tries=1 "$1" A |
	    awk '/status:/{gsub(",","",$6); s=$6} /^[^;].*\tA\t/{a=$NF} END{print (a!="" ? a : s)}'
}

# tb_learn NAME...: resolve A and AAAA in the sandbox, so that egressd
# learns the answers (nft lets only learned addresses through).
tb_learn()
{
	local n
	for n in "$@"; do
		tb_sandbox dig +short +time=2 +tries=1 "$n" A >/dev/null
		tb_sandbox dig +short +time=2 +tries=1 "$n" AAAA >/dev/null
	done
}

# tb_pt_in_flight: does the running egressd judge pass-through TLS in
# flight (its passthrough.judge line says path=queue)? For a scenario
# that checks what each path does (TB_PT_JUDGE, docs/testing.md).
tb_pt_in_flight()
{
	grep -q '"ev":"passthrough.judge","path":"queue"' "$TB_EGRESSD_LOG"
}

# tb_origin_rx ADDR LPORT: the bytes the origin's socket at ADDR:443
# received from the sandbox's local port LPORT ("none": no such socket):
# what reached the origin of a flow refused in flight.
tb_origin_rx()
{
	local out
	out=$(tb_net ss -tniH state all "( sport = :443 and dport = :$2 )" \
	    src "$1" 2>/dev/null)
	[ -n "$out" ] || { echo none; return; }
	grep -oE 'bytes_received:[0-9]+' <<<"$out" | head -n 1 |
	    cut -d: -f2 | grep . || echo 0
}

# --- setup ------------------------------------------------------------------

# tb_setup: namespaces, addresses, routes, PKI, DNS (dns1), origins, echo.
# Exits 77 (skip) only when not root or network namespaces are unavailable.
tb_setup()
{
	# egressd refuses policy files others may write: whatever the
	# caller's umask, files the bed and its scenarios create are 0644.
	umask 022
	[ "$(id -u)" -eq 0 ] || tb_skip "end-to-end tests need root (network namespaces)"
	command -v ip >/dev/null || tb_skip "iproute2 (ip) not installed"

	tb__reap_stale
	TB_PASS=0 TB_FAIL=0 TB_FAILED=() TB_PIDS=() TB_FINISHED=0
	TB_EGRESSD_PID="" TB_HOST="" TB__STARTS=0 TB__SWEPT=0 TB__CANARY_US=0
	TB_CANARY_BINDINGS=0
	# BASHPID, not $$: a bed may run in a subshell of a scenario.
	TB_ID="$BASHPID-$((SRANDOM % 100000))"
	TB_SBX="sbx-$TB_ID"
	TB_NET="net-$TB_ID"
	TB_HOST=
	trap tb__cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	if ! ip netns add "$TB_SBX" 2>/dev/null; then
		TB_SBX=
		tb_skip "ip netns unavailable (cannot create a network namespace)"
	fi
	ip netns add "$TB_NET" || tb_die "ip netns add $TB_NET"
	TB_UP=1

	# Under /tmp (not $TMPDIR): the sandbox uid must be able to traverse
	# to its home and the CA certificate.
	TB_DIR=$(mktemp -d "${TB_TMPDIR:-/tmp}/egressd-e2e.$TB_ID.XXXXXX") ||
	    tb_die "mktemp"
	chmod 755 "$TB_DIR"
	mkdir -p "$TB_DIR/pki" "$TB_DIR/dns" "$TB_DIR/net" "$TB_DIR/sbx" \
	    "$TB_DIR/egressd" "$TB_DIR/sbx-bin" "$TB_DIR/root" \
	    "$TB_DIR/root/canary"
	# ping carries cap_net_raw as a file capability; the workload has an
	# empty bounding set, which makes exec of such a file fail. A copy
	# without the capability uses ICMP datagram sockets, as an ordinary
	# unprivileged process would.
	cp /usr/bin/ping "$TB_DIR/sbx-bin/ping" 2>/dev/null
	# What the workload must not read (egressd's files, what the internet
	# and the checks saw) is root-only.
	chmod 700 "$TB_DIR/egressd" "$TB_DIR/net" "$TB_DIR/dns" "$TB_DIR/root"
	TB_OUT="$TB_DIR/root/out"
	# The canaries' values (root-only, never swept) and the file
	# credential's source (a directory of egressd's own, 0700).
	TB_CANARY_DIR="$TB_DIR/root/canary"
	TB_CANARY_SRC="$TB_DIR/egressd/tb-canary/credential"
	TB_API_LOG="$TB_DIR/root/api.answers"
	TB_API_BODY="$TB_DIR/egressd/api.body"
	: >"$TB_OUT"

	tb__sandbox_user
	TB_SBX_HOME="$TB_DIR/sbx"
	chown "$TB_SBX_UID:$TB_SBX_GID" "$TB_SBX_HOME"
	chmod 700 "$TB_SBX_HOME"

	tb__links
	tb__resolv_conf
	TB_CA_CERT="$TB_DIR/pki/ca.crt"
	TB_SBX_EXEC=(ip netns exec "$TB_SBX"
	    setpriv --reuid="$TB_SBX_UID" --regid="$TB_SBX_GID"
	    --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs
	    -- env -i -C "$TB_SBX_HOME"
	    PATH="$TB_DIR/sbx-bin:/usr/local/bin:/usr/bin:/bin"
	    HOME="$TB_SBX_HOME" TMPDIR="$TB_SBX_HOME" LANG=C.UTF-8
	    SSL_CERT_FILE="$TB_CA_CERT" CURL_CA_BUNDLE="$TB_CA_CERT"
	    TB_CA_CERT="$TB_CA_CERT")

	# Start what does not need the PKI while it is generated.
	tb__zone_conf
	TB__DNS_NOWAIT=1 tb_dns_start dns1 "$TB_DNS1_IP4" "$TB_DNS1_IP6"
	tb__start_echo
	tb__pki
	tb__start_origins
	tb_wait_file "$TB_DIR/net/echo.ready" "$TB_SETUP_WAIT" ||
	    tb_die "echo servers not ready: $(tail -n 5 "$TB_DIR/net/echo.err")"
	tb_wait_file "$TB_DIR/net/origin.ready" "$TB_SETUP_WAIT" ||
	    tb_die "origins not ready: $(tail -n 5 "$TB_DIR/net/origin.err")"
	tb__dns_wait dns1
	tb__link_wait "$TB_SBX" vsbx0
	tb__link_wait "$TB_NET" vnet0
}

# The kernel activates a new link (qdisc, carrier) from its linkwatch work,
# up to ~1 s after "ip link set up"; until then packets (the first NDP
# solicitation) are dropped and the first exchange stalls for a second.
tb__link_wait()
{
	local end
	end=$(tb__deadline "$TB_SETUP_WAIT")
	until ip -n "$1" -o link show dev "$2" | grep -q 'qdisc noqueue state UP'
	do
		tb__expired "$end" && tb_die "link $2 in $1 not up"
		sleep "$TB_POLL"
	done
}

# One user for the workload. Created once (under a lock: scenarios run in
# parallel); falls back to nobody when useradd is unavailable.
tb__sandbox_user()
{
	if ! getent passwd "$TB_SBX_USER" >/dev/null; then
		if command -v useradd >/dev/null; then
			(
				flock -w 10 9 || exit 1
				getent passwd "$TB_SBX_USER" >/dev/null ||
				    useradd --system --user-group --no-create-home \
				    --home-dir /nonexistent --shell /usr/sbin/nologin \
				    "$TB_SBX_USER"
			) 9>/run/lock/egressd-e2e-user.lock
		fi
		getent passwd "$TB_SBX_USER" >/dev/null || TB_SBX_USER=nobody
	fi
	TB_SBX_UID=$(id -u "$TB_SBX_USER")
	TB_SBX_GID=$(id -g "$TB_SBX_USER")
}

# No duplicate address detection anywhere (the link-local addresses too):
# every address is usable at once, instead of ~1 s after the link is up.
tb__no_dad()
{
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.accept_dad=0 \
	    net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_ra=0 \
	    net.ipv6.conf.default.accept_ra=0
}

tb__links()
{
	local a
	tb__no_dad "$TB_SBX"
	tb__no_dad "$TB_NET"
	# Both veth ends are created directly inside their namespaces: no
	# interface ever exists in the root namespace.
	ip link add vsbx0 netns "$TB_SBX" type veth peer name vnet0 \
	    netns "$TB_NET" || tb_die "veth sbx<->net"
	ip -n "$TB_SBX" link set lo up
	ip -n "$TB_NET" link set lo up
	# TB_SBX_IPV6_ONLY=1: the pod has IPv4 on loopback only (no
	# address on its link, no IPv4 route), as an IPv6-only cluster's pods.
	[ "$TB_SBX_IPV6_ONLY" = 1 ] ||
	    ip -n "$TB_SBX" addr add "$TB_SBX_IP4/24" dev vsbx0
	ip -n "$TB_SBX" addr add "$TB_SBX_IP6/64" dev vsbx0 nodad
	ip -n "$TB_NET" addr add "$TB_NET_IP4/24" dev vnet0
	ip -n "$TB_NET" addr add "$TB_NET_IP6/64" dev vnet0 nodad
	ip -n "$TB_NET" addr add "$TB_DNS2_IP4/24" dev vnet0
	ip -n "$TB_NET" addr add "$TB_DNS2_IP6/64" dev vnet0 nodad
	# Origins live on net's loopback; sbx reaches them via its default
	# route, net answers via the connected 198.51.100.0/24 and
	# 2001:db8:1::/64.
	for a in $TB_ORIGIN_A4 $TB_ORIGIN_B4 $TB_ORIGIN_C4 $TB_RESOLVER_X4 \
	    $TB_META4; do
		ip -n "$TB_NET" addr add "$a/32" dev lo
	done
	for a in $TB_ORIGIN_A6 $TB_ORIGIN_B6 $TB_ORIGIN_C6 $TB_RESOLVER_X6; do
		ip -n "$TB_NET" addr add "$a/128" dev lo nodad
	done
	ip -n "$TB_SBX" link set vsbx0 up
	ip -n "$TB_NET" link set vnet0 up
	[ "$TB_SBX_IPV6_ONLY" = 1 ] ||
	    ip -n "$TB_SBX" route add default via "$TB_NET_IP4" dev vsbx0
	ip -n "$TB_SBX" -6 route add default via "$TB_NET_IP6" dev vsbx0
	# An ordinary process may open ICMP datagram sockets (most distros
	# allow this), so the sandbox can ping and egressd must stop it.
	ip netns exec "$TB_SBX" sysctl -qw \
	    net.ipv4.ping_group_range="0 2147483647"
}

# The workload's resolver configuration: ip netns exec bind-mounts
# /etc/netns/<ns>/* over /etc/* for every command run in sbx.
tb__resolv_conf()
{
	mkdir -p "/etc/netns/$TB_SBX"
	if [ "$TB_SBX_IPV6_ONLY" = 1 ]; then
		printf 'nameserver %s\noptions timeout:1 attempts:2\n' \
		    "$TB_DNS1_IP6" >"/etc/netns/$TB_SBX/resolv.conf"
	else
		printf 'nameserver %s\nnameserver %s\noptions timeout:1 attempts:2\n' \
		    "$TB_DNS1_IP4" "$TB_DNS1_IP6" >"/etc/netns/$TB_SBX/resolv.conf"
	fi
	printf '127.0.0.1 localhost\n::1 localhost\n' \
	    >"/etc/netns/$TB_SBX/hosts"
}

# tb_host_setup: add host-<id> (the node/kubelet) joined to sbx by a second
# veth: host 192.0.2.1 / 2001:db8:3::1, pod (sbx) 192.0.2.2 / 2001:db8:3::2.
# host-<id> has only its connected routes.
tb_host_setup()
{
	TB_HOST="host-$TB_ID"
	ip netns add "$TB_HOST" || tb_die "ip netns add $TB_HOST"
	tb__no_dad "$TB_HOST"
	ip link add vhost0 netns "$TB_HOST" type veth peer name vpod0 \
	    netns "$TB_SBX" || tb_die "veth host<->sbx"
	ip -n "$TB_HOST" link set lo up
	ip -n "$TB_HOST" addr add "$TB_HOST_IP4/24" dev vhost0
	ip -n "$TB_HOST" addr add "$TB_HOST_IP6/64" dev vhost0 nodad
	[ "$TB_SBX_IPV6_ONLY" = 1 ] ||
	    ip -n "$TB_SBX" addr add "$TB_SBX_HOST_IP4/24" dev vpod0
	ip -n "$TB_SBX" addr add "$TB_SBX_HOST_IP6/64" dev vpod0 nodad
	ip -n "$TB_HOST" link set vhost0 up
	ip -n "$TB_SBX" link set vpod0 up
	tb__link_wait "$TB_HOST" vhost0
	tb__link_wait "$TB_SBX" vpod0
}

# --- PKI: a throwaway CA per run ---------------------------------------------

tb__pki()
{
	local d="$TB_DIR/pki" san
	# Every name of the zone (a wildcard "*.test" is not honoured by
	# clients: too few labels), wildcards below a/b/c, and the IPs.
	san=$(sed -nE 's/^(host-record|cname)=([^,]+),.*/DNS:\2/p' \
	    "$TB_SERVERS_DIR/zone.dnsmasq.conf" | sort -u | paste -sd,)
	san="$san,DNS:*.a.test,DNS:*.b.test,DNS:*.c.test,DNS:*.sub.a.test"
	san="$san,IP:$TB_ORIGIN_A4,IP:$TB_ORIGIN_B4,IP:$TB_ORIGIN_C4"
	san="$san,IP:$TB_ORIGIN_A6,IP:$TB_ORIGIN_B6,IP:$TB_ORIGIN_C6"
	san="$san,IP:$TB_META4"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$d/ca.key" -out "$d/ca.crt" -days 2 \
	    -subj "/CN=egressd e2e test CA $TB_ID" \
	    -addext "basicConstraints=critical,CA:TRUE" \
	    -addext "keyUsage=critical,keyCertSign,cRLSign" \
	    2>"$d/err" || tb_die "CA: $(cat "$d/err")"
	tb_pki_leaf origin "$san" >/dev/null
	chmod 644 "$d/ca.crt"
}

# tb_vault_files VALUE: what a Credential Vault scenario starts from: the
# run's CA as the origins' trust directory ($TB_DIR/trust, for
# --trust-dir) and VALUE, a credential, in $TB_DIR/egressd/key-k (0600).
tb_vault_files()
{
	mkdir -p "$TB_DIR/trust" &&
	    cp "$TB_CA_CERT" "$TB_DIR/trust/test-ca.pem" &&
	    printf '%s\n' "$1" >"$TB_DIR/egressd/key-k" &&
	    chmod 600 "$TB_DIR/egressd/key-k" ||
	    tb_die "tb_vault_files: cannot write the trust directory or key"
}

# tb_random_key: a fresh API-key-like secret ("sk" and 38 letters and
# digits), one per run, so that no scenario can pass on a value it knows.
tb_random_key()
{
	"$TB_PY" -c 'import secrets, string
a = string.ascii_letters + string.digits
print("sk" + "".join(secrets.choice(a) for _ in range(38)))'
}

# tb_pki_leaf NAME SAN: issue $TB_DIR/pki/NAME.{crt,key} from the run's CA
# (SAN in openssl syntax: "DNS:x.test,IP:203.0.113.10"); prints the .crt path.
tb_pki_leaf()
{
	local d="$TB_DIR/pki" n=$1 san=$2
	printf '%s\n' "subjectAltName=$san" "basicConstraints=critical,CA:FALSE" \
	    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" \
	    >"$d/$n.ext"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	    -keyout "$d/$n.key" -out "$d/$n.csr" -subj "/CN=$n" 2>"$d/err" &&
	    openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" \
	    -CAkey "$d/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
	    -days 2 -extfile "$d/$n.ext" -out "$d/$n.crt" 2>"$d/err" ||
	    tb_die "leaf $n: $(cat "$d/err")"
	chmod 600 "$d/$n.key"
	chmod 644 "$d/$n.crt"
	echo "$d/$n.crt"
}

# --- the internet: origins and echo -----------------------------------------

tb__start_origins()
{
	local a p args=()
	for a in $TB_ORIGINS; do
		for p in $TB_HTTP_PORTS; do args+=(--listen "http:[$a]:$p"); done
		for p in $TB_HTTPS_PORTS; do args+=(--listen "https:[$a]:$p"); done
	done
	args+=(--listen "http:[$TB_META4]:80")
	TB_ORIGIN_LOG="$TB_DIR/net/origin.log"
	: >"$TB_ORIGIN_LOG"
	chmod 644 "$TB_ORIGIN_LOG"
	ip netns exec "$TB_NET" "$TB_PY" "$TB_SERVERS_DIR/origin.py" \
	    --log "$TB_ORIGIN_LOG" --ready "$TB_DIR/net/origin.ready" \
	    --cert "$TB_DIR/pki/origin.crt" --key "$TB_DIR/pki/origin.key" \
	    "${args[@]}" >"$TB_DIR/net/origin.err" 2>&1 &
	TB_ORIGIN_PID=$!
	TB_PIDS+=("$TB_ORIGIN_PID")
}

tb__start_echo()
{
	local a p args=()
	for a in $TB_ORIGINS $TB_RESOLVER_X4 $TB_RESOLVER_X6; do
		for p in $TB_ECHO_TCP_PORTS; do args+=(--listen "tcp:[$a]:$p"); done
		for p in $TB_ECHO_UDP_PORTS; do args+=(--listen "udp:[$a]:$p"); done
	done
	TB_ECHO_LOG="$TB_DIR/net/echo.log"
	: >"$TB_ECHO_LOG"
	ip netns exec "$TB_NET" "$TB_PY" "$TB_SERVERS_DIR/echo.py" \
	    --log "$TB_ECHO_LOG" --ready "$TB_DIR/net/echo.ready" \
	    "${args[@]}" >"$TB_DIR/net/echo.err" 2>&1 &
	TB_ECHO_PID=$!
	TB_PIDS+=("$TB_ECHO_PID")
}

# --- DNS: dnsmasq as the authoritative upstream -------------------------------

tb__zone_conf()
{
	local f="$TB_DIR/dns/bulk.conf" i
	{
		echo "local-ttl=$TB_DNS_TTL"
		# big.test: 60 A records, ~1 KB: truncated (TC) over UDP
		# without EDNS, fits EDNS 1232. huge.test: 100 A records,
		# ~1.6 KB: TC even with EDNS 1232; needs TCP.
		for i in $(seq 100 159); do
			echo "host-record=big.test,203.0.113.$i"
		done
		for i in $(seq 100 199); do
			echo "host-record=huge.test,203.0.113.$i"
		done
	} >"$f"
}

# tb_dns_start NAME ADDR... [-- DNSMASQ-ARGS...]: an upstream resolver in
# net-<id> on ADDR:53 (UDP+TCP) serving the test zone, its query log in
# $TB_DIR/dns/NAME.log. tb_setup starts dns1 on $TB_DNS1_IP4/$TB_DNS1_IP6;
# a second one: tb_dns_start dns2 "$TB_DNS2_IP4" "$TB_DNS2_IP6".
tb_dns_start()
{
	local name=$1 a args=() addrs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		addrs+=("$1")
		shift
	done
	[ "${1:-}" = -- ] && shift
	for a in "${addrs[@]}"; do args+=(--listen-address="$a"); done
	: >"$TB_DIR/dns/$name.log"
	ip netns exec "$TB_NET" dnsmasq --keep-in-foreground \
	    --conf-file="$TB_SERVERS_DIR/zone.dnsmasq.conf" \
	    --conf-file="$TB_DIR/dns/bulk.conf" \
	    --no-resolv --no-hosts --no-poll --user=root --group=root \
	    --pid-file= --bind-interfaces --port=53 \
	    --log-queries=extra --log-facility="$TB_DIR/dns/$name.log" \
	    --edns-packet-max=1232 "${args[@]}" "$@" \
	    >"$TB_DIR/dns/$name.err" 2>&1 &
	TB_PIDS+=("$!")
	printf -v "TB_DNS_PID_$name" '%s' "$!"
	printf -v "TB_DNS_ADDRS_$name" '%s' "${addrs[*]}"
	# tb_setup awaits dns1 after starting the other servers
	[ "${TB__DNS_NOWAIT:-0}" = 1 ] || tb__dns_wait "$name"
}

tb__dns_wait()
{
	local name=$1 v a
	v="TB_DNS_ADDRS_$name"
	for a in ${!v}; do
		tb_wait_port "$TB_NET" udp "$a" 53 "$TB_SETUP_WAIT" &&
		    tb_wait_port "$TB_NET" tcp "$a" 53 "$TB_SETUP_WAIT" ||
		    tb_die "dnsmasq $name not listening on $a: $(tail -n 3 \
		    "$TB_DIR/dns/$name.err")"
	done
}

# tb_dns_stop NAME: kill that resolver (upstream-down tests).
tb_dns_stop()
{
	local v="TB_DNS_PID_$1"
	[ "${!v:-}" ] || return 0
	tb__kill_wait "${!v}"
	printf -v "$v" '%s' ""
}

# tb_dns_blackhole NAME on|off: silently drop queries to that resolver
# (a slow/unreachable upstream, unlike tb_dns_stop's port unreachable).
tb_dns_blackhole()
{
	local name=$1 v a fam rules=""
	v="TB_DNS_ADDRS_$name"
	ip netns exec "$TB_NET" nft delete table inet "tb_bh_$name" 2>/dev/null
	[ "$2" = on ] || return 0
	for a in ${!v}; do
		case $a in
		*:*) fam=ip6 ;;
		*) fam=ip ;;
		esac
		rules="$rules
		meta l4proto { tcp, udp } $fam daddr $a th dport 53 drop"
	done
	ip netns exec "$TB_NET" nft -f - <<-EOF || tb_die "tb_dns_blackhole $name"
	table inet tb_bh_$name {
		chain in {
			type filter hook input priority 0;$rules
		}
	}
	EOF
}

# tb_dns_sync NAME: make sure every query the resolver received so far is in
# its log, by sending a unique sentinel query from net-<id> and waiting for
# its log line. Use before asserting that something was NOT queried.
tb_dns_sync()
{
	local name=$1 v a q
	v="TB_DNS_ADDRS_$name"
	a=${!v%% *}
	q="tb-sync-$RANDOM$RANDOM.test"
	ip netns exec "$TB_NET" dig +time=1 +tries=2 +short "@$a" "$q" A \
	    >/dev/null 2>&1
	tb_wait_line "$TB_DIR/dns/$name.log" "query\[A\] $q from" ||
	    tb_die "dns $name: sentinel query not logged"
}

# tb_dns_count NAME QNAME-ERE [TYPE]: number of queries NAME received for
# names matching the ERE (anchored, case-insensitive), after a sync.
tb_dns_count()
{
	local name=$1 re=$2 type=${3:-[A-Za-z0-9]+}
	tb_dns_sync "$name"
	grep -ciE -- "query\[$type\] ($re) from " "$TB_DIR/dns/$name.log"
}

# tb_assert_dns_query NAME QNAME-ERE [TYPE]: the resolver received one.
tb_assert_dns_query()
{
	local n
	n=$(tb_dns_count "$@")
	if [ "$n" -gt 0 ]; then
		tb_pass "dns $1 received query for $2 ${3:-} ($n)"
		return 0
	fi
	tb_fail "dns $1 received no query for $2 ${3:-}"
	return 1
}

# tb_assert_no_dns_query NAME QNAME-ERE [TYPE]: not one packet asking for a
# matching name reached that resolver (exfiltration, denied names).
tb_assert_no_dns_query()
{
	local n
	n=$(tb_dns_count "$@")
	if [ "$n" -eq 0 ]; then
		tb_pass "dns $1 received no query for $2 ${3:-}"
		return 0
	fi
	tb_fail "dns $1 received $n queries for $2 ${3:-}"
	grep -iE -- "query\[[A-Za-z0-9]+\] ($2) from " "$TB_DIR/dns/$1.log" |
	    head -n 5 | sed 's/^/#   /'
	return 1
}

# --- egressd ---------------------------------------------------------------

# tb_policy_file NAME < content: write a policy (YAML or JSON) readable by
# root only; prints its path.
tb_policy_file()
{
	local f="$TB_DIR/egressd/$1"
	cat >"$f"
	chmod 600 "$f"
	echo "$f"
}

# tb_start_egressd [ARGS...]: start $EGRESSD_BIN in sbx as root with
#   --log-file $TB_EGRESSD_LOG
# and, unless ARGS carry their own,
#   --dns-upstream $TB_DNS1_IP4   --http-addr $TB_EGRESSD_HTTP
#   --rules-dir $TB_DIR/egressd/rules (empty, per run: parallel runs must
#   not share /var/egress/rules)
#   --state-dir $TB_DIR/egressd/state (the proxy's CA and ca-bundle.crt;
#   only when $EGRESSD_BIN is egressd itself)
# then ARGS. Environment: a clean one plus ${TB_EGRESSD_ENV[@]} (K=V words)
# and the caller's sanitizer options. Waits (bounded) for the JSON line
# "ev":"egressd.ready" written after this start; dies (showing the log)
# if egressd exits first or is not ready in $TB_EGRESSD_READY_TIMEOUT s.
# Sets TB_EGRESSD_PID. May be called again after tb_stop_egressd (restart).
tb_start_egressd()
{
	local args=() a mark env=() flag val given t
	[ -n "${EGRESSD_BIN:-}" ] && [ -x "$EGRESSD_BIN" ] ||
	    tb_die "EGRESSD_BIN not set or not executable: '${EGRESSD_BIN:-}'"
	: "${TB_EGRESSD_HTTP:=127.0.0.1:18080}"
	TB_EGRESSD_LOG="$TB_DIR/egressd/egressd.log"
	touch "$TB_EGRESSD_LOG"
	mkdir -p "$TB_DIR/egressd/rules"
	args=(--log-file "$TB_EGRESSD_LOG")
	for flag in --dns-upstream --http-addr --rules-dir --state-dir; do
		given=0
		for a in "$@"; do
			case $a in
			"$flag"|"$flag"=*) given=1 ;;
			esac
		done
		[ "$given" -eq 1 ] && continue
		# tools such as nft_driver take the daemon's flags but have no
		# proxy, so no state dir
		[ "$flag" = --state-dir ] &&
		    [ "${EGRESSD_BIN##*/}" != egressd ] && continue
		case $flag in
		--dns-upstream)
			val=$TB_DNS1_IP4
			[ "$TB_SBX_IPV6_ONLY" = 1 ] && val=$TB_DNS1_IP6
			;;
		--http-addr) val=$TB_EGRESSD_HTTP ;;
		--rules-dir) val="$TB_DIR/egressd/rules" ;;
		--state-dir) val="$TB_DIR/egressd/state" ;;
		esac
		args+=("$flag" "$val")
	done
	# TB_PT_JUDGE: how pass-through TLS is judged, for a scenario that
	# does not say (the CMake variants run proxy and vault scenarios a
	# second time with "proxy": docs/testing.md)
	if [ -n "${TB_PT_JUDGE:-}" ] && [ "${EGRESSD_BIN##*/}" = egressd ]; then
		given=0
		for a in "$@"; do
			case $a in
			--passthrough-judge|--passthrough-judge=*) given=1 ;;
			esac
		done
		[ "$given" -eq 1 ] || args+=(--passthrough-judge "$TB_PT_JUDGE")
	fi
	for a in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
		[ -n "${!a:-}" ] && env+=("$a=${!a}")
	done
	t=${EPOCHREALTIME//[.,]/}
	tb__canary_start "$@"
	TB__CANARY_US=$((TB__CANARY_US + ${EPOCHREALTIME//[.,]/} - t))
	# What this start was given, for the sweep (which files, which API).
	TB__STARTS=$((TB__STARTS + 1))
	printf '%s\0' "${args[@]}" "$@" >"$TB_CANARY_DIR/argv.$TB__STARTS"
	printf '%s\0' "${env[@]}" "${TB_EGRESSD_ENV[@]}" \
	    >"$TB_CANARY_DIR/env.$TB__STARTS"
	mark=$(tb_log_mark "$TB_EGRESSD_LOG")
	ip netns exec "$TB_SBX" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	    "${env[@]}" "${TB_EGRESSD_ENV[@]}" \
	    "$EGRESSD_BIN" "${args[@]}" "$@" \
	    >>"$TB_DIR/egressd/stdout" 2>>"$TB_DIR/egressd/stderr" &
	TB_EGRESSD_PID=$!
	TB_PIDS+=("$TB_EGRESSD_PID")
	if ! tb_wait_log_line --since "$mark" \
	    --timeout "$TB_EGRESSD_READY_TIMEOUT" --pid "$TB_EGRESSD_PID" \
	    "$TB_EGRESSD_LOG" egressd.ready >/dev/null; then
		tb_egressd_dump
		tb_die "egressd did not log egressd.ready within ${TB_EGRESSD_READY_TIMEOUT}s"
	fi
}

# tb_stop_egressd [SIGNAL]: signal egressd (default TERM) and wait, bounded,
# for it to exit (SIGKILL after $TB_EGRESSD_STOP_TIMEOUT s). Sets
# TB_EGRESSD_STATUS to its exit status (128+n when killed by signal n).
tb_stop_egressd()
{
	local pid=${TB_EGRESSD_PID:-} sig=${1:-TERM} end
	[ "$pid" ] || return 0
	TB_EGRESSD_PID=
	tb__canary_proc "$pid"
	kill -s "$sig" "$pid" 2>/dev/null
	end=$(tb__deadline "$TB_EGRESSD_STOP_TIMEOUT")
	while tb__alive "$pid"; do
		if tb__expired "$end"; then
			tb_log "egressd ignored SIG$sig for ${TB_EGRESSD_STOP_TIMEOUT}s, killing"
			kill -KILL "$pid" 2>/dev/null
			break
		fi
		sleep "$TB_POLL"
	done
	TB_EGRESSD_STATUS=0
	wait "$pid" 2>/dev/null || TB_EGRESSD_STATUS=$?
}

# At the end egressd must stop cleanly on SIGTERM (exit 0) and its stderr
# must carry no sanitizer report: part of the daemon's contract.
tb__stop_egressd_at_exit()
{
	tb_stop_egressd TERM
	if [ "$TB_EGRESSD_STATUS" -ne 0 ]; then
		tb_fail "egressd exit status $TB_EGRESSD_STATUS on SIGTERM at teardown"
		tb_egressd_dump
	fi
	if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' \
	    "$TB_DIR/egressd/stderr" 2>/dev/null; then
		tb_fail "egressd stderr has a sanitizer report"
		tb_egressd_dump
	fi
}

# tb_api METHOD PATH [BODY]: call egressd's control API at $TB_EGRESSD_HTTP
# from inside sbx as root (the operator, not the workload), with the
# OPENSANDBOX-EGRESS-AUTH header when $TB_EGRESSD_TOKEN is set. Prints the
# HTTP status (000 when the connection failed); the body is in
# $TB_API_BODY (a file).
tb_api()
{
	local m=$1 p=$2 args=()
	[ -n "${TB_EGRESSD_TOKEN:-}" ] &&
	    args+=(-H "OPENSANDBOX-EGRESS-AUTH: $TB_EGRESSD_TOKEN")
	[ $# -ge 3 ] && args+=(-H "Content-Type: application/json" \
	    --data-binary "$3")
	ip netns exec "$TB_SBX" curl -sS --max-time 5 -o "$TB_API_BODY" \
	    -w '%{http_code}' -X "$m" "${args[@]}" \
	    "http://${TB_EGRESSD_HTTP:-127.0.0.1:18080}$p" 2>/dev/null
	tb__keep_answer "$TB_API_BODY"
}

# tb_egressd_dump: show the tail of egressd's log and stderr (on failure).
tb_egressd_dump()
{
	local f
	for f in egressd.log stderr; do
		[ -s "$TB_DIR/egressd/$f" ] || continue
		echo "# --- egressd $f (tail) ---"
		tail -n 30 "$TB_DIR/egressd/$f" | sed 's/^/#   /'
	done
}

# --- canary secrets -----------------------------------------------------------
# Every egressd the bed starts holds canary credentials besides the
# scenario's own: random per run, bound to hosts no scenario contacts, so
# the scenario's story is unchanged. At the end the sweep looks for every
# rendered form of each one in everything egressd wrote or answered and
# everything the sandbox can read (docs/testing.md, "The canary sweep").
# The values never pass through this shell: lib/canary.py makes them,
# puts them in, and looks for them, and prints labels only. What it all
# costs adds up in TB__CANARY_US (microseconds of EPOCHREALTIME: no fork)
# and is reported in the sweep's passing check.

# tb_canary_init: make this run's canaries (idempotent). tb_start_egressd
# does it; a scenario calls it only to sweep without egressd (testbed_self).
tb_canary_init()
{
	"$TB_PY" -S "$TB_LIB_DIR/canary.py" init "$TB_CANARY_DIR" "$TB_CANARY_SRC" ||
	    tb_die "canary.py init"
}

# tb__canary_start ARGS...: put the file and inline canaries into the
# policy file of this start (in place; once per file). A scenario whose
# egressd cannot take them must say so (TB_CANARY=0 and why): a bed that
# silently swept nothing would prove nothing.
tb__canary_start()
{
	local a prev="" pol="" out
	TB_CANARY_BINDINGS=0
	# a stand-in daemon (testbed_self, nft_driver) loads no credentials
	[ "${EGRESSD_BIN##*/}" = egressd ] && [ "$TB_CANARY" != 0 ] || return 0
	for a in "${TB_EGRESSD_ENV[@]}"; do
		case $a in
		OPENSANDBOX_EGRESS_POLICY_FILE=*) pol=${a#*=} ;;
		esac
	done
	for a in "$@"; do
		[ "$prev" = --policy ] && pol=$a
		case $a in
		--policy=*) pol=${a#*=} ;;
		esac
		prev=$a
	done
	# no policy file (or a missing one): egressd reads the RULES variable
	[ -n "$pol" ] && [ -e "$pol" ] || { tb__canary_rules; return 0; }
	if grep -qF tb-canary- "$pol" 2>/dev/null; then
		TB_CANARY_BINDINGS=1
		grep -qF tb-canary-inline "$pol" && TB_CANARY_BINDINGS=2
		return 0
	fi
	out=$("$TB_PY" -S "$TB_LIB_DIR/canary.py" inject "$TB_CANARY_DIR" \
	    "$TB_CANARY_SRC" "$pol")
	case $out in
	"injected "[12]) TB_CANARY_BINDINGS=${out#injected } ;;
	"skip "*)
		tb_fail "canaries: ${out#skip } ($pol; set TB_CANARY=0 with the reason)"
		;;
	*) tb_die "canary.py inject: $out" ;;
	esac
}

# tb__canary_rules: without a policy file, the rules of
# OPENSANDBOX_EGRESS_RULES in TB_EGRESSD_ENV take the file canary (a path
# in the environment; a value there would be a leak of the bed's own).
tb__canary_rules()
{
	local i out rc=0
	for i in "${!TB_EGRESSD_ENV[@]}"; do
		case ${TB_EGRESSD_ENV[$i]} in
		OPENSANDBOX_EGRESS_RULES=*) ;;
		*) continue ;;
		esac
		out=$("$TB_PY" -S "$TB_LIB_DIR/canary.py" inject-rules \
		    "$TB_CANARY_DIR" "$TB_CANARY_SRC" \
		    <<<"${TB_EGRESSD_ENV[$i]#*=}") || rc=$?
		case $rc in
		0)
			TB_EGRESSD_ENV[i]="OPENSANDBOX_EGRESS_RULES=$out"
			TB_CANARY_BINDINGS=1
			;;
		3) tb_fail "canaries: $out (set TB_CANARY=0 with the reason)" ;;
		*) tb_die "canary.py inject-rules: status $rc" ;;
		esac
		return 0
	done
	tb_fail "canaries: this egressd has neither a policy file nor OPENSANDBOX_EGRESS_RULES to hold them (set TB_CANARY=0 with the reason)"
}

# tb__canary_proc PID: egressd's /proc before it stops: its environment
# (root reads it), and every file of /proc/PID the sandbox uid can read
# (its command line among them), read as that uid.
tb__canary_proc()
{
	local pid=$1 d=$TB_CANARY_DIR f n l hit t
	[ -s "$d/needles" ] && tb__alive "$pid" || return 0
	t=${EPOCHREALTIME//[.,]/}
	hit=$(grep -lsF -f "$d/needles" "/proc/$pid/environ"
		setpriv --reuid="$TB_SBX_UID" --regid="$TB_SBX_GID" \
		    --clear-groups grep -lsF -d skip -f - "/proc/$pid/"* \
		    <"$d/needles")
	for f in $hit; do
		for n in "$d"/needles.*; do
			l=${n##*/needles.}
			grep -qsF -f "$n" "$f" &&
			    tb_fail "canary $l found in egressd's $f"
		done
	done
	TB__CANARY_US=$((TB__CANARY_US + ${EPOCHREALTIME//[.,]/} - t))
}

# tb_canary_sweep [--live STOP...]: the sweep (lib/canary.py sweep), one
# check per hit naming the canary and where, one passing check when there
# is none. With --live and egressd running, its API is read (and the
# API-inline canary put in) first, then STOP stops it (its last log lines
# are swept too; the caller stops it if the sweep died before). With
# --live it runs once per bed: tb_finish, or the teardown of a bed that
# ended without it.
tb_canary_sweep()
{
	local live=0 stop=() line rfd wfd pid label form done=0 rc=0 t
	if [ "${1:-}" = --live ]; then
		shift
		stop=("$@")
		[ -n "${TB_EGRESSD_PID:-}" ] && live=1
	fi
	if [ "${TB__SWEPT:-0}" = 1 ] ||
	    [ ! -s "${TB_CANARY_DIR:-/nonexistent}/state.json" ]; then
		return 0
	fi
	[ ${#stop[@]} -gt 0 ] && TB__SWEPT=1
	t=${EPOCHREALTIME//[.,]/}
	coproc TB__SWEEP { exec "$TB_PY" -S "$TB_LIB_DIR/canary.py" sweep \
	    "$TB_CANARY_DIR" "$TB_DIR" "$TB_SBX" \
	    $([ "$live" = 1 ] && echo --live) 2>&1; }
	# Bash drops a coprocess's descriptors once it is reaped: keep copies.
	exec {rfd}<&"${TB__SWEEP[0]}" {wfd}>&"${TB__SWEEP[1]}"
	pid=$TB__SWEEP_PID
	while IFS= read -r -t 120 line <&"$rfd"; do
		case $line in
		live)
			# stopping egressd is not the sweep's cost
			TB__CANARY_US=$((TB__CANARY_US + ${EPOCHREALTIME//[.,]/} - t))
			"${stop[@]}"
			t=${EPOCHREALTIME//[.,]/}
			echo go >&"$wfd"
			;;
		"hit "*)
			read -r _ label form _ <<<"$line"
			tb_fail "canary $label ($form) found in ${line#"hit $label $form "}"
			;;
		"note "*) tb_log "canary sweep: ${line#note }" ;;
		"done "*)
			done=1
			TB__CANARY_US=$((TB__CANARY_US + ${EPOCHREALTIME//[.,]/} - t))
			tb_pass "canary sweep: ${line#done }; canaries cost $((TB__CANARY_US / 1000)) ms"
			;;
		*) tb_fail "canary sweep: $(head -c 200 <<<"$line")" ;;
		esac
	done
	exec {rfd}<&- {wfd}>&-
	# silent for 120 s: the sweep is stuck, and ours to stop
	[ "$done" = 1 ] || kill "$pid" 2>/dev/null
	wait "$pid" || rc=$?
	[ "$done" = 1 ] && [ "$rc" -eq 0 ] ||
	    tb_fail "canary sweep did not finish (status $rc)"
	return 0
}

# --- teardown ---------------------------------------------------------------

tb__alive()
{
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	case ${st:0:1} in
	Z|X) return 1 ;;
	esac
	return 0
}

# A PID is ours to kill only while it runs inside one of our namespaces.
tb__ours()
{
	local pidns ns
	pidns=$(readlink "/proc/$1/ns/net" 2>/dev/null) || return 1
	for ns in "$TB_SBX" "$TB_NET" "${TB_HOST:-}"; do
		[ "$ns" ] && [ -e "/run/netns/$ns" ] || continue
		[ "$pidns" = "net:[$(stat -L -c %i "/run/netns/$ns")]" ] &&
		    return 0
	done
	return 1
}

tb__kill_wait()
{
	local pid end live=()
	for pid in "$@"; do
		tb__ours "$pid" || continue
		kill -TERM "$pid" 2>/dev/null && live+=("$pid")
	done
	end=$(tb__deadline "$TB_STOP_WAIT")
	for pid in "${live[@]}"; do
		while tb__alive "$pid" && ! tb__expired "$end"; do
			sleep "$TB_POLL"
		done
		tb__alive "$pid" && kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	return 0
}

tb__cleanup()
{
	local rc=$? ns pid
	trap - EXIT INT TERM HUP
	set +e
	if [ "$TB_UP" -ne 0 ]; then
		if [ "$TB_FINISHED" -eq 0 ]; then
			tb_canary_sweep --live tb_stop_egressd TERM
			[ "$TB_FAIL" -gt 0 ] && [ "$rc" -eq 0 ] && rc=1
		fi
		if [ "${TB_EGRESSD_PID:-}" ] && [ "$TB_FINISHED" -eq 0 ]; then
			tb_stop_egressd TERM
		fi
		tb__kill_wait "${TB_PIDS[@]}"
		# Whatever still runs inside our namespaces was started by us
		# (e.g. dnsmasq's TCP children): kill it by PID.
		for ns in "$TB_SBX" "$TB_NET" "${TB_HOST:-}"; do
			[ "$ns" ] || continue
			for pid in $(ip netns pids "$ns" 2>/dev/null); do
				kill -KILL "$pid" 2>/dev/null
			done
		done
	fi
	for ns in "${TB_SBX:-}" "${TB_NET:-}" "${TB_HOST:-}"; do
		[ "$ns" ] || continue
		ip netns del "$ns" 2>/dev/null
		rm -rf "/etc/netns/$ns"
	done
	if [ "$TB_UP" -ne 0 ] && [ "$TB_FINISHED" -eq 0 ]; then
		[ "$rc" -eq 0 ] && rc=1
		printf 'tb: scenario ended before tb_finish (status %s)\n' "$rc"
		[ -n "${TB_EGRESSD_LOG:-}" ] && tb_egressd_dump
		tb__summary
	fi
	if [ -n "${TB_DIR:-}" ] && [ -d "$TB_DIR" ]; then
		if [ "${TB_KEEP:-0}" = 1 ] || { [ "$rc" -ne 0 ] &&
		    [ "${TB_KEEP_ON_FAIL:-0}" = 1 ]; }; then
			echo "tb: kept $TB_DIR"
		else
			rm -rf "$TB_DIR"
		fi
	fi
	exit "$rc"
}

# Namespaces of an earlier run whose owner died without its trap (e.g. a
# SIGKILL on ctest timeout): the id starts with the owner's PID.
tb__reap_stale()
{
	local ns owner pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $ns in
		sbx-*-*|net-*-*|host-*-*) ;;
		*) continue ;;
		esac
		owner=${ns#*-}
		owner=${owner%%-*}
		case $owner in
		''|*[!0-9]*) continue ;;
		esac
		[ -d "/proc/$owner" ] && continue
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
		rm -rf "/etc/netns/$ns"
	done
}
