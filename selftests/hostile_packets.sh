#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Forged datagrams against a live connection (issue 39): while ibv_rc_pingpong runs
# between mroce0 ($NSA) and mroce1 ($NSB), a UDP socket in $NSB sends mroce0 forged
# MetaRoCE packets from the peer's own address, with both connection ids (read from
# debugfs): ACKs for PSNs half the sequence space away (each of which locked a CPU
# for seconds before the fix), PATH_FLOORs anywhere (which blackholed a path), OPEN
# with dst_conn 0 after setup (including a CLOSE), malformed headers, and our id with
# another src_conn than the peer's (or dst_conn 0 without OPEN). The
# ping-pong must complete, the drops must be counted, and the kernel log stay clean.
# Then the hostile local user (issue 35): garbage written into the mapped rings of
# its own QPs, SRQ and CQs while it posts (hostile_rings.py).
#
#   RING_SEEDS=N rounds of hostile_rings.py (default 3), RING_SECONDS=S each (default 15).

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest.sh"

MROCE_TYPE=metaroce
IPA=198.18.0.1
IPB=198.18.0.2
TO=240
PORT=19100
LOG=$(mktemp -d /tmp/hostile.XXXXXX)
DBG=/sys/kernel/debug/metaroce
trap perftest_cleanup EXIT

# ids: "LOCAL PEER" connection ids of mroce0's connection to $IPB.
ids() { sed -n "s/^conn \(0x[0-9a-f]*\) to $IPB (peer \(0x[0-9a-f]*\)).*/\1 \2/p" $DBG/mroce0/conns | head -1; }
connected() { local i; i=$(ids); [ -n "$i" ] && [ "${i#* }" != 0x00000000 ]; }

# attack CASE ROUNDS: forged datagrams of CASE at mroce0 while a ping-pong runs.
attack() {
	local case=$1 rounds=$2 srv cli rc before after
	next_port
	ip netns exec "$NSA" timeout $TO ibv_rc_pingpong -d mroce0 -g "$GA" -p $PORT -n 3000 > "$LOG/srv" 2>&1 &
	srv=$!
	busywait 30000 listening "$NSA" $PORT || { kill $srv; fail "server did not listen"; return; }
	ip netns exec "$NSB" timeout $TO ibv_rc_pingpong -d mroce1 -g "$GB" -p $PORT -n 3000 $IPA > "$LOG/cli" 2>&1 &
	cli=$!
	busywait 60000 connected || { kill $srv $cli; fail "no connection in $DBG/mroce0/conns"; return; }
	read -r local peer <<< "$(ids)"
	before=$(counter mroce0 rx_dropped)
	ip netns exec "$NSB" timeout 60 /usr/bin/python3 "$(dirname "$0")/hostile_packets.py" \
		$IPA "$local" "$peer" "$case" "$rounds" | sed 's/^/# /'
	wait $cli; rc=$?
	wait $srv; rc=$((rc | $?))
	after=$(counter mroce0 rx_dropped)
	ktap_print_msg "mroce0 conn $local (peer $peer): rx_dropped $before -> $after," \
		"rx_out_of_window $(counter mroce0 rx_out_of_window), rx_wrong_conn $(counter mroce0 rx_wrong_conn), rx_late_open $(counter mroce0 rx_late_open), rx_wrong_src $(counter mroce0 rx_wrong_src)," \
		"ns_rx_malformed $(counter mroce0 ns_rx_malformed), rx_bad_header $(counter mroce0 rx_bad_header)"
	if [ $rc != 0 ] || ! grep -q '3000 iters in' "$LOG/cli"; then
		tail -5 "$LOG/srv" "$LOG/cli" | sed 's/^/#   /'
		grep -A3 "^conn" $DBG/mroce0/conns | sed 's/^/#   /'
		fail "the ping-pong did not survive the forged packets"
		return
	fi
	ktap_print_msg "$(grep 'iters in' "$LOG/cli")"
	return $KSFT_PASS
}

# counted NAME...: every named mroce0 counter is above zero.
counted() {
	local c
	for c in "$@"; do
		[ "$(counter mroce0 "$c")" -gt 0 ] || { fail "$c did not count the forged packets"; return; }
	done
	return $KSFT_PASS
}

test_far_acks() { attack far_acks 25 && counted rx_out_of_window; }
test_far_floors() { attack far_floors 10 && counted rx_out_of_window; }
test_late_open() { attack late_open 20 && counted rx_late_open; }
test_malformed() { attack malformed 5 && counted rx_dropped; }
test_wrong_src() { attack wrong_src 10 && counted rx_wrong_src; }

: "${RING_SEEDS:=3}" "${RING_SECONDS:=15}"

no_conns() { no_conn mroce0 && no_conn mroce1; }

# The process may die of its own provider reading the garbage (SIGSEGV, SIGBUS); it
# must not hang, and the kernel must release everything it held.
test_hostile_rings() {
	local seed rc out
	for seed in $(seq "$RING_SEEDS"); do
		out=$(ip netns exec "$NSA" timeout -k 5 $((RING_SECONDS + 60)) /usr/bin/python3 \
			"$(dirname "$0")/hostile_rings.py" mroce0 mroce1 "$RING_SECONDS" 3 "$seed" 2>&1)
		rc=$?
		echo "$out" | tail -3 | sed "s/^/#   seed $seed: /"
		case $rc in
		0|135|139) ktap_print_msg "seed $seed: exit $rc";;
		*) fail "seed $seed: hostile_rings.py exit $rc"; return;;
		esac
		busywait 20000 no_rc_qps ||
			{ fail "seed $seed: RC QPs left: $(rdma resource show qp | grep 'type RC')"; return; }
		busywait 20000 no_conns ||
			{ fail "seed $seed: a connection outlived its QPs"; return; }
	done
	pair ibv_rc_pingpong -s 4096 -n 100 -c >/dev/null || { fail "ping-pong after the garbage"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 6
load_metaroce || exit $KSFT_FAIL
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
perftest_setup || { ktap_print_msg "setup failed"; exit $KSFT_FAIL; }
ktap_test "forged ACKs for PSNs never sent (16 blocks, cum_psn +2^31) are dropped at once" test_far_acks
ktap_test "forged PATH_FLOORs anywhere in the sequence space are dropped" test_far_floors
ktap_test "OPEN with dst_conn 0 after setup (and a CLOSE in it) is refused" test_late_open
ktap_test "truncated, bad-version, bad-type and absurd-count datagrams are dropped" test_malformed
ktap_test "our id with another src_conn, or dst_conn 0 without OPEN, is refused before queueing" test_wrong_src
ktap_test "garbage in a process's own mapped SQ, RQ, SRQ and CQ rings while it posts: refused, released" test_hostile_rings
ktap_finished
