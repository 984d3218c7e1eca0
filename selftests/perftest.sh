# SPDX-License-Identifier: GPL-2.0
#
# Running stock tools (perftest, the ibv_*_pingpong examples) as a server on mroce0 in
# $NSA and a client on mroce1 in $NSB, and checking what they print. Sourced by the
# selftests after lib.sh; they set MROCE_TYPE, IPA, IPB, TO, PORT and LOG.

# perftest_setup: the pair of devices of $MROCE_TYPE; GA and GB are their GID indexes
# for IPA and IPB.
perftest_setup() {
	setup_pair "$MROCE_TYPE" || return 1
	GA=$(gid_index "$NSA" mroce0 $IPA)
	GB=$(gid_index "$NSB" mroce1 $IPB)
	[ -n "$GA" ] && [ -n "$GB" ]
}

# perftest_cleanup: removes the devices, the namespaces and $LOG.
perftest_cleanup() {
	cleanup_devices_and_ns
	rm -rf "$LOG"
}

next_port() { PORT=$((PORT + 1)); }

# pair TOOL ARGS...: runs TOOL as the server on mroce0 in $NSA and as the client on
# mroce1 in $NSB, both with ARGS; the outputs end up in $LOG/srv and $LOG/cli. Fails
# (printing both outputs) unless both exit 0.
pair() {
	local tool=$1; shift
	local gflag=-x srv rc_srv rc_cli start=$SECONDS
	case $tool in ibv_*_pingpong) gflag=-g ;; esac
	next_port
	ip netns exec "$NSA" timeout $TO "$tool" -d mroce0 $gflag "$GA" -p $PORT "$@" \
		> "$LOG/srv" 2>&1 &
	srv=$!
	if ! busywait 30000 listening "$NSA" $PORT; then
		kill $srv 2>/dev/null; wait $srv
		sed 's/^/#   srv: /' "$LOG/srv"
		fail "$tool server did not listen on port $PORT"
		return
	fi
	ip netns exec "$NSB" timeout $TO "$tool" -d mroce1 $gflag "$GB" -p $PORT "$@" $IPA \
		> "$LOG/cli" 2>&1
	rc_cli=$?
	wait $srv
	rc_srv=$?
	if [ $rc_cli -ne 0 ] || [ $rc_srv -ne 0 ]; then
		sed 's/^/#   srv: /' "$LOG/srv" | tail -30
		sed 's/^/#   cli: /' "$LOG/cli" | tail -30
		fail "$tool $*: server exit $rc_srv, client exit $rc_cli"
		return
	fi
	ktap_print_msg "$tool $*: $((SECONDS - start)) s"
	return $KSFT_PASS
}

# results: the numeric result lines of the client (perftest: "#bytes #iterations ...").
results() { grep -E '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+[[:space:]]+[0-9.]+' "$LOG/cli"; }

# check_bw SIZES: the client printed a line for each of SIZES with a nonzero average
# bandwidth (column 4, BW average[MB/sec]) or, below 1 KiB, where that rounds to 0.00
# under TCG, a nonzero message rate (column 5, MsgRate[Mpps], which rounds to 0.000000
# for the large sizes). When the host is loaded, perftest's clock estimate can fail
# ("Correlation coefficient r^2: ... < 0.9", on stderr) and a row reads 0.00: zero rows
# of such a run are not held against the device, but some row must show bandwidth.
check_bw() {
	local size line n nonzero=0
	for size in "$@"; do
		line=$(results | awk -v s="$size" '$1 == s')
		[ -n "$line" ] || { sed 's/^/#   cli: /' "$LOG/cli"; fail "no result for $size B"; return; }
		if echo "$line" | awk '{ exit !($1 < 1024 ? $5 > 0 : $4 > 0) }'; then
			nonzero=$((nonzero + 1))
			continue
		fi
		# The warning goes to stderr, so where it lands among the rows varies: any
		# such warning excuses zero rows (a nonzero row is still required below).
		if grep -q 'Correlation coefficient' "$LOG/cli"; then
			ktap_print_msg "perftest could not estimate its clock during the run: the $size B row is not checked"
			continue
		fi
		sed 's/^/#   cli: /' "$LOG/cli"
		fail "zero bandwidth at $size B: $line"
		return
	done
	[ $nonzero -gt 0 ] || { fail "no row with a nonzero bandwidth"; return; }
	ktap_print_msg "$(results | awk 'NR == 1 || $1 == 65536 || $1 == 1048576 || $1 == 8388608 {
		printf "%s B: %s MB/s %s Mpps; ", $1, $4, $5 }')"
	return $KSFT_PASS
}

# check_lat SIZE ITERS: a result line for SIZE and ITERS with a nonzero typical
# latency (column 5: t_typical[usec]).
check_lat() {
	local line
	line=$(results | awk -v s="$1" -v n="$2" '$1 == s && $2 == n')
	[ -n "$line" ] || { sed 's/^/#   cli: /' "$LOG/cli"; fail "no latency result for $1 B"; return; }
	echo "$line" | awk '{ exit !($5 > 0) }' || { fail "zero latency: $line"; return; }
	ktap_print_msg "$(echo "$line" | awk '{printf "%s B: t_typical %s us, t_avg %s us", $1, $5, $6}')"
	return $KSFT_PASS
}

# clock_failed: perftest's clock estimate failed in the last run. Under TCG the cycle
# counter and the wall clock disagree; perftest then says so on stderr ("Correlation
# coefficient r^2: ... < 0.9") and its results read 0, or inf for the latencies.
clock_failed() {
	grep -q 'Correlation coefficient' "$LOG/cli" "$LOG/srv" \
		|| grep -Eq '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+[[:space:]]+(inf|-?nan)' "$LOG/cli"
}

# clocked CHECK ARGS...: runs CHECK (a perftest run and its check, outputs in
# $LOG/cli and $LOG/srv) again, up to twice, while it fails and perftest's clock
# estimate failed (two in a row have failed in CI). Any other failure, or a third
# one, stands.
clocked() {
	local try
	for try in 1 2; do
		"$@" && return
		clock_failed || return $KSFT_FAIL
		ktap_print_msg "perftest could not estimate its clock: running the test again ($try of 2)"
	done
	"$@"
}

# pair_bw TOOL ARGS... -- SIZES / pair_lat TOOL ARGS... -- SIZE ITERS: pair, then
# check_bw / check_lat.
split_args() {
	ARGS=() CHECK=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do ARGS+=("$1"); shift; done
	shift
	CHECK=("$@")
}
pair_bw() { split_args "$@"; pair "${ARGS[@]}" && check_bw "${CHECK[@]}"; }
pair_lat() { split_args "$@"; pair "${ARGS[@]}" && check_lat "${CHECK[@]}"; }
