#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Loopback (issue 32): both ends on one device, and two devices in one namespace.
# One namespace $NSL holds vethA (198.18.0.1, fd00:18::1) with mroce0 and vethB
# (198.18.0.2, fd00:18::2) with mroce1. Datagrams to a local address never leave the
# host: they are routed through the loopback device and go to the device whose
# netdev owns the destination address (Documentation/metaroce/driver.rst,
# "Loopback"; spec [MR-CONN-15]).
#
# Every case checks, besides the tool's own result, that no datagram went unclaimed
# (ns_rx_no_device, what broken loopback shows), that the devices exchanged
# datagrams (rx_packets), that they did not go out of the veth links (routed through
# the sender's netdev, two devices' datagrams would cross the veth pair, which
# accept_local lets through) and, for the short exchanges, that retransmission timers
# fired for at most 1 in 50 datagrams (rto_expired: broken loopback makes every RC
# exchange time out).

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/perftest.sh"

MROCE_TYPE=metaroce
IPA=198.18.0.1
IPB=198.18.0.2
IP6A=fd00:18::1
IP6B=fd00:18::2
TO=${LOOPBACK_TO:-90}
PORT=20000
LOG=$(mktemp -d /tmp/loopback.XXXXXX)

cleanup() {
	ip netns exec "$NSL" pkill -x rping 2>/dev/null
	cleanup_devices_and_ns
	rm -rf "$LOG"
}
trap cleanup EXIT

setup() {
	load_metaroce || return 1
	setup_ns NSL || return 1
	ip link add vethA netns "$NSL" type veth peer name vethB netns "$NSL" || return 1
	ip -n "$NSL" addr add $IPA/24 dev vethA && ip -n "$NSL" addr add $IPB/24 dev vethB || return 1
	ip -n "$NSL" addr add $IP6A/64 dev vethA nodad && ip -n "$NSL" addr add $IP6B/64 dev vethB nodad || return 1
	ip -n "$NSL" link set vethA up && ip -n "$NSL" link set vethB up || return 1
	# The RDMA core resolves a RoCE peer's MAC through the source GID's netdev, even
	# for a local address of another netdev: from vethB, 198.18.0.1 is a neighbour on
	# vethB's link, whose ARP request comes in on vethA with a local source address,
	# dropped as a martian unless accepted. Only the two-device cases need this; the
	# datagrams themselves never take that link. (Over IPv6 the same resolution
	# fails for rdma_cm, on rdma_rxe too: no such case here.)
	ip netns exec "$NSL" sh -c 'for i in all vethA vethB; do sysctl -qw net.ipv4.conf.$i.accept_local=1; done'
	ip netns exec "$NSL" rdma link add mroce0 type metaroce netdev vethA || return 1
	ip netns exec "$NSL" rdma link add mroce1 type metaroce netdev vethB || return 1
	busywait 10000 gid_index_of mroce0 $IP6A >/dev/null || return 1
	busywait 10000 gid_index_of mroce1 $IP6B >/dev/null || return 1
	GA=$(gid_index "$NSL" mroce0 $IPA)
	GB=$(gid_index "$NSL" mroce1 $IPB)
	G6A=$(gid_index_of mroce0 $IP6A)
	[ -n "$GA" ] && [ -n "$GB" ] && [ -n "$G6A" ]
}

# wire: packets sent out of vethA and vethB (ARP, neighbour discovery: a few).
wire() {
	ip netns exec "$NSL" cat /sys/class/net/vethA/statistics/tx_packets /sys/class/net/vethB/statistics/tx_packets |
		awk '{ s += $1 } END { print s }'
}

# snap: remembers the counters that checked() compares against.
snap() {
	WIRE0=$(wire)
	NODEV0=$(counter mroce0 ns_rx_no_device)
	RTO0=$(( $(counter mroce0 rto_expired) + $(counter mroce1 rto_expired) ))
	RX0=$(( $(counter mroce0 rx_packets) + $(counter mroce1 rx_packets) ))
	RXB0=$(counter mroce1 rx_packets)
	RXA0=$(counter mroce0 rx_packets)
}

# checked [rto] [dev1]: after a run, no datagram went unclaimed and some were received;
# with "rto", retransmission timeouts for at most 1 in 50 datagrams; with "dev1",
# mroce1 received (the second device took part) as well as mroce0.
checked() {
	local nodev rto rx a w
	nodev=$(counter mroce0 ns_rx_no_device)
	rto=$(( $(counter mroce0 rto_expired) + $(counter mroce1 rto_expired) ))
	rx=$(( $(counter mroce0 rx_packets) + $(counter mroce1 rx_packets) ))
	w=$(( $(wire) - WIRE0 ))
	ktap_print_msg "datagrams received $((rx - RX0)), unclaimed $((nodev - NODEV0)), RTOs $((rto - RTO0)), veth packets sent $w"
	# Why a timer fired: a datagram dropped on the way in, or a late one (undone).
	[ "$rto" -eq "$RTO0" ] || ktap_print_msg "rto_spurious $(counter mroce0 rto_spurious)/$(counter mroce1 rto_spurious)," \
		"rx_inbox_full $(counter mroce0 rx_inbox_full)/$(counter mroce1 rx_inbox_full)"
	[ "$nodev" -eq "$NODEV0" ] || { fail "$((nodev - NODEV0)) datagrams claimed by no device (ns_rx_no_device)"; return; }
	[ "$rx" -gt "$RX0" ] || { fail "no datagram received (rx_packets)"; return; }
	# Loopback never takes the link: only the odd ARP or neighbour discovery packet.
	[ "$w" -le 20 ] || { fail "$w packets went out of the veth links"; return; }
	for a in "$@"; do
		case $a in
		# A QP's first requests can beat its peer to RTR (dropped, then sent
		# again, on any RC device), and a slow emulation delays an ACK past the
		# RTO now and then: 1 timeout in 50 datagrams is what broken loopback
		# cannot show, whose every exchange times out.
		rto) [ $(((rto - RTO0) * 50)) -le $((rx - RX0)) ] ||
			{ fail "$((rto - RTO0)) retransmission timeouts (rto_expired) for $((rx - RX0)) datagrams"; return; };;
		dev1)
			[ "$(counter mroce1 rx_packets)" -gt "$RXB0" ] || { fail "mroce1 received nothing"; return; }
			[ "$(counter mroce0 rx_packets)" -gt "$RXA0" ] || { fail "mroce0 received nothing"; return; }
			;;
		esac
	done
	return $KSFT_PASS
}

# lpair SDEV SGID CDEV CGID ADDR TOOL ARGS...: TOOL as server on SDEV and as client on
# CDEV (connecting to ADDR over TCP for the exchange), both in $NSL, both bounded by
# $TO; outputs in $LOG/srv and $LOG/cli. Fails unless both exit 0.
lpair() {
	local sdev=$1 sgid=$2 cdev=$3 cgid=$4 addr=$5 tool=$6; shift 6
	local gflag=-x srv rc_srv rc_cli start=$SECONDS
	case $tool in ibv_*_pingpong) gflag=-g ;; esac
	next_port
	ip netns exec "$NSL" timeout $TO "$tool" -d "$sdev" $gflag "$sgid" -p $PORT "$@" > "$LOG/srv" 2>&1 &
	srv=$!
	if ! busywait 30000 listening "$NSL" $PORT; then
		kill $srv 2>/dev/null; wait $srv
		sed 's/^/#   srv: /' "$LOG/srv"
		fail "$tool server did not listen on port $PORT"
		return
	fi
	ip netns exec "$NSL" timeout $TO "$tool" -d "$cdev" $gflag "$cgid" -p $PORT "$@" "$addr" > "$LOG/cli" 2>&1
	rc_cli=$?
	wait $srv
	rc_srv=$?
	if [ $rc_cli -ne 0 ] || [ $rc_srv -ne 0 ]; then
		sed 's/^/#   srv: /' "$LOG/srv" | tail -20
		sed 's/^/#   cli: /' "$LOG/cli" | tail -20
		fail "$tool $*: server exit $rc_srv, client exit $rc_cli"
		return
	fi
	ktap_print_msg "$tool $*: $((SECONDS - start)) s"
	return $KSFT_PASS
}

# self TOOL ARGS...: both ends on mroce0, IPv4 GID.
self() { lpair mroce0 "$GA" mroce0 "$GA" $IPA "$@"; }

# iters N: both ends printed "N iters in".
iters() {
	grep -q "$1 iters in" "$LOG/cli" && grep -q "$1 iters in" "$LOG/srv" \
		|| { fail "$1 iterations not completed"; return; }
	ktap_print_msg "$(grep 'bytes in' "$LOG/cli")"
	return $KSFT_PASS
}

test_rc_pingpong() { snap; self ibv_rc_pingpong -c -s 4096 -n 200 && iters 200 && checked rto; }
test_rc_pingpong6() {
	snap
	lpair mroce0 "$G6A" mroce0 "$G6A" $IPA ibv_rc_pingpong -c -s 4096 -n 200 && iters 200 && checked rto
}
test_ud_pingpong() { snap; self ibv_ud_pingpong -s 1000 -n 200 && iters 200 && checked; }
test_srq_pingpong() { snap; self ibv_srq_pingpong -c -q 4 -s 4096 -n 100 && iters 100 && checked rto; }
# Completion channels: the tools sleep in ibv_get_cq_event; a lost event hangs them
# until $TO.
test_rc_events() { snap; self ibv_rc_pingpong -e -c -s 1024 -n 100 && iters 100 && checked rto; }
test_ud_events() { snap; self ibv_ud_pingpong -e -s 512 -n 100 && iters 100 && checked; }

# perf TOOL ARGS...: a short perftest run, both ends on mroce0, and a result line with
# a nonzero figure.
perf() {
	snap
	self "$@" -F || return
	results | tail -1 | awk '{ exit !($4 > 0 || $5 > 0) }' || {
		clock_failed && { ktap_print_msg "perftest could not estimate its clock: result not checked"; checked; return; }
		sed 's/^/#   cli: /' "$LOG/cli" | tail -10
		fail "no nonzero result"
		return
	}
	ktap_print_msg "$(results | tail -1 | tr -s ' ')"
	checked
}

# cm SERVER... -- CLIENT...: an rdma_cm server and client in $NSL.
cm() {
	local srv rc_srv rc_cli scmd=() start=$SECONDS listeners
	while [ "$1" != -- ]; do scmd+=("$1"); shift; done
	shift
	listeners=$(cm_listeners)
	# stdout and stderr apart: a line of stderr may land inside a buffered stdout line.
	ip netns exec "$NSL" timeout $TO "${scmd[@]}" > "$LOG/srv" 2> "$LOG/srv.err" &
	srv=$!
	await_cm_listeners_above "$listeners"
	ip netns exec "$NSL" timeout $TO "$@" > "$LOG/cli" 2> "$LOG/cli.err"
	rc_cli=$?
	wait $srv
	rc_srv=$?
	if [ $rc_cli -ne 0 ] || [ $rc_srv -ne 0 ]; then
		cat "$LOG/srv" "$LOG/srv.err" | sed 's/^/#   srv: /' | tail -15
		cat "$LOG/cli" "$LOG/cli.err" | sed 's/^/#   cli: /' | tail -15
		fail "$1: server exit $rc_srv, client exit $rc_cli"
		return
	fi
	ktap_print_msg "$*: $((SECONDS - start)) s"
	return $KSFT_PASS
}

# rping_to ADDR [SRC]: 50 validated pings of 256 B to ADDR (from SRC); the server
# ends when the client disconnects.
rping_to() {
	local n
	snap
	next_port
	cm rping -s -a "$1" -p $PORT -v -V -S 256 -- \
		rping -c ${2:+-I "$2"} -a "$1" -p $PORT -C 50 -v -V -S 256 || return
	n=$(grep -o 'ping data: rdma-ping-[0-9]*:' "$LOG/cli" | sort -u | wc -l)
	[ "$n" -eq 50 ] || { grep -v '^ping data' "$LOG/cli" | head -5 | sed 's/^/#   cli: /'; fail "client printed $n distinct pings, not 50"; return; }
	checked ${2:+dev1}
}

test_ucmatose() {
	snap
	next_port
	cm ucmatose -b $IPA -p $PORT -c 2 -C 10 -S 1024 -- ucmatose -s $IPA -p $PORT -c 2 -C 10 -S 1024 || return
	grep -q 'test complete' "$LOG/cli" || { fail "ucmatose client did not complete"; return; }
	checked
}

test_rdma_client() {
	snap
	next_port
	cm rdma_server -s $IPA -p $PORT -- rdma_client -s $IPA -p $PORT || return
	grep -q 'rdma_client: end 0' "$LOG/cli" || { cat "$LOG/cli" "$LOG/cli.err" | sed 's/^/#   cli: /'; fail "rdma_client did not end with 0"; return; }
	checked
}

test_two_rc() {
	snap
	lpair mroce1 "$GB" mroce0 "$GA" $IPB ibv_rc_pingpong -c -s 4096 -n 200 && iters 200 && checked rto dev1
}
test_two_ud() { snap; lpair mroce1 "$GB" mroce0 "$GA" $IPB ibv_ud_pingpong -s 1000 -n 200 && iters 200 && checked dev1; }
test_two_write_bw() {
	snap
	lpair mroce1 "$GB" mroce0 "$GA" $IPB ib_write_bw -n 200 -F || return
	ktap_print_msg "$(results | tail -1 | tr -s ' ')"
	checked dev1
}

# After all of it: no connection is left on either device once the tools exited.
test_idle() {
	busywait 20000 sh -c "[ \$(rdma resource show qp 2>/dev/null | grep -c 'type RC') -eq 0 ]" \
		|| { rdma resource show qp | sed 's/^/#   /' | head; fail "RC QPs left over"; return; }
	busywait 10000 sh -c "[ \$(rdma statistic show link mroce0/1 | tr -s ' ' '\n' | grep -A1 -x conns_open | tail -1) -eq 0 ]" \
		|| { fail "mroce0 still has open connections"; return; }
	ktap_print_msg "rx_no_conn $(counter mroce0 rx_no_conn)/$(counter mroce1 rx_no_conn)," \
		"rx_wrong_peer $(counter mroce0 rx_wrong_peer)/$(counter mroce1 rx_wrong_peer)," \
		"rto_expired $(counter mroce0 rto_expired)/$(counter mroce1 rto_expired)," \
		"ns_rx_no_device $(counter mroce0 ns_rx_no_device)"
	[ "$(counter mroce0 rx_wrong_peer)" -eq 0 ] && [ "$(counter mroce1 rx_wrong_peer)" -eq 0 ] \
		|| { fail "datagrams dropped as from the wrong peer"; return; }
	return $KSFT_PASS
}

# Sourced (to run single cases by hand): the functions only.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

ktap_print_header
ktap_set_plan 19
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_print_msg "mroce0 GID $GA ($IPA), $G6A ($IP6A); mroce1 GID $GB ($IPB)"
ktap_test "one device: ibv_rc_pingpong -c, 200 x 4 KiB (IPv4)" test_rc_pingpong
ktap_test "one device: ibv_rc_pingpong -c, 200 x 4 KiB (IPv6 GID)" test_rc_pingpong6
ktap_test "one device: ibv_ud_pingpong, 200 x 1000 B" test_ud_pingpong
ktap_test "one device: ibv_srq_pingpong -c, 4 QPs" test_srq_pingpong
ktap_test "one device: ibv_rc_pingpong -e (completion channel)" test_rc_events
ktap_test "one device: ibv_ud_pingpong -e (completion channel)" test_ud_events
ktap_test "one device: ib_write_bw" clocked perf ib_write_bw -n 200
ktap_test "one device: ib_read_bw" clocked perf ib_read_bw -n 200
ktap_test "one device: ib_send_bw" clocked perf ib_send_bw -n 200
ktap_test "one device: ib_atomic_bw" clocked perf ib_atomic_bw -n 200
ktap_test "one device: rping -v -V -C 50 to $IPA" rping_to $IPA
ktap_test "one device: rping -v -V -C 50 to $IP6A" rping_to $IP6A
ktap_test "one device: ucmatose to $IPA, 2 connections" test_ucmatose
ktap_test "one device: rdma_server/rdma_client to $IPA" test_rdma_client
ktap_test "two devices, one namespace: ibv_rc_pingpong -c" test_two_rc
ktap_test "two devices, one namespace: ibv_ud_pingpong" test_two_ud
ktap_test "two devices, one namespace: ib_write_bw" clocked test_two_write_bw
ktap_test "two devices, one namespace: rping $IPA -> $IPB" rping_to $IPB $IPA
ktap_test "afterwards: no QP or connection left, no datagram from a wrong peer" test_idle
ktap_finished
