#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# UD QPs through stock tools and pyverbs, server in one namespace and client in the
# other over veth: ibv_ud_pingpong, perftest ib_send_bw and ib_send_lat with -c UD, and
# the datagram rules verbs applications rely on (verbs_objects.py ud): the GRH area,
# immediate data, source QP, Q_Key filtering and the QP's own Q_Key, a receive too
# short, a send over the MTU; a datagram for an address that is not the device's.
#
#   MROCE_TYPE=metaroce (default) or MROCE_TYPE=rxe runs the tools on rdma_rxe.

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/perftest.sh"

: "${MROCE_TYPE:=metaroce}"
IPA=198.18.0.1
IPB=198.18.0.2
TO=120
PORT=18700
LOG=$(mktemp -d /tmp/ud.XXXXXX)
VO="$(dirname "$(readlink -f "$0")")/verbs_objects.py"

trap perftest_cleanup EXIT

# The port MTU on veth (1500) is 1024: UD messages are at most that.
UD_SIZES=$(for i in $(seq 1 10); do echo $((1 << i)); done)

test_ud_pingpong() {
	pair ibv_ud_pingpong -s 1000 -n 500 || return
	grep -q '500 iters in' "$LOG/cli" && grep -q '500 iters in' "$LOG/srv" \
		|| { fail "500 iterations not completed"; return; }
	ktap_print_msg "$(grep 'bytes in' "$LOG/cli")"
	return $KSFT_PASS
}

test_ud_rules() {
	[ "$MROCE_TYPE" = metaroce ] || return $KSFT_SKIP
	local qkey0
	qkey0=$(counter mroce1 ud_rx_bad_qkey)
	py_run 120 "$VO" ud mroce0 mroce1
	[ $PY_RC -eq 0 ] || { fail "verbs_objects.py ud: exit $PY_RC"; return; }
	# It sends one datagram with a wrong Q_Key, counted by reason.
	[ "$(counter mroce1 ud_rx_bad_qkey)" -gt "$qkey0" ] ||
		{ fail "ud_rx_bad_qkey did not count the wrong Q_Key"; return; }
	return $KSFT_PASS
}

# Spec [MR-UD-5]: a datagram for an address that is not the device's, routed to its
# netdev (198.18.9.2 is on lo in $NSB, routed over vethA from $NSA), is dropped.
test_ud_dst() {
	[ "$MROCE_TYPE" = metaroce ] || return $KSFT_SKIP
	local before after rc
	ip -n "$NSB" addr add 198.18.9.2/32 dev lo && ip -n "$NSA" route add 198.18.9.2/32 dev vethA \
		|| { fail "cannot add the address and route"; return; }
	before=$(counter mroce1 ud_rx_dropped)
	py_run 60 "$VO" ud_dst mroce0 mroce1
	rc=$PY_RC
	after=$(counter mroce1 ud_rx_dropped)
	ip -n "$NSA" route del 198.18.9.2/32 dev vethA; ip -n "$NSB" addr del 198.18.9.2/32 dev lo
	[ $rc -eq 0 ] || { fail "verbs_objects.py ud_dst: exit $rc"; return; }
	[ "$((after - before))" -ge 1 ] || { fail "ud_rx_dropped went from $before to $after"; return; }
	[ "$(counter mroce1 ud_rx_not_ours)" -ge 1 ] || { fail "ud_rx_not_ours did not count it"; return; }
	return $KSFT_PASS
}

ktap_print_header
ktap_set_plan 6
if ! perftest_setup; then
	ktap_print_msg "setup failed"
	exit $KSFT_FAIL
fi
ktap_print_msg "device type $MROCE_TYPE; GID index $GA on mroce0, $GB on mroce1"
ktap_test "ibv_ud_pingpong: 500 exchanges of 1000 B" test_ud_pingpong
ktap_test "ib_send_bw -c UD: 2 B .. 1 KiB (-a)" clocked pair_bw ib_send_bw -c UD -a -n 50 -F -- $UD_SIZES
ktap_test "ib_send_bw -c UD: 4 QPs, 1 KiB" clocked pair_bw ib_send_bw -c UD -q 4 -s 1024 -n 100 -F -- 1024
ktap_test "ib_send_lat -c UD: 64 B" clocked pair_lat ib_send_lat -c UD -s 64 -n 100 -F -- 64 100
ktap_test "UD rules: GRH area, immediate, source QP, Q_Key filter, short receive, over MTU" test_ud_rules
ktap_test "UD: a datagram for another address is dropped" test_ud_dst
ktap_finished
