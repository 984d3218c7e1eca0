#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The RC data path through stock tools, server in one namespace and client in the
# other over veth: ibv_rc_pingpong (SEND, with content validation at 1 MiB, and the
# packet size a connection chooses for the link MTU and the QP's path MTU),
# ibv_srq_pingpong (16 and 4 QPs receiving from one shared receive queue), perftest
# WRITE and READ bandwidth over every size from 2 B to 8 MiB (rc_integrity.sh checks
# SENDs of every size byte by byte), WRITE, READ and SEND at 256 KiB with 4 QPs and
# bidirectional, their latency tests, and the atomics (CMP_AND_SWAP,
# FETCH_AND_ADD). Last, WRITE and READ streams while CPU 1 goes offline and online
# again under them (a streaming connection runs on the CPU after the application's).
#
# The device type is a parameter, so the same program checks the comparison peer:
#   MROCE_TYPE=metaroce (default) or MROCE_TYPE=rxe (rdma_rxe, the kernel's Soft-RoCE)
# Iteration counts are small: the VM runs under TCG (rxe moves about 4 MB/s there).

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest.sh"

: "${MROCE_TYPE:=metaroce}"
IPA=198.18.0.1
IPB=198.18.0.2
TO=300           # limit for each command, in seconds
PORT=18600       # each test uses its own TCP port for the out-of-band exchange
LOG=$(mktemp -d /tmp/rc_data.XXXXXX)

trap perftest_cleanup EXIT

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

# test_segment_size ETH_MTU PATH_MTU MIN MAX: 4 exchanges of 1 MiB (-c) over veth at
# ETH_MTU, the QPs asking for PATH_MTU; the client must send MIN to MAX - 1 data
# packets. A QP at the port's active MTU gets all the link MTU leaves after the
# headers (1392 B at 1500, 8892 B at 9000), a QP asking for less what it asked.
# Every packet but each message's last carries 1 KiB or more and goes out
# zero-copy, as pages of the MR (tx_zero_copy).
test_segment_size() {
	local eth=$1 mtu=$2 min=$3 max=$4 before after zc0 zc n rc
	if [ "$MROCE_TYPE" != metaroce ]; then
		ktap_print_msg "counts metaroce's data packets (tx_data)"
		return $KSFT_SKIP
	fi
	ip -n "$NSA" link set vethA mtu "$eth" && ip -n "$NSB" link set vethB mtu "$eth" \
		|| { fail "cannot set MTU $eth"; return; }
	before=$(counter mroce1 tx_data)
	zc0=$(counter mroce1 tx_zero_copy)
	pair ibv_rc_pingpong -m "$mtu" -s 1048576 -n 4 -c
	rc=$?
	after=$(counter mroce1 tx_data)
	zc=$(($(counter mroce1 tx_zero_copy) - zc0))
	ip -n "$NSA" link set vethA mtu 1500 && ip -n "$NSB" link set vethB mtu 1500
	[ $rc -eq $KSFT_PASS ] || return $rc
	grep -qi 'invalid data\|mismatch' "$LOG/cli" "$LOG/srv" && { fail "content check failed"; return; }
	n=$((after - before))
	ktap_print_msg "4 x 1 MiB at MTU $eth, path MTU $mtu: $n data packets, $zc zero-copy"
	[ "$n" -ge "$min" ] && [ "$n" -lt "$max" ] \
		|| { fail "$n data packets, expected $min to $((max - 1))"; return; }
	[ "$zc" -ge $((n - 4)) ] && [ "$zc" -le "$n" ] \
		|| { fail "$zc of $n data packets zero-copy, expected $((n - 4)) or more"; return; }
	return $KSFT_PASS
}

# test_conns_file: while ib_write_bw streams, each device's debugfs `conns` file shows
# its connection to the other (execution context, protocol core) and the bound QP.
test_conns_file() {
	local d=/sys/kernel/debug/metaroce bg rc i
	if [ "$MROCE_TYPE" != metaroce ]; then
		ktap_print_msg "reads metaroce's debugfs"
		return $KSFT_SKIP
	fi
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug \
		|| { fail "cannot mount debugfs"; return; }
	pair ib_write_bw -s 4096 -D 4 -F &
	bg=$!
	# Until the client's QP has sent (or the run is over).
	for i in $(seq 60); do
		sleep 0.25
		cat $d/mroce0/conns > "$LOG/conns0" && cat $d/mroce1/conns > "$LOG/conns1" || break
		grep -q "^  qp " "$LOG/conns0" && grep -qE "^  qp .* seq [1-9]" "$LOG/conns1" && break
	done
	wait $bg
	rc=$?
	next_port # the one the background pair took, in its subshell
	[ $rc -eq $KSFT_PASS ] || return $rc
	sed 's/^/#   mroce1: /' "$LOG/conns1" | cut -c1-160
	grep -q "^conn 0x[0-9a-f]* to $IPB (peer 0x[0-9a-f]*): runs [1-9]" "$LOG/conns0" \
		&& grep -q "^conn 0x[0-9a-f]* to $IPA (peer 0x[0-9a-f]*): runs [1-9]" "$LOG/conns1" \
		|| { fail "no connection to the peer in the conns files"; return; }
	grep -q "^  core: in flight [0-9]* B, ack_pending=" "$LOG/conns1" \
		|| { fail "no protocol core state in mroce1's conns file"; return; }
	grep -qE "^  qp [0-9]+ stream 0: Rts, send ring [0-9]+ \(core holds [0-9]+, seq [1-9]" "$LOG/conns1" \
		|| { fail "no sending QP in mroce1's conns file"; return; }
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

# bw TOOL ARGS...: bandwidth over every size (-a) unless ARGS give a size.
bw_all() { clocked pair_bw "$@" -a -n 5 -F -- $ALL_SIZES; }
# With 4 QPs or both directions, -a takes minutes under TCG: one size, more messages.
bw_q4() { clocked pair_bw "$@" -q 4 -s 262144 -n 20 -F -- 262144; }
bw_bidir() { clocked pair_bw "$@" -b -s 262144 -n 20 -F -- 262144; }
lat() { clocked pair_lat "$@" -s 64 -n 100 -F -- 64 100; }
lat_big() { clocked pair_lat "$@" -s 65536 -n 20 -F -- 65536 20; }
atomic_bw() { clocked pair_bw ib_atomic_bw -A "$1" -n 200 -F -- 8; }
atomic_lat() { clocked pair_lat ib_atomic_lat -A "$1" -n 100 -F -- 8 100; }

# bw_hotplug TOOL: TOOL streams 4 KiB messages for 6 s while CPU 1 goes offline and
# online again every half second.
cpu_flap() { while :; do sleep 0.5; echo 0 > "$1"; sleep 0.5; echo 1 > "$1"; done; }
bw_hotplug() {
	local online=/sys/devices/system/cpu/cpu1/online flap rc
	[ -w $online ] || { ktap_print_msg "CPU 1 cannot go offline here: not tested"; return $KSFT_SKIP; }
	cpu_flap $online &
	flap=$!
	clocked pair_bw "$1" -s 4096 -D 6 -F -- 4096
	rc=$?
	kill $flap
	wait $flap 2>/dev/null
	echo 1 > $online
	[ "$(cat $online)" = 1 ] || { fail "CPU 1 did not come back online"; return; }
	return $rc
}

ktap_print_header
ktap_set_plan 30
if ! perftest_setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_print_msg "device type $MROCE_TYPE; GID index $GA on mroce0, $GB on mroce1"
ktap_test "ibv_rc_pingpong: 1000 SEND exchanges of 4 KiB (the defaults)" test_pingpong
ktap_test "ibv_rc_pingpong: 20 exchanges of 1 MiB with content validation (-c)" test_pingpong_1m_check
ktap_test "segment size: MTU 9000, path MTU 4096 (active): 8892 B per packet" \
	test_segment_size 9000 4096 $((4 * 118)) $((4 * 256))
ktap_test "segment size: MTU 9000, path MTU 1024 (below active): 1024 B per packet" \
	test_segment_size 9000 1024 $((4 * 1024)) $((5 * 1024))
ktap_test "segment size: MTU 1500, path MTU 1024 (active): 1392 B per packet" \
	test_segment_size 1500 1024 $((4 * 754)) $((4 * 1024))
ktap_test "ibv_srq_pingpong: 16 QPs on one SRQ, 200 exchanges of 4 KiB (-c)" test_srq_pingpong 200
ktap_test "ibv_srq_pingpong: 4 QPs on one SRQ of 8, 30 exchanges of 64 KiB (-c)" \
	test_srq_pingpong 30 -q 4 -r 8 -s 65536
ktap_test "ib_write_bw: 2 B .. 8 MiB (-a)" bw_all ib_write_bw
ktap_test "ib_read_bw: 2 B .. 8 MiB (-a)" bw_all ib_read_bw
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
ktap_test "ib_write_bw: 4 KiB for 6 s while CPU 1 goes offline and online" bw_hotplug ib_write_bw
ktap_test "ib_read_bw: 4 KiB for 6 s while CPU 1 goes offline and online" bw_hotplug ib_read_bw
ktap_test "debugfs conns: each side's connection and QP while ib_write_bw streams" test_conns_file
ktap_test "ibv_rc_pingpong after the perftest runs (devices still healthy)" test_pingpong 200
ktap_finished
