#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The RC data path through stock tools, server in one namespace and client in the
# other over veth: ibv_rc_pingpong (SEND, with content validation at 1 MiB),
# ibv_srq_pingpong (16 and 4 QPs receiving from one shared receive queue), perftest
# WRITE, READ and SEND bandwidth over every size from 2 B to 8 MiB, then at 256 KiB
# with 4 QPs and bidirectional, their latency tests, and the atomics (CMP_AND_SWAP,
# FETCH_AND_ADD).
#
# The device type is a parameter, so the same program checks the comparison peer:
#   MROCE_TYPE=metaroce (default) or MROCE_TYPE=rxe (rdma_rxe, the kernel's Soft-RoCE)
# Iteration counts are small: the VM runs under TCG (rxe moves about 4 MB/s there).

. "$(dirname "$0")/lib.sh"

: "${MROCE_TYPE:=metaroce}"
IPA=198.18.0.1
IPB=198.18.0.2
TO=300           # limit for each command, in seconds
PORT=18600       # each test uses its own TCP port for the out-of-band exchange
LOG=$(mktemp -d /tmp/rc_data.XXXXXX)

cleanup() {
	cleanup_devices_and_ns
	rm -rf "$LOG"
}
trap cleanup EXIT

setup() {
	load_rdma_type "$MROCE_TYPE" || return 1
	setup_ns NSA NSB || return 1
	veth_pair "$NSA" "$NSB" || return 1
	create_pair "$MROCE_TYPE" && wait_pair_gids || return 1
	GA=$(gid_index "$NSA" mroce0 $IPA)
	GB=$(gid_index "$NSB" mroce1 $IPB)
	[ -n "$GA" ] && [ -n "$GB" ]
}

next_port() { PORT=$((PORT + 1)); }

# listening NS PORT: a TCP socket listens on PORT in NS (the server is ready).
listening() { ip netns exec "$1" ss -Htln "sport = :$2" | grep -q .; }

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

ALL_SIZES=$(for i in $(seq 1 23); do echo $((1 << i)); done)

# test_pingpong [ITERS]: 4 KiB SEND exchanges, 1000 (the default) unless ITERS.
test_pingpong() {
	local n=${1:-1000}
	pair ibv_rc_pingpong ${1:+-n $1} || return
	grep -q "$n iters in" "$LOG/cli" || { fail "client did not complete $n iterations"; return; }
	grep -q "$n iters in" "$LOG/srv" || { fail "server did not complete $n iterations"; return; }
	ktap_print_msg "$(grep 'bytes in' "$LOG/cli")"
	return $KSFT_PASS
}

test_pingpong_1m_check() {
	pair ibv_rc_pingpong -s 1048576 -n 20 -c || return
	grep -q '20 iters in' "$LOG/cli" && grep -q '20 iters in' "$LOG/srv" \
		|| { fail "20 iterations not completed"; return; }
	# -c: each side fills its buffer with a known pattern and checks what it receives.
	grep -qi 'invalid data\|mismatch' "$LOG/cli" "$LOG/srv" && { fail "content check failed"; return; }
	ktap_print_msg "$(grep 'bytes in' "$LOG/cli")"
	return $KSFT_PASS
}

# test_srq_pingpong ITERS ARGS...: ibv_srq_pingpong, its QPs (16 by default) sharing
# one SRQ on each side, with content validation.
test_srq_pingpong() {
	local n=$1; shift
	pair ibv_srq_pingpong -n "$n" -c "$@" || return
	grep -q "$n iters in" "$LOG/cli" && grep -q "$n iters in" "$LOG/srv" \
		|| { fail "$n iterations not completed"; return; }
	grep -qi 'invalid data\|mismatch\|Failed status' "$LOG/cli" "$LOG/srv" && { fail "content check failed"; return; }
	ktap_print_msg "$(grep 'bytes in' "$LOG/cli")"
	return $KSFT_PASS
}

# clocked CHECK ARGS...: runs CHECK (a perftest run and its check) once more when it
# failed and perftest said its clock estimate failed (under TCG on a loaded host the
# cycle counter and the wall clock disagree; results then read 0 or inf). A failure
# of the retry stands.
clocked() {
	"$@" && return
	grep -q 'Correlation coefficient' "$LOG/cli" "$LOG/srv" || return $KSFT_FAIL
	ktap_print_msg "perftest could not estimate its clock: running the test once more"
	"$@"
}

# bw TOOL ARGS...: bandwidth over every size (-a) unless ARGS give a size.
bw_all() { clocked pair_bw "$@" -a -n 5 -F -- $ALL_SIZES; }
# With 4 QPs or both directions, -a takes minutes under TCG: one size, more messages.
bw_q4() { clocked pair_bw "$@" -q 4 -s 262144 -n 20 -F -- 262144; }
bw_bidir() { clocked pair_bw "$@" -b -s 262144 -n 20 -F -- 262144; }
lat() { clocked pair_lat "$@" -s 64 -n 100 -F -- 64 100; }
lat_big() { clocked pair_lat "$@" -s 65536 -n 20 -F -- 65536 20; }
atomic_bw() { clocked pair_bw ib_atomic_bw -A "$1" -n 200 -F -- 8; }
atomic_lat() { clocked pair_lat ib_atomic_lat -A "$1" -n 100 -F -- 8 100; }

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

ktap_print_header
ktap_set_plan 25
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_print_msg "device type $MROCE_TYPE; GID index $GA on mroce0, $GB on mroce1"
ktap_test "ibv_rc_pingpong: 1000 SEND exchanges of 4 KiB (the defaults)" test_pingpong
ktap_test "ibv_rc_pingpong: 20 exchanges of 1 MiB with content validation (-c)" test_pingpong_1m_check
ktap_test "ibv_srq_pingpong: 16 QPs on one SRQ, 200 exchanges of 4 KiB (-c)" test_srq_pingpong 200
ktap_test "ibv_srq_pingpong: 4 QPs on one SRQ of 8, 30 exchanges of 64 KiB (-c)" \
	test_srq_pingpong 30 -q 4 -r 8 -s 65536
ktap_test "ib_write_bw: 2 B .. 8 MiB (-a)" bw_all ib_write_bw
ktap_test "ib_read_bw: 2 B .. 8 MiB (-a)" bw_all ib_read_bw
ktap_test "ib_send_bw: 2 B .. 8 MiB (-a)" bw_all ib_send_bw
ktap_test "ib_write_bw: 4 QPs, 256 KiB" bw_q4 ib_write_bw
ktap_test "ib_read_bw: 4 QPs, 256 KiB" bw_q4 ib_read_bw
ktap_test "ib_send_bw: 4 QPs, 256 KiB" bw_q4 ib_send_bw
ktap_test "ib_send_bw: 4 QPs receiving from one SRQ (--use-srq), 256 KiB" bw_q4 ib_send_bw --use-srq
ktap_test "ib_write_bw: bidirectional, 256 KiB" bw_bidir ib_write_bw
ktap_test "ib_read_bw: bidirectional, 256 KiB" bw_bidir ib_read_bw
ktap_test "ib_send_bw: bidirectional, 256 KiB" bw_bidir ib_send_bw
ktap_test "ib_write_lat: 64 B" lat ib_write_lat
ktap_test "ib_read_lat: 64 B" lat ib_read_lat
ktap_test "ib_send_lat: 64 B" lat ib_send_lat
ktap_test "ib_write_lat: 64 KiB" lat_big ib_write_lat
ktap_test "ib_read_lat: 64 KiB" lat_big ib_read_lat
ktap_test "ib_send_lat: 64 KiB" lat_big ib_send_lat
ktap_test "ib_atomic_bw: CMP_AND_SWAP" atomic_bw CMP_AND_SWAP
ktap_test "ib_atomic_bw: FETCH_AND_ADD" atomic_bw FETCH_AND_ADD
ktap_test "ib_atomic_lat: CMP_AND_SWAP" atomic_lat CMP_AND_SWAP
ktap_test "ib_atomic_lat: FETCH_AND_ADD" atomic_lat FETCH_AND_ADD
ktap_test "ibv_rc_pingpong after the perftest runs (devices still healthy)" test_pingpong 200
ktap_finished
