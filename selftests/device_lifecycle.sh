#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# MetaRoCE device lifecycle: create, query and delete devices in two namespaces over
# veth; port state, MTU and GIDs follow the netdev; user contexts and PDs from stock
# rdma-core; repeated create/delete; netdev removal and rmmod with devices present;
# clear errors for bad requests.
#
#   CYCLES=N create/delete cycles (default 10; each takes seconds under TCG).

. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
: "${CYCLES:=10}"

cleanup() {
	local d
	for d in rxe0 rxe1 rxe2; do rdma link del "$d" 2>/dev/null; done
	cleanup_devices_and_ns
}
trap cleanup EXIT

setup() {
	load_metaroce || return 1
	setup_ns NSA NSB || return 1
	veth_pair "$NSA" "$NSB" || return 1
}

test_create_query() {
	create_pair || { fail "rdma link add failed"; return; }
	busywait 5000 rdma_dev_exists mroce0 || { fail "mroce0 not registered"; return; }
	ip netns exec "$NSA" rdma link show mroce0/1 | grep -q "netdev vethA" || { fail "mroce0 not bound to vethA: $(ip netns exec "$NSA" rdma link show mroce0/1)"; return; }
	busywait 5000 sh -c '[ "$(rdma link show mroce1/1 | sed -n "s/.* state \([A-Z_]*\).*/\1/p")" = ACTIVE ]' \
		|| { fail "mroce1 not ACTIVE: $(rdma link show mroce1/1)"; return; }
	ibv_devices | grep -q mroce0 || { fail "ibv_devices does not list mroce0"; return; }
	local info
	info=$(ip netns exec "$NSA" ibv_devinfo -v -d mroce0) || { fail "ibv_devinfo -d mroce0 failed"; return; }
	echo "$info" | grep -q 'transport:.*InfiniBand' || { fail "transport"; return; }
	echo "$info" | grep -q 'link_layer:.*Ethernet' || { fail "link layer is not Ethernet"; return; }
	echo "$info" | grep -q 'state:.*PORT_ACTIVE' || { fail "port not active"; return; }
	echo "$info" | grep -q 'active_mtu:.*1024' || { fail "active_mtu at MTU 1500 is not 1024"; return; }
	busywait 5000 sh -c "ip netns exec $NSA ibv_devinfo -v -d mroce0 | grep -q '::ffff:198.18.0.1'" \
		|| { fail "no IPv4-mapped GID for 198.18.0.1"; return; }
	# IPv6: a global address and the link-local default GID (the core finds the
	# netdev through ops.get_netdev: the device does not give it with set_netdev).
	ip -n "$NSA" addr add 2001:db8::1/64 dev vethA nodad
	busywait 5000 sh -c "ip netns exec $NSA ibv_devinfo -v -d mroce0 | grep -q '2001:db8::1'" \
		|| { fail "no GID for 2001:db8::1"; return; }
	ip netns exec "$NSA" ibv_devinfo -v -d mroce0 | grep -q 'fe80:' \
		|| { fail "no link-local GID"; return; }
	ip -n "$NSA" addr del 2001:db8::1/64 dev vethA
	busywait 5000 sh -c "! ip netns exec $NSA ibv_devinfo -v -d mroce0 | grep -q '2001:db8::1'" \
		|| { fail "the GID for 2001:db8::1 stayed after the address went"; return; }
	# The node GUID is the EUI-64 of vethA's MAC.
	local mac guid
	mac=$(ip -n "$NSA" -br link show vethA | awk '{print $3}')
	guid=$(printf '%02x%s:%sff:fe%s:%s%s' $((0x${mac:0:2} ^ 2)) "${mac:3:2}" "${mac:6:2}" \
		"${mac:9:2}" "${mac:12:2}" "${mac:15:2}")
	echo "$info" | grep -q "node_guid:.*$guid" || { fail "node_guid is not the EUI-64 of $mac ($guid)"; return; }
	return $KSFT_PASS
}

test_user_context_and_pd() {
	[ -x $PY ] && $PY -c 'import pyverbs' 2>/dev/null || return $KSFT_SKIP
	ip netns exec "$NSA" $PY - <<'PY' || { fail "pyverbs context/PD failed"; return; }
from pyverbs.device import Context
from pyverbs.pd import PD
ctx = Context(name='mroce0')
attr = ctx.query_device()
assert attr.max_qp > 0, attr.max_qp
pds = [PD(ctx) for _ in range(16)]
for pd in pds:
    pd.close()
ctx.close()
PY
	return $KSFT_PASS
}

test_port_follows_netdev() {
	# The port events come from the driver's netdev notifier (the RDMA core's does not
	# know our netdev): an application sees PORT_ERR and PORT_ACTIVE.
	local watch=/tmp/metaroce-asyncwatch.$$ wpid
	ip netns exec "$NSA" timeout 60 ibv_asyncwatch -d mroce0 >"$watch" 2>&1 &
	wpid=$!
	# It prints its event FD once the device is open (line-buffered): events from
	# then on reach it. A fixed second was too short on the sanitizer kernel.
	busywait 30000 grep -q 'async event FD' "$watch" \
		|| { kill "$wpid" 2>/dev/null; fail "ibv_asyncwatch did not start: $(cat "$watch")"; return; }
	ip -n "$NSA" link set vethA down
	busywait 5000 sh -c '[ "$(rdma link show mroce0/1 | sed -n "s/.* state \([A-Z_]*\).*/\1/p")" = DOWN ]' \
		|| { fail "port not DOWN after link down: $(rdma link show mroce0/1)"; return; }
	ip -n "$NSA" link set vethA up
	busywait 5000 sh -c '[ "$(rdma link show mroce0/1 | sed -n "s/.* state \([A-Z_]*\).*/\1/p")" = ACTIVE ]' \
		|| { fail "port not ACTIVE after link up"; return; }
	busywait 5000 grep -q 'PORT_ACTIVE' "$watch"
	kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null
	grep -q 'PORT_ERR' "$watch" && grep -q 'PORT_ACTIVE' "$watch" \
		|| { fail "no PORT_ERR/PORT_ACTIVE events: $(tr '\n' ' ' <"$watch")"; return; }
	rm -f "$watch"
	ip -n "$NSA" link set vethA mtu 9000
	ip netns exec "$NSA" ibv_devinfo -d mroce0 | grep -q 'active_mtu:.*4096' \
		|| { fail "active_mtu did not follow MTU 9000"; return; }
	ip -n "$NSA" link set vethA mtu 1500
	ip netns exec "$NSA" ibv_devinfo -d mroce0 | grep -q 'active_mtu:.*1024' \
		|| { fail "active_mtu did not follow MTU 1500"; return; }
	return $KSFT_PASS
}

test_bad_requests() {
	local out
	out=$(ip netns exec "$NSA" rdma link add mroce9 type metaroce netdev nosuchdev 2>&1) \
		&& { fail "link add on a missing netdev succeeded"; return; }
	ktap_print_msg "missing netdev: $out"
	out=$(ip netns exec "$NSA" rdma link add mroce9 type metaroce netdev vethA 2>&1) \
		&& { fail "a second device on vethA was created"; return; }
	echo "$out" | grep -qi 'exists' || { fail "second device: unclear error '$out'"; return; }
	ktap_print_msg "second device: $out"
	rdma_dev_exists mroce9 && { fail "mroce9 exists"; return; }
	return $KSFT_PASS
}

test_delete() {
	delete_pair || { fail "rdma link del failed"; return; }
	rdma_dev_exists mroce0 && { fail "mroce0 still registered"; return; }
	rdma_dev_exists mroce1 && { fail "mroce1 still registered"; return; }
	return $KSFT_PASS
}

test_create_delete() {
	local i
	for i in $(seq 1 "$CYCLES"); do
		ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA \
			|| { fail "add #$i failed"; return; }
		rdma link del mroce0 || { fail "del #$i failed"; return; }
	done
	rdma_dev_exists mroce0 && { fail "mroce0 left behind"; return; }
	return $KSFT_PASS
}

test_netdev_removed() {
	create_pair || { fail "create failed"; return; }
	ip -n "$NSA" link del vethA   # also removes vethB
	busywait 10000 rdma_dev_gone mroce0 || { fail "mroce0 survived its netdev"; return; }
	busywait 10000 rdma_dev_gone mroce1 || { fail "mroce1 survived its netdev"; return; }
	veth_pair "$NSA" "$NSB" || { fail "veth re-create failed"; return; }
	return $KSFT_PASS
}

# rxe_pingpong: 20 RC SEND exchanges between rxe0 (NSA, 198.19.0.1) and rxe1 (NSB).
rxe_pingpong() {
	local ga gb srv out
	ga=$(gid_index "$NSA" rxe0 198.19.0.1) gb=$(gid_index "$NSB" rxe1 198.19.0.2)
	[ -n "$ga" ] && [ -n "$gb" ] || { fail "no RoCE v2 GID on rxe0/rxe1"; return; }
	ip netns exec "$NSA" timeout 30 ibv_rc_pingpong -d rxe0 -g "$ga" -p 18700 -n 20 >/tmp/rxe_pp.srv 2>&1 &
	srv=$!
	sleep 1
	out=$(ip netns exec "$NSB" timeout 30 ibv_rc_pingpong -d rxe1 -g "$gb" -p 18700 -n 20 198.19.0.1 2>&1)
	if ! wait $srv || ! echo "$out" | grep -q '20 iters in'; then
		sed 's/^/#   srv: /' /tmp/rxe_pp.srv | tail -5
		echo "$out" | sed 's/^/#   cli: /' | tail -5
		fail "ibv_rc_pingpong over rdma_rxe failed $1"
		return
	fi
	return $KSFT_PASS
}

# send_rxe_bth NS DST: a RoCE v2 UD SEND with a valid ICRC to DST:4791, to the multicast
# QPN (rdma_rxe's receive takes its device's multicast lock for it), from NS.
send_rxe_bth() {
	ip netns exec "$1" $PY - "$2" <<'PY'
import socket, struct, sys, zlib
dst = sys.argv[1]
src = socket.inet_aton({"198.18.0.1": "198.18.0.2"}.get(dst, "198.18.0.1"))
bth = struct.pack("!BBHI I", 0x64, 0, 0xffff, 0xffffff, 1)    # UD SEND_ONLY, QPN 0xffffff
deth = struct.pack("!II", 0x11111111, 2)
pay = b"\0" * 8
udp_len = 8 + len(bth) + len(deth) + len(pay) + 4
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 1, 0x4000, 64, 17, 0,
                 src, socket.inet_aton(dst))
udp = struct.pack("!HHHH", 4791, 4791, udp_len, 0)
# The ICRC as rdma_rxe checks it: TTL, TOS, both checksums and BTH resv8a masked to ones.
masked = ip[:1] + b"\xff" + ip[2:8] + b"\xff" + ip[9:10] + b"\xff\xff" + ip[12:] \
    + udp[:6] + b"\xff\xff" + bth[:4] + b"\xff" + bth[5:] + deth + pay
icrc = zlib.crc32(masked, ~0xdebb20e3 & 0xffffffff)
pkt = ip + udp + bth + deth + pay + struct.pack("<I", icrc)
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
for _ in range(4):
    s.sendto(pkt, (dst, 0))
PY
}

# rdma_rxe shares our driver id (rdma-core's rxe provider binds to it). rdma_rxe must
# not find our devices by netdev: its notifier would run rxe_net_del on ours and drop
# its UDP socket's reference (after which its devices in the namespace receive nothing),
# and its port 4791 receive would take ours for a struct rxe_dev.
test_beside_rxe() {
	modprobe rdma_rxe || return $KSFT_SKIP
	create_pair || { fail "create failed"; return; }
	ip link add vethC netns "$NSA" type veth peer name vethD netns "$NSB" || { fail "vethC"; return; }
	ip -n "$NSA" addr add 198.19.0.1/24 dev vethC && ip -n "$NSB" addr add 198.19.0.2/24 dev vethD
	ip -n "$NSA" link set vethC up && ip -n "$NSB" link set vethD up
	ip netns exec "$NSA" rdma link add rxe0 type rxe netdev vethC || { fail "rxe0"; return; }
	ip netns exec "$NSB" rdma link add rxe1 type rxe netdev vethD || { fail "rxe1"; return; }
	busywait 10000 sh -c "[ -n \"\$(ip netns exec $NSA ibv_devinfo -v -d rxe0 | grep ::ffff:198.19.0.1)\" ]" \
		|| { fail "rxe0 has no GID"; return; }
	wait_pair_gids || { fail "metaroce GIDs"; return; }
	rxe_pingpong "before anything" || return
	# A BTH to rdma_rxe's port at our netdev's address: rdma_rxe must not take it.
	send_rxe_bth "$NSB" 198.18.0.1 || { fail "sending the BTH failed"; return; }
	send_rxe_bth "$NSA" 198.18.0.2 || { fail "sending the BTH failed"; return; }
	sleep 1
	rdma_dev_exists mroce0 || { fail "mroce0 gone after the BTH"; return; }
	# Our netdevs go while a ping-pong runs over them (it then fails, as it must).
	local ga gb s c
	ga=$(gid_index "$NSA" mroce0 198.18.0.1) gb=$(gid_index "$NSB" mroce1 198.18.0.2)
	ip netns exec "$NSA" timeout 60 ibv_rc_pingpong -d mroce0 -g "$ga" -p 18701 -n 1000000 >/dev/null 2>&1 &
	s=$!
	sleep 1
	ip netns exec "$NSB" timeout 60 ibv_rc_pingpong -d mroce1 -g "$gb" -p 18701 -n 1000000 198.18.0.1 >/dev/null 2>&1 &
	c=$!
	sleep 3
	ip -n "$NSA" link del vethA   # also removes vethB
	kill $s $c 2>/dev/null; wait $s $c 2>/dev/null
	busywait 10000 rdma_dev_gone mroce0 || { fail "mroce0 survived its netdev"; return; }
	busywait 10000 rdma_dev_gone mroce1 || { fail "mroce1 survived its netdev"; return; }
	rxe_pingpong "after our netdevs were deleted" || return
	# A namespace with both kinds of device on one veth pair, deleted whole.
	local nse
	setup_ns NSE || { fail "netns"; return; }
	nse=$NSE
	ip -n "$nse" link add vethE type veth peer name vethF || { fail "vethE"; return; }
	ip -n "$nse" addr add 198.20.0.1/24 dev vethE && ip -n "$nse" addr add 198.20.0.2/24 dev vethF
	ip -n "$nse" link set vethE up && ip -n "$nse" link set vethF up
	ip netns exec "$nse" rdma link add rxe2 type rxe netdev vethE || { fail "rxe2"; return; }
	ip netns exec "$nse" rdma link add mroce2 type metaroce netdev vethF || { fail "mroce2"; return; }
	ip netns del "$nse"
	busywait 10000 rdma_dev_gone mroce2 || { fail "mroce2 survived its namespace"; return; }
	busywait 10000 rdma_dev_gone rxe2 || { fail "rxe2 survived its namespace"; return; }
	rxe_pingpong "after a namespace with both was deleted" || return
	rdma link del rxe0 && rdma link del rxe1 || { fail "rdma link del rxe"; return; }
	ip -n "$NSA" link del vethC
	veth_pair "$NSA" "$NSB" || { fail "veth re-create failed"; return; }
	return $KSFT_PASS
}

test_rmmod_with_devices() {
	create_pair || { fail "create failed"; return; }
	# Hold a user context and a PD open while the module goes away.
	local holder= ready=/tmp/metaroce-holder.$$
	rm -f "$ready"
	if $PY -c 'import pyverbs' 2>/dev/null; then
		ip netns exec "$NSA" $PY - "$ready" <<'PY' &
import sys, time
from pyverbs.device import Context
from pyverbs.pd import PD
for _ in range(100):  # the device may take a moment to appear to libibverbs
    try:
        ctx = Context(name="mroce0")
        break
    except Exception:
        time.sleep(0.1)
pd = PD(ctx)
open(sys.argv[1], "w").close()
time.sleep(60)
PY
		holder=$!
		busywait 20000 test -e "$ready" || { fail "the context holder did not start"; kill "$holder"; return; }
	fi
	timeout 60 rmmod metaroce || { fail "rmmod failed"; return; }
	if [ -n "$holder" ]; then
		kill -0 "$holder" 2>/dev/null || { fail "the context holder died before rmmod returned"; return; }
		kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
		rm -f "$ready"
	fi
	rdma_dev_exists mroce0 && { fail "mroce0 survived rmmod"; return; }
	rdma_dev_exists mroce1 && { fail "mroce1 survived rmmod"; return; }
	load_metaroce || { fail "reload failed"; return; }
	create_pair || { fail "create after reload failed"; return; }
	delete_pair || { fail "delete after reload failed"; return; }
	return $KSFT_PASS
}

# Spec [MR-SEC-9]: the module parameter max_conns bounds the connections (peer
# addresses) of a device; RTR to one more new peer fails with ENOSPC, counted.
test_max_conns() {
	[ -x $PY ] && $PY -c 'import pyverbs' 2>/dev/null || return $KSFT_SKIP
	local i rc
	rmmod metaroce || { fail "rmmod"; return; }
	insmod "$METAROCE_KO" max_conns=3 || { fail "insmod max_conns=3"; return; }
	create_pair && wait_pair_gids || { fail "create failed"; return; }
	for i in 3 4 5; do ip -n "$NSB" addr add 198.18.0.$i/24 dev vethB; done
	ip netns exec "$NSA" timeout 120 $PY "$(dirname "$0")/verbs_objects.py" max_conns mroce0 mroce1 3 2>&1 | sed 's/^/# /'
	rc=${PIPESTATUS[0]}
	ktap_print_msg "conns_refused $(counter mroce0 conns_refused), conns_open $(counter mroce0 conns_open)"
	[ "$(counter mroce0 conns_refused)" = 1 ] || rc=1
	for i in 3 4 5; do ip -n "$NSB" addr del 198.18.0.$i/24 dev vethB; done
	delete_pair
	rmmod metaroce && load_metaroce || { fail "reload"; return; }
	[ "$rc" = 0 ] || { fail "max_conns"; return; }
	return $KSFT_PASS
}

# The kernel memory of connections is charged to the memory cgroup of the process
# whose RTR created them: 4 connections (over 64 KiB each, most of it the protocol
# core's; the inbox starts small) show in its "kernel" figure, and leave it when their
# QPs are destroyed.
test_conn_memory() {
	[ -x $PY ] && $PY -c 'import pyverbs' 2>/dev/null || return $KSFT_SKIP
	local cg=/sys/fs/cgroup/metaroce-acct flag=/tmp/metaroce-acct.$$ i pid k1 k2 rc=0
	[ -f /sys/fs/cgroup/cgroup.controllers ] || mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
	grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null || return $KSFT_SKIP
	echo +memory > /sys/fs/cgroup/cgroup.subtree_control
	mkdir -p $cg || return $KSFT_SKIP
	create_pair && wait_pair_gids || { fail "create failed"; return; }
	for i in 3 4 5; do ip -n "$NSB" addr add 198.18.0.$i/24 dev vethB; done
	rm -f $flag.*
	sh -c "echo \$\$ > $cg/cgroup.procs; exec ip netns exec $NSA $PY $(dirname "$0")/verbs_objects.py conn_memory mroce0 mroce1 4 $flag" &
	pid=$!
	busywait 60000 test -e $flag.ready || rc=1
	k1=$(awk '$1 == "kernel" {print $2}' $cg/memory.stat)
	touch $flag.go
	busywait 60000 test -e $flag.done || rc=1
	sleep 1
	k2=$(awk '$1 == "kernel" {print $2}' $cg/memory.stat)
	touch $flag.exit
	wait $pid
	ktap_print_msg "cgroup kernel memory with 4 connections $k1, after their QPs went $k2 ($(((k1 - k2) / 1024)) KiB)"
	for i in 3 4 5; do ip -n "$NSB" addr del 198.18.0.$i/24 dev vethB; done
	delete_pair
	rm -f $flag.*
	rmdir $cg
	[ $rc = 0 ] || { fail "the QP holder did not run"; return; }
	[ $((k1 - k2)) -ge $((4 * 64 * 1024)) ] || { fail "under 64 KiB per connection charged to the cgroup"; return; }
	return $KSFT_PASS
}

# Spec [MR-SEC-8]: datagrams with dst_conn 0 (authenticated by the source address
# alone) are queued within the device's budget: with open_rate=100, most of 3000 OPENs
# from the peer's address to a connection still opening are dropped and counted.
test_open_budget() {
	[ -x $PY ] && $PY -c 'import pyverbs' 2>/dev/null || return $KSFT_SKIP
	local flag=/tmp/metaroce-open.$$ pid n rc=0 dir
	dir=$(dirname "$0")
	rmmod metaroce && insmod "$METAROCE_KO" open_rate=100 || { fail "insmod open_rate=100"; return; }
	create_pair && wait_pair_gids || { fail "create failed"; return; }
	rm -f $flag.*
	# A QP of mroce0 in RTR to 198.18.0.2, whose side has none: the connection opens.
	ip netns exec "$NSA" $PY "$dir/verbs_objects.py" conn_memory mroce0 mroce1 1 $flag &
	pid=$!
	busywait 60000 test -e $flag.ready || rc=1
	ip netns exec "$NSB" timeout 60 $PY "$dir/hostile_packets.py" 198.18.0.1 0 0x1234 open_flood 3000 | sed 's/^/# /'
	sleep 1
	n=$(counter mroce0 rx_open_limited)
	ktap_print_msg "3000 OPENs at open_rate=100: rx_open_limited $n, rx_no_conn $(counter mroce0 rx_no_conn)"
	touch $flag.go
	busywait 60000 test -e $flag.done
	touch $flag.exit
	wait $pid
	rm -f $flag.*
	delete_pair
	rmmod metaroce && load_metaroce || { fail "reload"; return; }
	[ $rc = 0 ] || { fail "the QP holder did not run"; return; }
	[ "$n" -ge 1000 ] || { fail "rx_open_limited $n, expected at least 1000 of 3000"; return; }
	return $KSFT_PASS
}

# The module's KUnit suites (rust/rdma's pure functions; CONFIG_KUNIT=y in the test
# kernel) run when it loads; KUnit keeps each suite's KTAP in debugfs.
test_kunit() {
	local suite=rdma_wqe_walk_sges dir=/sys/kernel/debug/kunit/rdma_wqe_walk_sges r plan cases
	rmmod metaroce && load_metaroce || { fail "reload"; return; }
	[ -r $dir/results ] || { fail "no KUnit results for $suite (CONFIG_KUNIT=y? debugfs?)"; return; }
	r=$(cat $dir/results)
	echo "$r" | sed 's/^/# /'
	# The suite's own plan, after its Subtest line (the file starts with KTAP's 1..1).
	plan=$(echo "$r" | sed -n "/# Subtest: $suite\$/,\$ s/^ *1\.\.\([0-9]*\)\$/\1/p" | head -1)
	cases=$(echo "$r" | grep '^ *ok [0-9]* ' | grep -vc " $suite\$")
	echo "$r" | grep -q 'not ok' && { fail "a KUnit case of $suite failed"; return; }
	[ -n "$plan" ] && [ "$plan" -gt 0 ] && [ "$cases" = "$plan" ] \
		|| { fail "$cases of ${plan:-?} KUnit cases passed"; return; }
	ktap_print_msg "$suite: $cases of $plan cases ok"
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 13
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_test "create devices in two namespaces and query them" test_create_query
ktap_test "user context and PDs through rdma-core's rxe provider" test_user_context_and_pd
ktap_test "port state and MTU follow the netdev" test_port_follows_netdev
ktap_test "missing netdev and second device are refused" test_bad_requests
ktap_test "rdma link del removes the devices" test_delete
ktap_test "create and delete $CYCLES times" test_create_delete
ktap_test "deleting the netdev removes the device" test_netdev_removed
ktap_test "beside rdma_rxe: rxe does not take our devices" test_beside_rxe
ktap_test "rmmod with devices and an open context" test_rmmod_with_devices
ktap_test "max_conns=3: RTR to a fourth peer address fails with ENOSPC" test_max_conns
ktap_test "connection memory is charged to the creating process's memory cgroup" test_conn_memory
ktap_test "open_rate=100: OPENs with dst_conn 0 beyond the budget are dropped" test_open_budget
ktap_test "the module's KUnit suite passes (SGE walking)" test_kunit
ktap_finished
