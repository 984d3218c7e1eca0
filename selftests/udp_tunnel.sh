#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# MetaRoCE UDP tunnel: port 4793 is open in a namespace exactly while a metaroce device
# exists there (shared by the devices of one namespace); test datagrams sent through
# the debugfs transmitter arrive on the peer's device, over IPv4 and IPv6, with
# ECT(0), from varied source ports; CE marks are counted; no-route is reported;
# datagrams from user space, empty, tiny, fragmented or for no device are counted and
# dropped; namespace deletion and rmmod close the sockets.

. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
PORT=4793
N=100

trap cleanup_devices_and_ns EXIT

setup() {
	load_metaroce || return 1
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug || return 1
	setup_ns NSA NSB || return 1
	veth_pair "$NSA" "$NSB" || return 1
	ip -n "$NSA" addr add fd00::1/64 dev vethA nodad
	ip -n "$NSB" addr add fd00::2/64 dev vethB nodad
}

# port_sockets NS: number of UDP sockets bound to $PORT in NS.
port_sockets() { ip netns exec "$1" ss -Huln "sport = :$PORT" | wc -l; }
# port_open NS / port_closed NS: both IPv4 and IPv6 sockets exist / none does.
port_open() { [ "$(port_sockets "$1")" -eq 2 ]; }
port_closed() { [ "$(port_sockets "$1")" -eq 0 ]; }

# counter_is DEV NAME VALUE
counter_is() { [ "$(counter "$1" "$2")" = "$3" ]; }

# xmit DEV ARGS...: writes ARGS to DEV's debugfs transmitter.
xmit() {
	local dev=$1; shift
	echo "$*" > "/sys/kernel/debug/metaroce/$dev/xmit"
}

# udp_send NS HOST SIZE...: sends one datagram of each SIZE to HOST:$PORT from NS.
udp_send() {
	local ns=$1 host=$2; shift 2
	ip netns exec "$ns" $PY - "$host" "$PORT" "$@" <<'PY'
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ':' in host else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
for size in sys.argv[3:]:
    s.sendto(bytes(i & 0xff for i in range(int(size))), (host, port))
PY
}

test_port_follows_devices() {
	port_closed "$NSA" && port_closed "$NSB" || { fail "port $PORT open before any device"; return; }
	ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA || { fail "add mroce0"; return; }
	port_open "$NSA" || { fail "no IPv4+IPv6 sockets in A: $(ip netns exec "$NSA" ss -Huln)"; return; }
	port_closed "$NSB" || { fail "B has a socket without a device"; return; }
	# A second device in A shares the sockets; they stay until the last one goes.
	ip -n "$NSA" link add dum0 type dummy && ip -n "$NSA" link set dum0 up
	ip netns exec "$NSA" rdma link add mroce2 type metaroce netdev dum0 || { fail "add mroce2"; return; }
	port_open "$NSA" || { fail "two devices: $(port_sockets "$NSA") sockets in A"; return; }
	rdma link del mroce0 || { fail "del mroce0"; return; }
	port_open "$NSA" || { fail "sockets closed while mroce2 remains"; return; }
	rdma link del mroce2 || { fail "del mroce2"; return; }
	busywait 5000 port_closed "$NSA" || { fail "sockets left after the last device"; return; }
	ip -n "$NSA" link del dum0
	ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA || { fail "re-add mroce0"; return; }
	ip netns exec "$NSB" rdma link add mroce1 type metaroce netdev vethB || { fail "add mroce1"; return; }
	port_open "$NSA" && port_open "$NSB" || { fail "ports not open on both sides"; return; }
	return $KSFT_PASS
}

# check_delivery DST SRC_PORT: N datagrams A -> B arrive as ECT(0), none CE.
check_delivery() {
	local dst=$1 sport=$2
	local rx0 ect0 ce0 tx0 bytes0
	rx0=$(counter mroce1 rx_packets); ect0=$(counter mroce1 rx_ect0)
	ce0=$(counter mroce1 rx_ce); bytes0=$(counter mroce1 rx_bytes)
	tx0=$(counter mroce0 tx_packets)
	xmit mroce0 "$dst $sport $N 200" || { fail "xmit to $dst failed"; return; }
	counter_is mroce0 tx_packets $((tx0 + N)) || { fail "mroce0 tx_packets $(counter mroce0 tx_packets), want $((tx0 + N))"; return; }
	busywait 5000 counter_is mroce1 rx_packets $((rx0 + N)) \
		|| { fail "mroce1 rx_packets $(counter mroce1 rx_packets), want $((rx0 + N))"; return; }
	counter_is mroce1 rx_ect0 $((ect0 + N)) || { fail "rx_ect0 $(counter mroce1 rx_ect0), want $((ect0 + N)): not ECT(0)"; return; }
	counter_is mroce1 rx_ce "$ce0" || { fail "CE marks without congestion"; return; }
	counter_is mroce1 rx_bytes $((bytes0 + 200 * N)) || { fail "rx_bytes $(counter mroce1 rx_bytes), want $((bytes0 + 200 * N))"; return; }
	[ "$(counter mroce1 rx_packets)" = "$(rdma_counter mroce1 rx_packets)" ] \
		|| { fail "sysfs hw_counters disagree with rdma statistic"; return; }
	return $KSFT_PASS
}

# Source ports 65500.. wrap around to 1..: $N distinct ports, 0 never used.
test_ipv4_delivery() { check_delivery 198.18.0.2 65500; }
test_ipv6_delivery() { check_delivery fd00::2 1000; }

test_ce_marks() {
	local ce0 rx0
	# netem's "loss 100% ecn" marks every ECN-capable packet CE instead of dropping it
	# (and drops the others): all must arrive, CE-marked.
	ip netns exec "$NSA" tc qdisc add dev vethA root netem loss 100% ecn || return $KSFT_SKIP
	ce0=$(counter mroce1 rx_ce); rx0=$(counter mroce1 rx_packets)
	xmit mroce0 "198.18.0.2 2000 $N" || { fail "xmit failed"; return; }
	busywait 5000 counter_is mroce1 rx_ce $((ce0 + N)) \
		|| { fail "rx_ce $(counter mroce1 rx_ce), want $((ce0 + N)); rx_packets $(counter mroce1 rx_packets) (was $rx0)"; return; }
	ip netns exec "$NSA" tc qdisc del dev vethA root
	return $KSFT_PASS
}

test_no_route() {
	local nr0 err0
	nr0=$(counter mroce0 ns_tx_no_route); err0=$(counter mroce0 tx_errors)
	ip -n "$NSA" link set vethA down
	xmit mroce0 "198.18.0.2 3000 3" 2>/dev/null && { fail "xmit over a down netdev succeeded"; return; }
	ip -n "$NSA" link set vethA up
	# IPv6 addresses do not survive a link down.
	ip -n "$NSA" addr replace fd00::1/64 dev vethA nodad
	counter_is mroce0 ns_tx_no_route $((nr0 + 3)) || { fail "ns_tx_no_route $(counter mroce0 ns_tx_no_route), want $((nr0 + 3))"; return; }
	counter_is mroce0 tx_errors $((err0 + 3)) || { fail "tx_errors $(counter mroce0 tx_errors), want $((err0 + 3))"; return; }
	busywait 10000 sh -c "ip netns exec $NSA ping -c1 -W1 198.18.0.2 >/dev/null" || { fail "vethA did not come back"; return; }
	return $KSFT_PASS
}

test_bad_xmit_requests() {
	local req
	for req in "" "garbage" "198.18.0.2" "198.18.0.2 0 1" "198.18.0.2 1 1000000" \
		"198.18.0.2 1 1 9001" "198.18.0.2 1 1 64 extra" "300.1.1.1 1 1"; do
		xmit mroce0 "$req" 2>/dev/null && { fail "request '$req' accepted"; return; }
	done
	return $KSFT_PASS
}

test_user_datagrams() {
	[ -x $PY ] || return $KSFT_SKIP
	local rx0 noct0 nodev0 sizes=(0 1 7 8 1472 8000)
	rx0=$(counter mroce1 rx_packets); noct0=$(counter mroce1 rx_not_ect)
	nodev0=$(counter mroce1 ns_rx_no_device)
	# Empty, tiny, MTU-sized and fragmented (reassembled, so not linear) datagrams.
	udp_send "$NSA" 198.18.0.2 "${sizes[@]}" || { fail "send from user space"; return; }
	udp_send "$NSA" fd00::2 "${sizes[@]}" || { fail "send over IPv6 from user space"; return; }
	# 200 more of random sizes.
	udp_send "$NSA" 198.18.0.2 $(for i in $(seq 200); do echo $((RANDOM % 1500)); done) \
		|| { fail "random sizes"; return; }
	local want=$((rx0 + 2 * ${#sizes[@]} + 200))
	busywait 5000 counter_is mroce1 rx_packets $want \
		|| { fail "rx_packets $(counter mroce1 rx_packets), want $want"; return; }
	counter_is mroce1 rx_not_ect $((noct0 + 2 * ${#sizes[@]} + 200)) || { fail "user-space datagrams are not Not-ECT"; return; }
	# Local traffic inside B comes in on lo, which has no device.
	udp_send "$NSB" 127.0.0.1 16 || { fail "local send"; return; }
	udp_send "$NSB" ::1 16 || { fail "local IPv6 send"; return; }
	busywait 5000 counter_is mroce1 ns_rx_no_device $((nodev0 + 2)) \
		|| { fail "ns_rx_no_device $(counter mroce1 ns_rx_no_device), want $((nodev0 + 2))"; return; }
	counter_is mroce1 rx_packets $want || { fail "datagrams on lo were counted on mroce1"; return; }
	return $KSFT_PASS
}

test_last_device_closes_port() {
	rdma link del mroce0 || { fail "del mroce0"; return; }
	busywait 5000 port_closed "$NSA" || { fail "port still open in A"; return; }
	port_open "$NSB" || { fail "B lost its sockets"; return; }
	return $KSFT_PASS
}

test_netns_deleted_with_device() {
	local nsc
	setup_ns NSC || return 1
	nsc=$NSC
	ip -n "$nsc" link add dum0 type dummy && ip -n "$nsc" addr add 198.19.0.1/24 dev dum0 \
		&& ip -n "$nsc" link set dum0 up || { fail "dummy netdev"; return; }
	ip netns exec "$nsc" rdma link add mroce3 type metaroce netdev dum0 || { fail "add mroce3"; return; }
	port_open "$nsc" || { fail "no sockets in C"; return; }
	xmit mroce3 "198.19.0.1 5000 5" || { fail "xmit to self in C"; return; }
	ip netns del "$nsc"
	busywait 10000 rdma_dev_gone mroce3 || { fail "mroce3 survived its namespace"; return; }
	port_open "$NSB" || { fail "B lost its sockets"; return; }
	return $KSFT_PASS
}

test_rmmod_closes_sockets() {
	ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA || { fail "add mroce0"; return; }
	xmit mroce0 "198.18.0.2 1000 10" || { fail "xmit"; return; }
	timeout 60 rmmod metaroce || { fail "rmmod failed"; return; }
	port_closed "$NSA" && port_closed "$NSB" || { fail "sockets left after rmmod"; return; }
	[ -e /sys/kernel/debug/metaroce ] && { fail "debugfs directory left after rmmod"; return; }
	load_metaroce || { fail "reload failed"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 10
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_test "port $PORT is open in a namespace exactly while it has devices" test_port_follows_devices
ktap_test "$N datagrams A->B over IPv4 arrive as ECT(0) from $N source ports" test_ipv4_delivery
ktap_test "$N datagrams A->B over IPv6 arrive as ECT(0) from $N source ports" test_ipv6_delivery
ktap_test "CE marks (netem ecn) are counted" test_ce_marks
ktap_test "no route is reported and counted" test_no_route
ktap_test "malformed xmit requests are refused" test_bad_xmit_requests
ktap_test "datagrams from user space (empty, tiny, fragmented, for no device) are counted and dropped" test_user_datagrams
ktap_test "deleting the last device closes the port" test_last_device_closes_port
ktap_test "deleting a namespace with a device closes its sockets" test_netns_deleted_with_device
ktap_test "rmmod closes every socket" test_rmmod_closes_sockets
ktap_finished
