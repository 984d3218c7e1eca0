#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# metaroce on a routed fabric (selftests/lib_fabric.sh): sender s1 and receiver d1
# joined by two routers and K=4 parallel shaped links with ECMP on the UDP 5-tuple.
# - one RC connection's traffic (ib_write_bw, one QP) appears on every link, over
#   IPv4 and over IPv6: each link carries at least $FABRIC_MIN_SHARE % of it (with
#   FABRIC_HASH_POLICY=0 all of it takes one link and these tests fail; some links
#   but not all is a known failure for now, see spread());
# - a link blackholed (netem loss 100%, routes unchanged) while rc_integrity.py moves
#   data, every byte checked, does not break the transfer;
# - a link blackholed for seconds under one ib_write_bw, then repaired: the same
#   connection uses it again (the dead port is tried again, [MR-PATH-13]);
# - rdma_rxe on the same fabric, for contrast: one QP takes one link (reported, not
#   checked: its UDP source port is fixed per QP).
# Per-link counters come from the routers' netdevs, not from the driver.

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_fabric.sh"

: "${FABRIC_MIN_SHARE:=5}"
: "${FABRIC_TEST_K:=4}"
RI="$(dirname "$(readlink -f "$0")")/rc_integrity.py"
LOG=$(mktemp -d /tmp/fabric.XXXXXX)
PORT=18600
DATA_LINK=

cleanup() {
	fabric_down
	rm -rf "$LOG"
}
trap cleanup EXIT

# delta BEFORE AFTER: per-link differences of two fabric_links_tx lines.
delta() { paste <(echo "$1" | tr ' ' '\n') <(echo "$2" | tr ' ' '\n') | awk '{ printf "%d ", $2 - $1 }'; }

# shares DELTAS: each link's share of the total, in percent, one line.
shares() { echo "$1" | awk '{ for (i = 1; i <= NF; i++) t += $i; for (i = 1; i <= NF; i++) printf "l%d %.1f%% ", i, t ? 100 * $i / t : 0 }'; }

# write_bw PLANE FAMILY: one ib_write_bw (64 KiB, one QP, 4 s) from s1 to d1; the
# per-link byte counts of r1 during it are left in DELTA.
write_bw() {
	local before after
	PORT=$((PORT + 1))
	before=$(fabric_links_tx)
	fabric_perf_bg "$1" 1 "$2" $PORT "$LOG/cli" ib_write_bw -s 65536 -D 4 || { fabric_perf_wait; return 1; }
	if ! fabric_perf_wait; then
		sed 's/^/#   cli: /' "$LOG/cli" | tail -8
		sed 's/^/#   srv: /' "$LOG/cli.srv" | tail -8
		return 1
	fi
	after=$(fabric_links_tx)
	DELTA=$(delta "$before" "$after")
	ktap_print_msg "$1 IPv$2 ib_write_bw 64 KiB 1 QP: $(fabric_bw "$LOG/cli") MB/s; bytes per link: $DELTA($(shares "$DELTA"))"
}

# links_used DELTAS: how many links carried at least $FABRIC_MIN_SHARE % of the bytes.
links_used() {
	echo "$1" | awk -v m="$FABRIC_MIN_SHARE" '{ for (i = 1; i <= NF; i++) t += $i
		for (i = 1; i <= NF; i++) if (t && 100 * $i >= m * t) n++; print n + 0 }'
}

# spread FAMILY: one metaroce connection's data appears on every link; on one link
# only it fails, on some of them it is a known failure (XFAIL, see below).
spread() {
	local used
	write_bw mr "$1" || { fail "ib_write_bw over IPv$1 failed"; return; }
	# The busiest link: the blackhole test takes it away.
	[ "$1" = 4 ] && DATA_LINK=$(echo "$DELTA" | awk '{ for (i = 1; i <= NF; i++) if ($i > m) { m = $i; b = i } print b }')
	used=$(links_used "$DELTA")
	[ "$used" -eq "$FABRIC_K" ] && return $KSFT_PASS
	[ "$used" -le 1 ] && { fail "one link carried the connection: no spraying"; return; }
	# The driver draws its 8 source ports at random: with 4 links, one of them gets
	# no port in about 1 connection in 3. It moves a path off a crowded link only once
	# its epochs of 512 packets show it much slower ([MR-PATH-14]), which a 4 s run on
	# a new connection may not reach (issue 33, part 4). Known: XFAIL, unless
	# FABRIC_STRICT=1.
	[ "${FABRIC_STRICT:-0}" = 1 ] && { fail "$used of $FABRIC_K links carried at least $FABRIC_MIN_SHARE% of the data"; return; }
	ktap_print_msg "$used of $FABRIC_K links carried at least $FABRIC_MIN_SHARE% of the data: source ports collided on links (not yet moved)"
	return $KSFT_XFAIL
}
test_spread4() { spread 4; }
test_spread6() { spread 6; }

# link_bytes: the bytes both routers have sent on all links (one number).
link_bytes() {
	local r
	for r in r1 r2; do ip netns exec "$(fab_ns $r)" sh -c 'cat /sys/class/net/l*/statistics/tx_bytes'; done |
		awk '{ t += $1 } END { printf "%d\n", t }'
}

# moved BEFORE BYTES: the links have carried BYTES, both ways, since link_bytes said
# BEFORE.
moved() { [ $(($(link_bytes) - $1)) -ge "$2" ] || { sleep 0.4; return 1; }; }

# s1_paths_save: s1's paths and its connection's core state (debugfs), read with
# builtins (see fabric_r1_park), appended to $LOG/paths; s1_paths_print prints them,
# each path with the link its source port takes.
s1_paths_save() {
	local f line out=""
	for f in /sys/kernel/debug/metaroce/mrs1/paths /sys/kernel/debug/metaroce/mrs1/conns; do
		[ -e "$f" ] || continue
		while IFS= read -r line; do
			case $line in
			*" sport "*) out+="$1: path ${line#* path }"$'\n' ;;
			*"dead_port="*) line=${line#*" sent="} out+="$1: sent=${line%%" | "*}"$'\n' ;;
			esac
		done < "$f"
	done
	printf '%s' "$out" >> "$LOG/paths"
}
s1_paths_print() {
	local line sport
	[ -s "$LOG/paths" ] || { ktap_print_msg "no paths read from debugfs"; return 0; }
	while IFS= read -r line; do
		case $line in
		*" sport "*) sport=${line#* sport } sport=${sport%% *}
			ktap_print_msg "$line link $(fabric_udp_link "$sport" 4793 1)" ;;
		*) ktap_print_msg "$line" ;;
		esac
	done < "$LOG/paths"
}

# test_blackhole: rc_integrity.py between s1 and d1 (IPv4); once data flows, the
# busiest link is blackholed in both directions until the program ends. Every byte
# must be right.
test_blackhole() {
	local link=${DATA_LINK:-1} pid rc before out
	NSA=$(fab_ns s1)
	before=$(fabric_links_tx)
	ip netns exec "$NSA" timeout 300 /usr/bin/python3 "$RI" mrs1 mrd1 --seed 0x66616272 \
		--batches 32 --big-every 8 --atomics 50 > "$LOG/ri" 2>&1 &
	pid=$!
	# Data is flowing (512 KiB through the fabric; pyverbs takes seconds to start).
	# Under TCG this poll starves while the program busy-polls: with 16 batches the
	# blackhole came 0.1-0.6 s before the end of the transfer, hence 32.
	busywait 90000 moved "$(link_bytes)" 524288 ||
		ktap_print_msg "no data seen on the links for 90 s: blackholing l$link now"
	fabric_link_impair "$link" loss 100% || { kill $pid; wait $pid; fail "netem on l$link failed"; return; }
	ktap_print_msg "l$link blackholed (netem loss 100% both ways) $(date +%T.%N | cut -c1-12)"
	wait $pid
	rc=$?
	ktap_print_msg "rc_integrity.py ended $(date +%T.%N | cut -c1-12), exit $rc"
	sed 's/^/#   /' "$LOG/ri"
	fabric_counters | sed 's/^/# /'
	out=$(delta "$before" "$(fabric_links_tx)")
	ktap_print_msg "bytes per link during the run: $out($(shares "$out"))"
	fabric_link_clear "$link"
	[ $rc -eq 0 ] || { fail "rc_integrity.py over the fabric with l$link blackholed: exit $rc"; return; }
	return $KSFT_PASS
}

# test_repair: one ib_write_bw from s1 to d1 (one connection: a connection ends with
# its last QP, and what it learnt of its paths with it); once data flows, the link
# that carries most of it is blackholed for 4 s (7-10 s under TCG, where every tc
# run waits for the CPU perftest polls on), then repaired. The paths on it died
# and moved to random ports; the port of the last one that died is tried again
# ([MR-PATH-13], at most 4096 packets later: about 2 s here), so over the next 8 s the
# link must carry at least $FABRIC_MIN_SHARE % of the connection's data. From the
# start of perftest to the end of those 8 s only builtins and tc run (fabric_r1_park),
# one tc per router for each change: every link gets a netem without loss first.
test_repair() {
	local link i before after out t_fault t_repair t_end
	fabric_r1_park
	rm -f "$LOG/paths"
	for ((i = 1; i <= FABRIC_K; i++)); do
		fabric_link_impair $i loss 0% || { fail "netem on l$i failed"; return; }
	done
	PORT=$((PORT + 1))
	fabric_perf_bg mr 1 4 $PORT "$LOG/cli" ib_write_bw -s 65536 -D 30 ||
		{ fabric_perf_wait; fail "ib_write_bw did not start"; return; }
	fabric_wait_data || ktap_print_msg "no data seen on the links for 120 s"
	fabric_busiest_link
	link=$FABRIC_BUSIEST out=$FABRIC_DELTAS
	s1_paths_save before
	t_fault=$EPOCHREALTIME
	fabric_link_renetem "$link" loss 100% || { fabric_perf_wait; fail "netem on l$link failed"; return; }
	fabric_nap 4
	s1_paths_save blackholed
	fabric_link_renetem "$link" loss 0% || { fabric_perf_wait; fail "repairing l$link failed"; return; }
	fabric_r1_tx; before=("${FABRIC_TX[@]}")
	t_repair=$EPOCHREALTIME
	fabric_nap 8
	fabric_r1_tx; after=("${FABRIC_TX[@]}")
	t_end=$EPOCHREALTIME
	s1_paths_save repaired
	for ((i = 1; i <= FABRIC_K; i++)); do fabric_link_clear $i; done
	if ! fabric_perf_wait; then
		sed 's/^/#   cli: /' "$LOG/cli" | tail -8
		fail "ib_write_bw across the blackhole failed"
		return
	fi
	ktap_print_msg "bytes per link in 1 s: $out($(shares "$out")): l$link blackholed for $(echo "$t_fault $t_repair $t_end" | awk '{ printf "%.1f s, then measured for %.1f s", $2 - $1, $3 - $2 }')"
	s1_paths_print
	out=$(delta "${before[*]}" "${after[*]}")
	ktap_print_msg "ib_write_bw across the blackhole: $(fabric_bw "$LOG/cli") MB/s; bytes per link in 8 s after the repair: $out($(shares "$out"))"
	echo "$out" | awk -v l="$link" -v m="$FABRIC_MIN_SHARE" '{ for (i = 1; i <= NF; i++) t += $i
		exit !(t > 0 && 100 * $l >= m * t) }' && return $KSFT_PASS
	echo "$out" | awk '{ for (i = 1; i <= NF; i++) t += $i; exit !(t < 1000000) }' &&
		{ fail "the transfer ended before the 8 s after the repair did"; return; }
	fail "repaired link l$link carried less than $FABRIC_MIN_SHARE% of the data after the repair"
}

# test_rxe: rdma_rxe over the same fabric, one QP: how many links it takes (reported).
test_rxe() {
	local used
	write_bw rx 4 || { ktap_print_msg "rdma_rxe ib_write_bw failed"; return $KSFT_SKIP; }
	used=$(links_used "$DELTA")
	ktap_print_msg "rdma_rxe: one QP used $used of $FABRIC_K links"
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 5
if ! [ -x /usr/bin/python3 ] || ! /usr/bin/python3 -c 'import pyverbs' 2>/dev/null; then
	ktap_print_msg "python3-pyverbs is not installed"
	exit $KSFT_SKIP
fi
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
start=$SECONDS
if ! FABRIC_TYPES="metaroce rxe" fabric_up "$FABRIC_TEST_K" 1; then
	ktap_print_msg "fabric setup failed"
	exit $KSFT_FAIL
fi
fabric_topology | sed 's/^/# /'
ktap_print_msg "fabric up in $((SECONDS - start)) s"
ktap_test "one metaroce connection sprays over all $FABRIC_K ECMP links (IPv4)" test_spread4
ktap_test "one metaroce connection sprays over all $FABRIC_K ECMP links (IPv6)" test_spread6
ktap_test "byte-exact RC transfer survives a blackholed link" test_blackhole
ktap_test "a repaired link carries the same connection's data again" test_repair
ktap_test "rdma_rxe on the same fabric (reported, not checked)" test_rxe
fabric_counters | sed 's/^/# /'
ktap_finished
