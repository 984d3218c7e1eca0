#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs INSIDE the test VM (see tools/bench-fabric): metaroce and rdma_rxe on the same
# routed fabric (selftests/lib_fabric.sh: 8 senders, 4 shaped ECMP links, 1 receiver),
# and prints
#   RESULT|<cell>|<driver>|<value>|<unit>|<note>     one measurement
#   SERIES|<name>|<t seconds>|<value>                 a time series point (Mbit/s)
#   INFO|<key>|<value>                                the run's settings
# Bandwidth is perftest's BW average in MB/s (10^6 bytes/s), link rates in Mbit/s.
#   tools/bench-fabric-guest.sh [--quick]
# BENCH_DURATION (seconds per cell, default 8; 4 with --quick; incast clients run twice
# as long), FABRIC_RATE (per link), FABRIC_BURST_MS (the shaper's bucket), FABRIC_MTU
# (lib_fabric.sh).

. "$(dirname "$0")/../selftests/lib.sh"
. "$(dirname "$0")/../selftests/lib_fabric.sh"

QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
D=${BENCH_DURATION:-8}
[ $QUICK = 1 ] && D=${BENCH_DURATION:-4}
DI=$((2 * D))
K=4
N=8
[ $QUICK = 1 ] && N=4
INCAST="4 8"
[ $QUICK = 1 ] && INCAST="4"
LOG=$(mktemp -d /tmp/bench-fabric.XXXXXX)
PORT=19000
SAMPLE=0.2
HINTS=/sys/module/metaroce/parameters/rate_hints
CAPACITY=/sys/module/metaroce/parameters/rx_capacity_mbps
trap 'kill_sampler; fabric_down; rm -rf "$LOG"' EXIT

drv_plane() { case $1 in metaroce) echo mr;; rxe) echo rx;; esac; }
mbps() { awk -v b="$1" 'BEGIN { printf "%.2f", b * 8 / 1e6 }'; }

# sampler NAME DEV...: every $SAMPLE s, r1's byte counters of DEV (lI: tx, hI: rx)
# into $LOG/NAME.samples ("epoch-seconds bytes bytes ..."), until kill_sampler.
SAMPLER=
sampler() {
	local name=$1; shift
	ip netns exec "$(fab_ns r1)" bash -c '
		out=$1 period=$2; shift 2; files=()
		for d in "$@"; do
			case $d in l*) files+=("/sys/class/net/$d/statistics/tx_bytes");;
			*) files+=("/sys/class/net/$d/statistics/rx_bytes");; esac
		done
		while :; do
			line=$EPOCHREALTIME
			for f in "${files[@]}"; do read -r v < "$f"; line+=" $v"; done
			echo "$line"
			sleep "$period"
		done > "$out"' _ "$LOG/$name.samples" "$SAMPLE" "$@" &
	SAMPLER=$!
}
kill_sampler() { [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null && wait "$SAMPLER" 2>/dev/null; SAMPLER=; }

# series NAME LABEL...: SERIES lines (Mbit/s between samples) from $LOG/NAME.samples,
# one series NAME/LABEL per column, time in seconds since T0 (epoch seconds). The
# columns start after the first SKIP ones (default 0); FILE overrides the samples file.
series() {
	local name=$1; shift
	awk -v n="$name" -v labels="$*" -v t0="$T0" -v skip="${SKIP:-0}" '
		BEGIN { k = split(labels, lab, " ") }
		NR > 1 { for (i = 1; i <= k; i++) {
			r = ($(i + 1 + skip) - prev[i]) * 8 / 1e6 / ($1 - pt)
			printf "SERIES|%s/%s|%.3f|%.3f\n", n, lab[i], $1 - t0, r } }
		{ pt = $1; for (i = 1; i <= k; i++) prev[i] = $(i + 1 + skip) }' "${FILE:-$LOG/$name.samples}"
}

# Timing paths during a transfer use builtins and tc only (lib_fabric.sh,
# fabric_r1_park): naps, r1's counters and the path state read with `read`.
nap() { fabric_nap "$@"; }
# us: $EPOCHREALTIME in microseconds into US.
us() { US=${EPOCHREALTIME/./}; }

# paths_save WHEN: the driver's per-path state (debugfs) into $LOG/paths-WHEN, read
# with builtins; paths_print WHEN prints it.
paths_save() {
	local f line out=""
	for f in /sys/kernel/debug/metaroce/*/paths; do
		[ -e "$f" ] || { out+="no $f: $(echo /sys/kernel/debug/metaroce/*)"$'\n'; continue; }
		while IFS= read -r line; do out+="$f:$line"$'\n'; done < "$f"
	done
	printf '%s' "$out" > "$LOG/paths-$1"
}
paths_print() {
	[ -s "$LOG/paths-$1" ] || { echo "# paths $1: empty"; return 0; }
	sed "s|^/sys/kernel/debug/metaroce/\([^/]*\)/paths:|# paths $1 \1: |" "$LOG/paths-$1"
}

# paths_mid: once s1's connection has sent data, half a cell later, every device's
# per-path state into $LOG/paths-mid (builtins only, see fabric_r1_park).
paths_mid() {
	local j line f=/sys/kernel/debug/metaroce/mrs1/paths
	rm -f "$LOG/paths-mid"
	for ((j = 0; j < 150; j++)); do
		while IFS= read -r line; do
			[[ $line == *" sent "[1-9]* ]] && break 2
		done < "$f"
		nap 0.2
	done
	nap $((D / 2))
	paths_save mid
}

# paths_links CELL: s1's paths in $LOG/paths-mid, each with the link its port takes.
paths_links() {
	local line sport
	grep '/mrs1/paths:.* sport ' "$LOG/paths-mid" 2>/dev/null | while IFS= read -r line; do
		sport=${line#* sport } sport=${sport%% *}
		echo "# paths mid-transfer, $1: ${line#*/paths:} link $(fabric_udp_link "$sport" 4793 1)"
	done
}

# bw CELL DRIVER LINKS ARGS...: one ib_write_bw 64 KiB from s1 to d1 over LINKS links;
# RESULT in MB/s, the links' share in the note; metaroce's paths mid-transfer, each
# with its link.
bw() {
	local cell=$1 drv=$2 links=$3 before after v note; shift 3
	PORT=$((PORT + 1))
	before=$(fabric_links_tx)
	fabric_perf_bg "$(drv_plane "$drv")" 1 4 $PORT "$LOG/cli" ib_write_bw -s 65536 -D "$D" "$@"
	[ "$drv" = metaroce ] && paths_mid
	fabric_perf_wait || echo "# $cell $drv: perftest failed: $(tail -2 "$LOG/cli" | tr '\n' ' ')"
	[ "$drv" = metaroce ] && paths_links "$cell"
	after=$(fabric_links_tx)
	v=$(fabric_bw "$LOG/cli")
	note=$(paste <(echo "$before" | tr ' ' '\n') <(echo "$after" | tr ' ' '\n') |
		awk -v l="$links" '{ d[NR] = $2 - $1; t += d[NR] } END {
			for (i = 1; i <= NR; i++) if (t && d[i] * 20 >= t) n++
			printf "links used %d of %d:", n, l
			for (i = 1; i <= NR; i++) printf " %.0f%%", t ? 100 * d[i] / t : 0 }')
	echo "RESULT|$cell|$drv|${v:--}|MB/s|${BW_NOTE:-}$note"
}

# cell_bw: K=1 against K=4, 1 QP and 4 QPs.
cell_bw() {
	local drv q
	for q in 1 4; do
		for drv in metaroce rxe; do
			fabric_use_links 1; sleep 0.5
			bw "bw K=1 ${q}QP" $drv 1 -q $q
			fabric_use_links $K; sleep 0.5
			bw "bw K=$K ${q}QP" $drv $K -q $q
		done
	done
}

# cell_burst: one QP over one link, and one TCP stream (iperf3) for comparison, with
# the shaper's bucket at 2 ms of the rate and at 20 ms: under TCG the qdisc's timer
# and softirq run late while perftest polls, and a small bucket cannot catch up.
cell_burst() {
	local ms tcp keep=$FABRIC_BURST_MS
	fabric_use_links 1
	ip netns exec "$FABNS_d1" iperf3 -s -D -p 5202 >/dev/null 2>&1
	sleep 1
	for ms in 2 20; do
		fabric_set_burst $ms
		sleep 0.5
		tcp=$(ip netns exec "$FABNS_s1" iperf3 -c "$(fab_addr mr d 1 4)" -p 5202 -t "$D" -f m 2>&1 |
			awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") v = $i } END { printf "%.2f", v / 8 }')
		BW_NOTE="TCP (iperf3, 1 stream) on the same link: $tcp MB/s; " \
			bw "bw K=1 1QP, tbf burst $ms ms" metaroce 1
	done
	ip netns exec "$FABNS_d1" pkill -x iperf3
	fabric_set_burst "$keep"
	fabric_use_links $K
}

# cell_delay: 10 ms on every link, both ways.
cell_delay() {
	local i drv
	for i in $(seq $K); do fabric_link_impair "$i" delay 10ms; done
	for drv in metaroce rxe; do bw "bw K=$K 1QP, 10 ms delay per link" $drv $K; done
	for i in $(seq $K); do fabric_link_clear "$i"; done
}

# cell_lossy: 1% loss on one link (both ways).
cell_lossy() {
	local drv
	fabric_link_impair 2 loss 1%
	for drv in metaroce rxe; do bw "bw K=$K 1QP, 1% loss on l2" $drv $K; done
	fabric_link_clear 2
}

# cell_hot: an unresponsive UDP flow (iperf3 -u at the link rate) pinned to l2 by its
# source port, from s2 to d1.
cell_hot() {
	local drv sport hot rate_m
	rate_m=$(($(fab_rate_bps) / 1000000))
	for sport in $(seq 40000 40100); do
		[ "$(fabric_udp_link "$sport" 5201 2)" = l2 ] && break
	done
	echo "# hot flow: s2 UDP $sport -> d1:5201 takes $(fabric_udp_link "$sport" 5201 2)"
	ip netns exec "$(fab_ns d1)" iperf3 -s -D -p 5201 >/dev/null 2>&1
	sleep 1
	for drv in metaroce rxe; do
		ip netns exec "$(fab_ns s2)" iperf3 -c "$(fab_addr mr d 1 4)" -p 5201 -u -b "${rate_m}M" \
			-l 1400 --cport "$sport" -t $((D + 6)) -f m > "$LOG/hot" 2>&1 &
		local hp=$!
		sleep 2
		bw "bw K=$K 1QP, hot UDP flow on l2" $drv $K
		wait $hp
		hot=$(awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") v = $i } END { print v + 0 }' "$LOG/hot")
		echo "RESULT|hot flow received|$drv|$hot|Mbit/s|capacity left $(( K * rate_m )) - $hot Mbit/s"
	done
	ip netns exec "$FABNS_d1" pkill -x iperf3
}

# cell_blackhole: the busiest link of a 1-QP transfer blackholed 2 s after the first
# data, for the rest of a $BH s transfer; per-link rates sampled every $SAMPLE s. From
# the start of perftest to the fault only builtins and one tc run (see fabric_r1_park).
cell_blackhole() {
	local drv link labels t0 t_data t_fault d
	labels=$(seq $K | sed 's/^/l/' | tr '\n' ' ')
	fabric_r1_park
	for drv in metaroce rxe; do
		PORT=$((PORT + 1))
		sampler "bh-$drv" $labels
		nap 0.5
		us; t0=$US
		fabric_perf_bg "$(drv_plane "$drv")" 1 4 $PORT "$LOG/cli" ib_write_bw -s 65536 -D "$BH"
		# perftest's setup takes seconds under TCG: time the fault from the first
		# data on the links, not from the command's start.
		fabric_wait_data
		us; t_data=$US
		fabric_busiest_link
		link=$FABRIC_BUSIEST
		[ "$drv" = metaroce ] && paths_save before
		# 2 s after the data started.
		us; d=$((t_data + 2000000 - US))
		((d > 0)) && { printf -v d '%d.%06d' $((d / 1000000)) $((d % 1000000)); nap "$d"; }
		# The fault: r1's end (the data direction) first, one tc each; the link's
		# shaper and queue come back with fabric_link_clear after the transfer.
		us; t_fault=$US
		tc -n "$FABNS_r1" qdisc replace dev "l$link" root handle 5: netem loss 100% limit 100000
		tc -n "$FABNS_r2" qdisc replace dev "l$link" root handle 5: netem loss 100% limit 100000
		nap 3
		[ "$drv" = metaroce ] && paths_save after
		fabric_perf_wait || echo "# blackhole $drv: perftest failed: $(tail -3 "$LOG/cli" | tr '\n' ' ')"
		kill_sampler
		fabric_link_clear "$link"
		[ "$drv" = metaroce ] && { paths_save end; paths_print before; paths_print after; paths_print end; }
		sec() { printf '%d.%03d' $(($1 / 1000000)) $(($1 % 1000000 / 1000)); }
		echo "INFO|blackhole $drv fault_after_data|$(sec $((t_fault - t_data)))"
		echo "INFO|blackhole $drv fault_t|$(sec $((t_fault - t0)))"
		echo "INFO|blackhole $drv link|l$link"
		echo "INFO|blackhole $drv data_t|$(sec $((t_data - t0)))"
		T0=$(sec "$t0") series "bh-$drv" $labels
		v=$(fabric_bw "$LOG/cli")
		echo "RESULT|blackhole 1QP ${BH}s, busiest link lost 2 s after the first data|$drv|${v:--}|MB/s|perftest's average over the run"
	done
}

# rx_counts: metaroce's d1 packets received, the duplicates among them and those it
# dropped (hw counters), space-separated. rxe's counters cannot say as much: it counts
# one out-of-sequence packet per NAK and drops the rest of a go-back-N window uncounted.
rx_counts() {
	local d=/sys/class/infiniband/$(fab_dev mr d 1)/ports/1/hw_counters
	echo "$(cat $d/rx_packets) $(cat $d/rx_duplicates) $(cat $d/rx_dropped)"
}

# cell_incast N: N senders, one QP each, into d1 over one link (K=1), hints on and off
# when the driver has them; per-sender rates at r1's host links and the rate r1 puts
# on the link (after its queue's drops), what d1 used of it: goodput. The link, not d1's
# netdev (a veth: 10 Gbit/s), bounds what d1 receives, so with hints on d1's inbound
# capacity is set to the link's rate (rx_capacity_mbps): otherwise each sender's hint
# is 10 Gbit/s / N and tells it nothing. Each client runs twice the cell's time (DI):
# the ones already running busy-poll the VM's 2 CPUs, and the last of 8 began up to
# 16 s after the first (perftest cannot sleep on WRITE completions).
cell_incast() {
	local n=$1 drv i hints labels before_q after_q
	labels=$(seq "$n" | sed 's/^/s/' | tr '\n' ' ')
	fabric_use_links 1
	for drv in metaroce rxe; do
		for hints in $([ "$drv" = metaroce ] && [ -w $HINTS ] && echo "Y N" || echo -); do
			[ "$hints" != - ] && echo "$hints" > $HINTS
			[ "$hints" = Y ] && [ -w $CAPACITY ] && echo $(($(fab_rate_bps) / 1000000)) > $CAPACITY
			local tag="incast $n:1${hints/-/}"
			[ "$hints" != - ] && tag="incast $n:1 hints $hints"
			local devs=() plane
			plane=$(drv_plane "$drv")
			for i in $(seq "$n"); do devs+=("h$i$plane"); done
			before_q=$(tc -n "$FABNS_r1" -s qdisc show dev l1)
			local rx0= rx1= t0=$EPOCHREALTIME
			[ "$drv" = metaroce ] && rx0=$(rx_counts)
			sampler "incast$n-$drv$hints" "${devs[@]}" l1
			for i in $(seq "$n"); do
				fabric_perf_server "$plane" 4 $((PORT + i)) "$LOG/srv$i" ib_write_bw -s 65536 -D "$DI"
			done
			for i in $(seq "$n"); do fabric_perf_listening $((PORT + i)); done
			for i in $(seq "$n"); do
				fabric_perf_client "$plane" "$i" 4 $((PORT + i)) "$LOG/cli$i" ib_write_bw -s 65536 -D "$DI"
			done
			PORT=$((PORT + n))
			if ! fabric_perf_wait; then
				echo "# $tag $drv: a perftest failed"
				for i in $(seq "$n"); do
					[ -n "$(fabric_bw "$LOG/cli$i")" ] ||
						echo "# s$i: $(tail -3 "$LOG/cli$i" | tr '\n' ' ')"
				done
			fi
			kill_sampler
			[ "$drv" = metaroce ] && rx1=$(rx_counts)
			after_q=$(tc -n "$FABNS_r1" -s qdisc show dev l1)
			local bws=""
			for i in $(seq "$n"); do bws+="$(fabric_bw "$LOG/cli$i") "; done
			local qd
			qd=$(printf '%s\n===\n%s\n' "$before_q" "$after_q" | awk '
				BEGIN { s = 0 }
				/^===/ { s = 1; next }
				/dropped/ && !d[s]++ { x = $0; sub(/.*dropped /, "", x); sub(/,.*/, "", x); drop[s] = x }
				{ for (f = 1; f < NF; f++) if ($f == "ecn_mark" || $f == "ce_mark") ecn[s] += $(f + 1) }
				END { printf "drops %d, ECN marks %d", drop[1] - drop[0], ecn[1] - ecn[0] }')
			[ -w $CAPACITY ] && { qd+=", rx_capacity_mbps $(cat $CAPACITY)"; echo 0 > $CAPACITY; }
			echo "RESULT|$tag|$drv|$bws|MB/s per sender|$qd"
			[ -n "$rx1" ] && echo "INFO|$tag $drv rx|$rx0 $rx1"
			T0=$t0 series "incast$n-$drv$hints" $labels
			T0=$t0 SKIP=$n FILE="$LOG/incast$n-$drv$hints.samples" series "link$n-$drv$hints" l1
		done
	done
	[ -w $HINTS ] && echo Y > $HINTS
	fabric_use_links $K
}

modprobe -a rdma_rxe 2>/dev/null
start=$SECONDS
if ! FABRIC_TYPES="metaroce rxe" fabric_up $K $N; then
	echo "# fabric setup failed"
	exit 1
fi
fabric_topology | sed 's/^/# /'
echo "# fabric up in $((SECONDS - start)) s; preempt: $(cat /sys/kernel/debug/sched/preempt 2>/dev/null), cpus: $(nproc), ${D}s per cell"
echo "INFO|rate_mbit|$(($(fab_rate_bps) / 1000000))"
echo "INFO|links|$K"
echo "INFO|burst_ms|$FABRIC_BURST_MS"
echo "INFO|mtu|$FABRIC_MTU"
echo "INFO|duration|$D"
echo "INFO|rate_hints|$([ -e $HINTS ] && cat $HINTS || echo absent)"
echo "INFO|rx_capacity_mbps|$(cat /sys/module/metaroce/parameters/rx_capacity_mbps 2>/dev/null || echo absent)"
BH=10
[ $QUICK = 1 ] && BH=6
selected() { [ -z "${BENCH_FILTER:-}" ] || echo "$1" | grep -Eq -- "$BENCH_FILTER"; }
selected bw && cell_bw
selected burst && cell_burst
selected delay && cell_delay
selected hot && cell_hot
selected loss && cell_lossy
selected blackhole && cell_blackhole
for n in $INCAST; do selected incast && cell_incast "$n"; done
fabric_counters | sed 's/^/# /'
echo "# bench-fabric guest: $((SECONDS - start)) s"
