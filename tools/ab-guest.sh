#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs INSIDE the test VM (see tools/ab): two builds of metaroce.ko, loaded in turn in
# the same VM, over the same veth pair between two namespaces, in the order A B B A for
# every round, and prints one line per measurement:
#   RESULT|<cell>|<A or B>|<value>|<unit>
# Values are perftest's: Gb/s for bandwidth (BW average), usec for latency (typical).
# AB_A and AB_B are the two modules (absolute paths), AB_CELLS the cells, one per line:
#   <name>|<mtu>|<netem impairment, or none>|<perftest command and options>
# AB_ROUNDS (default 2) and AB_DURATION (seconds per bandwidth cell, default 4).
# AB_COUNTERS=1 prints both devices' counter changes after each cell.

. "$(dirname "$0")/../selftests/lib.sh"

ROUNDS=${AB_ROUNDS:-2}
DURATION=${AB_DURATION:-4}

# counters DEV: "name value name value ..." of the device's port 1.
counters() {
	rdma statistic show link "$1/1" | tr -s ' ' | cut -d' ' -f3-
}

# changes BEFORE AFTER: the counters that moved, with how much.
changes() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i < n; i += 2) if (y[i + 1] != x[i + 1]) printf "%s %d ", x[i], y[i + 1] - x[i + 1]
	}'
}

# run_cell LABEL NAME MTU IMPAIRMENT COMMAND...
run_cell() {
	local label=$1 name=$2 mtu=$3 imp=$4 tool=$5 line value unit b0 c0 sp
	shift 4
	ip -n "$NSA" link set vethA mtu "$mtu"
	ip -n "$NSB" link set vethB mtu "$mtu"
	[ "$imp" != none ] && tc -n "$NSA" qdisc replace dev vethA root netem $imp limit 100000
	local run=(-D "$DURATION") unit=Gb/s
	case "$tool" in *_lat) run=(-n 2000) unit=usec;; esac
	b0=$(counters mroce0) c0=$(counters mroce1)
	ip netns exec "$NSB" timeout 60 "$@" -d mroce1 -x "$(gid_index "$NSB" mroce1 198.18.0.2)" -F "${run[@]}" \
		> /tmp/ab-srv.out 2>&1 &
	sp=$!
	busywait 10000 sh -c "ip netns exec $NSB ss -Hltn 'sport = :18515' | grep -q 18515"
	ip netns exec "$NSA" timeout 60 "$@" -d mroce0 -x "$(gid_index "$NSA" mroce0 198.18.0.1)" -F "${run[@]}" \
		198.18.0.2 > /tmp/ab-cli.out 2>&1
	wait "$sp"
	line=$(grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/ab-cli.out | tail -1)
	case "$tool" in
	*_lat) value=$(echo "$line" | awk '{print $5}');;
	*) value=$(echo "$line" | awk '{print $4}');;
	esac
	echo "RESULT|$name|$label|${value:--}|$unit"
	if [ "${AB_COUNTERS:-0}" = 1 ]; then
		echo "# $name $label mroce0: $(changes "$b0" "$(counters mroce0)")"
		echo "# $name $label mroce1: $(changes "$c0" "$(counters mroce1)")"
	fi
	[ "$imp" != none ] && tc -n "$NSA" qdisc del dev vethA root
	sleep 0.5
}

# with_module LABEL KO: loads KO, creates the device pair (lib.sh's setup_pair), runs
# every cell, removes them.
with_module() {
	local label=$1 name mtu imp cmd
	METAROCE_KO=$2 METAROCE_PARAMS=$3 setup_pair || { echo "# setting up with $2 $3 failed"; return 1; }
	while IFS='|' read -r name mtu imp cmd; do
		[ -z "$name" ] && continue
		# shellcheck disable=SC2086 # the command's words
		run_cell "$label" "$name" "$mtu" "$imp" $cmd < /dev/null
	done <<< "$AB_CELLS"
	delete_pair
	cleanup_all_ns
	unload_metaroce
}

modprobe -a sch_netem 2>/dev/null
for r in $(seq "$ROUNDS"); do
	for pass in A B B A; do
		if [ $pass = A ]; then ko=$AB_A params=${AB_PARAMS_A:-}; else ko=$AB_B params=${AB_PARAMS_B:-}; fi
		with_module $pass "$ko" "$params" || exit 1
	done
done
