# Helpers of the nft_* scenarios, sourced after tests/e2e/lib/testbed.sh.
# They drive tests/e2e/tools/nft_driver (egressd's nft module alone, with
# a stub resolver) through the bed's egressd start/stop contract.

ND_TOOLS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ND_BIN=${NFT_DRIVER:-${EGRESSD_BINDIR:-}/tests/e2e/tools/nft_driver}
ND_PROBE=$ND_TOOLS/nft_probe.py
ND_SEQ=0

# nd_start [ARGS...]: start the driver as "egressd" with a control FIFO.
nd_start()
{
	# built with egressd: its absence is a broken build, not a skip
	[ -x "$ND_BIN" ] || tb_die "nft_driver not built: $ND_BIN"
	ND_CTL=$TB_DIR/nft.ctl
	[ -p "$ND_CTL" ] || mkfifo -m 600 "$ND_CTL"
	EGRESSD_BIN=$ND_BIN tb_start_egressd --control "$ND_CTL" "$@"
}

# nd_cmd CMD ARGS...: one driver command; 0 when it answered ok.
nd_cmd()
{
	local mark
	ND_SEQ=$((ND_SEQ + 1))
	mark=$(tb_log_mark "$TB_EGRESSD_LOG")
	timeout 2 bash -c 'printf "%s\n" "$1" >"$2"' _ "$ND_SEQ $*" "$ND_CTL" ||
	    return 2
	tb_wait_log_line --since "$mark" --timeout 5 "$TB_EGRESSD_LOG" \
	    driver.cmd id="$ND_SEQ" >"$TB_DIR/nd.last" || return 2
	grep -q '"ok":true' "$TB_DIR/nd.last"
}

# nd_probe KIND HOST PORT [TIMEOUT]: run nft_probe.py as the sandbox.
nd_probe() { tb_sandbox "$TB_PY" "$ND_PROBE" "$@"; }

# nd_fails_fast DESC KIND HOST PORT: the probe fails, and in under 1 s.
nd_fails_fast()
{
	local desc=$1 out ms
	shift
	out=$(nd_probe "$@" 3)
	ms=${out##* }
	if [ "${out%% *}" = err ] && [ "$ms" -lt 1000 ]; then
		tb_pass "$desc ($out)"
	else
		tb_fail "$desc: expected a fast failure, got '$out'"
	fi
}

# nd_works DESC KIND HOST PORT: the probe succeeds.
nd_works()
{
	local desc=$1 out
	shift
	if out=$(nd_probe "$@" 3); then
		tb_pass "$desc ($out)"
	else
		tb_fail "$desc: got '$out'"
	fi
}
