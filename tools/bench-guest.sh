#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs INSIDE the test VM (see tools/bench): metaroce and rdma_rxe side by side on the
# same machine, each on its own veth pair between the same two namespaces (the two
# drivers share the Soft-RoCE driver id, so they must not share a netdev), and prints
# one line per measurement:
#   RESULT|<test>|<driver>|<value>|<unit>
# Values are perftest's: Gb/s for bandwidth (BW average, --report_gbits), usec for
# latency; for every MTU also iperf3 TCP over metaroce's veth pair (driver "tcp", Gb/s).
#   tools/bench-guest.sh [--quick]
# BENCH_DURATION=SECONDS sets the time per cell (default 4), BENCH_FILTER=REGEX runs only
# the tests whose name matches (an extended regular expression), BENCH_COUNTERS=1 prints
# the metaroce transport counters of both devices after each of its runs, BENCH_REPEAT=N
# (default 5) runs every cell N times, metaroce and rxe alternating, so that the two
# drivers of a pair run back to back (tools/bench reports medians), and
# BENCH_IMPAIRED_REPEAT=N (default 5) does so for the rounds of impaired cells, whose
# goal is a share of another cell and so takes the noise of two.

. "$(dirname "$0")/../selftests/lib.sh"

QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
DURATION=${BENCH_DURATION:-4}
REPEAT=${BENCH_REPEAT:-5}
IMPAIRED_REPEAT=${BENCH_IMPAIRED_REPEAT:-5}
[ $QUICK = 1 ] && DURATION=2 REPEAT=1 IMPAIRED_REPEAT=1

setup() {
	modprobe -a rdma_rxe sch_netem 2>/dev/null
	load_metaroce || return 1
	setup_ns NSA NSB || return 1
	# metaroce: vethA/vethB, 198.18.0.0/24 (lib.sh's veth_pair)
	veth_pair "$NSA" "$NSB" || return 1
	# rxe: vethC/vethD, 198.19.0.0/24
	ip link add vethC netns "$NSA" type veth peer name vethD netns "$NSB" || return 1
	ip -n "$NSA" addr add 198.19.0.1/24 dev vethC
	ip -n "$NSB" addr add 198.19.0.2/24 dev vethD
	ip -n "$NSA" link set vethC up
	ip -n "$NSB" link set vethD up
	ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA || return 1
	ip netns exec "$NSB" rdma link add mroce1 type metaroce netdev vethB || return 1
	ip netns exec "$NSA" rdma link add rxe0 type rxe netdev vethC || return 1
	ip netns exec "$NSB" rdma link add rxe1 type rxe netdev vethD || return 1
	busywait 10000 sh -c "ip netns exec $NSA ibv_devinfo -v -d mroce0 | grep -q ::ffff:198.18.0.1" || return 1
	busywait 10000 sh -c "ip netns exec $NSA ibv_devinfo -v -d rxe0 | grep -q ::ffff:198.19.0.1" || return 1
}

set_mtu() {
	local mtu=$1 dev
	for dev in vethA vethC; do ip -n "$NSA" link set "$dev" mtu "$mtu"; done
	for dev in vethB vethD; do ip -n "$NSB" link set "$dev" mtu "$mtu"; done
}

# netem IMPAIRMENT: impair the requester's egress (data), not the ACKs, on both pairs.
netem() {
	local dev
	for dev in vethA vethC; do
		if [ "$1" = none ]; then
			tc -n "$NSA" qdisc del dev "$dev" root 2>/dev/null
		else
			tc -n "$NSA" qdisc replace dev "$dev" root netem $1 limit 100000
		fi
	done
}

# gid_index DEV NS: the GID index of the IPv4-mapped RoCE v2 GID.
gid_index() {
	local dev=$1 ns=$2 f
	for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
		case "$(cat "$f")" in 0000:0000:0000:0000:0000:ffff:*) basename "$f"; return;; esac
	done
	echo 1
}

# run TEST DRIVER TOOL ARGS...: as run_once, once more when perftest could not estimate
# its clock (under TCG the cycle counter and the wall clock can disagree; it then
# reports 0 or inf). The second result stands.
run() {
	run_once "$@" && return
	echo "# $1 $2: perftest could not estimate its clock (or measured 0), running the cell again"
	FINAL=1 run_once "$@"
}

# run_once TEST DRIVER TOOL ARGS...: server in NSB, client in NSA; prints a RESULT line.
# Unless FINAL=1, fails without printing it when perftest's clock estimate failed.
run_once() {
	local test=$1 driver=$2 tool=$3; shift 3
	local cdev sdev dst to=$((DURATION * 6 + 30)) line value unit
	case $driver in
	metaroce) cdev=mroce0 sdev=mroce1 dst=198.18.0.2;;
	rxe) cdev=rxe0 sdev=rxe1 dst=198.19.0.2;;
	esac
	ip netns exec "$NSB" timeout $to "$tool" -d "$sdev" -x "$(gid_index "$sdev")" -F "$@" \
		> /tmp/bench-srv.out 2>&1 &
	local spid=$!
	busywait 10000 sh -c "ip netns exec $NSB ss -Hltn 'sport = :18515' | grep -q 18515"
	ip netns exec "$NSA" timeout $to "$tool" -d "$cdev" -x "$(gid_index "$cdev")" -F "$@" "$dst" \
		> /tmp/bench-cli.out 2>&1
	local crc=$?
	wait $spid
	line=$(grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/bench-cli.out | tail -1)
	case $tool in
	*_bw)
		# #bytes #iterations BW_peak BW_average MsgRate
		value=$(echo "$line" | awk '{print $4}') unit=Gb/s;;
	*_lat)
		# #bytes #iter t_min t_max t_typical t_avg t_stdev 99% 99.9%
		if [ "$test" != "${test%p99*}" ]; then
			value=$(echo "$line" | awk '{print $8}')
		else
			value=$(echo "$line" | awk '{print $5}')
		fi
		unit=usec;;
	esac
	if [ "${FINAL:-0}" != 1 ] && { grep -q 'Correlation coefficient' /tmp/bench-cli.out \
		/tmp/bench-srv.out || [ "$value" = 0.000000 ]; }; then
		sleep 0.5
		return 1
	fi
	if [ $crc -ne 0 ] || [ -z "$value" ]; then
		echo "# $test $driver failed (exit $crc): $(tail -3 /tmp/bench-cli.out | tr '\n' ' ')"
		value=- 
	fi
	echo "RESULT|$test|$driver|$value|$unit"
	if [ "${BENCH_COUNTERS:-0}" = 1 ] && [ $driver = metaroce ]; then
		for cdev in mroce0 mroce1; do
			echo "# $cdev: $(rdma statistic show link $cdev/1 | tr -s ' ' | cut -d' ' -f3-)"
		done
	fi
	sleep 0.5
}

# selected TEST: whether BENCH_FILTER (if set) matches TEST.
selected() {
	[ -z "${BENCH_FILTER:-}" ] || echo "$1" | grep -Eq -- "$BENCH_FILTER"
}

# tcp TEST: REPEAT runs of iperf3 TCP over metaroce's veth pair (vethA/vethB, at the
# MTU set), server in NSB, client in NSA, for BENCH_DURATION seconds; prints
#   RESULT|<test>|tcp|<receiver Gb/s>|Gb/s
# so that tools/bench can give metaroce/TCP next to metaroce/rxe.
tcp() {
	local test=$1 i to=$((DURATION * 3 + 20)) value
	for i in $(seq "$REPEAT"); do
		ip netns exec "$NSB" timeout $to iperf3 -s -1 -B 198.18.0.2 > /tmp/bench-iperf-srv.out 2>&1 &
		local spid=$!
		busywait 10000 sh -c "ip netns exec $NSB ss -Hltn 'sport = :5201' | grep -q 5201"
		ip netns exec "$NSA" timeout $to iperf3 -c 198.18.0.2 -t "$DURATION" -f g \
			> /tmp/bench-iperf-cli.out 2>&1
		local crc=$?
		wait $spid
		# [ ID] Interval  Transfer  Bitrate  ... receiver
		value=$(awk '/receiver/ { for (i = 2; i <= NF; i++) if ($i == "Gbits/sec") v = $(i - 1) } END { print v }' \
			/tmp/bench-iperf-cli.out)
		if [ $crc -ne 0 ] || [ -z "$value" ]; then
			echo "# $test failed (exit $crc): $(tail -3 /tmp/bench-iperf-cli.out | tr '\n' ' ')"
			value=-
		fi
		echo "RESULT|$test|tcp|$value|Gb/s"
		sleep 0.5
	done
}

# both TEST TOOL ARGS...: REPEAT pairs of runs, metaroce then rxe.
both() {
	local i
	selected "$1" || return
	for i in $(seq "$REPEAT"); do
		run "$1" metaroce "${@:2}"
		run "$1" rxe "${@:2}"
	done
}

if ! setup; then
	echo "# bench setup failed"
	exit 1
fi
echo "# preempt: $(cat /sys/kernel/debug/sched/preempt 2>/dev/null), cpus: $(nproc), duration ${DURATION}s, $REPEAT runs per cell, $IMPAIRED_REPEAT rounds of the netem cells"

SIZES="4096 65536 1048576"
MTUS="1500 9000"
[ $QUICK = 1 ] && SIZES="65536" MTUS="1500"
for mtu in $MTUS; do
	set_mtu "$mtu"
	# TCP at this MTU when it or any bandwidth cell of this MTU is selected.
	want_tcp=0
	for op in write read send; do
		for s in $SIZES; do selected "ib_${op}_bw ${s}B mtu$mtu" && want_tcp=1; done
	done
	selected "iperf3 TCP mtu$mtu" && want_tcp=1
	[ $want_tcp = 1 ] && tcp "iperf3 TCP mtu$mtu"
	for op in write read send; do
		for s in $SIZES; do
			both "ib_${op}_bw ${s}B mtu$mtu" "ib_${op}_bw" --report_gbits -s "$s" -D "$DURATION"
		done
	done
done
set_mtu 1500
both "ib_write_lat 2B typical" ib_write_lat -s 2 -n 2000
both "ib_write_lat 2B p99" ib_write_lat -s 2 -n 2000
both "ib_send_lat 2B typical" ib_send_lat -s 2 -n 2000
both "ib_send_lat 2B p99" ib_send_lat -s 2 -n 2000
# The impaired cells, each against a clean run of the same round: the machine's speed
# drifts over minutes, so a share is taken within one round (tools/bench gives the
# median of the rounds' shares). "loss 0%" is the netem qdisc without impairment: it
# separates what the qdisc costs from what the impairment costs.
IMPAIRMENTS=("none" "loss 0%" "loss 0.1%" "loss 1%" "delay 100us reorder 95%")
[ $QUICK = 1 ] && IMPAIRMENTS=("none" "loss 1%")
for i in $(seq "$IMPAIRED_REPEAT"); do
	for imp in "${IMPAIRMENTS[@]}"; do
		test="ib_write_bw 65536B ${imp/none/clean}"
		selected "$test" || continue
		netem "$imp"
		run "$test" metaroce ib_write_bw --report_gbits -s 65536 -D "$DURATION"
		run "$test" rxe ib_write_bw --report_gbits -s 65536 -D "$DURATION"
		netem none
	done
done
# Delete the devices before their netdevs: rdma_rxe's netdev notifier would otherwise
# take the metaroce devices for its own on NETDEV_UNREGISTER.
for dev in mroce0 mroce1 rxe0 rxe1; do rdma link del "$dev"; done
cleanup_all_ns
