#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The receiver's fair-share rate hint (spec MR-CC-11, MR-CC-12, MR-CC-14): 2, then 3,
# sender namespaces stream ib_write_bw into one receiver namespace, each on its own
# veth and subnet to a router namespace (SW; the test kernel has no bridge). The
# receiver's capacity is set low (rx_capacity_mbps=$CAP_MBPS, below the 2 MB/s or so a
# sender moves unpaced in the emulated VM), so each sender's hint_in (the `paths`
# debugfs file) must be CAP x 0.95 / N, rounded up to the wire's 1 Mb/s unit, and its
# measured bandwidth at most that (+$TOL_PCT%).
# With rate_hints=N every ACK carries hint 0. Last, rc_integrity.py checks every byte
# of a random RC workload between the receiver and a sender under the hint.

. "$(dirname "$0")/lib.sh"

CAP_MBPS=${CAP_MBPS:-4}
TOL_PCT=${TOL_PCT:-15}
DUR=60            # seconds of each ib_write_bw at most: stopped once measured
PKT=1440          # bytes a data packet takes in flight and in pacing (1500-byte MTU)
SIZE=65536
TO=$((DUR + 60))
PORT=18900
DBG=/sys/kernel/debug/metaroce
PARAMS=/sys/module/metaroce/parameters
TRACEFS=/sys/kernel/tracing
EV=$TRACEFS/events/metaroce/metaroce_rate_hint/enable
RI="$(dirname "$(readlink -f "$0")")/rc_integrity.py"
LOG=$(mktemp -d /tmp/rate_hint.XXXXXX)
IPR=198.18.0.1

cleanup() {
	[ -w $EV ] && echo 0 > $EV
	[ -w $PARAMS/rx_capacity_mbps ] && echo 0 > $PARAMS/rx_capacity_mbps
	[ -w $PARAMS/rate_hints ] && echo Y > $PARAMS/rate_hints
	cleanup_devices_and_ns
	rm -rf "$LOG"
}
trap cleanup EXIT

# ip_of I: the address of sender I (1..3), on subnet 198.18.I.0/24.
ip_of() { echo "198.18.$1.2"; }

# setup: namespace NSR (receiver, mroce0 on vethR, 198.18.0.1) and NS1..NS3 (senders,
# mroceI on vethI, 198.18.I.2), each veth's other end (.254 of its subnet) in the
# router namespace NSSW.
setup() {
	local i ns net
	load_metaroce || return 1
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug || return 1
	setup_ns NSSW NSR NS1 NS2 NS3 || return 1
	ip netns exec "$NSSW" sysctl -qw net.ipv4.ip_forward=1 || return 1
	for i in R 1 2 3; do
		ns=NS$i
		net=198.18.$([ $i = R ] && echo 0 || echo $i)
		ip link add "veth$i" netns "${!ns}" type veth peer name "sw$i" netns "$NSSW" || return 1
		ip -n "$NSSW" addr add "$net.254/24" dev "sw$i"
		ip -n "$NSSW" link set "sw$i" up
		if [ $i = R ]; then
			ip -n "${!ns}" addr add $IPR/24 dev "veth$i"
		else
			ip -n "${!ns}" addr add "$(ip_of $i)/24" dev "veth$i"
		fi
		ip -n "${!ns}" link set "veth$i" up
		ip -n "${!ns}" route add default via "$net.254" || return 1
	done
	ip netns exec "$NSR" rdma link add mroce0 type metaroce netdev vethR || return 1
	for i in 1 2 3; do
		ns=NS$i
		ip netns exec "${!ns}" rdma link add "mroce$i" type metaroce netdev "veth$i" || return 1
	done
	busywait 10000 gid_index_of mroce0 $IPR >/dev/null || return 1
	GR=$(gid_index "$NSR" mroce0 $IPR)
	for i in 1 2 3; do
		ns=NS$i
		busywait 10000 gid_index_of "mroce$i" "$(ip_of $i)" >/dev/null || return 1
		eval "G$i=$(gid_index "${!ns}" "mroce$i" "$(ip_of $i)")"
	done
	echo "$CAP_MBPS" > $PARAMS/rx_capacity_mbps || return 1
	ip netns exec "$NS1" ping -c1 -W5 $IPR > /dev/null || return 1
	ktap_print_msg "receiver mroce0 ($IPR) and senders mroce1..3 (198.18.I.2) through a router; rx_capacity_mbps=$CAP_MBPS"
}

# snapshot SRC DST: copies SRC to DST; STAMP is when, in microseconds. Builtins
# only: under TCG a new process beside busy-polling perftest may take a second
# to start, which would move the window a rate is measured over.
snapshot() {
	local lines
	STAMP=${EPOCHREALTIME/./}
	mapfile -t lines < "$1"
	printf '%s\n' "${lines[@]}" > "$2"
}

# streams N: N senders (mroce1..N) run ib_write_bw into mroce0 at once; while they
# all run, the `paths` files are read into $LOG/before.I, then 2 s later into
# $LOG/paths.I (senders) and $LOG/paths.R; then the streams are stopped.
streams() {
	local n=$1 i ns pids=() rc=0 g
	for i in $(seq "$n"); do
		ip netns exec "$NSR" timeout $TO ib_write_bw -d mroce0 -x "$GR" -p $((PORT + i)) \
			-s $SIZE -D $DUR > "$LOG/srv.$i" 2>&1 &
		pids+=($!)
	done
	for i in $(seq "$n"); do
		busywait 30000 listening "$NSR" $((PORT + i)) || { fail "server $i did not listen"; rc=1; }
	done
	for i in $(seq "$n"); do
		ns=NS$i; g=G$i
		ip netns exec "${!ns}" timeout $TO ib_write_bw -d "mroce$i" -x "${!g}" -p $((PORT + i)) \
			-s $SIZE -D $DUR $IPR > "$LOG/cli.$i" 2>&1 &
		pids+=($!)
	done
	# Once every sender streams (its paths sent data), one more second for the hints
	# to settle; then each sender's rate is measured over the 2 s or so between its
	# two snapshots while all stream: packets sent (the `paths` file) times $PKT.
	busywait $((DUR * 1000 / 2)) streaming "$n" || { ktap_print_msg "not every sender streams"; rc=1; }
	sleep 1
	for i in $(seq "$n"); do
		snapshot "$DBG/mroce$i/paths" "$LOG/before.$i"
		T0[i]=$STAMP
	done
	sleep 2
	snapshot $DBG/mroce0/paths "$LOG/paths.R"
	for i in $(seq "$n"); do
		snapshot "$DBG/mroce$i/paths" "$LOG/paths.$i"
		T1[i]=$STAMP
	done
	# Measured: the streams stop.
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p"
	done
	PORT=$((PORT + 10))
	if [ $rc -ne 0 ]; then
		for i in $(seq "$n"); do
			sed "s/^/#   cli.$i: /" "$LOG/cli.$i" | tail -8
			sed "s/^/#   srv.$i: /" "$LOG/srv.$i" | tail -4
		done
		fail "ib_write_bw failed"
		return 1
	fi
}

# streaming N: each of senders 1..N has a connection to the receiver whose path 0
# sent data.
streaming() {
	local i
	for i in $(seq "$1"); do
		awk -v p=$IPR '$1 == "conn" && $4 == p && $5 == "path" && $6 == 0 && $18 > 0 { ok = 1 } END { exit !ok }' \
			"$DBG/mroce$i/paths" || return 1
	done
}

# hint_in I: the hint sender I got from the receiver (its `paths` file), bytes/s.
hint_in() { awk -v p=$IPR '$1 == "conn" && $3 == "peer" && $4 == p && $5 == "hint_out" { print $8 }' "$LOG/paths.$1"; }

# sent FILE: data packets the connection to the receiver sent, over its paths.
sent() { awk -v p=$IPR '$1 == "conn" && $4 == p && $5 == "path" { n += $18 } END { print n + 0 }' "$1"; }

# rate_bps I: sender I's rate while all streamed, bytes/s, over the time between
# its two snapshots.
rate_bps() {
	echo $(( ($(sent "$LOG/paths.$1") - $(sent "$LOG/before.$1")) * PKT * 1000000 / (T1[$1] - T0[$1]) ))
}

# check_hints N: each of N senders got the expected hint and kept to it.
check_hints() {
	local n=$1 i want share unit=125000 hint rate cap
	cap=$((CAP_MBPS * unit))
	# The receiver's share, and on the wire in whole units of 1 Mb/s, rounded up.
	share=$((cap * 950 / 1000 / n))
	want=$(( (share + unit - 1) / unit * unit ))
	sed 's/^/#   mroce0: /' "$LOG/paths.R" | cut -c1-200 | head -20
	for i in $(seq "$n"); do
		hint=$(hint_in "$i")
		rate=$(rate_bps "$i")
		ktap_print_msg "sender $i: hint_in ${hint:-none} B/s (expected $want)," \
			"sent $rate B/s over $(( (T1[i] - T0[i]) / 1000 )) ms"
		[ "$hint" = "$want" ] || { sed "s/^/#   mroce$i: /" "$LOG/paths.$i" | cut -c1-200; fail "sender $i: hint_in $hint, expected $want"; return; }
		[ "$rate" -gt 0 ] || { fail "sender $i: sent nothing"; return; }
		[ "$rate" -le $((hint * (100 + TOL_PCT) / 100)) ] \
			|| { fail "sender $i: $rate B/s is more than its hint $hint + $TOL_PCT%"; return; }
	done
	# The receiver advertises the same share to each.
	[ "$(grep -c "^conn 0x[0-9a-f]* peer 198.18.[1-3].2 hint_out $share hint_in " "$LOG/paths.R")" -eq "$n" ] \
		|| { fail "mroce0 does not advertise $share to each of $n"; return; }
	return $KSFT_PASS
}

# test_paths_format: every line of the `paths` files parses.
test_paths_format() {
	local f bad
	for f in "$LOG"/paths.*; do
		bad=$(grep -vE '^conn 0x[0-9a-f]{8} peer [0-9a-f.:]+ (hint_out [0-9]+ hint_in [0-9]+|path [0-9]+ sport [0-9]+ state (active|suspect|retired) cwnd [0-9]+ srtt_us [0-9]+ inflight [0-9]+ sent [0-9]+ retx [0-9]+ lost [0-9]+ timeouts [0-9]+ ecn [0-9]+ retired [0-9]+)$' "$f")
		[ -z "$bad" ] || { echo "$bad" | sed 's/^/#   /'; fail "unparsed lines in $f"; return; }
	done
	# Sender 1's eight paths, each with its own port, carried data.
	[ "$(grep -c ' path [0-9]* sport ' "$LOG/paths.1")" -eq 8 ] || { fail "not 8 paths"; return; }
	[ "$(awk '/ path / { print $8 }' "$LOG/paths.1" | sort -u | wc -l)" -eq 8 ] || { fail "ports not distinct"; return; }
	awk '/ path / && $18 == 0 { bad = 1 } END { exit bad }' "$LOG/paths.1" || { fail "a path sent nothing"; return; }
	sed 's/^/#   mroce1: /' "$LOG/paths.1"
	return $KSFT_PASS
}

# test_two: 2 senders; the senders' metaroce_rate_hint tracepoint reports the hint.
test_two() {
	local want
	mountpoint -q $TRACEFS || mount -t tracefs nodev $TRACEFS
	echo > $TRACEFS/trace
	echo 1 > $EV || { fail "cannot enable metaroce_rate_hint"; return; }
	streams 2 || return
	echo 0 > $EV
	check_hints 2 || return
	want=$(hint_in 1)
	grep "metaroce_rate_hint:" $TRACEFS/trace | tail -3 | sed 's/^ */#   /'
	grep -q "metaroce_rate_hint: conn=[0-9a-f]* [0-9]* -> $want B/s" $TRACEFS/trace \
		|| { fail "no metaroce_rate_hint event to $want B/s"; return; }
	return $KSFT_PASS
}
test_three() { streams 3 && check_hints 3; }

# test_hints_off: with rate_hints=N the senders get hint 0, and go faster than the hint.
test_hints_off() {
	local i hint
	echo N > $PARAMS/rate_hints || { fail "cannot write rate_hints"; return; }
	streams 2 || return
	echo Y > $PARAMS/rate_hints
	for i in 1 2; do
		hint=$(hint_in "$i")
		ktap_print_msg "sender $i: hint_in ${hint:-none} B/s, sent $(rate_bps "$i") B/s"
		[ "$hint" = 0 ] || { fail "sender $i: hint_in $hint with rate_hints=N"; return; }
	done
	grep -q "hint_out 0 hint_in" "$LOG/paths.R" && ! grep -q "hint_out [1-9]" "$LOG/paths.R" \
		|| { fail "mroce0 still advertises a hint"; return; }
	return $KSFT_PASS
}

# test_integrity: every byte of a random RC workload between mroce0 and mroce1, while
# the hints pace both sides.
test_integrity() {
	local out rc
	out=$(ip netns exec "$NSR" timeout 300 /usr/bin/python3 "$RI" mroce0 mroce1 \
		--batches 8 --big-every 4 --atomics 50 2>&1)
	rc=$?
	echo "$out" | tail -5 | sed 's/^/# /'
	[ $rc -eq 0 ] || { fail "rc_integrity.py: exit $rc"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 5
if ! setup; then
	for t in "2 senders" "3 senders" "paths format" "rate_hints=N" "integrity"; do
		ktap_result $KSFT_FAIL "$t: setup failed"
	done
	ktap_finished
	exit
fi
ktap_test "2 senders: hint_in = ${CAP_MBPS} Mb/s x 0.95 / 2 each, bandwidth within it" test_two
ktap_test "3 senders: hint_in = ${CAP_MBPS} Mb/s x 0.95 / 3 each, bandwidth within it" test_three
ktap_test "paths file: every line parses, 8 paths with their own ports carry data" test_paths_format
ktap_test "rate_hints=N: every ACK carries hint 0" test_hints_off
ktap_test "byte-exact RC data under the hint (rc_integrity.py)" test_integrity
ktap_finished
