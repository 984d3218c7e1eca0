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
# Forged UD datagrams (other Q_Keys, no such QP, malformed) at a live UD ping-pong are
# counted by reason, exactly.
# Then the hostile local user (issue 35): garbage written into the mapped rings of
# its own QPs, SRQ and CQs while it posts (hostile_rings.py).
#
#   RING_SEEDS=N rounds of hostile_rings.py (default 2), RING_SECONDS=S each (default 15).
#   MUTATIONS=N mutated datagrams (default 10^6), but no longer than MUTATION_SECONDS
#   (default 100: beside the ping-pongs a 2-CPU TCG guest takes 350 to 800 a second
#   from selftests/mutate.c, as the machine's speed varies, so CI sends 35,000 to
#   80,000), and at least MUTATION_FLOOR (default 25,000: fewer means the attacker was
#   starved and tested little); SPOOFED_OPENS (10,000), CM_MADS (10,000, about 450 a
#   second). The defaults fit `make check` into CI's time; the soak runs take the
#   knobs up.
#   selftests/run.sh passes them into the VM.

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

# ids: "LOCAL PEER" connection ids of mroce0's live connection to $IPB (one closing
# or lingering after an earlier case may still be listed).
ids() {
	sed -n "/dead=false closed=false lingering=false/s/^conn \(0x[0-9a-f]*\) to $IPB (peer \(0x[0-9a-f]*\)).*/\1 \2/p" \
		$DBG/mroce0/conns | head -1
}
connected() { local i; i=$(ids); [ -n "$i" ] && [ "${i#* }" != 0x00000000 ]; }

# attack CASE ROUNDS: forged datagrams of CASE at mroce0 while a ping-pong runs. The
# ping-pong must outlive the forger, or the datagrams meet no connection (rx_no_conn):
# then once more with a ping-pong four times as long.
attack() {
	local case=$1 rounds=$2 n srv cli rc before after alive
	for n in 3000 12000; do
		next_port
		ip netns exec "$NSA" timeout $TO ibv_rc_pingpong -d mroce0 -g "$GA" -p $PORT -n $n > "$LOG/srv" 2>&1 &
		srv=$!
		busywait 30000 listening "$NSA" $PORT || { kill $srv; fail "server did not listen"; return; }
		ip netns exec "$NSB" timeout $TO ibv_rc_pingpong -d mroce1 -g "$GB" -p $PORT -n $n $IPA > "$LOG/cli" 2>&1 &
		cli=$!
		busywait 60000 connected || { kill $srv $cli; fail "no connection in $DBG/mroce0/conns"; return; }
		read -r local peer <<< "$(ids)"
		before=$(counter mroce0 rx_dropped)
		ip netns exec "$NSB" timeout 60 /usr/bin/python3 "$(dirname "$0")/hostile_packets.py" \
			$IPA "$local" "$peer" "$case" "$rounds" | sed 's/^/# /'
		alive=yes
		kill -0 $cli 2>/dev/null || alive=no
		wait $cli; rc=$?
		wait $srv; rc=$((rc | $?))
		after=$(counter mroce0 rx_dropped)
		ktap_print_msg "mroce0 conn $local (peer $peer): rx_dropped $before -> $after," \
			"rx_out_of_window $(counter mroce0 rx_out_of_window), rx_wrong_conn $(counter mroce0 rx_wrong_conn), rx_late_open $(counter mroce0 rx_late_open), rx_wrong_src $(counter mroce0 rx_wrong_src)," \
			"ns_rx_malformed $(counter mroce0 ns_rx_malformed), rx_bad_header $(counter mroce0 rx_bad_header), rx_no_conn $(counter mroce0 rx_no_conn)"
		[ $alive = yes ] || [ $rc != 0 ] && break
		ktap_print_msg "the ping-pong ($n iterations) ended before the forger did"
	done
	if [ $rc != 0 ] || ! grep -q "$n iters in" "$LOG/cli"; then
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

# Forged UD datagrams ([MR-UD-2], [MR-UD-4]) from a UDP socket in the peer's namespace
# at a live UD QP (the server of a long ibv_ud_pingpong on mroce0) and at QP1: other
# Q_Keys (up to 4,000 bytes long), QP numbers with no QP, and malformed headers (cut
# short at every length, connection ids set, QP numbers above 24 bits). Each is dropped
# and counted by its reason, exactly; the ping-pong runs on, and a new one completes.
# Its output is line-buffered (stdbuf) to be read while it runs.
UD_QKEY=0x11111111	# ibv_ud_pingpong's
UD_COUNTERS="ud_rx_dropped ud_rx_bad_qkey ud_rx_no_qp ud_rx_not_ours ud_rx_no_recv"
ud_counts() { local c; for c in $UD_COUNTERS; do printf '%s ' "$(counter mroce0 "$c")"; done; }
ud_dropped_reach() { [ "$(counter mroce0 ud_rx_dropped)" -ge "$1" ]; }
test_forged_ud() {
	local srv cli qpn sent bad_qkey no_qp malformed i c alive=yes
	local -a c0 c1 want
	next_port
	ip netns exec "$NSA" timeout $TO stdbuf -oL ibv_ud_pingpong -d mroce0 -g "$GA" -p $PORT -s 512 -n 1000000 > "$LOG/usrv" 2>&1 &
	srv=$!
	busywait 30000 listening "$NSA" $PORT || { kill $srv; fail "server did not listen"; return; }
	ip netns exec "$NSB" timeout $TO stdbuf -oL ibv_ud_pingpong -d mroce1 -g "$GB" -p $PORT -s 512 -n 1000000 $IPA > "$LOG/ucli" 2>&1 &
	cli=$!
	busywait 60000 grep -q 'remote address' "$LOG/usrv" ||
		{ kill $srv $cli; fail "the ping-pong did not exchange addresses"; return; }
	qpn=$(sed -n 's/.*local address:.*QPN \(0x[0-9a-f]*\).*/\1/p' "$LOG/usrv")
	read -ra c0 <<< "$(ud_counts)"
	sent=$(ip netns exec "$NSB" timeout 60 /usr/bin/python3 "$(dirname "$0")/hostile_packets.py" \
		$IPA "$qpn" $UD_QKEY ud 10)
	ktap_print_msg "at QPN $qpn: $sent"
	read -r bad_qkey no_qp malformed <<< "$(echo "$sent" | sed -n 's/^ud: bad_qkey=\([0-9]*\) no_qp=\([0-9]*\) malformed=\([0-9]*\)$/\1 \2 \3/p')"
	[ -n "$malformed" ] || { kill $srv $cli; fail "hostile_packets.py ud: $sent"; return; }
	busywait 20000 ud_dropped_reach $((c0[0] + bad_qkey + no_qp + malformed))
	read -ra c1 <<< "$(ud_counts)"
	# Both ends must still be ping-ponging (the server's QP alive through the count).
	kill -0 $srv 2>/dev/null && kill -0 $cli 2>/dev/null || alive=no
	kill $srv $cli 2>/dev/null
	wait $srv $cli 2>/dev/null
	want=($((bad_qkey + no_qp + malformed)) "$bad_qkey" "$no_qp" 0 0)
	i=0
	for c in $UD_COUNTERS; do
		ktap_print_msg "$c +$((c1[i] - c0[i])) (want +${want[i]})"
		i=$((i + 1))
	done
	[ $alive = yes ] || { tail -3 "$LOG/usrv" "$LOG/ucli" | sed 's/^/#   /'; fail "the ping-pong ended under the forged datagrams"; return; }
	for i in 0 1 2 3 4; do
		[ $((c1[i] - c0[i])) = "${want[i]}" ] || { fail "the UD drop counters are off"; return; }
	done
	pair ibv_ud_pingpong -s 1000 -n 100 || { fail "no UD ping-pong after the forged datagrams"; return; }
	grep -q '100 iters in' "$LOG/cli" || { fail "100 iterations not completed"; return; }
	return $KSFT_PASS
}

: "${RING_SEEDS:=2}" "${RING_SECONDS:=15}"

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

# Random mutations of a connection's captured datagrams (issue 35), from the peer's
# address with the connection's ids, while content-checked ping-pongs run on another
# connection of the same two devices (second addresses). The attacked connection may
# die (the peer's address and the ids are all that bind a datagram to it: [MR-SEC-7]);
# the other must not notice, the drops must be counted, memory must come back.
MUTATE=$REPO_ROOT/target/selftests/mutate
IPA2=198.18.0.11
IPB2=198.18.0.12
: "${MUTATIONS:=1000000}" "${MUTATION_SECONDS:=100}" "${MUTATION_FLOOR:=25000}"
[ "$MUTATION_FLOOR" -le "$MUTATIONS" ] || MUTATION_FLOOR=$MUTATIONS

second_gids() { [ -n "$(gid_index "$NSA" mroce0 $IPA2)" ] && [ -n "$(gid_index "$NSB" mroce1 $IPB2)" ]; }

# second_addresses: IPA2 and IPB2 on the veth pair (once), and their GIDs.
second_addresses() {
	if ! ip -n "$NSA" -br addr show dev vethA | grep -qw "$IPA2/24"; then
		ip -n "$NSA" addr add $IPA2/24 dev vethA && ip -n "$NSB" addr add $IPB2/24 dev vethB ||
			return
	fi
	busywait 10000 second_gids
}

# steady_pingpongs: 64 KiB content-checked ping-pongs between the second addresses
# until $LOG/stop exists; each run's exit code goes to $LOG/steady (R: retries ran out).
steady_pingpongs() {
	local ga gb port=$((PORT + 500 + 100 * KTAP_TESTNO)) srv rc
	ga=$(gid_index "$NSA" mroce0 $IPA2) gb=$(gid_index "$NSB" mroce1 $IPB2)
	while [ ! -e "$LOG/stop" ]; do
		port=$((port + 1))
		ip netns exec "$NSA" timeout $TO ibv_rc_pingpong -d mroce0 -g "$ga" -p $port \
			-s 65536 -n 100 -c -e > "$LOG/ysrv" 2>&1 &
		srv=$!
		busywait 30000 listening "$NSA" $port ||
			{ kill $srv; echo 255 >> "$LOG/steady"; echo "# other: no server on $port" >> "$LOG/steady.log"; return; }
		ip netns exec "$NSB" timeout $TO ibv_rc_pingpong -d mroce1 -g "$gb" -p $port \
			-s 65536 -n 100 -c -e $IPA2 > "$LOG/ycli" 2>&1
		rc=$?
		wait $srv
		rc=$((rc | $?))
		[ $rc = 0 ] || tail -n 4 "$LOG/ysrv" "$LOG/ycli" | sed "s/^/#   other, port $port: /" >> "$LOG/steady.log"
		# A retry-exhausted run (no ACK for seven RC timeouts, about 0.5 s) is what a
		# guest starved by the flood can show without any datagram of it being touched:
		# recorded as R and the next run started; anything else ends the loop.
		if [ $rc != 0 ] && grep -q "retry counter exceeded" "$LOG/ysrv" "$LOG/ycli"; then
			echo R >> "$LOG/steady"
			continue
		fi
		echo $rc >> "$LOG/steady"
		[ $rc = 0 ] || return
	done
}

# steady_start: the second addresses, then steady_pingpongs in the background.
steady_start() {
	rm -f "$LOG/stop" "$LOG/steady" "$LOG/steady.log"
	second_addresses || { fail "no second addresses or no GIDs for them"; return; }
	steady_pingpongs &
	STEADY=$!
}

# steady_stop: ends steady_pingpongs after its current run; prints what failed runs said.
steady_stop() {
	touch "$LOG/stop"
	wait $STEADY
	[ -s "$LOG/steady.log" ] && cat "$LOG/steady.log"
	return 0
}

# steady_verdict MIN: what the other connection's ping-pongs did; true if at least MIN
# completed content-checked, none failed, and at most one ran out of retries.
steady_verdict() {
	local runs starved bad
	runs=$(grep -cx 0 "$LOG/steady") starved=$(grep -cx R "$LOG/steady")
	bad=$(grep -vcx '0\|R' "$LOG/steady")
	ktap_print_msg "other connection: $runs content-checked ping-pongs of 100 x 64 KiB ok," \
		"$starved ran out of retries, $bad failed otherwise (rx_inbox_full $(counter mroce0 rx_inbox_full))"
	[ "$bad" = 0 ] && [ "$runs" -ge "$1" ] && [ "$starved" -le 1 ]
}

test_mutations() {
	local xsrv xcli local peer before slab0 slab1 sent alive=no
	[ -x "$MUTATE" ] || { fail "no $MUTATE (selftests/run.sh builds it: make -C selftests)"; return; }
	slab0=$(slab_kib)
	steady_start || return
	next_port
	ip netns exec "$NSA" timeout $((MUTATION_SECONDS + 200)) ibv_rc_pingpong -d mroce0 -g "$GA" \
		-p $PORT -n 100000000 -e > "$LOG/srv" 2>&1 &
	xsrv=$!
	busywait 30000 listening "$NSA" $PORT || { kill $xsrv; steady_stop; fail "server did not listen"; return; }
	ip netns exec "$NSB" timeout $((MUTATION_SECONDS + 200)) ibv_rc_pingpong -d mroce1 -g "$GB" \
		-p $PORT -n 100000000 -e $IPA > "$LOG/cli" 2>&1 &
	xcli=$!
	busywait 60000 connected || { kill $xsrv $xcli; steady_stop; fail "no connection"; return; }
	read -r local peer <<< "$(ids)"
	before=$(counter mroce0 rx_dropped)
	ip netns exec "$NSB" timeout 60 /usr/bin/python3 "$(dirname "$0")/hostile_packets.py" \
		$IPA 0 0 capture vethB $IPB "$LOG/pool" | sed 's/^/# /'
	ip netns exec "$NSB" timeout -k 5 $((MUTATION_SECONDS + 60)) "$MUTATE" \
		$IPA "$local" "$peer" "$MUTATIONS" "$MUTATION_SECONDS" "$LOG/pool" | tee "$LOG/mutate" | sed 's/^/# /'
	sent=$(sed -n 's/^sent \([0-9]*\) mutated .*/\1/p' "$LOG/mutate")
	kill -0 $xcli 2>/dev/null && kill -0 $xsrv 2>/dev/null && alive=yes
	kill $xsrv $xcli 2>/dev/null
	wait $xsrv $xcli
	steady_stop
	ktap_print_msg "attacked connection still running at the end: $alive;" \
		"mroce0 rx_dropped $before -> $(counter mroce0 rx_dropped)," \
		"rx_out_of_window $(counter mroce0 rx_out_of_window), rx_bad_header $(counter mroce0 rx_bad_header)," \
		"ns_rx_malformed $(counter mroce0 ns_rx_malformed), rx_wrong_src $(counter mroce0 rx_wrong_src)"
	steady_verdict 2 || { fail "the other connection was disturbed"; return; }
	[ "${sent:-0}" -ge "$MUTATION_FLOOR" ] ||
		{ fail "only ${sent:-0} mutated datagrams sent (at least $MUTATION_FLOOR wanted)"; return; }
	[ "$(counter mroce0 rx_dropped)" -gt "$before" ] || { fail "no mutated datagram was counted as dropped"; return; }
	busywait 30000 no_rc_qps || { fail "RC QPs left"; return; }
	busywait 30000 no_conns || { fail "a connection outlived its QPs"; return; }
	slab1=$(slab_kib)
	ktap_print_msg "slab $slab0 KiB before, $slab1 KiB after"
	[ $((slab1 - slab0)) -lt 16384 ] || { fail "slab grew by $((slab1 - slab0)) KiB"; return; }
	pair ibv_rc_pingpong -s 4096 -n 100 -c >/dev/null || { fail "ping-pong after the mutations"; return; }
	return $KSFT_PASS
}

# One forged request per class of forged_data.py (bad, stale and local-only rkeys,
# va + len past the region or wrapping, segments past total_len, a 4 GiB READ, a READ
# with payload, unaligned and out-of-range atomics, a SEND longer than its receive, a
# SEND to no receive, MSN and SSN far ahead), each at its own QP of the connection
# IPA-IPB, in sequence numbers it accepts, while content-checked ping-pongs run on
# another connection. Each is NAKed, answered with an error status or dropped as the
# spec says, moves only its own QP to ERR, writes no byte anywhere, and the connection
# still carries a new QP pair byte-exact.
test_forged_data() {
	local target plan=$LOG/plan go=$LOG/go naks0 dropped0 window0 window rc other local peer
	rm -f "$plan" "$go"
	steady_start || return
	naks0=$(counter mroce0 tx_naks)
	dropped0=$(counter mroce0 rx_dropped)
	window0=$(counter mroce1 rx_out_of_window)
	ip netns exec "$NSA" timeout -k 5 300 /usr/bin/python3 "$(dirname "$0")/forged_data.py" \
		mroce0 $IPA mroce1 $IPB "$plan" "$go" > "$LOG/target" 2>&1 &
	target=$!
	busywait 120000 test -e "$plan" && connected ||
		{ touch "$go"; wait $target; steady_stop; cat "$LOG/target" | sed 's/^/#   /';
		  fail "the target did not come up"; return; }
	read -r local peer <<< "$(ids)"
	ktap_print_msg "forging on mroce0's conn $local (peer $peer)"
	ip netns exec "$NSB" timeout 60 /usr/bin/python3 -u "$(dirname "$0")/hostile_packets.py" \
		$IPA "$local" "$peer" data "$plan" 2>&1 | sed 's/^/# /'
	sleep 2
	touch "$go"
	wait $target
	rc=$?
	steady_stop
	sed 's/^/# /' "$LOG/target"
	window=$(($(counter mroce1 rx_out_of_window) - window0))
	ktap_print_msg "mroce0 tx_naks +$(($(counter mroce0 tx_naks) - naks0))," \
		"rx_dropped +$(($(counter mroce0 rx_dropped) - dropped0));" \
		"mroce1 rx_out_of_window +$window"
	steady_verdict 1; other=$?
	[ $rc = 0 ] || { fail "forged_data.py: exit $rc"; return; }
	# The victim's ACKs report the forged PSNs it holds; the peer must not drop them
	# (spec [MR-SACK-22]: before, it dropped every one and the connection stalled).
	[ "$window" = 0 ] ||
		{ fail "mroce1 dropped packets of mroce0 as out of window"; return; }
	[ $other = 0 ] || { fail "the other connection was disturbed"; return; }
	# 11 classes are NAKed (RNR for one); 3 get an error status in their response.
	[ $(($(counter mroce0 tx_naks) - naks0)) -ge 11 ] || { fail "too few NAKs"; return; }
	busywait 30000 no_rc_qps || { fail "RC QPs left"; return; }
	return $KSFT_PASS
}

# Malformed MADs at mroce0's QP1 (cm_mads.py: CM MADs of every method and attribute
# with random and boundary fields, other classes and versions, random bytes), sent
# from a UD QP of mroce1 with the GSI Q_Key while rping (rdma_cm, data-checked) runs
# between the two devices: ib_core's MAD and CM layers parse them above the driver;
# nothing may crash or hang, rping must complete, and the device counts them as
# delivered UD datagrams.
: "${CM_MADS:=10000}"
test_cm_mads() {
	local srv cli rc udrx0 port
	udrx0=$(counter mroce0 ud_rx)
	next_port
	port=$((PORT + 700))
	ip netns exec "$NSA" timeout $TO rping -s -a $IPA -p $port -C 400 -V -S 256 > "$LOG/rsrv" 2>&1 &
	srv=$!
	await_cm_listen $port
	ip netns exec "$NSB" timeout $TO rping -c -a $IPA -p $port -C 400 -V -S 256 > "$LOG/rcli" 2>&1 &
	cli=$!
	ip netns exec "$NSB" timeout -k 5 400 /usr/bin/python3 "$(dirname "$0")/cm_mads.py" \
		mroce1 $IPA "$CM_MADS" 35 | sed 's/^/# /'
	wait $cli; rc=$?
	wait $srv; rc=$((rc | $?))
	ktap_print_msg "mroce0 ud_rx +$(($(counter mroce0 ud_rx) - udrx0)), ud_rx_dropped $(counter mroce0 ud_rx_dropped)"
	if [ $rc != 0 ] || grep -qi 'mismatch\|error' "$LOG/rsrv" "$LOG/rcli"; then
		tail -5 "$LOG/rsrv" "$LOG/rcli" | sed 's/^/#   /'
		fail "rping did not survive the MADs"
		return
	fi
	# After them, the CM still connects anew.
	next_port
	port=$((PORT + 700))
	ip netns exec "$NSA" timeout $TO rping -s -a $IPA -p $port -C 10 -V -S 64 > "$LOG/rsrv" 2>&1 &
	srv=$!
	await_cm_listen $port
	ip netns exec "$NSB" timeout $TO rping -c -a $IPA -p $port -C 10 -V -S 64 > "$LOG/rcli" 2>&1
	rc=$?
	wait $srv; rc=$((rc | $?))
	[ $rc = 0 ] || { fail "no rping after the MADs"; return; }
	[ $(($(counter mroce0 ud_rx) - udrx0)) -ge $((CM_MADS / 2)) ] ||
		{ fail "fewer than half the MADs reached QP1"; return; }
	return $KSFT_PASS
}

# OPENs (dst_conn 0) from 1000 spoofed addresses, none a peer, while content-checked
# ping-pongs run: no state ([MR-SEC-2]), every one dropped and counted before any work
# but the lookup ([MR-SEC-8]), the ping-pongs untouched.
: "${SPOOFED_OPENS:=10000}"
conn_up() { [ "$(counter mroce0 conns_open)" -ge 1 ]; }
# other_conns: mroce0's connections to anyone but the second address's peer (debugfs),
# but for those lingering after an earlier case.
other_conns() { grep -E '^conn 0x[0-9a-f]+ to ' $DBG/mroce0/conns | grep -v " to $IPB2 \|lingering=true"; }
test_spoofed_opens() {
	local opened slab0 slab1 dropped0 dropped1 runs spoofed
	steady_start || return
	busywait 60000 conn_up || { steady_stop; fail "no ping-pong connection"; return; }
	opened=$(counter mroce0 conns_opened) slab0=$(slab_kib)
	dropped0=$(($(counter mroce0 rx_no_conn) + $(counter mroce0 rx_open_limited)))
	ip netns exec "$NSB" timeout -k 5 600 /usr/bin/python3 "$(dirname "$0")/hostile_packets.py" \
		$IPA 0 0 spoofed_opens "$SPOOFED_OPENS" 1000 | sed 's/^/# /'
	dropped1=$(($(counter mroce0 rx_no_conn) + $(counter mroce0 rx_open_limited)))
	spoofed=$(other_conns)
	steady_stop
	slab1=$(slab_kib)
	runs=$(wc -l < "$LOG/steady")
	ktap_print_msg "rx_no_conn + rx_open_limited $dropped0 -> $dropped1 (rx_open_limited $(counter mroce0 rx_open_limited));" \
		"conns_opened $opened -> $(counter mroce0 conns_opened); slab $slab0 -> $slab1 KiB"
	steady_verdict 1 || { fail "the ping-pongs were disturbed"; return; }
	# Each ping-pong may open the second addresses' connection anew; nothing else may.
	[ $(($(counter mroce0 conns_opened) - opened)) -le "$runs" ] && [ -z "$spoofed" ] ||
		{ fail "a spoofed OPEN created a connection: $spoofed"; return; }
	[ $((dropped1 - dropped0)) -ge $((SPOOFED_OPENS / 2)) ] ||
		{ fail "only $((dropped1 - dropped0)) of $SPOOFED_OPENS spoofed OPENs were counted"; return; }
	[ $((slab1 - slab0)) -lt 4096 ] || { fail "slab grew by $((slab1 - slab0)) KiB"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 11
load_metaroce || exit $KSFT_FAIL
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
perftest_setup || { ktap_print_msg "setup failed"; exit $KSFT_FAIL; }
# The first Python start in a fresh guest reads its modules over the host share and
# can take longer than a ping-pong: once here, outside every test.
/usr/bin/python3 -c 'import json, random, socket, struct, sys, time'
ktap_test "forged ACKs for PSNs never sent (16 blocks, cum_psn +2^31) are dropped at once" test_far_acks
ktap_test "forged PATH_FLOORs anywhere in the sequence space are dropped" test_far_floors
ktap_test "OPEN with dst_conn 0 after setup (and a CLOSE in it) is refused" test_late_open
ktap_test "truncated, bad-version, bad-type and absurd-count datagrams are dropped" test_malformed
ktap_test "our id with another src_conn, or dst_conn 0 without OPEN, is refused before queueing" test_wrong_src
ktap_test "forged UD datagrams (other Q_Keys, no such QP, malformed) are counted by reason; UD ping-pongs go on" test_forged_ud
ktap_test "garbage in a process's own mapped SQ, RQ, SRQ and CQ rings while it posts: refused, released" test_hostile_rings
ktap_test "mutations of a connection's own datagrams, $MUTATION_FLOOR to $MUTATIONS in $MUTATION_SECONDS s: counted, another connection untouched, memory back" test_mutations
ktap_test "forged requests past every memory and stream check: refused per class, no byte written, connection intact" test_forged_data
ktap_test "$CM_MADS malformed MADs at QP1 while rping runs: the CM keeps serving" test_cm_mads
ktap_test "$SPOOFED_OPENS OPENs from 1000 spoofed addresses: no state, all counted, other traffic untouched" test_spoofed_opens
ktap_finished
