#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Faults under traffic (issue 35): while ib_write_bw streams from mroce1 ($NSB) to
# mroce0 ($NSA), and while ibv_rc_pingpong -c checks the content of every message, the
# server's device is deleted, the netdev is deleted, the module is removed, the client
# is killed with SIGKILL, or the client's namespace is deleted under its device. Each
# round checks that a program whose device survived and who has work outstanding ends
# on its own within 60 s (ib_write_bw's client through its completion errors, its
# server through the TCP close), that every program still running then dies of SIGKILL
# (a program busy-polling a removed device, or a ping-pong waiting for a receive from a
# peer that is gone, never learns of it: RC has no keepalive, on any RDMA device; but
# nothing may hang in the kernel), that nothing is left (devices, QPs, connections),
# that a fresh ping-pong with content checks works afterwards, and that the kernel log
# shows no splat.
#
#   FAULT_ROUNDS=N rounds of each fault (default 1, under the program named first for
#   it; 2 runs it under both. CI's 90 minutes hold one.)

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest.sh"

: "${FAULT_ROUNDS:=1}"
MROCE_TYPE=metaroce IPA=198.18.0.1 IPB=198.18.0.2 TO=180 PORT=19500
LOG=$(mktemp -d)
trap perftest_cleanup EXIT

data_flows() { [ "$(counter mroce1 tx_data)" -gt $((SENT_BEFORE + 50)) ]; }

# start_traffic TOOL ARGS...: TOOL's server on mroce0 in $NSA and its client on mroce1
# in $NSB, in the background (SRV and CLI are their PIDs), once data flows.
start_traffic() {
	local tool=$1; shift
	local gflag=-x
	case $tool in ibv_*_pingpong) gflag=-g ;; esac
	next_port
	ip netns exec "$NSA" timeout $TO "$tool" -d mroce0 $gflag "$GA" -p $PORT "$@" \
		> "$LOG/srv" 2>&1 &
	SRV=$!
	busywait 30000 listening "$NSA" $PORT || { fail "$tool server did not listen"; return 1; }
	ip netns exec "$NSB" timeout $TO "$tool" -d mroce1 $gflag "$GB" -p $PORT "$@" $IPA \
		> "$LOG/cli" 2>&1 &
	CLI=$!
	# Data flows once the client's device has sent some.
	SENT_BEFORE=$(counter mroce1 tx_data)
	busywait 30000 data_flows ||
		{ fail "$tool moved no data"; sed 's/^/#   cli: /' "$LOG/cli" | tail -5; return 1; }
}

# ended PID...: every PID exits by itself within 60 s ($TO, the programs' own bound,
# is longer, so it cannot hide a hang).
ended() {
	local pid
	for pid in "$@"; do
		if ! busywait 60000 sh -c "! kill -0 $pid 2>/dev/null"; then
			sed 's/^/#   srv: /' "$LOG/srv" | tail -5
			sed 's/^/#   cli: /' "$LOG/cli" | tail -5
			fail "process $pid still runs 60 s after the fault"
			return 1
		fi
	done
	return 0
}

# reaped PID...: each PID (a `timeout` around a program) and its program die of SIGKILL
# within 10 s: nothing sleeps uninterruptibly in the driver.
reaped() {
	local pid p
	for pid in "$@"; do
		for p in $(pgrep -P "$pid") "$pid"; do
			kill -KILL "$p" 2>/dev/null
			busywait 10000 sh -c "! kill -0 $p 2>/dev/null" ||
				{ fail "process $p survived SIGKILL: $(head -5 /proc/$p/stack 2>/dev/null)"; return 1; }
		done
		wait "$pid" 2>/dev/null
	done
	return 0
}

# healthy: a fresh pair of devices (re-created when the fault removed them) has no QP
# or connection left, and a content-checked ping-pong works.
healthy() {
	if ! rdma_dev_exists mroce0 || ! rdma_dev_exists mroce1; then
		cleanup_devices_and_ns
		perftest_setup || { fail "re-creating the devices failed"; return 1; }
	fi
	busywait 20000 no_rc_qps ||
		{ fail "RC QPs left: $(rdma resource show qp | grep 'type RC')"; return 1; }
	busywait 20000 no_conn mroce0 ||
		{ fail "mroce0 still has a connection"; return 1; }
	pair ibv_rc_pingpong -s 4096 -n 50 -c >/dev/null || { fail "ping-pong after the fault"; return 1; }
}

# fault_rounds NAME FIRST: FAULT_ROUNDS rounds of fault_NAME, alternately under
# ib_write_bw and under ibv_rc_pingpong -c with 64 KiB messages, FIRST (write_bw or
# pingpong) first. fault_NAME sets SURVIVORS, the ib_write_bw programs that must end by
# themselves.
fault_rounds() {
	local name=$1 first=$2 round t0 t1 times=()
	cleanup_devices_and_ns
	perftest_setup || { fail "setup failed"; return; }
	for round in $(seq "$FAULT_ROUNDS"); do
		local write_bw=$((round % 2))
		[ "$first" = write_bw ] || write_bw=$((1 - write_bw))
		if [ $write_bw = 1 ]; then
			start_traffic ib_write_bw -s 65536 -D 20 || return
		else
			start_traffic ibv_rc_pingpong -s 65536 -n 100000 -c || return
		fi
		SURVIVORS=()
		t0=$(date +%s%1N)
		"fault_$name" || { fail "round $round: the fault itself failed"; return; }
		if [ $write_bw = 1 ] && [ ${#SURVIVORS[@]} -gt 0 ]; then
			ended "${SURVIVORS[@]}" || { fail "round $round"; return; }
			t1=$(date +%s%1N)
			times+=("$(((t1 - t0) / 10)).$(((t1 - t0) % 10))")
		fi
		reaped $SRV $CLI || { fail "round $round"; return; }
		healthy || { fail "round $round"; return; }
	done
	ktap_print_msg "rounds: $FAULT_ROUNDS; seconds from the fault until ib_write_bw's survivor ended: ${times[*]:-none survives this fault}"
	cleanup_devices_and_ns
	return $KSFT_PASS
}

# The client (mroce1) survives: its writes fail with retries exhausted.
fault_link_del() { SURVIVORS=($CLI); rdma link del mroce0; }

fault_netdev_del() { ip -n "$NSA" link del vethA; }

fault_rmmod() {
	timeout 60 rmmod metaroce || return 1
	load_metaroce
}

# kill_client: SIGKILL to the client program itself (CLI is the `timeout` around it).
kill_client() {
	pkill -KILL -P "$CLI"
	kill -KILL "$CLI" 2>/dev/null
	return 0
}

# The server survives: its peer's TCP connection closes.
fault_kill() { SURVIVORS=($SRV); kill_client; }

# The namespace of the client loses its name at once; it goes (and with it vethB, its
# peer vethA and both devices) when its last process, the client, is killed.
fault_netns_del() {
	ip netns del "$NSB" || return 1
	kill_client
	busywait 20000 rdma_dev_gone mroce1 || { ktap_print_msg "mroce1 survived its namespace"; return 1; }
	busywait 20000 rdma_dev_gone mroce0
}

ktap_print_header
ktap_set_plan 5
ktap_test "rdma link del of the server's device under traffic (rounds: $FAULT_ROUNDS)" fault_rounds link_del write_bw
ktap_test "deleting the netdev under traffic (rounds: $FAULT_ROUNDS)" fault_rounds netdev_del pingpong
ktap_test "rmmod metaroce under traffic (rounds: $FAULT_ROUNDS)" fault_rounds rmmod pingpong
ktap_test "kill -9 of the client under traffic (rounds: $FAULT_ROUNDS)" fault_rounds kill write_bw
ktap_test "the client's namespace deleted under its device and traffic (rounds: $FAULT_ROUNDS)" fault_rounds netns_del write_bw
ktap_finished
