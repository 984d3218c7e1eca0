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

trap cleanup_devices_and_ns EXIT

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
	ip -n "$NSA" link set vethA down
	busywait 5000 sh -c '[ "$(rdma link show mroce0/1 | sed -n "s/.* state \([A-Z_]*\).*/\1/p")" = DOWN ]' \
		|| { fail "port not DOWN after link down: $(rdma link show mroce0/1)"; return; }
	ip -n "$NSA" link set vethA up
	busywait 5000 sh -c '[ "$(rdma link show mroce0/1 | sed -n "s/.* state \([A-Z_]*\).*/\1/p")" = ACTIVE ]' \
		|| { fail "port not ACTIVE after link up"; return; }
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

ktap_print_header
ktap_set_plan 8
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
ktap_test "rmmod with devices and an open context" test_rmmod_with_devices
ktap_finished
