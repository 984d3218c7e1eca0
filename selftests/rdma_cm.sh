#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma_cm on MetaRoCE devices, server in one namespace and client in the other: the
# kernel's CM sends its MADs over QP1 (the GSI QP, UD datagrams on the wire). rping
# with data validation, ucmatose (RC) and udaddy (UD), perftest over rdma_cm (-R),
# repeated connects and disconnects, and the errors an application gets when no device
# stands behind an address.
#
#   MROCE_TYPE=metaroce (default) or MROCE_TYPE=rxe runs the same on rdma_rxe.
#   CM_CYCLES=N connects and disconnects (default 30, 2-3 s each under TCG).

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest.sh"

: "${MROCE_TYPE:=metaroce}"
: "${CM_CYCLES:=30}"
IPA=198.18.0.1
IPB=198.18.0.2
TO=120
PORT=19000
LOG=$(mktemp -d /tmp/rdma_cm.XXXXXX)

cleanup() {
	ip netns exec "$NSA" pkill -x rping 2>/dev/null
	cleanup_devices_and_ns
	rm -rf "$LOG"
}
trap cleanup EXIT

setup() { setup_pair "$MROCE_TYPE"; }

# cm_pair SERVER_CMD... -- CLIENT_CMD...: starts the server in $NSA, waits until it
# listens, runs the client in $NSB; fails unless both exit 0.
cm_pair() {
	local srv rc_srv rc_cli start=$SECONDS scmd=() ccmd=() listeners
	while [ "$1" != -- ]; do scmd+=("$1"); shift; done
	shift
	ccmd=("$@")
	listeners=$(cm_listeners)
	ip netns exec "$NSA" timeout $TO "${scmd[@]}" > "$LOG/srv" 2>&1 &
	srv=$!
	await_cm_listeners_above "$listeners"
	ip netns exec "$NSB" timeout $TO "${ccmd[@]}" > "$LOG/cli" 2>&1
	rc_cli=$?
	wait $srv
	rc_srv=$?
	if [ $rc_cli -ne 0 ] || [ $rc_srv -ne 0 ]; then
		sed 's/^/#   srv: /' "$LOG/srv" | tail -15
		sed 's/^/#   cli: /' "$LOG/cli" | tail -15
		fail "${ccmd[0]}: server exit $rc_srv, client exit $rc_cli"
		return
	fi
	ktap_print_msg "${ccmd[*]}: $((SECONDS - start)) s"
	return $KSFT_PASS
}

test_rping() {
	next_port
	cm_pair rping -s -a $IPA -p $PORT -C 200 -V -S 256 -- \
		rping -c -a $IPA -p $PORT -C 200 -V -S 256 || return
	grep -qi 'mismatch\|error' "$LOG/cli" "$LOG/srv" && { fail "rping reported an error"; return; }
	return $KSFT_PASS
}

test_ucmatose() {
	next_port
	cm_pair ucmatose -b $IPA -p $PORT -c 4 -C 20 -S 1024 -- ucmatose -s $IPA -p $PORT -c 4 -C 20 -S 1024 || return
	grep -q 'test complete' "$LOG/cli" || { fail "ucmatose client did not complete"; return; }
	return $KSFT_PASS
}

# udaddy on its default port (rdma_listen refuses some explicit UDP-space ports).
test_udaddy() {
	cm_pair udaddy -b $IPA -c 2 -C 20 -S 512 -- udaddy -s $IPA -c 2 -C 20 -S 512 || return
	grep -q 'test complete' "$LOG/cli" || { fail "udaddy client did not complete"; return; }
	return $KSFT_PASS
}

# perftest over rdma_cm: -R makes it connect through rdma_cm instead of exchanging
# QP numbers over TCP.
test_perftest_cm() {
	local tool=$1; shift
	next_port
	cm_pair "$tool" -d mroce0 -R -p $PORT -F "$@" -- "$tool" -d mroce1 -R -p $PORT -F "$@" $IPA || return
	grep -Eq '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+[[:space:]]+[0-9.]+' "$LOG/cli" \
		|| { sed 's/^/#   cli: /' "$LOG/cli" | tail -10; fail "$tool -R printed no result"; return; }
	ktap_print_msg "$(grep -E '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+' "$LOG/cli" | tail -1 | tr -s ' ')"
	return $KSFT_PASS
}

# CM_CYCLES connections one after the other to a persistent rping server, each with one
# validated ping; afterwards no QP but the GSI ones is left on the devices.
test_connect_loop() {
	local i ok=0 srv qps
	next_port
	ip netns exec "$NSA" timeout 600 rping -s -P -a $IPA -p $PORT -V > "$LOG/srv" 2>&1 &
	srv=$!
	await_cm_listen $PORT
	for i in $(seq "$CM_CYCLES"); do
		ip netns exec "$NSB" timeout 30 rping -c -a $IPA -p $PORT -C 1 -V -S 64 > "$LOG/cli" 2>&1 \
			&& ok=$((ok + 1))
	done
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
	[ $ok -eq "$CM_CYCLES" ] || { sed 's/^/#   cli: /' "$LOG/cli" | tail -10; fail "$ok of $CM_CYCLES connections succeeded"; return; }
	# The server's QPs go with its process; wait for the devices to be idle.
	busywait 20000 sh -c "[ \$(rdma resource show qp 2>/dev/null | grep -c 'type RC') -eq 0 ]" \
		|| { rdma resource show qp | sed 's/^/#   /' | head; fail "RC QPs left over"; return; }
	ktap_print_msg "$CM_CYCLES connect/ping/disconnect cycles; $(rdma resource show qp | wc -l) QP(s) left (the GSI QPs)"
	return $KSFT_PASS
}

# rdma_cm on an address no RDMA device stands behind: a local address of a netdev
# without one (bind fails with ENODEV) and an address nobody answers for (address
# resolution fails). Both fail promptly, with the error rping prints.
test_no_device() {
	local start out rc
	ip -n "$NSB" link add dummy0 type dummy && ip -n "$NSB" addr add 198.19.0.1/24 dev dummy0 \
		&& ip -n "$NSB" link set dummy0 up || { fail "dummy netdev"; return; }
	start=$SECONDS
	out=$(ip netns exec "$NSB" timeout 60 rping -s -a 198.19.0.1 -C 1 2>&1)
	rc=$?
	[ $rc -ne 0 ] && [ $rc -ne 124 ] || { fail "rping -s on an address without a device: exit $rc"; return; }
	echo "$out" | grep -q 'No such device' || { echo "$out" | sed 's/^/#   /'; fail "no ENODEV"; return; }
	ktap_print_msg "bind to 198.19.0.1 (dummy0, no RDMA device): '$(echo "$out" | head -1)' in $((SECONDS - start)) s"
	start=$SECONDS
	out=$(ip netns exec "$NSB" timeout 90 rping -c -a 198.18.0.99 -C 1 2>&1)
	rc=$?
	[ $rc -ne 0 ] && [ $rc -ne 124 ] || { fail "rping -c to 198.18.0.99 (nobody): exit $rc"; return; }
	echo "$out" | grep -qi 'ADDR_ERROR\|UNREACHABLE\|error' || { echo "$out" | sed 's/^/#   /'; fail "no error printed"; return; }
	ktap_print_msg "connect to 198.18.0.99 (no host): '$(echo "$out" | grep -i 'error\|unreach' | head -1)' in $((SECONDS - start)) s"
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 8
if ! setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_print_msg "device type $MROCE_TYPE"
ktap_test "rping: 200 validated pings of 256 B" test_rping
ktap_test "ucmatose: 4 RC connections, 20 messages each" test_ucmatose
ktap_test "udaddy: 2 UD endpoints, 20 datagrams each" test_udaddy
ktap_test "ib_write_bw -R (rdma_cm)" clocked test_perftest_cm ib_write_bw -s 65536 -n 50
ktap_test "ib_send_lat -R (rdma_cm)" clocked test_perftest_cm ib_send_lat -s 64 -n 100
ktap_test "$CM_CYCLES rdma_cm connects and disconnects (rping -P server)" test_connect_loop
ktap_test "rdma_cm to addresses without a device: clear errors, no hang" test_no_device
ktap_test "rping after all of it (devices still healthy)" test_rping
ktap_finished
