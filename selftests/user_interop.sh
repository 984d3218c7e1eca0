#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Interop of the userspace endpoint (rust/user, metaroce-user) with the kernel
# driver: an unmodified ibv_rc_pingpong on mroce0 in $NSA, metaroce-user over a
# plain UDP socket in $NSB (no RDMA device there), in both roles, clean, at 1%
# loss and with reordering (netem on both veth ends). SENDs of 4 KiB; the
# userspace side checks every echo byte for byte. Then the userspace side as the
# requester of every opcode against a kernel RC QP (compliance/iut_verbs.py on
# mroce0), and a kernel RC QP as the requester of every opcode against the
# userspace side (kernel_requester.py), each clean, at 1% loss and with reordering.
#   MROCE_USER=path/to/metaroce-user (default: the workspace's release build)

. "$(dirname "$0")/lib.sh"

IPA=198.18.0.1
IPB=198.18.0.2
TO=240
PORT=18900
N=${USER_INTEROP_ITERS:-200}
MROCE_USER=${MROCE_USER:-$(cd "$(dirname "$0")/.." && pwd)/target/release/metaroce-user}
LOG=$(mktemp -d /tmp/user_interop.XXXXXX)

DIR="$(cd "$(dirname "$0")" && pwd)"
AGENT=

cleanup() {
	[ -n "$AGENT" ] && kill "$AGENT" 2>/dev/null && wait "$AGENT" 2>/dev/null
	cleanup_devices_and_ns
}
trap cleanup EXIT

# impair ARGS...: netem ARGS on both veth ends (none: remove).
impair() {
	tc -n "$NSA" qdisc del dev vethA root 2>/dev/null
	tc -n "$NSB" qdisc del dev vethB root 2>/dev/null
	[ $# -eq 0 ] && return 0
	tc -n "$NSA" qdisc add dev vethA root netem "$@" &&
		tc -n "$NSB" qdisc add dev vethB root netem "$@"
}

# kernel_server NETEM...: ibv_rc_pingpong server on mroce0, metaroce-user client.
kernel_server() {
	local srv rc
	PORT=$((PORT + 1))
	impair "$@" || { fail "netem $*"; return; }
	ip netns exec "$NSA" timeout $TO ibv_rc_pingpong -d mroce0 -g "$GA" -p $PORT -n "$N" \
		> "$LOG/srv" 2>&1 &
	srv=$!
	busywait 30000 listening "$NSA" $PORT || { kill $srv; fail "no pingpong server"; return; }
	ip netns exec "$NSB" timeout $TO "$MROCE_USER" pingpong --bind $IPB \
		--connect $IPA --tcp-port $PORT --iters "$N" > "$LOG/cli" 2>&1
	rc=$?
	wait $srv
	sed 's/^/# cli: /' "$LOG/cli" | tail -3
	sed 's/^/# srv: /' "$LOG/srv" | tail -3
	[ $rc -eq 0 ] || { fail "metaroce-user exit $rc"; return; }
	grep -q "$N round trips of 4096 bytes checked" "$LOG/cli" || { fail "not all echoes checked"; return; }
	return $KSFT_PASS
}

# user_server NETEM...: metaroce-user server, ibv_rc_pingpong client on mroce0.
user_server() {
	local srv rc
	PORT=$((PORT + 1))
	impair "$@" || { fail "netem $*"; return; }
	ip netns exec "$NSB" timeout $TO "$MROCE_USER" pingpong --bind $IPB --tcp-port $PORT \
		--time $TO > "$LOG/srv" 2>&1 &
	srv=$!
	busywait 30000 listening "$NSB" $PORT || { kill $srv; fail "no metaroce-user server"; return; }
	ip netns exec "$NSA" timeout $TO ibv_rc_pingpong -d mroce0 -g "$GA" -p $PORT -n "$N" $IPB \
		> "$LOG/cli" 2>&1
	rc=$?
	kill $srv 2>/dev/null
	wait $srv
	sed 's/^/# cli: /' "$LOG/cli" | tail -3
	sed 's/^/# srv: /' "$LOG/srv" | tail -3
	[ $rc -eq 0 ] || { fail "ibv_rc_pingpong exit $rc"; return; }
	grep -q "$N iters in" "$LOG/cli" || { fail "pingpong did not complete $N iterations"; return; }
	return $KSFT_PASS
}

# user_verbs NETEM...: metaroce-user check (WRITE and READ back, SEND and its echo at
# 1, 8, 1024, 1025 and 64 KiB, then FETCH_ADD and CMP_SWAP) against a kernel RC QP that
# compliance/iut_verbs.py serves on mroce0 (an unmodified pyverbs program: it tells
# the QPN, rkey and address over TCP and echoes every SEND).
user_verbs() {
	local qp rc
	impair "$@" || { fail "netem $*"; return; }
	if [ -z "$AGENT" ]; then
		ip netns exec "$NSA" python3 "$DIR/../compliance/iut_verbs.py" --dev mroce0 \
			--peer $IPB > "$LOG/agent" 2>&1 &
		AGENT=$!
		busywait 30000 listening "$NSA" 18516 || { fail "no verbs agent"; return; }
	fi
	# "QPN RKEY VA SIZE" of a fresh QP to our QPN 0x21, PSN 0 both ways.
	qp=$(ip netns exec "$NSB" python3 -c 'import socket
s = socket.create_connection(("'$IPA'", 18516), timeout=30)
s.sendall(b"new 0x21\n")
print(s.makefile().readline().strip())')
	set -- $qp
	[ $# -eq 4 ] || { fail "the agent answered '$qp'"; return; }
	ip netns exec "$NSB" timeout $TO "$MROCE_USER" check --peer $IPA --bind $IPB \
		--qpn 0x21 --peer-qpn "$1" --psn 0 --peer-psn 0 --rkey "$2" --va "$3" \
		--region "$4" --size 65536 > "$LOG/cli" 2>&1
	rc=$?
	sed 's/^/# cli: /' "$LOG/cli" | tail -12
	[ $rc -eq 0 ] || { fail "metaroce-user check exit $rc"; return; }
	[ "$(grep -c '^ok ' "$LOG/cli")" -eq 11 ] || { fail "not every check passed"; return; }
	return $KSFT_PASS
}

# kernel_verbs NETEM...: the reverse: a kernel RC QP on mroce0 (kernel_requester.py, an
# unmodified pyverbs program) WRITEs, READs back, SENDs and runs atomics against
# metaroce-user server in $NSB, every byte and original value checked.
kernel_verbs() {
	local rc
	impair "$@" || { fail "netem $*"; return; }
	ip netns exec "$NSA" timeout $TO python3 "$DIR/kernel_requester.py" mroce0 $IPB \
		ip netns exec "$NSB" "$MROCE_USER" > "$LOG/req" 2>&1
	rc=$?
	sed 's/^/# req: /' "$LOG/req" | tail -18
	[ $rc -eq 0 ] || { fail "kernel_requester.py exit $rc"; return; }
	[ "$(grep -c '^ok ' "$LOG/req")" -eq 14 ] || { fail "not every check passed"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 12
if [ ! -x "$MROCE_USER" ]; then
	ktap_print_msg "no $MROCE_USER (cargo build --release -p metaroce-user)"
	for i in $(seq 12); do ktap_result $KSFT_SKIP "user_interop $i"; done
	ktap_finished
	exit $KSFT_SKIP
fi
load_metaroce
setup_ns NSA NSB && veth_pair "$NSA" "$NSB" &&
	ip netns exec "$NSA" rdma link add mroce0 type metaroce netdev vethA &&
	busywait 10000 gid_index_of mroce0 $IPA >/dev/null ||
	{ ktap_print_msg "setup failed"; exit $KSFT_FAIL; }
GA=$(gid_index "$NSA" mroce0 $IPA)

ktap_test "kernel pingpong server, userspace client, clean" kernel_server
ktap_test "userspace server, kernel pingpong client, clean" user_server
ktap_test "kernel pingpong server, userspace client, 1% loss" kernel_server loss 1%
ktap_test "userspace server, kernel pingpong client, 1% loss" user_server loss 1%
ktap_test "kernel pingpong server, userspace client, reordering" kernel_server delay 2ms 1ms reorder 25% 50%
ktap_test "userspace server, kernel pingpong client, reordering" user_server delay 2ms 1ms reorder 25% 50%
ktap_test "userspace requester, kernel verbs QP: WRITE, READ, SEND, atomics, clean" user_verbs
ktap_test "the same at 1% loss" user_verbs loss 1%
ktap_test "the same with reordering" user_verbs delay 2ms 1ms reorder 25% 50%
ktap_test "kernel requester, userspace responder: WRITE, READ, SEND, atomics, clean" kernel_verbs
ktap_test "the same at 1% loss" kernel_verbs loss 1%
ktap_test "the same with reordering" kernel_verbs delay 2ms 1ms reorder 25% 50%
impair
ktap_print_msg "mroce0: $(rdma statistic show link mroce0/1 | tr -s ' ' | cut -c1-400)"
ktap_finished
