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
#   data, every byte checked, does not break the transfer; after the link is repaired
#   the connection uses it again (the dead port is tried again, [MR-PATH-13]);
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

# test_blackhole: rc_integrity.py between s1 and d1 (IPv4, the same connection as
# test_spread4); once data flows, the busiest link is blackholed in both directions
# until the program ends. Every byte must be right, then the repaired link must carry data again.
test_blackhole() {
	local link=${DATA_LINK:-1} pid rc before out
	NSA=$(fab_ns s1)
	before=$(fabric_links_tx)
	ip netns exec "$NSA" timeout 300 /usr/bin/python3 "$RI" mrs1 mrd1 --seed 0x66616272 \
		--batches 16 --big-every 8 --atomics 50 > "$LOG/ri" 2>&1 &
	pid=$!
	# Data is flowing (512 KiB through the fabric; pyverbs takes seconds to start).
	# Under TCG this poll starves while the program busy-polls: the blackhole has come
	# 0.2-0.6 s before the end of the transfer (more batches: not yet measured).
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
	# Repaired: the same connection (same peers) must send on the link again.
	write_bw mr 4 || { fail "ib_write_bw after the repair failed"; return; }
	echo "$DELTA" | awk -v l="$link" -v m="$FABRIC_MIN_SHARE" '{ for (i = 1; i <= NF; i++) t += $i
		exit !(100 * $l >= m * t) }' && return $KSFT_PASS
	# The sender tries the dead path's port again ([MR-PATH-13]), with a backoff of
	# at most 4096 packets: within the first second of this 4 s run.
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
ktap_set_plan 4
if ! [ -x /usr/bin/python3 ] || ! /usr/bin/python3 -c 'import pyverbs' 2>/dev/null; then
	ktap_print_msg "python3-pyverbs is not installed"
	exit $KSFT_SKIP
fi
start=$SECONDS
if ! FABRIC_TYPES="metaroce rxe" fabric_up "$FABRIC_TEST_K" 1; then
	ktap_print_msg "fabric setup failed"
	exit $KSFT_FAIL
fi
fabric_topology | sed 's/^/# /'
ktap_print_msg "fabric up in $((SECONDS - start)) s"
ktap_test "one metaroce connection sprays over all $FABRIC_K ECMP links (IPv4)" test_spread4
ktap_test "one metaroce connection sprays over all $FABRIC_K ECMP links (IPv6)" test_spread6
ktap_test "byte-exact RC transfer survives a blackholed link; the repaired link is used again" test_blackhole
ktap_test "rdma_rxe on the same fabric (reported, not checked)" test_rxe
fabric_counters | sed 's/^/# /'
ktap_finished
