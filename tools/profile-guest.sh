#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs INSIDE the test VM: where the CPU time goes while metaroce, rdma_rxe and TCP
# (iperf3) move data over a veth pair between two namespaces, and what a byte costs.
#   tools/vm-run --bench -t 900 'tools/profile-guest.sh'
# For each of metaroce, rxe and tcp: one run of PROFILE_SECONDS (default 6) with
#  - the busy CPU time of the whole guest (both sides, all CPUs: user, system, irq and
#    softirq from /proc/stat) over the middle of the run (timed by the clock: perf's
#    start and stop stretch it), divided by the bytes moved there at the run's
#    average rate: "CPU ns per byte"; and, where the guest has a cycle counter
#    (`perf stat -e cycles`; QEMU's TCG has none), cycles per byte the same way;
#  - `perf record -a` (cpu-clock sampling, which works without a PMU) over the same
#    window and the top PROFILE_TOP (default 25) symbols.
# PROFILE_SIZE (default 65536), PROFILE_MTU (default 1500), PROFILE_TOOL (default
# ib_write_bw), PROFILE_DRIVERS (default "metaroce rxe tcp"), METAROCE_PARAMS (module
# parameters) as for tools/bench.

. "$(dirname "$0")/../selftests/lib.sh"

SECONDS_RUN=${PROFILE_SECONDS:-6}
SIZE=${PROFILE_SIZE:-65536}
MTU=${PROFILE_MTU:-1500}
TOOL=${PROFILE_TOOL:-ib_write_bw}
TOP=${PROFILE_TOP:-25}
PERF=$(command -v perf)

modprobe -a rdma_rxe 2>/dev/null
load_metaroce || exit 1
setup_ns NSA NSB || exit 1
veth_pair "$NSA" "$NSB" || exit 1
ip -n "$NSA" link set vethA mtu "$MTU"
ip -n "$NSB" link set vethB mtu "$MTU"
echo 0 > /proc/sys/kernel/kptr_restrict
echo -1 > /proc/sys/kernel/perf_event_paranoid
if [ -n "$PERF" ] && "$PERF" stat -e cycles -x, -o /tmp/prof-probe true 2>/dev/null &&
	! grep -q 'not supported\|not counted' /tmp/prof-probe; then
	CYCLES=1
else
	CYCLES=0
fi
echo "# perf: ${PERF:-none}; cycle counter: $([ $CYCLES = 1 ] && echo yes || echo 'no (CPU time only)')"

# busy_jiffies: user+nice+system+irq+softirq of all CPUs, in USER_HZ ticks.
busy_jiffies() {
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat
}

# measure DRIVER: samples the middle of a run that started a moment ago.
measure() {
	local driver=$1 w=$((SECONDS_RUN - 2)) b0 b1 t0 t1
	sleep 1
	b0=$(busy_jiffies) t0=$(date +%s%N)
	if [ $CYCLES = 1 ]; then
		"$PERF" stat -a -e cycles -x, -o /tmp/prof-cycles-"$driver" -- \
			"$PERF" record -a -e cpu-clock -F 997 -o /tmp/prof-"$driver".data -- sleep "$w" \
			> /dev/null 2>&1
	else
		"$PERF" record -a -e cpu-clock -F 997 -o /tmp/prof-"$driver".data -- sleep "$w" \
			> /dev/null 2>&1
	fi
	b1=$(busy_jiffies) t1=$(date +%s%N)
	# The window as it was: perf starting and stopping under TCG takes seconds.
	echo "$((b1 - b0)) $(((t1 - t0) / 1000000))" > /tmp/prof-busy-"$driver"
}

# report DRIVER GBPS: cost per byte and the top symbols.
report() {
	local driver=$1 gbps=$2 busy ms w cycles=-
	read -r busy ms < /tmp/prof-busy-"$driver"
	w=$(awk -v ms="$ms" 'BEGIN { print ms / 1000 }')
	[ $CYCLES = 1 ] && cycles=$(awk -F, '$3 ~ /cycles/ { print $1 }' /tmp/prof-cycles-"$driver")
	awk -v d="$driver" -v g="$gbps" -v b="$busy" -v w="$w" -v c="$cycles" -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" 'BEGIN {
		bytes = g * 1e9 / 8 * w
		if (bytes <= 0) { printf "COST|%s|%s Gb/s|-|-|-\n", d, g; exit }
		cpu = b / hz
		printf "COST|%s|%.3f Gb/s|%.1f%% of %d CPUs over %.1f s|%.2f CPU ns/B|%s\n", d, g,
			100 * cpu / w / n, n, w, cpu * 1e9 / bytes, c == "-" ? "cycles/B -" : sprintf("%.2f cycles/B", c / bytes)
	}'
	echo "# top symbols, $driver ($TOOL ${SIZE}B mtu$MTU, cpu-clock samples of the whole guest):"
	"$PERF" report -i /tmp/prof-"$driver".data --no-children --sort sym --stdio 2>/dev/null |
		grep -v '^#' | grep -v '^$' | head -"$TOP"
}

rdma_run() {
	local driver=$1 cdev sdev dst line
	case $driver in
	metaroce) cdev=mroce0 sdev=mroce1 dst=198.18.0.2;;
	rxe) cdev=rxe0 sdev=rxe1 dst=198.18.0.2;;
	esac
	ip netns exec "$NSA" rdma link add "$cdev" type "$driver" netdev vethA || return 1
	ip netns exec "$NSB" rdma link add "$sdev" type "$driver" netdev vethB || return 1
	busywait 10000 sh -c "ip netns exec $NSA ibv_devinfo -v -d $cdev | grep -q ::ffff:198.18.0.1" || return 1
	ip netns exec "$NSB" timeout 60 "$TOOL" -d "$sdev" -x "$(gid_index "$NSB" "$sdev" 198.18.0.2)" \
		-F --report_gbits -s "$SIZE" -D "$SECONDS_RUN" > /tmp/prof-srv.out 2>&1 &
	local spid=$!
	busywait 10000 sh -c "ip netns exec $NSB ss -Hltn 'sport = :18515' | grep -q 18515"
	ip netns exec "$NSA" timeout 60 "$TOOL" -d "$cdev" -x "$(gid_index "$NSA" "$cdev" 198.18.0.1)" \
		-F --report_gbits -s "$SIZE" -D "$SECONDS_RUN" "$dst" > /tmp/prof-cli.out 2>&1 &
	local cpid=$!
	measure "$driver"
	wait "$cpid"
	wait "$spid"
	line=$(grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/prof-cli.out | tail -1)
	[ "$driver" = metaroce ] && for d in mroce0 mroce1; do
		echo "# $d: $(rdma statistic show link $d/1 | tr -s ' ' | cut -d' ' -f3-)"
	done
	rdma link del "$cdev"
	rdma link del "$sdev"
	report "$driver" "$(echo "$line" | awk '{print $4}')"
}

tcp_run() {
	local value
	ip netns exec "$NSB" timeout 60 iperf3 -s -1 -B 198.18.0.2 > /tmp/prof-iperf-srv.out 2>&1 &
	local spid=$!
	busywait 10000 sh -c "ip netns exec $NSB ss -Hltn 'sport = :5201' | grep -q 5201"
	ip netns exec "$NSA" timeout 60 iperf3 -c 198.18.0.2 -t "$SECONDS_RUN" -f g \
		> /tmp/prof-iperf-cli.out 2>&1 &
	local cpid=$!
	measure tcp
	wait "$cpid"
	wait "$spid"
	value=$(awk '/receiver/ { for (i = 2; i <= NF; i++) if ($i == "Gbits/sec") v = $(i - 1) } END { print v }' \
		/tmp/prof-iperf-cli.out)
	report tcp "${value:-0}"
}

for d in ${PROFILE_DRIVERS:-metaroce rxe tcp}; do
	case $d in
	tcp) tcp_run;;
	*) rdma_run "$d";;
	esac
done
cleanup_all_ns
